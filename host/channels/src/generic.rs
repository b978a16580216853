//! The generic channel: `{userId, messages, metadata?}` in, the same shape
//! POSTed to the channel's `url` out. With `options.secret`, both directions are signed:
//! header `x-botbox-signature: sha256=<hex HMAC-SHA256(secret, body)>`. A secret that is empty
//! or `-` is no secret (Kata's docs create a generic channel with `Secret: -` and post unsigned).

use super::{
    Call, ChannelError, ChannelInfo, Delivery, Inbound, InboundItem, json_headers, verify_hmac,
    with_metadata,
};
use runtime_core::session::{Message, Response};
use serde_json::{Value as Json, json};

pub const SIGNATURE_HEADER: &str = "x-botbox-signature";

/// The channel's HMAC key: `options.secret`, unless it is empty or `-`.
fn secret<'c>(ch: &'c ChannelInfo<'_>) -> Option<&'c str> {
    ch.opt(&["secret"])
        .filter(|s| !matches!(s.trim(), "" | "-"))
}

pub fn parse(ch: &ChannelInfo<'_>, call: &Call<'_>) -> Result<Inbound, ChannelError> {
    if let Some(secret) = secret(ch) {
        call.check_signature(
            SIGNATURE_HEADER,
            |s| hex::decode(s.strip_prefix("sha256=")?).ok(),
            verify_hmac,
            secret,
            call.body,
        )?;
    }
    let v = call.json()?;
    let user = match v.get("userId") {
        Some(Json::String(s)) if !s.is_empty() => s.clone(),
        Some(Json::Number(n)) => n.to_string(),
        _ => {
            return Err(ChannelError::Payload(
                "userId: a non-empty string is required".into(),
            ));
        }
    };
    let messages = v
        .get("messages")
        .and_then(Json::as_array)
        .ok_or_else(|| ChannelError::Payload("messages: an array is required".into()))?;
    let mut metadata = v.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if !metadata.is_object() {
        metadata = json!({});
    }
    // The channel's own type name (generic, or bbm, which takes the same JSON).
    metadata["channelType"] = json!(ch.kind);
    let mut items = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let msg = Message::from_json(m)
            .map_err(|e| ChannelError::Payload(format!("messages[{i}]: {e}")))?;
        let provider_id = m.get("id").and_then(Json::as_str).map(str::to_owned);
        items.push(InboundItem {
            provider_id,
            user_id: user.clone(),
            message: with_metadata(msg, metadata.clone()),
        });
    }
    Ok(Inbound::Messages(items))
}

/// A response as the generic channel shows it.
pub fn response_json(r: &Response) -> Json {
    let mut m = json!({ "type": r.msg_type });
    if let Some(c) = &r.content {
        m["content"] = json!(c);
    }
    if let Some(p) = &r.payload {
        m["payload"] = p.clone();
    }
    m
}

pub fn deliveries(ch: &ChannelInfo<'_>, user_id: &str, responses: &[Response]) -> Vec<Delivery> {
    let body = json!({
        "userId": user_id,
        "messages": responses.iter().map(response_json).collect::<Vec<_>>(),
    });
    let mut headers = json_headers();
    if let Some(secret) = secret(ch) {
        let sig = super::sha256_hex(secret.as_bytes(), body.to_string().as_bytes());
        headers.push((SIGNATURE_HEADER.to_owned(), sig));
    }
    vec![Delivery {
        url: ch.url.to_owned(),
        headers,
        body,
    }]
}

#[cfg(test)]
mod tests {
    use super::{SIGNATURE_HEADER, deliveries, parse};
    use crate::{Call, ChannelError, ChannelInfo, Inbound};
    use serde_json::{Map, Value as Json, json};

    fn channel(options: &Map<String, Json>) -> ChannelInfo<'_> {
        ChannelInfo {
            kind: "generic",
            url: "http://customer/hook",
            options,
            now_ms: 0,
        }
    }

    /// An unsigned post of `body` to a channel with `options`.
    fn unsigned(options: &Map<String, Json>, body: &[u8]) -> Result<Inbound, ChannelError> {
        let headers = http::HeaderMap::new();
        let call = Call {
            headers: &headers,
            query: None,
            body,
        };
        parse(&channel(options), &call)
    }

    #[test]
    fn a_dash_or_empty_secret_is_no_secret() {
        let body = br#"{"userId":"u","messages":[{"type":"text","content":"Halo"}]}"#;
        for secret in ["-", "", " - "] {
            let o = Map::from_iter([("secret".to_owned(), json!(secret))]);
            let got = unsigned(&o, body).unwrap_or_else(|e| panic!("secret {secret:?}: {e}"));
            let Inbound::Messages(m) = got else {
                panic!("messages expected")
            };
            assert_eq!(m[0].message.content.as_deref(), Some("Halo"));
        }
        // Any other secret is an HMAC key: an unsigned post is refused.
        let o = Map::from_iter([("secret".to_owned(), json!("s3cret"))]);
        assert!(unsigned(&o, body).is_err());
    }

    #[test]
    fn replies_are_unsigned_with_a_dash_secret_and_signed_with_a_real_one() {
        let r: runtime_core::Response = serde_json::from_value(json!({
            "id": "r", "type": "text", "content": "hi", "action": "a", "refId": "m", "flow": "f"
        }))
        .unwrap();
        let dash = Map::from_iter([("secret".to_owned(), json!("-"))]);
        let d = deliveries(&channel(&dash), "u", std::slice::from_ref(&r));
        assert!(d[0].headers.iter().all(|(k, _)| k != SIGNATURE_HEADER));
        let real = Map::from_iter([("secret".to_owned(), json!("k"))]);
        let d = deliveries(&channel(&real), "u", std::slice::from_ref(&r));
        assert!(d[0].headers.iter().any(|(k, _)| k == SIGNATURE_HEADER));
    }
}
