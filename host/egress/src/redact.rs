//! What of an outbound call may be written down: in logs, in stored errors (the outbox's
//! `last_error`), in transcripts.
//!
//! Rules:
//! - A URL keeps its scheme, host, port and path; the user and password are dropped, every
//!   query value becomes `***` (its name stays: `?access_token=***`), the fragment is
//!   dropped, and path segments that carry a credential become `***`: Telegram's
//!   `bot<id>:<secret>` (→ `bot***`) and any long segment mixing letters and digits (webhook
//!   secrets such as Slack's `/services/T…/B…/<secret>`; long message ids go too).
//! - Headers are never written down (they carry the bearer tokens).
//! - An incoming message's metadata keeps its keys; the values of those that name a
//!   credential (`lineAccessToken`, `slackAccessToken`, `fbmessengerAccessToken`, any key
//!   containing `token`, `secret`, `password`, `credential`, `authorization` or ending in
//!   `key`) become `********` in transcripts. The bot itself still gets them.

use reqwest::Url;
use runtime_core::session::Message;
use serde_json::Value as Json;

/// Shown instead of a credential.
pub const MASK: &str = "***";
/// Shown instead of a credential in a stored message (as channel options are shown).
pub const MASKED_VALUE: &str = "********";

/// `url` as it may be logged and stored (see the module's rules).
pub fn url(raw: &str) -> String {
    let Ok(mut u) = Url::parse(raw) else {
        return "(an invalid url)".into();
    };
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_password(None);
        let _ = u.set_username(MASK);
    }
    u.set_fragment(None);
    if u.query().is_some() {
        let pairs: Vec<String> = u
            .query_pairs()
            .map(|(k, _)| format!("{}={MASK}", k))
            .collect();
        let query = pairs.join("&");
        u.set_query((!query.is_empty()).then_some(query.as_str()));
    }
    let segments: Option<Vec<String>> = u.path_segments().map(|s| s.map(segment).collect());
    if let Some(segments) = segments {
        u.set_path(&segments.join("/"));
    }
    u.to_string()
}

/// One path segment, masked when it carries a credential.
fn segment(s: &str) -> String {
    // Telegram: /bot<digits>:<secret>/method
    if let Some(rest) = s.strip_prefix("bot")
        && let Some((id, _)) = rest.split_once(':')
        && !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
    {
        return format!("bot{MASK}");
    }
    let letters = s.bytes().any(|b| b.is_ascii_alphabetic());
    let digits = s.bytes().any(|b| b.is_ascii_digit());
    if s.len() >= 16 && letters && digits {
        return MASK.into();
    }
    s.to_owned()
}

/// Whether a metadata key names a credential.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["token", "secret", "password", "credential", "authorization"]
        .iter()
        .any(|w| k.contains(w))
        || k.ends_with("key")
}

/// An incoming message as JSON for a transcript: credentials in its metadata masked.
pub fn message_json(m: &Message) -> String {
    let masked;
    let m = match &m.metadata {
        Some(Json::Object(meta)) if meta.keys().any(|k| is_secret_key(k)) => {
            let mut copy = m.clone();
            if let Some(Json::Object(meta)) = &mut copy.metadata {
                for (k, v) in meta.iter_mut() {
                    if is_secret_key(k) && !v.is_null() {
                        *v = Json::String(MASKED_VALUE.into());
                    }
                }
            }
            masked = copy;
            &masked
        }
        _ => m,
    };
    serde_json::to_string(m).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn telegram_and_messenger_tokens_leave_urls() {
        assert_eq!(
            url("https://api.telegram.org/bot123456:AAH-secret_Part/sendMessage"),
            "https://api.telegram.org/bot***/sendMessage"
        );
        assert_eq!(
            url("https://graph.facebook.com/v2.6/me/messages?access_token=EAAB123secret"),
            "https://graph.facebook.com/v2.6/me/messages?access_token=***"
        );
        assert_eq!(
            url("https://hooks.slack.com/services/T0001/B0002/XXXXXXXXXXXXXXXX1234"),
            "https://hooks.slack.com/services/T0001/B0002/***"
        );
        assert_eq!(
            url("http://user:pa55@example.com:8080/a?x=1&y#frag"),
            "http://***@example.com:8080/a?x=***&y=***"
        );
        // Ordinary paths stay readable.
        assert_eq!(
            url("https://api.line.me/v2/bot/message/push"),
            "https://api.line.me/v2/bot/message/push"
        );
        assert_eq!(
            url("https://slack.com/api/chat.postMessage"),
            "https://slack.com/api/chat.postMessage"
        );
        assert_eq!(url("not a url bot1:secret"), "(an invalid url)");
    }

    #[test]
    fn metadata_credentials_are_masked_in_transcripts() {
        let mut m = Message::text("hi");
        m.metadata = Some(json!({
            "channelType": "line", "lineSenderId": "U1", "lineAccessToken": "LINE-SECRET",
            "slackAccessToken": "xoxb-SECRET", "fbmessengerAccessToken": "EAAB-SECRET",
            "apiKey": "K-SECRET", "monkey": "K2-SECRET", "none": null,
        }));
        let j = message_json(&m);
        assert!(!j.contains("SECRET"), "{j}");
        let v: Json = serde_json::from_str(&j).unwrap();
        assert_eq!(v["metadata"]["lineSenderId"], "U1");
        assert_eq!(v["metadata"]["lineAccessToken"], MASKED_VALUE);
        assert_eq!(v["content"], "hi");
        // Untouched when there is nothing to mask.
        let plain = Message::text("x");
        assert_eq!(message_json(&plain), serde_json::to_string(&plain).unwrap());
    }
}
