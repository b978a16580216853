//! The HTTP APIs: the bot project API, channel webhooks, the agent API under
//! `/v1` and Cases; the router, the caller's identity, errors, paging, rate limits.
//!
//! May depend on: `botbox-service` and the crates below it that it reads or names
//! (`runtime-core`, `botbox-api-types`, `botbox-lanes`, `botbox-nlu`, `botbox-channels`,
//! `botbox-store`, `botbox-sandbox`). Must never hold logic beyond mapping HTTP to plain
//! service and storage calls and back, nor build the services it calls: the `botbox`
//! binary builds and starts them ([`Services`]).
//!
//! Handlers are thin: they check who is calling and what they may do, call one service
//! function or [`botbox_store`] read, and shape the documented JSON. Errors are plain-text
//! bodies ([`ApiError`]) on the project API and problem+json ([`v1_problem::V1Error`]) on
//! `/v1`.
// A `/v1` error is a problem+json body (`Problem`, ~180 bytes) on the error path only: its
// size costs nothing on the path that succeeds, and boxing it would cost an allocation there.
#![allow(clippy::result_large_err)]

mod accounts;
pub mod agent;
mod audit;
mod canary;
mod cases;
mod cms;
mod console;
mod deploy;
pub mod exposition;
mod kata;
mod keys;
mod learning;
mod live;
pub mod nlu;
pub mod overload;
mod overview;
mod problems;
mod projects;
pub mod v1;
pub mod v1_problem;

pub use accounts::check_new_user;

use axum::Router;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
pub use botbox_api_types::PageOf;
use botbox_service::agent::keys::KeyKind;
use botbox_service::auth::{Acting, Action, Principal, Reach, Resource, Role, token_hash};
use botbox_service::live::Live;
use botbox_store::{Db, DbError, ProjectRow};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

/// Settings of the project API, in one typed place.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Base URL the outside world reaches this server at; channel webhooks are built from it.
    pub public_url: String,
    /// Requests per minute per token (per address without one).
    pub rate_limit_per_minute: u32,
    /// Lifetime of tokens from `POST /login` and `POST /tokens`, in seconds.
    pub token_ttl_secs: i64,
    /// Largest accepted request body, in bytes (4 MiB). Bodies are read whole before a
    /// handler runs, so this bounds the memory one request can take.
    pub body_limit: usize,
    /// Largest bot document accepted as a revision, in bytes of its JSON (1 MiB). Compiling
    /// is linear in the document, so this bounds the CPU one push can take; real bots are
    /// a few tens of KB.
    pub bot_limit: usize,
    /// Bot compilations running at once (default: half the cores, at least one). They run on
    /// blocking threads, never on the async workers, so a flood of pushes queues here
    /// instead of delaying other requests.
    pub compile_slots: usize,
    /// Threads that hash passwords (argon2id: ~19 MiB and tens of ms each; default: the
    /// cores). Excess requests wait; past `password_queue` waiting ones they get 503, so a
    /// flood of logins cannot take the server's memory or CPU.
    pub password_slots: usize,
    pub password_queue: usize,
    /// Failed logins allowed per account and address per 15 minutes (10); then 429 for that
    /// account from that address (other addresses still sign in). An address also has 50
    /// failures per 15 minutes whatever the accounts, and shares the per-minute rate limit.
    pub login_failures_per_account: u32,
    /// Agent API (`/v1`) quotas per key and minute: the `chat` policy (POST /v1/chat, steer,
    /// cancel) and the `read` policy (GETs; opening a stream counts once).
    pub agent_chat_per_minute: u32,
    pub agent_read_per_minute: u32,
    /// The server key every webhook secret and artifact URL signature derives from
    /// (`--secret-key`/`BOTBOX_SECRET_KEY`, else `secret.key` in the data folder; random
    /// for an in-process test). Replicas on one database must share it: a secret shown by
    /// one must verify on the others.
    pub server_key: botbox_service::cases::webhooks::ServerKey,
    /// Caps on requests in flight and the time-out on answers ([`overload`]).
    pub overload: overload::Overload,
    /// `GET /metrics` on this router: the exposition's renderer, and the bearer token that
    /// may read it (besides an admin's). `None`: the route answers 404 (the metrics are on
    /// their own listener, or off).
    pub metrics: Option<MetricsRoute>,
}

/// How `GET /metrics` renders the exposition (the binary owns the recorder), and who may read it.
#[derive(Clone)]
pub struct MetricsRoute {
    pub render: Arc<dyn Fn() -> String + Send + Sync>,
    /// A token that may read `/metrics` besides admins' (`--metrics-token`).
    pub token: Option<String>,
}

impl std::fmt::Debug for MetricsRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsRoute")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            public_url: "http://127.0.0.1:8080".into(),
            rate_limit_per_minute: 100,
            token_ttl_secs: 7 * 24 * 3600,
            body_limit: 4 << 20,
            bot_limit: 1 << 20,
            compile_slots: (cores() / 2).max(1),
            password_slots: cores(),
            password_queue: 64,
            login_failures_per_account: 10,
            agent_chat_per_minute: 60,
            agent_read_per_minute: 600,
            server_key: botbox_service::cases::webhooks::ServerKey::from_bytes(rand::random()),
            overload: overload::Overload::default(),
            metrics: None,
        }
    }
}

use botbox_lanes::cores;

