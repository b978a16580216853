//! Storage: sqlx over SQLite (the embedded default) or PostgreSQL (several replicas).
//!
//! May depend on: sqlx, rusqlite and tokio. Must never check permissions, speak HTTP or
//! choose a thread lane: a step's lane comes from the caller as data ([`StepWrite::background`]).
//!
//! One set of portable SQL runs on both through sqlx's `Any` driver: `$n` placeholders, TEXT,
//! BIGINT, no backend-specific types. Times are Unix milliseconds; JSON is stored as text.
//! On SQLite the group commits' statements (the same SQL) run on a writer connection of their
//! own, on the committer task's thread (`writer.rs`, rusqlite on the same libsqlite3). On PostgreSQL the
//! message path's group commit and provider-id checks are PostgreSQL's own SQL (arrays),
//! on typed connections of their own (`pg_group.rs`), each with the portable form's
//! guarantees. Functions here know nothing about HTTP or permissions: the API layer decides
//! who may call them, with which owner.

mod accounts;
mod agent;
mod analytics;
mod audit;
mod backup;
mod canaries;
mod cases;
mod cms;
mod conversations;
mod due;
mod inbox;
mod nlu;
mod pg_group;
pub mod pg_hosts;
mod projects;
mod replays;
mod retention;
mod rollups;
mod rows;
mod step;
mod writer;

pub use accounts::*;
pub use agent::*;
pub use analytics::*;
pub use audit::{AuditFilter, AuditLog, AuditRow, AuditScope, NewAuditEntry};
pub use backup::backup_sqlite;
pub use canaries::{Canaries, CanaryRow, VersionCounts};
pub use cases::*;
pub use cms::*;
pub use inbox::{Inbox, InboxDecision, InboxGroup, LABEL_TEXTS_MAX};
pub use nlu::*;
pub use projects::*;
pub use replays::{
    ConversationStart, NewReplay, REPLAYS_KEPT, ReplayEnd, ReplayLine, ReplayRow, Replays,
};
pub use retention::*;
pub use rollups::*;
pub use rows::*;
pub use step::*;

use conversations::CommitQueue;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Migrations embedded at build time from `migrations/`. A database that a later release
/// migrated further is served as it is (its migrations unknown here are let be): migrations
/// only add (tables, nullable or defaulted columns, indexes; the tidy tests refuse the
/// rest), so this release's reads and writes still hold, and replicas of two releases run
/// together during a rolling upgrade.
pub static MIGRATOR: std::sync::LazyLock<sqlx::migrate::Migrator> =
    std::sync::LazyLock::new(|| {
        let mut m = sqlx::migrate!("../../migrations");
        m.set_ignore_missing(true);
        m
    });

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A uniqueness rule was broken (a name, a version already taken).
    #[error("already exists")]
    Conflict,
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    /// From the SQLite writer's connection or a provider-id check's (`writer`).
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

impl DbError {
    /// A committer went away before answering, or a transaction panicked.
    fn worker_gone() -> DbError {
        DbError::Sqlx(sqlx::Error::WorkerCrashed)
    }

    fn from_sqlx(e: sqlx::Error) -> DbError {
        match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => DbError::Conflict,
            _ => DbError::Sqlx(e),
        }
    }
}

pub type DbResult<T> = Result<T, DbError>;

/// Which database is behind the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The connection pool and the backend it talks to.
#[derive(Clone, Debug)]
pub struct Db {
    pub pool: AnyPool,
    pub backend: Backend,
    /// SQLite has one writer at a time: the conversation path's writes take turns here, in
    /// arrival order, instead of meeting SQLite's busy handler, which sleeps (1 ms, 2 ms,
    /// 5 ms, ...) and would make the tail latency under load. `None` on PostgreSQL (row locks).
    writes: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// Steps waiting for a group commit (see [`Db::commit_step`]).
    commits: std::sync::Arc<CommitQueue>,
    /// Restarts of the SQLite log by the [`checkpointer`] so far (read by its test).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) log_restarts: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Per table, the key its next due poll starts after (`due.rs`).
    due_cursors: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<&'static str, String>>>,
    /// With several PostgreSQL hosts: the one that accepts writes, followed across
    /// promotions ([`pg_hosts`]).
    pub primary: Option<std::sync::Arc<pg_hosts::Primary>>,
}

