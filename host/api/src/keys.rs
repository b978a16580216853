//! API keys of the agent API through the project API: agent keys per environment,
//! workspace keys per team (or the caller's own namespace). Created by users with update
//! rights, shown once, listed by hint, revoked with effect on the next request.

use super::{ApiError, ApiResult, App, Caller, parse_json, project_for};
use axum::Json;
use axum::extract::{Path, State};
use botbox_api_types::{ApiKey, NewApiKey};
use botbox_service::agent::keys::{self, KeyKind, NewKey};
use botbox_service::auth::{Action, Resource, Role};
use botbox_store::ApiKeyRow;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_env_key, list_env_keys))
        .routes(routes!(revoke_env_key))
        .routes(routes!(create_team_key, list_team_keys))
        .routes(routes!(revoke_team_key))
}

fn key_json(k: ApiKeyRow, key: Option<String>) -> ApiKey {
    ApiKey {
        id: k.id,
        kind: k.kind,
        scope: k.scope,
        name: k.name,
        hint: k.hint,
        created_at: botbox_service::agent::iso_ms(k.created_at),
        created_by: k.created_by,
        last_used_at: k.last_used_at.map(botbox_service::agent::iso_ms),
        revoked_at: k.revoked_at.map(botbox_service::agent::iso_ms),
        key,
    }
}

fn new_key_body(bytes: &[u8]) -> ApiResult<NewApiKey> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(NewApiKey::default());
    }
    parse_json(bytes)
}

fn key_name(req: &NewApiKey) -> ApiResult<String> {
    let name = req.name.clone().unwrap_or_else(|| "default".into());
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::bad("name: 1 to 100 characters"));
    }
    Ok(name)
}

/// The environment of a project the caller may update (403 / 404 as for the environment).
async fn env_for(
    app: &App,
    caller: &Caller,
    pid: &str,
    eid: &str,
    action: Action,
) -> ApiResult<botbox_store::ProjectRow> {
    let p = project_for(app, caller, pid, action, Resource::Environments).await?;
    app.db
        .environment(pid, eid)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("environment {eid}")))?;
    Ok(p)
}

/// Creates an agent key (`sak_…`) for the environment; the key is shown only here.
#[utoipa::path(post, path = "/projects/{projectId}/environments/{environmentId}/keys", tag = "keys",
    params(("projectId" = String, Path), ("environmentId" = String, Path)), request_body = NewApiKey,
    responses((status = 200, body = ApiKey), (status = 403), (status = 404)))]
async fn create_env_key(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid)): Path<(String, String)>,
    bytes: axum::body::Bytes,
) -> ApiResult<Json<ApiKey>> {
    caller.require_person()?;
    let p = env_for(&app, &caller, &pid, &eid, Action::Update).await?;
    let req = new_key_body(&bytes)?;
    let name = key_name(&req)?;
    let (row, key) = keys::create(
        &app.db,
        NewKey {
            kind: KeyKind::Agent,
            scope: &eid,
            project_id: Some(&pid),
            owner_id: &p.owner_id,
            name: &name,
            created_by: &caller.user_id,
        },
    )
    .await?;
    Ok(Json(key_json(row, Some(key))))
}

/// The environment's agent keys, by hint.
#[utoipa::path(get, path = "/projects/{projectId}/environments/{environmentId}/keys", tag = "keys",
    params(("projectId" = String, Path), ("environmentId" = String, Path)),
    responses((status = 200, body = Vec<ApiKey>), (status = 403), (status = 404)))]
async fn list_env_keys(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid)): Path<(String, String)>,
) -> ApiResult<Json<Vec<ApiKey>>> {
    caller.require_person()?;
    env_for(&app, &caller, &pid, &eid, Action::Read).await?;
    let rows = app.db.list_api_keys(KeyKind::Agent.name(), &eid).await?;
    Ok(Json(rows.into_iter().map(|k| key_json(k, None)).collect()))
}

/// Revokes an agent key: the next request with it fails (401).
#[utoipa::path(delete, path = "/projects/{projectId}/environments/{environmentId}/keys/{keyId}", tag = "keys",
    params(("projectId" = String, Path), ("environmentId" = String, Path), ("keyId" = String, Path)),
    responses((status = 200, body = ApiKey), (status = 403), (status = 404)))]
