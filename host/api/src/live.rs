//! The live surface: channel webhooks, the converse endpoint, transcripts.

use super::{ApiError, ApiResult, App, Body, Caller, project_for};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use botbox_sandbox::Revision;
use botbox_service::auth::{Action, Resource};
use botbox_service::live::{LiveError, Receipt, console_session};
use botbox_store::{EnvironmentRow, ProjectRow};
use runtime_core::session::{ConverseResult, Message, Session};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json_, json};
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(converse))
        .routes(routes!(list_transcript))
        .routes(routes!(transcripts))
        .routes(routes!(analytics))
        .routes(routes!(list_errors))
}

/// Webhooks are called by providers: no token, no project-API rate limit (the channel's
/// `rpmLimit` applies instead).
/// Largest webhook body (1 MiB: a provider's batch of events); larger → 413.
pub const WEBHOOK_BODY_LIMIT: usize = 1 << 20;

pub fn webhook_routes() -> axum::Router<App> {
    axum::Router::new().route(
        "/webhooks/{channelId}",
        axum::routing::post(webhook).get(webhook),
    )
}

impl From<LiveError> for ApiError {
    fn from(e: LiveError) -> Self {
        match e {
            LiveError::Step(m) => ApiError::StepFailed(m),
            LiveError::NotDeployed(m) => ApiError::NotFound(m),
            LiveError::Busy(m) => ApiError::Busy(m),
            LiveError::Internal(e) => ApiError::Internal(e),
        }
    }
}

/// A provider's call: the receive pipeline runs it, detached from this connection
/// ([`botbox_service::live::Live::receive`]); this only turns its receipt into a response. The body
/// is taken after the call has gone to its lane ([`botbox_service::live::Live::arrival`]).
async fn webhook(
    State(app): State<App>,
    Path(channel_id): Path<String>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    use axum::extract::FromRequest;
    let lane = app.live.arrival(&channel_id).await;
    let (parts, body) = request.into_parts();
    let query = parts.uri.query().map(str::to_owned);
    let headers = parts.headers.clone();
    // A body over the limit without a length is cut as it arrives (413 in words).
    let body =
        match Bytes::from_request(axum::extract::Request::from_parts(parts, body), &app).await {
            Ok(body) => body,
            Err(r) if r.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(super::BodyLimit(WEBHOOK_BODY_LIMIT).refusal(None));
            }
            Err(rejection) => return Ok(rejection.into_response()),
        };
    match app
        .live
        .receive_detached(lane, channel_id, query, headers, body)
        .await
    {
        Receipt::Done { .. } => Ok(Json(json!({"status": "ok"})).into_response()),
        Receipt::Handshake { content_type, body } => {
            Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
        }
        Receipt::NotFound(m) => Err(ApiError::NotFound(m)),
        Receipt::BadSignature(m) => Ok((
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("Bad signature: {m}"),
        )
            .into_response()),
        Receipt::BadPayload(m) => Err(ApiError::bad(m)),
        Receipt::RateLimited(n) => Err(ApiError::RateLimited(n)),
        Receipt::Busy(m) => Err(ApiError::Busy(m)),
        Receipt::Failed(e) => Err(ApiError::Internal(e)),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConverseRequest {
    /// `{type, content?, payload?, metadata?}`.
    #[schema(value_type = Object)]
    pub message: Json_,
    /// Stateless: the step runs on this session and returns the new one; nothing is stored.
    #[schema(value_type = Option<Object>)]
    pub session: Option<Json_>,
    /// Stateful: the server keeps this session between calls.
    pub session_id: Option<String>,
    /// Run the environment's deployed revision (by name or slug).
    pub environment_name: Option<String>,
    /// Run this revision (default: the latest).
    pub revision: Option<String>,
    /// With `environmentName`: record the step in the environment's transcripts as channel
    /// `console`, the caller's user name as the user (the console's chat tester). Test
    /// traffic: analytics leave it out unless asked.
    #[serde(default)]
    pub record: bool,
}

/// Runs one conversation step (the console's and tests' entry point). A failed step is a 400
/// whose body is the error text.
#[utoipa::path(post, path = "/projects/{projectId}/bot/converse", tag = "bot",
    params(("projectId" = String, Path)), request_body = ConverseRequest,
    responses((status = 200, description = "{messages, responses, session, duration}", body = Object),
        (status = 400, description = "the step failed: its error text"), (status = 404)))]
