//! Facebook Messenger: the `hub.challenge` verification (against `options.verifyToken`),
//! signed events in (`x-hub-signature-256: sha256=<hex HMAC(appSecret, body)>`), the Send API
//! out. Options: `token` (page access token), `secret` (app secret), `verifyToken`.

use super::{
    ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, header, postback_payload,
    template_actions, verify_hmac, with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(
    ch: &ChannelInfo<'_>,
    headers: &http::HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Result<Inbound, ChannelError> {
    if body.is_empty() {
        return verify_subscription(ch, query);
    }
    let secret = ch.opt(&["secret", "appSecret"]).ok_or_else(|| {
        ChannelError::Signature(
            "the channel has no options.secret to check x-hub-signature-256".into(),
        )
    })?;
    let sig = header(headers, "x-hub-signature-256")
        .and_then(|s| s.strip_prefix("sha256="))
        .and_then(|h| hex::decode(h).ok())
        .ok_or_else(|| ChannelError::Signature("missing x-hub-signature-256".into()))?;
    if !verify_hmac(secret.as_bytes(), body, &sig) {
        return Err(ChannelError::Signature(
            "x-hub-signature-256 does not match".into(),
        ));
    }
    let v: Json = serde_json::from_slice(body).map_err(|e| ChannelError::Payload(e.to_string()))?;
    let token = ch.opt(&["token"]).unwrap_or("");
    let mut items = Vec::new();
    for entry in v
        .get("entry")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default()
    {
        for ev in entry
            .get("messaging")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default()
        {
            let Some(sender) = ev.pointer("/sender/id").and_then(Json::as_str) else {
                continue;
            };
            let (msg, id) = if let Some(m) = ev.get("message") {
                if let Some(qr) = m.pointer("/quick_reply/payload").and_then(Json::as_str) {
                    (Message::data(postback_payload(qr)), m.get("mid"))
                } else if let Some(t) = m.get("text").and_then(Json::as_str) {
                    (Message::text(t), m.get("mid"))
                } else {
                    continue;
                }
            } else if let Some(pb) = ev.get("postback") {
                (
                    Message::data(postback_payload(
                        pb.get("payload").and_then(Json::as_str).unwrap_or(""),
                    )),
                    pb.get("mid"),
                )
            } else {
                continue;
            };
            items.push(InboundItem {
                provider_id: id.and_then(Json::as_str).map(str::to_owned),
                user_id: sender.to_owned(),
                message: with_metadata(
                    msg,
                    json!({"channelType": "fbmessenger", "fbmessengerSenderId": sender, "fbmessengerAccessToken": token}),
                ),
            });
        }
    }
    Ok(Inbound::Messages(items))
}

/// The GET verification of Meta webhooks: `hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`
/// answered with the challenge when the token is the channel's `options.verifyToken`.
pub fn verify_subscription(
    ch: &ChannelInfo<'_>,
    query: Option<&str>,
) -> Result<Inbound, ChannelError> {
    let q: std::collections::HashMap<&str, &str> = query
        .unwrap_or("")
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    let want = ch.opt(&["verifyToken"]);
    match (
        q.get("hub.mode"),
        q.get("hub.verify_token"),
        q.get("hub.challenge"),
        want,
    ) {
        (Some(&"subscribe"), Some(got), Some(challenge), Some(want)) if *got == want => {
            Ok(Inbound::Handshake {
                content_type: "text/plain",
                body: (*challenge).to_owned(),
            })
        }
        _ => Err(ChannelError::Signature(
            "hub.verify_token does not match".into(),
        )),
    }
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    let url = format!(
        "{}/me/messages?access_token={token}",
        ch.url.trim_end_matches('/')
    );
    responses
        .iter()
        .map(|r| {
            let actions = r.payload.as_ref().map(template_actions).unwrap_or_default();
            let message = if actions.is_empty() {
                json!({"text": super::plain_text(r)})
            } else {
                let buttons: Vec<Json> = actions
                    .into_iter()
                    .take(3)
                    .map(|(kind, label, value)| match kind.as_str() {
                        "url" => json!({"type": "web_url", "title": label, "url": value}),
                        _ => json!({"type": "postback", "title": label, "payload": value}),
                    })
                    .collect();
                json!({"attachment": {"type": "template", "payload": {
                    "template_type": "button", "text": super::plain_text(r), "buttons": buttons}}})
            };
            Delivery {
                url: url.clone(),
                headers: vec![("content-type".into(), "application/json".into())],
                body: json!({"recipient": {"id": user_id}, "messaging_type": "RESPONSE", "message": message}),
            }
        })
        .collect()
}