async fn revoke_env_key(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid, kid)): Path<(String, String, String)>,
) -> ApiResult<Json<ApiKey>> {
    caller.require_person()?;
    env_for(&app, &caller, &pid, &eid, Action::Update).await?;
    revoke(&app, KeyKind::Agent, &eid, &kid).await
}

async fn revoke(app: &App, kind: KeyKind, scope: &str, kid: &str) -> ApiResult<Json<ApiKey>> {
    if !app.db.revoke_api_key(kind.name(), scope, kid).await? {
        return Err(ApiError::not_found(format!("key {kid}")));
    }
    let row = app
        .db
        .api_key(kind.name(), scope, kid)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("key {kid}")))?;
    Ok(Json(key_json(row, None)))
}

/// May the caller manage the keys of workspace `team_id`: their own namespace (their user
/// id) unless a viewer, a team where they are developer or team admin, or any as admin.
/// Strangers learn nothing (404); viewers get 403.
async fn require_workspace(
    app: &App,
    caller: &Caller,
    team_id: &str,
    update: bool,
) -> ApiResult<()> {
    if caller.is_admin() {
        return Ok(());
    }
    let role = if team_id == caller.user_id {
        Some(caller.platform_role)
    } else {
        app.db
            .membership(team_id, &caller.user_id)
            .await?
            .and_then(|r| Role::parse(&r))
    };
    match role {
        None => Err(ApiError::not_found(format!("team {team_id}"))),
        Some(Role::Viewer) if update => Err(ApiError::Forbidden),
        Some(_) => Ok(()),
    }
}

/// Creates a workspace key (`sk-ws-…`) for a team, or for the caller's own namespace (the
/// caller's user id as `teamId`); shown only here.
#[utoipa::path(post, path = "/teams/{teamId}/keys", tag = "keys",
    params(("teamId" = String, Path, description = "a team id, or the caller's user id")), request_body = NewApiKey,
    responses((status = 200, body = ApiKey), (status = 403), (status = 404)))]
async fn create_team_key(
    State(app): State<App>,
    caller: Caller,
    Path(team_id): Path<String>,
    bytes: axum::body::Bytes,
) -> ApiResult<Json<ApiKey>> {
    caller.require_person()?;
    require_workspace(&app, &caller, &team_id, true).await?;
    let req = new_key_body(&bytes)?;
    let name = key_name(&req)?;
    let (row, key) = keys::create(
        &app.db,
        NewKey {
            kind: KeyKind::Workspace,
            scope: &team_id,
            project_id: None,
            owner_id: &team_id,
            name: &name,
            created_by: &caller.user_id,
        },
    )
    .await?;
    Ok(Json(key_json(row, Some(key))))
}

/// The workspace's keys, by hint.
#[utoipa::path(get, path = "/teams/{teamId}/keys", tag = "keys",
    params(("teamId" = String, Path)),
    responses((status = 200, body = Vec<ApiKey>), (status = 404)))]
async fn list_team_keys(
    State(app): State<App>,
    caller: Caller,
    Path(team_id): Path<String>,
) -> ApiResult<Json<Vec<ApiKey>>> {
    caller.require_person()?;
    require_workspace(&app, &caller, &team_id, false).await?;
    let rows = app
        .db
        .list_api_keys(KeyKind::Workspace.name(), &team_id)
        .await?;
    Ok(Json(rows.into_iter().map(|k| key_json(k, None)).collect()))
}

/// Revokes a workspace key.
#[utoipa::path(delete, path = "/teams/{teamId}/keys/{keyId}", tag = "keys",
    params(("teamId" = String, Path), ("keyId" = String, Path)),
    responses((status = 200, body = ApiKey), (status = 403), (status = 404)))]
async fn revoke_team_key(
    State(app): State<App>,
    caller: Caller,
    Path((team_id, kid)): Path<(String, String)>,
) -> ApiResult<Json<ApiKey>> {
    caller.require_person()?;
    require_workspace(&app, &caller, &team_id, true).await?;
    revoke(&app, KeyKind::Workspace, &team_id, &kid).await
}
