//! Slack Events API: `url_verification` answered, signed events in (`x-slack-signature:
//! v0=<hex HMAC(signing secret, "v0:<timestamp>:<body>")>`, timestamp within 5 minutes),
//! `chat.postMessage` out. Options: `token` (bot token), `secret` (signing secret).

use super::{
    ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, header, verify_hmac, with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(
    ch: &ChannelInfo<'_>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Inbound, ChannelError> {
    let secret = ch.opt(&["secret", "signingSecret"]).ok_or_else(|| {
        ChannelError::Signature(
            "the channel has no options.secret to check x-slack-signature".into(),
        )
    })?;
    let ts = header(headers, "x-slack-request-timestamp")
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| ChannelError::Signature("missing x-slack-request-timestamp".into()))?;
    let now = ch.now_ms / 1000;
    if (now - ts).abs() > 300 {
        return Err(ChannelError::Signature(
            "x-slack-request-timestamp is more than 5 minutes off".into(),
        ));
    }
    let sig = header(headers, "x-slack-signature")
        .and_then(|s| s.strip_prefix("v0="))
        .and_then(|h| hex::decode(h).ok())
        .ok_or_else(|| ChannelError::Signature("missing x-slack-signature".into()))?;
    let mut base = format!("v0:{ts}:").into_bytes();
    base.extend_from_slice(body);
    if !verify_hmac(secret.as_bytes(), &base, &sig) {
        return Err(ChannelError::Signature(
            "x-slack-signature does not match".into(),
        ));
    }
    let v: Json = serde_json::from_slice(body).map_err(|e| ChannelError::Payload(e.to_string()))?;
    match v.get("type").and_then(Json::as_str) {
        Some("url_verification") => Ok(Inbound::Handshake {
            content_type: "application/json",
            body: json!({"challenge": v.get("challenge")}).to_string(),
        }),
        Some("event_callback") => {
            let e = v.get("event").cloned().unwrap_or(Json::Null);
            // Ignore bots (our own replies come back as events).
            if e.get("type").and_then(Json::as_str) != Some("message") || e.get("bot_id").is_some()
            {
                return Ok(Inbound::Messages(vec![]));
            }
            let (Some(user), Some(channel)) = (
                e.get("user").and_then(Json::as_str),
                e.get("channel").and_then(Json::as_str),
            ) else {
                return Ok(Inbound::Messages(vec![]));
            };
            let token = ch.opt(&["token"]).unwrap_or("");
            Ok(Inbound::Messages(vec![InboundItem {
                provider_id: v.get("event_id").and_then(Json::as_str).map(str::to_owned),
                user_id: format!("{channel}|{user}"),
                message: with_metadata(
                    Message::text(e.get("text").and_then(Json::as_str).unwrap_or("")),
                    json!({"channelType": "slack", "slackChannelOrigin": channel, "slackSenderId": user, "slackAccessToken": token}),
                ),
            }]))
        }
        _ => Ok(Inbound::Messages(vec![])),
    }
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    let channel = user_id.split('|').next().unwrap_or(user_id);
    responses
        .iter()
        .map(|r| Delivery {
            url: format!("{}/chat.postMessage", ch.url.trim_end_matches('/')),
            headers: vec![
                (
                    "content-type".into(),
                    "application/json; charset=utf-8".into(),
                ),
                ("authorization".into(), format!("Bearer {token}")),
            ],
            body: json!({"channel": channel, "text": super::plain_text(r)}),
        })
        .collect()
}
