//! Facebook Messenger: the `hub.challenge` verification (against `options.verifyToken`),
//! signed events in (`x-hub-signature-256: sha256=<hex HMAC(appSecret, body)>`), the Send API
//! out. Options: `token` (page access token), `secret` (app secret), `verifyToken`.

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, each, json_headers,
    postback_payload, template, template_actions, verify_hmac, with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

/// Meta's webhook signature (Messenger and WhatsApp): `x-hub-signature-256: sha256=<hex
/// HMAC-SHA256(app secret, body)>`, the app secret in `options.secret` (or `appSecret`).
pub(crate) fn verify_meta_signature(
    ch: &ChannelInfo<'_>,
    call: &Call<'_>,
) -> Result<(), ChannelError> {
    const HEADER: &str = "x-hub-signature-256";
    let secret = ch.secret_for(&["secret", "appSecret"], HEADER)?;
    call.check_signature(
        HEADER,
        |s| hex::decode(s.strip_prefix("sha256=")?).ok(),
        verify_hmac,
        secret,
        call.body,
    )
}

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    if call.body.is_empty() {
        return verify_subscription(ch, call.query);
    }
    verify_meta_signature(ch, call)?;
    let v = call.json()?;
    let token = ch.opt(&["token"]).unwrap_or("");
    let mut items = Vec::new();
    for entry in each(&v, "entry") {
        for ev in each(entry, "messaging") {
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
        (Some(&"subscribe"), Some(got), Some(challenge), Some(want))
            if super::secret_eq(got, want) =>
        {
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

/// (kind, label, value) actions as Send API buttons (three at most).
fn buttons(actions: Vec<(String, String, String)>) -> Vec<Json> {
    actions
        .into_iter()
        .take(3)
        .map(|(kind, label, value)| match kind.as_str() {
            "url" => json!({"type": "web_url", "title": label, "url": value}),
            _ => json!({"type": "postback", "title": label, "payload": value}),
        })
        .collect()
}

fn attachment(kind: &str, url: &str) -> Json {
    json!({"attachment": {"type": kind, "payload": {"url": url, "is_reusable": true}}})
}

/// `items.quickreply` as Send API `quick_replies` (text and location replies).
fn quick_replies(items: &Json) -> Option<Json> {
    let replies: Vec<Json> = template::quick_replies(items)
        .into_iter()
        .map(|q| match q.get("type").and_then(Json::as_str) {
            Some("location") => json!({"content_type": "location"}),
            _ => {
                let mut r = json!({
                    "content_type": "text",
                    "title": template::str_of(q, "label").unwrap_or(""),
                    "payload": template::payload_text(q.get("payload")),
                });
                if let Some(img) = template::str_of(q, "thumbnailImageUrl") {
                    r["image_url"] = json!(img);
                }
                r
            }
        })
        .collect();
    (!replies.is_empty()).then(|| Json::Array(replies))
}

/// The Send API `message` of one response; `None` when Messenger has nothing to show for it.
/// Every template type with a Messenger equivalent uses it: button templates (button,
/// confirm), the generic template (carousel; an imagemap as one element with its image and
/// actions), image, video and audio attachments, quick replies. A location is sent as text
/// with a map link (the Send API has no location message); a LINE sticker has no Messenger
/// equivalent and is not sent.
fn message(r: &Response) -> Option<Json> {
    let Some(t) = template::of(r) else {
        let actions = r.payload.as_ref().map(template_actions).unwrap_or_default();
        return Some(if actions.is_empty() {
            json!({"text": super::plain_text(r)})
        } else {
            json!({"attachment": {"type": "template", "payload": {
                "template_type": "button", "text": super::plain_text(r), "buttons": buttons(actions)}}})
        });
    };
    let i = t.items;
    let url = template::str_of(i, "originalContentUrl").unwrap_or("");
    let element = |title: &str, subtitle: Option<&str>, image: Option<&str>, actions| {
        let mut e = json!({"title": title});
        if let Some(s) = subtitle {
            e["subtitle"] = json!(s);
        }
        if let Some(img) = image {
            e["image_url"] = json!(img);
        }
        let b = buttons(actions);
        if !b.is_empty() {
            e["buttons"] = json!(b);
        }
        e
    };
    let mut m = match t.kind {
        "image" | "video" | "audio" => attachment(t.kind, url),
        "sticker" => return None,
        "carousel" => {
            let elements: Vec<Json> = i
                .as_array()
                .into_iter()
                .flatten()
                .take(10)
                .map(|card| {
                    let (title, subtitle) = match (
                        template::str_of(card, "title"),
                        template::str_of(card, "text"),
                    ) {
                        (Some(t), x) => (t, x),
                        (None, x) => (x.unwrap_or(""), None),
                    };
                    element(
                        title,
                        subtitle,
                        template::str_of(card, "thumbnailImageUrl"),
                        template_actions(&json!({"items": card})),
                    )
                })
                .collect();
            json!({"attachment": {"type": "template", "payload": {"template_type": "generic", "elements": elements}}})
        }
        "imagemap" => {
            let img = template::imagemap_image(i);
            let el = element(
                template::str_of(i, "altText").unwrap_or("Menu"),
                None,
                Some(img.as_str()),
                template::imagemap_actions(i),
            );
            json!({"attachment": {"type": "template", "payload": {"template_type": "generic", "elements": [el]}}})
        }
        "location" => json!({"text": template::describe(&t).unwrap_or_default()}),
        _ => {
            let actions = r.payload.as_ref().map(template_actions).unwrap_or_default();
            let text = template::describe(&t).unwrap_or_default();
            if actions.is_empty() {
                json!({"text": text})
            } else {
                json!({"attachment": {"type": "template", "payload": {
                    "template_type": "button", "text": text, "buttons": buttons(actions)}}})
            }
        }
    };
    if let Some(q) = quick_replies(i) {
        m["quick_replies"] = q;
    }
    Some(m)
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    let url = ch.api_url(&format!("/me/messages?access_token={token}"));
    responses
        .iter()
        .filter_map(message)
        .map(|message| Delivery {
            url: url.clone(),
            headers: json_headers(),
            body: json!({"recipient": {"id": user_id}, "messaging_type": "RESPONSE", "message": message}),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! One test per template type of the language: each becomes the Send API's own message
    //! where Messenger has one.
    use crate::template::sample_deliveries;
    use serde_json::{Value as Json, json};

    fn fb(kind: &str) -> Option<Json> {
        let url = "https://graph.facebook.com/v19.0";
        let d = sample_deliveries("fbmessenger", url, "PT", "P1", kind);
        assert!(d.len() <= 1);
        d.into_iter().next().map(|d| {
            assert_eq!(
                d.url,
                "https://graph.facebook.com/v19.0/me/messages?access_token=PT"
            );
            assert_eq!(d.body["recipient"]["id"], "P1");
            d.body["message"].clone()
        })
    }

    #[test]
    fn button_is_a_button_template() {
        assert_eq!(
            fb("button").unwrap(),
            json!({"attachment": {"type": "template", "payload": {"template_type": "button", "text": "T\nPick one",
                "buttons": [{"type": "postback", "title": "Yes", "payload": "{\"answer\":\"yes\"}"},
                            {"type": "web_url", "title": "Site", "url": "https://e.x/"}]}}})
        );
    }

    #[test]
    fn carousel_is_a_generic_template() {
        let m = fb("carousel").unwrap();
        let p = &m["attachment"]["payload"];
        assert_eq!(p["template_type"], "generic");
        assert_eq!(
            p["elements"][0],
            json!({"title": "Margherita", "subtitle": "Tomato", "image_url": "https://e.x/m.jpg",
                "buttons": [{"type": "postback", "title": "Order", "payload": "{\"pizza\":\"m\"}"}]})
        );
        assert_eq!(p["elements"][1]["title"], "Veggie");
    }

    #[test]
    fn image_is_an_image_attachment() {
        assert_eq!(
            fb("image").unwrap(),
            json!({"attachment": {"type": "image", "payload": {"url": "https://e.x/big.jpg", "is_reusable": true}}})
        );
    }

    #[test]
    fn video_is_a_video_attachment() {
        let m = fb("video").unwrap();
        assert_eq!(m["attachment"]["type"], "video");
        assert_eq!(m["attachment"]["payload"]["url"], "https://e.x/v.mp4");
    }

    #[test]
    fn audio_is_an_audio_attachment() {
        let m = fb("audio").unwrap();
        assert_eq!(m["attachment"]["type"], "audio");
        assert_eq!(m["attachment"]["payload"]["url"], "https://e.x/a.m4a");
    }

    #[test]
    fn location_is_text_with_a_map_link() {
        assert_eq!(
            fb("location").unwrap(),
            json!({"text": "Office\nJl. Sudirman 1\nhttps://maps.google.com/?q=-6.2,106.8"})
        );
    }

    #[test]
    fn sticker_has_no_messenger_equivalent_and_is_not_sent() {
        assert_eq!(fb("sticker"), None);
    }

    #[test]
    fn imagemap_is_a_generic_element_with_its_image_and_actions() {
        let m = fb("imagemap").unwrap();
        let el = &m["attachment"]["payload"]["elements"][0];
        assert_eq!(el["title"], "Menu");
        assert_eq!(el["image_url"], "https://e.x/map/1040");
        assert_eq!(el["buttons"][0]["type"], "web_url");
        assert_eq!(
            el["buttons"][1],
            json!({"type": "postback", "title": "pizza", "payload": "pizza"})
        );
    }

    #[test]
    fn confirm_is_a_button_template_with_two_buttons() {
        let m = fb("confirm").unwrap();
        let p = &m["attachment"]["payload"];
        assert_eq!(p["template_type"], "button");
        assert_eq!(p["text"], "Sure?");
        assert_eq!(p["buttons"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn text_template_is_text_with_quick_replies() {
        assert_eq!(
            fb("text").unwrap(),
            json!({"text": "Where are you?", "quick_replies": [
                {"content_type": "location"},
                {"content_type": "text", "title": "Skip", "payload": "{\"skip\":true}"}]})
        );
    }
}
