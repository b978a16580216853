//! `GET /metrics`: the Prometheus exposition (the binary installs the recorder and hands
//! the API its renderer, [`crate::MetricsRoute`]). Counters and histograms are recorded
//! where things happen; the gauges here are read at each scrape: the backlog from storage
//! (three grouped counts), the sandbox's instances, the process's resident memory, and
//! whether a drain runs. Every metric is listed in docs/operations.md.
//!
//! On the main listener the route needs a bearer token: `--metrics-token`'s, or an admin's.

use crate::{App, Caller};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

pub(crate) async fn scrape(
    State(app): State<App>,
    headers: HeaderMap,
    caller: Result<Caller, crate::ApiError>,
) -> Response {
    let Some(route) = app.config.metrics.clone() else {
        return (StatusCode::NOT_FOUND, "no such route").into_response();
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let by_token = match (&route.token, bearer) {
        (Some(want), Some(got)) => {
            subtle::ConstantTimeEq::ct_eq(want.as_bytes(), got.as_bytes()).into()
        }
        _ => false,
    };
    if !by_token && !caller.as_ref().is_ok_and(|c| c.is_admin()) {
        return match caller {
            Err(e) => e.into_response(),
            Ok(_) => crate::ApiError::Forbidden.into_response(),
        };
    }
    render(&app, &route).await
}

/// Sets the gauges read at scrape time, then renders everything.
pub async fn render(app: &App, route: &crate::MetricsRoute) -> Response {
    use metrics::gauge;
    match app.db.backlog().await {
        Ok(b) => {
            gauge!("botbox_outbox_pending").set(b.outbox_pending as f64);
            let age = b
                .outbox_oldest_ms
                .map_or(0.0, |t| (botbox_store::now_ms() - t).max(0) as f64 / 1e3);
            gauge!("botbox_outbox_oldest_pending_age_seconds").set(age);
            for (status, n) in b.runs {
                gauge!("botbox_agent_runs", "status" => status).set(n as f64);
            }
            for (status, n) in b.tasks {
                gauge!("botbox_tasks", "status" => status).set(n as f64);
            }
        }
        Err(e) => tracing::warn!(error = %e, "metrics: reading the backlog"),
    }
    match app.db.size_bytes().await {
        Ok(n) => gauge!("botbox_database_bytes").set(n as f64),
        Err(e) => tracing::warn!(error = %e, "metrics: reading the database's size"),
    }
    if let Some(s) = app.live.sandbox_stats() {
        gauge!("botbox_sandbox_instances", "state" => "busy").set((s.live - s.idle) as f64);
        gauge!("botbox_sandbox_instances", "state" => "idle").set(s.idle as f64);
        gauge!("botbox_sandbox_slots").set(s.max as f64);
    }
    if let Some(rss) = resident_bytes() {
        gauge!("botbox_process_resident_memory_bytes").set(rss as f64);
    }
    gauge!("botbox_draining").set(if app.live.drain.draining() { 1.0 } else { 0.0 });
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        (route.render)(),
    )
        .into_response()
}

/// The process's resident memory (Linux: `/proc/self/statm`, in pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}
