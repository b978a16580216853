//! What every `/v1` request goes through before its handler: the request id, the key (agent
//! or workspace), the per-key rate limits and `Idempotency-Key` replay. The agent API's and
//! the Cases API's handlers read the key from [`KeyCtx`].

use super::{App, RateLimiter};
use crate::v1_problem::{REQUEST, RequestInfo, V1Error, V1Result};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use botbox_service::agent::Problem;
use botbox_service::agent::keys::{self, KeyKind};
use botbox_store::{ApiKeyRow, IdemStart, now_ms};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// Largest `/v1` request body (8 MiB: long histories); larger → 413.
pub const V1_BODY_LIMIT: usize = 8 << 20;

/// The key a `/v1` request authenticated with (set by [`v1_layer`]).
#[derive(Clone)]
pub struct KeyCtx {
    pub kind: KeyKind,
    pub key: Arc<ApiKeyRow>,
}

impl KeyCtx {
    /// The environment of an agent key; 403 for a workspace key.
    pub(crate) fn agent_env(&self) -> V1Result<&str> {
        match self.kind {
            KeyKind::Agent => Ok(&self.key.scope),
            KeyKind::Workspace => Err(V1Error(Problem::forbidden(
                "A workspace key cannot chat; use an agent key (sak_…).",
            ))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The /v1 middleware: request id, key, rate limit, idempotency.

/// The per-key limits, in one place.
pub struct V1Limits {
    chat: RateLimiter,
    read: RateLimiter,
    /// Requests without a valid key, per client address ([`BAD_KEYS_PER_MINUTE`]).
    bad_keys: RateLimiter,
    /// Refused signatures on the signed routes (an inbound hook's, an artifact URL's), per
    /// client address and hook or artifact ([`BAD_KEYS_PER_MINUTE`]): guessing one hook's
    /// signature is throttled, while the same address (a provider's shared senders, a
    /// proxy) keeps its other hooks and its keyed requests.
    bad_signatures: RateLimiter,
    /// Verified inbound hook calls per hook (the `chat` quota: each creates a task).
    hooks: RateLimiter,
}

impl Default for V1Limits {
    fn default() -> Self {
        V1Limits {
            chat: RateLimiter::new(60),
            read: RateLimiter::new(60),
            bad_keys: RateLimiter::new(60),
            bad_signatures: RateLimiter::new(60),
            hooks: RateLimiter::new(60),
        }
    }
}

impl V1Limits {
    /// Charges one verified call to inbound hook `hook`: `Err(seconds until the window
    /// resets)` past `per_minute`.
    pub fn hook_call(&self, hook: &str, per_minute: u32) -> Result<(), i64> {
        let (ok, _, reset) = self.hooks.hit(hook, per_minute, super::unix_secs());
        if ok { Ok(()) } else { Err(reset.max(1)) }
    }
}

fn too_many_bad_keys(reset: i64) -> Response {
    metrics::counter!("botbox_refusals_total", "reason" => "invalid_keys").increment(1);
    let p = Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too-many-invalid-keys",
        "Too many requests without a valid key",
        format!(
            "This address made {BAD_KEYS_PER_MINUTE} requests without a valid API key or signature this minute; try again in {reset} s."
        ),
    )
    .header(header::RETRY_AFTER, HeaderValue::from(reset.max(1)));
    V1Error(p).into_response()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let h = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    h.strip_prefix("Bearer ")
        .or_else(|| h.strip_prefix("bearer "))
        .map(str::trim)
}

/// Runs every `/v1` request: the request id and base URL for problem bodies, the key (401),
/// the key's rate limit (429) with the `RateLimit` fields on every answer, and the
/// `Idempotency-Key` of a POST.
pub async fn v1_layer(State(app): State<App>, req: Request, next: Next) -> Response {
    let info = RequestInfo {
        base: app.config.public_url.clone().into(),
        id: format!("req_{}", &botbox_store::new_id()[..16]),
    };
    REQUEST.scope(info, v1_inner(app, req, next)).await
}

/// Requests without a valid key one client address may make per minute; past it, `/v1`
/// answers 429 without looking any key up, until the minute ends. A guesser cannot make the
/// server look keys up at will; a client sharing the address (behind one NAT) waits with it.
pub const BAD_KEYS_PER_MINUTE: u32 = 30;

async fn v1_inner(app: App, mut req: Request, next: Next) -> Response {
    if req.uri().path() == "/v1/playground" {
        return next.run(req).await;
    }
    let client = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip().to_string())
        .unwrap_or_default();
    let now = super::unix_secs();
    // The routes whose credential is a signature (an inbound hook's Standard Webhooks
    // signature, an artifact URL's): refused signatures count per address and target, so
    // guessing one target's signature is throttled like guessing keys.
    if is_public(req.method(), req.uri().path()) {
        let target = format!("{client} {}", req.uri().path());
        if app
            .v1
            .bad_signatures
            .over(&target, BAD_KEYS_PER_MINUTE, now)
        {
            return too_many_bad_keys(60 - now % 60);
        }
        let res = next.run(req).await;
        if matches!(
            res.status(),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            app.v1.bad_signatures.hit(&target, BAD_KEYS_PER_MINUTE, now);
        }
        return res;
    }
    if app.v1.bad_keys.over(&client, BAD_KEYS_PER_MINUTE, now) {
        return too_many_bad_keys(60 - now % 60);
    }
    let presented = bearer(req.headers()).map(str::to_owned);
    let found = match presented {
        Some(k) => keys::authenticate(&app.db, &k).await,
        None => Ok(None),
    };
    let (kind, key) = match found {
        Ok(Some(k)) => k,
        Ok(None) => {
            app.v1.bad_keys.hit(&client, BAD_KEYS_PER_MINUTE, now);
            return V1Error(Problem::unauthorized()).into_response();
        }
        Err(e) => return V1Error(Problem::internal(e)).into_response(),
    };
    tracing::Span::current().record("tenant", key.owner_id.as_str());
    if key.last_used_at.is_none_or(|t| now_ms() - t > 60_000) {
        // lastUsedAt (to the minute), off the request's path.
        let db = app.db.clone();
        let id = key.id.clone();
        tokio::spawn(async move {
            let _ = db.touch_api_key(&id).await;
        });
    }
    // Policy: chat for POSTs (chat, steer, cancel), read for GETs.
    let (policy, limiter, quota) = if req.method() == Method::POST {
        ("chat", &app.v1.chat, app.config.agent_chat_per_minute)
    } else {
        ("read", &app.v1.read, app.config.agent_read_per_minute)
    };
    let (ok, remaining, reset) = limiter.hit(&key.id, quota, super::unix_secs());
    let policy_h = HeaderValue::from_str(&format!("\"{policy}\";q={quota};w=60")).unwrap();
    let limit_h = HeaderValue::from_str(&format!("\"{policy}\";r={remaining};t={reset}")).unwrap();
    let with_limits = |mut r: Response| {
        r.headers_mut().insert("ratelimit-policy", policy_h.clone());
        r.headers_mut().insert("ratelimit", limit_h.clone());
        r
    };
    if !ok {
        metrics::counter!("botbox_refusals_total", "reason" => "agent_quota").increment(1);
        let mut p = Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "quota-exceeded",
            "Quota exceeded",
            format!("This key may make {quota} {policy} requests per minute."),
        )
        .with("violated-policies", json!([policy]))
        .header(header::RETRY_AFTER, HeaderValue::from(reset.max(1)));
        p.type_uri = Some(botbox_service::agent::problem::QUOTA_EXCEEDED_TYPE);
        return with_limits(V1Error(p).into_response());
    }
    let ctx = KeyCtx {
        kind,
        key: Arc::new(key),
    };
    audited_as_key(&req, &ctx);
    req.extensions_mut().insert(ctx.clone());
    let idem = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().trim_matches('"').to_owned());
    let res = match (req.method() == Method::POST, idem) {
        (true, Some(k)) => idempotent(&app, &ctx, k, req, next).await,
        _ => next.run(req).await,
    };
    with_limits(res)
}

