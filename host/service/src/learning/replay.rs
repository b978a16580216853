//! Replays: an environment's recorded conversations run again on a bot revision, each from
//! a new session, each step with its recorded clock, seed and api answers
//! ([`super::record::Replayer`]), and what the revision answers compared with what the
//! users were answered. A replay writes nothing but its own row: no session, transcript,
//! delivery, analytics or inbox line, and it makes no api call.
//!
//! It runs in the background, one step at a time, as the project's tenant (the sandbox
//! shares the CPU between tenants as for live steps); at most one per project.

use super::record::{Replayer, StepRecord};
use crate::error::ServiceError;
use crate::live::{Live, LiveError, channel_session};
use botbox_sandbox::{Revision, SessionJson};
use botbox_store::{
    ConversationStart, EnvironmentRow, NewReplay, ReplayEnd, ReplayLine, ReplayRow, now_ms,
};
use runtime_core::session::{Message, Response};
use serde::Serialize;
use serde_json::{Value as Json, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Conversations one replay runs at most.
pub const REPLAY_MAX: i64 = 1_000;
/// Conversations a replay runs when not told.
pub const REPLAY_DEFAULT: i64 = 100;
/// A replay still marked running this long after it started was abandoned (its process
/// stopped); the next replay of the project marks it failed.
const ABANDONED_AFTER_MS: i64 = 30 * 60 * 1000;
/// Characters of a reply's text a difference shows at most.
const SHOWN_TEXT_MAX: usize = 2_000;
/// Replies a difference shows per side at most.
const SHOWN_REPLIES_MAX: usize = 20;

/// A replay asked for: which conversations, on which revision.
#[derive(Debug, Clone)]
pub struct ReplayAsk {
    pub bot_revision: String,
    /// The CMS revision the bot reads (`None`: the environment's deployment's).
    pub cms_revision: Option<String>,
    /// The newest `last` conversations that began in `[since, until]` (Unix ms).
    pub last: i64,
    pub since: Option<i64>,
    pub until: Option<i64>,
}

/// One conversation's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationResult {
    pub user_id: String,
    pub channel_id: String,
    /// When its first message arrived (Unix ms).
    pub started_at: i64,
    /// Its messages (the steps replayed, up to the first difference).
    pub messages: usize,
    /// `identical`, `differing` or `failed`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_difference: Option<Difference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where a conversation first went another way.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// The message's number in the conversation (from 1).
    pub message: usize,
    /// The user's message.
    pub input: Json,
    /// What the user was answered, and what the replayed revision answers: each reply's
    /// `type`, `content` and `payload`.
    pub before: Vec<Json>,
    pub after: Vec<Json>,
    /// An api call the replayed step made that the recorded one did not: `METHOD url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unrecorded_call: Option<String>,
}

/// Starts a replay of environment `env` of `project` (owned by `tenant`) for `who`: checks
/// the revision loads, records the replay as running (a `Conflict` while another of the
/// project's runs) and runs it in the background.
pub async fn start(
    live: &Arc<Live>,
    (project, tenant): (&str, &str),
    env: &EnvironmentRow,
    ask: ReplayAsk,
    who: &str,
) -> Result<ReplayRow, ServiceError> {
    if !(1..=REPLAY_MAX).contains(&ask.last) {
        return Err(ServiceError::Invalid(format!(
            "last: {} conversations; a replay runs 1 to {REPLAY_MAX}",
            ask.last
        )));
    }
    let cms = match &ask.cms_revision {
        Some(c) => Some(c.clone()),
        None => deployment_cms(live, env).await?,
    };
    let rev = replay_revision(live, env, &ask.bot_revision, cms.as_deref()).await?;
    let now = now_ms();
    live.db
        .replays()
        .fail_abandoned(project, now - ABANDONED_AFTER_MS, now)
        .await?;
    let row = live
        .db
        .replays()
        .start(&NewReplay {
            project_id: project,
            environment_id: &env.id,
            bot_revision: &ask.bot_revision,
            cms_revision: cms.as_deref(),
            requested_by: who,
            at: now_ms(),
        })
        .await
        .map_err(|e| match e {
            botbox_store::DbError::Conflict => ServiceError::Conflict(
                "a replay of this project is running; start another when it has finished".into(),
            ),
            e => e.into(),
        })?;
    let (live, id, env, tenant) = (live.clone(), row.id.clone(), env.clone(), tenant.to_owned());
    tokio::spawn(async move {
        let end = match run(&live, &tenant, &env, rev, &ask).await {
            Ok(results) => ended(results),
            Err(e) => {
                tracing::error!(replay = %id, error = %e, "replay failed");
                ReplayEnd {
                    status: "failed",
                    error: Some(e.to_string()),
                    at: now_ms(),
                    ..ReplayEnd::default()
                }
            }
        };
        if let Err(e) = live.db.replays().finish(&id, &end).await {
            tracing::error!(replay = %id, error = %e, "a replay's results could not be stored");
        }
    });
    Ok(row)
}

