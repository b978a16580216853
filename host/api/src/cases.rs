//! Cases and tasks over HTTP: thin handlers over [`botbox_service::cases`].
//!
//! - `/v1` with a workspace key (`sk-ws-`): Cases, tasks, review, outputs, callback
//!   endpoints and inbound hooks of the key's workspace; every id of another workspace
//!   answers 404. Two `/v1` routes take no key: `POST /v1/hooks/{hookId}` (authenticated
//!   by its Standard Webhooks signature) and `GET /v1/artifacts/{id}` (by its URL's
//!   signature and expiry).
//! - the project API with a user's token (the CLI): a project's Cases and their tasks,
//!   under the project's permissions.

use super::v1::KeyCtx;
use super::{ApiError, ApiResult, App, Body, Caller, project_for, query_pairs};
use crate::v1_problem::{V1Error, V1Result};
use axum::body::Bytes;
use axum::extract::FromRequestParts;
use axum::extract::{Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use botbox_service::agent::Problem;
use botbox_service::agent::keys::KeyKind;
use botbox_service::auth::{Action, Resource};
use botbox_service::cases::subscriptions;
use botbox_service::cases::webhooks::{self, VerifyError, show_secret};
use botbox_service::cases::worker::CaseError;
use botbox_service::cases::{self, CaseSpec, Decision};
use botbox_store::{CaseRow, EndpointRow, EnvironmentRow, HookRow, ProjectRow, TaskRow, now_ms};
use serde_json::{Map, Value as Json, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn v1_routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(v1_create_case, v1_list_cases))
        .routes(routes!(v1_get_case, v1_put_case, v1_delete_case))
        .routes(routes!(v1_create_task, v1_list_tasks))
        .routes(routes!(v1_get_task))
        .routes(routes!(v1_task_outputs))
        .routes(routes!(v1_review_task))
        .routes(routes!(v1_create_endpoint, v1_list_endpoints))
        .routes(routes!(v1_get_endpoint, v1_delete_endpoint))
        .routes(routes!(v1_rotate_endpoint))
        .routes(routes!(v1_enable_endpoint))
        .routes(routes!(v1_endpoint_messages))
        .routes(routes!(v1_create_hook, v1_list_hooks))
        .routes(routes!(receive_hook, v1_delete_hook))
        .routes(routes!(get_artifact))
}

pub fn project_routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_case, list_cases))
        .routes(routes!(get_case, delete_case))
        .routes(routes!(create_task, list_project_tasks))
        .routes(routes!(get_task))
        .routes(routes!(task_outputs))
        .routes(routes!(review_task))
}

// ---------------------------------------------------------------------------------------------
// Errors