async fn converse(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    Body(req): Body<ConverseRequest>,
) -> ApiResult<Json<Json_>> {
    // A step performs the bot's api calls and may change stored sessions: update rights.
    let project = project_for(&app, &caller, &pid, Action::Update, Resource::Projects).await?;
    let (env, rev) = converse_revision(&app, &project, &pid, &req).await?;
    let env_id = env.as_ref().map(|e| e.id.clone()).unwrap_or_default();
    let message =
        Message::from_json(&req.message).map_err(|e| ApiError::bad(format!("message: {e}")))?;
    let recorded = env.as_ref().filter(|_| req.record);
    let in_json = botbox_service::live::transcript_json(&message);
    let started = std::time::Instant::now();
    // The step's api and method calls, for the author's debug view.
    let log = Arc::new(botbox_service::effects::CallLog::new(app.live.effects()));
    let effects: Arc<dyn botbox_sandbox::effects::Effects> = log.clone();
    let on = console_session_of(&req, &pid)?;
    let result = run_console_step(&app, &project.owner_id, on, rev, message, effects).await;
    // The console's errors are the bot's errors too (channel `console`, the session as user,
    // or who chatted when the step is recorded).
    let console_user = match recorded {
        Some(_) => Some(caller.username.as_str()),
        None => req.session_id.as_deref(),
    };
    if let (Some(e), Ok(r)) = (recorded, &result) {
        record_console_transcript(&app, e, &caller.username, started, &in_json, r).await?;
    }
    record_console_errors(&app, &pid, &env_id, console_user, &result).await;
    let result = result?;
    let mut answer = serde_json::to_value(result).map_err(|e| ApiError::Internal(e.into()))?;
    answer["calls"] = Json_::Array(log.take());
    Ok(Json(answer))
}

/// The revision a console step runs, with the environment when it runs one's deployed
/// revision: the environment's, else the named revision, else the project's latest.
async fn converse_revision(
    app: &App,
    project: &ProjectRow,
    pid: &str,
    req: &ConverseRequest,
) -> ApiResult<(Option<EnvironmentRow>, Arc<Revision>)> {
    Ok(match (&req.environment_name, &req.revision) {
        (Some(name), _) => {
            let e = named_environment(app, pid, name).await?;
            let rev = app.live.environment_revision(&e).await?;
            (Some(e), rev)
        }
        // Outside an environment the bot reads the latest CMS revision.
        (None, Some(r)) => {
            let cms = project.cms_latest_revision.as_deref();
            (None, app.live.revision(pid, r, cms).await?)
        }
        (None, None) => {
            let r = project.bot_latest_revision.as_deref().ok_or_else(|| {
                ApiError::not_found(format!("project {pid} has no bot revision yet"))
            })?;
            let cms = project.cms_latest_revision.as_deref();
            (None, app.live.revision(pid, r, cms).await?)
        }
    })
}

/// The session a console step runs on.
enum ConsoleSession {
    /// Stateless: the request's session; nothing is stored.
    Given(Box<Session>),
    /// Stateful: the session stored under this key.
    Stored(String),
    /// Stateless, from a new session.
    New,
}

/// The session the request asks for: its own (400 if it does not parse), a stored one by id,
/// or a new one.
fn console_session_of(req: &ConverseRequest, pid: &str) -> ApiResult<ConsoleSession> {
    Ok(match (&req.session, &req.session_id) {
        (Some(s), _) => ConsoleSession::Given(Box::new(
            serde_json::from_value(s.clone())
                .map_err(|e| ApiError::bad(format!("session: {e}")))?,
        )),
        (None, Some(sid)) => ConsoleSession::Stored(format!("console:{pid}:{sid}")),
        (None, None) => ConsoleSession::New,
    })
}