/// What every handler can reach.
#[derive(Clone)]
pub struct App {
    pub db: Db,
    pub config: Arc<ApiConfig>,
    pub live: Arc<Live>,
    limiter: Arc<RateLimiter>,
    /// Failed logins per account (15-minute windows).
    login_failures: Arc<RateLimiter>,
    /// Token hashes known to authenticate, with their user: the rate limiter counts a real
    /// token's requests against its user (however many tokens the user mints), and a
    /// made-up token's against the caller's address.
    valid_tokens: moka::sync::Cache<String, String>,
    /// Compiling bots and debugging NL models, a few at once off the async workers.
    pub cpu: Arc<botbox_service::cpu::CpuJobs>,
    passwords: Arc<botbox_service::auth::PasswordGate>,
    /// The agent API's runs.
    pub agents: Arc<botbox_service::agent::Agents>,
    /// The agent API's per-key limits and idempotency store.
    v1: Arc<v1::V1Limits>,
    /// Cases and tasks: task creation, the worker, reviews, callbacks.
    pub tasks: Arc<botbox_service::cases::worker::Tasks>,
}

/// The services the handlers call, built and started by whoever wires the server (the
/// `botbox` binary): the API only uses them.
pub struct Services {
    pub live: Arc<Live>,
    pub agents: Arc<botbox_service::agent::Agents>,
    pub tasks: Arc<botbox_service::cases::worker::Tasks>,
}

impl App {
    pub fn new(db: Db, config: ApiConfig, services: Services) -> App {
        let Services {
            live,
            agents,
            tasks,
        } = services;
        App {
            tasks,
            db,
            limiter: Arc::new(RateLimiter::default()),
            login_failures: Arc::new(RateLimiter::new(LOGIN_WINDOW_SECS)),
            valid_tokens: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(std::time::Duration::from_secs(60))
                .build(),
            cpu: Arc::new(botbox_service::cpu::CpuJobs::new(config.compile_slots)),
            passwords: Arc::new(botbox_service::auth::PasswordGate::new(
                config.password_slots,
                config.password_queue,
            )),
            config: Arc::new(config),
            agents,
            v1: Arc::new(v1::V1Limits::default()),
            live,
        }
    }

    /// Runs a CPU-heavy job on a blocking thread ([`botbox_service::cpu::CpuJobs`]).
    pub async fn cpu_job<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> ApiResult<T> {
        self.cpu.run(job).await.map_err(ApiError::Internal)
    }

    /// The URL that receives a channel's messages.
    pub fn webhook_url(&self, channel_id: &str) -> String {
        format!(
            "{}/webhooks/{channel_id}",
            self.config.public_url.trim_end_matches('/')
        )
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "botbox project API",
        description = "Projects, bot revisions, deployments, environments, channels, teams. \
            Errors are plain text: 400 `Wrong API usage. Please refer to the documentation!`, \
            401, 403 `You're not authorized to view this page.`, 404, 409, \
            429 `Ratelimit exceeded! 100 per minute` (the configured limit), 500."
    ),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

struct BearerAuth;
impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The routes with their OpenAPI description.
fn api_routes() -> OpenApiRouter<App> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(accounts::routes())
        .merge(projects::routes())
        .merge(cms::routes())
        .merge(deploy::routes())
        .merge(canary::routes())
        .merge(learning::routes())
        .merge(audit::routes())
        .merge(overview::routes())
        .merge(live::routes())
        .merge(keys::routes())
        .merge(nlu::routes())
        .merge(kata::routes())
        .merge(cases::project_routes())
}

#[derive(OpenApi)]
#[openapi(info(
    title = "botbox agent API (/v1)",
    description = "Chat runs with an agent (an environment of a project) streamed as the AI SDK UI message stream; \
        cancel and steer. Authorization: Bearer sak_… (agent key). Errors are problem+json (RFC 9457); every answer \
        carries RateLimit and RateLimit-Policy; POSTs accept Idempotency-Key."
))]
struct V1Doc;

/// The `/v1` routes with their OpenAPI description.
fn v1_routes() -> OpenApiRouter<App> {
    OpenApiRouter::with_openapi(V1Doc::openapi())
        .merge(agent::routes())
        .merge(cases::v1_routes())
}

/// The OpenAPI document, as served at `/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = api_routes().split_for_parts().1;
    doc.merge(v1_routes().split_for_parts().1);
    doc
}

/// The whole HTTP surface: the API under the rate limit, `/openapi.json`, `/docs` and `/ready`.
pub fn router(app: App) -> Router {
    let live = app.live.clone();
    let limits = Arc::new(app.config.overload.clone());
    let in_flight = Arc::new(overload::InFlight::default());
    let (api, mut doc) = api_routes().split_for_parts();
    let (v1, v1_doc) = v1_routes().split_for_parts();
    doc.merge(v1_doc);
    let v1 = v1
        .route("/v1/playground", axum::routing::get(agent::playground))
        // Any other /v1 path: a problem+json 404, like every /v1 error.
        .route(
            "/v1/{*rest}",
            axum::routing::any(|| async {
                crate::v1_problem::V1Error(botbox_service::agent::Problem::not_found(
                    "no such /v1 route",
                ))
            }),
        )
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            v1::v1_layer,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            audit::layer,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(v1::V1_BODY_LIMIT))
        .layer(agent::cors())
        .with_state(app.clone());
    let hooks = live::webhook_routes()
        .layer(axum::middleware::from_fn_with_state(
            BodyLimit(live::WEBHOOK_BODY_LIMIT),
            body_limit,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(
            live::WEBHOOK_BODY_LIMIT,
        ))
        .with_state(app.clone());
    let limited = api
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            rate_limit,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            project_gate,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            audit::layer,
        ))
        .layer(axum::middleware::from_fn(kata::layer))
        .layer(axum::middleware::from_fn_with_state(
            BodyLimit(app.config.body_limit),
            body_limit,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(app.config.body_limit))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .with_state(app.clone());
    Router::new()
        .route(
            "/ready",
            axum::routing::get(move || {
                let live = live.clone();
                async move { ready(&live).await }
            }),
        )
        .route("/live", axum::routing::get(alive))
        .route("/healthz", axum::routing::get(alive))
        .route(
            "/metrics",
            axum::routing::get(exposition::scrape).with_state(app.clone()),
        )
        .merge(SwaggerUi::new("/docs").url("/openapi.json", doc))
        .merge(console::routes())
        .merge(problems::routes())
        .merge(hooks)
        .merge(v1)
        .merge(limited)
        .route_layer(axum::middleware::from_fn(mark_route))
        .layer(axum::middleware::from_fn(move |req, next| {
            overload::shed(limits.clone(), in_flight.clone(), req, next)
        }))
        .layer(axum::middleware::from_fn(trace_request))
}

