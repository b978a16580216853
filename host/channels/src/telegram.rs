//! Telegram Bot API: updates in (checked against `options.secretToken` through the
//! `x-telegram-bot-api-secret-token` header when the channel sets one), `sendMessage` out.
//! Options: `token` (bot token), `secretToken`.

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, json_headers,
    postback_payload, template, template_actions, with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    if let Some(secret) = ch.opt(&["secretToken", "secret"]) {
        let got = call.header(SECRET_HEADER).unwrap_or("");
        if !super::secret_eq(got, secret) {
            return Err(ChannelError::Signature(format!(
                "{SECRET_HEADER} does not match"
            )));
        }
    }
    let v = call.json()?;
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
            json!({"channelType": "telegram", "telegramSenderId": chat_id, "telegramSenderName": name, "telegramAccessToken": ch.opt(&["token"]).unwrap_or("")}),
        ),
    }]))
}

/// (kind, label, value) actions as an inline keyboard, one button per row.
fn keyboard(actions: Vec<(String, String, String)>) -> Option<Json> {
    let rows: Vec<Json> = actions
        .into_iter()
        .map(|(kind, label, value)| match kind.as_str() {
            "url" => json!([{"text": label, "url": value}]),
            _ => json!([{"text": label, "callback_data": value.chars().take(64).collect::<String>()}]),
        })
        .collect();
    (!rows.is_empty()).then(|| json!({"inline_keyboard": rows}))
}