/// Runs the step on `on` in `tenant`'s turn; a step over the cap on responses fails.
async fn run_console_step(
    app: &App,
    tenant: &str,
    on: ConsoleSession,
    rev: Arc<Revision>,
    message: Message,
    effects: Arc<dyn botbox_sandbox::effects::Effects>,
) -> Result<ConverseResult, LiveError> {
    match on {
        ConsoleSession::Given(session) => app
            .live
            .run_step_with(tenant, rev, *session, message, effects)
            .await
            .map(|d| d.result),
        ConsoleSession::Stored(key) => {
            app.live
                .converse_stored(&key, tenant, rev, message, effects)
                .await
        }
        ConsoleSession::New => app
            .live
            .run_step_with(tenant, rev, console_session(), message, effects)
            .await
            .map(|d| d.result),
    }
    .and_then(|r| app.live.check_responses(r.responses.len()).map(|()| r))
}

/// Records a console step in environment `env`'s transcripts as channel `console`, `user`
/// as the user.
async fn record_console_transcript(
    app: &App,
    env: &EnvironmentRow,
    user: &str,
    started: std::time::Instant,
    in_json: &str,
    r: &ConverseResult,
) -> ApiResult<()> {
    let step_us = i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX);
    let at = botbox_service::live::TranscriptAt {
        env,
        channel: "console",
        user,
        step_us,
    };
    let lines = botbox_service::live::step_transcript(
        &at,
        in_json,
        (&r.messages, &r.responses, r.session.meta.as_ref()),
    );
    app.db.insert_transcripts(&lines).await?;
    Ok(())
}

/// Records a console step's bot errors (its own, or its failure) as channel `console`.
async fn record_console_errors(
    app: &App,
    pid: &str,
    env_id: &str,
    user: Option<&str>,
    result: &Result<ConverseResult, LiveError>,
) {
    match result {
        Ok(r) => {
            app.live
                .record_errors(pid, env_id, ("console", user), Ok(&r.errors))
                .await
        }
        Err(LiveError::Step(e)) => {
            app.live
                .record_errors(pid, env_id, ("console", user), Err(e))
                .await
        }
        Err(_) => {}
    }
}

/// Transcripts of an environment between two times (Unix milliseconds, inclusive): every
/// incoming and outgoing message, oldest first, as maps of strings.
#[utoipa::path(get, path = "/analytics/{botId}/{environmentName}/list_transcript", tag = "analytics",
    params(("botId" = String, Path, description = "the project id"), ("environmentName" = String, Path),
        ("startTimeStamp" = Option<i64>, Query), ("endTimeStamp" = Option<i64>, Query)),
    responses((status = 200, body = [Object])))]
async fn list_transcript(
    State(app): State<App>,
    caller: Caller,
    Path((pid, env_name)): Path<(String, String)>,
    uri: Uri,
) -> ApiResult<Json<Vec<Map<String, Json_>>>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let q = super::query_pairs(uri.query());
    let num = |name: &str, default: i64| unix_ms(&q, name, default);
    let start = num("startTimeStamp", 0)?;
    let end = num("endTimeStamp", i64::MAX)?;
    let env = named_environment(&app, &pid, &env_name).await?;
    let rows = app.db.list_transcripts(&pid, &env.name, start, end).await?;
    let s = |v: Option<String>| Json_::String(v.unwrap_or_default());
    Ok(Json(
        rows.into_iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("id".into(), Json_::String(r.id));
                m.insert("environment".into(), Json_::String(r.environment_name));
                m.insert("channelId".into(), Json_::String(r.channel_id));
                m.insert("userId".into(), Json_::String(r.user_id));
                m.insert("direction".into(), Json_::String(r.direction));
                m.insert("message".into(), Json_::String(r.message));
                m.insert("flow".into(), s(r.flow));
                m.insert("intent".into(), s(r.intent));
                m.insert("state".into(), s(r.state));
                m.insert("timestamp".into(), Json_::String(r.created_at.to_string()));
                m
            })
            .collect(),
    ))
}

