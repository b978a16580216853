//! The AI SDK UI message stream: the chunks botbox emits (only types and
//! fields `ai@5.0.0` accepts) and their SSE framing.

use runtime_core::model::MsgType;
use runtime_core::session::Response;
use serde_json::{Value as Json, json};

/// The stream's terminator, stored as the log's last entry.
pub const DONE: &str = "[DONE]";

/// Headers of every stream response (`UI_MESSAGE_STREAM_HEADERS`), besides the ids.
pub const HEADERS: [(&str, &str); 4] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// Seconds without output before a keep-alive comment.
pub const KEEP_ALIVE_SECS: u64 = 15;

/// One SSE event: `id: <seq>` and the chunk as one `data:` line (compact JSON has no raw
/// newlines). The same bytes whether written live or replayed.
pub fn event(seq: i64, chunk: &str) -> String {
    debug_assert!(!chunk.contains('\n'));
    format!("id: {seq}\ndata: {chunk}\n\n")
}

pub const PING: &str = ": ping\n\n";

pub fn start(message_id: &str, run_id: &str, conversation_id: &str) -> Json {
    json!({"type": "start", "messageId": message_id,
        "messageMetadata": {"runId": run_id, "conversationId": conversation_id}})
}

pub fn start_step() -> Json {
    json!({"type": "start-step"})
}

pub fn finish_step() -> Json {
    json!({"type": "finish-step"})
}

pub fn finish(run_id: &str, conversation_id: &str, status: &str) -> Json {
    json!({"type": "finish",
        "messageMetadata": {"runId": run_id, "conversationId": conversation_id, "status": status}})
}

pub fn error(text: &str) -> Json {
    json!({"type": "error", "errorText": text})
}

pub fn abort() -> Json {
    json!({"type": "abort"})
}

pub fn tool_input(call_id: &str, tool: &str, input: Json) -> Json {
    json!({"type": "tool-input-available", "toolCallId": call_id, "toolName": tool,
        "input": input, "dynamic": true})
}

pub fn tool_output(call_id: &str, output: Json) -> Json {
    json!({"type": "tool-output-available", "toolCallId": call_id, "output": output, "dynamic": true})
}

pub fn tool_error(call_id: &str, text: &str) -> Json {
    json!({"type": "tool-output-error", "toolCallId": call_id, "errorText": text, "dynamic": true})
}

/// Progress: transient, so the AI SDK shows it without keeping it in the
/// message.
pub fn run_status(status: &str) -> Json {
    json!({"type": "data-run-status", "data": {"status": status}, "transient": true})
}

/// A user error of the step (a method that threw, an api call that failed): transient, for
/// the author's debugging view (also in `GET /projects/{id}/errors`, channel `agent`).
pub fn bot_error(message: &str) -> Json {
    json!({"type": "data-bot-error", "data": {"message": message}, "transient": true})
}

pub fn steer_delivered(steer_id: &str) -> Json {
    json!({"type": "data-steer", "data": {"steerId": steer_id, "status": "delivered"}, "transient": true})
}

/// The chunks of a step's responses: a text reply as text-start/delta/end with a new id
/// (`t<n>`, `next_text` counts them over the run), anything else as `data-bot-message`.
pub fn responses(responses: &[Response], next_text: &mut usize) -> Vec<Json> {
    let mut out = Vec::new();
    for r in responses {
        match (&r.msg_type, &r.content, &r.payload) {
            (MsgType::Text, Some(text), None) => {
                let id = format!("t{}", *next_text);
                *next_text += 1;
                out.push(json!({"type": "text-start", "id": id}));
                out.push(json!({"type": "text-delta", "id": id, "delta": text}));
                out.push(json!({"type": "text-end", "id": id}));
            }
            _ => out.push(json!({"type": "data-bot-message", "id": r.id,
                "data": serde_json::to_value(r).unwrap_or(Json::Null)})),
        }
    }
    out
}

/// The assistant UI message a finished run leaves in the history: its text and bot
/// message parts, from the chunk log.
pub fn assistant_message(message_id: &str, chunks: &[std::sync::Arc<str>], status: &str) -> Json {
    let mut parts: Vec<Json> = Vec::new();
    let mut texts: std::collections::HashMap<String, String> = Default::default();
    for c in chunks {
        let Ok(v) = serde_json::from_str::<Json>(c) else {
            continue;
        };
        match v["type"].as_str() {
            Some("text-delta") => {
                texts
                    .entry(v["id"].as_str().unwrap_or_default().to_owned())
                    .or_default()
                    .push_str(v["delta"].as_str().unwrap_or_default());
            }
            Some("text-end") => {
                let t = texts
                    .remove(v["id"].as_str().unwrap_or_default())
                    .unwrap_or_default();
                parts.push(json!({"type": "text", "text": t, "state": "done"}));
            }
            Some("data-bot-message") => parts.push(json!({"type": "data-bot-message",
                "id": v["id"], "data": v["data"]})),
            _ => {}
        }
    }
    json!({"id": message_id, "role": "assistant", "metadata": {"status": status}, "parts": parts})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_one_id_and_one_data_line() {
        assert_eq!(
            event(3, r#"{"type":"finish"}"#),
            "id: 3\ndata: {\"type\":\"finish\"}\n\n"
        );
    }

    #[test]
    fn text_replies_get_fresh_ids_and_rich_ones_are_bot_messages() {
        let text = Response {
            id: "r1".into(),
            msg_type: MsgType::Text,
            content: Some("Hi\nthere".into()),
            payload: None,
            action: "a".into(),
            ref_id: "m".into(),
            flow: "f".into(),
            intent: None,
        };
        let mut rich = text.clone();
        rich.id = "r2".into();
        rich.msg_type = MsgType::Data;
        rich.content = None;
        rich.payload = Some(json!({"template_type": "button"}));
        let mut n = 4;
        let c = responses(&[text, rich], &mut n);
        assert_eq!(n, 5);
        assert_eq!(c[0], json!({"type": "text-start", "id": "t4"}));
        assert_eq!(c[1]["delta"], "Hi\nthere");
        assert_eq!(c[3]["type"], "data-bot-message");
        assert_eq!(c[3]["id"], "r2");
        // Compact JSON never has a raw newline.
        assert!(!c[1].to_string().contains('\n'));
    }
}
