//! The agent API under `/v1`: thin handlers over [`botbox_service::agent`]. Every answer here
//! is problem+json on error, carries the rate-limit fields of its policy, and honours
//! `Idempotency-Key` on POSTs.

use super::v1::{KeyCtx, json_body, too_large};
use super::{App, query_pairs};
use crate::v1_problem::{V1Error, V1Result};
use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use botbox_service::agent::run::{NewRun, RunHandle, RunTarget};
use botbox_service::agent::{self as agent_mod, Problem, stream};
use botbox_store::{AgentConversationRow, AgentRunRow, EnvironmentRow, ProjectRow, now_ms};
use runtime_core::session::Message;
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Messages of one request at most, and text bytes of the message that runs.
const MAX_MESSAGES: usize = 10_000;
const MAX_TEXT: usize = 64 << 10;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(post_chat))
        .routes(routes!(get_run))
        .routes(routes!(get_stream))
        .routes(routes!(cancel_run))
        .routes(routes!(steer_run))
}

// ---------------------------------------------------------------------------------------------
// POST /v1/chat

/// A UI message part (text parts are read; other types are kept in the history and ignored).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UiPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
    pub data: Option<Json>,
}

/// An AI SDK `UIMessage`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UiMessage {
    pub id: String,
    /// system, user or assistant
    pub role: String,
    pub parts: Vec<UiPart>,
}

/// The chat request (unknown fields are ignored).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatRequest {
    pub messages: Vec<UiMessage>,
    /// Continues this conversation (`conv_…`).
    pub conversation_id: Option<String>,
    /// The AI SDK client's chat id, mapped per agent to a conversation.
    pub id: Option<String>,
    pub trigger: Option<String>,
}

/// The answer of `POST /v1/chat` without `Accept: text/event-stream`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChatStarted {
    pub run_id: String,
    pub conversation_id: String,
    /// queued
    pub status: String,
    pub stream_url: String,
}

/// The bot message of a UI message: its text parts joined by newlines; with a `data-*` part
/// it is a data message whose payload is that part's `data` (a clicked button's postback). `None` when the
/// message has neither.
pub fn bot_message(m: &Json) -> Option<Message> {
    let parts = m.get("parts")?.as_array()?;
    let text: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .filter(|t| !t.trim().is_empty())
        .collect();
    let data = parts
        .iter()
        .find(|p| p["type"].as_str().is_some_and(|t| t.starts_with("data-")))
        .map(|p| p["data"].clone());
    if text.is_empty() && data.is_none() {
        return None;
    }
    let mut msg = Message::text(&text.join("\n"));
    msg.id = m["id"].as_str().unwrap_or_default().to_owned();
    if data.is_some() {
        // A data message (a clicked button's postback): the payload, and the text if any.
        msg.msg_type = runtime_core::model::MsgType::Data;
        if text.is_empty() {
            msg.content = None;
        }
    }
    msg.payload = data;
    Some(msg)
}

/// Validates the request's messages; returns the message that runs.
fn validate_chat(body: &Json) -> V1Result<Message> {
    let Some(msgs) = body.get("messages").and_then(Json::as_array) else {
        return Err(V1Error(Problem::invalid_at(
            "/messages",
            "messages must be a non-empty array",
        )));
    };
    if msgs.is_empty() {
        return Err(V1Error(Problem::invalid_at(
            "/messages",
            "messages must be a non-empty array",
        )));
    }
    if msgs.len() > MAX_MESSAGES {
        return Err(V1Error(Problem::invalid_at(
            "/messages",
            format!("at most {MAX_MESSAGES} messages"),
        )));
    }
    for (i, m) in msgs.iter().enumerate() {
        if !m["id"].is_string() {
            return Err(V1Error(Problem::invalid_at(
                &format!("/messages/{i}/id"),
                "a message needs a string id",
            )));
        }
        if !m["parts"].is_array() {
            return Err(V1Error(Problem::invalid_at(
                &format!("/messages/{i}/parts"),
                "a message needs parts",
            )));
        }
    }
    let last = msgs.len() - 1;
    if msgs[last]["role"] != "user" {
        return Err(V1Error(Problem::invalid_at(
            &format!("/messages/{last}/role"),
            "the last message must be the user's",
        )));
    }
    let m = bot_message(&msgs[last]).ok_or_else(|| {
        Problem::invalid_at(
            &format!("/messages/{last}/parts"),
            "the last message needs a non-empty text part (or a data part)",
        )
    })?;
    if m.content.as_deref().is_some_and(|t| t.len() > MAX_TEXT) {
        return Err(V1Error(Problem::invalid_at(
            &format!("/messages/{last}/parts"),
            format!("text over {MAX_TEXT} bytes"),
        )));
    }
    Ok(m)
}

