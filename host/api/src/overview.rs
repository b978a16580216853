//! `GET /projects/{projectId}/overview`: what a project's page shows, in one request (the
//! console's project page): the project, its latest bot revisions, its environments with
//! their channels, its deployment versions and its CMS revisions.

use super::{ApiResult, App, Caller, project_access};
use axum::Json;
use axum::extract::{Path, State};
use botbox_api_types::{Deployment, Environment, Project, RevisionSummary};
use botbox_service::auth::{Action, Resource};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Rows of each list the overview carries (the newest).
const ROWS: i64 = 20;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(overview))
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    pub project: Project,
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
        let mut view = super::deploy::environment_json(e);
        view.channels = Some(
            channels
                .iter()
                .filter(|c| c.environment_id == id)
                .map(|c| super::deploy::channel_json(&app, c.clone(), reveal))
                .collect::<ApiResult<_>>()?,
        );
        environments.push(view);
    }
    Ok(Json(Overview {
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
