//! `GET /projects/{projectId}/overview`: what a project's page shows, in one request (the
//! console's project page): the project, its latest bot revisions, its environments with
//! their channels, its deployment versions and its CMS revisions.

use super::{ApiResult, App, Caller, project_access};
use axum::Json;
use axum::extract::{Path, State};
use botbox_api_types::{Deployment, Environment, Project, RevisionSummary};
use botbox_service::auth::{Action, Resource, Role};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Rows of each list the overview carries (the newest).
const ROWS: i64 = 20;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(overview))
}

/// What the caller may do on the project, for pages that show only the controls a person
/// may use (the server checks every request again).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    /// The caller's role over the project's owner: `admin`, `teamAdmin`, `developer` or
    /// `viewer`.
    pub role: String,
    /// Among `edit` (push, drafts, CMS, NLU, Cases), `deploy` (deployment versions,
    /// environments, channels, rollbacks, canaries), `keys` (API keys: a person's login)
    /// and `members` (the owning team's membership).
    pub allowed: Vec<&'static str>,
}

fn access(caller: &Caller, role: Role, team_owned: bool) -> Access {
    let may = |r| botbox_service::auth::allows(role, Action::Update, r);
    let person = caller.acting.is_person();
    let allowed = [
        ("edit", may(Resource::Projects)),
        ("deploy", may(Resource::Deployments)),
        ("keys", person && may(Resource::Environments)),
        (
            "members",
            person && team_owned && matches!(role, Role::TeamAdmin | Role::Admin),
        ),
    ];
    Access {
        role: role.name().to_owned(),
        allowed: allowed
            .into_iter()
            .filter(|(_, ok)| *ok)
            .map(|(n, _)| n)
            .collect(),
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    pub project: Project,
    /// What the caller may do here.
    pub access: Access,
    /// The newest 20 bot revisions.
    pub bot_revisions: Vec<RevisionSummary>,
    /// Every environment, each with its channels (secrets masked as on the channel routes).
    pub environments: Vec<Environment>,
    /// The newest 20 deployment versions.
    pub deployments: Vec<Deployment>,
    /// The newest 20 CMS revisions.
    pub cms_revisions: Vec<super::cms::CmsRevisionSummary>,
}

/// A project's page in one request. Read rights on the project; channels are listed as
/// `GET …/channels` lists them for the caller's role.
#[utoipa::path(get, path = "/projects/{projectId}/overview", tag = "projects",
    params(("projectId" = String, Path)),
    responses((status = 200, body = Overview), (status = 404)))]
async fn overview(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
) -> ApiResult<Json<Overview>> {
    let (p, role) = project_access(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let reveal = super::deploy::reveals_secrets(role);
    let revisions = app.db.list_revisions(&pid, ROWS, 0).await?.items;
    let envs = app.db.list_environments(&pid, 1000, 0).await?.items;
    let channels = app.db.list_channels(&pid, None, 10_000, 0).await?.items;
    let deployments = app.db.list_deployments(&pid, ROWS, 0).await?.items;
    let cms = app.db.list_cms_revisions(&pid, ROWS, 0).await?.items;
    let mut environments = Vec::with_capacity(envs.len());
    for e in envs {
        let id = e.id.clone();
        let mut view = super::canary::environment_view(&app, e).await?;
        view.channels = Some(
            channels
                .iter()
                .filter(|c| c.environment_id == id)
                .map(|c| super::deploy::channel_json(&app, c.clone(), reveal))
                .collect::<ApiResult<_>>()?,
        );
        environments.push(view);
    }
    let team_owned = app.db.team_by_id(&p.owner_id).await?.is_some();
    Ok(Json(Overview {
        access: access(&caller, role, team_owned),
        project: super::projects::project_json(&app, p).await?,
        bot_revisions: revisions
            .into_iter()
            .map(super::projects::revision_summary)
            .collect(),
        environments,
        deployments: deployments
            .into_iter()
            .map(super::deploy::deployment_json)
            .collect(),
        cms_revisions: cms.into_iter().map(super::cms::summary).collect(),
    }))
}