/// `GET /ready`: 200 `{"status": "ready"}` once this process can run bots (its sandbox is
/// created) and its database answers, until it starts draining; else 503 with `starting`,
/// `failed` (the cause is in the log), `database` (it does not answer within 2 s) or
/// `draining` (it is stopping: send new work elsewhere). No
/// authentication and no rate limit: it tells nothing about any tenant. For load balancers'
/// readiness checks, and for tests that must not time a guest compilation.
async fn ready(live: &Live) -> Response {
    use botbox_service::live::Readiness;
    let unavailable = |word: &str| {
        let body = axum::Json(serde_json::json!({"status": word}));
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    };
    if live.drain.draining() {
        return unavailable("draining");
    }
    // One trivial query, bounded: a database that does not answer makes the server unready.
    let reachable = tokio::time::timeout(std::time::Duration::from_secs(2), live.db.ping()).await;
    if !matches!(reachable, Ok(Ok(()))) {
        tracing::warn!(answer = ?reachable.map(|r| r.err()), "readiness: the database does not answer");
        return unavailable("database");
    }
    match live.sandbox_readiness() {
        Readiness::Ready => axum::Json(serde_json::json!({"status": "ready"})).into_response(),
        Readiness::Starting => unavailable("starting"),
        Readiness::Failed => unavailable("failed"),
    }
}

/// `GET /live` (and `/healthz`): 200 `{"status": "alive"}` whenever the process answers at all, ready or not.
/// For liveness probes: a server whose sandbox failed (`/ready` 503) still serves the rest
/// of the API and retries the sandbox itself; restarting it would not help.
async fn alive() -> Response {
    axum::Json(serde_json::json!({"status": "alive"})).into_response()
}

/// The documented paths have a trailing slash (`/projects/`) in some places and not in
/// others; both forms reach the same route.
pub fn trim_trailing_slash<B>(mut req: axum::http::Request<B>) -> axum::http::Request<B> {
    let path = req.uri().path();
    if path.len() > 1 && path.ends_with('/') && !path.starts_with("/docs") {
        let trimmed = path.trim_end_matches('/');
        let pq = match req.uri().query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed.to_owned(),
        };
        if let Ok(uri) = pq.parse() {
            *req.uri_mut() = uri;
        }
    }
    req
}

async fn trace_request(req: Request, next: Next) -> Response {
    use tracing::Instrument;
    // Standard methods by name, anything else as one label: a client cannot grow the series.
    let method = match *req.method() {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    };
    // The route's template, not the path: one series and one log shape per route (paths
    // carry ids; handlers' spans name the ids that matter, such as the channel).
    let span = tracing::info_span!(
        "request",
        method,
        route = tracing::field::Empty,
        tenant = tracing::field::Empty,
        status = tracing::field::Empty,
    );
    let started = Instant::now();
    let res = next.run(req).instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let status = res.status().as_u16();
    span.record("status", status);
    let route = res
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_owned();
    // The access log: one line per request (target botbox::access; silence it with
    // BOTBOX_LOG=info,botbox::access=off). No token, secret, path or message text.
    tracing::info!(target: "botbox::access", parent: &span, route,
        latency_ms = elapsed.as_secs_f64() * 1e3, "request");
    metrics::counter!("botbox_http_requests_total", "method" => method,
        "route" => route.clone(), "status" => status.to_string())
    .increment(1);
    metrics::histogram!("botbox_http_request_duration_seconds", "method" => method,
        "route" => route)
    .record(elapsed.as_secs_f64());
    res
}

/// Inside the router, once a route matched: names the route's template on the request's
/// span and hands it to [`trace_request`] with the response.
async fn mark_route(
    matched: Option<axum::extract::MatchedPath>,
    req: Request,
    next: Next,
) -> Response {
    let mut res = next.run(req).await;
    if let Some(m) = matched {
        tracing::Span::current().record("route", m.as_str());
        res.extensions_mut().insert(m);
    }
    res
}

