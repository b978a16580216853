//! Deployment versions, environments and channels.

use super::{ApiError, ApiResult, App, Body, Caller, PageOf, Paging, project_access, project_for};
use axum::Json;
use axum::extract::{Path, State};
use botbox_api_types::{Channel, Deployment, Environment};
use botbox_service::auth::{Action, Resource, Role};
use botbox_service::revisions::next_patch;
use botbox_store::{ChannelFields, ChannelRow, DbError, DeploymentRow, EnvironmentRow};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json_};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_deployment, list_deployments))
        .routes(routes!(latest_deployment))
        .routes(routes!(get_deployment, put_deployment, delete_deployment))
        .routes(routes!(list_environments, create_environment))
        .routes(routes!(
            get_environment,
            put_environment,
            delete_environment
        ))
        .routes(routes!(list_channels, create_channel))
        .routes(routes!(get_channel, put_channel, delete_channel))
        .routes(routes!(rollback))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackRequest {
    /// Who rolls back and why: logged with the rollback.
    pub author: Option<String>,
    pub changelog: Option<String>,
    /// The deployment's own version, if given, must match it.
    pub version: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    pub id: String,
    pub version: String,
    /// The environments moved back to this version (those that were on a newer one).
    pub environments: Vec<String>,
}

/// Rolls the project back to this deployment version: every environment on a newer version
/// moves to it (at its next message). Environments on this or an older version stay.
#[utoipa::path(post, path = "/deployments/{deploymentId}/rollback", tag = "deployments",
    params(("deploymentId" = String, Path)), request_body = RollbackRequest,
    responses((status = 200, body = RolledBack), (status = 400), (status = 404)))]
async fn rollback(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Body(req): Body<RollbackRequest>,
) -> ApiResult<Json<RolledBack>> {
    let d = app
        .db
        .deployment_by_id(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("deployment {id}")))?;
    // 404 for another owner's deployment, as for its project.
    project_for(
        &app,
        &caller,
        &d.project_id,
        Action::Update,
        Resource::Deployments,
    )
    .await
    .map_err(|e| match e {
        ApiError::NotFound(_) => ApiError::not_found(format!("deployment {id}")),
        e => e,
    })?;
    if let Some(v) = req.version.as_deref().filter(|v| *v != d.version) {
        return Err(ApiError::bad(format!(
            "version: deployment {id} is version {}, not {v}",
            d.version
        )));
    }
    let environments = app.live.rollback_to(&d, &caller.actor().label()).await?;
    tracing::info!(project = %d.project_id, version = %d.version, author = ?req.author,
        changelog = ?req.changelog, moved = ?environments, "rolled back");
    Ok(Json(RolledBack {
        id: d.id,
        version: d.version,
        environments,
    }))
}

