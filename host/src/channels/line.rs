//! LINE Messaging API: webhook events in (signed with the channel secret, header
//! `x-line-signature` = base64 HMAC-SHA256 of the body), push messages out.
//! Options: `secret` (channel secret), `token` (channel access token).

use super::{
    ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, header, postback_payload,
    template_actions, verify_hmac, with_metadata,
};
use base64::Engine as _;
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(
    ch: &ChannelInfo<'_>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Inbound, ChannelError> {
    let secret = ch.opt(&["secret", "channelSecret"]).ok_or_else(|| {
        ChannelError::Signature(
            "the channel has no options.secret to check x-line-signature".into(),
        )
    })?;
    let sig = header(headers, "x-line-signature")
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .ok_or_else(|| ChannelError::Signature("missing x-line-signature".into()))?;
    if !verify_hmac(secret.as_bytes(), body, &sig) {
        return Err(ChannelError::Signature(
            "x-line-signature does not match".into(),
        ));
    }
    let v: Json = serde_json::from_slice(body).map_err(|e| ChannelError::Payload(e.to_string()))?;
    let events = v
        .get("events")
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let token = ch.opt(&["token", "channelAccessToken"]).unwrap_or("");
    let mut items = Vec::new();
    for e in &events {
        let Some(user) = e.pointer("/source/userId").and_then(Json::as_str) else {
            continue;
        };
        let msg = match e.get("type").and_then(Json::as_str) {
            Some("message") => match e.pointer("/message/type").and_then(Json::as_str) {
                Some("text") => Message::text(
                    e.pointer("/message/text")
                        .and_then(Json::as_str)
                        .unwrap_or(""),
                ),
                Some("location") => Message::data(json!({
                    "type": "location",
                    "latitude": e.pointer("/message/latitude").cloned().unwrap_or(Json::Null),
                    "longitude": e.pointer("/message/longitude").cloned().unwrap_or(Json::Null),
                })),
                Some("sticker") => Message::data(json!({
                    "type": "sticker",
                    "packageId": e.pointer("/message/packageId").cloned().unwrap_or(Json::Null),
                    "stickerId": e.pointer("/message/stickerId").cloned().unwrap_or(Json::Null),
                })),
                Some(kind @ ("image" | "audio" | "video" | "file")) => Message::data(json!({
                    "type": kind,
                    "id": e.pointer("/message/id").cloned().unwrap_or(Json::Null),
                })),
                _ => continue,
            },
            Some("follow") => Message::data(json!({"type": "follow"})),
            Some("postback") => Message::data(postback_payload(
                e.pointer("/postback/data")
                    .and_then(Json::as_str)
                    .unwrap_or(""),
            )),
            _ => continue,
        };
        let provider_id = e
            .get("webhookEventId")
            .or_else(|| e.pointer("/message/id"))
            .and_then(Json::as_str)
            .map(str::to_owned);
        items.push(InboundItem {
            provider_id,
            user_id: user.to_owned(),
            message: with_metadata(
                msg,
                json!({
                    "channelType": "line",
                    "lineSenderId": user,
                    "lineSenderType": e.pointer("/source/type").and_then(Json::as_str).unwrap_or("user"),
                    "lineAccessToken": token,
                }),
            ),
        });
    }
    Ok(Inbound::Messages(items))
}

/// One response as a LINE message object.
pub fn message(r: &Response) -> Json {
    let Some(p) = &r.payload else {
        return json!({"type": "text", "text": r.content.clone().unwrap_or_default()});
    };
    let ptype = p.get("type").and_then(Json::as_str).unwrap_or("");
    let ttype = p.get("template_type").and_then(Json::as_str).unwrap_or("");
    let action = |(kind, label, value): (String, String, String)| match kind.as_str() {
        "url" => json!({"type": "uri", "label": label, "uri": value}),
        "message" => json!({"type": "message", "label": label, "text": value}),
        _ => json!({"type": "postback", "label": label, "data": value}),
    };
    match (ptype, ttype) {
        ("template", "button") | ("template", "buttons") => {
            let items = p.get("items").cloned().unwrap_or(Json::Null);
            let text = items
                .get("text")
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_owned();
            let mut t = json!({
                "type": "buttons",
                "text": text,
                "actions": template_actions(p).into_iter().map(action).collect::<Vec<_>>(),
            });
            if let Some(title) = items.get("title").and_then(Json::as_str) {
                t["title"] = json!(title);
            }
            if let Some(img) = items.get("thumbnailImageUrl").and_then(Json::as_str) {
                t["thumbnailImageUrl"] = json!(img);
            }
            json!({"type": "template", "altText": text, "template": t})
        }
        ("template", "carousel") => {
            let columns: Vec<Json> = p
                .get("items")
                .and_then(Json::as_array)
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|item| {
                    let wrapped = json!({"items": item});
                    let mut c = json!({
                        "text": item.get("text").and_then(Json::as_str).unwrap_or(""),
                        "actions": template_actions(&wrapped).into_iter().map(action).collect::<Vec<_>>(),
                    });
                    if let Some(t) = item.get("title").and_then(Json::as_str) {
                        c["title"] = json!(t);
                    }
                    if let Some(img) = item.get("thumbnailImageUrl").and_then(Json::as_str) {
                        c["thumbnailImageUrl"] = json!(img);
                    }
                    c
                })
                .collect();
            json!({"type": "template", "altText": "carousel", "template": {"type": "carousel", "columns": columns}})
        }
        ("image", _) => {
            let url = p.get("url").and_then(Json::as_str).unwrap_or("");
            json!({"type": "image", "originalContentUrl": url, "previewImageUrl": p.get("previewUrl").and_then(Json::as_str).unwrap_or(url)})
        }
        ("sticker", _) => {
            json!({"type": "sticker", "packageId": p.get("packageId"), "stickerId": p.get("stickerId")})
        }
        _ => json!({"type": "text", "text": super::plain_text(r)}),
    }
}

/// Push messages, at most five per call as LINE allows.
pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token", "channelAccessToken"]).unwrap_or("");
    let msgs: Vec<Json> = responses.iter().map(message).collect();
    msgs.chunks(5)
        .map(|chunk| Delivery {
            url: format!("{}/v2/bot/message/push", ch.url.trim_end_matches('/')),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("authorization".into(), format!("Bearer {token}")),
            ],
            body: json!({"to": user_id, "messages": chunk}),
        })
        .collect()
}
