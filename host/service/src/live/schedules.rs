//! Scheduled messages (the schedule action): stored with the step that made them, fired as
//! incoming commands when due, so they survive restarts.

use super::Live;
use botbox_channels::InboundItem;
use botbox_store::now_ms;
use runtime_core::session::Message;
use std::sync::Arc;

/// The first fire time after `now` of a repeating schedule within its end; `None` when it
/// does not repeat or is over. Missed fires (the server was down) are not replayed one by one.
/// Checked arithmetic: a period or time past `i64` (a row from before periods were bounded,
/// or edited by hand) ends the schedule instead of wrapping around into a fire loop.
pub fn next_fire(row: &botbox_store::ScheduleRow, now: i64) -> Option<i64> {
    let every = row.every_ms.filter(|e| *e > 0)?;
    let k = now.checked_sub(row.next_at)?.max(0) / every + 1;
    let next = k.checked_mul(every)?.checked_add(row.next_at)?;
    Some(next).filter(|n| row.end_at.is_none_or(|end| *n <= end))
}

/// Fires due schedules every poll interval until a drain starts.
pub(super) async fn run(live: Arc<Live>) {
    while !live.drain.draining() {
        if let Err(e) = fire_due(&live).await {
            tracing::error!(error = %format!("{e:#}"), "schedules");
        }
        tokio::select! {
            _ = tokio::time::sleep(live.cfg.poll_interval) => {}
            _ = live.drain.started() => {}
        }
    }
}

/// Fires the schedules that are due; returns how many fired.
pub async fn fire_due(live: &Live) -> anyhow::Result<usize> {
    let mut fired = 0;
    for row in live.db.due_schedules(now_ms(), 64).await? {
        let now = now_ms();
        metrics::histogram!("botbox_schedule_lag_seconds")
            .record((now - row.next_at).max(0) as f64 / 1e3);
        let next = next_fire(&row, now);
        if !live.db.advance_schedule(&row, next).await? {
            continue; // another replica fires it
        }
        let Some(route) = live.route(&row.channel_id).await? else {
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
        if let Err(e) = live.handle(&route, item).await {
            tracing::warn!(schedule = %row.id, error = %e, "scheduled message failed");
        }
    }
    Ok(fired)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(next_at: i64, every: Option<i64>, end: Option<i64>) -> botbox_store::ScheduleRow {
        botbox_store::ScheduleRow {
            id: "s".into(),
            session_id: "x".into(),
            channel_id: "c".into(),
            user_id: "u".into(),
            message: "{}".into(),
            next_at,
            end_at: end,
            every_ms: every,
        }
    }

    #[test]
    fn next_fire_skips_missed_periods_and_stops_at_the_end() {
        assert_eq!(next_fire(&row(1000, None, None), 5000), None);
        assert_eq!(next_fire(&row(1000, Some(1000), None), 1000), Some(2000));
        assert_eq!(next_fire(&row(1000, Some(1000), None), 5500), Some(6000));
        assert_eq!(next_fire(&row(1000, Some(1000), Some(5000)), 5500), None);
    }

    #[test]
    fn next_fire_ends_a_schedule_whose_times_overflow() {
        assert_eq!(next_fire(&row(1000, Some(i64::MAX), None), 5000), None);
        assert_eq!(
            next_fire(&row(i64::MAX - 10, Some(100), None), i64::MAX),
            None
        );
        assert_eq!(next_fire(&row(i64::MIN, Some(1000), None), 5000), None);
        // Just inside the limits still fires.
        assert_eq!(
            next_fire(&row(0, Some(i64::MAX / 2), None), 1),
            Some(i64::MAX / 2)
        );
    }
}
