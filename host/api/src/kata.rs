//! kata-cli 2.7.2 compatibility: the one place where botbox answers the official
//! Kata command-line client in the shapes it reads, where they differ from the project API's
//! documented ones.
//!
//! **Recognising kata-cli.** Its API client (zaun, a swagger-codegen client over superagent
//! 3.7.0) adds no header of its own: requests carry `User-Agent: node-superagent/<version>`
//! (checked: [`is_kata`]). Only those requests get kata-cli's shapes; everyone else gets the
//! documented ones. Routes kata-cli needs beyond those (`/cli-login`, `GET /tokens/{id}`,
//! `PUT …/bot/revisions/{rev}`, rollback, errors, …) are ordinary routes for everyone, in the
//! modules of their resources.
//!
//! **What [`layer`] changes for kata-cli** (each from kata-cli's source, see
//! docs/moving-from-kata.md):
//! - every error body is JSON `{"message": …}` (documented as plain text; kata-cli prints
//!   `body.message`, and `{}` for a text body);
//! - the channel list is a bare array (kata-cli calls `body.forEach`);
//! - a channel's `options` is a JSON string in create/update answers (kata-cli calls
//!   `JSON.parse(body.options).challenge` for fbmessenger);
//! - `GET /nlus/profiles` is a bare array of `{type, name, desc}`;
//! - `GET …/nlus/{name}/entities` is a map from entity name to entity (nl-push compares it
//!   key by key);
//! - `POST …/predict` gives `result` as the list `[{input, output}]` (nl-predict iterates it);
//! - `GET …/nlu/revisions` of a project never trained lists one empty revision (create-
//!   deployment calls `.substring` on `data[0].revision`).

use super::{ApiError, ApiResult, App, Caller, project_for};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use botbox_service::auth::{Action, Resource};
use serde_json::{Value as Json_, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Answers bigger than this are passed on unchanged (kata-cli's answers are small).
const MAX_ADAPTED_BODY: usize = 8 << 20;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(project_nlu))
        .routes(routes!(has_active_job))
        .routes(routes!(clear_caches))
}

/// Is this request kata-cli's? Its HTTP client sends `User-Agent: node-superagent/…`.
pub fn is_kata(headers: &HeaderMap) -> bool {
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ua| ua.starts_with("node-superagent/"))
}

/// The middleware: kata-cli's requests get kata-cli's shapes (module docs).
pub async fn layer(req: Request, next: Next) -> Response {
    if !is_kata(req.headers()) {
        return next.run(req).await;
    }
    let method = req.method().clone();
    let path = req.uri().path().trim_end_matches('/').to_string();
    let resp = next.run(req).await;
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ADAPTED_BODY).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "answer too big").into_response();
    };
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let out = if parts.status.is_client_error() || parts.status.is_server_error() {
        Some(error_body(&bytes))
    } else {
        serde_json::from_slice::<Json_>(&bytes)
            .ok()
            .and_then(|v| adapt(&method, &segments, v))
    };
    match out {
        Some(v) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(v.to_string()))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// A plain-text (or JSON) error body as `{"message": …}`: the error's first line and what
/// follows it, on one line.
fn error_body(bytes: &[u8]) -> Json_ {
    if let Ok(v) = serde_json::from_slice::<Json_>(bytes)
        && v.get("message").is_some()
    {
        return v;
    }
    let text = String::from_utf8_lossy(bytes);
    let message = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    json!({ "message": message })
}

/// kata-cli's shape of a successful answer, if it differs from the documented one.
fn adapt(method: &Method, seg: &[&str], v: Json_) -> Option<Json_> {
    match (method.as_str(), seg) {
        // GET /projects/{p}/environments/{e}/channels: a bare array.
        ("GET", ["projects", _, "environments", _, "channels"]) => v.get("data").cloned(),
        // Channel create/update: options as a JSON string.
        ("POST", ["projects", _, "environments", _, "channels"])
        | ("PUT", ["projects", _, "environments", _, "channels", _]) => {
            let mut v = v;
            if let Some(o) = v.get("options").filter(|o| !o.is_string()).cloned() {
                v["options"] = Json_::String(o.to_string());
            }
            Some(v)
        }
        ("GET", ["nlus", "profiles"]) => Some(Json_::Array(
            botbox_nlu::model::profiles_by_type()
                .into_iter()
                .map(|(kind, name)| json!({"type": kind, "name": name, "desc": ""}))
                .collect(),
        )),
        ("GET", ["projects", _, "nlus", _, "entities"]) => {
            let mut map = serde_json::Map::new();
            for e in v.get("data")?.as_array()? {
                let mut e = e.clone();
                let name = e.as_object_mut()?.remove("name")?;
                map.insert(name.as_str()?.to_string(), e);
            }
            Some(Json_::Object(map))
        }
        ("POST", ["projects", _, "nlus", _, "predict"]) => {
            let mut v = v;
            v["result"] = v.get("results")?.clone();
            Some(v)
        }
        ("GET", ["projects", _, "nlu", "revisions"]) => {
            let empty = v.get("data")?.as_array()?.is_empty();
            let mut v = v;
            if empty {
                v["data"] = json!([{"revision": "", "created_at": 0}]);
            }
            Some(v)
        }
        _ => None,
    }
}

