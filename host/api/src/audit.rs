//! The audit trail over HTTP: [`layer`] records every change request of the project API
//! and of the `/v1` Cases routes (refused and failed ones too), and `GET /audit` reads it.
//!
//! Which requests are changes is one table, [`ACTIONS`] (method and route template → action
//! and resource kind); requests that change nothing (chats, predictions) are listed in
//! [`NOT_CHANGES`], and the `tidy` test fails on a route in neither. Who made the change is
//! set by whatever authenticated it (the `Caller` extractor, the `/v1` key layer, a sign-in)
//! in the request's [`AuditSlot`]; a request no one authenticated is not recorded, except a
//! sign-in. Handlers may add a detail (`AuditSlot::detail`).

use super::{ApiResult, App, Caller, Paging, page_of, query_pairs};
use axum::Json;
use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use botbox_api_types::{AuditActor, AuditEntry, AuditResource, PageOf};
use botbox_service::audit::{self, Actor};
use botbox_store::{AuditFilter, AuditRow, NewAuditEntry};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Changes: (method, route template, action, resource kind, the answer's field that names
/// a created resource).
#[rustfmt::skip]
pub const ACTIONS: &[(&str, &str, &str, &str, Option<&str>)] = &[
    ("POST", "/login", "login", "user", None),
    ("POST", "/cli-login", "login", "user", None),
    ("POST", "/logout", "logout", "token", None),
    ("POST", "/tokens", "token.create", "token", None),
    ("DELETE", "/tokens", "token.revoke", "token", None),
    ("PUT", "/me/password", "password.change", "user", None),
    ("PUT", "/users/{userId}/password", "password.set", "user", None),
    ("POST", "/users", "user.create", "user", Some("id")),
    ("POST", "/users/{userId}/disable", "user.disable", "user", None),
    ("POST", "/users/{userId}/enable", "user.enable", "user", None),
    ("POST", "/teams", "team.create", "team", Some("id")),
    ("DELETE", "/teams/{team}", "team.delete", "team", None),
    ("POST", "/teams/{teamId}/users/{userId}", "team.member.add", "user", None),
    ("DELETE", "/teams/{teamId}/users/{userId}", "team.member.remove", "user", None),
    ("POST", "/teams/{teamId}/keys", "key.create", "key", Some("id")),
    ("DELETE", "/teams/{teamId}/keys/{keyId}", "key.revoke", "key", None),
    ("POST", "/projects", "project.create", "project", Some("id")),
    ("PUT", "/projects/{projectId}", "project.update", "project", None),
    ("DELETE", "/projects/{projectId}", "project.delete", "project", None),
    ("PUT", "/projects/{projectId}/retention", "project.retention", "project", None),
    ("POST", "/projects/{projectId}/bot/revisions", "bot.push", "revision", Some("revision")),
    ("PUT", "/projects/{projectId}/bot/revisions/{revision}", "bot.push", "revision", Some("revision")),
    ("PUT", "/projects/{projectId}/bot/draft", "bot.draft.save", "project", None),
    ("DELETE", "/projects/{projectId}/bot/draft", "bot.draft.delete", "project", None),
    ("POST", "/projects/{projectId}/cms/revisions", "cms.publish", "cms_revision", Some("revision")),
    ("POST", "/projects/{projectId}/deployment/versions", "deployment.create", "deployment", Some("version")),
    ("PUT", "/projects/{projectId}/deployment/versions/{version}", "deployment.update", "deployment", None),
    ("DELETE", "/projects/{projectId}/deployment/versions/{version}", "deployment.delete", "deployment", None),
    ("POST", "/deployments/{deploymentId}/rollback", "deployment.rollback", "deployment", None),
    ("POST", "/projects/{projectId}/environments", "environment.create", "environment", Some("id")),
    ("PUT", "/projects/{projectId}/environments/{environmentId}", "environment.update", "environment", None),
    ("DELETE", "/projects/{projectId}/environments/{environmentId}", "environment.delete", "environment", None),
    ("PUT", "/projects/{projectId}/environments/{environmentId}/canary", "canary.start", "environment", None),
    ("DELETE", "/projects/{projectId}/environments/{environmentId}/canary", "canary.abort", "environment", None),
    ("POST", "/projects/{projectId}/environments/{environmentId}/canary/promote", "canary.promote", "environment", None),
    ("PUT", "/projects/{projectId}/environments/{environmentId}/misunderstood/{id}", "misunderstood.update", "misunderstood", None),
    ("POST", "/projects/{projectId}/replays", "replay.create", "replay", Some("id")),
    ("POST", "/projects/{projectId}/environments/{environmentId}/channels", "channel.create", "channel", Some("id")),
    ("PUT", "/projects/{projectId}/environments/{environmentId}/channels/{channelId}", "channel.update", "channel", None),
    ("DELETE", "/projects/{projectId}/environments/{environmentId}/channels/{channelId}", "channel.delete", "channel", None),
    ("POST", "/projects/{projectId}/environments/{environmentId}/keys", "key.create", "key", Some("id")),
    ("DELETE", "/projects/{projectId}/environments/{environmentId}/keys/{keyId}", "key.revoke", "key", None),
    ("POST", "/projects/{projectId}/nlus", "nlu.create", "nlu", Some("name")),
    ("PUT", "/projects/{projectId}/nlus/{nluName}", "nlu.update", "nlu", None),
    ("POST", "/projects/{projectId}/nlus/{nluName}/entities", "nlu.entity.create", "nlu", None),
    ("PUT", "/projects/{projectId}/nlus/{nluName}/entities/{entityName}", "nlu.entity.update", "entity", None),
    ("DELETE", "/projects/{projectId}/nlus/{nluName}/entities/{entityName}", "nlu.entity.delete", "entity", None),
    ("POST", "/projects/{projectId}/nlus/{nluName}/train", "nlu.train", "nlu", None),
    ("POST", "/projects/{projectId}/nlus/{nluName}/retrain", "nlu.retrain", "nlu", None),
    ("PUT", "/projects/{projectId}/nlus/{nluName}/training_data/{id}", "nlu.training_data.update", "training_data", None),
    ("DELETE", "/projects/{projectId}/nlus/{nluName}/training_data/{id}", "nlu.training_data.delete", "training_data", None),
    ("POST", "/projects/{projectId}/cases", "case.create", "case", Some("id")),
    ("DELETE", "/projects/{projectId}/cases/{caseId}", "case.delete", "case", None),
    ("POST", "/projects/{projectId}/cases/{caseId}/tasks", "task.create", "task", Some("id")),
    ("POST", "/projects/{projectId}/tasks/{taskId}/review", "task.review", "task", None),
    ("DELETE", "/caches", "cache.clear", "cache", None),
    ("POST", "/v1/cases", "case.create", "case", Some("id")),
    ("PUT", "/v1/cases/{caseId}", "case.update", "case", None),
    ("DELETE", "/v1/cases/{caseId}", "case.delete", "case", None),
    ("POST", "/v1/cases/{caseId}/tasks", "task.create", "task", Some("id")),
    ("POST", "/v1/tasks/{taskId}/review", "task.review", "task", None),
    ("POST", "/v1/webhooks", "webhook.create", "webhook", Some("id")),
    ("DELETE", "/v1/webhooks/{endpointId}", "webhook.delete", "webhook", None),
    ("POST", "/v1/webhooks/{endpointId}/enable", "webhook.enable", "webhook", None),
    ("POST", "/v1/webhooks/{endpointId}/rotate", "webhook.rotate", "webhook", None),
    ("POST", "/v1/hooks", "hook.create", "hook", Some("id")),
    ("DELETE", "/v1/hooks/{hookId}", "hook.delete", "hook", None),
];

/// Requests that are not changes of anything a person administers: chats and test chats,
/// NL predictions, a run's cancel and steer, an inbound hook's delivery (a task it creates
/// is the sender's, recorded with the task).
#[cfg_attr(not(test), allow(dead_code))]
pub const NOT_CHANGES: &[(&str, &str)] = &[
    ("POST", "/projects/{projectId}/bot/converse"),
    ("POST", "/projects/{projectId}/nlus/{nluName}/predict"),
    ("POST", "/projects/{projectId}/nlus/{nluName}/debug"),
    ("POST", "/v1/chat"),
    ("POST", "/v1/chat/{runId}/cancel"),
    ("POST", "/v1/chat/{runId}/steer"),
    ("POST", "/v1/hooks/{hookId}"),
];

/// What the request's authentication and its handler tell the audit layer: who, and a
/// detail. Shared (the layer keeps a handle), so what inner code writes is seen after.
#[derive(Clone, Default)]
pub struct AuditSlot(Arc<Mutex<SlotFields>>);

#[derive(Default)]
struct SlotFields {
    actor: Option<Actor>,
    detail: Option<String>,
    owner: Option<String>,
    project: Option<String>,
}

impl AuditSlot {
    /// Who made the request (the first to say wins: the credential that authenticated it).
    pub fn actor(&self, a: Actor) {
        let mut f = self.0.lock().unwrap();
        f.actor.get_or_insert(a);
    }

    /// A sign-in's user (or the name tried), whose own entries it belongs to.
    pub fn signing_in(&self, a: Actor) {
        let mut f = self.0.lock().unwrap();
        f.owner = (!a.id.is_empty()).then(|| a.id.clone());
        f.actor = Some(a);
    }

    /// The project and owner a request acts in when its path does not say (a `/v1` key's).
    pub fn within(&self, project: Option<String>, owner: String) {
        let mut f = self.0.lock().unwrap();
        f.project = project;
        f.owner = Some(owner);
    }

    /// What a person reading the trail needs beyond the action and resource.
    pub fn detail(&self, d: impl Into<String>) {
        self.0.lock().unwrap().detail = Some(d.into());
    }
}

/// The slot of a request, if the audit layer gave it one.
pub fn slot(parts: &axum::http::request::Parts) -> Option<&AuditSlot> {
    parts.extensions.get::<AuditSlot>()
}

/// The action and resource kind of a change route, and the field naming what it creates.
fn action_of(
    method: &Method,
    route: &str,
) -> Option<(&'static str, &'static str, Option<&'static str>)> {
    ACTIONS
        .iter()
        .find(|(m, r, ..)| *m == method.as_str() && *r == route)
        .map(|&(_, _, a, k, c)| (a, k, c))
}

/// Records the change requests it wraps (see the module). Put around the routes, inside
/// the router, where the matched route is known.
pub async fn layer(State(app): State<App>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let Some((action, kind, created)) = route.as_deref().and_then(|r| action_of(req.method(), r))
    else {
        return next.run(req).await;
    };
    let (mut parts, body) = req.into_parts();
    let params: Vec<(String, String)> = RawPathParams::from_request_parts(&mut parts, &app)
        .await
        .map(|p| {
            p.iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let address = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string())
        .unwrap_or_default();
    // Who owns what it changes, read before the change (a deletion takes it away).
    let (mut project_id, mut owner) = owner_of(&app, &params).await;
    let slot = AuditSlot::default();
    parts.extensions.insert(slot.clone());
    let res = next.run(Request::from_parts(parts, body)).await;
    let status = res.status().as_u16();
    let (res, created_id) = match created.filter(|_| res.status().is_success()) {
        Some(field) => created_field(res, field).await,
        None => (res, None),
    };
    // A new project is its own entry's project.
    if let (None, "project", Some(id)) = (&project_id, kind, &created_id) {
        owner = app.db.project(id).await.ok().flatten().map(|p| p.owner_id);
        project_id = Some(id.clone());
    }
    let f = std::mem::take(&mut *slot.0.lock().unwrap());
    let Some(actor) = f.actor else {
        return res;
    };
    let resource_id = created_id
        .or_else(|| params.last().map(|(_, v)| v.clone()))
        .or_else(|| f.owner.clone())
        .unwrap_or_default();
    let owner_id = match kind {
        "user" | "team" if project_id.is_none() && owner.is_none() => f
            .owner
            .or_else(|| (!resource_id.is_empty()).then(|| resource_id.clone())),
        _ => owner.or(f.owner),
    };
    let entry = NewAuditEntry {
        address,
        action: action.to_owned(),
        resource_kind: kind.to_owned(),
        resource_id,
        project_id: project_id.or(f.project),
        owner_id,
        outcome: audit::outcome(status),
        detail: f.detail,
        ..Default::default()
    };
    audit::record(&app.db, &actor, entry).await;
    res
}

/// The project a route's ids name and its owner; else the team or user it names.
async fn owner_of(app: &App, params: &[(String, String)]) -> (Option<String>, Option<String>) {
    let param = |n: &str| params.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let project_id = match (param("projectId"), param("deploymentId")) {
        (Some(p), _) => Some(p),
        (None, Some(d)) => app
            .db
            .deployment_by_id(&d)
            .await
            .ok()
            .flatten()
            .map(|d| d.project_id),
        _ => None,
    };
    if let Some(pid) = project_id {
        let owner = app
            .db
            .project(&pid)
            .await
            .ok()
            .flatten()
            .map(|p| p.owner_id);
        return (Some(pid), owner);
    }
    // `DELETE /teams/{team}` names the team by id or by name.
    let team = match param("team") {
        Some(t) => match app.db.team_by_id(&t).await.ok().flatten() {
            Some(row) => Some(row.id),
            None => app.db.team_by_name(&t).await.ok().flatten().map(|r| r.id),
        },
        None => None,
    };
    (None, param("teamId").or(team).or_else(|| param("userId")))
}

/// The fields that name what a creation made, whichever its route's answer has.
#[derive(serde::Deserialize)]
struct Created {
    id: Option<String>,
    revision: Option<String>,
    version: Option<String>,
    name: Option<String>,
}

/// The id a creation's answer names in `field`. Only an answer whose whole size is known
/// and at most 4 MiB is read (every creation's is: a JSON document), its other fields
/// skipped unparsed; any other answer is passed on untouched, its entry naming the parent
/// resource.
async fn created_field(res: Response, field: &str) -> (Response, Option<String>) {
    use axum::body::HttpBody as _;
    const MAX: u64 = 4 << 20;
    if res.body().size_hint().exact().is_none_or(|n| n > MAX) {
        return (res, None);
    }
    let (parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX as usize).await else {
        // A body of known size that cannot be read failed for the client too.
        let failed = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
        return (
            (failed, "the answer could not be read").into_response(),
            None,
        );
    };
    let id = serde_json::from_slice::<Created>(&bytes)
        .ok()
        .and_then(|c| match field {
            "id" => c.id,
            "revision" => c.revision,
            "version" => c.version,
            _ => c.name,
        });
    let res = Response::from_parts(parts, axum::body::Body::from(bytes));
    (res, id)
}

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(list))
}

