//! Webex (formerly Spark): webhooks in, signed with `options.secret`
//! (`x-spark-signature`: hex HMAC-SHA1 of the body), `POST /messages` out with the bot token.
//! Webex webhooks carry the message id, not its text; the text is read from `data.text` when
//! a relay adds it. Fetching it from the Webex API is not done (best effort, documented).

use super::{ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, header, with_metadata};
use hmac::{Hmac, Mac};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(
    ch: &ChannelInfo<'_>,
    headers: &http::HeaderMap,
    body: &[u8],
) -> Result<Inbound, ChannelError> {
    if let Some(secret) = ch.opt(&["secret"]) {
        let sig = header(headers, "x-spark-signature")
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| ChannelError::Signature("missing x-spark-signature".into()))?;
        let mut mac =
            Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).expect("any key length");
        mac.update(body);
        if mac.verify_slice(&sig).is_err() {
            return Err(ChannelError::Signature(
                "x-spark-signature does not match".into(),
            ));
        }
    }
    let v: Json = serde_json::from_slice(body).map_err(|e| ChannelError::Payload(e.to_string()))?;
    if v.get("resource").and_then(Json::as_str) != Some("messages")
        || v.get("event").and_then(Json::as_str) != Some("created")
    {
        return Ok(Inbound::Messages(vec![]));
    }
    let d = v.get("data").cloned().unwrap_or(Json::Null);
    let (Some(room), Some(person)) = (
        d.get("roomId").and_then(Json::as_str),
        d.get("personId").and_then(Json::as_str),
    ) else {
        return Err(ChannelError::Payload(
            "data.roomId and data.personId are required".into(),
        ));
    };
    if Some(person) == ch.opt(&["botId"]) {
        return Ok(Inbound::Messages(vec![]));
    }
    let Some(text) = d.get("text").and_then(Json::as_str) else {
        return Ok(Inbound::Messages(vec![]));
    };
    Ok(Inbound::Messages(vec![InboundItem {
        provider_id: d.get("id").and_then(Json::as_str).map(str::to_owned),
        user_id: room.to_owned(),
        message: with_metadata(
            Message::text(text),
            json!({
                "channelType": "spark", "sparkSenderId": person,
                "sparkSenderEmail": d.get("personEmail").and_then(Json::as_str).unwrap_or(""),
            }),
        ),
    }]))
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    responses
        .iter()
        .map(|r| Delivery {
            url: format!("{}/messages", ch.url.trim_end_matches('/')),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("authorization".into(), format!("Bearer {token}")),
            ],
            body: json!({"roomId": user_id, "text": super::plain_text(r)}),
        })
        .collect()
}
