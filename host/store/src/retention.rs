//! Retention: deleting what has outlived its window, a small batch at a time.
//!
//! Each batch is one `DELETE` of at most [`PRUNE_BATCH`] rows, oldest first, found by an
//! index: a batch is atomic, so a pruning interrupted half-way leaves whole rows, and on
//! SQLite each batch takes the write turn alone, so steps' group commits go between
//! batches instead of waiting for a whole pruning. On SQLite, databases created by this
//! version use `auto_vacuum = INCREMENTAL`, and [`Db::give_back_space`] returns freed pages
//! to the file system; older databases reuse their freed pages (the file stops growing,
//! without shrinking).

use super::{Backend, Db, DbResult};

/// Rows deleted per statement (500): a batch holds SQLite's write turn for a few ms.
pub const PRUNE_BATCH: i64 = 500;

/// What the pruner deletes, each older than its own cutoff. Transcripts (windows per
/// project: [`Db::prune_transcripts`]) and idle sessions ([`Db::prune_idle_sessions`]) have
/// their own walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// Outbox rows delivered (the transcript is the record; the outbox is a promise).
    SentOutbox,
    /// Outbox rows given up on (kept a while for inspection).
    FailedOutbox,
    /// Provider message ids seen (the dedupe window: a provider's retry after it runs again).
    InboundSeen,
    /// Artifacts of tasks that ended (`done` or `failed`), by the task's last change.
    TaskArtifacts,
    /// Bot errors.
    BotErrors,
    /// Agent runs that ended, with their chunk logs and steers.
    AgentRuns,
    /// `/v1` Idempotency-Key answers.
    Idempotency,
    /// Inbound hooks' delivered `webhook-id`s (their dedupe window).
    HookReceipts,
    /// Case webhook messages delivered or given up on, with their attempts.
    WebhookMessages,
    /// Audit entries (not in [`Expired::ALL`]: kept for ever when the window is 0).
    AuditLog,
}

impl Expired {
    pub const ALL: [Expired; 9] = [
        Expired::SentOutbox,
        Expired::FailedOutbox,
        Expired::InboundSeen,
        Expired::TaskArtifacts,
        Expired::BotErrors,
        Expired::AgentRuns,
        Expired::Idempotency,
        Expired::HookReceipts,
        Expired::WebhookMessages,
    ];

