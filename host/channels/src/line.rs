//! LINE Messaging API: webhook events in (signed with the channel secret, header
//! `x-line-signature` = base64 HMAC-SHA256 of the body), push messages out.
//! Options: `secret` (channel secret), `token` (channel access token).

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, bearer_json, each,
    postback_payload, template, template_actions, verify_hmac, with_metadata,
};
use base64::Engine as _;
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    const HEADER: &str = "x-line-signature";
    let secret = ch.secret_for(&["secret", "channelSecret"], HEADER)?;
    call.check_signature(
        HEADER,
        |s| base64::engine::general_purpose::STANDARD.decode(s).ok(),
        verify_hmac,
        secret,
        call.body,
    )?;
    let v = call.json()?;
    let token = ch.opt(&["token", "channelAccessToken"]).unwrap_or("");
    let mut items = Vec::new();
    for e in each(&v, "events") {
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

/// A (kind, label, value) action as a LINE action object.
fn action((kind, label, value): (String, String, String)) -> Json {
    match kind.as_str() {
        "url" => json!({"type": "uri", "label": label, "uri": value}),
        "message" => json!({"type": "message", "label": label, "text": value}),
        _ => json!({"type": "postback", "label": label, "data": value}),
    }
}

/// `items.quickreply` as LINE's `quickReply` (postback and location actions).
fn quick_reply(items: &Json) -> Option<Json> {
    let replies: Vec<Json> = template::quick_replies(items)
        .into_iter()
        .map(|q| match q.get("type").and_then(Json::as_str) {
            Some("location") => {
                json!({"type": "action", "action": {"type": "location", "label": "Location"}})
            }
            _ => {
                let mut a = json!({"type": "action", "action": {
                    "type": "postback",
                    "label": template::str_of(q, "label").unwrap_or(""),
                    "data": template::payload_text(q.get("payload")),
                }});
                if let Some(img) = template::str_of(q, "thumbnailImageUrl") {
                    a["imageUrl"] = json!(img);
                }
                a
            }
        })
        .collect();
    (!replies.is_empty()).then(|| json!({"items": replies}))
}

/// One response as a LINE message object: every template type of the language has its LINE
/// message (buttons, carousel and confirm templates, image, video, audio, location, sticker,
/// imagemap, text with quick replies).
pub fn message(r: &Response) -> Json {
    let Some(p) = &r.payload else {
        return json!({"type": "text", "text": r.content.clone().unwrap_or_default()});
    };
    let Some(t) = template::of(r) else {
        return native_message(r, p);
    };
    let items = t.items;
    let actions = template_actions(p);
    let mut m = match t.kind {
        // A template whose only choices are quick replies (the language's example for
        // channels such as Twitter): a text with LINE's quick replies, never a buttons
        // template without actions, which LINE refuses.
        "button" | "confirm" if actions.is_empty() => {
            json!({"type": "text", "text": super::plain_text(r)})
        }
        "button" => buttons_template(items, actions),
        "confirm" => {
            let text = text_of(items);
            json!({"type": "template", "altText": text, "template": {
                "type": "confirm",
                "text": text,
                "actions": actions.into_iter().take(2).map(action).collect::<Vec<_>>(),
            }})
        }
        "carousel" => carousel_template(r, items),
        kind => media_message(kind, items)
            .unwrap_or_else(|| json!({"type": "text", "text": super::plain_text(r)})),
    };
    if let Some(q) = quick_reply(items) {
        m["quickReply"] = q;
    }
    m
}

/// A template item's `text`.
fn text_of(v: &Json) -> String {
    template::str_of(v, "text").unwrap_or("").to_owned()
}

/// A payload written by a method in LINE's own shape (image, sticker), else the text.
fn native_message(r: &Response, p: &Json) -> Json {
    match p.get("type").and_then(Json::as_str).unwrap_or("") {
        "image" => {
            let url = p.get("url").and_then(Json::as_str).unwrap_or("");
            json!({"type": "image", "originalContentUrl": url, "previewImageUrl": p.get("previewUrl").and_then(Json::as_str).unwrap_or(url)})
        }
        "sticker" => {
            json!({"type": "sticker", "packageId": template::id_text(p, "packageId"), "stickerId": template::id_text(p, "stickerId")})
        }
        _ => json!({"type": "text", "text": super::plain_text(r)}),
    }
}

/// A button template as LINE's buttons template (with its title and thumbnail).
fn buttons_template(items: &Json, actions: Vec<(String, String, String)>) -> Json {
    let text = text_of(items);
    let mut tpl = json!({
        "type": "buttons",
        "text": text,
        "actions": actions.into_iter().map(action).collect::<Vec<_>>(),
    });
    if let Some(title) = template::str_of(items, "title") {
        tpl["title"] = json!(title);
    }
    if let Some(img) = template::str_of(items, "thumbnailImageUrl") {
        tpl["thumbnailImageUrl"] = json!(img);
    }
    json!({"type": "template", "altText": text, "template": tpl})
}

/// A carousel template as LINE's carousel: one column per item, with its actions.
fn carousel_template(r: &Response, items: &Json) -> Json {
    let columns: Vec<Json> = items
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|item| {
            let wrapped = json!({"items": item});
            let mut c = json!({
                "text": text_of(item),
                "actions": template_actions(&wrapped).into_iter().map(action).collect::<Vec<_>>(),
            });
            if let Some(t) = template::str_of(item, "title") {
                c["title"] = json!(t);
            }
            if let Some(img) = template::str_of(item, "thumbnailImageUrl") {
                c["thumbnailImageUrl"] = json!(img);
            }
            c
        })
        .collect();
    // LINE takes at most 400 characters of alternative text.
    let alt: String = super::plain_text(r).chars().take(400).collect();
    json!({"type": "template", "altText": alt, "template": {"type": "carousel", "columns": columns}})
}