/// Starts a chat run: one bot turn on the key's agent. JSON `{runId, conversationId}` at
/// once, or with `Accept: text/event-stream` the UI message stream itself.
#[utoipa::path(post, path = "/v1/chat", tag = "agent", request_body = ChatRequest,
    security(("bearer" = [])),
    responses((status = 200, body = ChatStarted, description = "the run, queued; or with Accept: text/event-stream the UI message stream (SSE)",
        headers(("X-Conversation-Id" = String), ("X-Run-Id" = String))),
        (status = 400, description = "invalid request (problem+json)"), (status = 401), (status = 403, description = "a workspace key"),
        (status = 404, description = "unknown conversationId"), (status = 409, description = "run-active"),
        (status = 413), (status = 415), (status = 429)))]
async fn post_chat(
    State(app): State<App>,
    Extension(key): Extension<KeyCtx>,
    headers: HeaderMap,
    bytes: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> V1Result<Response> {
    let env_id = key.agent_env()?.to_owned();
    let bytes = bytes.map_err(|_| too_large())?;
    let body = json_body(&headers, &bytes)?;
    let message = validate_chat(&body)?;
    let (env, project) = agent_of(&app, &env_id).await?;
    let conv = chat_conversation(&app, &env, &body).await?;
    if let Some(active) = app.db.active_agent_run(&conv.id).await? {
        return Err(V1Error(run_active(&conv.id, &active.id)));
    }
    append_history(&app, &conv, &body).await?;
    let run_id = agent_mod::new_prefixed(agent_mod::RUN_PREFIX);
    let handle = start_run(&app, &key, &run_id, &conv, env, project, message).await?;
    if wants_stream(&headers) {
        return Ok(stream_response(
            &app,
            &run_id,
            &conv.id,
            Some(handle),
            0,
            &headers,
        ));
    }
    Ok(chat_started(&run_id, &conv.id))
}

/// The environment and project of the key's agent, or 404 when either is gone.
async fn agent_of(app: &App, env_id: &str) -> V1Result<(EnvironmentRow, ProjectRow)> {
    let env =
        app.db.environment_by_id(env_id).await?.ok_or_else(|| {
            Problem::not_found("This key's agent (environment) no longer exists.")
        })?;
    let project = app
        .db
        .project(&env.project_id)
        .await?
        .ok_or_else(|| Problem::not_found("This key's project no longer exists."))?;
    Ok((env, project))
}

/// The chat's conversation: `conversationId` (404 if unknown), else the one of the client's
/// chat id (created on its first request), else a new one.
async fn chat_conversation(
    app: &App,
    env: &EnvironmentRow,
    body: &Json,
) -> V1Result<AgentConversationRow> {
    Ok(
        match (body["conversationId"].as_str(), body["id"].as_str()) {
            (Some(c), _) => {
                if !agent_mod::well_formed(c, agent_mod::CONVERSATION_PREFIX) {
                    return Err(V1Error(Problem::not_found(format!("No conversation {c}."))));
                }
                app.db
                    .agent_conversation(&env.id, c)
                    .await?
                    .ok_or_else(|| Problem::not_found(format!("No conversation {c}.")))?
            }
            (None, Some(chat)) if !chat.is_empty() && chat.len() <= 255 => {
                match app.db.agent_conversation_by_chat(&env.id, chat).await? {
                    Some(c) => c,
                    None => {
                        app.db
                            .insert_agent_conversation(
                                &agent_mod::new_prefixed(agent_mod::CONVERSATION_PREFIX),
                                &env.id,
                                Some(chat),
                            )
                            .await?
                    }
                }
            }
            _ => {
                app.db
                    .insert_agent_conversation(
                        &agent_mod::new_prefixed(agent_mod::CONVERSATION_PREFIX),
                        &env.id,
                        None,
                    )
                    .await?
            }
        },
    )
}

/// Appends the request's messages to the conversation's history.
async fn append_history(app: &App, conv: &AgentConversationRow, body: &Json) -> V1Result<()> {
    // History: only messages whose id is not stored yet are appended.
    let known: std::collections::HashSet<String> = app
        .db
        .agent_messages(&conv.id)
        .await?
        .into_iter()
        .map(|m| m.id)
        .collect();
    let mut new_msgs = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let id = m["id"].as_str().unwrap_or_default();
        if !known.contains(id)
            && !new_msgs
                .iter()
                .any(|(i, ..): &(String, String, String, Option<String>)| i == id)
        {
            new_msgs.push((
                id.to_owned(),
                m["role"].as_str().unwrap_or("user").to_owned(),
                m.to_string(),
                None,
            ));
        }
    }
    app.db.append_agent_messages(&conv.id, &new_msgs).await?;
    Ok(())
}