fn conflict(what: String) -> impl FnOnce(DbError) -> ApiError {
    move |e| match e {
        DbError::Conflict => ApiError::Conflict(what),
        e => e.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Deployments

pub(crate) fn deployment_json(d: DeploymentRow) -> Deployment {
    Deployment {
        name: format!("{}~{}", d.project_id, d.version),
        id: d.id,
        version: d.version,
        bot_revision: d.bot_revision,
        nlu_revision: d.nlu_revision,
        cms_revision: d.cms_revision,
        modules: None,
        bot_id: d.project_id,
        deployed_by: d.deployed_by,
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentRequest {
    /// Optional on create: the next patch version after the latest.
    pub version: Option<String>,
    pub bot_revision: Option<String>,
    pub nlu_revision: Option<String>,
    pub cms_revision: Option<String>,
    /// Accepted and ignored (always null).
    #[schema(value_type = Option<Object>)]
    #[serde(default)]
    #[allow(dead_code)]
    pub modules: Option<Json_>,
    #[serde(default, flatten)]
    #[schema(ignore)]
    pub _rest: Map<String, Json_>,
}

async fn check_revision(app: &App, project_id: &str, rev: &str) -> ApiResult<()> {
    match app.db.revision(project_id, rev).await? {
        None => Err(ApiError::bad(format!(
            "botRevision: project {project_id} has no bot revision {rev}"
        ))),
        Some(r) if r.compiled.is_empty() => Err(ApiError::bad(format!(
            "botRevision: {rev} is the project's initial empty revision; push a bot first"
        ))),
        Some(_) => Ok(()),
    }
}

fn check_version(v: &str) -> ApiResult<()> {
    if v.is_empty()
        || v.len() > 64
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c))
    {
        return Err(ApiError::bad(format!(
            "version: 1 to 64 letters, digits, '.', '_', '-' or '+' (got {v:?})"
        )));
    }
    Ok(())
}

/// An `nluRevision` must be one of the project's NLU revisions (`""` or none: unpinned).
/// A named CMS revision must be one of the project's (400 naming it).
async fn check_cms_revision(app: &App, pid: &str, rev: Option<&str>) -> ApiResult<()> {
    match rev {
        Some(r) if app.db.cms_revision(pid, r).await?.is_none() => Err(ApiError::bad(format!(
            "cmsRevision: {r} is not a CMS revision of this project (GET /projects/{pid}/cms/revisions lists them)"
        ))),
        _ => Ok(()),
    }
}

async fn check_nlu_revision(app: &App, pid: &str, rev: Option<&str>) -> ApiResult<()> {
    match rev {
        Some(r) if !r.is_empty() && !app.db.is_nlu_revision(pid, r).await? => Err(ApiError::bad(
            format!("nluRevision: {r} is not an NLU revision of project {pid}"),
        )),
        _ => Ok(()),
    }
}

/// Creates a deployment version bound to one of the project's bot revisions.
#[utoipa::path(post, path = "/projects/{projectId}/deployment/versions", tag = "deployments",
    params(("projectId" = String, Path)), request_body = DeploymentRequest,
    responses((status = 200, body = Deployment), (status = 400), (status = 409, description = "version exists")))]
async fn create_deployment(
    State(app): State<App>,
    caller: Caller,
    slot: Option<axum::Extension<super::audit::AuditSlot>>,
    Path(pid): Path<String>,
    Body(req): Body<DeploymentRequest>,
) -> ApiResult<Json<Deployment>> {
    let project = project_for(&app, &caller, &pid, Action::Create, Resource::Deployments).await?;
    // Without an nluRevision the deployment pins the project's latest NLU model, so a bot
    // keeps the model it was deployed with when the NLU is trained again.
    let nlu_revision = req.nlu_revision.clone().or(project.nlu_latest_revision);
    check_nlu_revision(&app, &pid, nlu_revision.as_deref()).await?;
    // Likewise the CMS: the latest revision unless one is named.
    let cms_revision = req
        .cms_revision
        .clone()
        .filter(|r| !r.is_empty())
        .or(project.cms_latest_revision);
    check_cms_revision(&app, &pid, cms_revision.as_deref()).await?;
    let rev = req
        .bot_revision
        .ok_or_else(|| ApiError::bad("botRevision is required"))?;
    check_revision(&app, &pid, &rev).await?;
    let version = match req.version {
        Some(v) => v,
        None => {
            let all = app.db.list_deployments(&pid, i64::MAX, 0).await?.items;
            next_patch(all.iter().map(|d| d.version.as_str()))
        }
    };
    check_version(&version)?;
    if let Some(axum::Extension(slot)) = slot {
        slot.detail(format!("{version}: bot revision {rev}"));
    }
    let d = app
        .db
        .insert_deployment(
            &pid,
            &version,
            &rev,
            nlu_revision.as_deref(),
            cms_revision.as_deref(),
            &caller.actor().label(),
        )
        .await
        .map_err(conflict(format!(
            "deployment version {version} already exists"
        )))?;
    Ok(Json(deployment_json(d)))
}

/// Every deployment version of the project, newest first.
#[utoipa::path(get, path = "/projects/{projectId}/deployment/versions", tag = "deployments",
    params(("projectId" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<Deployment>)))]
async fn list_deployments(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    paging: Paging,
) -> ApiResult<Json<PageOf<Deployment>>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Deployments).await?;
    let page = app
        .db
        .list_deployments(&pid, paging.limit, paging.offset())
        .await?;
    let data = page.items.into_iter().map(deployment_json).collect();
    Ok(Json(super::page_of(paging, page.total, data)))
}

/// The latest deployment version.
#[utoipa::path(get, path = "/projects/{projectId}/deployment", tag = "deployments",
    params(("projectId" = String, Path)), responses((status = 200, body = Deployment), (status = 404)))]