fn entry_json(r: AuditRow) -> AuditEntry {
    AuditEntry {
        id: r.id,
        at: r.at,
        actor: AuditActor {
            kind: r.actor_kind,
            id: r.actor_id,
            name: r.actor_name,
            owner: r.actor_owner,
        },
        address: r.address,
        action: r.action,
        resource: AuditResource {
            kind: r.resource_kind,
            id: r.resource_id,
        },
        project_id: r.project_id,
        owner_id: r.owner_id,
        outcome: r.outcome,
        detail: r.detail,
    }
}

/// The audit trail, newest first: an administrator sees every entry; anyone else the
/// entries they made and those about their own account and projects and the teams they
/// administer (with a team token, of their teams only that one); an attempt of theirs on
/// what they have no relation to shows without its project and owner. A person's login
/// only: a workspace key cannot read it. Entries are never changed or deleted through the
/// API.
#[utoipa::path(get, path = "/audit", tag = "audit",
    params(("projectId" = Option<String>, Query), ("actor" = Option<String>, Query, description = "a user or key id, or system"),
        ("action" = Option<String>, Query), ("since" = Option<i64>, Query, description = "Unix ms, inclusive"),
        ("until" = Option<i64>, Query, description = "Unix ms, exclusive"),
        ("page" = Option<i64>, Query), ("limit" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<AuditEntry>), (status = 400), (status = 401), (status = 403)))]