/// The Bot API calls for one response: (method, body without `chat_id`). Every template type
/// with a Telegram equivalent uses it: photos, videos, audio, venues and locations; buttons
/// and confirms as a message with an inline keyboard, a carousel as one message per card, an
/// imagemap as its image with its actions as buttons. A LINE sticker has no Telegram
/// equivalent (Telegram stickers are files of its own sets): it is not sent.
fn calls(r: &Response) -> Vec<(&'static str, Json)> {
    let with_keyboard = |mut body: Json, actions| {
        if let Some(k) = keyboard(actions) {
            body["reply_markup"] = k;
        }
        body
    };
    let Some(t) = template::of(r) else {
        let actions = super::actions_and_quick_replies(r);
        return vec![(
            "sendMessage",
            with_keyboard(json!({"text": super::plain_text(r)}), actions),
        )];
    };
    let i = t.items;
    let url = template::str_of(i, "originalContentUrl").unwrap_or("");
    match t.kind {
        "image" => vec![("sendPhoto", json!({"photo": url}))],
        "video" => vec![("sendVideo", json!({"video": url}))],
        "audio" => {
            let mut body = json!({"audio": url});
            if let Some(ms) = i.get("duration").and_then(Json::as_f64) {
                body["duration"] = json!((ms / 1000.0).round() as i64);
            }
            vec![("sendAudio", body)]
        }
        "location" => {
            let at = (
                template::number(i, "latitude"),
                template::number(i, "longitude"),
            );
            match (template::str_of(i, "title"), template::str_of(i, "address")) {
                (Some(title), Some(address)) => vec![(
                    "sendVenue",
                    json!({"latitude": at.0, "longitude": at.1, "title": title, "address": address}),
                )],
                _ => vec![("sendLocation", json!({"latitude": at.0, "longitude": at.1}))],
            }
        }
        "sticker" => vec![],
        "imagemap" => vec![(
            "sendPhoto",
            with_keyboard(
                json!({"photo": template::imagemap_image(i), "caption": template::str_of(i, "altText").unwrap_or("")}),
                template::imagemap_actions(i),
            ),
        )],
        "carousel" => i
            .as_array()
            .into_iter()
            .flatten()
            .map(|card| {
                let text = [
                    template::str_of(card, "title"),
                    template::str_of(card, "text"),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("\n");
                let actions = template_actions(&json!({"items": card}));
                match template::str_of(card, "thumbnailImageUrl") {
                    Some(img) => (
                        "sendPhoto",
                        with_keyboard(json!({"photo": img, "caption": text}), actions),
                    ),
                    None => ("sendMessage", with_keyboard(json!({"text": text}), actions)),
                }
            })
            .collect(),
        // button, confirm, text and types of no provider: text with the actions (and the
        // quick replies) as buttons.
        _ => {
            let actions = super::actions_and_quick_replies(r);
            let text = template::describe(&t).unwrap_or_default();
            vec![("sendMessage", with_keyboard(json!({"text": text}), actions))]
        }
    }
}

/// One Bot API call per response (a carousel: one per card).
pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let token = ch.opt(&["token"]).unwrap_or("");
    let base = ch.api_url(&format!("/bot{token}"));
    responses
        .iter()
        .flat_map(calls)
        .map(|(method, mut body)| {
            body["chat_id"] = json!(user_id);
            Delivery {
                url: format!("{base}/{method}"),
                headers: json_headers(),
                body,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! One test per template type of the language: each becomes Telegram's own call where
    //! Telegram has one.
    use super::deliveries;
    use crate::template::{response, sample_deliveries};
    use crate::{ChannelInfo, Delivery};
    use serde_json::{Map, json};

    fn telegram(kind: &str) -> Vec<Delivery> {
        sample_deliveries("telegram", "https://api.telegram.org", "T", "42", kind)
    }

    fn method(d: &Delivery) -> &str {
        d.url.rsplit('/').next().unwrap()
    }

    #[test]
    fn button_is_a_message_with_an_inline_keyboard() {
        let d = telegram("button");
        assert_eq!(method(&d[0]), "sendMessage");
        assert_eq!(d[0].url, "https://api.telegram.org/botT/sendMessage");
        assert_eq!(
            d[0].body,
            json!({"chat_id": "42", "text": "T\nPick one", "reply_markup": {"inline_keyboard": [
                [{"text": "Yes", "callback_data": "{\"answer\":\"yes\"}"}],
                [{"text": "Site", "url": "https://e.x/"}]]}})
        );
    }

    #[test]
    fn carousel_is_one_message_per_card() {
        let d = telegram("carousel");
        assert_eq!(d.len(), 2);
        assert_eq!(method(&d[0]), "sendPhoto");
        assert_eq!(d[0].body["photo"], "https://e.x/m.jpg");
        assert_eq!(d[0].body["caption"], "Margherita\nTomato");
        assert_eq!(
            d[0].body["reply_markup"]["inline_keyboard"][0][0]["callback_data"],
            "{\"pizza\":\"m\"}"
        );
        assert_eq!(method(&d[1]), "sendMessage");
        assert_eq!(d[1].body["text"], "Veggie\nGreens");
    }

    #[test]
    fn image_is_send_photo() {
        let d = telegram("image");
        assert_eq!(method(&d[0]), "sendPhoto");
        assert_eq!(
            d[0].body,
            json!({"chat_id": "42", "photo": "https://e.x/big.jpg"})
        );
    }

    #[test]
    fn video_is_send_video() {
        let d = telegram("video");
        assert_eq!(method(&d[0]), "sendVideo");
        assert_eq!(d[0].body["video"], "https://e.x/v.mp4");
    }

    #[test]
    fn audio_is_send_audio_in_seconds() {
        let d = telegram("audio");
        assert_eq!(method(&d[0]), "sendAudio");
        assert_eq!(
            d[0].body,
            json!({"chat_id": "42", "audio": "https://e.x/a.m4a", "duration": 60})
        );
    }

    #[test]
    fn location_is_send_venue() {
        let d = telegram("location");
        assert_eq!(method(&d[0]), "sendVenue");
        assert_eq!(
            d[0].body,
            json!({"chat_id": "42", "latitude": -6.2, "longitude": 106.8, "title": "Office", "address": "Jl. Sudirman 1"})
        );
        let bare = deliveries(
            &ChannelInfo {
                kind: "telegram",
                url: "https://api.telegram.org",
                options: &Map::new(),
                now_ms: 0,
            },
            "42",
            &[response("location", json!({"latitude": 1, "longitude": 2}))],
        );
        assert_eq!(method(&bare[0]), "sendLocation");
    }

    #[test]
    fn sticker_has_no_telegram_equivalent_and_is_not_sent() {
        assert!(telegram("sticker").is_empty());
    }

    #[test]
    fn imagemap_is_its_image_with_its_actions_as_buttons() {
        let d = telegram("imagemap");
        assert_eq!(method(&d[0]), "sendPhoto");
        assert_eq!(d[0].body["photo"], "https://e.x/map/1040");
        assert_eq!(d[0].body["caption"], "Menu");
        assert_eq!(
            d[0].body["reply_markup"]["inline_keyboard"],
            json!([[{"text": "https://e.x/a", "url": "https://e.x/a"}], [{"text": "pizza", "callback_data": "pizza"}]])
        );
    }

    #[test]
    fn confirm_is_a_message_with_two_buttons() {
        let d = telegram("confirm");
        assert_eq!(method(&d[0]), "sendMessage");
        assert_eq!(d[0].body["text"], "Sure?");
        assert_eq!(
            d[0].body["reply_markup"]["inline_keyboard"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn text_template_is_its_text() {
        let d = telegram("text");
        assert_eq!(method(&d[0]), "sendMessage");
        assert_eq!(d[0].body["text"], "Where are you?");
    }
}
