//! The step's writes: what a channel message's step stores in one transaction (its
//! session, transcript lines, bot errors, deliveries and schedule changes), built here for
//! [`Live::handle`] to commit, and the shapes other paths store the same way (console
//! sessions, bot errors, transcript lines).

use super::*;

impl Live {
    /// What the step stores: for a step that ran, its new session and what it produced;
    /// for a failed one, the session it ran on unchanged and the failure. Any other error
    /// is the message's, and nothing is stored.
    pub(super) fn step_write(
        &self,
        m: &InboundStep<'_>,
        step: &MessageStep,
        session: &SessionJson,
        version: Option<i64>,
        step_at: &StepAt<'_>,
    ) -> Result<StepWrite, LiveError> {
        let mut w = StepWrite::default();
        let at = TranscriptAt {
            env: &m.route.env,
            channel: &m.route.channel.id,
            user: &m.item.user_id,
            step_us: step_at.step_us,
        };
        let body = match step {
            Ok((r, new_session)) => {
                write_for_success(m, &at, r, &mut w);
                step_at.mark(m, &mut w.transcripts[0]);
                new_session.json.clone()
            }
            Err(LiveError::Step(e)) => {
                tracing::warn!(session = %m.key, error = %e, "step failed; session unchanged");
                write_for_failure(m, &at, e, &mut w);
                step_at.mark(m, &mut w.transcripts[0]);
                // The session is written back unchanged (a version bump only).
                session.json.clone()
            }
            Err(LiveError::NotDeployed(m)) => return Err(LiveError::NotDeployed(m.clone())),
            Err(LiveError::Busy(m)) => return Err(LiveError::Busy(m.clone())),
            Err(LiveError::Internal(e)) => return Err(LiveError::Internal(anyhow!("{e:#}"))),
        };
        self.finish_write(m, &mut w, body, version);
        Ok(w)
    }

    /// Fills in where the write goes: the session (`body`, read at `version`), its
    /// environment, channel and user, the message's provider id, and the outbox's lease.
    pub(super) fn finish_write(
        &self,
        m: &InboundStep<'_>,
        w: &mut StepWrite,
        body: Arc<str>,
        version: Option<i64>,
    ) {
        let item = m.item;
        w.outbox_lease_ms = self.cfg.delivery_timeout.as_millis() as i64 * 2;
        w.session_id = m.key.to_owned();
        w.environment_id = m.route.env.id.clone();
        w.channel_id = m.route.channel.id.clone();
        w.user_id = item.user_id.clone();
        w.body = body;
        w.read_version = version;
        w.provider_id = item
            .provider_id
            .as_ref()
            .map(|id| (item.user_id.clone(), id.clone()));
    }
}

/// A channel user's new session: `<environment>:<channel>:<user>`, as its first step sees
/// it (and a replay of its conversation).
pub fn channel_session(env: &EnvironmentRow, channel_id: &str, user_id: &str) -> Session {
    let mut s = Session::new(&format!("{}:{channel_id}:{user_id}", env.id));
    s.channel_id = Some(channel_id.to_owned());
    s.environment_id = Some(env.id.clone());
    s.deployment_id = Some(env.project_id.clone());
    s.user_id = Some(user_id.to_owned());
    s
}

/// Adds what a step that ran produced: its bot errors, transcript lines, deliveries of its
/// replies and schedule changes.
fn write_for_success(
    m: &InboundStep<'_>,
    at: &TranscriptAt<'_>,
    r: &StepReport,
    w: &mut StepWrite,
) {
    w.errors.extend(
        r.errors
            .iter()
            .take(ERRORS_PER_STEP)
            .map(|e| m.bot_error("bot", e)),
    );
    let mut lines = step_transcript(at, m.in_json, (&r.messages, &r.responses, r.meta.as_ref()));
    let user_line = &mut lines[0];
    user_line.dep_version = Some(m.dep_version.to_owned());
    user_line.outcome = Some(if !r.errors.is_empty() {
        "error"
    } else if m
        .revision
        .falls_back(user_line.flow.as_deref(), user_line.intent.as_deref())
    {
        "fallback"
    } else {
        "ok"
    });
    w.transcripts.extend(lines);
    for d in channels::deliveries(&m.info, &m.item.user_id, &r.responses) {
        w.outbox.push(delivery_row(d));
    }
    schedule_rows(m, &r.schedules, w);
}

