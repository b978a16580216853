//! Messages, responses, sessions and the converse result.

use crate::model::MsgType;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// An inbound or internal message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type")]
    pub msg_type: MsgType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Json>,
    /// Set after intent selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Json>,
}

impl Message {
    pub fn text(content: &str) -> Message {
        Message {
            id: String::new(),
            msg_type: MsgType::Text,
            content: Some(content.into()),
            payload: None,
            metadata: None,
            intent: None,
            attributes: None,
        }
    }

    pub fn data(payload: Json) -> Message {
        Message {
            id: String::new(),
            msg_type: MsgType::Data,
            content: None,
            payload: Some(payload),
            metadata: None,
            intent: None,
            attributes: None,
        }
    }

    pub fn command(content: &str, payload: Json) -> Message {
        Message {
            id: String::new(),
            msg_type: MsgType::Command,
            content: Some(content.into()),
            payload: Some(payload),
            metadata: None,
            intent: None,
            attributes: None,
        }
    }

    /// Reads an inbound message; without `type` it is text when it has `content`, else data.
    pub fn from_json(v: &Json) -> Result<Message, String> {
        let Json::Object(m) = v else {
            return Err("a message must be a JSON object".into());
        };
        let mut m = m.clone();
        if !m.contains_key("type") {
            let t = if m.get("content").is_some_and(|c| c.is_string()) {
                "text"
            } else {
                "data"
            };
            m.insert("type".into(), Json::String(t.into()));
        }
        if let Some(Json::String(p)) = m.get("payload") {
            let parsed = postback_payload(p);
            m.insert("payload".into(), parsed);
        }
        serde_json::from_value(Json::Object(m)).map_err(|e| format!("invalid message: {e}"))
    }

    /// Reads a message from JSON text, as [`Message::from_json`] does, but straight into the
    /// struct when the text names its type (as a serialised `Message` always does): the
    /// sandbox reads one per step.
    pub fn from_json_text(text: &str) -> Result<Message, String> {
        if let Ok(mut m) = serde_json::from_str::<Message>(text) {
            if let Some(Json::String(p)) = &m.payload {
                m.payload = Some(postback_payload(p));
            }
            return Ok(m);
        }
        let v: Json = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Message::from_json(&v)
    }
}

/// A postback string payload: JSON, or `k=v&k2=v2`.
fn postback_payload(p: &str) -> Json {
    serde_json::from_str::<Json>(p)
        .ok()
        .filter(Json::is_object)
        .unwrap_or_else(|| parse_query(p))
}

fn parse_query(s: &str) -> Json {
    let mut m = Map::new();
    for pair in s.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        m.insert(k.to_string(), Json::String(v.to_string()));
    }
    Json::Object(m)
}

/// A deliverable response (text or data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub id: String,
    #[serde(rename = "type")]
    pub msg_type: MsgType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Json>,
    pub action: String,
    pub ref_id: String,
    pub flow: String,
    pub intent: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub flow: String,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub last_flow: Option<String>,
    pub last_state: Option<String>,
    pub end: bool,
}

/// The conversation state of one user. Unknown fields are kept.
///
/// Deserialised by hand (below) rather than with `#[serde(flatten)]`, which buffers the whole
/// object into an intermediate tree first: the session crosses the sandbox boundary and the
/// database on every step, and the buffering doubled its parse cost.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// The stored form's version ([`SESSION_FORMAT`]). A session of an older format is
    /// upgraded as it is read; one of a newer format is refused, naming both.
    pub format: u32,
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default)]
    pub current: Option<String>,
    /// The flow stack, most recent last.
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
    #[serde(default)]
    pub states: Map<String, Json>,
    #[serde(default, alias = "contexts")]
    pub contexes: Map<String, Json>,
    #[serde(default = "empty_object")]
    pub data: Json,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_key: Option<String>,
    #[serde(default)]
    pub meta: Option<Meta>,
    #[serde(default)]
    pub timestamp: i64,
    #[serde(default)]
    pub created_at: i64,
    #[serde(default)]
    pub updated_at: i64,
    #[serde(default)]
    pub session_start: i64,
    /// Fields this version does not know, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Json>,
}

impl<'de> Deserialize<'de> for Session {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Session, D::Error> {
        use serde::de::{MapAccess, Visitor};

