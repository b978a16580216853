//! Messaging channels: a provider's native webhook payload in, the language's [`Message`]s
//! out; a step's [`Response`]s in, the provider's API calls out.
//!
//! May depend on: `runtime-core` (messages, responses) and hashing crates; must never do I/O or
//! read a clock: the caller passes the time in [`ChannelInfo::now_ms`].
//!
//! Plain functions over bytes and JSON, no I/O: the live runner (`botbox_service::live`) receives
//! the webhook, runs the steps and puts the [`Delivery`]s in the outbox.
//!
//! Exact formats: generic, line, telegram, fbmessenger, slack. Best effort, each documented in
//! its module: whatsapp (Cloud API), twitter (Account Activity API), qiscus (Multichannel),
//! spark (Webex; the text is read from the Webex API by the message id). bbm (BBM Enterprise,
//! discontinued) takes and sends the generic channel's JSON. [`KINDS`] lists them all.

pub mod generic;
pub mod line;
pub mod messenger;
pub mod qiscus;
pub mod slack;
pub mod spark;
pub mod telegram;
pub mod template;
pub mod twitter;
pub mod whatsapp;

#[cfg(test)]
mod fuzz;

use hmac::{Hmac, Mac};
use runtime_core::session::{Message, Response};
use serde_json::{Map, Value as Json};
use sha2::Sha256;

/// One inbound message, with the provider's id for it (for dedupe) when there is one.
#[derive(Debug, Clone)]
pub struct InboundItem {
    pub provider_id: Option<String>,
    pub user_id: String,
    pub message: Message,
}

/// What a webhook call amounts to. One per call, moved and never stored in bulk: the
/// size of its largest variant costs nothing worth a box.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Inbound {
    /// Messages to run, in order.
    Messages(Vec<InboundItem>),
    /// A provider handshake: answer with this status and body, run nothing.
    Handshake {
        content_type: &'static str,
        body: String,
    },
    /// One message whose text the provider did not send (Webex sends only the message's
    /// id): `fetch` reads it, then `item` runs with that text as its content.
    FetchText { item: InboundItem, fetch: FetchText },
}

/// A GET to the provider's API whose JSON answer has the message's `text`.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchText {
    pub url: String,
    pub headers: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ChannelError {
    /// The request is not signed by the provider with the channel's secret.
    #[error("bad signature: {0}")]
    Signature(String),
    #[error("unreadable payload: {0}")]
    Payload(String),
}

/// A provider API call that delivers replies.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Json,
}

/// A channel as the functions here see it.
#[derive(Debug, Clone)]
pub struct ChannelInfo<'a> {
    /// Canonical type (`line` for "the service").
    pub kind: &'a str,
    /// The provider API base (or the customer's URL for generic).
    pub url: &'a str,
    pub options: &'a Map<String, Json>,
    /// The time the call is read at, in ms since the epoch (signature windows are checked
    /// against it): the caller's clock, so that this crate never reads one.
    pub now_ms: i64,
}

impl ChannelInfo<'_> {
    pub fn opt(&self, names: &[&str]) -> Option<&str> {
        names
            .iter()
            .find_map(|n| self.options.get(*n).and_then(Json::as_str))
            .filter(|s| !s.is_empty())
    }

    /// The secret that signs the provider's calls (the first of `names` set); without one
    /// the channel cannot check `header`, and every call is refused.
    pub(crate) fn secret_for(&self, names: &[&str], header: &str) -> Result<&str, ChannelError> {
        self.opt(names).ok_or_else(|| {
            ChannelError::Signature(format!(
                "the channel has no options.secret to check {header}"
            ))
        })
    }

    /// The provider API URL of `path` (which starts with `/`) under the channel's `url`.
    pub fn api_url(&self, path: &str) -> String {
        format!("{}{path}", self.url.trim_end_matches('/'))
    }
}

/// One webhook call as the provider made it: what a channel's parser reads.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub headers: &'a http::HeaderMap,
    /// The raw query string (Meta's verification and Twitter's CRC check read it).
    pub query: Option<&'a str>,
    pub body: &'a [u8],
}