/// Adds the schedules a step added (keyed under the session) and those it removed.
fn schedule_rows(m: &InboundStep<'_>, ops: &[ScheduleOp], w: &mut StepWrite) {
    let key = m.key;
    for op in ops {
        match op {
            ScheduleOp::Add {
                id,
                message,
                start,
                end,
                every,
            } => w.schedules_add.push(ScheduleRow {
                id: format!("{key}#{id}"),
                session_id: key.to_owned(),
                channel_id: m.route.channel.id.clone(),
                user_id: m.item.user_id.clone(),
                message: message.to_string(),
                next_at: *start,
                end_at: *end,
                every_ms: *every,
            }),
            ScheduleOp::Remove { id } => w.schedules_remove.push(format!("{key}#{id}")),
        }
    }
}

/// Adds what a failed step stores: the error, the user's transcript line, and the bot's
/// `defaultErrorMessage` (if it has one) as a reply, transcribed and delivered.
fn write_for_failure(m: &InboundStep<'_>, at: &TranscriptAt<'_>, error: &str, w: &mut StepWrite) {
    w.errors.push(m.bot_error("step", error));
    let mut user_line = at.line("in", m.in_json.to_owned(), None, None, None);
    user_line.dep_version = Some(m.dep_version.to_owned());
    user_line.outcome = Some("error");
    w.transcripts.push(user_line);
    if let Some(text) = m
        .revision
        .default_error_message
        .as_deref()
        .map(str::to_owned)
    {
        let resp = runtime_core::session::Response {
            id: botbox_store::new_id(),
            msg_type: runtime_core::model::MsgType::Text,
            content: Some(text),
            payload: None,
            action: "defaultErrorMessage".into(),
            ref_id: m.item.message.id.clone(),
            flow: String::new(),
            intent: None,
        };
        w.transcripts.push(at.line(
            "out",
            serde_json::to_string(&resp).unwrap_or_default(),
            None,
            None,
            None,
        ));
        for d in channels::deliveries(&m.info, &m.item.user_id, std::slice::from_ref(&resp)) {
            w.outbox.push(delivery_row(d));
        }
    }
}

fn delivery_row(d: channels::Delivery) -> (String, String, String) {
    (
        d.url,
        serde_json::to_string(&d.headers).expect("headers serialise"),
        d.body.to_string(),
    )
}

/// The session the console and the converse endpoint start from.
pub fn console_session() -> Session {
    let mut s = Session::new("test~from~console");
    s.channel_id = Some("console-channel".into());
    s.environment_id = Some("console-environment".into());
    s.deployment_id = Some("console-deployment".into());
    s
}

pub fn empty_payload() -> Json {
    json!({})
}

/// The error codes with the numbers Kata gave them (kata-cli asks for user errors as group
/// 1000, codes 1001–1100, and system errors as group 4000, codes 4001–4100).
pub const ERROR_CODES: &[(&str, &str, u32)] = &[
    ("bot", "expression-error", 1001),
    ("bot", "api-error", 1002),
    ("bot", "method-error", 1003),
    ("bot", "nlu-error", 1004),
    ("bot", "timeout", 1005),
    ("bot", "error", 1099),
    ("step", "cpu-limit", 4001),
    ("step", "memory-limit", 4002),
    ("step", "time-limit", 4003),
    ("step", "too-many-responses", 4004),
    ("step", "max-recursion", 4005),
    ("step", "host-call-limit", 4006),
    ("step", "timeout", 4007),
    ("step", "error", 4099),
];

/// Bot errors recorded per step at most: a bot that errs in a loop cannot flood the table.
pub const ERRORS_PER_STEP: usize = 20;

