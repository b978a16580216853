//! Telegram Bot API: updates in (checked against `options.secretToken` through the
//! `x-telegram-bot-api-secret-token` header when the channel sets one), `sendMessage` out.
//! Options: `token` (bot token), `secretToken`.

use super::{
    ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, header, postback_payload,
    template_actions, with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};
use subtle::ConstantTimeEq;

pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

pub fn parse(
    ch: &ChannelInfo<'_>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Inbound, ChannelError> {
    if let Some(secret) = ch.opt(&["secretToken", "secret"]) {
        let got = header(headers, SECRET_HEADER).unwrap_or("");
        if !bool::from(got.as_bytes().ct_eq(secret.as_bytes())) {
            return Err(ChannelError::Signature(format!(
                "{SECRET_HEADER} does not match"
            )));
        }
    }
    let v: Json = serde_json::from_slice(body).map_err(|e| ChannelError::Payload(e.to_string()))?;
    let update_id = v.get("update_id").map(|u| u.to_string());
    let (from, chat, msg) = if let Some(m) = v.get("message").or_else(|| v.get("edited_message")) {
        let msg = if let Some(t) = m.get("text").and_then(Json::as_str) {
            Message::text(t)
        } else if let Some(loc) = m.get("location") {
            Message::data(
                json!({"type": "location", "latitude": loc.get("latitude"), "longitude": loc.get("longitude")}),
            )
        } else if m.get("photo").is_some() {
            Message::data(json!({"type": "image", "fileId": m.pointer("/photo/0/file_id")}))
        } else {
            return Ok(Inbound::Messages(vec![]));
        };
        (m.get("from").cloned(), m.get("chat").cloned(), msg)
    } else if let Some(q) = v.get("callback_query") {
        let data = q.get("data").and_then(Json::as_str).unwrap_or("");
        (
            q.get("from").cloned(),
            q.pointer("/message/chat").cloned(),
            Message::data(postback_payload(data)),
        )
    } else {
        return Ok(Inbound::Messages(vec![]));
    };
    let chat_id = chat
        .as_ref()
        .and_then(|c| c.get("id"))
        .or_else(|| from.as_ref().and_then(|f| f.get("id")))
        .map(|id| match id {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        })
        .ok_or_else(|| ChannelError::Payload("no chat id".into()))?;
    let name = from
        .as_ref()
        .map(|f| {
            [f.get("first_name"), f.get("last_name")]
                .into_iter()
                .flatten()
                .filter_map(Json::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    Ok(Inbound::Messages(vec![InboundItem {
        provider_id: update_id,
        user_id: chat_id.clone(),
        message: with_metadata(
            msg,
            json!({"channelType": "telegram", "telegramSenderId": chat_id, "telegramSenderName": name}),
        ),
    }]))
}

/// One `sendMessage` per response; template actions become an inline keyboard.
pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    let url = format!("{}/bot{token}/sendMessage", ch.url.trim_end_matches('/'));
    responses
        .iter()
        .map(|r| {
            let mut body = json!({"chat_id": user_id, "text": super::plain_text(r)});
            if let Some(p) = &r.payload {
                let buttons: Vec<Json> = template_actions(p)
                    .into_iter()
                    .map(|(kind, label, value)| match kind.as_str() {
                        "url" => json!([{"text": label, "url": value}]),
                        _ => json!([{"text": label, "callback_data": value.chars().take(64).collect::<String>()}]),
                    })
                    .collect();
                if !buttons.is_empty() {
                    body["reply_markup"] = json!({"inline_keyboard": buttons});
                }
            }
            Delivery {
                url: url.clone(),
                headers: vec![("content-type".into(), "application/json".into())],
                body,
            }
        })
        .collect()
}
