//! Slack Events API: `url_verification` answered, signed events in (`x-slack-signature:
//! v0=<hex HMAC(signing secret, "v0:<timestamp>:<body>")>`, timestamp within 5 minutes),
//! `chat.postMessage` out. Options: `token` (bot token), `secret` (signing secret).

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, verify_hmac, with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    const HEADER: &str = "x-slack-signature";
    let secret = ch.secret_for(&["secret", "signingSecret"], HEADER)?;
    let ts = call
        .header("x-slack-request-timestamp")
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| ChannelError::Signature("missing x-slack-request-timestamp".into()))?;
    let now = ch.now_ms / 1000;
    if (now - ts).abs() > 300 {
        return Err(ChannelError::Signature(
            "x-slack-request-timestamp is more than 5 minutes off".into(),
        ));
    }
    let mut base = format!("v0:{ts}:").into_bytes();
    base.extend_from_slice(call.body);
    call.check_signature(
        HEADER,
        |s| hex::decode(s.strip_prefix("v0=")?).ok(),
        verify_hmac,
        secret,
        &base,
    )?;
    let v = call.json()?;
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
            url: ch.api_url("/chat.postMessage"),
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