/// A bot error of a step (`group`: `step` when it failed, `bot` for a user error in a step
/// that went on) on `channel` (a channel's id, or `console`, `agent`, `task`) for `user` (a
/// channel user, a console session, an agent conversation).
pub fn new_bot_error(
    project_id: &str,
    environment_id: &str,
    (channel, user): (&str, Option<&str>),
    group: &'static str,
    message: &str,
) -> botbox_store::NewBotError {
    botbox_store::NewBotError {
        project_id: project_id.to_owned(),
        environment_id: environment_id.to_owned(),
        channel_id: channel.to_owned(),
        user_id: user.map(str::to_owned),
        group,
        code: error_code(message).into(),
        message: message.chars().take(2_000).collect(),
    }
}

/// The `errorCode` of a bot error (`GET /projects/{id}/errors`), from its message: which
/// limit stopped a step, or which part of the bot failed.
pub fn error_code(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    let has = |w: &str| m.contains(w);
    if has("fuel") || has("cpu") {
        "cpu-limit"
    } else if has("memory") {
        "memory-limit"
    } else if has("deadline") || has("time limit") || has("took longer") {
        "time-limit"
    } else if has("responses") && has("at most") {
        "too-many-responses"
    } else if has("maxrecursion") || has("recursion") {
        "max-recursion"
    } else if has("timed out") || has("time-out") || has("timeout") {
        "timeout"
    } else if m.starts_with("api ") || has("api call") {
        "api-error"
    } else if m.starts_with("method ") || has("threw") {
        "method-error"
    } else if m.starts_with("nlu ") || m.starts_with("unknown nlu") {
        "nlu-error"
    } else if has("expression") || has("condition") {
        "expression-error"
    } else if has("host call") {
        "host-call-limit"
    } else {
        "error"
    }
}

/// A message as transcripts store it (secrets in its metadata redacted).
pub fn transcript_json(m: &Message) -> String {
    botbox_egress::redact::message_json(m)
}

/// Where a step's transcript lines go: environment `env`, channel `channel`, user `user`;
/// `step_us` is how long the step took (kept on the user's line).
pub struct TranscriptAt<'a> {
    pub env: &'a EnvironmentRow,
    pub channel: &'a str,
    pub user: &'a str,
    pub step_us: i64,
}

impl TranscriptAt<'_> {
    /// One line: `in` (the user's, with the step's time) or `out` (a reply).
    pub fn line(
        &self,
        direction: &'static str,
        message: String,
        flow: Option<String>,
        intent: Option<String>,
        state: Option<String>,
    ) -> NewTranscript {
        NewTranscript {
            project_id: self.env.project_id.clone(),
            environment_id: self.env.id.clone(),
            environment_name: self.env.name.clone(),
            channel_id: self.channel.to_owned(),
            user_id: self.user.to_owned(),
            direction,
            message,
            flow,
            intent,
            state,
            step_us: (direction == "in").then_some(self.step_us),
            dep_version: None,
            outcome: None,
            replay: None,
            miss: None,
            starts: false,
        }
    }
}

/// The transcript lines of a step that answered, at `at`: the user's message (with the
/// step's flow, intent and state) and each reply.
pub fn step_transcript(
    at: &TranscriptAt<'_>,
    in_json: &str,
    (messages, responses, meta): (&[Message], &[Response], Option<&Meta>),
) -> Vec<NewTranscript> {
    let state = meta.and_then(|m| m.last_state.clone());
    let mut lines = Vec::with_capacity(1 + responses.len());
    lines.push(at.line(
        "in",
        in_json.to_owned(),
        meta.and_then(|m| m.last_flow.clone()),
        messages.first().and_then(|m| m.intent.clone()),
        state.clone(),
    ));
    for resp in responses {
        lines.push(at.line(
            "out",
            serde_json::to_string(resp).unwrap_or_default(),
            Some(resp.flow.clone()),
            resp.intent.clone(),
            state.clone(),
        ));
    }
    lines
}