/// Counts of one time bucket of [`AnalyticsView`].
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsBucket {
    /// The bucket's start, Unix ms.
    pub start: i64,
    /// Messages from users.
    pub messages: i64,
    /// Messages from the bot.
    pub replies: i64,
    /// Distinct users who wrote.
    pub active_users: i64,
    /// Bot errors (failed steps and user errors).
    pub errors: i64,
    /// The steps' latency in microseconds, median and 99th percentile, to two significant
    /// digits rounded down (`null` without timed steps).
    pub latency_p50_us: Option<i64>,
    pub latency_p99_us: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Counted {
    pub name: String,
    pub count: i64,
}

/// An environment's analytics over a time range.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsView {
    pub environment: String,
    /// The range, Unix ms: `[from, to)`.
    pub from: i64,
    pub to: i64,
    /// `hour` or `day` (UTC).
    pub bucket: String,
    /// Buckets with any message or error, in order (empty ones are left out).
    pub series: Vec<AnalyticsBucket>,
    pub messages: i64,
    /// Distinct users who wrote in the range.
    pub active_users: i64,
    /// Share of users' messages no intent matched (no intent, or the one named
    /// `fallback`); 0 without messages.
    pub fallback_rate: f64,
    /// Users' messages by intent and by flow, the 10 most frequent.
    pub top_intents: Vec<Counted>,
    pub top_flows: Vec<Counted>,
    /// Channel users' messages by the deployment version that answered them (`name`: the
    /// version), most first: two while a canary runs.
    pub versions: Vec<Counted>,
    /// Step latency over the whole range, as in each bucket.
    pub latency_p50_us: Option<i64>,
    pub latency_p99_us: Option<i64>,
}

/// An environment's analytics, aggregated by the server: messages, replies, active users,
/// errors and step latency (p50, p99) per hour or day, top intents and flows, fallback rate.
/// `from`/`to` are Unix ms (default: the last 7 days), widened to whole buckets (the answer's
/// `from`/`to` are the range counted); `bucket` is `hour` or `day` (default: hours up to 3
/// days, else days); at most 2,000 buckets. The console's chat tester (channel `console`) counts
/// only with `includeTests=true`.
#[utoipa::path(get, path = "/projects/{projectId}/analytics", tag = "analytics",
    params(("projectId" = String, Path), ("environment" = String, Query, description = "name or slug"),
        ("from" = Option<i64>, Query), ("to" = Option<i64>, Query), ("bucket" = Option<String>, Query),
        ("includeTests" = Option<bool>, Query)),
    responses((status = 200, body = AnalyticsView), (status = 400), (status = 404)))]
async fn analytics(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    uri: Uri,
) -> ApiResult<Json<AnalyticsView>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let q = super::query_pairs(uri.query());
    let num = |name: &str, default: i64| unix_ms(&q, name, default);
    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 24 * HOUR;
    let env = environment_param(&app, &pid, &q).await?;
    let to = num("to", botbox_store::now_ms())?;
    let from = num("from", to - 7 * DAY)?;
    if from >= to {
        return Err(ApiError::bad(format!(
            "from: must be before to (got from {from}, to {to})"
        )));
    }
    let bucket = match q.get("bucket").map(String::as_str) {
        None if to - from <= 3 * DAY => "hour",
        None => "day",
        Some(b @ ("hour" | "day")) => b,
        Some(other) => {
            return Err(ApiError::bad(format!(
                "bucket: hour or day (got {other:?})"
            )));
        }
    };
    let bucket_ms = if bucket == "hour" { HOUR } else { DAY };
    if (to - from) / bucket_ms > 2_000 {
        return Err(ApiError::bad(format!(
            "from, to: at most 2000 {bucket}s at once"
        )));
    }
    let include_tests = match q.get("includeTests").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad(format!(
                "includeTests: true or false (got {other:?})"
            )));
        }
    };
    let a = app
        .db
        .analytics(
            &pid,
            (&env.name, &env.id),
            from,
            to,
            bucket_ms,
            include_tests,
        )
        .await?;
    let counted = |v: Vec<(String, i64)>| {
        v.into_iter()
            .map(|(name, count)| Counted { name, count })
            .collect()
    };
    Ok(Json(AnalyticsView {
        environment: env.name,
        from: a.from,
        to: a.to,
        bucket: bucket.into(),
        series: a
            .buckets
            .into_iter()
            .map(|b| AnalyticsBucket {
                start: b.start,
                messages: b.messages,
                replies: b.replies,
                active_users: b.active_users,
                errors: b.errors,
                latency_p50_us: b.latency.p50_us,
                latency_p99_us: b.latency.p99_us,
            })
            .collect(),
        messages: a.messages,
        active_users: a.active_users,
        fallback_rate: if a.messages == 0 {
            0.0
        } else {
            a.fallback_messages as f64 / a.messages as f64
        },
        top_intents: counted(a.top_intents),
        top_flows: counted(a.top_flows),
        versions: counted(a.versions),
        latency_p50_us: a.latency.p50_us,
        latency_p99_us: a.latency.p99_us,
    }))
}