async fn latest_deployment(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
) -> ApiResult<Json<Deployment>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Deployments).await?;
    let d = app
        .db
        .latest_deployment(&pid)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {pid} has no deployment yet")))?;
    Ok(Json(deployment_json(d)))
}

async fn deployment_or_404(app: &App, pid: &str, version: &str) -> ApiResult<DeploymentRow> {
    app.db
        .deployment(pid, version)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("deployment version {version}")))
}

#[utoipa::path(get, path = "/projects/{projectId}/deployment/versions/{version}", tag = "deployments",
    params(("projectId" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = Deployment), (status = 404)))]
async fn get_deployment(
    State(app): State<App>,
    caller: Caller,
    Path((pid, version)): Path<(String, String)>,
) -> ApiResult<Json<Deployment>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Deployments).await?;
    Ok(Json(deployment_json(
        deployment_or_404(&app, &pid, &version).await?,
    )))
}

/// Rebinds a deployment version to other revisions. Environments on it follow at once.
#[utoipa::path(put, path = "/projects/{projectId}/deployment/versions/{version}", tag = "deployments",
    params(("projectId" = String, Path), ("version" = String, Path)), request_body = DeploymentRequest,
    responses((status = 200, body = Deployment), (status = 400), (status = 404)))]
async fn put_deployment(
    State(app): State<App>,
    caller: Caller,
    Path((pid, version)): Path<(String, String)>,
    Body(req): Body<DeploymentRequest>,
) -> ApiResult<Json<Deployment>> {
    project_for(&app, &caller, &pid, Action::Update, Resource::Deployments).await?;
    let d = deployment_or_404(&app, &pid, &version).await?;
    if let Some(v) = &req.version
        && v != &version
    {
        return Err(ApiError::bad(format!(
            "version: a deployment version cannot be renamed ({v} in the body, {version} in the path)"
        )));
    }
    let rev = req.bot_revision.unwrap_or(d.bot_revision);
    check_revision(&app, &pid, &rev).await?;
    let nlu = req.nlu_revision.or(d.nlu_revision);
    check_nlu_revision(&app, &pid, nlu.as_deref()).await?;
    let cms = req
        .cms_revision
        .filter(|r| !r.is_empty())
        .or(d.cms_revision);
    check_cms_revision(&app, &pid, cms.as_deref()).await?;
    app.live
        .update_deployment(&pid, &version, &rev, nlu.as_deref(), cms.as_deref())
        .await?;
    Ok(Json(deployment_json(
        deployment_or_404(&app, &pid, &version).await?,
    )))
}

/// Deletes a deployment version that no environment uses.
#[utoipa::path(delete, path = "/projects/{projectId}/deployment/versions/{version}", tag = "deployments",
    params(("projectId" = String, Path), ("version" = String, Path)),
    responses((status = 200, body = Deployment), (status = 404), (status = 409, description = "an environment uses it")))]
async fn delete_deployment(
    State(app): State<App>,
    caller: Caller,
    Path((pid, version)): Path<(String, String)>,
) -> ApiResult<Json<Deployment>> {
    project_for(&app, &caller, &pid, Action::Delete, Resource::Deployments).await?;
    let d = deployment_or_404(&app, &pid, &version).await?;
    let mut users = app.db.environments_using(&pid, &version).await?;
    for env in app.db.canaries().using(&pid, &version).await? {
        users.push(format!("{env} (its canary)"));
    }
    if !users.is_empty() {
        return Err(ApiError::Conflict(format!(
            "deployment version {version} is used by environment(s) {}",
            users.join(", ")
        )));
    }
    app.live.delete_deployment(&pid, &version).await?;
    Ok(Json(deployment_json(d)))
}

// ---------------------------------------------------------------------------------------------
// Environments

pub(crate) fn environment_json(e: EnvironmentRow) -> Environment {
    Environment {
        id: e.id,
        name: e.name,
        slug: e.slug,
        dep_id: e.project_id.clone(),
        dep_version: e.deployment_version.clone(),
        deployment_id: e.project_id,
        deployment_version: e.deployment_version,
        channels: None,
        canary: None,
        last_canary: None,
    }
}