/// Every route under `/projects/{projectId}` passes here before its handler, and before its
/// body is read: the caller must have a relation to the project's owner (else 404, the
/// project's existence not revealed) and, for anything but a read, a role that may change
/// it (else 403). Handlers check their own action again; this gate makes the answer to a
/// stranger or a viewer the same on every route, whatever the body, and no new route can
/// forget it. NL reads (`GET`, predict, debug of `/nlus/{nluName}`) pass on the NLU's own
/// rule: a public NLU is readable by anyone signed in.
async fn project_gate(
    State(app): State<App>,
    matched: Option<axum::extract::MatchedPath>,
    req: Request,
    next: Next,
) -> Response {
    let Some(route) = matched.filter(|m| m.as_str().starts_with("/projects/{projectId}")) else {
        return next.run(req).await;
    };
    let route = route.as_str();
    let read = matches!(*req.method(), Method::GET | Method::HEAD)
        || route.ends_with("/nlus/{nluName}/predict")
        || route.ends_with("/nlus/{nluName}/debug");
    let nl_read = read && route.contains("/nlus/{nluName}");
    let (mut parts, body) = req.into_parts();
    match gate_check(&app, &mut parts, read, nl_read).await {
        Ok(caller) => {
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => e.into_response(),
    }
}

async fn gate_check(app: &App, parts: &mut Parts, read: bool, nl_read: bool) -> ApiResult<Caller> {
    let caller = Caller::from_request_parts(parts, app).await?;
    let params = axum::extract::RawPathParams::from_request_parts(parts, app)
        .await
        .map_err(|e| ApiError::bad(e.body_text()))?;
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_owned())
            .unwrap_or_default()
    };
    let pid = param("projectId");
    if nl_read {
        nlu::nlu_for(app, &caller, &pid, &param("nluName"), false).await?;
    } else {
        let action = if read { Action::Read } else { Action::Update };
        project_access(app, &caller, &pid, action, Resource::Projects).await?;
    }
    Ok(caller)
}

// ---------------------------------------------------------------------------------------------
// Errors

/// An error answer, with plain-text bodies. Details, when there are any, follow the status's
/// fixed sentence on the next lines.
#[derive(Debug)]
pub enum ApiError {
    BadRequest(String),
    /// Missing, unknown or expired token; or wrong credentials (with their own message).
    Unauthorized(&'static str),
    Forbidden,
    /// 403 with the reason, when the caller can act on it (a key used where a person must).
    ForbiddenBecause(String),
    NotFound(String),
    Conflict(String),
    RateLimited(u32),
    /// 429 for logins: too many failed attempts for the account or from the address.
    TooManyLogins,
    /// 429 for a webhook: the tenant has too many messages waiting; nothing ran.
    Busy(String),
    /// 503: the server sheds load (too many password hashes waiting, say).
    Unavailable(String),
    /// A conversation step failed: 400 with the error text alone.
    StepFailed(String),
    /// 507: the tenant's storage quota is reached; the write was refused.
    QuotaExceeded(String),
    /// 413: the body is over the route's limit (the sentence says both sizes).
    TooLarge(String),
    Internal(anyhow::Error),
}

pub const BAD_REQUEST: &str = "Wrong API usage. Please refer to the documentation!";
pub const FORBIDDEN: &str = "You're not authorized to view this page.";
pub const NOT_LOGGED_IN: &str = "You're not logged in, or your token has expired. Please log in!";
pub const NOT_FOUND: &str = "Not found. The resource does not exist or is not yours!";
pub const CONFLICT: &str = "Conflict with the current state of the resource!";
pub const UNAVAILABLE: &str = "Server is not available at the moment. We are working on it.";

pub type ApiResult<T> = Result<T, ApiError>;

pub(crate) fn check_name(field: &str, name: &str) -> ApiResult<()> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(ApiError::bad(format!(
            "{field}: 1 to 64 letters, digits, '.', '_' or '-' (got {name:?})"
        )));
    }
    Ok(())
}

impl From<botbox_service::error::ServiceError> for ApiError {
    fn from(e: botbox_service::error::ServiceError) -> Self {
        use botbox_service::error::ServiceError as P;
        match e {
            P::Invalid(m) => ApiError::BadRequest(m),
            P::Conflict(m) => ApiError::Conflict(m),
            P::QuotaReached(m) => ApiError::QuotaExceeded(m),
            P::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl ApiError {
    pub fn bad(detail: impl Into<String>) -> ApiError {
        ApiError::BadRequest(detail.into())
    }
    pub fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::NotFound(what.into())
    }
}

fn text(status: StatusCode, first: &str, detail: &str) -> Response {
    let body = if detail.is_empty() {
        first.to_owned()
    } else {
        format!("{first}\n{detail}")
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::BadRequest(d) => text(StatusCode::BAD_REQUEST, BAD_REQUEST, &d),
            ApiError::Unauthorized(m) => {
                let mut r = text(StatusCode::UNAUTHORIZED, m, "");
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                r
            }
            ApiError::Forbidden => text(StatusCode::FORBIDDEN, FORBIDDEN, ""),
            ApiError::ForbiddenBecause(d) => text(StatusCode::FORBIDDEN, FORBIDDEN, &d),
            ApiError::StepFailed(m) => text(StatusCode::BAD_REQUEST, &m, ""),
            ApiError::QuotaExceeded(m) => {
                metrics::counter!("botbox_refusals_total", "reason" => "storage_quota")
                    .increment(1);
                text(StatusCode::INSUFFICIENT_STORAGE, &m, "")
            }
            ApiError::TooLarge(m) => text(StatusCode::PAYLOAD_TOO_LARGE, &m, ""),
            ApiError::NotFound(d) => text(StatusCode::NOT_FOUND, NOT_FOUND, &d),
            ApiError::Conflict(d) => text(StatusCode::CONFLICT, CONFLICT, &d),
            ApiError::RateLimited(n) => {
                metrics::counter!("botbox_refusals_total", "reason" => "rate_limit").increment(1);
                text(
                    StatusCode::TOO_MANY_REQUESTS,
                    &format!("Ratelimit exceeded! {n} per minute"),
                    "",
                )
            }
            ApiError::Busy(m) => {
                metrics::counter!("botbox_refusals_total", "reason" => "tenant_busy").increment(1);
                let mut r = text(StatusCode::TOO_MANY_REQUESTS, &m, "");
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                r
            }
            ApiError::TooManyLogins => {
                metrics::counter!("botbox_refusals_total", "reason" => "logins").increment(1);
                let mut r = text(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too many failed logins for this account or from this address. Try again in 15 minutes.",
                    "",
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(LOGIN_WINDOW_SECS));
                r
            }
            ApiError::Unavailable(d) => {
                let mut r = text(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE, &d);
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                r
            }
            ApiError::Internal(e) => {
                tracing::error!(error = %format!("{e:#}"), "internal error");
                text(StatusCode::INTERNAL_SERVER_ERROR, UNAVAILABLE, "")
            }
        }
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Conflict => {
                ApiError::Conflict("a resource with that name already exists".into())
            }
            DbError::Sqlx(e) => ApiError::Internal(e.into()),
            DbError::Sqlite(e) => ApiError::Internal(e.into()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request bodies

/// A JSON body. Malformed JSON, wrong types and oversized bodies are a 400 that names the
/// field and the problem.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req.extensions().get::<BodyLimit>().copied();
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| match (e.status(), limit) {
                (StatusCode::PAYLOAD_TOO_LARGE, Some(l)) => l.refusal(None),
                _ => ApiError::bad(format!("the request body could not be read: {e}")),
            })?;
        parse_json(&bytes).map(Body)
    }
}

/// A route group's body limit in bytes: [`body_limit`] refuses a body over it in words.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

impl BodyLimit {
    /// The 413 for a body of `size` bytes (`None`: not known, only that it is over).
    pub(crate) fn refusal(self, size: Option<u64>) -> ApiError {
        let body = match size {
            Some(n) => format!("the body is {}", size_measured(n)),
            None => format!("the body is over {}", size_words(self.0 as u64)),
        };
        ApiError::TooLarge(format!(
            "{body}; at most {} is accepted",
            size_words(self.0 as u64)
        ))
    }
}

/// A measured size: `5.0 MiB`, `1.5 KiB`, `900 bytes`.
fn size_measured(n: u64) -> String {
    match n {
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / (1u64 << 10) as f64),
        n => format!("{n} bytes"),
    }
}

