//! Projects, bot revisions and drafts.

use super::{ApiError, ApiResult, App, Body, Caller, PageOf, Paging, check_name, project_for};
use axum::Json;
use axum::extract::{Path, State};
use botbox_api_types::{Owner, Project, ProjectOptions, RevisionSummary};
use botbox_service::auth::{Action, Resource};
use botbox_service::revisions::{self, PublishOptions};
use botbox_store::{DbError, ProjectRow};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json_, json};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_project, list_projects))
        .routes(routes!(get_project, put_project, delete_project))
        .routes(routes!(get_retention, put_retention))
        .routes(routes!(project_by_name))
        .routes(routes!(get_bot))
        .routes(routes!(create_revision, list_revisions))
        .routes(routes!(get_revision, push_revision))
        .routes(routes!(nlu_revisions))
        .routes(routes!(get_draft, put_draft, delete_draft))
}

/// Checks what the types cannot: the visibility's values and the timezone's range.
/// A stored project's options.
pub(crate) fn options_of(p: &ProjectRow) -> ApiResult<ProjectOptions> {
    serde_json::from_str(&p.options).map_err(|e| ApiError::Internal(e.into()))
}

fn check_options(o: &ProjectOptions) -> ApiResult<()> {
    if !matches!(o.nlu_visibility.as_str(), "private" | "public") {
        return Err(ApiError::bad(format!(
            "options.nluVisibility: private or public (got {:?})",
            o.nlu_visibility
        )));
    }
    if !(-12.0..=14.0).contains(&o.timezone) {
        return Err(ApiError::bad(format!(
            "options.timezone: hours from UTC, -12 to 14 (got {})",
            o.timezone
        )));
    }
    Ok(())
}

/// Who owns `id`, as answers show it: a user or a team with its name.
pub(crate) async fn owner_of(app: &App, id: &str) -> ApiResult<Owner> {
    let (name, team) = app.db.owner_name(id).await?.unwrap_or_default();
    Ok(Owner {
        id: id.to_owned(),
        kind: if team { "team" } else { "user" }.into(),
        name,
    })
}

pub(crate) async fn project_json(app: &App, p: ProjectRow) -> ApiResult<Project> {
    let owner = owner_of(app, &p.owner_id).await?;
    project_with_owner(p, owner)
}

fn project_with_owner(p: ProjectRow, owner: Owner) -> ApiResult<Project> {
    let options = options_of(&p)?;
    Ok(Project {
        owner,
        id: p.id,
        name: p.name,
        label: p.label,
        description: p.description,
        bot_latest_revision: p.bot_latest_revision,
        nlu_latest_revision: p.nlu_latest_revision,
        cms_latest_revision: p.cms_latest_revision,
        options,
        created_at: p.created_at,
        updated_at: p.updated_at,
    })
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NewProjectRequest {
    pub name: String,
    pub label: Option<String>,
    pub description: Option<String>,
    #[serde(default)]
    pub options: ProjectOptions,
    /// Create it for this team (the caller must be a developer or teamAdmin of it). By
    /// default a project belongs to the caller's own namespace (a login token), the team
    /// of a team token, or the workspace of a workspace key.
    pub team_id: Option<String>,
}

fn taken(what: String) -> impl FnOnce(DbError) -> ApiError {
    move |e| match e {
        DbError::Conflict => ApiError::Conflict(what),
        e => e.into(),
    }
}

/// The owner a new project gets: `teamId` when given (404 for a team the caller is not
/// in), else the caller's default owner; 403 for a role that cannot create there. This is
/// the one check of `POST /projects`'s rights.
async fn new_project_owner(app: &App, caller: &Caller, team_id: Option<&str>) -> ApiResult<Owner> {
    let id = team_id.unwrap_or(caller.owner());
    let role = caller
        .role_on(app, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("team {id}")))?;
    if !botbox_service::auth::allows(role, Action::Create, Resource::Projects) {
        return Err(ApiError::Forbidden);
    }
    let owner = owner_of(app, id).await?;
    if team_id.is_some() && owner.kind != "team" {
        return Err(ApiError::not_found(format!("team {id}")));
    }
    Ok(owner)
}

