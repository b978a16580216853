//! Scheduled messages (the schedule action): stored with the step that made them, fired as
//! incoming commands when due, so they survive restarts.

use super::Live;
use crate::channels::InboundItem;
use crate::db::now_ms;
use runtime_core::session::Message;
use std::sync::Arc;

pub(super) async fn run(live: Arc<Live>) {
    loop {
        if let Err(e) = fire_due(&live).await {
            tracing::error!(error = %format!("{e:#}"), "schedules");
        }
        tokio::time::sleep(live.cfg.poll_interval).await;
    }
}

/// Fires the schedules that are due; returns how many fired.
pub async fn fire_due(live: &Live) -> anyhow::Result<usize> {
    let mut fired = 0;
    for row in live.db.due_schedules(now_ms(), 64).await? {
        let next = row
            .every_ms
            .filter(|e| *e > 0)
            .map(|e| row.next_at + e)
            .filter(|n| row.end_at.is_none_or(|end| *n <= end));
        if !live.db.advance_schedule(&row, next).await? {
            continue; // another replica fires it
        }
        let Some((channel, env)) = live.channel(&row.channel_id).await? else {
            continue;
        };
        let json: serde_json::Value = serde_json::from_str(&row.message).unwrap_or_default();
        let message = match Message::from_json(&json) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(schedule = %row.id, error = %e, "scheduled message unreadable");
                continue;
            }
        };
        fired += 1;
        let item = InboundItem {
            provider_id: None,
            user_id: row.user_id.clone(),
            message,
        };
        if let Err(e) = live.handle(&channel, &env, item).await {
            tracing::warn!(schedule = %row.id, error = %e, "scheduled message failed");
        }
    }
    Ok(fired)
}