impl From<CaseError> for ApiError {
    fn from(e: CaseError) -> Self {
        match e {
            CaseError::Invalid(p) => ApiError::bad(botbox_service::cases::worker::summary(&p)),
            CaseError::NotFound(m) => ApiError::NotFound(m),
            CaseError::InvalidTransition { current, detail } => {
                ApiError::Conflict(format!("{detail} (current status: {current})"))
            }
            CaseError::Conflict(m) => ApiError::Conflict(m),
            CaseError::Internal(e) => ApiError::Internal(e),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared logic: Case documents and views

/// A Case document: `name`, the environment (`environmentId`, or for the project API
/// `environment` by name), the rest is the [`CaseSpec`].
fn split_case(doc: &Json) -> Result<(String, Option<String>, Option<String>, CaseSpec), CaseError> {
    let Some(obj) = doc.as_object() else {
        return Err(CaseError::Invalid(vec![(
            String::new(),
            "the Case must be a JSON object".into(),
        )]));
    };
    let mut rest: Map<String, Json> = obj.clone();
    let mut problems = Vec::new();
    let name = match rest.remove("name") {
        Some(Json::String(n)) => {
            if let Err(e) = cases::check_case_name(&n) {
                problems.push(("/name".to_owned(), e));
            }
            n
        }
        _ => {
            problems.push(("/name".to_owned(), "a Case needs a name (a string)".into()));
            String::new()
        }
    };
    let env_id = rest
        .remove("environmentId")
        .and_then(|v| v.as_str().map(str::to_owned));
    let env_name = rest
        .remove("environment")
        .and_then(|v| v.as_str().map(str::to_owned));
    for k in ["id", "createdAt", "updatedAt", "projectId"] {
        rest.remove(k);
    }
    match CaseSpec::from_json(&Json::Object(rest)) {
        Ok(spec) if problems.is_empty() => Ok((name, env_id, env_name, spec)),
        Ok(_) => Err(CaseError::Invalid(problems)),
        Err(mut p) => {
            problems.append(&mut p);
            Err(CaseError::Invalid(problems))
        }
    }
}

fn case_view(c: &CaseRow) -> Json {
    let mut v = serde_json::from_str::<Json>(&c.spec).unwrap_or_else(|_| json!({}));
    let o = v.as_object_mut().expect("a stored spec is an object");
    o.insert("id".into(), json!(c.id));
    o.insert("name".into(), json!(c.name));
    o.insert("projectId".into(), json!(c.project_id));
    o.insert("environmentId".into(), json!(c.environment_id));
    o.insert(
        "createdAt".into(),
        json!(botbox_service::agent::iso_ms(c.created_at)),
    );
    o.insert(
        "updatedAt".into(),
        json!(botbox_service::agent::iso_ms(c.updated_at)),
    );
    v
}

/// Stores a new Case (or replaces `existing`) of `workspace` bound to `env`.
async fn save_case(
    app: &App,
    workspace: &str,
    env: &EnvironmentRow,
    name: String,
    spec: &CaseSpec,
    by: &str,
    existing: Option<&CaseRow>,
) -> Result<CaseRow, CaseError> {
    let now = now_ms();
    let row = CaseRow {
        id: existing.map_or_else(
            || botbox_service::agent::new_prefixed(cases::CASE_PREFIX),
            |c| c.id.clone(),
        ),
        workspace_id: workspace.to_owned(),
        project_id: env.project_id.clone(),
        environment_id: env.id.clone(),
        name,
        spec: serde_json::to_string(spec).map_err(|e| CaseError::Internal(e.into()))?,
        created_by: existing.map_or_else(|| by.to_owned(), |c| c.created_by.clone()),
        created_at: existing.map_or(now, |c| c.created_at),
        updated_at: now,
    };
    let r = match existing {
        None => app.db.insert_case(&row).await,
        Some(_) => app.db.update_case(&row).await.map(|_| ()),
    };
    match r {
        Ok(()) => Ok(row),
        Err(botbox_store::DbError::Conflict) => Err(CaseError::Invalid(vec![(
            "/name".into(),
            format!("this workspace already has a Case named \"{}\"", row.name),
        )])),
        Err(e) => Err(e.into()),
    }
}

/// The body's `inputs` for a new task.
fn inputs_of(body: &Json) -> Result<Json, CaseError> {
    match body.get("inputs") {
        Some(i) => Ok(i.clone()),
        None if body.is_object() => Ok(json!({})),
        None => Err(CaseError::Invalid(vec![(
            String::new(),
            "the body must be {\"inputs\": {...}}".into(),
        )])),
    }
}

/// A review body: `{decision, comment?, outputs?}`.
fn review_of(body: &Json) -> Result<(Decision, Option<String>, Option<Json>), CaseError> {
    let decision = body
        .get("decision")
        .and_then(Json::as_str)
        .and_then(Decision::parse)
        .ok_or_else(|| {
            CaseError::Invalid(vec![(
                "/decision".into(),
                "must be \"approve\", \"reject\" or \"changes\"".into(),
            )])
        })?;
    let comment = match body.get("comment") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) if s.len() <= 16 << 10 => Some(s.clone()),
        Some(_) => {
            return Err(CaseError::Invalid(vec![(
                "/comment".into(),
                "must be a string of at most 16 KiB".into(),
            )]));
        }
    };
    Ok((decision, comment, body.get("outputs").cloned()))
}

fn outputs_view(t: &TaskRow) -> Json {
    t.outputs
        .as_deref()
        .and_then(|o| serde_json::from_str(o).ok())
        .unwrap_or_else(|| json!({}))
}

// ---------------------------------------------------------------------------------------------
// /v1: Cases and tasks (workspace key)

/// A `/v1` caller holding a workspace key (`sk-ws-`): its workspace and the name records
/// give it. An agent key is refused (403) before the handler runs.
struct Ws {
    app: App,
    ws: String,
    by: String,
}

impl FromRequestParts<App> for Ws {
    type Rejection = V1Error;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, V1Error> {
        let key = parts
            .extensions
            .get::<KeyCtx>()
            .ok_or_else(|| Problem::internal("a /v1 route without its key gate"))?;
        if key.kind != KeyKind::Workspace {
            return Err(V1Error(Problem::forbidden(
                "Cases, tasks and webhooks need a workspace key (sk-ws-…); an agent key only chats.",
            )));
        }
        Ok(Ws {
            app: app.clone(),
            ws: key.key.scope.clone(),
            by: format!("key {} ({})", key.key.name, key.key.hint),
        })
    }
}

impl Ws {
    fn scope(&self) -> Scope<'_> {
        Scope::Workspace(&self.ws)
    }

    /// `{"data": [...]}` of rows shown by `view`.
    fn list<T>(rows: Vec<T>, view: impl Fn(&T) -> Json) -> V1Json {
        Ok(axum::Json(
            json!({"data": rows.iter().map(view).collect::<Vec<_>>()}),
        ))
    }

    /// A registration's view with its signing secret, shown this once.
    fn with_secret(&self, mut view: Json, id: &str, generation: i64) -> Json {
        view["secret"] = json!(show_secret(&self.app.tasks.key.secret(id, generation)));
        view
    }
}

type V1Json = V1Result<axum::Json<Json>>;

fn json_body(bytes: &[u8]) -> V1Result<Json> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| V1Error(Problem::invalid(format!("The body is not valid JSON: {e}"))))
}

fn base(app: &App) -> &str {
    &app.config.public_url
}

/// The environment `id` if its project belongs to `workspace` (404 otherwise, also for a
/// missing or malformed id).
async fn env_of_workspace(
    app: &App,
    workspace: &str,
    id: &str,
) -> Result<EnvironmentRow, CaseError> {
    let none = || {
        CaseError::Invalid(vec![(
            "/environmentId".into(),
            format!("no environment \"{id}\" in this workspace"),
        )])
    };
    let env = app.db.environment_by_id(id).await?.ok_or_else(none)?;
    let project = app.db.project(&env.project_id).await?.ok_or_else(none)?;
    if project.owner_id != workspace {
        return Err(none());
    }
    Ok(env)
}

