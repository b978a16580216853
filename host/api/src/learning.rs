//! The routes that learn from production, thin over `botbox_service::learning`: an
//! environment's misunderstood inbox (list, label or dismiss) and a project's replays
//! (start, read).

use super::audit::AuditSlot;
use super::deploy::environment_or_404;
use super::{ApiError, ApiResult, App, Body, Caller, Paging, page_of, project_for, query_pairs};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use botbox_api_types::{
    MisunderstoodItem, MisunderstoodUpdate, PageOf, Replay, ReplayRequest, ReplayResult,
};
use botbox_service::auth::{Action, Resource};
use botbox_service::learning::inbox::{self, Decision, InboxItem};
use botbox_service::learning::replay::{self, REPLAY_DEFAULT, ReplayAsk};
use botbox_store::{EnvironmentRow, ReplayRow};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(list_misunderstood))
        .routes(routes!(update_misunderstood))
        .routes(routes!(start_replay))
        .routes(routes!(get_replay))
}

fn item_json(i: InboxItem) -> MisunderstoodItem {
    MisunderstoodItem {
        id: i.id,
        text: i.text,
        count: i.count,
        first_seen: i.first_seen,
        last_seen: i.last_seen,
        intent: i.intent,
        flow: i.flow,
        status: i.status,
        sample_user_id: i.sample_user_id,
        nlu_id: i.nlu,
        label: i.label,
    }
}

/// The environment's misunderstood inbox: channel users' messages that matched no intent
/// or a fallback intent, grouped by their normalised text, most frequent first.
#[utoipa::path(get, path = "/projects/{projectId}/environments/{environmentId}/misunderstood", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path),
        ("status" = Option<String>, Query, description = "new, labelled or dismissed"),
        ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<MisunderstoodItem>), (status = 400), (status = 404)))]
async fn list_misunderstood(
    State(app): State<App>,
    caller: Caller,
    Path((pid, eid)): Path<(String, String)>,
    paging: Paging,
    uri: Uri,
) -> ApiResult<Json<PageOf<MisunderstoodItem>>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Environments).await?;
    let env = environment_or_404(&app, &pid, &eid).await?;
    let q = query_pairs(uri.query());
    let status = q
        .get("status")
        .map(String::as_str)
        .filter(|s| !s.is_empty());
    let page = inbox::list(&app.db, &env.id, status, (paging.limit, paging.offset())).await?;
    let data = page.items.into_iter().map(item_json).collect();
    Ok(Json(page_of(paging, page.total, data)))
}

/// Dismisses a group, or labels it: every text of the group is added to the project's NLU
/// `nluId` with the label `intent` (of the trait `entity`, or of the NLU's one trait entity
/// with that label) and each span found in it; the next training learns them.
#[utoipa::path(put, path = "/projects/{projectId}/environments/{environmentId}/misunderstood/{id}", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path), ("id" = String, Path)),
    request_body = MisunderstoodUpdate,
    responses((status = 200, body = MisunderstoodItem), (status = 400), (status = 404)))]
async fn update_misunderstood(
    State(app): State<App>,
    caller: Caller,
    slot: Option<axum::Extension<AuditSlot>>,
    Path((pid, eid, id)): Path<(String, String, String)>,
    Body(req): Body<MisunderstoodUpdate>,
) -> ApiResult<Json<MisunderstoodItem>> {
    project_for(&app, &caller, &pid, Action::Update, Resource::Projects).await?;
    let env = environment_or_404(&app, &pid, &eid).await?;
    let decision = decision_of(req)?;
    if let Some(axum::Extension(slot)) = slot {
        slot.detail(match &decision {
            Decision::Dismiss => format!("{id} dismissed in {}", env.name),
            Decision::Label { nlu, label, .. } => {
                format!("{id} of {} labelled {label} in NLU {nlu}", env.name)
            }
        });
    }
    let who = caller.actor().label();
    inbox::decide(&app.db, (&pid, &env.id), &id, &decision, &who)
        .await?
        .map(|i| Json(item_json(i)))
        .ok_or_else(|| ApiError::not_found(format!("misunderstood item {id}")))
}