/// The environment's deployment's CMS revision.
async fn deployment_cms(live: &Live, env: &EnvironmentRow) -> Result<Option<String>, ServiceError> {
    let d = live
        .db
        .deployment(&env.project_id, &env.deployment_version)
        .await?;
    Ok(d.and_then(|d| d.cms_revision).filter(|c| !c.is_empty()))
}

/// Bot revision `bot` of the environment's project with CMS revision `cms`, reading the
/// project's NL models as they are now (as a deployment made now would: it pins the latest).
async fn replay_revision(
    live: &Live,
    env: &EnvironmentRow,
    bot: &str,
    cms: Option<&str>,
) -> Result<Arc<Revision>, ServiceError> {
    live.revision(&env.project_id, bot, cms)
        .await
        .map_err(|e| match e {
            LiveError::NotDeployed(m) => ServiceError::Invalid(format!("botRevision: {m}")),
            e => ServiceError::Internal(anyhow::anyhow!("{e}")),
        })
}

/// The row's end from the conversations' results.
fn ended(results: Vec<ConversationResult>) -> ReplayEnd {
    let count = |o: &str| results.iter().filter(|r| r.outcome == o).count() as i64;
    ReplayEnd {
        status: "done",
        conversations: results.len() as i64,
        identical: count("identical"),
        differing: count("differing"),
        failed: count("failed"),
        results: serde_json::to_string(&results).expect("results serialise"),
        error: None,
        at: now_ms(),
    }
}

/// Replays the asked conversations of `env`, oldest first.
pub async fn run(
    live: &Live,
    tenant: &str,
    env: &EnvironmentRow,
    rev: Arc<Revision>,
    ask: &ReplayAsk,
) -> Result<Vec<ConversationResult>, ServiceError> {
    let conversations = gather(live, env, ask).await?;
    let mut results = Vec::with_capacity(conversations.len());
    for c in conversations {
        results.push(replay_conversation(live, tenant, env, &rev, c).await);
    }
    Ok(results)
}

/// One recorded conversation: where it began and its lines, oldest first.
struct Conversation {
    start: ConversationStart,
    lines: Vec<ReplayLine>,
}

/// The newest `ask.last` conversations that began in the window, oldest first, each with its
/// user's lines up to the user's next session (or the window's end).
async fn gather(
    live: &Live,
    env: &EnvironmentRow,
    ask: &ReplayAsk,
) -> Result<Vec<Conversation>, ServiceError> {
    let until = ask.until.unwrap_or(i64::MAX);
    let window = (ask.since.unwrap_or(0), until);
    let replays = live.db.replays();
    let mut starts = replays.starts(&env.id, window, ask.last).await?;
    starts.reverse();
    let Some(first) = starts.first().map(|s| s.created_at) else {
        return Ok(vec![]);
    };
    let users: HashSet<(String, String)> = starts
        .iter()
        .map(|s| (s.channel_id.clone(), s.user_id.clone()))
        .collect();
    // A line of a conversation may be timed a little before its start (see `lines_of`).
    let lines = replays
        .lines_of(
            (&env.project_id, &env.name),
            &users,
            (first - 60_000, until),
        )
        .await?;
    let mut by_user: HashMap<(String, String), Vec<ReplayLine>> = HashMap::new();
    for l in lines {
        let key = (l.line.channel_id.clone(), l.line.user_id.clone());
        by_user.entry(key).or_default().push(l);
    }
    for lines in by_user.values_mut() {
        lines.sort_by(|a, b| a.line.id.cmp(&b.line.id));
    }
    Ok(starts
        .into_iter()
        .map(|start| {
            let key = (start.channel_id.clone(), start.user_id.clone());
            let lines = by_user
                .get(&key)
                .map_or(vec![], |all| session_lines(all, &start));
            Conversation { start, lines }
        })
        .collect())
}

/// A user's lines (in order) from `start` to before their next session's first line.
fn session_lines(all: &[ReplayLine], start: &ConversationStart) -> Vec<ReplayLine> {
    let from = all
        .iter()
        .position(|l| l.line.id == start.id)
        .unwrap_or(all.len());
    let rest = &all[from..];
    let to = rest
        .iter()
        .skip(1)
        .position(|l| l.starts.is_some())
        .map_or(rest.len(), |i| i + 1);
    rest[..to].to_vec()
}

/// One step of a recorded conversation: the user's line and the replies stored after it.
struct RecordedStep<'a> {
    user: &'a ReplayLine,
    replies: Vec<&'a ReplayLine>,
}