/// Where a Case or task is looked up: the workspace of a `/v1` workspace key, or one
/// project of its owner's workspace (the project API, which also finds a Case by name).
/// Both APIs' handlers go through it, so a Case outside the caller's reach is "not found"
/// the same way on each.
#[derive(Clone, Copy)]
enum Scope<'a> {
    Workspace(&'a str),
    Project { pid: &'a str, owner: &'a str },
}

impl<'a> Scope<'a> {
    fn workspace(self) -> &'a str {
        match self {
            Scope::Workspace(ws) => ws,
            Scope::Project { owner, .. } => owner,
        }
    }

    fn not_found(self, what: &str, id: &str) -> CaseError {
        CaseError::NotFound(match self {
            Scope::Workspace(_) => format!("no {what} {id}"),
            Scope::Project { .. } => format!("{} {id}", what.to_lowercase()),
        })
    }

    /// A Case by id (or, in a project, by name: names are unique in the workspace).
    async fn case(self, app: &App, id: &str) -> Result<CaseRow, CaseError> {
        let found = app.db.case_in(self.workspace(), id).await?;
        let found = match self {
            Scope::Workspace(_) => found,
            Scope::Project { pid, owner } => match found.filter(|c| c.project_id == pid) {
                Some(c) => Some(c),
                None => app
                    .db
                    .list_cases(owner)
                    .await?
                    .into_iter()
                    .find(|c| c.name == id && c.project_id == pid),
            },
        };
        found.ok_or_else(|| self.not_found("Case", id))
    }

    /// A task whose Case is in this scope.
    async fn task(self, app: &App, id: &str) -> Result<TaskRow, CaseError> {
        let t = app.db.task_in(self.workspace(), id).await?;
        let t = t.ok_or_else(|| self.not_found("task", id))?;
        if let Scope::Project { pid, owner } = self {
            match app.db.case_in(owner, &t.case_id).await? {
                Some(c) if c.project_id == pid => {}
                _ => return Err(self.not_found("task", id)),
            }
        }
        Ok(t)
    }
}

/// A new task of Case `c` from a `{"inputs": {...}}` body, created by `by`.
async fn new_task(app: &App, c: &CaseRow, body: &Json, by: &str) -> Result<TaskRow, CaseError> {
    app.tasks
        .create(c, &inputs_of(body)?, by, None)
        .await?
        .map_err(|_| CaseError::Internal(anyhow::anyhow!("deduplicated without a receipt")))
}

/// Records `by`'s review decision on task `id` and answers the task as it is after it.
async fn review_in(
    app: &App,
    scope: Scope<'_>,
    id: &str,
    body: &Json,
    by: &str,
) -> Result<Json, CaseError> {
    let t = scope.task(app, id).await?;
    let (d, comment, edits) = review_of(body)?;
    app.tasks
        .review(&t, d, comment.as_deref(), edits.as_ref(), by)
        .await?;
    let t = scope.task(app, id).await?;
    app.tasks.view(&t, base(app)).await
}

fn created(v: Json) -> Response {
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

/// Creates a Case bound to an environment of the workspace.
#[utoipa::path(post, path = "/v1/cases", tag = "cases", security(("bearer" = [])),
    request_body = Object, responses((status = 201, body = Object), (status = 400), (status = 403)))]
async fn v1_create_case(k: Ws, body: Bytes) -> V1Result<Response> {
    let (name, env_id, _, spec) = split_case(&json_body(&body)?)?;
    let env_id = env_id.ok_or_else(|| {
        Problem::invalid_at("/environmentId", "a Case needs environmentId (its agent)")
    })?;
    let env = env_of_workspace(&k.app, &k.ws, &env_id).await?;
    let c = save_case(&k.app, &k.ws, &env, name, &spec, &k.by, None).await?;
    Ok(created(case_view(&c)))
}

/// The workspace's Cases.
#[utoipa::path(get, path = "/v1/cases", tag = "cases", security(("bearer" = [])),
    responses((status = 200, body = Object)))]
async fn v1_list_cases(k: Ws) -> V1Json {
    Ws::list(k.app.db.list_cases(&k.ws).await?, case_view)
}

#[utoipa::path(get, path = "/v1/cases/{caseId}", tag = "cases", security(("bearer" = [])),
    params(("caseId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn v1_get_case(k: Ws, Path(id): Path<String>) -> V1Json {
    let c = k.scope().case(&k.app, &id).await?;
    Ok(axum::Json(case_view(&c)))
}

/// Replaces a Case (its tasks keep running with the Case as it is when each run ends).
#[utoipa::path(put, path = "/v1/cases/{caseId}", tag = "cases", security(("bearer" = [])),
    params(("caseId" = String, Path)), request_body = Object,
    responses((status = 200, body = Object), (status = 400), (status = 404)))]
async fn v1_put_case(k: Ws, Path(id): Path<String>, body: Bytes) -> V1Json {
    let old = k.scope().case(&k.app, &id).await?;
    let (name, env_id, _, spec) = split_case(&json_body(&body)?)?;
    let env_id = env_id.unwrap_or_else(|| old.environment_id.clone());
    let env = env_of_workspace(&k.app, &k.ws, &env_id).await?;
    let c = save_case(&k.app, &k.ws, &env, name, &spec, &k.by, Some(&old)).await?;
    Ok(axum::Json(case_view(&c)))
}