        struct SessionVisitor;
        impl<'de> Visitor<'de> for SessionVisitor {
            type Value = Session;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a session object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Session, A::Error> {
                let mut s = Session::new("");
                // Absent in sessions stored before formats were numbered: format 0.
                let mut format = 0;
                while let Some(key) = map.next_key::<SessionKey>()? {
                    match key {
                        SessionKey::Format => format = map.next_value()?,
                        SessionKey::Id => s.id = map.next_value()?,
                        SessionKey::ChannelId => s.channel_id = map.next_value()?,
                        SessionKey::EnvironmentId => s.environment_id = map.next_value()?,
                        SessionKey::DeploymentId => s.deployment_id = map.next_value()?,
                        SessionKey::UserId => s.user_id = map.next_value()?,
                        SessionKey::Current => s.current = map.next_value()?,
                        SessionKey::History => s.history = map.next_value()?,
                        SessionKey::States => s.states = map.next_value()?,
                        SessionKey::Contexes => s.contexes = map.next_value()?,
                        SessionKey::Data => s.data = map.next_value()?,
                        SessionKey::DataKey => s.data_key = map.next_value()?,
                        SessionKey::Meta => s.meta = map.next_value()?,
                        SessionKey::Timestamp => s.timestamp = map.next_value()?,
                        SessionKey::CreatedAt => s.created_at = map.next_value()?,
                        SessionKey::UpdatedAt => s.updated_at = map.next_value()?,
                        SessionKey::SessionStart => s.session_start = map.next_value()?,
                        SessionKey::Other(k) => {
                            s.extra.insert(k, map.next_value()?);
                        }
                    }
                }
                upgrade_session(format, &mut s).map_err(serde::de::Error::custom)?;
                Ok(s)
            }
        }
        d.deserialize_map(SessionVisitor)
    }
}

/// A key of a session object; unknown keys are kept in `extra`.
enum SessionKey {
    Format,
    Id,
    ChannelId,
    EnvironmentId,
    DeploymentId,
    UserId,
    Current,
    History,
    States,
    Contexes,
    Data,
    DataKey,
    Meta,
    Timestamp,
    CreatedAt,
    UpdatedAt,
    SessionStart,
    Other(String),
}