/// The project's NLU (its first, named after the project), as kata-cli's nl-pull reads it:
/// `{id, name, lang, visibility, entities, token}`.
#[utoipa::path(get, path = "/projects/{projectId}/nlu", tag = "nlu",
    params(("projectId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn project_nlu(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
) -> ApiResult<Json<Json_>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let page = app.db.project_nlus(&pid, 1, 0).await?;
    let nlu = page
        .items
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found(format!("project {pid} has no NLU")))?;
    let entities: Json_ =
        serde_json::from_str(&nlu.entities).map_err(|e| ApiError::Internal(e.into()))?;
    Ok(Json(json!({
        "id": nlu.id,
        "name": nlu.name,
        "lang": nlu.lang,
        "visibility": nlu.visibility,
        "entities": entities,
        // botbox needs no NL token (bots reach their models in-process).
        "token": "",
    })))
}

/// Whether a training of the NLU runs (kata-cli's nl-train asks before training).
#[utoipa::path(get, path = "/projects/{projectId}/nlus/{nluName}/has_active_job", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn has_active_job(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
) -> ApiResult<Json<Json_>> {
    let nlu = super::nlu::nlu_for(&app, &caller, &pid, &name, false).await?;
    Ok(Json(json!({ "data": nlu.training == "training" })))
}

/// Drops what this process caches of the caller's projects (their routes and ready
/// revisions); the next message reads them from storage. Other tenants' entries stay.
#[utoipa::path(delete, path = "/caches", tag = "projects", responses((status = 200, body = Object)))]
async fn clear_caches(State(app): State<App>, caller: Caller) -> ApiResult<Json<Json_>> {
    caller.require(Action::Update, Resource::Projects)?;
    let owner = [caller.owner()];
    let projects = app.db.list_projects(Some(&owner), i64::MAX, 0).await?.items;
    let ids: Vec<String> = projects.into_iter().map(|p| p.id).collect();
    app.live.forget_projects(&ids);
    Ok(Json(json!({ "cleared": ids.len() })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_superagent_requests_are_kata_cli() {
        let mut h = HeaderMap::new();
        assert!(!is_kata(&h));
        h.insert(
            header::USER_AGENT,
            HeaderValue::from_static("node-superagent/3.7.0"),
        );
        assert!(is_kata(&h));
        h.insert(
            header::USER_AGENT,
            HeaderValue::from_static("botbox-cli/0.1"),
        );
        assert!(!is_kata(&h));
    }

    #[test]
    fn errors_become_json_messages() {
        let v = error_body(b"Wrong API usage. Please refer to the documentation!\nname: required");
        assert_eq!(
            v,
            json!({"message": "Wrong API usage. Please refer to the documentation! name: required"})
        );
    }

    #[test]
    fn shapes_kata_cli_reads() {
        let get = Method::GET;
        let page = json!({"page": 1, "limit": 20, "total": 1, "data": [{"name": "web", "options": {"a": 1}}]});
        assert_eq!(
            adapt(
                &get,
                &["projects", "p", "environments", "e", "channels"],
                page.clone()
            ),
            Some(json!([{"name": "web", "options": {"a": 1}}]))
        );
        let created = adapt(
            &Method::POST,
            &["projects", "p", "environments", "e", "channels"],
            json!({"type": "fbmessenger", "options": {"challenge": "x"}}),
        )
        .unwrap();
        let opts: Json_ = serde_json::from_str(created["options"].as_str().unwrap()).unwrap();
        assert_eq!(opts["challenge"], "x");
        let ents = adapt(
            &get,
            &["projects", "p", "nlus", "n", "entities"],
            json!({"data": [{"name": "city", "type": "phrase", "profile": "default"}]}),
        )
        .unwrap();
        assert_eq!(
            ents,
            json!({"city": {"type": "phrase", "profile": "default"}})
        );
        let revs = adapt(
            &get,
            &["projects", "p", "nlu", "revisions"],
            json!({"data": []}),
        )
        .unwrap();
        assert_eq!(revs["data"][0]["revision"], "");
        assert_eq!(adapt(&get, &["projects"], json!({"data": []})), None);
    }
}