/// 204 when `deleted`, else 404 naming what was not found.
fn deleted(deleted: bool, what: &str, id: &str) -> V1Result<StatusCode> {
    match deleted {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(V1Error(Problem::not_found(format!("no {what} {id}")))),
    }
}

#[utoipa::path(delete, path = "/v1/cases/{caseId}", tag = "cases", security(("bearer" = [])),
    params(("caseId" = String, Path)), responses((status = 204), (status = 404)))]
async fn v1_delete_case(k: Ws, Path(id): Path<String>) -> V1Result<StatusCode> {
    deleted(k.app.db.delete_case(&k.ws, &id).await?, "Case", &id)
}

/// Creates a task: `{"inputs": {...}}`, checked against the Case's input fields (400 with a
/// pointer per bad field). 201 with the task (`pending`).
#[utoipa::path(post, path = "/v1/cases/{caseId}/tasks", tag = "cases", security(("bearer" = [])),
    params(("caseId" = String, Path)), request_body = Object,
    responses((status = 201, body = Object), (status = 400), (status = 404)))]
async fn v1_create_task(k: Ws, Path(id): Path<String>, body: Bytes) -> V1Result<Response> {
    let c = k.scope().case(&k.app, &id).await?;
    let t = new_task(&k.app, &c, &json_body(&body)?, &k.by).await?;
    let mut r = created(k.app.tasks.view(&t, base(&k.app)).await?);
    r.headers_mut().insert(
        header::LOCATION,
        HeaderValue::from_str(&format!("/v1/tasks/{}", t.id)).unwrap(),
    );
    Ok(r)
}

/// The Case's latest 100 tasks, newest first.
#[utoipa::path(get, path = "/v1/cases/{caseId}/tasks", tag = "cases", security(("bearer" = [])),
    params(("caseId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn v1_list_tasks(k: Ws, Path(id): Path<String>) -> V1Json {
    let c = k.scope().case(&k.app, &id).await?;
    Ok(axum::Json(tasks_view(&k.app, &c).await?))
}

/// A Case's tasks as both APIs list them: `{"data": [task, …]}`.
async fn tasks_view(app: &App, c: &CaseRow) -> Result<Json, CaseError> {
    let mut out = Vec::new();
    for t in app.db.list_tasks(&c.workspace_id, &c.id).await? {
        out.push(app.tasks.view(&t, base(app)).await?);
    }
    Ok(json!({"data": out}))
}

/// A done task's `{outputs, artifacts}` as both APIs answer it; None until it is done
/// (each API says so in its own error shape).
async fn done_outputs(app: &App, t: &TaskRow) -> Result<Option<Json>, CaseError> {
    if t.status != cases::status::DONE {
        return Ok(None);
    }
    Ok(Some(json!({
        "outputs": outputs_view(t),
        "artifacts": app.tasks.artifacts(&t.id, base(app)).await?,
    })))
}

/// A task. While it is not finished, `Retry-After` says when to poll again (a task in
/// review may wait for a person for a long time: prefer callbacks).
#[utoipa::path(get, path = "/v1/tasks/{taskId}", tag = "cases", security(("bearer" = [])),
    params(("taskId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn v1_get_task(k: Ws, Path(id): Path<String>) -> V1Result<Response> {
    let t = k.scope().task(&k.app, &id).await?;
    Ok(with_retry_after(
        &t,
        k.app.tasks.view(&t, base(&k.app)).await?,
    ))
}

fn with_retry_after(t: &TaskRow, v: Json) -> Response {
    let mut r = axum::Json(v).into_response();
    let after = match t.status.as_str() {
        cases::status::PENDING | cases::status::IN_PROGRESS => Some("1"),
        cases::status::REVIEW => Some("60"),
        _ => None,
    };
    if let Some(a) = after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(a));
    }
    r
}

/// The outputs and artifacts of a `done` task; 409 `task-not-done` before.
#[utoipa::path(get, path = "/v1/tasks/{taskId}/outputs", tag = "cases", security(("bearer" = [])),
    params(("taskId" = String, Path)), responses((status = 200, body = Object), (status = 404), (status = 409)))]
async fn v1_task_outputs(k: Ws, Path(id): Path<String>) -> V1Json {
    let t = k.scope().task(&k.app, &id).await?;
    let Some(v) = done_outputs(&k.app, &t).await? else {
        let detail = format!(
            "The task is {}; outputs are read when it is done.",
            t.status
        );
        let p = Problem::conflict("task-not-done", "Task not done", detail);
        return Err(V1Error(p.with("currentStatus", json!(t.status))));
    };
    Ok(axum::Json(v))
}

/// A reviewer's decision: `{decision: approve|reject|changes, comment?, outputs?}`.
/// 409 `invalid-transition` (with `currentStatus`) unless the task is in review.
#[utoipa::path(post, path = "/v1/tasks/{taskId}/review", tag = "cases", security(("bearer" = [])),
    params(("taskId" = String, Path)), request_body = Object,
    responses((status = 200, body = Object), (status = 400), (status = 404), (status = 409)))]
async fn v1_review_task(k: Ws, Path(id): Path<String>, body: Bytes) -> V1Json {
    let body = json_body(&body)?;
    Ok(axum::Json(
        review_in(&k.app, k.scope(), &id, &body, &k.by).await?,
    ))
}

// ---------------------------------------------------------------------------------------------
// /v1: callback endpoints