impl Call<'_> {
    /// The body as JSON.
    pub fn json(&self) -> Result<Json, ChannelError> {
        serde_json::from_slice(self.body).map_err(|e| ChannelError::Payload(e.to_string()))
    }

    /// A header's value, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        header(self.headers, name)
    }

    /// Checks the signature header `name`: `decode` reads its value as the MAC's bytes, which
    /// must be `verify`'s MAC of `signed` with `secret`.
    pub(crate) fn check_signature(
        &self,
        name: &str,
        decode: impl FnOnce(&str) -> Option<Vec<u8>>,
        verify: fn(&[u8], &[u8], &[u8]) -> bool,
        secret: &str,
        signed: &[u8],
    ) -> Result<(), ChannelError> {
        let sig = self
            .header(name)
            .and_then(decode)
            .ok_or_else(|| ChannelError::Signature(format!("missing {name}")))?;
        if !verify(secret.as_bytes(), signed, &sig) {
            return Err(ChannelError::Signature(format!("{name} does not match")));
        }
        Ok(())
    }
}

type ParseFn = fn(&ChannelInfo<'_>, &Call<'_>) -> Result<Inbound, ChannelError>;
type DeliverFn = fn(&ChannelInfo<'_>, &str, &[Response]) -> Vec<Delivery>;

/// One channel type: its name, the provider API it talks to by default, and its two
/// functions. [`KINDS`] is the only list of channel types: the project API validates
/// against it, and the receive pipeline and the outbox dispatch through it.
pub struct Kind {
    /// The canonical name (`line` for the type also written "the service").
    pub name: &'static str,
    /// The provider API base used when a channel gives no `url`.
    pub default_url: Option<&'static str>,
    parse: ParseFn,
    deliveries: DeliverFn,
}

/// Every channel type, in the project API's documented order. bbm (BBM Enterprise, discontinued)
/// takes and sends the generic channel's JSON.
pub const KINDS: &[Kind] = &[
    Kind {
        name: "generic",
        default_url: None,
        parse: generic::parse,
        deliveries: generic::deliveries,
    },
    Kind {
        name: "line",
        default_url: Some("https://api.line.me"),
        parse: line::parse,
        deliveries: line::deliveries,
    },
    Kind {
        name: "fbmessenger",
        default_url: Some("https://graph.facebook.com/v19.0"),
        parse: messenger::parse,
        deliveries: messenger::deliveries,
    },
    Kind {
        name: "telegram",
        default_url: Some("https://api.telegram.org"),
        parse: telegram::parse,
        deliveries: telegram::deliveries,
    },
    Kind {
        name: "twitter",
        default_url: Some("https://api.twitter.com"),
        parse: twitter::parse,
        deliveries: twitter::deliveries,
    },
    Kind {
        name: "slack",
        default_url: Some("https://slack.com/api"),
        parse: slack::parse,
        deliveries: slack::deliveries,
    },
    Kind {
        name: "spark",
        default_url: Some("https://webexapis.com/v1"),
        parse: spark::parse,
        deliveries: spark::deliveries,
    },
    Kind {
        name: "bbm",
        default_url: None,
        parse: generic::parse,
        deliveries: generic::deliveries,
    },
    Kind {
        name: "qiscus",
        default_url: None,
        parse: qiscus::parse,
        deliveries: qiscus::deliveries,
    },
    Kind {
        name: "whatsapp",
        default_url: Some("https://graph.facebook.com/v19.0"),
        parse: whatsapp::parse,
        deliveries: whatsapp::deliveries,
    },
];

/// The channel type `name` names. LINE is also written as a phrase ("the service"); that
/// spelling and `LINE` are accepted (and stored as given).
pub fn kind(name: &str) -> Option<&'static Kind> {
    let name = match name {
        "the service" | "LINE" | "Line" => "line",
        n => n,
    };
    KINDS.iter().find(|k| k.name == name)
}

/// The type of a stored channel: its kind, or generic for a name no longer known (a row
/// written by another version), which reads and sends plain JSON.
pub fn kind_of_stored(name: &str) -> &'static Kind {
    kind(name).unwrap_or(&KINDS[0])
}