async fn list(
    State(app): State<App>,
    caller: Caller,
    paging: Paging,
    axum::extract::RawQuery(q): axum::extract::RawQuery,
) -> ApiResult<Json<PageOf<AuditEntry>>> {
    caller.require_person()?;
    let q = query_pairs(q.as_deref());
    let int = |name: &str| -> ApiResult<Option<i64>> {
        q.get(name)
            .map(|v| {
                v.parse().map_err(|_| {
                    super::ApiError::bad(format!("{name}: Unix milliseconds, got {v:?}"))
                })
            })
            .transpose()
    };
    let filter = AuditFilter {
        project_id: q.get("projectId").cloned(),
        actor: q.get("actor").cloned(),
        action: q.get("action").cloned(),
        since: int("since")?,
        until: int("until")?,
    };
    let scope = audit::scope_for(&app.db, caller.principal()).await?;
    let page = app
        .db
        .audit_log()
        .list(&scope, &filter, (paging.limit, paging.offset()))
        .await?;
    // A reader sees their own refused attempt on what they have no relation to without
    // learning whose it is: its project and owner are kept from them.
    let related = match scope {
        botbox_store::AuditScope::All => None,
        botbox_store::AuditScope::Of { .. } => Some(caller.owners(&app).await?),
    };
    let data = page
        .items
        .into_iter()
        .map(|mut r| {
            if let Some(related) = &related
                && r.owner_id.as_ref().is_some_and(|o| !related.contains(o))
            {
                (r.project_id, r.owner_id) = (None, None);
            }
            entry_json(r)
        })
        .collect();
    Ok(Json(page_of(paging, page.total, data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route that is not a read is a change the trail records, or is listed as not
    /// being one: a new route cannot be left out by forgetting it.
    #[test]
    fn every_write_route_is_audited_or_listed_as_no_change() {
        let doc = crate::openapi();
        let mut missing = Vec::new();
        let mut known = Vec::new();
        for (path, item) in &doc.paths.paths {
            let ops = [
                ("POST", item.post.is_some()),
                ("PUT", item.put.is_some()),
                ("PATCH", item.patch.is_some()),
                ("DELETE", item.delete.is_some()),
            ];
            for (m, present) in ops {
                if !present {
                    continue;
                }
                known.push((m, path.as_str()));
                let listed = ACTIONS.iter().any(|(am, ap, ..)| *am == m && ap == path)
                    || NOT_CHANGES.iter().any(|(nm, np)| *nm == m && np == path);
                if !listed {
                    missing.push(format!("{m} {path}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "not in ACTIONS nor NOT_CHANGES: {missing:?}"
        );
        let stale: Vec<_> = ACTIONS
            .iter()
            .map(|(m, p, ..)| (*m, *p))
            .chain(NOT_CHANGES.iter().copied())
            .filter(|k| !known.contains(k))
            .collect();
        assert!(stale.is_empty(), "listed but no such route: {stale:?}");
    }
}