fn endpoint_view(e: &EndpointRow) -> Json {
    json!({"id": e.id, "url": e.url,
        "eventTypes": serde_json::from_str::<Json>(&e.event_types).unwrap_or(json!([])),
        "enabled": e.enabled == 1, "disabledReason": e.disabled_reason,
        "failing": e.failing_since.is_some(),
        "failingSince": e.failing_since.map(botbox_service::agent::iso_ms),
        "createdAt": botbox_service::agent::iso_ms(e.created_at)})
}

/// Registers a callback endpoint: `{url, eventTypes?}` (default: every task event). The
/// URL is https (http too where [`webhooks::CallbackConfig::allow_http`] allows it). The
/// answer shows its signing `secret` (`whsec_…`) once.
#[utoipa::path(post, path = "/v1/webhooks", tag = "cases", security(("bearer" = [])),
    request_body = Object, responses((status = 201, body = Object), (status = 400)))]
async fn v1_create_endpoint(k: Ws, body: Bytes) -> V1Result<Response> {
    let allow_http = k.app.tasks.callbacks.allow_http();
    let e = subscriptions::new_endpoint(&k.ws, &json_body(&body)?, &k.by, allow_http)?;
    k.app.db.insert_endpoint(&e).await?;
    Ok(created(k.with_secret(
        endpoint_view(&e),
        &e.id,
        e.generation,
    )))
}

#[utoipa::path(get, path = "/v1/webhooks", tag = "cases", security(("bearer" = [])),
    responses((status = 200, body = Object)))]
async fn v1_list_endpoints(k: Ws) -> V1Json {
    Ws::list(k.app.db.list_endpoints(&k.ws).await?, endpoint_view)
}

fn no_endpoint(id: &str) -> V1Error {
    V1Error(Problem::not_found(format!("no webhook endpoint {id}")))
}

impl Ws {
    async fn endpoint(&self, id: &str) -> V1Result<EndpointRow> {
        let e = self.app.db.endpoint_in(&self.ws, id).await?;
        e.ok_or_else(|| no_endpoint(id))
    }
}

#[utoipa::path(get, path = "/v1/webhooks/{endpointId}", tag = "cases", security(("bearer" = [])),
    params(("endpointId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn v1_get_endpoint(k: Ws, Path(id): Path<String>) -> V1Json {
    Ok(axum::Json(endpoint_view(&k.endpoint(&id).await?)))
}

#[utoipa::path(delete, path = "/v1/webhooks/{endpointId}", tag = "cases", security(("bearer" = [])),
    params(("endpointId" = String, Path)), responses((status = 204), (status = 404)))]
async fn v1_delete_endpoint(k: Ws, Path(id): Path<String>) -> V1Result<StatusCode> {
    deleted(
        k.app.db.delete_endpoint(&k.ws, &id).await?,
        "webhook endpoint",
        &id,
    )
}

/// A new signing secret (shown once); the previous one keeps signing for 24 h, so
/// receivers can switch without losing a callback.
#[utoipa::path(post, path = "/v1/webhooks/{endpointId}/rotate", tag = "cases", security(("bearer" = [])),
    params(("endpointId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn v1_rotate_endpoint(k: Ws, Path(id): Path<String>) -> V1Json {
    let grace_until = now_ms() + webhooks::ROTATION_GRACE_MS;
    let e = k.app.db.rotate_endpoint(&k.ws, &id, grace_until).await?;
    let e = e.ok_or_else(|| no_endpoint(&id))?;
    Ok(axum::Json(k.with_secret(
        endpoint_view(&e),
        &e.id,
        e.generation,
    )))
}

/// Turns a disabled endpoint (410 Gone) on again.
#[utoipa::path(post, path = "/v1/webhooks/{endpointId}/enable", tag = "cases", security(("bearer" = [])),
    params(("endpointId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn v1_enable_endpoint(k: Ws, Path(id): Path<String>) -> V1Json {
    let e = k.endpoint(&id).await?;
    k.app.db.set_endpoint_enabled(&e.id, None).await?;
    Ok(axum::Json(endpoint_view(&k.endpoint(&id).await?)))
}

/// The endpoint's latest 100 messages with every delivery attempt.
#[utoipa::path(get, path = "/v1/webhooks/{endpointId}/messages", tag = "cases", security(("bearer" = [])),
    params(("endpointId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn v1_endpoint_messages(k: Ws, Path(id): Path<String>) -> V1Json {
    let e = k.endpoint(&id).await?;
    let iso = botbox_service::agent::iso_ms;
    let mut out = Vec::new();
    for m in k.app.db.endpoint_messages(&e.id).await? {
        let attempts: Vec<Json> = k
            .app
            .db
            .webhook_attempts(&m.id)
            .await?
            .into_iter()
            .map(|a| {
                json!({"attempt": a.attempt, "at": iso(a.at),
                "statusCode": a.status_code, "error": a.error, "durationMs": a.duration_ms})
            })
            .collect();
        out.push(
            json!({"id": m.id, "eventType": m.event_type, "status": m.status,
            "payload": serde_json::from_str::<Json>(&m.body).unwrap_or(Json::Null),
            "createdAt": iso(m.created_at),
            "nextAttemptAt": (m.status == "pending").then(|| iso(m.next_at)),
            "attempts": attempts}),
        );
    }
    Ok(axum::Json(json!({"data": out})))
}

// ---------------------------------------------------------------------------------------------
// /v1: inbound hooks

fn hook_view(app: &App, h: &HookRow) -> Json {
    json!({"id": h.id, "caseId": h.case_id,
        "mapping": serde_json::from_str::<Json>(&h.mapping).unwrap_or(json!({})),
        "url": format!("{}/v1/hooks/{}", base(app).trim_end_matches('/'), h.id),
        "createdAt": botbox_service::agent::iso_ms(h.created_at)})
}

/// Creates an inbound hook on a Case: `{caseId, mapping?}` where `mapping` names, per input
/// field, a JSON pointer into the caller's body (default: the body's member of the field's
/// name). The answer shows the hook's `url` and signing `secret` once.
#[utoipa::path(post, path = "/v1/hooks", tag = "cases", security(("bearer" = [])),
    request_body = Object, responses((status = 201, body = Object), (status = 400), (status = 404)))]
async fn v1_create_hook(k: Ws, body: Bytes) -> V1Result<Response> {
    let b = json_body(&body)?;
    let case_id = b["caseId"].as_str().filter(|c| !c.is_empty());
    let case_id = case_id.ok_or_else(|| {
        Problem::invalid_at("/caseId", "the Case the hook creates tasks of is required")
    })?;
    let c = k.scope().case(&k.app, case_id).await?;
    let h = subscriptions::new_hook(&c, &b, &k.by)?;
    k.app.db.insert_hook(&h).await?;
    Ok(created(k.with_secret(
        hook_view(&k.app, &h),
        &h.id,
        h.generation,
    )))
}

#[utoipa::path(get, path = "/v1/hooks", tag = "cases", security(("bearer" = [])),
    responses((status = 200, body = Object)))]