/// The LINE message of a media or place template (image, video, audio, location, sticker,
/// imagemap); `None` for other types.
fn media_message(kind: &str, items: &Json) -> Option<Json> {
    Some(match kind {
        "image" | "video" => {
            let url = template::str_of(items, "originalContentUrl").unwrap_or("");
            json!({"type": kind, "originalContentUrl": url,
                "previewImageUrl": template::str_of(items, "previewImageUrl").unwrap_or(url)})
        }
        "audio" => json!({"type": "audio",
            "originalContentUrl": template::str_of(items, "originalContentUrl").unwrap_or(""),
            "duration": items.get("duration").and_then(Json::as_f64).unwrap_or(60_000.0) as i64}),
        "location" => json!({"type": "location",
            "title": template::str_of(items, "title").unwrap_or("Location"),
            "address": template::str_of(items, "address").unwrap_or(""),
            "latitude": template::number(items, "latitude"),
            "longitude": template::number(items, "longitude")}),
        "sticker" => json!({"type": "sticker",
            "packageId": template::id_text(items, "packageId"),
            "stickerId": template::id_text(items, "stickerId")}),
        "imagemap" => json!({"type": "imagemap",
            "baseUrl": template::str_of(items, "baseUrl").unwrap_or(""),
            "altText": template::str_of(items, "altText").unwrap_or("imagemap"),
            "baseSize": items.get("baseSize").cloned().unwrap_or(json!({"width": 1040, "height": 1040})),
            "actions": items.get("actions").cloned().unwrap_or(json!([]))}),
        _ => return None,
    })
}