fn decision_of(req: MisunderstoodUpdate) -> ApiResult<Decision> {
    match req.status.as_str() {
        "dismissed" => Ok(Decision::Dismiss),
        "labelled" => {
            let need = |v: Option<String>, field: &str| {
                v.filter(|s| !s.trim().is_empty())
                    .ok_or_else(|| ApiError::bad(format!("{field}: a labelled item names it")))
            };
            Ok(Decision::Label {
                nlu: need(req.nlu_id, "nluId")?,
                label: need(req.intent, "intent")?,
                entity: req.entity,
                spans: req
                    .entities
                    .into_iter()
                    .map(|s| (s.entity, s.value))
                    .collect(),
            })
        }
        other => Err(ApiError::bad(format!(
            "status: {other:?} is not one of labelled, dismissed"
        ))),
    }
}

/// The project's environment named, or with the id, `name_or_id`.
async fn environment_named(app: &App, pid: &str, name_or_id: &str) -> ApiResult<EnvironmentRow> {
    if let Some(e) = app.db.environment(pid, name_or_id).await? {
        return Ok(e);
    }
    let all = app.db.list_environments(pid, 1_000, 0).await?.items;
    all.into_iter()
        .find(|e| e.name == name_or_id)
        .ok_or_else(|| ApiError::not_found(format!("environment {name_or_id}")))
}

fn replay_json(r: ReplayRow, env_name: String) -> Replay {
    let results: Vec<ReplayResult> = r
        .results
        .as_deref()
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_default();
    Replay {
        id: r.id,
        status: r.status,
        environment: r.environment_id,
        environment_name: env_name,
        bot_revision: r.bot_revision,
        cms_revision: r.cms_revision,
        requested_by: r.requested_by,
        created_at: r.created_at,
        finished_at: r.finished_at,
        conversations: r.conversations,
        identical: r.identical,
        differing: r.differing,
        failed: r.failed,
        results,
        error: r.error,
    }
}

/// Replays an environment's recorded conversations on a bot revision: each from a new
/// session, with its steps' recorded clock, randomness and api answers. Nothing reaches a
/// channel, an api endpoint or the environment's data. One replay at a time per project.
#[utoipa::path(post, path = "/projects/{projectId}/replays", tag = "projects",
    params(("projectId" = String, Path)), request_body = ReplayRequest,
    responses((status = 202, body = Replay), (status = 400), (status = 404),
        (status = 409, description = "a replay of the project is running")))]
async fn start_replay(
    State(app): State<App>,
    caller: Caller,
    slot: Option<axum::Extension<AuditSlot>>,
    Path(pid): Path<String>,
    Body(req): Body<ReplayRequest>,
) -> ApiResult<(StatusCode, Json<Replay>)> {
    let project = project_for(&app, &caller, &pid, Action::Update, Resource::Projects).await?;
    let env = environment_named(&app, &pid, &req.environment).await?;
    if let Some(axum::Extension(slot)) = slot {
        slot.detail(format!(
            "bot revision {} against {}'s conversations",
            req.bot_revision, env.name
        ));
    }
    let ask = ReplayAsk {
        bot_revision: req.bot_revision,
        cms_revision: req.cms_revision.filter(|c| !c.is_empty()),
        last: req.last.unwrap_or(REPLAY_DEFAULT),
        since: req.since,
        until: req.until,
    };
    let who = caller.actor().label();
    let owner = (&pid[..], &project.owner_id[..]);
    let row = replay::start(&app.live, owner, &env, ask, &who).await?;
    Ok((StatusCode::ACCEPTED, Json(replay_json(row, env.name))))
}

/// A replay: its status, counts and, once done, each conversation's result.
#[utoipa::path(get, path = "/projects/{projectId}/replays/{replayId}", tag = "projects",
    params(("projectId" = String, Path), ("replayId" = String, Path)),
    responses((status = 200, body = Replay), (status = 404)))]
async fn get_replay(
    State(app): State<App>,
    caller: Caller,
    Path((pid, id)): Path<(String, String)>,
) -> ApiResult<Json<Replay>> {
    project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let row = app
        .db
        .replays()
        .get(&pid, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("replay {id}")))?;
    let env_name = app
        .db
        .environment(&pid, &row.environment_id)
        .await?
        .map(|e| e.name)
        .unwrap_or_default();
    Ok(Json(replay_json(row, env_name)))
}
