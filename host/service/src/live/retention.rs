//! The pruner: every pass, the analytics' closed hours are rolled up first (no line or
//! error is pruned before it is counted), then what has outlived its window is deleted in
//! batches ([`botbox_store::Expired`], transcripts project by project, idle sessions a few
//! pages at a time), and on SQLite the freed pages go back to the file system. Stops with a
//! drain.

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
    /// Transcript lines (90 days; `None`: kept for ever), `--transcript-retention`. An
    /// administrator may set a project's own window (`PUT /projects/{id}/retention`).
    pub transcripts: Option<Duration>,
    /// Sessions not changed for this long (`None`, the default: kept for ever, as the bot
    /// language says; `--session-retention`). A user who comes back after it starts afresh.
    pub idle_sessions: Option<Duration>,
    /// Provider message ids seen, the dedupe window (7 days: providers retry for hours).
    pub inbound_seen: Duration,
    /// Artifacts of ended tasks, after the task's last change (30 days): a task's artifact
    /// URLs answer 404 then, its outputs stay.
    pub task_artifacts: Duration,
    /// Bot errors (30 days).
    pub bot_errors: Duration,
    /// Ended agent runs with their chunk logs and steers (24 h, the agent API's promise).
    pub agent_runs: Duration,
    /// `/v1` Idempotency-Key answers (24 h, the agent API's promise).
    pub idempotency: Duration,
    /// Inbound hooks' `webhook-id` receipts (7 days; a replay older than the signature's
    /// 5-minute tolerance is refused anyway).
    pub hook_receipts: Duration,
    /// Case webhook messages delivered or given up on, with their attempts (30 days).
    pub webhook_messages: Duration,
    /// Audit entries (365 days; `None`: kept for ever; `--audit-retention`).
    pub audit_log: Option<Duration>,
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
            idle_sessions: None,
            inbound_seen: DAY * 7,
            task_artifacts: DAY * 30,
            bot_errors: DAY * super::BOT_ERROR_DAYS as u32,
            agent_runs: DAY,
            idempotency: DAY,
            hook_receipts: DAY * 7,
            webhook_messages: DAY * 30,
            audit_log: Some(DAY * 365),
            every: Duration::from_secs(60),
        }
    }
}

impl Retention {
    /// Every window divided by `n` (benchmarks: a soak reaches its steady state in
    /// minutes instead of months). `every` is kept.
    pub fn scaled(mut self, n: u32) -> Self {
        let n = n.max(1);
        for w in [
            &mut self.sent_outbox,
            &mut self.failed_outbox,
            &mut self.inbound_seen,
            &mut self.task_artifacts,
            &mut self.bot_errors,
            &mut self.agent_runs,
            &mut self.idempotency,
            &mut self.hook_receipts,
            &mut self.webhook_messages,
        ] {
            *w /= n;
        }
        for w in [
            &mut self.transcripts,
            &mut self.idle_sessions,
            &mut self.audit_log,
        ]
        .into_iter()
        .flatten()
        {
            *w /= n;
        }
        self
    }

    fn window(&self, what: Expired) -> Duration {
        match what {
            Expired::SentOutbox => self.sent_outbox,
            Expired::FailedOutbox => self.failed_outbox,
            Expired::InboundSeen => self.inbound_seen,
            Expired::TaskArtifacts => self.task_artifacts,
            Expired::BotErrors => self.bot_errors,
            Expired::AgentRuns => self.agent_runs,
            Expired::Idempotency => self.idempotency,
            Expired::HookReceipts => self.hook_receipts,
            Expired::WebhookMessages => self.webhook_messages,
            Expired::AuditLog => self.audit_log.unwrap_or(Duration::ZERO),
        }
    }
}

/// Free pages given back to the file system per pass at most (4 MiB of 4 KiB pages).
const GIVE_BACK_PAGES: u32 = 1024;

/// Pages of the idle-session walk per pass (10 × `SESSION_PAGE` sessions read): a million
/// sessions are walked in 100 passes, without a burst of reads.
const SESSION_PAGES_PER_PASS: usize = 10;

/// Where the idle-session walk goes on from (the id after which the next page starts).
#[derive(Debug, Default)]
pub struct SessionWalk(String);

/// Time a pass may spend rolling up analytics (a server catching up on a long history
/// goes on at the next pass).
const ROLL_BUDGET: Duration = Duration::from_secs(2);

/// Rolls up the analytics' closed hours (see [`Db::roll_up`]); returns the watermark, before
/// which lines and errors may be pruned (`i64::MIN` when rolling failed: nothing is).
async fn roll_up(db: &Db, now: i64) -> i64 {
    match db.roll_up(now, ROLL_BUDGET).await {
        Ok(rolled) => {
            metrics::gauge!("botbox_rollup_lag_seconds").set((now - rolled) as f64 / 1000.0);
            rolled
        }
        Err(e) => {
            tracing::warn!(error = %e, "rolling up analytics");
            i64::MIN
        }
    }
}

/// One pass: the analytics' closed hours rolled up, then every kind pruned to its window as of `now` (Unix ms). Returns the rows
/// deleted per kind; a failure is logged and the next pass tries again.
pub async fn prune_all(
    db: &Db,
    r: &Retention,
    now: i64,
    walk: &mut SessionWalk,
) -> Vec<(&'static str, u64)> {
    let cutoff = |window: Duration| now - window.as_millis() as i64;
    let mut pruned = Vec::new();
    let mut tally = |what: &'static str, result: botbox_store::DbResult<u64>| match result {
        Ok(n) => pruned.push((what, n)),
        Err(e) => tracing::warn!(what, error = %e, "pruning"),
    };
    let rolled = roll_up(db, now).await;
    for what in Expired::ALL {
        let before = match what {
            Expired::BotErrors => cutoff(r.window(what)).min(rolled),
            _ => cutoff(r.window(what)),
        };
        tally(what.name(), db.prune(what, before).await);
    }
    tally(
        "transcripts",
        db.prune_transcripts(r.transcripts.map(cutoff), now, rolled)
            .await,
    );
    if let Some(w) = r.audit_log {
        tally("audit_log", db.prune(Expired::AuditLog, cutoff(w)).await);
    }
    if let Some(idle) = r.idle_sessions {
        let mut n = 0;
        let mut result = Ok(());
        for _ in 0..SESSION_PAGES_PER_PASS {
            match db.prune_idle_sessions(cutoff(idle), &walk.0).await {
                Ok((deleted, next)) => {
                    n += deleted;
                    let end = next.is_none();
                    walk.0 = next.unwrap_or_default();
                    if end {
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        tally("idle_sessions", result.map(|()| n));
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
    let mut walk = SessionWalk::default();
    while !live.drain.draining() {
        let pruned = prune_all(&live.db, &r, now_ms(), &mut walk).await;
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
