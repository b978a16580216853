//! The canary routes of an environment (start or reshape, promote, abort), thin over
//! `Live`'s canary writes, and the `canary`/`lastCanary` fields every environment view
//! carries.

use super::audit::AuditSlot;
use super::deploy::{environment_json, environment_or_404};
use super::{ApiResult, App, Body, Caller, project_for};
use axum::Json;
use axum::extract::{Path, State};
use botbox_api_types::{
    Canary, CanaryRequest, CanaryRollback, CanarySide, Environment, LastCanary,
};
use botbox_service::auth::{Action, Resource};
use botbox_service::live::{CanaryStart, Thresholds, figures};
use botbox_store::{CanaryRow, EnvironmentRow};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(put_canary, delete_canary))
        .routes(routes!(promote_canary))
}

/// A running canary as the API shows it, beside the environment's version (the control).
fn canary_json(c: &CanaryRow, control_version: &str) -> Canary {
    let (canary, control, t) = figures(c);
    Canary {
        dep_version: c.dep_version.clone(),
        share: c.share,
        started_at: c.started_at,
        started_by: c.started_by.clone(),
        messages: canary.messages,
        error_rate: canary.error_rate,
        fallback_rate: canary.fallback_rate,
        control: CanarySide {
            dep_version: control_version.to_owned(),
            messages: control.messages,
            error_rate: control.error_rate,
            fallback_rate: control.fallback_rate,
        },
        rollback: CanaryRollback {
            max_error_rate: t.max_error_rate,
            max_fallback_increase: t.max_fallback_increase,
            min_messages: t.min_messages,
        },
    }
}

fn last_canary_json(c: CanaryRow) -> LastCanary {
    LastCanary {
        dep_version: c.dep_version,
        outcome: c.outcome.unwrap_or_default(),
        reason: c.reason,
        ended_at: c.ended_at.unwrap_or_default(),
        ended_by: c.ended_by.unwrap_or_default(),
    }
}

/// The environment as every route shows it: with its running canary and how the last one
/// ended.
pub(crate) async fn environment_view(app: &App, e: EnvironmentRow) -> ApiResult<Environment> {
    let store = app.db.canaries();
    let running = match store.running(&e.project_id, &e.id).await? {
        Some(c) => Some(
            app.live
                .canary_figures(c, &e.name, botbox_store::now_ms())
                .await?,
        ),
        None => None,
    };
    let last = store.last_ended(&e.project_id, &e.id).await?;
    let mut view = environment_json(e);
    view.canary = running.map(|c| canary_json(&c, &view.deployment_version));
    view.last_canary = last.map(last_canary_json);
    Ok(view)
}

/// Starts a canary: the environment runs `depVersion` for `share` % of its channel users
/// (assigned by a stable hash of the environment and the user, for the canary's life) and
/// rolls it back by itself past the `rollback` thresholds. With the canary's own version
/// running, changes its share and thresholds.
#[utoipa::path(put, path = "/projects/{projectId}/environments/{environmentId}/canary", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path)), request_body = CanaryRequest,
    responses((status = 200, body = Environment), (status = 400), (status = 404),
        (status = 409, description = "another canary runs")))]
async fn put_canary(
    State(app): State<App>,
    caller: Caller,
    slot: Option<axum::Extension<AuditSlot>>,
    Path((pid, eid)): Path<(String, String)>,
    Body(req): Body<CanaryRequest>,
) -> ApiResult<Json<Environment>> {
    project_for(&app, &caller, &pid, Action::Update, Resource::Environments).await?;
    let env = environment_or_404(&app, &pid, &eid).await?;
    let r = req.rollback.unwrap_or_default();
    if let Some(axum::Extension(slot)) = slot {
        slot.detail(format!(
            "{} for {} % beside {} (rolls back past errors {}, fallbacks +{}, after {} messages)",
            req.dep_version,
            req.share,
            env.deployment_version,
            r.max_error_rate,
            r.max_fallback_increase,
            r.min_messages
        ));
    }
    let start = CanaryStart {
        dep_version: &req.dep_version,
        share: req.share,
        thresholds: Thresholds {
            max_error_rate: r.max_error_rate,
            max_fallback_increase: r.max_fallback_increase,
            min_messages: r.min_messages,
        },
    };
    app.live.start_canary(&env, start, &caller.actor()).await?;
    Ok(Json(environment_view(&app, env).await?))
}

/// Ends the canary: its users return to the environment's deployment at their next message.
#[utoipa::path(delete, path = "/projects/{projectId}/environments/{environmentId}/canary", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path)),
    responses((status = 200, body = Environment), (status = 404), (status = 409, description = "no canary runs")))]
async fn delete_canary(
    State(app): State<App>,
    caller: Caller,
    slot: Option<axum::Extension<AuditSlot>>,
    Path((pid, eid)): Path<(String, String)>,
) -> ApiResult<Json<Environment>> {
    end(app, caller, slot, (pid, eid), false).await
}

/// Makes the canary's version the environment's deployment, for every user.
#[utoipa::path(post, path = "/projects/{projectId}/environments/{environmentId}/canary/promote", tag = "environments",
    params(("projectId" = String, Path), ("environmentId" = String, Path)),
    responses((status = 200, body = Environment), (status = 404), (status = 409, description = "no canary runs")))]
async fn promote_canary(
    State(app): State<App>,
    caller: Caller,
    slot: Option<axum::Extension<AuditSlot>>,
    Path((pid, eid)): Path<(String, String)>,
) -> ApiResult<Json<Environment>> {
    end(app, caller, slot, (pid, eid), true).await
}

async fn end(
    app: App,
    caller: Caller,
    slot: Option<axum::Extension<AuditSlot>>,
    (pid, eid): (String, String),
    promote: bool,
) -> ApiResult<Json<Environment>> {
    project_for(&app, &caller, &pid, Action::Update, Resource::Environments).await?;
    let env = environment_or_404(&app, &pid, &eid).await?;
    let c = app.live.end_canary(&env, promote, &caller.actor()).await?;
    if let Some(axum::Extension(slot)) = slot {
        slot.detail(format!(
            "{} (was beside {})",
            c.dep_version, env.deployment_version
        ));
    }
    let env = environment_or_404(&app, &pid, &eid).await?;
    Ok(Json(environment_view(&app, env).await?))
}