/// A limit as people read it: `4 MiB`, `2.5 MiB`, `512 KiB`, `900 bytes`.
fn size_words(n: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    match n {
        n if n >= MIB && n % MIB == 0 && n < 100 * MIB => format!("{} MiB", n / MIB),
        n if n >= MIB => format!("{:.1} MiB", n as f64 / MIB as f64),
        n if n >= KIB && n % KIB == 0 => format!("{} KiB", n / KIB),
        n if n >= KIB => format!("{:.1} KiB", n as f64 / KIB as f64),
        n => format!("{n} bytes"),
    }
}

/// Refuses a body whose `Content-Length` is over `limit` with a 413 that says both sizes
/// (axum's own limit, set beside it, refuses a longer body sent without a length as it
/// arrives; [`Body`] words that refusal too).
pub async fn body_limit(
    axum::extract::State(limit): axum::extract::State<BodyLimit>,
    mut req: Request,
    next: axum::middleware::Next,
) -> Response {
    let size = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(n) = size.filter(|n| *n > limit.0 as u64) {
        return limit.refusal(Some(n)).into_response();
    }
    req.extensions_mut().insert(limit);
    next.run(req).await
}

pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad("a JSON body is required"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::bad(format!("body: {}", e.inner()))
        } else {
            ApiError::bad(format!("{path}: {}", e.inner()))
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Paging

pub const DEFAULT_LIMIT: i64 = 20;
pub const MAX_LIMIT: i64 = 100;

/// `?limit=&page=`: `limit` 1 to 100 (default 20; a larger limit is cut to 100, as clients
/// such as kata-cli ask for `limit=1000000` to mean "all"), `page` from 1 (default 1).
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    pub limit: i64,
    pub page: i64,
}

impl Paging {
    pub fn offset(&self) -> i64 {
        (self.page - 1) * self.limit
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Paging {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let q = query_pairs(parts.uri.query());
        let num = |name: &str, default: i64, min: i64, max: i64| -> ApiResult<i64> {
            match q.get(name) {
                None => Ok(default),
                Some(v) => match v.parse::<i64>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(n),
                    _ => Err(ApiError::bad(format!(
                        "query parameter {name} must be a whole number from {min} to {max} (got {v:?})"
                    ))),
                },
            }
        };
        let limit = match q.get("limit") {
            None => DEFAULT_LIMIT,
            Some(v) => match v.parse::<i64>() {
                Ok(n) if n >= 1 => n.min(MAX_LIMIT),
                _ => {
                    return Err(ApiError::bad(format!(
                        "query parameter limit must be a whole number from 1 (larger than {MAX_LIMIT} counts as {MAX_LIMIT}) (got {v:?})"
                    )));
                }
            },
        };
        Ok(Paging {
            limit,
            page: num("page", 1, 1, 1_000_000)?,
        })
    }
}

/// The page `p` of a list of `total` items, holding `data`.
pub fn page_of<T>(p: Paging, total: i64, data: Vec<T>) -> PageOf<T> {
    PageOf {
        page: p.page,
        limit: p.limit,
        total,
        data,
    }
}

/// The query's parameters, percent-decoded; the first of a repeated name wins.
pub(crate) fn query_pairs(query: Option<&str>) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        out.entry(k.into_owned()).or_insert_with(|| v.into_owned());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The caller