/// The project's environment named (or slugged) by the `environment` query parameter: a 400
/// when it is missing, a 404 when there is none.
async fn environment_param(
    app: &App,
    pid: &str,
    q: &std::collections::HashMap<String, String>,
) -> ApiResult<botbox_store::EnvironmentRow> {
    let name = q
        .get("environment")
        .ok_or_else(|| ApiError::bad("environment: the environment's name is required"))?;
    named_environment(app, pid, name).await
}

/// Project `pid`'s environment called `name`; a 404 naming it when there is none.
async fn named_environment(
    app: &App,
    pid: &str,
    name: &str,
) -> ApiResult<botbox_store::EnvironmentRow> {
    app.db
        .environment_by_name(pid, name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("environment {name}")))
}

/// The query parameter `name` as Unix milliseconds, or `default` when absent; a 400 naming
/// it when it is not a number.
fn unix_ms(
    q: &std::collections::HashMap<String, String>,
    name: &str,
    default: i64,
) -> ApiResult<i64> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| ApiError::bad(format!("{name}: Unix time in milliseconds (got {v:?})"))),
    }
}

/// A transcript line with its message as an object.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptLine {
    pub id: String,
    pub environment: String,
    pub channel_id: String,
    pub user_id: String,
    /// `in` (from the user) or `out` (from the bot).
    pub direction: String,
    /// The message as the bot received or sent it (`{type, content?, payload?, …}`).
    #[schema(value_type = Object)]
    pub message: Json_,
    pub flow: Option<String>,
    pub intent: Option<String>,
    pub state: Option<String>,
    /// Unix milliseconds.
    pub timestamp: i64,
    /// On a user's message: how long the bot's step took, in microseconds.
    pub step_us: Option<i64>,
    /// On a channel user's message: the deployment version that answered it (the
    /// environment's, or its canary's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dep_version: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transcript {
    pub data: Vec<TranscriptLine>,
    /// Give it as `after` to read the next page (`null`: this was the last).
    pub next_after: Option<i64>,
}

/// An environment's transcript, oldest first, its messages as objects: lines after
/// `after` (Unix ms, exclusive; default the beginning) up to `end`, of one user or all,
/// `limit` per page (1 to 1000, default 200). The shape is `list_transcript`'s.
#[utoipa::path(get, path = "/projects/{projectId}/transcripts", tag = "analytics",
    params(("projectId" = String, Path), ("environment" = String, Query, description = "name or slug"),
        ("user" = Option<String>, Query), ("after" = Option<i64>, Query), ("end" = Option<i64>, Query),
        ("limit" = Option<i64>, Query)),
    responses((status = 200, body = Transcript), (status = 400), (status = 404)))]