    /// The name in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Expired::SentOutbox => "sent_outbox",
            Expired::FailedOutbox => "failed_outbox",
            Expired::InboundSeen => "inbound_seen",
            Expired::TaskArtifacts => "task_artifacts",
            Expired::BotErrors => "bot_errors",
            Expired::AgentRuns => "agent_runs",
            Expired::Idempotency => "idempotency",
            Expired::HookReceipts => "hook_receipts",
            Expired::WebhookMessages => "webhook_messages",
            Expired::AuditLog => "audit_log",
        }
    }

    /// One batch, in one transaction: `$1` the cutoff (Unix ms), `$2` the batch size. Where
    /// there are several statements, the dependent rows go first, chosen by the same
    /// (deterministically ordered) selection, and the last statement's count is the batch's.
    fn sql(self) -> &'static [&'static str] {
        match self {
            // A delivered or failed row's `next_at` is when its last attempt ended.
            Expired::SentOutbox => &["DELETE FROM outbox WHERE id IN (SELECT id FROM outbox \
                 WHERE status = 'sent' AND next_at < $1 ORDER BY next_at LIMIT $2)"],
            Expired::FailedOutbox => &["DELETE FROM outbox WHERE id IN (SELECT id FROM outbox \
                 WHERE status = 'failed' AND next_at < $1 ORDER BY next_at LIMIT $2)"],
            Expired::InboundSeen => &[
                "DELETE FROM inbound_seen WHERE (channel_id, provider_id) IN \
                 (SELECT channel_id, provider_id FROM inbound_seen \
                 WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
            ],
            // Ended tasks are found by the status index; their artifacts by the task's.
            Expired::TaskArtifacts => &[
                "DELETE FROM task_artifacts WHERE id IN (SELECT a.id FROM task_artifacts a \
                 JOIN tasks t ON t.id = a.task_id \
                 WHERE t.status IN ('done', 'failed') AND t.updated_at < $1 LIMIT $2)",
            ],
            Expired::BotErrors => &[
                "DELETE FROM bot_errors WHERE id IN (SELECT id FROM bot_errors \
                 WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
            ],
            // Runs in flight have no `ended_at`.
            Expired::AgentRuns => &[
                "DELETE FROM agent_run_chunks WHERE run_id IN (SELECT id FROM agent_runs \
                 WHERE status NOT IN ('queued', 'in_progress') AND ended_at < $1 \
                 ORDER BY ended_at, id LIMIT $2)",
                "DELETE FROM agent_steers WHERE run_id IN (SELECT id FROM agent_runs \
                 WHERE status NOT IN ('queued', 'in_progress') AND ended_at < $1 \
                 ORDER BY ended_at, id LIMIT $2)",
                "DELETE FROM agent_runs WHERE id IN (SELECT id FROM agent_runs \
                 WHERE status NOT IN ('queued', 'in_progress') AND ended_at < $1 \
                 ORDER BY ended_at, id LIMIT $2)",
            ],
            Expired::Idempotency => &[
                "DELETE FROM v1_idempotency WHERE scope IN (SELECT scope FROM v1_idempotency \
                 WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
            ],
            Expired::HookReceipts => &[
                "DELETE FROM inbound_hook_receipts WHERE (hook_id, webhook_id) IN \
                 (SELECT hook_id, webhook_id FROM inbound_hook_receipts \
                 WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
            ],
            Expired::AuditLog => &[
                "DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log \
                 WHERE at < $1 ORDER BY at LIMIT $2)",
            ],
            // Pending messages (still being retried) stay whatever their age.
            Expired::WebhookMessages => &[
                "DELETE FROM webhook_attempts WHERE message_id IN (SELECT id FROM webhook_messages \
                 WHERE status <> 'pending' AND created_at < $1 ORDER BY created_at, id LIMIT $2)",
                "DELETE FROM webhook_messages WHERE id IN (SELECT id FROM webhook_messages \
                 WHERE status <> 'pending' AND created_at < $1 ORDER BY created_at, id LIMIT $2)",
            ],
        }
    }
}

/// Transcript lines deleted per statement, project by project ([`Db::prune_transcripts`]).
const TRANSCRIPT_SQL: &str = "DELETE FROM transcripts WHERE id IN (SELECT id FROM transcripts \
     WHERE project_id = $3 AND created_at < $1 ORDER BY created_at LIMIT $2)";

/// Sessions read per page of the idle-session walk ([`Db::prune_idle_sessions`]).
pub const SESSION_PAGE: i64 = 1000;

/// What a tenant stores of one kind ([`Db::storage_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// `transcripts`, `sessions`, `task_artifacts` or `nlu_models`.
    pub kind: &'static str,
    pub rows: i64,
    /// Bytes of the stored text (an artifact: its decoded size).
    pub bytes: i64,
}