/// The create response: `depId`/`depVersion` and the (empty) channels.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedEnvironment {
    pub id: String,
    pub name: String,
    pub slug: String,
    pub dep_id: String,
    pub dep_version: String,
    pub channels: Vec<Channel>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewEnvironment {
    /// The project id.
    pub dep_id: String,
    pub dep_version: String,
    pub name: String,
    /// Defaults to the name, lower-cased, with runs of other characters as `-`.
    pub slug: Option<String>,
}

fn slugify(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

#[utoipa::path(get, path = "/projects/{projectId}/environments", tag = "environments",
    params(("projectId" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<Environment>)))]
async fn list_environments(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    paging: Paging,
) -> ApiResult<Json<PageOf<Environment>>> {
    project_for(&app, &caller, &pid, Action::List, Resource::Environments).await?;
    let page = app
        .db
        .list_environments(&pid, paging.limit, paging.offset())
        .await?;
    let data = page.items.into_iter().map(environment_json).collect();
    Ok(Json(super::page_of(paging, page.total, data)))
}

/// Creates an environment on one of the project's deployment versions.
#[utoipa::path(post, path = "/projects/{projectId}/environments", tag = "environments",
    params(("projectId" = String, Path)), request_body = NewEnvironment,
    responses((status = 200, body = CreatedEnvironment), (status = 400), (status = 409)))]
async fn create_environment(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    Body(req): Body<NewEnvironment>,
) -> ApiResult<Json<CreatedEnvironment>> {
    project_for(&app, &caller, &pid, Action::Create, Resource::Environments).await?;
    if req.dep_id != pid {
        return Err(ApiError::bad(format!(
            "depId: must be this project's id {pid} (got {:?})",
            req.dep_id
        )));
    }
    let name = req.name.trim();
    if name.is_empty() || name.len() > 64 {
        return Err(ApiError::bad("name: 1 to 64 characters"));
    }
    let slug = slugify(req.slug.as_deref().unwrap_or(name));
    if slug.is_empty() {
        return Err(ApiError::bad("slug: needs at least one letter or digit"));
    }
    if app.db.deployment(&pid, &req.dep_version).await?.is_none() {
        return Err(ApiError::bad(format!(
            "depVersion: project {pid} has no deployment version {}",
            req.dep_version
        )));
    }
    let e = app
        .db
        .insert_environment(&pid, name, &slug, &req.dep_version)
        .await
        .map_err(conflict(format!(
            "an environment named {name} or with slug {slug} already exists"
        )))?;
    Ok(Json(CreatedEnvironment {
        id: e.id,
        name: e.name,
        slug: e.slug,
        dep_id: e.project_id,
        dep_version: e.deployment_version,
        channels: vec![],
    }))
}

pub(crate) async fn environment_or_404(
    app: &App,
    pid: &str,
    eid: &str,
) -> ApiResult<EnvironmentRow> {
    app.db
        .environment(pid, eid)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("environment {eid}")))
}

#[utoipa::path(get, path = "/projects/{projectId}/environments/{environmentId}", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path)),
    responses((status = 200, body = Environment), (status = 404)))]
async fn get_environment(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid)): Path<(String, String)>,
) -> ApiResult<Json<Environment>> {
    // This route needs the list_*_environments permission.
    let (_, role) =
        project_access(&app, &caller, &pid, Action::List, Resource::Environments).await?;
    let env = environment_or_404(&app, &pid, &eid).await?;
    let mut env = super::canary::environment_view(&app, env).await?;
    let channels = app
        .db
        .list_channels(&pid, Some(&eid), i64::MAX, 0)
        .await?
        .items
        .into_iter()
        .map(|c| channel_json(&app, c, reveals_secrets(role)))
        .collect::<ApiResult<_>>()?;
    env.channels = Some(channels);
    Ok(Json(env))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentUpdate {
    pub dep_version: String,
}

/// Moves the environment to another deployment version; the next message uses it.
#[utoipa::path(put, path = "/projects/{projectId}/environments/{environmentId}", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path)), request_body = EnvironmentUpdate,
    responses((status = 200, body = Environment), (status = 400), (status = 404)))]