/// Who is calling: from the bearer token (header, or `?token=`): a login token, a team
/// token or a workspace key ([`Acting`]).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The user behind a token; for a workspace key, the key's own id (a key is not a
    /// person: account routes refuse it).
    pub user_id: String,
    /// The user's name; for a workspace key, `key:<its name>`.
    pub username: String,
    /// Set for a team token (its team) and a workspace key (its workspace).
    pub team_id: Option<String>,
    /// The live role: the user's platform role for a login token, the role in the team
    /// for a team token, developer for a workspace key.
    pub role: Role,
    /// The user's platform role, whatever the token: what the user may do outside a team
    /// (create teams, for one). Developer for a workspace key.
    pub platform_role: Role,
    pub acting: Acting,
    pub token_hash: String,
    /// For a workspace key, its workspace as people read it (`team acme`, `user dev1`).
    pub key_owner: Option<String>,
}

impl Caller {
    /// Who the caller is in the audit trail and in `pushedBy`/`deployedBy`.
    pub fn actor(&self) -> botbox_service::audit::Actor {
        botbox_service::audit::Actor::of(
            &self.user_id,
            &self.username,
            &self.acting,
            self.key_owner.as_deref(),
        )
    }

    /// The owner the caller creates for by default: the team of a team token, the
    /// workspace of a key, else the user.
    pub fn owner(&self) -> &str {
        self.team_id.as_deref().unwrap_or(&self.user_id)
    }

    /// The caller's reach for an action, or 403 when the role grants none.
    pub fn require(&self, action: Action, resource: Resource) -> ApiResult<Reach> {
        match self.role.reach(action, resource) {
            Reach::None => Err(ApiError::Forbidden),
            r => Ok(r),
        }
    }

    /// An administrator acting as such (a login token of a platform administrator).
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin && self.acting == Acting::User
    }

    /// 403 unless a person holds the credential: accounts, teams, tokens and keys are
    /// administered by people, never by a workspace key.
    pub fn require_person(&self) -> ApiResult<()> {
        if self.acting.is_person() {
            Ok(())
        } else {
            Err(ApiError::ForbiddenBecause(
                "a workspace key automates projects (push, deploy, environments, channels, NLU, Cases); accounts, teams, tokens and keys need a person's login".into(),
            ))
        }
    }

    pub(crate) fn principal(&self) -> Principal<'_> {
        Principal {
            user_id: &self.user_id,
            acting: &self.acting,
            role: self.role,
        }
    }

    /// The caller's role over the resources of `owner_id`, `None` without a relation.
    pub async fn role_on(&self, app: &App, owner_id: &str) -> ApiResult<Option<Role>> {
        Ok(botbox_service::auth::role_on(&app.db, self.principal(), owner_id).await?)
    }

    /// The owners whose projects the caller lists by default: the user and the user's
    /// teams for a login token (an administrator's too), the team or workspace otherwise.
    pub async fn owners(&self, app: &App) -> ApiResult<Vec<String>> {
        let mut owners = vec![self.owner().to_owned()];
        if self.acting == Acting::User {
            owners.extend(
                app.db
                    .user_teams(&self.user_id)
                    .await?
                    .into_iter()
                    .map(|t| t.id),
            );
        }
        Ok(owners)
    }
}

fn bearer(parts: &Parts) -> Option<String> {
    if let Some(h) = parts.headers.get(header::AUTHORIZATION) {
        let h = h.to_str().ok()?;
        let t = h
            .strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))?;
        return Some(t.trim().to_owned());
    }
    query_pairs(parts.uri.query()).remove("token")
}

/// The answer to a key of the agent API on the project API: it is not a credential here.
const AGENT_KEY_HERE: &str = "An agent key (sak_…) only chats on /v1; the project API takes a login token or a workspace key (sk-ws-…).";

impl FromRequestParts<App> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Self::Rejection> {
        // Already authenticated by the project gate (extensions are the server's own).
        if let Some(c) = parts.extensions.get::<Caller>() {
            return Ok(c.clone());
        }
        let caller = authenticate(parts, app).await?;
        if let Some(slot) = audit::slot(parts) {
            slot.actor(caller.actor());
        }
        Ok(caller)
    }
}

/// The caller a request's credential stands for (see [`Caller`]).
async fn authenticate(parts: &mut Parts, app: &App) -> ApiResult<Caller> {
    let token = bearer(parts).ok_or(ApiError::Unauthorized(NOT_LOGGED_IN))?;
    match KeyKind::of(&token) {
        Some(KeyKind::Workspace) => return workspace_caller(app, &token).await,
        Some(KeyKind::Agent) => return Err(ApiError::Unauthorized(AGENT_KEY_HERE)),
        None => {}
    }
    let hash = token_hash(&token);
    let row = app
        .db
        .token_by_hash(&hash)
        .await?
        .ok_or(ApiError::Unauthorized(NOT_LOGGED_IN))?;
    if row.expire <= unix_secs() {
        return Err(ApiError::Unauthorized(NOT_LOGGED_IN));
    }
    let user = app
        .db
        .user_by_id(&row.user_id)
        .await?
        .ok_or(ApiError::Unauthorized(NOT_LOGGED_IN))?;
    if user.disabled != 0 {
        // Disabling deletes the tokens too; this covers a token issued in between.
        return Err(ApiError::Unauthorized(NOT_LOGGED_IN));
    }
    let role_name = match &row.team_id {
        // Membership is checked live: a removed member's team token stops working.
        Some(team) => app
            .db
            .membership(team, &user.id)
            .await?
            .ok_or(ApiError::Unauthorized(NOT_LOGGED_IN))?,
        None => user.role_id.clone(),
    };
    let role = Role::parse(&role_name)
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("unknown role {role_name}")))?;
    let platform_role = Role::parse(&user.role_id)
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("unknown role {}", user.role_id)))?;
    app.valid_tokens.insert(hash.clone(), user.id.clone());
    let span = tracing::Span::current();
    span.record("tenant", row.team_id.as_deref().unwrap_or(&user.id));
    Ok(Caller {
        user_id: user.id,
        username: user.username,
        acting: match &row.team_id {
            Some(t) => Acting::Team(t.clone()),
            None => Acting::User,
        },
        team_id: row.team_id,
        role,
        platform_role,
        token_hash: hash,
        key_owner: None,
    })
}