/// Reads a webhook call.
pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    (kind_of_stored(ch.kind).parse)(ch, call)
}

/// The provider calls that deliver a step's responses to `user_id`.
pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    if responses.is_empty() {
        return vec![];
    }
    (kind_of_stored(ch.kind).deliveries)(ch, user_id, responses)
}

/// HMAC-SHA256 of `body` with `secret`.
pub fn hmac_sha256(secret: &[u8], body: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// A signature header's value `sha256=<hex HMAC-SHA256(secret, body)>` (the generic channel's
/// and Meta's form).
pub(crate) fn sha256_hex(secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac_sha256(secret, body)))
}

/// Whether a shared secret a caller presented equals the channel's, in time that does not
/// depend on where they differ (a `==` would let a caller find the secret byte by byte).
pub fn secret_eq(got: &str, want: &str) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(got.as_bytes().ct_eq(want.as_bytes()))
}

/// Constant-time check of an HMAC-SHA256.
pub fn verify_hmac(secret: &[u8], body: &[u8], expected: &[u8]) -> bool {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(body);
    mac.verify_slice(expected).is_ok()
}

pub fn header<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The elements of the array member `key` of `v`; none when it is missing or not an array.
pub(crate) fn each<'a>(v: &'a Json, key: &str) -> impl Iterator<Item = &'a Json> {
    v.get(key).and_then(Json::as_array).into_iter().flatten()
}

/// The headers of a JSON call to a provider API.
pub(crate) fn json_headers() -> Vec<(String, String)> {
    vec![("content-type".into(), "application/json".into())]
}

/// The headers of a JSON call to a provider API that takes a bearer token.
pub(crate) fn bearer_json(token: &str) -> Vec<(String, String)> {
    let mut headers = json_headers();
    headers.push(("authorization".into(), format!("Bearer {token}")));
    headers
}

/// A postback string as a payload: JSON when it parses, `k=v&k2=v2` as an object, else
/// `{value: s}` (so `payload.type == 'follow'` matches Messenger's `type=follow`).
pub fn postback_payload(s: &str) -> Json {
    if let Ok(v @ Json::Object(_)) = serde_json::from_str::<Json>(s) {
        return v;
    }
    if s.contains('=') {
        let mut m = Map::new();
        for pair in s.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            m.insert(k.to_owned(), Json::String(v.to_owned()));
        }
        return Json::Object(m);
    }
    serde_json::json!({ "value": s })
}

/// A message with `metadata` set.
pub fn with_metadata(mut m: Message, metadata: Json) -> Message {
    m.metadata = Some(metadata);
    m
}