/// Starts run `run_id` of `message` in the conversation; 409 when another run got there
/// first.
async fn start_run(
    app: &App,
    key: &KeyCtx,
    run_id: &str,
    conv: &AgentConversationRow,
    env: EnvironmentRow,
    project: ProjectRow,
    message: Message,
) -> V1Result<Arc<RunHandle>> {
    let started = app
        .agents
        .start(NewRun {
            run_id: run_id.to_owned(),
            conversation_id: conv.id.clone(),
            key_id: key.key.id.clone(),
            target: RunTarget {
                env,
                tenant: project.owner_id,
            },
            message,
        })
        .await
        .map_err(Problem::internal)?;
    match started {
        Ok(h) => Ok(h),
        Err(active) => Err(V1Error(run_active(&conv.id, &active))),
    }
}

/// Whether the client asked for the UI message stream (`Accept: text/event-stream`).
fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"))
}

/// The JSON answer of a queued run, with its ids in the headers too.
fn chat_started(run_id: &str, conv_id: &str) -> Response {
    let mut r = axum::Json(ChatStarted {
        stream_url: format!("/v1/chat/{run_id}/stream"),
        run_id: run_id.to_owned(),
        conversation_id: conv_id.to_owned(),
        status: "queued".into(),
    })
    .into_response();
    id_headers(r.headers_mut(), run_id, conv_id);
    r
}

fn run_active(conv: &str, run: &str) -> Problem {
    Problem::conflict(
        "run-active",
        "A run is already active",
        format!("Conversation {conv} has run {run} in progress; steer it or wait."),
    )
    .with("activeRunId", json!(run))
}

fn id_headers(h: &mut HeaderMap, run: &str, conv: &str) {
    if let (Ok(r), Ok(c)) = (HeaderValue::from_str(run), HeaderValue::from_str(conv)) {
        h.insert("x-run-id", r);
        h.insert("x-conversation-id", c);
    }
}

// ---------------------------------------------------------------------------------------------
// Runs

/// A run of the key's agent, or 404 (another agent's run is not revealed).
async fn run_of(app: &App, key: &KeyCtx, run_id: &str) -> V1Result<AgentRunRow> {
    let env = key.agent_env()?;
    if !agent_mod::well_formed(run_id, agent_mod::RUN_PREFIX) {
        return Err(V1Error(Problem::not_found(format!("No run {run_id}."))));
    }
    match app.db.agent_run(run_id).await? {
        Some(r) if r.environment_id == env => Ok(r),
        _ => Err(V1Error(Problem::not_found(format!("No run {run_id}.")))),
    }
}

