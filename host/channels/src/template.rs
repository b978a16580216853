//! Reading the template responses of the bot language for the providers:
//! `{type: "template", template_type, items}`, with the types button, carousel, image, video,
//! audio, location, sticker, imagemap, confirm and text. Each provider module maps every type
//! it has a message for to that message; this module holds what they share.

use runtime_core::session::Response;
use serde_json::Value as Json;

/// The template types of the bot language, in the language's order.
pub const TYPES: &[&str] = &[
    "button", "carousel", "image", "video", "audio", "location", "sticker", "imagemap", "confirm",
    "text",
];

/// A template response: its type (`buttons` read as `button`) and its items.
pub struct Template<'a> {
    pub kind: &'a str,
    pub items: &'a Json,
}

static NULL: Json = Json::Null;

/// The template of a response, if it is one.
pub fn of(r: &Response) -> Option<Template<'_>> {
    let p = r.payload.as_ref()?;
    if p.get("type").and_then(Json::as_str) != Some("template") {
        return None;
    }
    let kind = match p.get("template_type").and_then(Json::as_str).unwrap_or("") {
        "buttons" => "button",
        other => other,
    };
    Some(Template {
        kind,
        items: p.get("items").unwrap_or(&NULL),
    })
}

/// A string field of `v` (`None` when absent, empty or not a string).
pub fn str_of<'a>(v: &'a Json, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Json::as_str).filter(|s| !s.is_empty())
}

