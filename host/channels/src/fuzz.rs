//! Fuzzing every channel's payload parser and reply builder with generated provider-shaped
//! JSON and raw bytes: no input may panic (a panic in a webhook handler is a 500 for the
//! provider and a retry loop, and in a worker it ends the task).
//!
//! `cargo test -p botbox-channels --lib fuzz` runs a bounded number of cases (seconds);
//! `BOTBOX_FUZZ_CASES=100000 cargo test --release -p botbox-channels --lib fuzz` runs a long
//! campaign (docs/performance.md has the figures).

use super::{Call, ChannelInfo, Inbound, deliveries, parse};
use proptest::prelude::*;
use runtime_core::model::MsgType;
use runtime_core::session::Response;
use serde_json::{Map, Value as Json, json};

/// Field names the providers' payloads use, so generated documents reach deep into the
/// parsers instead of failing at the first missing key.
const KEYS: &[&str] = &[
    "userId",
    "messages",
    "type",
    "content",
    "payload",
    "id",
    "metadata",
    "events",
    "source",
    "message",
    "text",
    "replyToken",
    "postback",
    "data",
    "webhookEventId",
    "destination",
    "update_id",
    "from",
    "chat",
    "callback_query",
    "entry",
    "messaging",
    "sender",
    "recipient",
    "event",
    "user",
    "channel",
    "challenge",
    "object",
    "changes",
    "value",
    "contacts",
    "statuses",
    "interactive",
    "button_reply",
    "list_reply",
    "title",
    "direct_message_events",
    "message_create",
    "sender_id",
    "message_data",
    "quick_reply_response",
    "for_user_id",
    "crc_token",
    "resource",
    "personEmail",
    "personId",
    "roomId",
    "comment",
    "room",
    "payload_type",
    "is_echo",
    "follow",
    "sticker",
    "image",
    "items",
    "actions",
    "bot_id",
    "team_id",
    "event_id",
    "subtype",
    "wa_id",
    "name",
    "url",
    "mid",
    "quick_reply",
];

fn scalar() -> impl Strategy<Value = Json> {
    prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z]{0,8}".prop_map(Json::String),
        prop::sample::select(KEYS).prop_map(|k| Json::String(k.to_string())),
        ".{0,40}".prop_map(Json::String),
    ]
}

fn document() -> impl Strategy<Value = Json> {
    scalar().prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|kv| {
                Json::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

fn cases() -> u32 {
    std::env::var("BOTBOX_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// Runs `doc` through one channel kind's parser, without and with the options a real
/// channel has (secrets make the signature checks run; none lets the payload be read).
fn parse_all(kind: &str, body: &[u8], query: Option<&str>) {
    let mut with_secret = Map::new();
    for k in ["secret", "token", "verifyToken", "secretToken", "appSecret"] {
        with_secret.insert(k.into(), json!("s"));
    }
    for options in [Map::new(), with_secret] {
        let ch = ChannelInfo {
            kind,
            url: "https://provider.test",
            options: &options,
            now_ms: 0,
        };
        let mut headers = http::HeaderMap::new();
        for h in [
            "x-line-signature",
            "x-hub-signature-256",
            "x-slack-signature",
            "x-spark-signature",
            "x-twitter-webhooks-signature",
            "x-telegram-bot-api-secret-token",
        ] {
            headers.insert(h, http::HeaderValue::from_static("s"));
        }
        headers.insert(
            "x-slack-request-timestamp",
            http::HeaderValue::from_static("0"),
        );
        for hs in [http::HeaderMap::new(), headers] {
            let call = Call {
                headers: &hs,
                query,
                body,
            };
            if let Ok(Inbound::Messages(items)) = parse(&ch, &call) {
                for item in items {
                    let _ = serde_json::to_string(&item.message);
                }
            }
        }
    }
}

fn response(payload: Json, content: Option<String>) -> Response {
    Response {
        id: "r".into(),
        msg_type: if content.is_some() {
            MsgType::Text
        } else {
            MsgType::Data
        },
        content,
        payload: Some(payload),
        action: "a".into(),
        ref_id: "m".into(),
        flow: "f".into(),
        intent: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parsers_take_any_provider_shaped_json(doc in document(), query in proptest::option::of("[a-z.=&_]{0,40}")) {
        let body = serde_json::to_vec(&doc).unwrap();
        for kind in super::KINDS.iter().map(|k| k.name) {
            parse_all(kind, &body, query.as_deref());
        }
    }

    #[test]
    fn parsers_take_any_bytes(body in prop::collection::vec(any::<u8>(), 0..512)) {
        for kind in super::KINDS.iter().map(|k| k.name) {
            parse_all(kind, &body, None);
        }
    }

    #[test]
    fn replies_build_for_any_payload(payload in document(), content in proptest::option::of(".{0,60}")) {
        let options = Map::new();
        for kind in super::KINDS.iter().map(|k| k.name) {
            let ch = ChannelInfo { kind, url: "https://provider.test", options: &options, now_ms: 0 };
            let _ = deliveries(&ch, "user", &[response(payload.clone(), content.clone())]);
        }
    }
}