/// Creates a project owned by the caller's owner (the user, the team of a team token, the
/// workspace of a key) or by the team `teamId` names.
#[utoipa::path(post, path = "/projects", tag = "projects", request_body = NewProjectRequest,
    responses((status = 200, body = Project), (status = 400), (status = 403), (status = 404, description = "teamId names a team the caller is not in"), (status = 409)))]
async fn create_project(
    State(app): State<App>,
    caller: Caller,
    Body(req): Body<NewProjectRequest>,
) -> ApiResult<Json<Project>> {
    let owner = new_project_owner(&app, &caller, req.team_id.as_deref()).await?;
    check_name("name", &req.name)?;
    check_options(&req.options)?;
    let mut options = req.options;
    if options.nlu && options.nlu_id.is_none() {
        options.nlu_id = Some(format!("{}:{}", owner.name, req.name));
    }
    let shown = owner.to_string();
    let spec = botbox_service::projects::NewProjectSpec {
        owner_id: &owner.id,
        owner_shown: &shown,
        name: &req.name,
        label: req.label,
        description: req.description,
        options: serde_json::to_string(&options).expect("options serialise"),
        bot: options.bot,
        cms: options.cms,
        nlu: options
            .nlu
            .then_some((options.nlu_lang.as_str(), options.nlu_visibility.as_str())),
        who: &caller.username,
    };
    let row = botbox_service::projects::create(&app.live, spec).await?;
    Ok(Json(project_with_owner(row, owner)?))
}

/// The caller's projects, newest first: with a login token the user's own and their
/// teams'; with a team token or a workspace key that owner's. `owner` narrows the list to
/// one owner the caller reaches (a user or team id); `owner=all` is every tenant's
/// projects, for administrators only.
#[utoipa::path(get, path = "/projects", tag = "projects",
    params(("limit" = Option<i64>, Query, description = "1 to 100, default 20"), ("page" = Option<i64>, Query, description = "from 1"),
        ("owner" = Option<String>, Query, description = "a user or team id, or `all` (administrators: every tenant)")),
    responses((status = 200, body = PageOf<Project>), (status = 403), (status = 404)))]
async fn list_projects(
    State(app): State<App>,
    caller: Caller,
    paging: Paging,
    uri: axum::http::Uri,
) -> ApiResult<Json<PageOf<Project>>> {
    let owners: Option<Vec<String>> = match super::query_pairs(uri.query()).remove("owner") {
        Some(o) if o == "all" => {
            if !caller.is_admin() {
                return Err(ApiError::ForbiddenBecause(
                    "owner=all lists every tenant's projects: administrators only".into(),
                ));
            }
            None
        }
        Some(o) => {
            let role = caller.role_on(&app, &o).await?;
            if role.is_none() {
                return Err(ApiError::not_found(format!("owner {o}")));
            }
            Some(vec![o])
        }
        None => Some(caller.owners(&app).await?),
    };
    let owner_refs: Option<Vec<&str>> = owners
        .as_ref()
        .map(|o| o.iter().map(String::as_str).collect());
    let page = app
        .db
        .list_projects(owner_refs.as_deref(), paging.limit, paging.offset())
        .await?;
    let mut seen: std::collections::HashMap<String, Owner> = Default::default();
    let mut data = Vec::with_capacity(page.items.len());
    for p in page.items {
        let owner = match seen.get(&p.owner_id) {
            Some(o) => o.clone(),
            None => {
                let o = owner_of(&app, &p.owner_id).await?;
                seen.insert(p.owner_id.clone(), o.clone());
                o
            }
        };
        data.push(project_with_owner(p, owner)?);
    }
    Ok(Json(super::page_of(paging, page.total, data)))
}

#[utoipa::path(get, path = "/projects/{projectId}", tag = "projects",
    params(("projectId" = String, Path)), responses((status = 200, body = Project), (status = 404)))]
async fn get_project(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Project>> {
    let p = project_for(&app, &caller, &id, Action::Read, Resource::Projects).await?;
    Ok(Json(project_json(&app, p).await?))
}

/// How long a project's transcript lines are kept.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionView {
    /// Days this project's transcript lines are kept; `null`: for ever.
    pub transcript_days: Option<f64>,
    /// Whether an administrator set this project's own window (else it is the server's
    /// `--transcript-retention`).
    pub overridden: bool,
    /// The server's window in days (`null`: for ever).
    pub server_transcript_days: Option<f64>,
}