/// How long a start waits for one of several PostgreSQL hosts to accept writes.
const PRIMARY_FIRST_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How often the SQLite write-ahead log is checkpointed into the database file (250 ms).
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// WAL pages past which a commit checkpoints by itself (8,192 pages, 32 MiB), in case the
/// [`checkpointer`] falls behind. SQLite's default is 1,000 pages.
const WAL_BACKSTOP_PAGES: u32 = 8192;

/// Log pages after a round's PASSIVE checkpoints from which the next round comes after
/// [`CHECKPOINT_BUSY_EVERY`] instead of [`CHECKPOINT_EVERY`], while the log is being written
/// (512 pages, 2 MiB; [`round_pause`]).
const WAL_BUSY_PAGES: i64 = 512;

/// The checkpointer's pause while the log fills fast (50 ms). A tenant's flood through the
/// writer commits about 30,000 log pages a second (small groups, each rewriting the
/// last pages of the same indexes); at one round per 250 ms the log would reach the commits'
/// [`WAL_BACKSTOP_PAGES`] between two restarts, and a commit would then copy and sync 32 MiB
/// inside the write turn (25 ms: noisy-bench's flood p99 goes from 5 to 21–25 ms). Cost: a
/// PASSIVE round every 50 ms while writes are heavy (it holds no turn), and more restarts,
/// each holding the turn for the few pages left and a sync.
const CHECKPOINT_BUSY_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// Log pages past which the [`checkpointer`] restarts the log (2,048 pages, 8 MiB).
const WAL_RESTART_PAGES: i64 = 2048;

/// Pages committed during the last PASSIVE round below which the restart goes ahead (64):
/// the restart copies and syncs those inside the write turn.
const WAL_RESTART_REST_PAGES: i64 = 64;

/// When readers still read the old log, the restart does not wait for them (SQLite's busy
/// handler sleeps 1, 2, 5 ms… while the write turn is held): it lets go of the turn and the
/// checkpointer tries again after this pause (10 ms).
const WAL_RESTART_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Checkpoints the SQLite write-ahead log every [`CHECKPOINT_EVERY`] on a connection of its
/// own, outside the write turn, until the `Db` is dropped (`alive` is its write turn).
///
/// Why: with SQLite's automatic checkpoints, the commit that crossed 1,000 WAL pages copied
/// them into the database file and synced it (20–35 ms) while it held the write turn; every
/// step queued behind it waited (noisy-bench: B's p99 alone 7.5 ms, about 4 ms with this). A
/// PASSIVE checkpoint neither waits for nor blocks readers and writers: commits go on
/// appending to the log while it copies.
///
/// A PASSIVE checkpoint alone does not keep the log short under load: the log starts over
/// from its beginning only when a write begins while every page is copied and no reader
/// still reads from it, and with reads and writes arriving every millisecond (another
/// tenant's flood) that moment never comes. The log would then grow to the commits' backstop
/// and every 8,192 pages one commit would copy and sync 32 MiB inside the write turn
/// (25–30 ms; noisy-bench: B's p99 under a flood 24–29 ms against 3 ms alone). So once the log is past
/// [`WAL_RESTART_PAGES`], the checkpointer also takes the write turn, right after its
/// PASSIVE round has copied nearly everything, and runs a RESTART checkpoint: it copies the
/// few pages committed since (PASSIVE rounds are repeated first until those are at most
/// [`WAL_RESTART_REST_PAGES`]) and makes the next commit write from the log's beginning;
/// the turn is held for that short copy and its sync only (1–10 ms, once per round while
/// the log is long, against 25–30 ms per backstop without it). Noisy-bench, paced B: B's
/// p99 under the flood 10–12 ms with these restarts, 24–29 ms without. While the log fills fast, rounds
/// come every [`CHECKPOINT_BUSY_EVERY`] instead ([`round_pause`]).
async fn checkpointer(
    url: String,
    alive: std::sync::Weak<tokio::sync::Mutex<()>>,
    restarts: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use sqlx::Connection;
    let mut conn: Option<sqlx::AnyConnection> = None;
    let mut pause = CHECKPOINT_EVERY;
    // The log's length at the last restart: while it is the same, nothing was committed
    // since, and the restart has nothing to do.
    let mut restarted_at = None;
    // The log's length after the round before ([`round_pause`]).
    let mut last_log = 0;
    loop {
        tokio::time::sleep(pause).await;
        pause = CHECKPOINT_EVERY;
        if alive.strong_count() == 0 {
            return;
        }
        if conn.is_none() {
            conn = match sqlx::AnyConnection::connect(&url).await {
                Ok(mut c) => c.execute("PRAGMA busy_timeout = 0").await.ok().map(|_| c),
                Err(_) => None,
            };
        }
        let Some(c) = conn.as_mut() else { continue };
        let log = match passive_rounds(c).await {
            Ok(log) => log,
            Err(e) => {
                tracing::warn!(error = %e, "SQLite checkpoint");
                conn = None;
                continue;
            }
        };
        pause = round_pause(last_log, log);
        last_log = log;
        if log < WAL_RESTART_PAGES || restarted_at == Some(log) {
            continue;
        }
        let Some(turn) = alive.upgrade() else { return };
        let _turn = turn.lock().await;
        match wal_checkpoint(c, "RESTART").await {
            // Readers still on the old log: let go of the turn and try again soon.
            Ok((busy, _, _)) if busy != 0 => pause = WAL_RESTART_RETRY,
            Ok(_) => {
                restarted_at = Some(log);
                restarts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!(error = %e, "SQLite log restart");
                conn = None;
            }
        }
    }
}