/// The caller a workspace key stands for: developer rights on its workspace's projects
/// (a user's namespace: no more than that user's).
/// Revocation is effective on the next request (keys are looked up, never cached).
async fn workspace_caller(app: &App, key: &str) -> ApiResult<Caller> {
    let (_, row) = botbox_service::agent::keys::authenticate(&app.db, key)
        .await?
        .filter(|(kind, _)| *kind == KeyKind::Workspace)
        .ok_or(ApiError::Unauthorized(NOT_LOGGED_IN))?;
    // A key of a user's own namespace acts within that user's rights: none once the account
    // is disabled, reads only while it is a viewer. A team's key is the team's.
    let owner = app.db.user_by_id(&row.owner_id).await?;
    let role = match &owner {
        Some(u) if u.disabled != 0 => return Err(ApiError::Unauthorized(NOT_LOGGED_IN)),
        Some(u) if Role::parse(&u.role_id) == Some(Role::Viewer) => Role::Viewer,
        _ => Role::Developer,
    };
    let key_owner = match owner {
        Some(u) => Some(format!("user {}", u.username)),
        None => app
            .db
            .team_by_id(&row.owner_id)
            .await?
            .map(|t| format!("team {}", t.name)),
    };
    tracing::Span::current().record("tenant", row.owner_id.as_str());
    Ok(Caller {
        username: format!("key:{}", row.name),
        team_id: Some(row.owner_id.clone()),
        role,
        platform_role: role,
        acting: Acting::WorkspaceKey {
            workspace: row.owner_id.clone(),
            key_id: row.id.clone(),
        },
        token_hash: token_hash(key),
        user_id: row.id,
        key_owner,
    })
}

pub fn unix_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Loads a project the caller may act on, with the caller's role over it: 404 when the
/// project does not exist or the caller has no relation to its owner (its existence is not
/// revealed), 403 when the caller's role there does not allow the action.
pub async fn project_access(
    app: &App,
    caller: &Caller,
    project_id: &str,
    action: Action,
    resource: Resource,
) -> ApiResult<(ProjectRow, Role)> {
    let missing = || ApiError::not_found(format!("project {project_id}"));
    let p = app.db.project(project_id).await?.ok_or_else(missing)?;
    let role = caller
        .role_on(app, &p.owner_id)
        .await?
        .ok_or_else(missing)?;
    if !botbox_service::auth::allows(role, action, resource) {
        return Err(ApiError::ForbiddenBecause(format!(
            "your role on project {project_id} ({}) may not {} its {}",
            role.name(),
            action.name(),
            resource.name()
        )));
    }
    Ok((p, role))
}

/// [`project_access`], the project alone.
pub async fn project_for(
    app: &App,
    caller: &Caller,
    project_id: &str,
    action: Action,
    resource: Resource,
) -> ApiResult<ProjectRow> {
    Ok(project_access(app, caller, project_id, action, resource)
        .await?
        .0)
}

// ---------------------------------------------------------------------------------------------
// Rate limit

pub(crate) use botbox_service::rate::RateLimiter;