async fn v1_list_hooks(k: Ws) -> V1Json {
    Ws::list(k.app.db.list_hooks(&k.ws).await?, |h| hook_view(&k.app, h))
}

#[utoipa::path(delete, path = "/v1/hooks/{hookId}", tag = "cases", security(("bearer" = [])),
    params(("hookId" = String, Path)), responses((status = 204), (status = 404)))]
async fn v1_delete_hook(k: Ws, Path(id): Path<String>) -> V1Result<StatusCode> {
    deleted(k.app.db.delete_hook(&k.ws, &id).await?, "hook", &id)
}

/// An inbound call (no API key): signed with the hook's secret per Standard Webhooks
/// (`webhook-id`, `webhook-timestamp` within 5 minutes, `webhook-signature`). Creates a
/// task from the body and answers 202 `{taskId}` at once; a repeated `webhook-id` answers
/// the first task again and creates nothing. Bad or missing signature → 401; stale
/// timestamp → 401 `timestamp-out-of-tolerance`; inputs that do not fit the Case → 400.
#[utoipa::path(post, path = "/v1/hooks/{hookId}", tag = "cases",
    params(("hookId" = String, Path)), request_body = Object,
    responses((status = 202, body = Object), (status = 400), (status = 401), (status = 404)))]
async fn receive_hook(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> V1Result<Response> {
    let unauthorized = |code: &'static str, detail: String| {
        Problem::new(StatusCode::UNAUTHORIZED, code, "Unauthorized", detail)
    };
    let hook = match app.db.hook(&id).await? {
        Some(h) => h,
        // The same answer as a bad signature: the hook's existence is not told.
        None => {
            return Err(V1Error(unauthorized(
                "bad-signature",
                "the webhook signature does not verify".into(),
            )));
        }
    };
    let secrets = [app.tasks.key.secret(&hook.id, hook.generation)];
    let webhook_id = match webhooks::verify(&headers, &body, &secrets, now_ms() / 1000) {
        Ok(id) => id.to_owned(),
        Err(VerifyError::Stale(which)) => {
            return Err(V1Error(unauthorized(
                "timestamp-out-of-tolerance",
                format!(
                    "webhook-timestamp is {which}: it must be within 5 minutes of the server's clock"
                ),
            )));
        }
        Err(VerifyError::Missing(h)) => {
            return Err(V1Error(unauthorized(
                "bad-signature",
                format!("the {h} header is missing or malformed"),
            )));
        }
        Err(VerifyError::BadSignature) => {
            return Err(V1Error(unauthorized(
                "bad-signature",
                "the webhook signature does not verify".into(),
            )));
        }
    };
    // Charged only once the signature verified: nobody else can use up a hook's quota.
    if let Err(reset) = app.v1.hook_call(&hook.id, app.config.agent_chat_per_minute) {
        return Err(V1Error(
            Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "quota-exceeded",
                "Quota exceeded",
                format!(
                    "This hook may be called {} times per minute.",
                    app.config.agent_chat_per_minute
                ),
            )
            .header(axum::http::header::RETRY_AFTER, HeaderValue::from(reset)),
        ));
    }
    let accepted =
        |task: &str| (StatusCode::ACCEPTED, axum::Json(json!({"taskId": task}))).into_response();
    let Some(case) = app.db.case_in(&hook.workspace_id, &hook.case_id).await? else {
        return Err(V1Error(Problem::not_found("the hook's Case was deleted")));
    };
    let payload = json_body(&body)?;
    let mapping: Map<String, Json> = serde_json::from_str(&hook.mapping).unwrap_or_default();
    let spec: CaseSpec = serde_json::from_str(&case.spec).map_err(Problem::internal)?;
    let mut inputs = Map::new();
    for f in &spec.inputs {
        let v = match mapping.get(&f.name).and_then(Json::as_str) {
            Some(ptr) => payload.pointer(ptr).cloned(),
            None => payload.get(&f.name).cloned(),
        };
        if let Some(v) = v {
            inputs.insert(f.name.clone(), v);
        }
    }
    match app
        .tasks
        .create(
            &case,
            &Json::Object(inputs),
            &format!("hook {}", hook.id),
            Some((&hook.id, &webhook_id)),
        )
        .await?
    {
        Ok(t) => Ok(accepted(&t.id)),
        Err(first) => {
            let mut r = accepted(&first);
            r.headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            Ok(r)
        }
    }
}

