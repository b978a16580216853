//! The pruner: every minute, what has outlived its window is deleted, in batches
//! ([`botbox_store::Expired`]), and on SQLite the freed pages go back to the file system.
//! Stops with a drain.

use super::Live;
use botbox_store::{Db, Expired, now_ms};
use std::sync::Arc;
use std::time::Duration;

/// How long stored things are kept (`LiveConfig::retention`).
#[derive(Debug, Clone)]
pub struct Retention {
    /// Delivered outbox rows (60 s): the transcript is the record of a reply.
    pub sent_outbox: Duration,
    /// Outbox rows given up on (7 days), for inspection.
    pub failed_outbox: Duration,
    /// Transcript lines (90 days; `None`: kept for ever). `--transcript-retention-days`.
    pub transcripts: Option<Duration>,
    /// Provider message ids seen, the dedupe window (7 days: providers retry for hours).
    pub inbound_seen: Duration,
    /// Artifacts of ended tasks, after the task's last change (30 days): a task's artifact
    /// URLs answer 404 then, its outputs stay.
    pub task_artifacts: Duration,
    /// Bot errors (30 days).
    pub bot_errors: Duration,
    /// Time between passes (60 s).
    pub every: Duration,
}

const DAY: Duration = Duration::from_secs(24 * 3600);

impl Default for Retention {
    fn default() -> Self {
        Retention {
            sent_outbox: Duration::from_secs(60),
            failed_outbox: DAY * 7,
            transcripts: Some(DAY * 90),
            inbound_seen: DAY * 7,
            task_artifacts: DAY * 30,
            bot_errors: DAY * super::BOT_ERROR_DAYS as u32,
            every: Duration::from_secs(60),
        }
    }
}

impl Retention {
    fn window(&self, what: Expired) -> Option<Duration> {
        match what {
            Expired::SentOutbox => Some(self.sent_outbox),
            Expired::FailedOutbox => Some(self.failed_outbox),
            Expired::Transcripts => self.transcripts,
            Expired::InboundSeen => Some(self.inbound_seen),
            Expired::TaskArtifacts => Some(self.task_artifacts),
            Expired::BotErrors => Some(self.bot_errors),
        }
    }
}

/// Free pages given back to the file system per pass at most (4 MiB of 4 KiB pages).
const GIVE_BACK_PAGES: u32 = 1024;

/// One pass: every kind pruned to its window as of `now` (Unix ms). Returns the rows
/// deleted per kind; a failure is logged and the next pass tries again.
pub async fn prune_all(db: &Db, r: &Retention, now: i64) -> Vec<(&'static str, u64)> {
    let mut pruned = Vec::new();
    let cutoff = |window: Duration| now - window.as_millis() as i64;
    for what in Expired::ALL {
        let Some(window) = r.window(what) else {
            continue;
        };
        match db.prune(what, cutoff(window)).await {
            Ok(n) => pruned.push((what.name(), n)),
            Err(e) => tracing::warn!(what = what.name(), error = %e, "pruning"),
        }
    }
    for (what, n) in &pruned {
        metrics::counter!("botbox_pruned_rows_total", "what" => *what).increment(*n);
    }
    if let Err(e) = db.give_back_space(GIVE_BACK_PAGES).await {
        tracing::warn!(error = %e, "giving freed pages back");
    }
    pruned
}

/// Prunes every `Retention::every` until a drain starts.
pub(super) async fn run(live: Arc<Live>) {
    let r = live.cfg.retention.clone();
    while !live.drain.draining() {
        let pruned = prune_all(&live.db, &r, now_ms()).await;
        let total: u64 = pruned.iter().map(|(_, n)| n).sum();
        if total > 0 {
            tracing::debug!(?pruned, "pruned expired rows");
        }
        tokio::select! {
            _ = tokio::time::sleep(r.every) => {}
            _ = live.drain.started() => {}
        }
    }
}