/// The pause before the checkpointer's next round, given the log's length after the round
/// before and after this one's PASSIVE checkpoints: [`CHECKPOINT_BUSY_EVERY`] while the log
/// is long ([`WAL_BUSY_PAGES`] or more) and still being written (its length changed since
/// the round before), so that it is restarted long before the commits' backstop; else
/// [`CHECKPOINT_EVERY`], also while a long log stands still. (A restart that finds readers
/// on the old log retries sooner still, after [`WAL_RESTART_RETRY`].) The length, not its
/// growth since the round before, decides: after such a retry 10 ms of growth says nothing
/// of the rate, and a rule on growth left the log to reach the backstop again.
fn round_pause(before: i64, log: i64) -> std::time::Duration {
    if log >= WAL_BUSY_PAGES && log != before {
        CHECKPOINT_BUSY_EVERY
    } else {
        CHECKPOINT_EVERY
    }
}

/// `PRAGMA wal_checkpoint(<mode>)`: (busy, pages in the log, pages copied).
async fn wal_checkpoint(c: &mut sqlx::AnyConnection, mode: &str) -> sqlx::Result<(i64, i64, i64)> {
    use sqlx::Row;
    let row = sqlx::query(&format!("PRAGMA wal_checkpoint({mode})"))
        .fetch_one(c)
        .await?;
    let col = |i| row.try_get::<i64, _>(i).unwrap_or(0);
    Ok((col(0), col(1), col(2)))
}

/// PASSIVE checkpoints of the [`checkpointer`]'s round: the first copies what was committed
/// since the round before; while the log is long, each next one (up to four in all) copies what
/// was committed while the one before ran, until that is at most
/// [`WAL_RESTART_REST_PAGES`]. Returns the pages in the log.
async fn passive_rounds(c: &mut sqlx::AnyConnection) -> sqlx::Result<i64> {
    let mut copied_before = None;
    let mut log = 0;
    for _ in 0..4 {
        let (_, now, copied) = wal_checkpoint(c, "PASSIVE").await?;
        let fresh = copied_before.map_or(now, |b| now - b);
        (log, copied_before) = (now, Some(copied));
        if log < WAL_RESTART_PAGES || fresh <= WAL_RESTART_REST_PAGES {
            break;
        }
    }
    Ok(log)
}

