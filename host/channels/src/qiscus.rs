//! Qiscus Multichannel: `post_comment` webhooks in (a shared `options.secret` checked against
//! the `x-qiscus-secret` header when set), the SDK REST `post_comment` out.
//! Options: `appId`, `secret` (SDK secret), `senderEmail` (the bot's user). The user id of a
//! conversation is the room id; the sender is in the metadata.

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, postback_payload,
    with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    if let Some(secret) = ch.opt(&["webhookSecret", "secret"]) {
        let got = call.header("x-qiscus-secret").unwrap_or("");
        if !super::secret_eq(got, secret) {
            return Err(ChannelError::Signature(
                "x-qiscus-secret does not match".into(),
            ));
        }
    }
    let v = call.json()?;
    if v.get("type").and_then(Json::as_str) != Some("post_comment") {
        return Ok(Inbound::Messages(vec![]));
    }
    let p = v.get("payload").cloned().unwrap_or(Json::Null);
    let sender = p
        .pointer("/from/email")
        .and_then(Json::as_str)
        .unwrap_or("");
    if Some(sender) == ch.opt(&["senderEmail"]) {
        return Ok(Inbound::Messages(vec![])); // our own comment
    }
    let room = match p.pointer("/room/id") {
        Some(Json::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => return Err(ChannelError::Payload("payload.room.id is missing".into())),
    };
    let m = p.get("message").cloned().unwrap_or(Json::Null);
    let msg = match m.get("type").and_then(Json::as_str) {
        Some("button_postback_response") | Some("postback") => Message::data(postback_payload(
            m.pointer("/payload/postback_text")
                .or_else(|| m.get("text"))
                .and_then(Json::as_str)
                .unwrap_or(""),
        )),
        _ => Message::text(m.get("text").and_then(Json::as_str).unwrap_or("")),
    };
    let id = m.get("id").map(|i| i.to_string()).or_else(|| {
        m.get("unique_temp_id")
            .and_then(Json::as_str)
            .map(str::to_owned)
    });
    Ok(Inbound::Messages(vec![InboundItem {
        provider_id: id,
        user_id: room,
        message: with_metadata(
            msg,
            json!({
                "channelType": "qiscus",
                "qiscusSenderId": sender,
                "qiscusSenderName": p.pointer("/from/name").and_then(Json::as_str).unwrap_or(""),
            }),
        ),
    }]))
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let url = ch.api_url("/api/v2.1/rest/post_comment");
    responses
        .iter()
        .map(|r| {
            let buttons: Vec<Json> = r
                .payload
                .as_ref()
                .map(super::template_actions)
                .unwrap_or_default()
                .into_iter()
                .map(|(kind, label, value)| match kind.as_str() {
                    "url" => json!({"label": label, "type": "link", "payload": {"url": value}}),
                    _ => json!({"label": label, "type": "postback", "postback_text": value, "payload": {"method": "post", "payload": value}}),
                })
                .collect();
            let mut body = json!({
                "user_id": ch.opt(&["senderEmail"]).unwrap_or(""),
                "room_id": user_id,
                "message": super::plain_text(r),
                "type": "text",
            });
            if !buttons.is_empty() {
                body["type"] = json!("buttons");
                body["payload"] = json!({"text": super::plain_text(r), "buttons": buttons});
            }
            Delivery {
                url: url.clone(),
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("qiscus-sdk-app-id".into(), ch.opt(&["appId"]).unwrap_or("").into()),
                    ("qiscus-sdk-secret".into(), ch.opt(&["secret"]).unwrap_or("").into()),
                ],
                body,
            }
        })
        .collect()
}
