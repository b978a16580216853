//! Webex (formerly Spark): webhooks in, signed with `options.secret`
//! (`x-spark-signature`: hex HMAC-SHA1 of the body), `POST /messages` out with the bot token.
//! Webex webhooks carry the message id, not its text: the webhook reads the text with
//! `GET <url>/messages/<id>` and the bot token (`options.token`) before it runs the message.
//! A `data.text` in the webhook (added by a relay) is used as it is.

use super::{
    Call, ChannelError, ChannelInfo, Delivery, FetchText, Inbound, InboundItem, bearer_json,
    with_metadata,
};
use hmac::{Hmac, Mac};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

/// Constant-time check of an HMAC-SHA1 (Webex signs with SHA-1).
fn verify_hmac_sha1(secret: &[u8], body: &[u8], expected: &[u8]) -> bool {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(secret).expect("any key length");
    mac.update(body);
    mac.verify_slice(expected).is_ok()
}

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    if let Some(secret) = ch.opt(&["secret"]) {
        call.check_signature(
            "x-spark-signature",
            |s| hex::decode(s).ok(),
            verify_hmac_sha1,
            secret,
            call.body,
        )?;
    }
    let v = call.json()?;
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
    let id = d.get("id").and_then(Json::as_str);
    let item = |text: &str| InboundItem {
        provider_id: id.map(str::to_owned),
        user_id: room.to_owned(),
        message: with_metadata(
            Message::text(text),
            json!({
                "channelType": "spark", "sparkSenderId": person,
                "sparkSenderEmail": d.get("personEmail").and_then(Json::as_str).unwrap_or(""),
                "sparkAccessToken": ch.opt(&["token"]).unwrap_or(""),
            }),
        ),
    };
    if let Some(text) = d.get("text").and_then(Json::as_str) {
        return Ok(Inbound::Messages(vec![item(text)]));
    }
    let (Some(id), Some(token)) = (id, ch.opt(&["token"])) else {
        return Err(ChannelError::Payload(
            "the message has no text, and without data.id and options.token it cannot be read from Webex".into(),
        ));
    };
    Ok(Inbound::FetchText {
        item: item(""),
        fetch: FetchText {
            url: ch.api_url(&format!("/messages/{id}")),
            headers: vec![("authorization".into(), format!("Bearer {token}"))],
        },
    })
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    responses
        .iter()
        .map(|r| Delivery {
            url: ch.api_url("/messages"),
            headers: bearer_json(token),
            body: json!({"roomId": user_id, "text": super::plain_text(r)}),
        })
        .collect()
}