/// The caller's address as a rate-limit key: IPv6 by its /64 (one customer's block), so
/// rotating addresses inside it does not escape the limit.
fn address_key(parts: &Parts) -> String {
    let ip = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    match ip {
        Some(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            format!("a:{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
        Some(std::net::IpAddr::V6(v6)) => format!("a:{}", v6.to_ipv4_mapped().unwrap()),
        Some(ip) => format!("a:{ip}"),
        None => "a:".into(),
    }
}

async fn rate_limit(State(app): State<App>, req: Request, next: Next) -> Response {
    let limit = app.config.rate_limit_per_minute;
    let (parts, body) = req.into_parts();
    // A token counts on its own only if it is real (a live token in the database; known
    // ones are cached): a made-up token counts against the address it came from.
    let client = address_key(&parts);
    let key = match bearer(&parts).map(|t| (KeyKind::of(&t), token_hash(&t))) {
        Some((kind, h)) => match app.valid_tokens.get(&h) {
            Some(user) => format!("u:{user}"),
            // An address already over its limit gets its 429 without a database read.
            None if app.limiter.over(&client, limit, unix_secs()) => client.clone(),
            // A workspace key counts against itself (its id), like a user's tokens.
            None if kind == Some(KeyKind::Workspace) => match app.db.live_api_key(&h).await {
                Ok(Some(row)) => {
                    app.valid_tokens.insert(h.clone(), row.id.clone());
                    format!("u:{}", row.id)
                }
                _ => client.clone(),
            },
            None => match app.db.token_by_hash(&h).await {
                Ok(Some(row)) if row.expire > unix_secs() => {
                    app.valid_tokens.insert(h.clone(), row.user_id.clone());
                    format!("u:{}", row.user_id)
                }
                _ => client.clone(),
            },
        },
        None => client.clone(),
    };
    let (ok, remaining, reset) = app.limiter.hit(&key, limit, unix_secs());
    let mut res = if ok {
        let mut req = Request::from_parts(parts, body);
        req.extensions_mut().insert(ClientKey(client));
        next.run(req).await
    } else {
        let mut r = ApiError::RateLimited(limit).into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(reset));
        r
    };
    let h = res.headers_mut();
    h.insert("ratelimit-limit", HeaderValue::from(limit));
    h.insert("ratelimit-remaining", HeaderValue::from(remaining));
    h.insert("ratelimit-reset", HeaderValue::from(reset));
    res
}

/// The caller's address key, for handlers that throttle on their own (login).
#[derive(Debug, Clone)]
pub struct ClientKey(pub String);

/// Failed logins allowed per address per 15 minutes, whatever the accounts tried.
const LOGIN_FAILURES_PER_ADDRESS: u32 = 50;
const LOGIN_WINDOW_SECS: i64 = 15 * 60;

impl App {
    /// Refuses a login attempt (429) when the account from this address, or the address
    /// whatever the account, has failed too often in the last window. An account is counted
    /// per address, so a stranger guessing from one place locks out only that place, never
    /// the account's owner elsewhere (what the big identity providers call smart lockout).
    /// Checked before the password is hashed, so a refused attempt costs nothing.
    ///
    /// The attempt is counted here, before the password is checked, so that concurrent
    /// attempts cannot all pass the check; a successful login gives it back
    /// ([`App::login_succeeded`]).
    pub(crate) fn login_allowed(&self, username: &str, client: &str) -> ApiResult<()> {
        let now = unix_secs();
        let per_account = self.config.login_failures_per_account;
        let account = format!("u:{username}@{client}");
        if !self
            .login_failures
            .hit(client, LOGIN_FAILURES_PER_ADDRESS, now)
            .0
        {
            tracing::warn!(username = %username, client = %client, "login throttled (address)");
            return Err(ApiError::TooManyLogins);
        }
        if !self.login_failures.hit(&account, per_account, now).0 {
            self.login_failures.refund(client);
            tracing::warn!(username = %username, client = %client, "login throttled (account)");
            return Err(ApiError::TooManyLogins);
        }
        Ok(())
    }

    /// Gives back the attempt a successful login counted.
    pub(crate) fn login_succeeded(&self, username: &str, client: &str) {
        self.login_failures
            .refund(&format!("u:{username}@{client}"));
        self.login_failures.refund(client);
    }

    /// Hashes or verifies a password under the cap on concurrent argon2 work.
    pub(crate) async fn password_job<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> ApiResult<T> {
        self.passwords.run(job).await.ok_or_else(|| {
            metrics::counter!("botbox_refusals_total", "reason" => "password_queue").increment(1);
            ApiError::Unavailable("too many logins at once; try again in a moment".into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botbox_service::rate::RATE_KEYS_MAX;

    #[test]
    fn every_route_registers_and_is_documented() {
        let doc = openapi();
        for p in [
            "/login",
            "/teams/{team}",
            "/projects/{projectId}/bot/converse",
        ] {
            assert!(doc.paths.paths.contains_key(p), "{p}");
        }
    }

    #[test]
    fn keys_are_bounded_and_new_keys_past_the_bound_go_untracked() {
        let l = RateLimiter::default();
        for i in 0..RATE_KEYS_MAX {
            l.hit(&format!("k{i}"), 1_000_000, 120);
        }
        assert_eq!(l.keys(), RATE_KEYS_MAX);
        // New keys past the bound are neither tracked nor pooled with each other.
        for _ in 0..5 {
            assert!(l.hit("new-a", 2, 121).0);
        }
        assert_eq!(l.keys(), RATE_KEYS_MAX);
        // Known keys are still counted.
        assert!(l.hit("k1", 2, 121).0);
        assert!(!l.hit("k1", 2, 121).0);
        // A new window frees the old keys.
        assert!(l.hit("fresh", 1, 200).0);
        assert!(l.keys() < 10);
    }

    #[test]
    fn over_reads_without_counting() {
        let l = RateLimiter::new(900);
        assert!(!l.over("u:x", 2, 0));
        l.hit("u:x", u32::MAX, 0);
        assert!(!l.over("u:x", 2, 1));
        l.hit("u:x", u32::MAX, 2);
        assert!(l.over("u:x", 2, 3));
        assert!(!l.over("u:x", 2, 900));
    }

    #[test]
    fn window_counts_and_resets() {
        let l = RateLimiter::default();
        assert_eq!(l.hit("k", 2, 120), (true, 1, 60));
        assert_eq!(l.hit("k", 2, 130), (true, 0, 50));
        assert_eq!(l.hit("k", 2, 179), (false, 0, 1));
        assert_eq!(l.hit("other", 2, 179), (true, 1, 1));
        assert_eq!(l.hit("k", 2, 180), (true, 1, 60));
    }

    #[test]
    fn trailing_slashes_are_trimmed_except_for_docs() {
        let r = trim_trailing_slash(
            axum::http::Request::get("/projects/?page=2")
                .body(())
                .unwrap(),
        );
        assert_eq!(r.uri().to_string(), "/projects?page=2");
        let r = trim_trailing_slash(axum::http::Request::get("/docs/").body(()).unwrap());
        assert_eq!(r.uri().path(), "/docs/");
    }

    #[test]
    fn json_errors_name_the_field() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            name: String,
            options: Opt,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Opt {
            bot: bool,
        }
        let e = parse_json::<T>(br#"{"name": "x", "options": {"bot": 3}}"#).unwrap_err();
        assert!(
            matches!(&e, ApiError::BadRequest(d) if d.starts_with("options.bot: invalid type")),
            "{e:?}"
        );
        let e = parse_json::<T>(b"{\"name\": ").unwrap_err();
        assert!(
            matches!(&e, ApiError::BadRequest(d) if d.contains("EOF")),
            "{e:?}"
        );
        let e = parse_json::<T>(b"").unwrap_err();
        assert!(
            matches!(&e, ApiError::BadRequest(d) if d.contains("required")),
            "{e:?}"
        );
    }
}