/// The settings of every SQLite connection that writes: the pool's and the writer's
/// (`writer.rs`). Foreign keys on, as sqlx's default; in WAL mode `synchronous = NORMAL` keeps
/// the database consistent through crashes of the process (only a power loss can drop the
/// last commits); checkpoints run in a task of their own ([`checkpointer`]), a commit runs
/// one only past [`WAL_BACKSTOP_PAGES`].
fn sqlite_pragmas() -> [String; 3] {
    [
        "PRAGMA foreign_keys = ON".into(),
        "PRAGMA synchronous = NORMAL".into(),
        format!("PRAGMA wal_autocheckpoint = {WAL_BACKSTOP_PAGES}"),
    ]
}

/// The database URL for a data folder: `<data>/botbox.db`, created when missing.
pub fn sqlite_url(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("botbox.db").display())
}

impl Db {
    /// Connects and runs the migrations. `url` is `sqlite://…` or `postgres://…`.
    pub async fn connect(url: &str) -> anyhow::Result<Db> {
        install_default_drivers();
        let sqlite_url = url.starts_with("sqlite:");
        let keywords = url.trim_start().starts_with("host=");
        let backend = if url.starts_with("postgres://")
            || url.starts_with("postgresql://")
            || keywords
        {
            Backend::Postgres
        } else if sqlite_url {
            Backend::Sqlite
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite:// or postgres:// (got {url:?})");
        };
        // Several PostgreSQL hosts: every connection goes through the forwarder to the one
        // that accepts writes.
        let (url, primary) = match backend {
            Backend::Sqlite => (url.to_owned(), None),
            Backend::Postgres => {
                match pg_hosts::parse(url).map_err(|e| anyhow::anyhow!("--database-url: {e}"))? {
                    pg_hosts::Target::One(url) => (url, None),
                    pg_hosts::Target::Several(list) => {
                        let (p, url) = pg_hosts::Primary::start(list, PRIMARY_FIRST_WAIT).await?;
                        (url, Some(p))
                    }
                }
            }
        };
        let url = url.as_str();
        let max = match backend {
            Backend::Sqlite => 4,
            Backend::Postgres => 16,
        };
        let sqlite = backend == Backend::Sqlite;
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            // sqlx pings a connection before each use by default: on SQLite a round trip
            // to the connection's worker thread for a file that cannot hang up.
            .test_before_acquire(!sqlite)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sqlite {
                        for pragma in sqlite_pragmas() {
                            conn.execute(pragma.as_str()).await?;
                        }
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await
            .map_err(|e| anyhow::anyhow!("connecting to the database: {e}"))?;
        if backend == Backend::Sqlite {
            // Freed pages can go back to the file system (`Db::give_back_space`). Takes
            // effect only on a new, empty database (before the first table); an older file
            // keeps reusing its freed pages.
            pool.execute("PRAGMA auto_vacuum = INCREMENTAL").await?;
            // Readers do not block the writer; persistent for the file.
            pool.execute("PRAGMA journal_mode=WAL").await?;
        }
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("running migrations: {e}"))?;
        let sqlite = backend == Backend::Sqlite;
        let writes: Option<std::sync::Arc<tokio::sync::Mutex<()>>> = sqlite.then(Default::default);
        let log_restarts = std::sync::Arc::<std::sync::atomic::AtomicU64>::default();
        if let Some(w) = &writes {
            tokio::spawn(checkpointer(
                url.to_owned(),
                std::sync::Arc::downgrade(w),
                log_restarts.clone(),
            ));
        }
        let runner = match backend {
            Backend::Sqlite => conversations::Runner::Sqlite(Box::new(writer::Writer::start(url)?)),
            Backend::Postgres => {
                conversations::Runner::Postgres(Box::new(pg_group::Postgres::new(url)?))
            }
        };
        let commits = std::sync::Arc::new(CommitQueue::new(runner));
        Ok(Db {
            pool,
            backend,
            writes,
            commits,
            log_restarts,
            due_cursors: Default::default(),
            primary,
        })
    }
}