/// Tells the audit layer the key made the request, in its project and owner.
fn audited_as_key(req: &Request, ctx: &KeyCtx) {
    if let Some(slot) = req.extensions().get::<crate::audit::AuditSlot>() {
        let k = &ctx.key;
        slot.actor(botbox_service::audit::Actor {
            kind: "key",
            id: k.id.clone(),
            name: format!("key:{}", k.name),
            owner: Some(k.owner_id.clone()),
            owner_name: None,
        });
        slot.within(k.project_id.clone(), k.owner_id.clone());
    }
}

/// A POST under an `Idempotency-Key`: the first answer is stored (24 h, in
/// the database, so every replica and a restarted server know it) and replayed for the same
/// body; another body → 422; while the first runs → 409. A streamed answer
/// (`Accept: text/event-stream`) and a 5xx are not stored: the stream's replay is
/// `GET …/stream`, and a server error may be retried with the same key.
///
/// The request runs on a task of its own: a client that goes away (its time-out) does not
/// cut it short half-done, and its answer is stored for the retry that follows.
async fn idempotent(app: &App, ctx: &KeyCtx, key: String, req: Request, next: Next) -> Response {
    if key.is_empty() || key.len() > 255 {
        return V1Error(Problem::invalid(
            "Idempotency-Key must be 1 to 255 characters.",
        ))
        .into_response();
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, V1_BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => return V1Error(too_large()).into_response(),
    };
    let fingerprint = hex::encode(Sha256::digest(&bytes));
    let scope = format!("{} {} {} {key}", ctx.key.id, parts.method, parts.uri.path());
    let now = now_ms();
    let stale = now - IDEMPOTENCY_ABANDONED.as_millis() as i64;
    let owner = match app
        .db
        .begin_idempotent(&scope, &fingerprint, now, stale)
        .await
    {
        Err(e) => return V1Error(Problem::internal(e)).into_response(),
        Ok(IdemStart::Seen(r)) => return replay(&r, &fingerprint),
        Ok(IdemStart::Run(owner)) => owner,
    };
    let (db, held) = (app.db.clone(), (scope.clone(), owner.clone()));
    let work = tokio::spawn(async move {
        let res = next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
        let streamed = res
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if streamed || res.status().is_server_error() {
            if let Err(e) = db.forget_idempotent(&scope, &owner).await {
                tracing::warn!(error = %e, "freeing an idempotency key");
            }
            return res;
        }
        let (parts, body) = res.into_parts();
        let body = axum::body::to_bytes(body, V1_BODY_LIMIT)
            .await
            .unwrap_or_default();
        let headers: Vec<(&str, &str)> = parts
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        let stored = db
            .finish_idempotent(
                &scope,
                &owner,
                parts.status.as_u16(),
                &serde_json::to_string(&headers).unwrap_or_default(),
                &base64::engine::general_purpose::STANDARD.encode(&body),
            )
            .await;
        match stored {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                "an idempotent request outlived its key's hold; its answer is not stored"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "storing an idempotent answer; its key is freed");
                let _ = db.forget_idempotent(&scope, &owner).await;
            }
        }
        Response::from_parts(parts, Body::from(body))
    });
    match work.await {
        Ok(res) => res,
        // A panic in the handler: the key is freed (a retry runs), the caller gets a 500.
        Err(e) => {
            let _ = app.db.forget_idempotent(&held.0, &held.1).await;
            V1Error(Problem::internal(anyhow::anyhow!(
                "the request failed: {e}"
            )))
            .into_response()
        }
    }
}