/// An artifact's content, by its signed URL (no key; the URL is the credential): 403 when
/// the signature does not match, 410 once it expired.
#[utoipa::path(get, path = "/v1/artifacts/{artifactId}", tag = "cases",
    params(("artifactId" = String, Path), ("expires" = i64, Query), ("signature" = String, Query)),
    responses((status = 200, description = "the artifact's bytes"), (status = 403), (status = 410)))]
async fn get_artifact(
    State(app): State<App>,
    Path(id): Path<String>,
    uri: Uri,
) -> V1Result<Response> {
    let q = query_pairs(uri.query());
    let get = |k: &str| q.get(k).map(String::as_str);
    let expires: i64 = get("expires").and_then(|e| e.parse().ok()).unwrap_or(0);
    let sig = get("signature").unwrap_or_default();
    if !app.tasks.key.artifact_signature_ok(&id, expires, sig) {
        return Err(V1Error(Problem::forbidden(
            "the artifact URL's signature does not match",
        )));
    }
    if expires < now_ms() / 1000 {
        return Err(V1Error(Problem::new(
            StatusCode::GONE,
            "url-expired",
            "URL expired",
            "this artifact URL expired; read the task again for a fresh one",
        )));
    }
    let a = app
        .db
        .artifact(&id)
        .await?
        .ok_or_else(|| Problem::not_found("no such artifact"))?;
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&a.content)
        .map_err(Problem::internal)?;
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&a.media_type)
            .unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    // Never rendered inline by a browser on our origin (a tenant controls the bytes).
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_str(&format!(
            "attachment; filename=\"{}\"",
            a.name.replace('"', "")
        ))
        .unwrap_or(HeaderValue::from_static("attachment")),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    Ok(r)
}

// ---------------------------------------------------------------------------------------------
// The project API (user tokens; the CLI)

/// A project as a caller may act on it, with its Cases and tasks in reach.
struct Member {
    app: App,
    pid: String,
    project: ProjectRow,
}

impl Member {
    /// Project `pid` if `caller` may `act` on it (404 or 403 otherwise).
    async fn of(app: App, caller: &Caller, pid: String, act: Action) -> ApiResult<Member> {
        let project = project_for(&app, caller, &pid, act, Resource::Projects).await?;
        Ok(Member { app, pid, project })
    }

    fn scope(&self) -> Scope<'_> {
        Scope::Project {
            pid: &self.pid,
            owner: &self.project.owner_id,
        }
    }

    /// A Case of the project, by id or name.
    async fn case(&self, case: &str) -> ApiResult<CaseRow> {
        Ok(self.scope().case(&self.app, case).await?)
    }

    /// A task of one of the project's Cases.
    async fn task(&self, id: &str) -> ApiResult<TaskRow> {
        Ok(self.scope().task(&self.app, id).await?)
    }
}

/// A project and one of its Cases or tasks, from the path.
type Ids = Path<(String, String)>;
type Answer = ApiResult<axum::Json<Json>>;

/// Creates or replaces (by name) a Case of the project, bound to one of its environments:
/// `{name, environment: <name or id>, inputs, outputs, artifacts, review, timeoutSeconds}`.
#[utoipa::path(post, path = "/projects/{projectId}/cases", tag = "cases",
    params(("projectId" = String, Path)), request_body = Object,
    responses((status = 200, body = Object), (status = 400), (status = 404)))]
async fn create_case(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    Body(doc): Body<Json>,
) -> ApiResult<axum::Json<Json>> {
    let p = project_for(&app, &caller, &pid, Action::Update, Resource::Projects).await?;
    let (name, env_id, env_name, spec) = split_case(&doc)?;
    let want = env_id.or(env_name).ok_or_else(|| {
        ApiError::bad("/environment: a Case needs the environment it runs on (name or id)")
    })?;
    let env = match app.db.environment(&pid, &want).await? {
        Some(e) => e,
        None => app
            .db
            .environment_by_name(&pid, &want)
            .await?
            .ok_or_else(|| {
                ApiError::bad(format!(
                    "/environment: no environment \"{want}\" in this project"
                ))
            })?,
    };
    let existing = app
        .db
        .list_cases(&p.owner_id)
        .await?
        .into_iter()
        .find(|c| c.name == name);
    if let Some(c) = &existing
        && c.project_id != pid
    {
        return Err(ApiError::Conflict(format!(
            "the workspace's Case \"{name}\" belongs to another project"
        )));
    }
    let c = save_case(
        &app,
        &p.owner_id,
        &env,
        name,
        &spec,
        &caller.username,
        existing.as_ref(),
    )
    .await?;
    Ok(axum::Json(case_view(&c)))
}

/// The project's Cases; with `tasks=true` each carries its tasks (newest first, 100 at most),
/// so a page shows every Case with its tasks in one request.
#[utoipa::path(get, path = "/projects/{projectId}/cases", tag = "cases",
    params(("projectId" = String, Path), ("tasks" = Option<bool>, Query)),
    responses((status = 200, body = Object)))]