/// Figures for the operator's metrics (`GET /metrics`), read at each scrape.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Backlog {
    /// Outbox rows not yet delivered (pending or waiting for a retry).
    pub outbox_pending: i64,
    /// When the oldest of them was stored (ms since the epoch), if any.
    pub outbox_oldest_ms: Option<i64>,
    /// Agent runs by status.
    pub runs: Vec<(String, i64)>,
    /// Case tasks by status.
    pub tasks: Vec<(String, i64)>,
}

impl Db {
    /// The [`Backlog`]: three grouped counts (each on an index's leading column).
    pub async fn backlog(&self) -> DbResult<Backlog> {
        let (pending, oldest): (i64, Option<i64>) =
            sqlx::query_as("SELECT COUNT(*), MIN(created_at) FROM outbox WHERE status = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        let runs = sqlx::query_as("SELECT status, COUNT(*) FROM agent_runs GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        let tasks = sqlx::query_as("SELECT status, COUNT(*) FROM tasks GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        Ok(Backlog {
            outbox_pending: pending,
            outbox_oldest_ms: oldest,
            runs,
            tasks,
        })
    }

    /// One trivial query: whether the database answers (`GET /ready`).
    pub async fn ping(&self) -> DbResult<()> {
        if self.primary.as_ref().is_some_and(|p| p.host().is_none()) {
            // Between a primary's loss and a promotion: nothing would be written.
            return Err(DbError::Sqlx(sqlx::Error::PoolTimedOut));
        }
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Records what is still queued (deliveries recorded in batches), then closes the
    /// connection pool, waiting for the connections in use to be given back. For the end of
    /// a drain: every step has committed by then.
    pub async fn close(&self) {
        if let Err(e) = self.flush_sent().await {
            tracing::error!(error = %e, "recording deliveries at shutdown: they will be sent again");
        }
        self.commits.close().await;
        self.pool.close().await;
    }

    /// This process's turn to write (SQLite; nothing to wait for on PostgreSQL).
    pub(crate) async fn write_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        match &self.writes {
            Some(m) => Some(m.lock().await),
            None => None,
        }
    }
}

/// `$first, $first+1, …`: `n` numbered parameters, for an `IN (…)` list.
pub(crate) fn numbered_params(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A random identifier: 32 lowercase hex characters (128 bits).
pub fn new_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// A time-ordered identifier for rows appended at a high rate (transcripts, outbox, bot
/// errors): 32 lowercase hex characters like [`new_id`], but a UUIDv7 (48 bits of Unix
/// milliseconds, then 74 random bits; increasing within the process).
///
/// Why: such a table's primary key is a B-tree index. A random key lands each new row's
/// entry on a page of its own, so a commit of a few steps writes one index page per row
/// (SQLite's log under another tenant's flood grew by 23,000 pages a second, and every
/// commit and checkpoint waited on that); a time-ordered key appends to the index's last
/// page. Not for secrets or truncated ids: its first 12 characters are the clock. The random
/// bits come from a thread-local generator seeded by the OS (uuid's `fast-rng`): no system
/// call per id, where the OS's generator cost the commit path about five a message.
pub fn new_row_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
}

impl Db {
    /// One page of rows and the count of all of them: `SELECT {cols} FROM {table} WHERE
    /// {filter} ORDER BY {order}`, `limit` rows from `offset`, with `keys` bound to `$1…` in
    /// `filter` (empty: every row). Every list route pages this way.
    pub(crate) async fn page<T>(
        &self,
        cols: &str,
        table: &str,
        (filter, keys): (&str, &[&str]),
        order: &str,
        paging: (i64, i64),
    ) -> DbResult<Page<T>>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
    {
        let keys: Vec<step::Arg> = keys.iter().map(|k| step::Arg::from(*k)).collect();
        self.page_with(cols, table, (filter, &keys), order, paging)
            .await
    }