async fn transcripts(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    uri: Uri,
) -> ApiResult<Json<Transcript>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let q = super::query_pairs(uri.query());
    let num = |name: &str, default: i64| unix_ms(&q, name, default);
    let env = environment_param(&app, &pid, &q).await?;
    let limit = match q.get("limit") {
        None => 200,
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| ApiError::bad(format!("limit: 1 to 1000 (got {v:?})")))?,
    };
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad(format!("limit: 1 to 1000 (got {limit})")));
    }
    let rows = app
        .db
        .transcript_page(
            &pid,
            &env.name,
            q.get("user").map(String::as_str),
            num("after", -1)?,
            num("end", i64::MAX)?,
            limit,
        )
        .await?;
    let next_after = (rows.len() as i64 == limit).then(|| rows.last().map_or(0, |r| r.created_at));
    let data = rows
        .into_iter()
        .map(|r| TranscriptLine {
            message: serde_json::from_str(&r.message).unwrap_or(Json_::String(r.message)),
            id: r.id,
            environment: r.environment_name,
            channel_id: r.channel_id,
            user_id: r.user_id,
            direction: r.direction,
            flow: r.flow,
            intent: r.intent,
            state: r.state,
            timestamp: r.created_at,
            step_us: r.step_us,
            dep_version: r.dep_version,
        })
        .collect();
    Ok(Json(Transcript { data, next_after }))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BotError {
    pub error_id: String,
    /// Unix milliseconds.
    pub timestamp: i64,
    /// `step` (the step failed and the session was kept) or `bot` (a user error in a step
    /// that went on).
    pub error_group: String,
    /// `cpu-limit`, `memory-limit`, `time-limit`, `too-many-responses`, `max-recursion`,
    /// `timeout`, `api-error`, `method-error`, `nlu-error`, `expression-error`,
    /// `host-call-limit` or `error`.
    pub error_code: String,
    pub error_message: String,
    pub environment_id: String,
    pub channel_id: String,
    /// The user whose step erred: a channel user, or the conversation of a console or agent
    /// step (`null` for task steps). With the time it finds the conversation in
    /// `GET /projects/{id}/transcripts`.
    pub user_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BotErrors {
    pub page: i64,
    pub limit: i64,
    pub data: Vec<BotError>,
}

/// The bot's errors, newest first: steps that failed (a limit, a trap) and user errors of
/// steps that went on (an expression, an api call, a method, an NLU), recorded with the step
/// per environment and channel. Filters: `environmentId`, `channelId`, `errorGroup`,
/// `errorCode`, `start`/`end` (Unix milliseconds, inclusive).
#[utoipa::path(get, path = "/projects/{projectId}/errors", tag = "analytics",
    params(("projectId" = String, Path), ("environmentId" = Option<String>, Query), ("channelId" = Option<String>, Query),
        ("errorGroup" = Option<String>, Query), ("errorCode" = Option<String>, Query),
        ("start" = Option<i64>, Query), ("end" = Option<i64>, Query), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = BotErrors), (status = 404)))]
async fn list_errors(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    paging: super::Paging,
    uri: Uri,
) -> ApiResult<Json<BotErrors>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let q = super::query_pairs(uri.query());
    // Unix milliseconds, or an RFC 3339 time (kata-cli sends `2026-11-23T00:00:00.123Z`).
    let time = |name: &str, default: i64| -> ApiResult<i64> {
        match q.get(name).filter(|v| !v.is_empty()) {
            None => Ok(default),
            Some(v) => v
                .parse::<i64>()
                .ok()
                .or_else(|| {
                    time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339)
                        .ok()
                        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
                })
                .ok_or_else(|| {
                    ApiError::bad(format!(
                        "{name}: Unix time in milliseconds or an RFC 3339 time (got {v:?})"
                    ))
                }),
        }
    };
    let text = |name: &str| q.get(name).filter(|v| !v.is_empty()).cloned();
    // Groups and codes by name (`bot`, `cpu-limit`) or by Kata's numbers (1000, 4001), codes
    // as a comma-separated list.
    let group = text("errorGroup").map(|g| match g.as_str() {
        "1000" => "bot".to_string(),
        "4000" => "step".to_string(),
        _ => g,
    });
    let codes: Vec<String> = text("errorCode")
        .map(|c| {
            c.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| match c.parse::<u32>() {
                    Ok(n) => botbox_service::live::ERROR_CODES
                        .iter()
                        .find(|e| e.2 == n)
                        .map_or_else(|| c.to_string(), |e| e.1.to_string()),
                    Err(_) => c.to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let query = botbox_store::BotErrorQuery {
        environment_id: text("environmentId"),
        channel_id: text("channelId"),
        group,
        codes,
        start: time("start", 0)?,
        end: time("end", i64::MAX)?,
        limit: paging.limit,
        offset: paging.offset(),
    };
    let rows = app.db.bot_errors(&pid, &query).await?;
    Ok(Json(BotErrors {
        page: paging.page,
        limit: paging.limit,
        data: rows
            .into_iter()
            .map(|r| BotError {
                error_id: r.id,
                timestamp: r.created_at,
                error_group: r.error_group,
                error_code: r.error_code,
                error_message: r.message,
                environment_id: r.environment_id,
                channel_id: r.channel_id,
                user_id: r.user_id,
            })
            .collect(),
    }))
}