async fn list_cases(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    uri: Uri,
) -> ApiResult<axum::Json<Json>> {
    let p = project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let with_tasks = query_pairs(uri.query()).get("tasks").map(String::as_str) == Some("true");
    let mut v = Vec::new();
    for c in app.db.list_cases(&p.owner_id).await? {
        if c.project_id != pid {
            continue;
        }
        let mut view = case_view(&c);
        if with_tasks {
            view["tasks"] = tasks_view(&app, &c).await?["data"].take();
        }
        v.push(view);
    }
    Ok(axum::Json(json!({"data": v})))
}

/// A Case of the project, by id or name.
#[utoipa::path(get, path = "/projects/{projectId}/cases/{caseId}", tag = "cases",
    params(("projectId" = String, Path), ("caseId" = String, Path)),
    responses((status = 200, body = Object), (status = 404)))]
async fn get_case(State(app): State<App>, who: Caller, Path((pid, case)): Ids) -> Answer {
    let c = Member::of(app, &who, pid, Action::Read)
        .await?
        .case(&case)
        .await?;
    Ok(axum::Json(case_view(&c)))
}

/// Deletes a Case of the project (by id or name). Its tasks are no longer reached through
/// the project (the workspace's key still reads them on `/v1`); one not yet run fails with
/// `case-deleted` when a worker takes it.
#[utoipa::path(delete, path = "/projects/{projectId}/cases/{caseId}", tag = "cases",
    params(("projectId" = String, Path), ("caseId" = String, Path)),
    responses((status = 204), (status = 404)))]
async fn delete_case(
    State(app): State<App>,
    who: Caller,
    Path((pid, case)): Ids,
) -> ApiResult<StatusCode> {
    let m = Member::of(app, &who, pid, Action::Update).await?;
    let c = m.case(&case).await?;
    if !m.app.db.delete_case(&m.project.owner_id, &c.id).await? {
        return Err(ApiError::not_found(format!("case {case}")));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The tasks of a Case of the project (newest first, 100 at most).
#[utoipa::path(get, path = "/projects/{projectId}/cases/{caseId}/tasks", tag = "cases",
    params(("projectId" = String, Path), ("caseId" = String, Path)),
    responses((status = 200, body = Object), (status = 404)))]
async fn list_project_tasks(State(app): State<App>, who: Caller, Path((pid, c)): Ids) -> Answer {
    let m = Member::of(app, &who, pid, Action::Read).await?;
    let c = m.case(&c).await?;
    Ok(axum::Json(tasks_view(&m.app, &c).await?))
}

/// A done task's outputs and artifacts (409 until it is done).
#[utoipa::path(get, path = "/projects/{projectId}/tasks/{taskId}/outputs", tag = "cases",
    params(("projectId" = String, Path), ("taskId" = String, Path)),
    responses((status = 200, body = Object), (status = 404), (status = 409)))]
async fn task_outputs(State(app): State<App>, who: Caller, Path((pid, id)): Ids) -> Answer {
    let m = Member::of(app, &who, pid, Action::Read).await?;
    let t = m.task(&id).await?;
    match done_outputs(&m.app, &t).await? {
        Some(v) => Ok(axum::Json(v)),
        None => Err(ApiError::Conflict(format!(
            "the task is {}; outputs are read when it is done",
            t.status
        ))),
    }
}

/// Creates a task on a Case of the project (`{"inputs": {...}}`); the Case by id or name.
#[utoipa::path(post, path = "/projects/{projectId}/cases/{caseId}/tasks", tag = "cases",
    params(("projectId" = String, Path), ("caseId" = String, Path)), request_body = Object,
    responses((status = 200, body = Object), (status = 400), (status = 404)))]
async fn create_task(
    State(app): State<App>,
    who: Caller,
    Path((pid, case)): Ids,
    Body(body): Body<Json>,
) -> Answer {
    let m = Member::of(app.clone(), &who, pid, Action::Update).await?;
    let c = m.case(&case).await?;
    let t = new_task(&app, &c, &body, &who.username).await?;
    Ok(axum::Json(app.tasks.view(&t, base(&app)).await?))
}

#[utoipa::path(get, path = "/projects/{projectId}/tasks/{taskId}", tag = "cases",
    params(("projectId" = String, Path), ("taskId" = String, Path)),
    responses((status = 200, body = Object), (status = 404)))]
async fn get_task(State(app): State<App>, who: Caller, Path((pid, id)): Ids) -> Answer {
    let t = Member::of(app.clone(), &who, pid, Action::Read)
        .await?
        .task(&id)
        .await?;
    Ok(axum::Json(app.tasks.view(&t, base(&app)).await?))
}

/// A reviewer's decision (update rights on the project).
#[utoipa::path(post, path = "/projects/{projectId}/tasks/{taskId}/review", tag = "cases",
    params(("projectId" = String, Path), ("taskId" = String, Path)), request_body = Object,
    responses((status = 200, body = Object), (status = 400), (status = 404), (status = 409)))]
async fn review_task(
    State(app): State<App>,
    who: Caller,
    Path((pid, id)): Ids,
    Body(body): Body<Json>,
) -> Answer {
    let m = Member::of(app, &who, pid, Action::Update).await?;
    let view = review_in(&m.app, m.scope(), &id, &body, &who.username).await?;
    Ok(axum::Json(view))
}