/// A run's status.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    pub run_id: String,
    pub conversation_id: String,
    /// queued, in_progress, completed, failed or cancelled
    pub status: String,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub error: Option<String>,
    pub steers: Vec<SteerStatus>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SteerStatus {
    pub steer_id: String,
    /// queued, delivered or expired
    pub status: String,
}

fn iso(ms: i64) -> String {
    botbox_service::agent::iso_ms(ms)
}

async fn run_status(app: &App, r: AgentRunRow) -> V1Result<RunStatus> {
    let steers = app
        .db
        .agent_steers(&r.id)
        .await?
        .into_iter()
        .map(|s| SteerStatus {
            steer_id: s.id,
            status: s.status,
        })
        .collect();
    Ok(RunStatus {
        run_id: r.id,
        conversation_id: r.conversation_id,
        status: r.status,
        created_at: iso(r.created_at),
        started_at: r.started_at.map(iso),
        ended_at: r.ended_at.map(iso),
        error: r.error,
        steers,
    })
}

/// A run's status and its steers.
#[utoipa::path(get, path = "/v1/chat/{runId}", tag = "agent", security(("bearer" = [])),
    params(("runId" = String, Path)),
    responses((status = 200, body = RunStatus), (status = 401), (status = 403), (status = 404)))]
async fn get_run(
    State(app): State<App>,
    Extension(key): Extension<KeyCtx>,
    Path(run_id): Path<String>,
) -> V1Result<axum::Json<RunStatus>> {
    let r = run_of(&app, &key, &run_id).await?;
    Ok(axum::Json(run_status(&app, r).await?))
}

/// Cancels a run (idempotent): a queued run at once, a run in progress at once too (its api
/// call in flight is aborted; the session stays as it was before the run). The stream ends
/// with `abort`.
#[utoipa::path(post, path = "/v1/chat/{runId}/cancel", tag = "agent", security(("bearer" = [])),
    params(("runId" = String, Path)),
    responses((status = 200, body = RunStatus), (status = 401), (status = 403), (status = 404)))]
async fn cancel_run(
    State(app): State<App>,
    Extension(key): Extension<KeyCtx>,
    Path(run_id): Path<String>,
) -> V1Result<axum::Json<RunStatus>> {
    let r = run_of(&app, &key, &run_id).await?;
    if matches!(r.status.as_str(), "queued" | "in_progress") {
        match app.agents.running(&run_id) {
            Some(h) => {
                h.cancel();
                // The answer shows the run ended: wait for its task to store the end.
                let _ = tokio::time::timeout(Duration::from_secs(5), h.wait_stored()).await;
            }
            None => {
                // Running in another process (PostgreSQL replicas): not reachable from here.
                return Err(V1Error(Problem::conflict(
                    "run-not-active",
                    "Run not reachable",
                    "This run is being processed by another server; try again.",
                )));
            }
        }
    }
    let r = run_of(&app, &key, &run_id).await?;
    Ok(axum::Json(run_status(&app, r).await?))
}

/// The steer request: a UI message (also accepted: `messages`, or `text`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SteerRequest {
    pub message: Option<UiMessage>,
    pub messages: Option<Vec<UiMessage>>,
    pub text: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SteerAccepted {
    pub run_id: String,
    pub steer_id: String,
    pub status: String,
}

/// Steers a run: the message is delivered at the run's next step boundary (one more bot
/// step in the same run, announced by a `data-steer` chunk). 409 when the run is not active.
#[utoipa::path(post, path = "/v1/chat/{runId}/steer", tag = "agent", security(("bearer" = [])),
    params(("runId" = String, Path)), request_body = SteerRequest,
    responses((status = 202, body = SteerAccepted), (status = 400), (status = 401), (status = 403), (status = 404),
        (status = 409, description = "run-not-active")))]