fn steps(lines: &[ReplayLine]) -> Vec<RecordedStep<'_>> {
    let mut out: Vec<RecordedStep> = vec![];
    for l in lines {
        match (l.line.direction.as_str(), out.last_mut()) {
            ("in", _) => out.push(RecordedStep {
                user: l,
                replies: vec![],
            }),
            (_, Some(step)) => step.replies.push(l),
            (_, None) => {}
        }
    }
    out
}

/// Replays one conversation from a new session; stops at its first difference.
async fn replay_conversation(
    live: &Live,
    tenant: &str,
    env: &EnvironmentRow,
    rev: &Arc<Revision>,
    c: Conversation,
) -> ConversationResult {
    let mut result = ConversationResult {
        user_id: c.start.user_id.clone(),
        channel_id: c.start.channel_id.clone(),
        started_at: c.start.created_at,
        messages: 0,
        outcome: "identical",
        first_difference: None,
        error: None,
    };
    let session = channel_session(env, &c.start.channel_id, &c.start.user_id);
    let mut session =
        SessionJson::new(serde_json::to_string(&session).expect("sessions serialise"));
    for (n, step) in steps(&c.lines).iter().enumerate() {
        result.messages = n + 1;
        match replay_step(live, tenant, rev, &session, step).await {
            Ok(StepReplayed::Same(next)) => session = next,
            Ok(StepReplayed::Differs(mut d)) => {
                d.message = n + 1;
                result.outcome = "differing";
                result.first_difference = Some(d);
                break;
            }
            Err(e) => {
                result.outcome = "failed";
                result.error = Some(format!("message {}: {e}", n + 1));
                break;
            }
        }
    }
    result
}

enum StepReplayed {
    /// The same replies: the session to go on from.
    Same(SessionJson),
    Differs(Difference),
}

/// Replays one step on `session`.
async fn replay_step(
    live: &Live,
    tenant: &str,
    rev: &Arc<Revision>,
    session: &SessionJson,
    step: &RecordedStep<'_>,
) -> Result<StepReplayed, String> {
    let record: StepRecord = step
        .user
        .replay
        .as_deref()
        .ok_or("it was stored without a replay record")
        .and_then(|r| serde_json::from_str(r).map_err(|_| "its replay record is unreadable"))?;
    let input: Json = serde_json::from_str(&step.user.line.message).unwrap_or(Json::Null);
    let message = Message::from_json(&input).map_err(|e| format!("the stored message: {e}"))?;
    let effects = Arc::new(Replayer::new(live.effects(), &record));
    let out = live
        .run_step_json_with(
            tenant,
            rev.clone(),
            session.clone(),
            message,
            effects.clone(),
        )
        .await
        .and_then(|(r, s)| {
            live.check_responses(r.responses.len())?;
            Ok((r, s))
        });
    let (after, next) = match out {
        Ok((report, next)) => (report.responses.iter().map(shown).collect(), next),
        Err(LiveError::Step(e)) if !record.failed => return Err(e),
        Err(LiveError::Step(_)) => (error_reply(rev), session.clone()),
        Err(e) => return Err(e.to_string()),
    };
    let before: Vec<Json> = step
        .replies
        .iter()
        .map(|l| {
            serde_json::from_str::<Response>(&l.line.message).map_or(Json::Null, |r| shown(&r))
        })
        .collect();
    if let Some(call) = effects.unkept() {
        return Err(format!(
            "the answer of {call} was not kept (a step's record keeps {} KiB of answers)",
            super::record::RECORD_BODIES_MAX / 1024
        ));
    }
    let unrecorded_call = effects.unrecorded();
    if before == after && unrecorded_call.is_none() {
        return Ok(StepReplayed::Same(next));
    }
    Ok(StepReplayed::Differs(Difference {
        message: 0,
        input,
        before: before.into_iter().take(SHOWN_REPLIES_MAX).collect(),
        after: after.into_iter().take(SHOWN_REPLIES_MAX).collect(),
        unrecorded_call,
    }))
}

/// What a failed step's user is sent: the bot's `defaultErrorMessage`, if it has one.
fn error_reply(rev: &Revision) -> Vec<Json> {
    rev.default_error_message
        .as_deref()
        .map(|t| vec![json!({"type": "text", "content": t})])
        .unwrap_or_default()
}

/// A reply as the user saw it: its type, text (cut) and payload.
fn shown(r: &Response) -> Json {
    let mut v = json!({"type": r.msg_type});
    if let Some(c) = &r.content {
        v["content"] = Json::String(c.chars().take(SHOWN_TEXT_MAX).collect());
    }
    if let Some(p) = &r.payload {
        v["payload"] = p.clone();
    }
    v
}