/// A project's own transcript window, set by an administrator.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetentionUpdate {
    /// Days (1 to 36500), 0 for ever, or `null` to follow the server's window again.
    pub transcript_days: Option<i64>,
}

async fn retention_view(app: &App, project: &str) -> ApiResult<RetentionView> {
    let days = |d: std::time::Duration| d.as_secs_f64() / 86_400.0;
    let server = app.live.cfg.retention.transcripts.map(days);
    let own = app.db.transcript_retention_days(project).await?;
    Ok(RetentionView {
        transcript_days: match own {
            None => server,
            Some(0) => None,
            Some(d) => Some(d as f64),
        },
        overridden: own.is_some(),
        server_transcript_days: server,
    })
}

/// How long the project's transcript lines are kept (readable by whoever reads the project).
#[utoipa::path(get, path = "/projects/{projectId}/retention", tag = "projects",
    params(("projectId" = String, Path)), responses((status = 200, body = RetentionView), (status = 404)))]
async fn get_retention(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<RetentionView>> {
    project_for(&app, &caller, &id, Action::Read, Resource::Projects).await?;
    Ok(Json(retention_view(&app, &id).await?))
}

/// Sets the project's own transcript window: administrators only, since a longer window
/// spends the server's disk (a tenant's storage counts toward its quota either way).
#[utoipa::path(put, path = "/projects/{projectId}/retention", tag = "projects",
    params(("projectId" = String, Path)), request_body = RetentionUpdate,
    responses((status = 200, body = RetentionView), (status = 403), (status = 404)))]
async fn put_retention(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Body(req): Body<RetentionUpdate>,
) -> ApiResult<Json<RetentionView>> {
    if !caller.is_admin() {
        return Err(ApiError::Forbidden);
    }
    project_for(&app, &caller, &id, Action::Update, Resource::Projects).await?;
    if let Some(d) = req.transcript_days
        && !(0..=36_500).contains(&d)
    {
        return Err(ApiError::bad(format!(
            "transcriptDays: 0 (for ever) to 36500 days, or null for the server's window (got {d})"
        )));
    }
    app.db
        .set_transcript_retention_days(&id, req.transcript_days)
        .await?;
    tracing::info!(project = %id, days = ?req.transcript_days, "transcript retention set");
    Ok(Json(retention_view(&app, &id).await?))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectUpdate {
    pub name: Option<String>,
    pub label: Option<String>,
    pub description: Option<String>,
    /// Merged into the current options.
    #[schema(value_type = Object)]
    pub options: Option<Map<String, Json_>>,
    /// Ignored: the server keeps the latest revisions current.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    #[allow(dead_code)]
    pub bot_latest_revision: Option<Json_>,
    #[serde(default, flatten)]
    #[schema(ignore)]
    pub _rest: Map<String, Json_>,
}

/// Updates name, label, description and options. The latest revision ids are the server's.
#[utoipa::path(put, path = "/projects/{projectId}", tag = "projects", request_body = ProjectUpdate,
    params(("projectId" = String, Path)), responses((status = 200, body = Project), (status = 404), (status = 409)))]