async fn steer_run(
    State(app): State<App>,
    Extension(key): Extension<KeyCtx>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> V1Result<Response> {
    let r = run_of(&app, &key, &run_id).await?;
    let body = json_body(&headers, &bytes)?;
    let ui = if body["message"].is_object() {
        body["message"].clone()
    } else if let Some(last) = body["messages"].as_array().and_then(|a| a.last()) {
        last.clone()
    } else if let Some(t) = body["text"].as_str() {
        json!({"id": agent_mod::new_prefixed("msg_"), "role": "user", "parts": [{"type": "text", "text": t}]})
    } else {
        return Err(V1Error(Problem::invalid_at(
            "/message",
            "a message (or messages, or text) is required",
        )));
    };
    let message = bot_message(&ui).ok_or_else(|| {
        Problem::invalid_at("/message/parts", "the message needs a non-empty text part")
    })?;
    let handle = app.agents.running(&run_id);
    let active = matches!(r.status.as_str(), "queued" | "in_progress");
    let Some(handle) = handle.filter(|h| active && !h.chunks_from(0).1 && !h.cancelled()) else {
        return Err(V1Error(Problem::conflict(
            "run-not-active",
            "The run is not active",
            format!(
                "Run {run_id} is {}; send a new chat message instead.",
                r.status
            ),
        )));
    };
    let steer_id = agent_mod::new_prefixed(agent_mod::STEER_PREFIX);
    let ui_id = ui["id"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| agent_mod::new_prefixed("msg_"));
    app.db
        .insert_agent_steer(&botbox_store::AgentSteerRow {
            id: steer_id.clone(),
            run_id: run_id.clone(),
            message: ui.to_string(),
            status: "queued".into(),
            created_at: now_ms(),
        })
        .await?;
    app.db
        .append_agent_messages(
            &r.conversation_id,
            &[(ui_id, "user".into(), ui.to_string(), Some(run_id.clone()))],
        )
        .await?;
    handle.steer(steer_id.clone(), message);
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(SteerAccepted {
            run_id,
            steer_id,
            status: "queued".into(),
        }),
    )
        .into_response())
}

// ---------------------------------------------------------------------------------------------
// GET /v1/chat/{id}/stream

/// The run's UI message stream: replayed from the start (or after `Last-Event-ID` /
/// `?after=`) and followed live until `[DONE]`. The id may also be a conversation id or the
/// client's chat id: their active run, or 204 when there is none.
#[utoipa::path(get, path = "/v1/chat/{runId}/stream", tag = "agent", security(("bearer" = [])),
    params(("runId" = String, Path, description = "a run id, a conversation id or the client's chat id"),
        ("Last-Event-ID" = Option<i64>, Header), ("after" = Option<i64>, Query)),
    responses((status = 200, content_type = "text/event-stream", description = "the AI SDK UI message stream (SSE), ending with [DONE]"),
        (status = 204, description = "no active run for that conversation"), (status = 401), (status = 403), (status = 404)))]