    /// [`Db::page`] with arguments of any kind (text or integers, as the filter needs).
    pub(crate) async fn page_with<T>(
        &self,
        cols: &str,
        table: &str,
        (filter, args): (&str, &[step::Arg<'_>]),
        order: &str,
        (limit, offset): (i64, i64),
    ) -> DbResult<Page<T>>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
    {
        let filter = if filter.is_empty() {
            String::new()
        } else {
            format!("WHERE {filter}")
        };
        let n = args.len();
        let rows_sql = format!(
            "SELECT {cols} FROM {table} {filter} ORDER BY {order} LIMIT ${} OFFSET ${}",
            n + 1,
            n + 2
        );
        let count_sql = format!("SELECT COUNT(*) FROM {table} {filter}");
        let mut rows = sqlx::query_as::<_, T>(&rows_sql);
        let mut count = sqlx::query_as::<_, (i64,)>(&count_sql);
        for a in args {
            (rows, count) = match a {
                step::Arg::Text(v) => (rows.bind(v.as_deref()), count.bind(v.as_deref())),
                step::Arg::Int(v) => (rows.bind(*v), count.bind(*v)),
            };
        }
        let items = rows.bind(limit).bind(offset).fetch_all(&self.pool).await?;
        let (total,) = count.fetch_one(&self.pool).await?;
        Ok(Page { items, total })
    }
}

/// A fresh SQLite database in a temporary folder (dropped with the folder), for unit tests.
#[cfg(test)]
pub(crate) async fn test_sqlite() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&sqlite_url(dir.path())).await.unwrap();
    (dir, db)
}

/// The steps and checks shared by the group-commit tests of both backends.
#[cfg(test)]
pub(crate) mod test_steps {
    use crate::{Committed, Db, StepWrite};