async fn put_project(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Body(req): Body<ProjectUpdate>,
) -> ApiResult<Json<Project>> {
    let p = project_for(&app, &caller, &id, Action::Update, Resource::Projects).await?;
    let name = req.name.unwrap_or(p.name.clone());
    check_name("name", &name)?;
    let mut options: Map<String, Json_> =
        serde_json::from_str(&p.options).map_err(|e| ApiError::Internal(e.into()))?;
    for (k, v) in req.options.unwrap_or_default() {
        options.insert(k, v);
    }
    let options: ProjectOptions = serde_json::from_value(Json_::Object(options))
        .map_err(|e| ApiError::bad(format!("options: {e}")))?;
    check_options(&options)?;
    let label = req.label.or(p.label);
    let description = req.description.or(p.description);
    app.db
        .update_project(
            &id,
            &name,
            label.as_deref(),
            description.as_deref(),
            &serde_json::to_string(&options).expect("options serialise"),
        )
        .await
        .map_err(taken(format!("project {name} already exists")))?;
    // Turning options.cms on gives the project its empty first CMS revision if it has none.
    if options.cms && p.cms_latest_revision.is_none() {
        botbox_service::cms::publish_initial(&app.db, &id, &caller.username).await?;
    }
    // Turning options.nlu on gives the project its NLU (named after the project) if it has
    // none; turning it off keeps the NLU and its models (deployments may pin them).
    if options.nlu && app.db.project_nlus(&id, 1, 0).await?.total == 0 {
        app.live
            .nlu
            .create_for_project(
                &id,
                &p.owner_id,
                &name,
                &options.nlu_lang,
                &options.nlu_visibility,
            )
            .await?;
    }
    let p = app
        .db
        .project(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {id}")))?;
    Ok(Json(project_json(&app, p).await?))
}

/// Deletes a project and everything below it: revisions, deployments, environments, channels
/// (their webhooks stop at once), sessions, transcripts, keys, NLUs and their models.
#[utoipa::path(delete, path = "/projects/{projectId}", tag = "projects",
    params(("projectId" = String, Path)), responses((status = 200, body = Project), (status = 404)))]
async fn delete_project(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Project>> {
    let p = project_for(&app, &caller, &id, Action::Delete, Resource::Projects).await?;
    app.live.delete_project(&id).await?;
    Ok(Json(project_json(&app, p).await?))
}

/// The caller's project of that name (kata-cli's select-project): among the caller's own
/// owner's first (the user, the team of a team token, the key's workspace), then among the
/// user's teams'. Two teams' projects of that name are a 409 listing both owners: nothing
/// is ever picked by name across owners.
#[utoipa::path(get, path = "/projects/getProjectByName", tag = "projects",
    params(("name" = String, Query)), responses((status = 200, body = Project), (status = 404), (status = 409)))]
async fn project_by_name(
    State(app): State<App>,
    caller: Caller,
    uri: axum::http::Uri,
) -> ApiResult<Json<Project>> {
    let name = super::query_pairs(uri.query())
        .remove("name")
        .ok_or_else(|| ApiError::bad("query parameter name is required"))?;
    let missing = || ApiError::not_found(format!("project {name}"));
    if let Some(p) = app.db.project_by_name(caller.owner(), &name).await? {
        project_for(&app, &caller, &p.id, Action::Read, Resource::Projects).await?;
        return Ok(Json(project_json(&app, p).await?));
    }
    let owners = caller.owners(&app).await?;
    let refs: Vec<&str> = owners.iter().map(String::as_str).collect();
    let mut found = app.db.projects_named(&refs, &name).await?;
    match found.len() {
        0 => Err(missing()),
        1 => {
            let p = found.remove(0);
            project_for(&app, &caller, &p.id, Action::Read, Resource::Projects).await?;
            Ok(Json(project_json(&app, p).await?))
        }
        _ => {
            let mut list = Vec::new();
            for p in &found {
                list.push(format!("{} ({})", p.id, owner_of(&app, &p.owner_id).await?));
            }
            Err(ApiError::Conflict(format!(
                "several projects named {name} are yours: {}; address one by id",
                list.join(", ")
            )))
        }
    }
}

/// A bot revision in a list, with the warnings found when it was pushed.
pub(crate) fn revision_summary(r: botbox_store::RevisionInfo) -> RevisionSummary {
    RevisionSummary {
        revision: r.id,
        version: r.version,
        created_at: r.created_at,
        warnings: r
            .warnings
            .as_deref()
            .and_then(|w| serde_json::from_str(w).ok())
            .unwrap_or_default(),
        pushed_by: r.pushed_by,
    }
}

/// The project's bot revisions, newest first.
#[utoipa::path(get, path = "/projects/{projectId}/bot/revisions", tag = "bot",
    params(("projectId" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<RevisionSummary>), (status = 404)))]
async fn list_revisions(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    paging: super::Paging,
) -> ApiResult<Json<PageOf<RevisionSummary>>> {
    project_for(&app, &caller, &id, Action::Read, Resource::Projects).await?;
    let page = app
        .db
        .list_revisions(&id, paging.limit, paging.offset())
        .await?;
    let data = page.items.into_iter().map(revision_summary).collect();
    Ok(Json(super::page_of(paging, page.total, data)))
}