/// Push messages, at most five per call as LINE allows.
pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token", "channelAccessToken"]).unwrap_or("");
    let msgs: Vec<Json> = responses.iter().map(message).collect();
    msgs.chunks(5)
        .map(|chunk| Delivery {
            url: ch.api_url("/v2/bot/message/push"),
            headers: bearer_json(token),
            body: json!({"to": user_id, "messages": chunk}),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! One test per template type of the language: each becomes LINE's own message.
    use super::message;
    use crate::template::{TYPES, response, sample};
    use serde_json::{Value as Json, json};

    fn line(kind: &str) -> Json {
        message(&response(kind, sample(kind)))
    }

    #[test]
    fn button_is_a_buttons_template() {
        let m = line("button");
        assert_eq!(m["type"], "template");
        assert_eq!(m["altText"], "Pick one");
        assert_eq!(
            m["template"],
            json!({"type": "buttons", "title": "T", "text": "Pick one", "actions": [
                {"type": "postback", "label": "Yes", "data": "{\"answer\":\"yes\"}"},
                {"type": "uri", "label": "Site", "uri": "https://e.x/"}]})
        );
    }

    #[test]
    fn carousel_is_a_carousel_template() {
        let m = line("carousel");
        assert_eq!(m["template"]["type"], "carousel");
        let cols = m["template"]["columns"].as_array().unwrap();
        assert_eq!(cols.len(), 2);
        assert_eq!(cols[0]["title"], "Margherita");
        assert_eq!(cols[0]["thumbnailImageUrl"], "https://e.x/m.jpg");
        assert_eq!(cols[1]["actions"][0]["data"], "{\"pizza\":\"v\"}");
        assert_eq!(m["altText"], "Margherita: Tomato\nVeggie: Greens");
    }

    #[test]
    fn image_is_an_image_message() {
        assert_eq!(
            line("image"),
            json!({"type": "image", "originalContentUrl": "https://e.x/big.jpg", "previewImageUrl": "https://e.x/small.jpg"})
        );
    }

    #[test]
    fn video_is_a_video_message() {
        assert_eq!(
            line("video"),
            json!({"type": "video", "originalContentUrl": "https://e.x/v.mp4", "previewImageUrl": "https://e.x/v.jpg"})
        );
    }

    #[test]
    fn audio_is_an_audio_message() {
        assert_eq!(
            line("audio"),
            json!({"type": "audio", "originalContentUrl": "https://e.x/a.m4a", "duration": 60000})
        );
    }

    #[test]
    fn location_is_a_location_message() {
        assert_eq!(
            line("location"),
            json!({"type": "location", "title": "Office", "address": "Jl. Sudirman 1", "latitude": -6.2, "longitude": 106.8})
        );
    }

    #[test]
    fn sticker_is_a_sticker_message_with_string_ids() {
        assert_eq!(
            line("sticker"),
            json!({"type": "sticker", "packageId": "1", "stickerId": "13"})
        );
    }

    #[test]
    fn imagemap_is_an_imagemap_message() {
        let m = line("imagemap");
        assert_eq!(m["type"], "imagemap");
        assert_eq!(m["baseUrl"], "https://e.x/map");
        assert_eq!(m["altText"], "Menu");
        assert_eq!(m["baseSize"], json!({"width": 1040, "height": 520}));
        assert_eq!(m["actions"][1]["text"], "pizza");
        assert_eq!(m["actions"][0]["linkUri"], "https://e.x/a");
    }

    #[test]
    fn confirm_is_a_confirm_template() {
        let m = line("confirm");
        assert_eq!(
            m["template"],
            json!({"type": "confirm", "text": "Sure?", "actions": [
                {"type": "postback", "label": "Yes", "data": "{\"confirm\":\"yes\"}"},
                {"type": "postback", "label": "No", "data": "{\"confirm\":\"no\"}"}]})
        );
        assert_eq!(m["altText"], "Sure?");
    }

    #[test]
    fn text_template_is_text_with_quick_replies() {
        let m = line("text");
        assert_eq!(m["type"], "text");
        assert_eq!(m["text"], "Where are you?");
        assert_eq!(
            m["quickReply"]["items"],
            json!([
                {"type": "action", "action": {"type": "location", "label": "Location"}},
                {"type": "action", "action": {"type": "postback", "label": "Skip", "data": "{\"skip\":true}"}}
            ])
        );
    }

    #[test]
    fn no_template_type_is_shown_as_json() {
        for kind in TYPES {
            let m = line(kind);
            let shown = m.get("text").and_then(Json::as_str).unwrap_or("");
            assert!(!shown.contains('{'), "{kind}: {m}");
            if *kind != "text" {
                assert_ne!(
                    m["type"], "text",
                    "{kind} has a LINE message of its own: {m}"
                );
            }
        }
    }
}
