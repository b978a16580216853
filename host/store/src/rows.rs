//! The rows of sessions, the outbox, transcripts, bot errors and schedules, as read and written.

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    pub body: String,
    pub version: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxRow {
    pub id: String,
    pub channel_id: String,
    pub url: String,
    pub headers: String,
    pub body: String,
    pub status: String,
    pub attempts: i64,
    pub next_at: i64,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TranscriptRow {
    pub id: String,
    pub environment_name: String,
    pub channel_id: String,
    pub user_id: String,
    pub direction: String,
    pub message: String,
    pub flow: Option<String>,
    pub intent: Option<String>,
    pub state: Option<String>,
    pub created_at: i64,
    /// On an incoming line: how long its step took, in microseconds.
    pub step_us: Option<i64>,
    /// On a channel's incoming line: the deployment version that served it.
    pub dep_version: Option<String>,
}

/// A transcript line to record.
#[derive(Debug, Clone)]
pub struct NewTranscript {
    pub project_id: String,
    pub environment_id: String,
    pub environment_name: String,
    pub channel_id: String,
    pub user_id: String,
    /// `in` or `out`.
    pub direction: &'static str,
    pub message: String,
    pub flow: Option<String>,
    pub intent: Option<String>,
    pub state: Option<String>,
    /// On an incoming line: how long its step took, in microseconds.
    pub step_us: Option<i64>,
    /// On a channel's incoming line: the deployment version that served it.
    pub dep_version: Option<String>,
    /// On a channel's incoming line: `ok`, `fallback` or `error` (see the migration).
    pub outcome: Option<&'static str>,
    /// On a channel's incoming line: what replaying its step needs (JSON).
    pub replay: Option<String>,
    /// On a channel's incoming fallback line: its group in the misunderstood inbox.
    pub miss: Option<String>,
    /// On a channel's incoming line: its step started from a new session.
    pub starts: bool,
}

/// A bot error to record with its step.
#[derive(Debug, Clone)]
pub struct NewBotError {
    pub project_id: String,
    pub environment_id: String,
    pub channel_id: String,
    /// The channel user (or console, agent conversation) whose step erred.
    pub user_id: Option<String>,
    /// `step` or `bot`.
    pub group: &'static str,
    pub code: String,
    pub message: String,
}

/// A recorded bot error.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BotErrorRow {
    pub id: String,
    pub environment_id: String,
    pub channel_id: String,
    pub user_id: Option<String>,
    pub created_at: i64,
    pub error_group: String,
    pub error_code: String,
    pub message: String,
}

/// Which bot errors to list.
#[derive(Debug, Clone, Default)]
pub struct BotErrorQuery {
    pub environment_id: Option<String>,
    pub channel_id: Option<String>,
    pub group: Option<String>,
    /// Any of these codes (empty: all).
    pub codes: Vec<String>,
    pub start: i64,
    pub end: i64,
    pub limit: i64,
    pub offset: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ScheduleRow {
    pub id: String,
    pub session_id: String,
    pub channel_id: String,
    pub user_id: String,
    pub message: String,
    pub next_at: i64,
    pub end_at: Option<i64>,
    pub every_ms: Option<i64>,
}