/// A request with this key running longer than this is taken to be lost with its process
/// (requests answer in seconds: a chat answers `queued` at once): its key is taken over.
const IDEMPOTENCY_ABANDONED: Duration = Duration::from_secs(5 * 60);

/// The answer to a request whose key an earlier request took.
fn replay(r: &botbox_store::IdempotencyRow, fingerprint: &str) -> Response {
    if r.fingerprint != fingerprint {
        return V1Error(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency-key-reused",
            "Idempotency key reused",
            "This Idempotency-Key was used with another request body.",
        ))
        .into_response();
    }
    let Some(status) = r.status else {
        return V1Error(Problem::conflict(
            "idempotency-in-progress",
            "Request in progress",
            "The first request with this Idempotency-Key is still being processed.",
        ))
        .into_response();
    };
    let body = r
        .body
        .as_deref()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default();
    let status = StatusCode::from_u16(status as u16).unwrap_or(StatusCode::OK);
    let mut res = (status, body).into_response();
    let pairs: Vec<(String, String)> = r
        .headers
        .as_deref()
        .and_then(|h| serde_json::from_str(h).ok())
        .unwrap_or_default();
    let h = res.headers_mut();
    h.clear();
    for (k, v) in pairs {
        if let (Ok(k), Ok(v)) = (
            axum::http::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            h.append(k, v);
        }
    }
    h.insert("idempotent-replayed", HeaderValue::from_static("true"));
    res
}

pub(crate) fn too_large() -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload-too-large",
        "Payload too large",
        format!("A /v1 request body may have {V1_BODY_LIMIT} bytes at most."),
    )
}

/// The body as JSON: 415 when not declared JSON, 400 when malformed.
pub(crate) fn json_body(headers: &HeaderMap, bytes: &[u8]) -> V1Result<Json> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE)
        && !ct
            .to_str()
            .unwrap_or_default()
            .to_ascii_lowercase()
            .contains("json")
    {
        return Err(V1Error(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Unsupported media type",
            "Send the body as application/json.",
        )));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| V1Error(Problem::invalid(format!("The body is not valid JSON: {e}"))))
}

/// The `/v1` routes that authenticate by a signature instead of a key.
pub fn is_public(method: &axum::http::Method, path: &str) -> bool {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(
        (method.as_str(), segs.as_slice()),
        ("POST", ["v1", "hooks", _]) | ("GET", ["v1", "artifacts", _])
    )
}