impl Db {
    /// What the tenant `owner` (a user, or a team) stores, per kind: its projects'
    /// transcripts, sessions and NLU models, its tasks' artifacts. Each a grouped scan of the
    /// tenant's own rows (found by its projects or tasks), computed when asked.
    pub async fn storage_of(&self, owner: &str) -> DbResult<Vec<Stored>> {
        const KINDS: [(&str, &str); 5] = [
            (
                "transcripts",
                "SELECT COUNT(*), CAST(COALESCE(SUM(OCTET_LENGTH(message) + COALESCE(OCTET_LENGTH(replay), 0)), 0) AS BIGINT) \
                 FROM transcripts \
                 WHERE project_id IN (SELECT id FROM projects WHERE owner_id = $1)",
            ),
            (
                "sessions",
                "SELECT COUNT(*), CAST(COALESCE(SUM(OCTET_LENGTH(body)), 0) AS BIGINT) FROM sessions \
                 WHERE environment_id IN (SELECT e.id FROM environments e \
                 JOIN projects p ON p.id = e.project_id WHERE p.owner_id = $1)",
            ),
            (
                "task_artifacts",
                "SELECT COUNT(*), CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM task_artifacts \
                 WHERE task_id IN (SELECT id FROM tasks WHERE workspace_id = $1)",
            ),
            (
                "cms_revisions",
                "SELECT COUNT(*), CAST(COALESCE(SUM(OCTET_LENGTH(document)), 0) AS BIGINT) FROM cms_revisions \
                 WHERE project_id IN (SELECT id FROM projects WHERE owner_id = $1)",
            ),
            (
                "nlu_models",
                "SELECT COUNT(*), CAST(COALESCE(SUM(OCTET_LENGTH(model)), 0) AS BIGINT) FROM nlu_models \
                 WHERE project_id IN (SELECT id FROM projects WHERE owner_id = $1)",
            ),
        ];
        let mut out = Vec::with_capacity(KINDS.len());
        for (kind, sql) in KINDS {
            let (rows, bytes): (i64, i64) = sqlx::query_as(sql)
                .bind(owner)
                .fetch_one(&self.pool)
                .await?;
            out.push(Stored { kind, rows, bytes });
        }
        Ok(out)
    }

    /// The bytes `owner` stores ([`Db::storage_of`]'s total) when they reach `quota`;
    /// `None` while under it.
    pub async fn over_quota(&self, owner: &str, quota: i64) -> DbResult<Option<i64>> {
        let used: i64 = self.storage_of(owner).await?.iter().map(|k| k.bytes).sum();
        Ok((used >= quota).then_some(used))
    }

    /// The database's size in bytes: SQLite's pages in use and free (the file, without its
    /// WAL), PostgreSQL's `pg_database_size`.
    pub async fn size_bytes(&self) -> DbResult<i64> {
        let sql = match self.backend {
            Backend::Sqlite => {
                "SELECT p.page_count * s.page_size FROM pragma_page_count() p, pragma_page_size() s"
            }
            Backend::Postgres => "SELECT CAST(pg_database_size(current_database()) AS BIGINT)",
        };
        Ok(sqlx::query_scalar(sql).fetch_one(&self.pool).await?)
    }

    /// Deletes one batch (at most [`PRUNE_BATCH`] rows) of `what` older than `before`
    /// (Unix ms); returns how many rows went.
    pub async fn prune_batch(&self, what: Expired, before: i64) -> DbResult<u64> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let mut last = 0;
        for sql in what.sql() {
            last = sqlx::query(sql)
                .bind(before)
                .bind(PRUNE_BATCH)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await.map_err(super::DbError::from_sqlx)?;
        Ok(last)
    }

    /// Deletes every row of `what` older than `before`, batch after batch (yielding
    /// between them); returns how many rows went.
    pub async fn prune(&self, what: Expired, before: i64) -> DbResult<u64> {
        batches(|| self.prune_batch(what, before)).await
    }

    /// Transcript lines past their project's window: the project's own
    /// (`transcript_retention_days`, set by an administrator; 0 keeps for ever), else
    /// `default_before` (Unix ms; `None` keeps for ever). Each project's expired lines go
    /// oldest first, a batch at a time; a project with nothing expired costs one index
    /// probe (no write turn). Nothing at or after `rolled_until` goes (lines not yet counted
    /// by the analytics rollups). Returns the lines deleted.
    pub async fn prune_transcripts(
        &self,
        default_before: Option<i64>,
        now: i64,
        rolled_until: i64,
    ) -> DbResult<u64> {
        let projects: Vec<(String, Option<i64>)> =
            sqlx::query_as("SELECT id, transcript_retention_days FROM projects")
                .fetch_all(&self.pool)
                .await?;
        let mut total = 0;
        for (project, days) in projects {
            let before = match days {
                None => default_before,
                Some(0) => None,
                Some(d) => Some(now - d.saturating_mul(24 * 3600 * 1000)),
            };
            let Some(before) = before.map(|b| b.min(rolled_until)) else {
                continue;
            };
            let any: Option<i64> = sqlx::query_scalar(
                "SELECT 1 FROM transcripts WHERE project_id = $1 AND created_at < $2 LIMIT 1",
            )
            .bind(&project)
            .bind(before)
            .fetch_optional(&self.pool)
            .await?;
            if any.is_none() {
                continue;
            }
            total += batches(|| async {
                let _turn = self.write_turn().await;
                Ok(sqlx::query(TRANSCRIPT_SQL)
                    .bind(before)
                    .bind(PRUNE_BATCH)
                    .bind(&project)
                    .execute(&self.pool)
                    .await?
                    .rows_affected())
            })
            .await?;
        }
        Ok(total)
    }

