//! Storage: sqlx over SQLite (the embedded default) or PostgreSQL (several replicas).
//!
//! One set of portable SQL runs on both through sqlx's `Any` driver: `$n` placeholders, TEXT,
//! BIGINT, no backend-specific types. Times are Unix milliseconds; JSON is stored as text.
//! Functions here know nothing about HTTP or permissions: the API layer decides who may call
//! them, with which owner.

mod accounts;
mod agent;
mod cases;
mod conversations;
mod nlu;
mod projects;

pub use accounts::*;
pub use agent::*;
pub use cases::*;
pub use conversations::*;
pub use nlu::*;
pub use projects::*;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{AnyPool, Executor};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Migrations embedded at build time from `migrations/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A uniqueness rule was broken (a name, a version already taken).
    #[error("already exists")]
    Conflict,
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

impl DbError {
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
    /// 5 ms, ...) and made the tail latency under load. `None` on PostgreSQL (row locks).
    writes: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// Steps waiting for a group commit (SQLite only; see [`Db::commit_step`]).
    commits: Option<std::sync::Arc<CommitQueue>>,
}

/// How often the SQLite write-ahead log is checkpointed into the database file (250 ms).
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// WAL pages past which a commit checkpoints by itself (8,192 pages, 32 MiB), in case the
/// [`checkpointer`] falls behind. SQLite's default is 1,000 pages.
const WAL_BACKSTOP_PAGES: u32 = 8192;

/// Checkpoints the SQLite write-ahead log every [`CHECKPOINT_EVERY`] on a connection of its
/// own, outside the write turn, until the `Db` is dropped (`alive` is its write turn).
///
/// Why: with SQLite's automatic checkpoints, the commit that crossed 1,000 WAL pages copied
/// them into the database file and synced it (20–35 ms) while it held the write turn; every
/// step queued behind it waited (noisy-bench: B's p99 alone 7.5 ms, about 4 ms with this). A
/// PASSIVE checkpoint neither waits for nor blocks readers and writers: commits go on
/// appending to the log while it copies.
async fn checkpointer(url: String, alive: std::sync::Weak<tokio::sync::Mutex<()>>) {
    use sqlx::Connection;
    let mut conn: Option<sqlx::AnyConnection> = None;
    loop {
        tokio::time::sleep(CHECKPOINT_EVERY).await;
        if alive.strong_count() == 0 {
            return;
        }
        if conn.is_none() {
            conn = sqlx::AnyConnection::connect(&url).await.ok();
        }
        let Some(c) = conn.as_mut() else { continue };
        if let Err(e) = c.execute("PRAGMA wal_checkpoint(PASSIVE)").await {
            tracing::warn!(error = %e, "SQLite checkpoint");
            conn = None;
        }
    }
}

/// The database URL for a data folder: `<data>/botbox.db`, created when missing.
pub fn sqlite_url(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("botbox.db").display())
}

impl Db {
    /// Connects and runs the migrations. `url` is `sqlite://…` or `postgres://…`.
    pub async fn connect(url: &str) -> anyhow::Result<Db> {
        install_default_drivers();
        let backend = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            anyhow::bail!("DATABASE_URL must start with sqlite:// or postgres:// (got {url:?})");
        };
        let max = match backend {
            Backend::Sqlite => 4,
            Backend::Postgres => 16,
        };
        let sqlite = backend == Backend::Sqlite;
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if sqlite {
                        // In WAL mode NORMAL keeps the database consistent through crashes of
                        // the process; only a power loss can drop the last commits.
                        conn.execute("PRAGMA synchronous = NORMAL").await?;
                        // Checkpoints run in a task of their own ([`checkpointer`]); a commit
                        // runs one only past this backstop.
                        conn.execute(
                            format!("PRAGMA wal_autocheckpoint = {WAL_BACKSTOP_PAGES}").as_str(),
                        )
                        .await?;
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await
            .map_err(|e| anyhow::anyhow!("connecting to the database: {e}"))?;
        if backend == Backend::Sqlite {
            // Readers do not block the writer; persistent for the file.
            pool.execute("PRAGMA journal_mode=WAL").await?;
        }
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| anyhow::anyhow!("running migrations: {e}"))?;
        let sqlite = backend == Backend::Sqlite;
        let writes: Option<std::sync::Arc<tokio::sync::Mutex<()>>> = sqlite.then(Default::default);
        if let Some(w) = &writes {
            tokio::spawn(checkpointer(url.to_owned(), std::sync::Arc::downgrade(w)));
        }
        Ok(Db {
            pool,
            backend,
            writes,
            commits: sqlite.then(Default::default),
        })
    }
}

impl Db {
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

/// One page of a list.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
}

/// A fresh SQLite database in a temporary folder (dropped with the folder), for unit tests.
#[cfg(test)]
pub(crate) async fn test_sqlite() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&sqlite_url(dir.path())).await.unwrap();
    (dir, db)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages written to SQLite's log reach the database file without any commit running a
    /// checkpoint: 2 MB is far below the commits' own backstop (32 MiB), so only the
    /// [`checkpointer`] can have copied them. (Without it the file stays at 4 KiB.)
    #[tokio::test]
    async fn the_checkpointer_copies_the_log_into_the_database_file() {
        let (dir, db) = test_sqlite().await;
        let file = dir.path().join("botbox.db");
        db.pool
            .execute("CREATE TABLE filler (x TEXT NOT NULL)")
            .await
            .unwrap();
        let before = std::fs::metadata(&file).unwrap().len();
        let row = "x".repeat(1000);
        for _ in 0..40 {
            let mut tx = db.pool.begin().await.unwrap();
            for _ in 0..50 {
                sqlx::query("INSERT INTO filler (x) VALUES ($1)")
                    .bind(&row)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            tx.commit().await.unwrap();
        }
        // Waits for the checkpointer's next rounds (every 250 ms); bounded.
        let grown = |len: u64| len >= before + 1_500_000;
        let mut len = std::fs::metadata(&file).unwrap().len();
        for _ in 0..200 {
            if grown(len) {
                break;
            }
            tokio::time::sleep(CHECKPOINT_EVERY / 5).await;
            len = std::fs::metadata(&file).unwrap().len();
        }
        assert!(
            grown(len),
            "the database file stayed at {len} bytes (was {before}): the log was not checkpointed"
        );
    }
}