    /// A step of `user` with one transcript line and one reply.
    pub(crate) fn step(user: &str) -> StepWrite {
        StepWrite {
            session_id: format!("s-{user}"),
            environment_id: "e".into(),
            channel_id: "c".into(),
            user_id: user.into(),
            body: "{}".into(),
            transcripts: vec![crate::NewTranscript {
                project_id: "p".into(),
                environment_id: "e".into(),
                environment_name: "dev".into(),
                channel_id: "c".into(),
                user_id: user.into(),
                direction: "in",
                message: "hi".into(),
                flow: None,
                intent: None,
                state: None,
                step_us: Some(10),
                dep_version: Some("1.0.0".into()),
                outcome: Some("ok"),
                replay: Some(r#"{"t":1,"s":"2"}"#.into()),
                miss: None,
                starts: true,
            }],
            outbox: vec![("https://example.com/".into(), "[]".into(), "{}".into())],
            ..StepWrite::default()
        }
    }

    /// Queues the steps of `u1`, `bad` and `u3` (while the caller holds the committer back),
    /// lets the committer go with `release` once all three wait, and gives their outcomes.
    pub(crate) async fn commit_three(db: &Db, release: impl FnOnce()) -> Vec<Committed> {
        let steps: Vec<_> = ["u1", "bad", "u3"]
            .into_iter()
            .map(|u| {
                let (db, w) = (db.clone(), step(u));
                tokio::spawn(async move { db.commit_step(w).await })
            })
            .collect();
        while db.queued_steps() < 3 {
            tokio::task::yield_now().await;
        }
        release();
        let mut outcomes = Vec::new();
        for s in steps {
            outcomes.push(s.await.unwrap());
        }
        outcomes
    }

    /// After a group of the steps of `u1`, `bad` (refused by the test's trigger) and `u3`,
    /// behind a first step `early` whose reply `sent` was recorded with the group: the bad
    /// step failed alone, the others and the delivery record were stored.
    pub(crate) async fn failing_step_failed_alone(db: &Db, sent: &str, outcomes: &[Committed]) {
        assert_eq!(outcomes[0].as_ref().unwrap().as_ref().unwrap().len(), 1);
        let err = outcomes[1].as_ref().unwrap_err().to_string();
        assert!(err.contains("refused by the test"), "{err}");
        assert_eq!(outcomes[2].as_ref().unwrap().as_ref().unwrap().len(), 1);
        let sessions: Vec<(String,)> =
            sqlx::query_as("SELECT user_id FROM sessions ORDER BY user_id")
                .fetch_all(&db.pool)
                .await
                .unwrap();
        assert_eq!(
            sessions,
            [("early".into(),), ("u1".into(),), ("u3".into(),)]
        );
        let rows = db.outbox_rows("c").await.unwrap();
        assert_eq!(rows.len(), 3, "no outbox row of the failed step");
        let recorded: Vec<&str> = rows
            .iter()
            .filter(|r| r.status == "sent")
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(recorded, [sent]);
    }
}

/// A fresh PostgreSQL database of its own on 127.0.0.1:5432 (user `postgres`), for unit
/// tests; `None`, with a notice, when nothing answers there, unless
/// `BOTBOX_REQUIRE_POSTGRES=1` (then it fails). The database is left behind (a few, named
/// `botbox_unit_…`, per run).
#[cfg(test)]
pub(crate) async fn test_postgres() -> Option<Db> {
    let admin = "postgres://postgres@127.0.0.1:5432/postgres";
    sqlx::any::install_default_drivers();
    let conn = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        sqlx::AnyPool::connect(admin),
    )
    .await;
    let pool = match conn {
        Ok(Ok(p)) => p,
        _ if std::env::var_os("BOTBOX_REQUIRE_POSTGRES").is_some_and(|v| v != "0") => {
            panic!("PostgreSQL at 127.0.0.1:5432 does not answer")
        }
        _ => {
            eprintln!("notice: PostgreSQL at 127.0.0.1:5432 does not answer: test skipped");
            return None;
        }
    };
    let name = format!("botbox_unit_{}", new_id());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    Some(
        Db::connect(&format!("postgres://postgres@127.0.0.1:5432/{name}"))
            .await
            .unwrap(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_ids_are_hex_and_increase_in_creation_order() {
        let ids: Vec<String> = (0..2_000).map(|_| new_row_id()).collect();
        for id in &ids {
            assert_eq!(id.len(), 32, "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                "{id}"
            );
        }
        // Each one sorts after the one before, within one millisecond too: new rows append to
        // the end of the primary-key index.
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "not increasing");
    }

    /// While the log fills fast the checkpointer comes back after 50 ms, not 250: at a
    /// flood's 30,000 pages a second, 250 ms let the log reach the commits' 8,192-page
    /// backstop between two restarts.
    #[test]
    fn the_checkpointer_comes_back_sooner_while_the_log_fills_fast() {
        assert_eq!(round_pause(0, 0), CHECKPOINT_EVERY);
        assert_eq!(round_pause(0, WAL_BUSY_PAGES - 1), CHECKPOINT_EVERY);
        assert_eq!(round_pause(0, WAL_BUSY_PAGES), CHECKPOINT_BUSY_EVERY);
        assert_eq!(round_pause(100, WAL_RESTART_PAGES), CHECKPOINT_BUSY_EVERY);
        // Started over since (a restart) and already long: still heavy.
        assert_eq!(round_pause(3_000, 600), CHECKPOINT_BUSY_EVERY);
        assert_eq!(round_pause(3_000, 100), CHECKPOINT_EVERY);
        // Written a little since a short pause (a restart's retry after 10 ms): still heavy.
        assert_eq!(round_pause(3_000, 3_100), CHECKPOINT_BUSY_EVERY);
        // A long log that stands still (writes stopped): back to the slow pace.
        assert_eq!(round_pause(3_000, 3_000), CHECKPOINT_EVERY);
        // Often enough that a flood's writes between two rounds stay far below the backstop.
        let pages_per_second = 30_000.0;
        assert!(
            pages_per_second * CHECKPOINT_BUSY_EVERY.as_secs_f64()
                < (WAL_BACKSTOP_PAGES as f64) / 4.0
        );
    }

    /// Creates the `filler` table the checkpointer tests write to.
    async fn filler_table(db: &Db) {
        db.pool
            .execute("CREATE TABLE filler (x TEXT NOT NULL)")
            .await
            .unwrap();
    }

    /// Commits `rows` rows of `bytes` bytes each in one transaction, in the write turn.
    async fn fill(db: &Db, rows: usize, bytes: usize) {
        let row = "x".repeat(bytes);
        let _turn = db.write_turn().await;
        let mut tx = db.pool.begin().await.unwrap();
        for _ in 0..rows {
            sqlx::query("INSERT INTO filler (x) VALUES ($1)")
                .bind(&row)
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
    }

    /// Polls `done` over the checkpointer's next rounds (every 250 ms), for at most 200
    /// polls of a fifth of a round; whether it became true.
    async fn within_rounds(mut done: impl AsyncFnMut() -> bool) -> bool {
        for _ in 0..200 {
            if done().await {
                return true;
            }
            tokio::time::sleep(CHECKPOINT_EVERY / 5).await;
        }
        done().await
    }

    /// Pages written to SQLite's log reach the database file without any commit running a
    /// checkpoint: 2 MB is far below the commits' own backstop (32 MiB), so only the
    /// [`checkpointer`] can have copied them. (Without it the file stays at 4 KiB.)
    #[tokio::test]
    async fn the_checkpointer_copies_the_log_into_the_database_file() {
        let (dir, db) = test_sqlite().await;
        let file = dir.path().join("botbox.db");
        filler_table(&db).await;
        let len = || std::fs::metadata(&file).unwrap().len();
        let before = len();
        for _ in 0..40 {
            fill(&db, 50, 1000).await;
        }
        let grown = within_rounds(async || len() >= before + 1_500_000).await;
        assert!(
            grown,
            "the database file stayed at {} bytes (was {before}): the log was not checkpointed",
            len()
        );
    }

    /// A long log is restarted by the checkpointer itself, not left for a commit to find
    /// idle: after 12 MB of commits (past [`WAL_RESTART_PAGES`]) the [`checkpointer`] runs a
    /// RESTART checkpoint, so a later commit writes from the log's beginning. (A PASSIVE
    /// checkpoint alone copies the pages but leaves the log to the next commit, which under
    /// constant reads and writes never finds it idle: the log grew to the 32 MiB backstop,
    /// whose commit then held the write turn for 25–30 ms.)
    ///
    /// The checkpointer runs beside the test: while it checkpoints, the test's own PASSIVE
    /// checkpoint is busy and reads no log length (-1), so that read is retried; and it may
    /// restart the log before the commits end, so the length is read before the count of
    /// restarts (a restart before the read shows in the count read after it).
    #[tokio::test]
    async fn the_checkpointer_restarts_a_long_log() {
        use std::sync::atomic::Ordering;
        let (_dir, db) = test_sqlite().await;
        filler_table(&db).await;
        for _ in 0..30 {
            fill(&db, 100, 4000).await;
        }
        // Pages in the log, once a PASSIVE checkpoint of the test's own could read them.
        let log = || async {
            let mut c = db.pool.acquire().await.unwrap();
            let mut pages = -1;
            within_rounds(async || {
                pages = wal_checkpoint(&mut c, "PASSIVE").await.unwrap().1;
                pages >= 0
            })
            .await;
            pages
        };
        let restarts = || db.log_restarts.load(Ordering::Relaxed);
        let written = log().await;
        let early = restarts();
        assert!(
            written >= WAL_RESTART_PAGES || early > 0,
            "the commits logged {written} pages and the log was not restarted"
        );
        let restarted = within_rounds(async || restarts() > 0).await;
        assert!(restarted, "the log ({written} pages) was not restarted");
        // A commit after the restart writes from the log's beginning: its pages are all the
        // log holds. (Had the commits above outlasted a restart and made the log long again,
        // the checkpointer's next round restarts it: hence the rounds.)
        let mut after = -1;
        let short = within_rounds(async || {
            fill(&db, 1, 4000).await;
            after = log().await;
            after < 10
        })
        .await;
        assert!(short, "after one more commit the log holds {after} pages");
    }
}
