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

/// What the pruner deletes, each older than its own cutoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// Outbox rows delivered (the transcript is the record; the outbox is a promise).
    SentOutbox,
    /// Outbox rows given up on (kept a while for inspection).
    FailedOutbox,
    /// Transcript lines.
    Transcripts,
    /// Provider message ids seen (the dedupe window: a provider's retry after it runs again).
    InboundSeen,
    /// Artifacts of tasks that ended (`done` or `failed`), by the task's last change.
    TaskArtifacts,
    /// Bot errors.
    BotErrors,
}

impl Expired {
    pub const ALL: [Expired; 6] = [
        Expired::SentOutbox,
        Expired::FailedOutbox,
        Expired::Transcripts,
        Expired::InboundSeen,
        Expired::TaskArtifacts,
        Expired::BotErrors,
    ];

    /// The name in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Expired::SentOutbox => "sent_outbox",
            Expired::FailedOutbox => "failed_outbox",
            Expired::Transcripts => "transcripts",
            Expired::InboundSeen => "inbound_seen",
            Expired::TaskArtifacts => "task_artifacts",
            Expired::BotErrors => "bot_errors",
        }
    }

    /// One batch: `$1` the cutoff (Unix ms), `$2` the batch size.
    fn sql(self) -> &'static str {
        match self {
            // A delivered or failed row's `next_at` is when its last attempt ended.
            Expired::SentOutbox => {
                "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox \
                 WHERE status = 'sent' AND next_at < $1 ORDER BY next_at LIMIT $2)"
            }
            Expired::FailedOutbox => {
                "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox \
                 WHERE status = 'failed' AND next_at < $1 ORDER BY next_at LIMIT $2)"
            }
            Expired::Transcripts => {
                "DELETE FROM transcripts WHERE id IN (SELECT id FROM transcripts \
                 WHERE created_at < $1 ORDER BY created_at LIMIT $2)"
            }
            Expired::InboundSeen => {
                "DELETE FROM inbound_seen WHERE (channel_id, provider_id) IN \
                 (SELECT channel_id, provider_id FROM inbound_seen \
                 WHERE created_at < $1 ORDER BY created_at LIMIT $2)"
            }
            // Ended tasks are found by the status index; their artifacts by the task's.
            Expired::TaskArtifacts => {
                "DELETE FROM task_artifacts WHERE id IN (SELECT a.id FROM task_artifacts a \
                 JOIN tasks t ON t.id = a.task_id \
                 WHERE t.status IN ('done', 'failed') AND t.updated_at < $1 LIMIT $2)"
            }
            Expired::BotErrors => {
                "DELETE FROM bot_errors WHERE id IN (SELECT id FROM bot_errors \
                 WHERE created_at < $1 ORDER BY created_at LIMIT $2)"
            }
        }
    }
}

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
        const KINDS: [(&str, &str); 4] = [
            (
                "transcripts",
                "SELECT COUNT(*), CAST(COALESCE(SUM(OCTET_LENGTH(message)), 0) AS BIGINT) FROM transcripts \
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
        let done = sqlx::query(what.sql())
            .bind(before)
            .bind(PRUNE_BATCH)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    /// Deletes every row of `what` older than `before`, batch after batch (yielding
    /// between them); returns how many rows went.
    pub async fn prune(&self, what: Expired, before: i64) -> DbResult<u64> {
        let mut total = 0;
        loop {
            let n = self.prune_batch(what, before).await?;
            total += n;
            if n < PRUNE_BATCH as u64 {
                return Ok(total);
            }
            tokio::task::yield_now().await;
        }
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