/// One bot revision, as stored, with its `revision` (kata-cli's pull).
#[utoipa::path(get, path = "/projects/{projectId}/bot/revisions/{revision}", tag = "bot",
    params(("projectId" = String, Path), ("revision" = String, Path)),
    responses((status = 200, description = "Bot (document 3) plus revision", body = Object), (status = 404)))]
async fn get_revision(
    State(app): State<App>,
    caller: Caller,
    Path((id, rev)): Path<(String, String)>,
) -> ApiResult<Json<Json_>> {
    project_for(&app, &caller, &id, Action::Read, Resource::Projects).await?;
    let r = app
        .db
        .revision(&id, &rev)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("bot revision {rev} of project {id}")))?;
    Ok(Json(stored_bot(&r)?))
}

/// A stored revision's document with its `revision` id.
fn stored_bot(r: &botbox_store::RevisionRow) -> ApiResult<Json_> {
    let mut bot: Json_ =
        serde_json::from_str(&r.source).map_err(|e| ApiError::Internal(e.into()))?;
    if let Some(o) = bot.as_object_mut() {
        o.insert("revision".into(), json!(r.id));
    }
    Ok(bot)
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NluRevision {
    pub revision: String,
    pub created_at: i64,
}

/// The project's NLU revisions (one per training), newest first.
#[utoipa::path(get, path = "/projects/{projectId}/nlu/revisions", tag = "nlu",
    params(("projectId" = String, Path)), responses((status = 200, body = PageOf<NluRevision>), (status = 404)))]
async fn nlu_revisions(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    paging: super::Paging,
) -> ApiResult<Json<PageOf<NluRevision>>> {
    project_for(&app, &caller, &id, Action::Read, Resource::Projects).await?;
    let all = app.db.nlu_revisions(&id).await?;
    let total = all.len() as i64;
    let data = all
        .into_iter()
        .skip(paging.offset() as usize)
        .take(paging.limit as usize)
        .map(|(revision, created_at)| NluRevision {
            revision,
            created_at,
        })
        .collect();
    Ok(Json(super::page_of(paging, total, data)))
}

/// The latest bot revision, as stored: the pushed document with `id`, `version` and
/// `revision` set by the server; with `?format=yaml`, the same document as YAML text (what a
/// person reads, and what `botbox pull` writes).
#[utoipa::path(get, path = "/projects/{projectId}/bot", tag = "bot",
    params(("projectId" = String, Path), ("format" = Option<String>, Query, description = "json (default) or yaml")),
    responses((status = 200, description = "Bot (document 3)", body = Object), (status = 404, description = "no revision yet")))]
async fn get_bot(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    uri: axum::http::Uri,
) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    project_for(&app, &caller, &id, Action::Read, Resource::Projects).await?;
    let r = app
        .db
        .latest_revision(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {id} has no bot revision yet")))?;
    let bot = stored_bot(&r)?;
    match super::query_pairs(uri.query())
        .get("format")
        .map(String::as_str)
    {
        None | Some("json") => Ok(Json(bot).into_response()),
        Some("yaml") => {
            let text = serde_yaml::to_string(&bot).map_err(|e| ApiError::Internal(e.into()))?;
            Ok((
                [(
                    axum::http::header::CONTENT_TYPE,
                    "application/yaml; charset=utf-8",
                )],
                text,
            )
                .into_response())
        }
        Some(other) => Err(ApiError::bad(format!(
            "format: json or yaml (got {other:?})"
        ))),
    }
}

/// Creates a bot revision: validated and compiled with runtime-core; an invalid bot is a 400
/// that lists every problem; a version that exists is a 409. The response is the stored bot
/// plus `revision` and the validation `warnings`.
#[utoipa::path(post, path = "/projects/{projectId}/bot/revisions", tag = "bot",
    params(("projectId" = String, Path)), request_body(content = Object, description = "Bot (document 3)"),
    responses((status = 200, description = "Bot plus revision and warnings", body = Object),
        (status = 400, description = "every validation problem, one per line"), (status = 409, description = "version exists")))]