/// A field that providers want as a string, written as a string or a number in bots
/// (`stickerId: 13` and `stickerId: '13'` both occur).
pub fn id_text(v: &Json, key: &str) -> String {
    match v.get(key) {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// A coordinate as a number (bots write `"-6.18"` as often as `-6.18`).
pub fn number(v: &Json, key: &str) -> Json {
    match v.get(key) {
        Some(n @ Json::Number(_)) => n.clone(),
        Some(Json::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Json::Number)
            .unwrap_or(Json::Null),
        _ => Json::Null,
    }
}

/// The image of an imagemap for a provider that only shows images: LINE serves an imagemap
/// as `<baseUrl>/<width>`, 1040 being the widest.
pub fn imagemap_image(items: &Json) -> String {
    format!(
        "{}/1040",
        str_of(items, "baseUrl").unwrap_or("").trim_end_matches('/')
    )
}

/// An imagemap's actions as button-like (kind, label, value) triples: `uri` → `url`, `message`
/// → `message` (labelled by its text).
pub fn imagemap_actions(items: &Json) -> Vec<(String, String, String)> {
    items
        .get("actions")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| match a.get("type").and_then(Json::as_str) {
            Some("uri") => {
                let uri = str_of(a, "linkUri")?.to_owned();
                let label = str_of(a, "label").unwrap_or(&uri).to_owned();
                Some(("url".to_owned(), label, uri))
            }
            Some("message") => {
                let text = str_of(a, "text")?.to_owned();
                Some(("message".to_owned(), text.clone(), text))
            }
            _ => None,
        })
        .collect()
}

/// A map link for a location, for providers that cannot send a pin.
pub fn map_link(items: &Json) -> String {
    let coord = |k| match number(items, k) {
        Json::Number(n) => n.to_string(),
        _ => String::new(),
    };
    format!(
        "https://maps.google.com/?q={},{}",
        coord("latitude"),
        coord("longitude")
    )
}

/// The text of a template for providers that can only show text; never the template's JSON.
/// `None` for a sticker (a LINE sticker has no text form: it is not sent).
pub fn describe(t: &Template<'_>) -> Option<String> {
    let i = t.items;
    let lines = |parts: &[Option<&str>]| {
        parts
            .iter()
            .flatten()
            .copied()
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some(match t.kind {
        "sticker" => return None,
        "image" | "video" | "audio" => str_of(i, "originalContentUrl").unwrap_or("").to_owned(),
        "location" => {
            let link = map_link(i);
            lines(&[
                str_of(i, "title"),
                str_of(i, "address"),
                Some(link.as_str()),
            ])
        }
        "imagemap" => {
            let img = imagemap_image(i);
            lines(&[str_of(i, "altText"), Some(img.as_str())])
        }
        _ => match i {
            Json::Array(cards) => cards
                .iter()
                .map(|c| match (str_of(c, "title"), str_of(c, "text")) {
                    (Some(t), Some(x)) => format!("{t}: {x}"),
                    (Some(t), None) | (None, Some(t)) => t.to_owned(),
                    (None, None) => String::new(),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            _ => lines(&[str_of(i, "title"), str_of(i, "text")]),
        },
    })
}

/// The quick replies of a template (`items.quickreply`), passed through.
pub fn quick_replies(items: &Json) -> Vec<&Json> {
    items
        .get("quickreply")
        .or_else(|| items.get("quickReply"))
        .and_then(Json::as_array)
        .map(|l| l.iter().collect())
        .unwrap_or_default()
}

/// A postback payload as the string providers carry: strings as they are, the rest as JSON
/// (read back by `postback_payload`).
pub fn payload_text(p: Option<&Json>) -> String {
    match p {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A template response for tests: `template_type` and `items`.
#[cfg(test)]
pub fn response(kind: &str, items: Json) -> Response {
    serde_json::from_value(serde_json::json!({
        "id": "r", "type": "data", "action": "a", "refId": "m", "flow": "f",
        "payload": {"type": "template", "template_type": kind, "items": items}
    }))
    .expect("a response")
}

/// What a channel of `kind` at `url`, with the token `token`, sends `user` for the sample of
/// the template type `template`.
#[cfg(test)]
pub fn sample_deliveries(
    kind: &str,
    url: &str,
    token: &str,
    user: &str,
    template: &str,
) -> Vec<crate::Delivery> {
    let options = serde_json::Map::from_iter([("token".to_owned(), serde_json::json!(token))]);
    let ch = crate::ChannelInfo {
        kind,
        url,
        options: &options,
        now_ms: 0,
    };
    crate::deliveries(&ch, user, &[response(template, sample(template))])
}

/// Items of every template type as a bot writes them, for the tests of each
/// provider.
#[cfg(test)]
pub fn sample(kind: &str) -> Json {
    use serde_json::json;
    let postback = json!({"type": "postback", "label": "Yes", "payload": {"answer": "yes"}});
    let url = json!({"type": "url", "label": "Site", "url": "https://e.x/"});
    match kind {
        "button" => json!({"title": "T", "text": "Pick one", "actions": [postback, url]}),
        "carousel" => json!([
            {"title": "Margherita", "text": "Tomato", "thumbnailImageUrl": "https://e.x/m.jpg",
             "actions": [{"type": "postback", "label": "Order", "payload": {"pizza": "m"}}]},
            {"title": "Veggie", "text": "Greens",
             "actions": [{"type": "postback", "label": "Order", "payload": {"pizza": "v"}}]}
        ]),
        "image" => {
            json!({"originalContentUrl": "https://e.x/big.jpg", "previewImageUrl": "https://e.x/small.jpg"})
        }
        "video" => {
            json!({"originalContentUrl": "https://e.x/v.mp4", "previewImageUrl": "https://e.x/v.jpg"})
        }
        "audio" => json!({"originalContentUrl": "https://e.x/a.m4a", "duration": 60000}),
        "location" => {
            json!({"title": "Office", "address": "Jl. Sudirman 1", "latitude": "-6.2", "longitude": 106.8})
        }
        "sticker" => json!({"stickerId": "13", "packageId": 1}),
        "imagemap" => {
            json!({"altText": "Menu", "baseUrl": "https://e.x/map", "baseSize": {"width": 1040, "height": 520},
            "actions": [{"type": "uri", "linkUri": "https://e.x/a", "area": {"x": 0, "y": 0, "width": 520, "height": 520}},
                        {"type": "message", "text": "pizza", "area": {"x": 520, "y": 0, "width": 520, "height": 520}}]})
        }
        "confirm" => json!({"text": "Sure?", "actions": [
            {"type": "postback", "label": "Yes", "payload": {"confirm": "yes"}},
            {"type": "postback", "label": "No", "payload": {"confirm": "no"}}]}),
        "text" => json!({"text": "Where are you?", "quickreply": [{"type": "location"},
            {"type": "text", "label": "Skip", "payload": {"skip": true}}]}),
        other => panic!("no sample for {other}"),
    }
}
