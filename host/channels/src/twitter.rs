//! Twitter (X) Account Activity API: the CRC check (`GET ?crc_token=`, answered with the
//! HMAC of the consumer secret), signed direct-message events in
//! (`x-twitter-webhooks-signature: sha256=<base64 HMAC(consumer secret, body)>`), direct
//! messages out with quick replies instead of URL buttons.
//! Options: `secret` (consumer secret), `token` (a bearer token for the DM API: best effort,
//! the v1.1 DM endpoint wants OAuth 1.0a user context).

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, bearer_json, each,
    hmac_sha256, postback_payload, template_actions, verify_hmac, with_metadata,
};
use base64::Engine as _;
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    let secret = ch.opt(&["secret", "consumerSecret"]).ok_or_else(|| {
        ChannelError::Signature("the channel has no options.secret (consumer secret)".into())
    })?;
    let b64 = base64::engine::general_purpose::STANDARD;
    if call.body.is_empty() {
        let crc = call
            .query
            .unwrap_or("")
            .split('&')
            .find_map(|p| p.strip_prefix("crc_token="))
            .ok_or_else(|| ChannelError::Payload("crc_token is missing".into()))?;
        let token = b64.encode(hmac_sha256(secret.as_bytes(), crc.as_bytes()));
        return Ok(Inbound::Handshake {
            content_type: "application/json",
            body: json!({"response_token": format!("sha256={token}")}).to_string(),
        });
    }
    call.check_signature(
        "x-twitter-webhooks-signature",
        |s| b64.decode(s.strip_prefix("sha256=")?).ok(),
        verify_hmac,
        secret,
        call.body,
    )?;
    let v = call.json()?;
    let me = v.get("for_user_id").and_then(Json::as_str).unwrap_or("");
    let mut items = Vec::new();
    for e in each(&v, "direct_message_events") {
        let Some(sender) = e
            .pointer("/message_create/sender_id")
            .and_then(Json::as_str)
        else {
            continue;
        };
        if sender == me {
            continue; // our own replies come back as events
        }
        let data = e
            .pointer("/message_create/message_data")
            .cloned()
            .unwrap_or(Json::Null);
        let msg = match data
            .pointer("/quick_reply_response/metadata")
            .and_then(Json::as_str)
        {
            Some(meta) => Message::data(postback_payload(meta)),
            None => Message::text(data.get("text").and_then(Json::as_str).unwrap_or("")),
        };
        let name = v
            .pointer(&format!("/users/{sender}/name"))
            .and_then(Json::as_str)
            .unwrap_or("");
        items.push(InboundItem {
            provider_id: e.get("id").and_then(Json::as_str).map(str::to_owned),
            user_id: sender.to_owned(),
            message: with_metadata(msg, json!({"channelType": "twitter", "twitterSenderId": sender, "twitterSenderName": name, "twitterAccessToken": ch.opt(&["token"]).unwrap_or("")})),
        });
    }
    Ok(Inbound::Messages(items))
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    let url = ch.api_url("/1.1/direct_messages/events/new.json");
    responses
        .iter()
        .map(|r| {
            let mut data = json!({"text": super::plain_text(r)});
            let payload = r.payload.as_ref();
            let buttons = payload
                .map(template_actions)
                .unwrap_or_default()
                .into_iter()
                .map(|(kind, label, value)| match kind.as_str() {
                    // No URL buttons on Twitter: the link goes in the description.
                    "url" => json!({"label": label, "description": value, "metadata": value}),
                    _ => json!({"label": label, "metadata": value}),
                });
            // A template's quick replies (`items.quickreply`) are Twitter's own quick-reply
            // options; a location request has no option of its kind there.
            let quick = payload
                .and_then(|p| p.get("items"))
                .map(super::template::quick_replies)
                .unwrap_or_default()
                .into_iter()
                .filter(|q| q.get("type").and_then(Json::as_str) != Some("location"))
                .map(|q| {
                    json!({"label": super::template::str_of(q, "label").unwrap_or(""),
                        "metadata": super::template::payload_text(q.get("payload"))})
                });
            let options: Vec<Json> = buttons.chain(quick).take(20).collect();
            if !options.is_empty() {
                data["quick_reply"] = json!({"type": "options", "options": options});
            }
            Delivery {
                url: url.clone(),
                headers: bearer_json(token),
                body: json!({"event": {"type": "message_create", "message_create": {
                    "target": {"recipient_id": user_id}, "message_data": data}}}),
            }
        })
        .collect()
}
