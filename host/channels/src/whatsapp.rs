//! WhatsApp Business Cloud API: the `hub.challenge` verification (`options.verifyToken`),
//! signed events in (`x-hub-signature-256`, the app secret in `options.secret`), the
//! `/{phoneNumberId}/messages` API out (`options.token`, `options.phoneNumberId`). Button and
//! list replies arrive as data `{type: "postback", postback: {id, title}}`.

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, bearer_json, each,
    with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    if call.body.is_empty() {
        return super::messenger::verify_subscription(ch, call.query);
    }
    super::messenger::verify_meta_signature(ch, call)?;
    let v = call.json()?;
    let mut items = Vec::new();
    for entry in each(&v, "entry") {
        for change in each(entry, "changes") {
            let value = change.get("value").cloned().unwrap_or(Json::Null);
            let names: Vec<(String, String)> = each(&value, "contacts")
                .filter_map(|c| {
                    Some((
                        c.get("wa_id")?.as_str()?.to_owned(),
                        c.pointer("/profile/name")
                            .and_then(Json::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    ))
                })
                .collect();
            for m in each(&value, "messages") {
                let Some(from) = m.get("from").and_then(Json::as_str) else {
                    continue;
                };
                let msg = match m.get("type").and_then(Json::as_str) {
                    Some("text") => {
                        Message::text(m.pointer("/text/body").and_then(Json::as_str).unwrap_or(""))
                    }
                    Some("interactive") => {
                        let reply = m
                            .pointer("/interactive/button_reply")
                            .or_else(|| m.pointer("/interactive/list_reply"))
                            .cloned()
                            .unwrap_or(Json::Null);
                        Message::data(
                            json!({"type": "postback", "postback": {"id": reply.get("id"), "title": reply.get("title")}}),
                        )
                    }
                    Some("button") => Message::data(json!({"type": "postback", "postback": {
                        "id": m.pointer("/button/payload"), "title": m.pointer("/button/text")}})),
                    Some("location") => Message::data(json!({"type": "location",
                        "latitude": m.pointer("/location/latitude"), "longitude": m.pointer("/location/longitude")})),
                    Some(kind @ ("image" | "audio" | "video" | "document")) => {
                        Message::data(json!({
                            "type": if kind == "document" { "file" } else { kind },
                            "id": m.pointer(&format!("/{kind}/id")),
                        }))
                    }
                    _ => continue,
                };
                let name = names
                    .iter()
                    .find(|(id, _)| id == from)
                    .map(|(_, n)| n.clone())
                    .unwrap_or_default();
                items.push(InboundItem {
                    provider_id: m.get("id").and_then(Json::as_str).map(str::to_owned),
                    user_id: from.to_owned(),
                    message: with_metadata(
                        msg,
                        json!({"channelType": "whatsapp", "whatsappSenderId": from, "whatsappSenderName": name, "whatsappAccessToken": ch.opt(&["token"]).unwrap_or("")}),
                    ),
                });
            }
        }
    }
    Ok(Inbound::Messages(items))
}

/// `choices` (label, payload) as WhatsApp's own interactive message: up to 3 reply buttons,
/// else a list of up to 10 rows (WhatsApp's caps; titles cut to its lengths). `None`
/// without choices.
fn interactive(text: &str, choices: &[(String, String)]) -> Option<Json> {
    let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
    match choices.len() {
        0 => None,
        1..=3 => {
            let buttons: Vec<Json> = choices
                .iter()
                .map(|(label, value)| json!({"type": "reply", "reply": {"id": cut(value, 256), "title": cut(label, 20)}}))
                .collect();
            Some(json!({"type": "button", "body": {"text": text}, "action": {"buttons": buttons}}))
        }
        _ => {
            let rows: Vec<Json> = choices
                .iter()
                .take(10)
                .map(|(label, value)| json!({"id": cut(value, 200), "title": cut(label, 24)}))
                .collect();
            Some(json!({"type": "list", "body": {"text": text},
                "action": {"button": "Choose", "sections": [{"title": "Choose", "rows": rows}]}}))
        }
    }
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    let phone = ch.opt(&["phoneNumberId"]).unwrap_or("");
    let url = ch.api_url(&format!("/{phone}/messages"));
    responses
        .iter()
        .map(|r| {
            let text = super::plain_text(r);
            let choices: Vec<(String, String)> = super::actions_and_quick_replies(r)
                .into_iter()
                .filter(|(kind, _, _)| kind != "url")
                .map(|(_, label, value)| (label, value))
                .collect();
            let body = match interactive(&text, &choices) {
                Some(i) => json!({"messaging_product": "whatsapp", "to": user_id, "type": "interactive", "interactive": i}),
                None => json!({"messaging_product": "whatsapp", "to": user_id, "type": "text", "text": {"body": text}}),
            };
            Delivery {
                url: url.clone(),
                headers: bearer_json(token),
                body,
            }
        })
        .collect()
}
