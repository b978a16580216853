//! The project's CMS through the project API: publish a document as a new revision, read the
//! latest or any revision, list them. Validation and storage are `botbox_service::cms`'s.

use super::{ApiError, ApiResult, App, Caller, PageOf, Paging, project_for};
use axum::Json;
use axum::extract::{Path, State};
use botbox_service::auth::{Action, Resource};
use botbox_service::cms::{self, PublishError};
use botbox_store::CmsRevisionRow;
use serde::Serialize;
use serde_json::Value as Json_;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(latest))
        .routes(routes!(publish, list))
        .routes(routes!(one))
}

/// A CMS revision with its content.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CmsView {
    /// The revision's id; `""` for a project that has never published one.
    pub revision: String,
    pub changelog: String,
    /// Who published it (a user name, or `key:<name>` for a workspace key).
    pub published_by: String,
    /// Unix time in ms (0 without a revision).
    pub created_at: i64,
    /// `{<page>: {<form>: {<element>: {"type": …, "value": …}}}}`.
    #[schema(value_type = Object)]
    pub pages: Json_,
    /// `{<label>: {"questions": [...], "answers": [...]}}`.
    #[schema(value_type = Object)]
    pub faqs: Json_,
}

/// A published revision, and how the project's NLUs were trained again when its FAQ tables
/// changed (one entry per NLU; none when they did not change).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CmsPublished {
    #[serde(flatten)]
    pub revision: CmsView,
    #[schema(value_type = Vec<Object>)]
    pub nlu_trainings: Vec<cms::FaqTraining>,
}

/// A CMS revision in a list.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CmsRevisionSummary {
    pub revision: String,
    pub changelog: String,
    pub published_by: String,
    pub created_at: i64,
}

/// A CMS revision in a list.
pub(crate) fn summary(r: botbox_store::CmsRevisionInfo) -> CmsRevisionSummary {
    CmsRevisionSummary {
        revision: r.id,
        changelog: r.changelog,
        published_by: r.published_by,
        created_at: r.created_at,
    }
}

fn view(r: CmsRevisionRow) -> ApiResult<CmsView> {
    let doc: Json_ = serde_json::from_str(&r.document).map_err(|e| ApiError::Internal(e.into()))?;
    Ok(CmsView {
        revision: r.id,
        changelog: r.changelog,
        published_by: r.published_by,
        created_at: r.created_at,
        pages: doc["pages"].clone(),
        faqs: doc["faqs"].clone(),
    })
}

/// The latest CMS revision with its content; a project that never published one answers
/// `revision: ""` and empty pages (clients call string methods on the revision).
#[utoipa::path(get, path = "/projects/{projectId}/cms", tag = "cms",
    params(("projectId" = String, Path)), responses((status = 200, body = CmsView), (status = 404)))]
async fn latest(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
) -> ApiResult<Json<CmsView>> {
    let p = project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let row = match &p.cms_latest_revision {
        Some(rev) => app.db.cms_revision(&pid, rev).await?,
        None => None,
    };
    Ok(Json(match row {
        Some(r) => view(r)?,
        None => CmsView {
            revision: String::new(),
            changelog: String::new(),
            published_by: String::new(),
            created_at: 0,
            pages: serde_json::json!({}),
            faqs: serde_json::json!({}),
        },
    }))
}

/// Publishes a CMS document (`{pages, faqs, changelog}`) as the project's newest revision.
/// Every problem is a line of the 400's detail, at its place (`pages.home.greeting.text: …`).
/// Revisions are immutable and count toward the owner's storage.
#[utoipa::path(post, path = "/projects/{projectId}/cms/revisions", tag = "cms",
    params(("projectId" = String, Path)), request_body = Object,
    responses((status = 200, body = CmsPublished), (status = 400), (status = 403), (status = 404), (status = 507)))]
async fn publish(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    bytes: axum::body::Bytes,
) -> ApiResult<Json<CmsPublished>> {
    let p = project_for(&app, &caller, &pid, Action::Update, Resource::Projects).await?;
    if !super::projects::options_of(&p)?.cms {
        return Err(ApiError::bad(format!(
            "project {} has no CMS: turn it on with PUT /projects/{pid} {{\"options\": {{\"cms\": true}}}}, then publish",
            p.name
        )));
    }
    if bytes.len() > cms::MAX_DOCUMENT_BYTES {
        return Err(ApiError::bad(format!(
            "the CMS document is {} bytes; at most {} are accepted",
            bytes.len(),
            cms::MAX_DOCUMENT_BYTES
        )));
    }
    let doc: Json_ = super::parse_json(&bytes)?;
    let changelog = match doc.get("changelog") {
        None | Some(Json_::Null) => String::new(),
        Some(Json_::String(s)) if s.chars().count() <= 1000 => s.clone(),
        Some(_) => {
            return Err(ApiError::bad(
                "changelog: a text of at most 1000 characters",
            ));
        }
    };
    botbox_service::quota::check(&app.live, &p.owner_id).await?;
    let published = cms::publish_and_train(
        &app.db,
        &app.live.nlu,
        &p,
        &doc,
        &changelog,
        &caller.username,
        super::nlu::SYNC_WAIT,
    )
    .await;
    match published {
        Ok((row, trainings)) => Ok(Json(CmsPublished {
            revision: view(row)?,
            nlu_trainings: trainings,
        })),
        Err(PublishError::Invalid(problems)) => Err(ApiError::bad(problems.join("\n"))),
        Err(PublishError::Db(e)) => Err(e.into()),
    }
}

/// The project's CMS revisions, newest first.
#[utoipa::path(get, path = "/projects/{projectId}/cms/revisions", tag = "cms",
    params(("projectId" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<CmsRevisionSummary>), (status = 404)))]
async fn list(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    paging: Paging,
) -> ApiResult<Json<PageOf<CmsRevisionSummary>>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let page = app
        .db
        .list_cms_revisions(&pid, paging.limit, paging.offset())
        .await?;
    let data = page.items.into_iter().map(summary).collect();
    Ok(Json(super::page_of(paging, page.total, data)))
}

/// One CMS revision with its content.
#[utoipa::path(get, path = "/projects/{projectId}/cms/revisions/{revision}", tag = "cms",
    params(("projectId" = String, Path), ("revision" = String, Path)),
    responses((status = 200, body = CmsView), (status = 404)))]
async fn one(
    State(app): State<App>,
    caller: Caller,
    Path((pid, rev)): Path<(String, String)>,
) -> ApiResult<Json<CmsView>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let row = app
        .db
        .cms_revision(&pid, &rev)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("CMS revision {rev}")))?;
    Ok(Json(view(row)?))
}