async fn get_stream(
    State(app): State<App>,
    Extension(key): Extension<KeyCtx>,
    Path(id): Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> V1Result<Response> {
    let env = key.agent_env()?.to_owned();
    let run = if id.starts_with(agent_mod::RUN_PREFIX) {
        run_of(&app, &key, &id).await?
    } else {
        let conv = if agent_mod::well_formed(&id, agent_mod::CONVERSATION_PREFIX) {
            app.db.agent_conversation(&env, &id).await?
        } else {
            app.db.agent_conversation_by_chat(&env, &id).await?
        };
        let Some(conv) = conv else {
            return Err(V1Error(Problem::not_found(format!(
                "No run or conversation {id}."
            ))));
        };
        match app.db.active_agent_run(&conv.id).await? {
            Some(r) => r,
            None => return Ok(StatusCode::NO_CONTENT.into_response()),
        }
    };
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .or_else(|| {
            query_pairs(uri.query())
                .get("after")
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    let handle = app.agents.running(&run.id);
    Ok(stream_response(
        &app,
        &run.id,
        &run.conversation_id,
        handle,
        after,
        &headers,
    ))
}

/// An SSE response over a run's log: from memory while this process runs it, else from the
/// store (polled while another process runs it).
fn stream_response(
    app: &App,
    run_id: &str,
    conv: &str,
    handle: Option<Arc<RunHandle>>,
    after: usize,
    req_headers: &HeaderMap,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(32);
    let db = app.db.clone();
    let run = run_id.to_owned();
    tokio::spawn(async move {
        let _ = match handle {
            Some(h) => follow_memory(h, after, &tx).await,
            None => follow_store(db, run, after, &tx).await,
        };
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|x| (x, rx))
    }));
    let mut r = Response::new(body);
    for (k, v) in stream::HEADERS {
        r.headers_mut()
            .insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
    // HTTP/1.1 only (never on HTTP/2).
    let _ = req_headers;
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    id_headers(r.headers_mut(), run_id, conv);
    r
}

type Tx = tokio::sync::mpsc::Sender<Result<Bytes, std::convert::Infallible>>;

async fn send(tx: &Tx, s: String) -> Result<(), ()> {
    tx.send(Ok(Bytes::from(s))).await.map_err(|_| ())
}

async fn follow_memory(h: Arc<RunHandle>, after: usize, tx: &Tx) -> Result<(), ()> {
    let mut rx = h.subscribe();
    let mut pos = after;
    loop {
        rx.borrow_and_update();
        let (chunks, ended) = h.chunks_from(pos);
        for c in &chunks {
            pos += 1;
            send(tx, stream::event(pos as i64, c)).await?;
        }
        if ended {
            return Ok(());
        }
        match tokio::time::timeout(Duration::from_secs(stream::KEEP_ALIVE_SECS), rx.changed()).await
        {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Ok(()),
            Err(_) => send(tx, stream::PING.to_owned()).await?,
        }
    }
}

async fn follow_store(db: botbox_store::Db, run: String, after: usize, tx: &Tx) -> Result<(), ()> {
    let mut pos = after as i64;
    let mut idle = Duration::ZERO;
    loop {
        let chunks = db.agent_chunks(&run, pos).await.map_err(|_| ())?;
        let mut done = false;
        for (seq, c) in &chunks {
            pos = *seq;
            done |= c == stream::DONE;
            send(tx, stream::event(*seq, c)).await?;
        }
        if done {
            return Ok(());
        }
        if chunks.is_empty() {
            // The whole log read: if the run has ended the stream is complete.
            match db.agent_run(&run).await.map_err(|_| ())? {
                Some(r) if !matches!(r.status.as_str(), "queued" | "in_progress") => {
                    let rest = db.agent_chunks(&run, pos).await.map_err(|_| ())?;
                    for (seq, c) in rest {
                        send(tx, stream::event(seq, &c)).await?;
                    }
                    return Ok(());
                }
                None => return Ok(()),
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        idle += Duration::from_millis(250);
        if idle >= Duration::from_secs(stream::KEEP_ALIVE_SECS) {
            idle = Duration::ZERO;
            send(tx, stream::PING.to_owned()).await?;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The playground page

/// A small chat page over the same API (paste an agent key), styled and sent as the
/// console's pages are (its policy allows no inline script).
pub async fn playground() -> Response {
    crate::console::asset("text/html; charset=utf-8", include_str!("playground.html"))
}

/// CORS for browser clients: any origin (keys, not cookies, authenticate),
/// the headers clients send, and the ids and limits exposed.
pub fn cors() -> tower_http::cors::CorsLayer {
    use tower_http::cors::{Any, CorsLayer};
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            HeaderName::from_static("idempotency-key"),
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([
            HeaderName::from_static("x-conversation-id"),
            HeaderName::from_static("x-run-id"),
            HeaderName::from_static("ratelimit"),
            HeaderName::from_static("ratelimit-policy"),
            header::RETRY_AFTER,
            HeaderName::from_static("idempotent-replayed"),
        ])
        .max_age(Duration::from_secs(600))
}