async fn put_environment(
    State(app): State<App>,
    caller: Caller,
    slot: Option<axum::Extension<super::audit::AuditSlot>>,
    Path((pid, eid)): Path<(String, String)>,
    Body(req): Body<EnvironmentUpdate>,
) -> ApiResult<Json<Environment>> {
    project_for(&app, &caller, &pid, Action::Update, Resource::Environments).await?;
    let before = environment_or_404(&app, &pid, &eid).await?;
    if let Some(axum::Extension(slot)) = slot {
        slot.detail(format!(
            "{} → {}",
            before.deployment_version, req.dep_version
        ));
    }
    if app.db.deployment(&pid, &req.dep_version).await?.is_none() {
        return Err(ApiError::bad(format!(
            "depVersion: project {pid} has no deployment version {}",
            req.dep_version
        )));
    }
    if !app
        .live
        .set_environment_version(&pid, &eid, &req.dep_version)
        .await?
    {
        return Err(ApiError::Conflict(format!(
            "environment {} runs {} as a canary: promote it (POST …/canary/promote) to run it for everyone",
            before.name, req.dep_version
        )));
    }
    let env = environment_or_404(&app, &pid, &eid).await?;
    Ok(Json(super::canary::environment_view(&app, env).await?))
}

/// Deletes an environment, its channels and their sessions (for the CLI's `env delete`).
/// Transcripts are kept.
#[utoipa::path(delete, path = "/projects/{projectId}/environments/{environmentId}", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path)),
    responses((status = 200, body = Environment), (status = 404)))]
async fn delete_environment(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid)): Path<(String, String)>,
) -> ApiResult<Json<Environment>> {
    project_for(&app, &caller, &pid, Action::Delete, Resource::Environments).await?;
    let e = environment_or_404(&app, &pid, &eid).await?;
    app.live.delete_environment(&pid, &eid).await?;
    Ok(Json(environment_json(e)))
}

// ---------------------------------------------------------------------------------------------
// Channels

/// Shown instead of a secret to callers who may not change the channel.
pub const MASKED: &str = "********";

/// Option names that hold credentials (matched case-insensitively as parts of the name:
/// `secret`, `channelSecret`, `token`, `accessToken`, `verifyToken`, `password`, `apiKey`,
/// `authorization`, ...).
fn is_secret_option(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["secret", "token", "password", "key", "auth", "credential"]
        .iter()
        .any(|w| n.contains(w))
}

/// A channel's options as a caller may see them: in full for callers who may update the
/// channel (they set them), with every credential masked for the others (viewers).
fn visible_options(options: &str, reveal: bool) -> ApiResult<Map<String, Json_>> {
    let mut o: Map<String, Json_> =
        serde_json::from_str(options).map_err(|e| ApiError::Internal(e.into()))?;
    if !reveal {
        for (k, v) in o.iter_mut() {
            if is_secret_option(k) && !v.is_null() {
                *v = Json_::String(MASKED.into());
            }
        }
    }
    Ok(o)
}

/// Whether the caller sees channel secrets: only with update rights on the project's
/// channels (its role over the project's owner).
pub(crate) fn reveals_secrets(role: Role) -> bool {
    botbox_service::auth::allows(role, Action::Update, Resource::Channels)
}

/// Largest channel options object, in bytes of JSON: provider credentials and settings are
/// small, and the options are kept in the route cache of every process.
const CHANNEL_OPTIONS_MAX: usize = 16 << 10;

pub(crate) fn channel_json(app: &App, c: ChannelRow, reveal: bool) -> ApiResult<Channel> {
    Ok(Channel {
        webhook: app.webhook_url(&c.id),
        options: visible_options(&c.options, reveal)?,
        id: c.id,
        name: c.name,
        kind: c.kind,
        url: c.url,
        rpm_limit: c.rpm_limit,
        agent_id: c.agent_id,
        environment_id: c.environment_id,
    })
}

/// A channel in a create or update request. On update, absent fields keep their values.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelRequest {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub url: Option<String>,
    pub rpm_limit: Option<i64>,
    pub agent_id: Option<String>,
    /// An object, or a JSON-encoded string of one.
    #[schema(value_type = Object)]
    pub options: Option<Json_>,
    #[serde(default, flatten)]
    #[schema(ignore)]
    pub _rest: Map<String, Json_>,
}