    /// One page of the idle-session walk: reads up to [`SESSION_PAGE`] sessions after the
    /// id `after` (in id order, without the write turn) and deletes those not changed
    /// since `before` (Unix ms), re-checked in the delete so a session a step just saved
    /// stays. Returns the sessions deleted and the id to continue after (`None`: the walk
    /// reached the end). A walk by id needs no index on `updated_at`, which every step
    /// would have to update.
    pub async fn prune_idle_sessions(
        &self,
        before: i64,
        after: &str,
    ) -> DbResult<(u64, Option<String>)> {
        let page: Vec<(String, i64)> = sqlx::query_as(
            "SELECT id, updated_at FROM sessions WHERE id > $1 ORDER BY id LIMIT $2",
        )
        .bind(after)
        .bind(SESSION_PAGE)
        .fetch_all(&self.pool)
        .await?;
        let next = (page.len() as i64 == SESSION_PAGE).then(|| page[page.len() - 1].0.clone());
        let idle: Vec<&str> = page
            .iter()
            .filter(|(_, at)| *at < before)
            .map(|(id, _)| id.as_str())
            .collect();
        let mut deleted = 0;
        for chunk in idle.chunks(PRUNE_BATCH as usize) {
            let _turn = self.write_turn().await;
            let mut tx = self.pool.begin().await?;
            for id in chunk {
                deleted += sqlx::query("DELETE FROM sessions WHERE id = $1 AND updated_at < $2")
                    .bind(id)
                    .bind(before)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            tx.commit().await.map_err(super::DbError::from_sqlx)?;
        }
        Ok((deleted, next))
    }

    /// A project's own transcript window in days (`None`: the server's; 0: for ever).
    pub async fn transcript_retention_days(&self, project: &str) -> DbResult<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT transcript_retention_days FROM projects WHERE id = $1")
                .bind(project)
                .fetch_optional(&self.pool)
                .await?
                .flatten(),
        )
    }

    /// Sets a project's own transcript window (`None`: back to the server's).
    pub async fn set_transcript_retention_days(
        &self,
        project: &str,
        days: Option<i64>,
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query("UPDATE projects SET transcript_retention_days = $1 WHERE id = $2")
            .bind(days)
            .bind(project)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// SQLite: returns up to `pages` free pages to the file system (databases created
    /// with incremental auto-vacuum; a no-op elsewhere and on PostgreSQL, whose autovacuum
    /// reclaims space itself).
    pub async fn give_back_space(&self, pages: u32) -> DbResult<()> {
        if self.backend != Backend::Sqlite {
            return Ok(());
        }
        let _turn = self.write_turn().await;
        sqlx::query(&format!("PRAGMA incremental_vacuum({pages})"))
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// Runs `batch` until one deletes fewer than [`PRUNE_BATCH`] rows, yielding between
/// batches so other work gets the write turn; returns the rows deleted.
async fn batches<F, Fut>(mut batch: F) -> DbResult<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = DbResult<u64>>,
{
    let mut total = 0;
    loop {
        let n = batch().await?;
        total += n;
        if n < PRUNE_BATCH as u64 {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}