impl<'de> Deserialize<'de> for SessionKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SessionKey, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = SessionKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<SessionKey, E> {
                Ok(match k {
                    "format" => SessionKey::Format,
                    "id" => SessionKey::Id,
                    "channelId" => SessionKey::ChannelId,
                    "environmentId" => SessionKey::EnvironmentId,
                    "deploymentId" => SessionKey::DeploymentId,
                    "userId" => SessionKey::UserId,
                    "current" => SessionKey::Current,
                    "history" => SessionKey::History,
                    "states" => SessionKey::States,
                    "contexes" | "contexts" => SessionKey::Contexes,
                    "data" => SessionKey::Data,
                    "dataKey" => SessionKey::DataKey,
                    "meta" => SessionKey::Meta,
                    "timestamp" => SessionKey::Timestamp,
                    "createdAt" => SessionKey::CreatedAt,
                    "updatedAt" => SessionKey::UpdatedAt,
                    "sessionStart" => SessionKey::SessionStart,
                    other => SessionKey::Other(other.to_string()),
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

fn empty_object() -> Json {
    Json::Object(Map::new())
}

/// The version of the stored session form. Bump it with every change to what a session
/// means or how it is written, and teach `upgrade_session` to read the previous one.
///
/// - 0: sessions stored before formats were numbered (no `format` field).
/// - 1: the same fields, with `format`.
pub const SESSION_FORMAT: u32 = 1;

/// Brings a session read in format `from` to [`SESSION_FORMAT`], step by step.
fn upgrade_session(from: u32, s: &mut Session) -> Result<(), String> {
    if from > SESSION_FORMAT {
        return Err(format!(
            "the session was stored in format {from} by a newer botbox; this one reads formats up to {SESSION_FORMAT}"
        ));
    }
    // 0 → 1: nothing changed but the field itself. Later upgrades go here, in order:
    // `if from < 2 { … }`.
    s.format = SESSION_FORMAT;
    Ok(())
}

impl Session {
    pub fn new(id: &str) -> Session {
        Session {
            format: SESSION_FORMAT,
            id: id.into(),
            data: empty_object(),
            ..Default::default()
        }
    }

    pub fn state_of(&self, flow: &str) -> Option<&str> {
        self.states.get(flow).and_then(Json::as_str)
    }

    pub fn context_of(&self, flow: &str) -> Option<&Json> {
        self.contexes.get(flow)
    }
}

/// A change to the session's schedules that the host must carry out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "lowercase")]
pub enum ScheduleOp {
    Add {
        id: String,
        message: Json,
        /// Epoch milliseconds of the first fire.
        start: i64,
        end: Option<i64>,
        /// Period in milliseconds (`None`: fires once). Months and years are 30 and 365 days.
        every: Option<i64>,
    },
    Remove {
        id: String,
    },
}

/// The outcome of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConverseResult {
    /// The inbound message and every internal message, with their intents.
    pub messages: Vec<Message>,
    pub responses: Vec<Response>,
    pub session: Session,
    pub duration: i64,
    /// User errors met on the way (a throwing condition, an unknown action...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduleOp>,
}

/// A step's outcome without its session: what crosses the sandbox boundary beside the
/// session's own JSON, so that a host which only stores the session never parses it.
/// `meta` is the session's, for transcripts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub messages: Vec<Message>,
    pub responses: Vec<Response>,
    pub duration: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduleOp>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

impl ConverseResult {
    /// Splits the outcome into its report and its session.
    pub fn into_parts(self) -> (StepReport, Session) {
        let report = StepReport {
            messages: self.messages,
            responses: self.responses,
            duration: self.duration,
            errors: self.errors,
            schedules: self.schedules,
            meta: self.session.meta.clone(),
        };
        (report, self.session)
    }
}

impl StepReport {
    /// The whole outcome again, with its session.
    pub fn with_session(self, session: Session) -> ConverseResult {
        ConverseResult {
            messages: self.messages,
            responses: self.responses,
            session,
            duration: self.duration,
            errors: self.errors,
            schedules: self.schedules,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_read_from_text_as_from_json_reads_them() {
        for v in [
            json!({"type": "text", "content": "hi", "id": "m1", "extra": 1}),
            json!({"content": "no type"}),
            json!({"payload": {"a": 1}}),
            json!({"type": "data", "payload": "a=1&b=2"}),
            json!({"type": "data", "payload": "{\"x\": [1]}"}),
            json!({"type": "command", "content": "go", "payload": {}, "metadata": {"m": true}}),
        ] {
            assert_eq!(
                Message::from_json_text(&v.to_string()),
                Message::from_json(&v),
                "{v}"
            );
        }
        assert!(Message::from_json_text("[1]").is_err());
        assert!(Message::from_json_text("{").is_err());
    }

    #[test]
    fn a_session_keeps_unknown_fields_and_reads_the_contexts_alias() {
        let j = json!({
            "id": "s1", "userId": "u", "current": "pizza",
            "history": [{"flow": "pizza", "timestamp": 5}],
            "states": {"pizza": "ask"}, "contexts": {"pizza": {"n": 2}},
            "meta": {"lastFlow": "pizza", "lastState": "ask", "end": false},
            "timestamp": 7, "sessionStart": 3,
            "custom": {"kept": [1, 2]}, "other": null
        });
        let s: Session = serde_json::from_value(j.clone()).unwrap();
        assert_eq!(s.id, "s1");
        assert_eq!(s.user_id.as_deref(), Some("u"));
        assert_eq!(s.state_of("pizza"), Some("ask"));
        assert_eq!(s.context_of("pizza"), Some(&json!({"n": 2})));
        assert_eq!(s.data, json!({}), "a missing data is an empty object");
        assert_eq!(s.extra.get("custom"), Some(&json!({"kept": [1, 2]})));
        assert_eq!(s.extra.get("other"), Some(&Json::Null));
        assert_eq!(s.history[0].timestamp, 5);
        // Text and tree give the same session, and writing it back reads back equal.
        let from_text: Session = serde_json::from_str(&j.to_string()).unwrap();
        assert_eq!(from_text, s);
        let again: Session = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn a_session_field_of_the_wrong_type_is_an_error_that_names_it() {
        let e = serde_json::from_str::<Session>(r#"{"id": "s", "timestamp": "soon"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid type"), "{e}");
        assert!(serde_json::from_str::<Session>("[1]").is_err());
    }
}