async fn create_revision(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Body(bot): Body<Json_>,
) -> ApiResult<Json<Json_>> {
    let project = project_for(&app, &caller, &id, Action::Update, Resource::Projects).await?;
    store_revision(&app, &caller, project, bot, false).await
}

/// kata-cli's push: a new revision on top of `revision`, which must be the latest (else 409:
/// pull first). A `version` that exists (bot.yml keeps the pulled one) becomes the next patch
/// version, said in `warnings`; `tag` is dropped.
#[utoipa::path(put, path = "/projects/{projectId}/bot/revisions/{revision}", tag = "bot",
    params(("projectId" = String, Path), ("revision" = String, Path)), request_body(content = Object, description = "Bot (document 3)"),
    responses((status = 200, description = "Bot plus revision and warnings", body = Object),
        (status = 400), (status = 409, description = "not the latest revision")))]
async fn push_revision(
    State(app): State<App>,
    caller: Caller,
    Path((id, rev)): Path<(String, String)>,
    Body(mut bot): Body<Json_>,
) -> ApiResult<Json<Json_>> {
    let project = project_for(&app, &caller, &id, Action::Update, Resource::Projects).await?;
    let latest = project.bot_latest_revision.clone().unwrap_or_default();
    if rev != latest {
        return Err(ApiError::Conflict(format!(
            "revision {rev} is not the latest of project {id} ({latest}): pull, merge and push again"
        )));
    }
    if let Some(doc) = bot.as_object_mut() {
        doc.remove("tag");
    }
    store_revision(&app, &caller, project, bot, true).await
}

/// Validates, compiles and stores a new revision (the service's one use case; its refusals
/// map to 400, 409 and 507).
async fn store_revision(
    app: &App,
    caller: &Caller,
    project: ProjectRow,
    bot: Json_,
    bump: bool,
) -> ApiResult<Json<Json_>> {
    let opts = PublishOptions {
        bump,
        bot_limit: app.config.bot_limit,
        pushed_by: caller.actor().label(),
    };
    Ok(Json(
        revisions::publish(&app.live, &app.cpu, &project, bot, opts).await?,
    ))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraftId {
    pub draft_id: String,
}

/// The project's draft (any JSON object the editor keeps).
#[utoipa::path(get, path = "/projects/{projectId}/bot/draft", tag = "bot",
    params(("projectId" = String, Path)), responses((status = 200, body = Object), (status = 404)))]
async fn get_draft(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Json_>> {
    project_for(&app, &caller, &id, Action::Read, Resource::Projects).await?;
    let d = app
        .db
        .draft(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {id} has no draft")))?;
    Ok(Json(
        serde_json::from_str(&d.body).map_err(|e| ApiError::Internal(e.into()))?,
    ))
}

/// Creates or replaces the draft.
#[utoipa::path(put, path = "/projects/{projectId}/bot/draft", tag = "bot", request_body = Object,
    params(("projectId" = String, Path)), responses((status = 200, body = DraftId)))]
async fn put_draft(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
    Body(body): Body<Map<String, Json_>>,
) -> ApiResult<Json<DraftId>> {
    project_for(&app, &caller, &id, Action::Update, Resource::Projects).await?;
    let draft_id = app
        .db
        .put_draft(&id, &serde_json::to_string(&body).expect("json serialises"))
        .await?;
    Ok(Json(DraftId { draft_id }))
}

#[utoipa::path(delete, path = "/projects/{projectId}/bot/draft", tag = "bot",
    params(("projectId" = String, Path)), responses((status = 200, body = DraftId), (status = 404)))]
async fn delete_draft(
    State(app): State<App>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<DraftId>> {
    project_for(&app, &caller, &id, Action::Update, Resource::Projects).await?;
    let d = app
        .db
        .draft(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {id} has no draft")))?;
    app.db.delete_draft(&id).await?;
    Ok(Json(DraftId {
        draft_id: d.draft_id,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_default_as_documented() {
        let o = ProjectOptions::default();
        assert!(o.bot && !o.nlu && !o.cms);
        assert_eq!(o.nlu_visibility, "private");
        let bad: ProjectOptions =
            super::super::parse_json(br#"{"nluVisibility": "secret"}"#).unwrap();
        assert!(check_options(&bad).is_err());
    }
}