/// Builds a channel's stored fields from a request over the current ones (`None` on create).
fn channel_fields(req: ChannelRequest, current: Option<&ChannelRow>) -> ApiResult<ChannelFields> {
    let name = match (req.name, current) {
        (Some(n), _) => n.trim().to_owned(),
        (None, Some(c)) => c.name.clone(),
        (None, None) => return Err(ApiError::bad("name is required")),
    };
    if name.is_empty() || name.len() > 64 {
        return Err(ApiError::bad("name: 1 to 64 characters"));
    }
    let kind = match (req.kind, current) {
        (Some(k), _) => k,
        (None, Some(c)) => c.kind.clone(),
        (None, None) => return Err(ApiError::bad("type is required")),
    };
    let Some(canonical) = botbox_channels::kind(&kind) else {
        let names: Vec<&str> = botbox_channels::KINDS.iter().map(|k| k.name).collect();
        return Err(ApiError::bad(format!(
            "type: one of {} (got {kind:?})",
            names.join(", ")
        )));
    };
    let url = match (req.url, current) {
        (Some(u), _) => u,
        (None, Some(c)) => c.url.clone(),
        (None, None) => match canonical.default_url {
            Some(u) => u.to_owned(),
            None => {
                return Err(ApiError::bad(format!(
                    "url is required for {kind} channels"
                )));
            }
        },
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ApiError::bad(format!(
            "url: an http:// or https:// URL (got {url:?})"
        )));
    }
    let rpm_limit = req.rpm_limit.or(current.and_then(|c| c.rpm_limit));
    if let Some(n) = rpm_limit
        && n < 0
    {
        return Err(ApiError::bad(format!("rpmLimit: 0 or more (got {n})")));
    }
    let options = match req.options {
        None => match current {
            Some(c) => c.options.clone(),
            None => "{}".into(),
        },
        Some(Json_::Object(o)) => serde_json::to_string(&o).expect("json serialises"),
        Some(Json_::String(s)) => match serde_json::from_str::<Json_>(&s) {
            Ok(Json_::Object(o)) => serde_json::to_string(&o).expect("json serialises"),
            _ => {
                return Err(ApiError::bad(
                    "options: a JSON object, or a string holding a JSON-encoded object",
                ));
            }
        },
        Some(Json_::Null) => "{}".into(),
        Some(_) => {
            return Err(ApiError::bad(
                "options: a JSON object, or a string holding a JSON-encoded object",
            ));
        }
    };
    if options.len() > CHANNEL_OPTIONS_MAX {
        return Err(ApiError::bad(format!(
            "options: {} bytes of JSON; at most {CHANNEL_OPTIONS_MAX}",
            options.len()
        )));
    }
    Ok(ChannelFields {
        name,
        kind,
        url,
        rpm_limit,
        agent_id: req.agent_id.or(current.and_then(|c| c.agent_id.clone())),
        options,
    })
}

#[utoipa::path(get, path = "/projects/{projectId}/environments/{environmentId}/channels", tag = "channels",
    params(("projectId" = String, Path), ("environmentId" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<Channel>)))]
async fn list_channels(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid)): Path<(String, String)>,
    paging: Paging,
) -> ApiResult<Json<PageOf<Channel>>> {
    let (_, role) = project_access(&app, &caller, &pid, Action::List, Resource::Channels).await?;
    environment_or_404(&app, &pid, &eid).await?;
    let page = app
        .db
        .list_channels(&pid, Some(&eid), paging.limit, paging.offset())
        .await?;
    let data = page
        .items
        .into_iter()
        .map(|c| channel_json(&app, c, reveals_secrets(role)))
        .collect::<ApiResult<_>>()?;
    Ok(Json(super::page_of(paging, page.total, data)))
}

/// Attaches a channel to an environment; the response carries its `webhook` URL.
#[utoipa::path(post, path = "/projects/{projectId}/environments/{environmentId}/channels", tag = "channels",
    params(("projectId" = String, Path), ("environmentId" = String, Path)), request_body = ChannelRequest,
    responses((status = 200, body = Channel), (status = 400), (status = 409)))]
async fn create_channel(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid)): Path<(String, String)>,
    Body(req): Body<ChannelRequest>,
) -> ApiResult<Json<Channel>> {
    project_for(&app, &caller, &pid, Action::Create, Resource::Channels).await?;
    environment_or_404(&app, &pid, &eid).await?;
    let f = channel_fields(req, None)?;
    let c = app
        .db
        .insert_channel(&pid, &eid, &f)
        .await
        .map_err(conflict(format!(
            "a channel named {} already exists",
            f.name
        )))?;
    Ok(Json(channel_json(&app, c, true)?))
}