/// The button-like actions of a template response: (kind, label, value) with kind
/// `postback` (value: JSON payload as a string), `url` or `message`.
pub fn template_actions(payload: &Json) -> Vec<(String, String, String)> {
    let items = payload.get("items");
    // A button template has one item; a carousel a list of them.
    let actions: Vec<&Json> = match items {
        Some(Json::Array(list)) => list.iter().flat_map(|i| each(i, "actions")).collect(),
        Some(i) => each(i, "actions").collect(),
        None => vec![],
    };
    actions
        .into_iter()
        .map(|a| {
            let kind = a.get("type").and_then(Json::as_str).unwrap_or("postback");
            let label = a
                .get("label")
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_owned();
            let value = match kind {
                "url" => a.get("url").and_then(Json::as_str).unwrap_or("").to_owned(),
                "message" => a
                    .get("text")
                    .and_then(Json::as_str)
                    .unwrap_or(&label)
                    .to_owned(),
                _ => a
                    .get("payload")
                    .map(|p| match p {
                        Json::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default(),
            };
            (kind.to_owned(), label, value)
        })
        .collect()
}

/// A template's quick replies (`items.quickreply`) as (kind, label, value) postback actions,
/// for providers whose own quick replies are buttons (Telegram, WhatsApp): each sends its
/// payload back as a data message. A location quick reply has no such button: it is left out.
pub fn quick_reply_actions(payload: &Json) -> Vec<(String, String, String)> {
    let Some(items) = payload.get("items") else {
        return vec![];
    };
    template::quick_replies(items)
        .into_iter()
        .filter(|q| q.get("type").and_then(Json::as_str) != Some("location"))
        .map(|q| {
            let label = template::str_of(q, "label").unwrap_or("").to_owned();
            (
                "postback".to_owned(),
                label,
                template::payload_text(q.get("payload")),
            )
        })
        .collect()
}

/// A response's buttons: its template's actions, then its quick replies.
pub fn actions_and_quick_replies(r: &Response) -> Vec<(String, String, String)> {
    let Some(p) = r.payload.as_ref() else {
        return vec![];
    };
    let mut actions = template_actions(p);
    actions.extend(quick_reply_actions(p));
    actions
}

/// The text of a response for providers that only take text: the content, or the template's
/// title and text.
pub fn plain_text(r: &Response) -> String {
    if let Some(c) = &r.content {
        return c.clone();
    }
    let p = r.payload.as_ref();
    let items = p.and_then(|p| p.get("items"));
    if let Some(Json::Array(list)) = items {
        let str_of = |i: &Json, k: &str| i.get(k).and_then(Json::as_str).map(str::to_owned);
        return list
            .iter()
            .map(|i| match (str_of(i, "title"), str_of(i, "text")) {
                (Some(t), Some(x)) => format!("{t}: {x}"),
                (Some(t), None) | (None, Some(t)) => t,
                (None, None) => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    let field = |k: &str| {
        items
            .and_then(|i| i.get(k))
            .and_then(Json::as_str)
            .map(str::to_owned)
    };
    match (field("title"), field("text")) {
        (Some(t), Some(x)) => format!("{t}\n{x}"),
        (Some(t), None) | (None, Some(t)) => t,
        // A template without title or text (image, sticker, location, …) is described, never
        // shown as JSON; another payload (a method's own data) has no other text form.
        (None, None) => match template::of(r) {
            Some(t) => template::describe(&t).unwrap_or_default(),
            None => p.map(|p| p.to_string()).unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    /// The clock of these tests: any fixed time.
    const NOW_MS: i64 = 1_700_000_000_000;
    use super::*;

    #[test]
    fn postbacks_become_objects() {
        assert_eq!(
            postback_payload("type=follow"),
            serde_json::json!({"type": "follow"})
        );
        assert_eq!(
            postback_payload("a=1&b=x"),
            serde_json::json!({"a": "1", "b": "x"})
        );
        assert_eq!(
            postback_payload(r#"{"k":"v"}"#),
            serde_json::json!({"k": "v"})
        );
        assert_eq!(
            postback_payload("plain"),
            serde_json::json!({"value": "plain"})
        );
    }

    fn info<'a>(kind: &'a str, options: &'a Map<String, Json>) -> ChannelInfo<'a> {
        ChannelInfo {
            kind,
            url: "http://provider",
            options,
            now_ms: NOW_MS,
        }
    }

    fn opts(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    /// Parses one webhook call, with the headers `pairs`, to a channel of `kind` with `options`.
    fn receive(
        kind: &str,
        options: &Map<String, Json>,
        pairs: &[(&'static str, String)],
        query: Option<&str>,
        body: &[u8],
    ) -> Result<Inbound, ChannelError> {
        let mut headers = http::HeaderMap::new();
        for (k, v) in pairs {
            headers.insert(*k, v.parse().unwrap());
        }
        let call = Call {
            headers: &headers,
            query,
            body,
        };
        parse(&info(kind, options), &call)
    }

    /// The metadata field `key` of an inbound item.
    fn meta<'a>(item: &'a InboundItem, key: &str) -> &'a Json {
        &item.message.metadata.as_ref().unwrap()[key]
    }

    fn messages(i: Inbound) -> Vec<InboundItem> {
        match i {
            Inbound::Messages(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn line_follow_is_a_follow_data_message() {
        use base64::Engine as _;
        let o = opts(serde_json::json!({"secret": "s", "token": "T"}));
        let body = br#"{"events":[{"type":"follow","webhookEventId":"e1","source":{"type":"user","userId":"U1"}}]}"#;
        let sig = base64::engine::general_purpose::STANDARD.encode(hmac_sha256(b"s", body));
        let m = messages(receive("line", &o, &[("x-line-signature", sig)], None, body).unwrap());
        assert_eq!(
            m[0].message.payload,
            Some(serde_json::json!({"type": "follow"}))
        );
        assert_eq!(
            m[0].message.metadata,
            Some(
                serde_json::json!({"channelType": "line", "lineSenderId": "U1", "lineSenderType": "user", "lineAccessToken": "T"})
            )
        );
        // A LINE channel without a secret cannot be verified: refused.
        let none = Map::new();
        assert!(matches!(
            receive("line", &none, &[], None, body),
            Err(ChannelError::Signature(_))
        ));
    }

    #[test]
    fn telegram_start_is_text() {
        // The provider's token rides in the metadata, as LINE's and Messenger's do, so a
        // bot can look the sender's profile up with it.
        let o = opts(serde_json::json!({"token": "BOT"}));
        let body = br#"{"update_id":9,"message":{"message_id":1,"from":{"id":5,"first_name":"Budi","last_name":"S"},"chat":{"id":5},"text":"/start"}}"#;
        let m = messages(receive("telegram", &o, &[], None, body).unwrap());
        assert_eq!(m[0].message.content.as_deref(), Some("/start"));
        assert_eq!(m[0].provider_id.as_deref(), Some("9"));
        assert_eq!(meta(&m[0], "telegramSenderName"), "Budi S");
        assert_eq!(meta(&m[0], "telegramAccessToken"), "BOT");
    }

    #[test]
    fn messenger_verification_and_signed_postbacks() {
        let o = opts(serde_json::json!({"verifyToken": "vt", "secret": "app", "token": "PT"}));
        let verify = Some("hub.mode=subscribe&hub.verify_token=vt&hub.challenge=42");
        let ok = receive("fbmessenger", &o, &[], verify, b"").unwrap();
        assert!(matches!(ok, Inbound::Handshake { body, .. } if body == "42"));
        let wrong = Some("hub.mode=subscribe&hub.verify_token=no&hub.challenge=42");
        assert!(receive("fbmessenger", &o, &[], wrong, b"").is_err());
        let body = br#"{"object":"page","entry":[{"messaging":[{"sender":{"id":"P1"},"postback":{"payload":"type=follow","mid":"m1"}}]}]}"#;
        let signed = [("x-hub-signature-256", sha256_hex(b"app", body))];
        let m = messages(receive("fbmessenger", &o, &signed, None, body).unwrap());
        assert_eq!(
            m[0].message.payload,
            Some(serde_json::json!({"type": "follow"}))
        );
        assert_eq!(meta(&m[0], "fbmessengerSenderId"), "P1");
        let forged = [("x-hub-signature-256", sha256_hex(b"other", body))];
        assert!(receive("fbmessenger", &o, &forged, None, body).is_err());
    }

    #[test]
    fn slack_url_verification_and_signature_window() {
        let o = opts(serde_json::json!({"secret": "ss", "token": "xoxb"}));
        let body = br#"{"type":"url_verification","challenge":"abc"}"#;
        let now = NOW_MS / 1000;
        let sign = |ts: i64| {
            let mut base = format!("v0:{ts}:").into_bytes();
            base.extend_from_slice(body);
            format!("v0={}", hex::encode(hmac_sha256(b"ss", &base)))
        };
        let h = [
            ("x-slack-request-timestamp", now.to_string()),
            ("x-slack-signature", sign(now)),
        ];
        let ok = receive("slack", &o, &h, None, body).unwrap();
        assert!(matches!(ok, Inbound::Handshake { body, .. } if body == r#"{"challenge":"abc"}"#));
        // A replayed request from ten minutes ago is refused even with a valid signature.
        let old = now - 600;
        let h = [
            ("x-slack-request-timestamp", old.to_string()),
            ("x-slack-signature", sign(old)),
        ];
        assert!(receive("slack", &o, &h, None, body).is_err());
    }

    #[test]
    fn generic_signature_when_a_secret_is_set() {
        let o = opts(serde_json::json!({"secret": "g"}));
        let body = br#"{"userId":"u","messages":[{"type":"text","content":"hi"}]}"#;
        assert!(receive("generic", &o, &[], None, body).is_err());
        let signed = [("x-botbox-signature", sha256_hex(b"g", body))];
        let m = messages(receive("generic", &o, &signed, None, body).unwrap());
        assert_eq!(
            m[0].message.metadata,
            Some(serde_json::json!({"channelType": "generic"}))
        );
    }

    #[test]
    fn a_bbm_message_says_its_channel_type_as_every_channel_does() {
        let body = br#"{"userId":"u","metadata":{"channelType":"line"},"messages":[{"type":"text","content":"hi"}]}"#;
        let m = messages(receive("bbm", &opts(serde_json::json!({})), &[], None, body).unwrap());
        assert_eq!(meta(&m[0], "channelType"), "bbm");
        let m =
            messages(receive("generic", &opts(serde_json::json!({})), &[], None, body).unwrap());
        assert_eq!(meta(&m[0], "channelType"), "generic");
    }

    #[test]
    fn whatsapp_text_and_button_replies() {
        let o = opts(
            serde_json::json!({"secret": "app", "token": "T", "phoneNumberId": "PN", "verifyToken": "vt"}),
        );
        let verify = Some("hub.mode=subscribe&hub.verify_token=vt&hub.challenge=9");
        let ok = receive("whatsapp", &o, &[], verify, b"").unwrap();
        assert!(matches!(ok, Inbound::Handshake { body, .. } if body == "9"));
        let body = br#"{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{
            "contacts":[{"profile":{"name":"Budi"},"wa_id":"628"}],
            "messages":[{"from":"628","id":"w1","type":"text","text":{"body":"hi"}},
                        {"from":"628","id":"w2","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"yes","title":"Yes"}}}]}}]}]}"#;
        let signed = [("x-hub-signature-256", sha256_hex(b"app", body))];
        let m = messages(receive("whatsapp", &o, &signed, None, body).unwrap());
        assert_eq!(m[0].message.content.as_deref(), Some("hi"));
        assert_eq!(meta(&m[0], "whatsappSenderName"), "Budi");
        // The provider's token rides in the metadata, as for every channel that has one.
        assert_eq!(meta(&m[0], "whatsappAccessToken"), "T");
        assert_eq!(
            m[1].message.payload,
            Some(
                serde_json::json!({"type": "postback", "postback": {"id": "yes", "title": "Yes"}})
            )
        );
        assert_eq!(m[1].provider_id.as_deref(), Some("w2"));
        assert!(receive("whatsapp", &o, &[], None, body).is_err());
    }

    #[test]
    fn twitter_crc_and_signed_dms() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let o = opts(serde_json::json!({"secret": "cs", "token": "TW"}));
        let crc = receive("twitter", &o, &[], Some("crc_token=abc"), b"").unwrap();
        let want = format!("sha256={}", b64.encode(hmac_sha256(b"cs", b"abc")));
        assert!(matches!(crc, Inbound::Handshake { body, .. } if body.contains(&want)));
        let body = br#"{"for_user_id":"bot","direct_message_events":[
            {"type":"message_create","id":"d1","message_create":{"sender_id":"u1","message_data":{"text":"hi"}}},
            {"type":"message_create","id":"d2","message_create":{"sender_id":"bot","message_data":{"text":"echo"}}}],
            "users":{"u1":{"name":"Budi"}}}"#;
        let sig = format!("sha256={}", b64.encode(hmac_sha256(b"cs", body)));
        let signed = [("x-twitter-webhooks-signature", sig)];
        let m = messages(receive("twitter", &o, &signed, None, body).unwrap());
        assert_eq!(m.len(), 1, "the bot's own message is ignored");
        assert_eq!(m[0].user_id, "u1");
        assert_eq!(meta(&m[0], "twitterSenderName"), "Budi");
        assert_eq!(meta(&m[0], "twitterAccessToken"), "TW");
    }

    #[test]
    fn qiscus_and_spark_inbound() {
        let o = opts(serde_json::json!({"webhookSecret": "q", "senderEmail": "bot@x"}));
        let body = br#"{"type":"post_comment","payload":{"from":{"email":"budi@x","name":"Budi"},"room":{"id":77},"message":{"id":5,"type":"text","text":"hi"}}}"#;
        let right = [("x-qiscus-secret", "q".into())];
        let m = messages(receive("qiscus", &o, &right, None, body).unwrap());
        assert_eq!(
            (m[0].user_id.as_str(), m[0].message.content.as_deref()),
            ("77", Some("hi"))
        );
        assert_eq!(meta(&m[0], "qiscusSenderName"), "Budi");
        let wrong = [("x-qiscus-secret", "no".into())];
        assert!(receive("qiscus", &o, &wrong, None, body).is_err());

        let o = opts(serde_json::json!({"secret": "sp", "token": "SPT"}));
        let body = br#"{"resource":"messages","event":"created","data":{"id":"m1","roomId":"R","personId":"P","personEmail":"p@x","text":"hi"}}"#;
        let mut mac = <Hmac<sha1::Sha1> as Mac>::new_from_slice(b"sp").unwrap();
        mac.update(body);
        let sig = hex::encode(mac.finalize().into_bytes());
        let m = messages(receive("spark", &o, &[("x-spark-signature", sig)], None, body).unwrap());
        assert_eq!(
            (m[0].user_id.as_str(), m[0].message.content.as_deref()),
            ("R", Some("hi"))
        );
        // A real Webex webhook has no text: the webhook must read it with the bot token.
        let o = opts(serde_json::json!({"token": "BT"}));
        let body = br#"{"resource":"messages","event":"created","data":{"id":"m2","roomId":"R","personId":"P"}}"#;
        match receive("spark", &o, &[], None, body).unwrap() {
            Inbound::FetchText { item, fetch } => {
                assert_eq!(item.user_id, "R");
                assert_eq!(item.provider_id.as_deref(), Some("m2"));
                assert_eq!(meta(&item, "sparkAccessToken"), "BT");
                assert_eq!(fetch.url, "http://provider/messages/m2");
                assert_eq!(
                    fetch.headers,
                    [("authorization".to_string(), "Bearer BT".to_string())]
                );
            }
            other => panic!("expected a fetch, got {other:?}"),
        }
        let no_token = opts(serde_json::json!({}));
        assert!(matches!(
            receive("spark", &no_token, &[], None, body),
            Err(ChannelError::Payload(_))
        ));
    }

    #[test]
    fn provider_formats_out() {
        use runtime_core::session::Response;
        let button: Response = serde_json::from_value(serde_json::json!({
            "id": "r", "type": "data", "action": "a", "refId": "m", "flow": "f",
            "payload": {"type": "template", "template_type": "button", "items": {"title": "T", "text": "Pick",
                "actions": [{"type": "postback", "label": "A", "payload": {"k": "a"}}, {"type": "url", "label": "Site", "url": "https://e.x"}]}}
        })).unwrap();
        let o = opts(serde_json::json!({"token": "T", "phoneNumberId": "PN"}));
        let d = deliveries(&info("whatsapp", &o), "628", std::slice::from_ref(&button));
        assert_eq!(d[0].url, "http://provider/PN/messages");
        assert_eq!(
            d[0].body["interactive"]["action"]["buttons"][0]["reply"]["title"],
            "A"
        );
        let d = deliveries(
            &info("fbmessenger", &o),
            "P1",
            std::slice::from_ref(&button),
        );
        assert_eq!(
            d[0].body["message"]["attachment"]["payload"]["buttons"][1]["type"],
            "web_url"
        );
        let d = deliveries(&info("slack", &o), "C1|U1", std::slice::from_ref(&button));
        assert_eq!(
            (d[0].body["channel"].as_str(), d[0].body["text"].as_str()),
            (Some("C1"), Some("T\nPick"))
        );
        let d = deliveries(&info("twitter", &o), "u1", std::slice::from_ref(&button));
        assert_eq!(
            d[0].body["event"]["message_create"]["message_data"]["quick_reply"]["options"][0]["label"],
            "A"
        );
        let d = deliveries(&info("line", &o), "U1", std::slice::from_ref(&button));
        assert_eq!(
            d[0].body["messages"][0]["template"]["actions"][1],
            serde_json::json!({"type": "uri", "label": "Site", "uri": "https://e.x"})
        );
    }

    /// A template whose only choices are quick replies (`items.quickreply`, the form meant
    /// for channels such as Twitter) reaches Twitter with its options and LINE as a text with
    /// quick replies, never a buttons template without actions.
    #[test]
    fn quick_reply_templates_keep_their_options() {
        use runtime_core::session::Response;
        let quick: Response = serde_json::from_value(serde_json::json!({
            "id": "r", "type": "data", "action": "a", "refId": "m", "flow": "f",
            "payload": {"type": "template", "template_type": "button", "items": {"text": "Size?",
                "quickreply": [{"type": "text", "label": "Small", "payload": {"size": "s"}},
                               {"type": "text", "label": "Large", "payload": {"size": "l"}}]}}
        }))
        .unwrap();
        let o = opts(serde_json::json!({"token": "T"}));
        let d = deliveries(&info("twitter", &o), "u1", std::slice::from_ref(&quick));
        let data = &d[0].body["event"]["message_create"]["message_data"];
        assert_eq!(data["text"], "Size?");
        assert_eq!(
            data["quick_reply"]["options"],
            serde_json::json!([{"label": "Small", "metadata": "{\"size\":\"s\"}"},
                               {"label": "Large", "metadata": "{\"size\":\"l\"}"}])
        );
        let d = deliveries(&info("line", &o), "U1", std::slice::from_ref(&quick));
        let m = &d[0].body["messages"][0];
        assert_eq!(m["type"], "text", "{m}");
        assert_eq!(m["text"], "Size?");
        assert_eq!(m["quickReply"]["items"][1]["action"]["label"], "Large");
        // Telegram: buttons under the text, each sending its payload back.
        let o = opts(serde_json::json!({"token": "T", "phoneNumberId": "PN"}));
        let d = deliveries(&info("telegram", &o), "42", std::slice::from_ref(&quick));
        assert_eq!(d[0].body["text"], "Size?");
        assert_eq!(
            d[0].body["reply_markup"]["inline_keyboard"],
            serde_json::json!([[{"text": "Small", "callback_data": "{\"size\":\"s\"}"}],
                               [{"text": "Large", "callback_data": "{\"size\":\"l\"}"}]])
        );
        // WhatsApp: its reply buttons, or a list past three choices.
        let d = deliveries(&info("whatsapp", &o), "628", std::slice::from_ref(&quick));
        let i = &d[0].body["interactive"];
        assert_eq!(
            (i["type"].as_str(), i["body"]["text"].as_str()),
            (Some("button"), Some("Size?"))
        );
        assert_eq!(
            i["action"]["buttons"][1]["reply"],
            serde_json::json!({"id": "{\"size\":\"l\"}", "title": "Large"})
        );
        let mut many = quick.clone();
        let sizes: Vec<Json> = ["XS", "S", "M", "L", "XL"]
            .iter()
            .map(|l| serde_json::json!({"type": "text", "label": l, "payload": l}))
            .collect();
        many.payload.as_mut().unwrap()["items"]["quickreply"] = Json::Array(sizes);
        let d = deliveries(&info("whatsapp", &o), "628", std::slice::from_ref(&many));
        let i = &d[0].body["interactive"];
        assert_eq!(i["type"], "list");
        let rows = i["action"]["sections"][0]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[4], serde_json::json!({"id": "XL", "title": "XL"}));
    }

    #[test]
    fn hmac_round_trip() {
        let sig = hmac_sha256(b"secret", b"body");
        assert!(verify_hmac(b"secret", b"body", &sig));
        assert!(!verify_hmac(b"secret", b"body!", &sig));
        assert!(!verify_hmac(b"other", b"body", &sig));
    }
}