async fn channel_or_404(app: &App, pid: &str, eid: &str, cid: &str) -> ApiResult<ChannelRow> {
    app.db
        .channel(pid, eid, cid)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("channel {cid}")))
}

#[utoipa::path(get, path = "/projects/{projectId}/environments/{environmentId}/channels/{channelId}", tag = "channels",
    params(("projectId" = String, Path), ("environmentId" = String, Path), ("channelId" = String, Path)),
    responses((status = 200, body = Channel), (status = 404)))]
async fn get_channel(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid, cid)): Path<(String, String, String)>,
) -> ApiResult<Json<Channel>> {
    let (_, role) = project_access(&app, &caller, &pid, Action::Read, Resource::Channels).await?;
    channel_json(
        &app,
        channel_or_404(&app, &pid, &eid, &cid).await?,
        reveals_secrets(role),
    )
    .map(Json)
}

#[utoipa::path(put, path = "/projects/{projectId}/environments/{environmentId}/channels/{channelId}", tag = "channels",
    params(("projectId" = String, Path), ("environmentId" = String, Path), ("channelId" = String, Path)),
    request_body = ChannelRequest, responses((status = 200, body = Channel), (status = 400), (status = 404)))]
async fn put_channel(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid, cid)): Path<(String, String, String)>,
    Body(req): Body<ChannelRequest>,
) -> ApiResult<Json<Channel>> {
    project_for(&app, &caller, &pid, Action::Update, Resource::Channels).await?;
    let current = channel_or_404(&app, &pid, &eid, &cid).await?;
    let f = channel_fields(req, Some(&current))?;
    app.live
        .update_channel(&pid, &cid, &f)
        .await
        .map_err(conflict(format!(
            "a channel named {} already exists",
            f.name
        )))?;
    channel_json(&app, channel_or_404(&app, &pid, &eid, &cid).await?, true).map(Json)
}

#[utoipa::path(delete, path = "/projects/{projectId}/environments/{environmentId}/channels/{channelId}", tag = "channels",
    params(("projectId" = String, Path), ("environmentId" = String, Path), ("channelId" = String, Path)),
    responses((status = 200, body = Channel), (status = 404)))]
async fn delete_channel(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid, cid)): Path<(String, String, String)>,
) -> ApiResult<Json<Channel>> {
    project_for(&app, &caller, &pid, Action::Delete, Resource::Channels).await?;
    let c = channel_or_404(&app, &pid, &eid, &cid).await?;
    app.live.delete_channel(&pid, &cid).await?;
    channel_json(&app, c, true).map(Json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: serde_json::Value) -> ChannelRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn channel_options_may_be_a_json_string() {
        let f = channel_fields(
            req(serde_json::json!({"name": "web", "type": "generic", "url": "http://x", "options": "{\"secret\":\"s\"}"})),
            None,
        )
        .unwrap();
        assert_eq!(f.options, r#"{"secret":"s"}"#);
        let e = channel_fields(
            req(
                serde_json::json!({"name": "web", "type": "generic", "url": "http://x", "options": "[1]"}),
            ),
            None,
        );
        assert!(matches!(e, Err(ApiError::BadRequest(d)) if d.starts_with("options:")));
    }

    #[test]
    fn channel_type_and_url_are_checked() {
        let e = channel_fields(req(serde_json::json!({"name": "a", "type": "icq"})), None);
        assert!(matches!(e, Err(ApiError::BadRequest(d)) if d.contains("type: one of generic")));
        let e = channel_fields(
            req(serde_json::json!({"name": "a", "type": "generic"})),
            None,
        );
        assert!(matches!(e, Err(ApiError::BadRequest(d)) if d.contains("url is required")));
        let f = channel_fields(
            req(serde_json::json!({"name": "a", "type": "telegram"})),
            None,
        )
        .unwrap();
        assert_eq!(f.url, "https://api.telegram.org");
        let f = channel_fields(
            req(serde_json::json!({"name": "a", "type": "the service"})),
            None,
        )
        .unwrap();
        assert_eq!(
            (f.kind.as_str(), f.url.as_str()),
            ("the service", "https://api.line.me")
        );
    }

    #[test]
    fn slugs() {
        assert_eq!(slugify("Production 1!"), "production-1");
    }
}
