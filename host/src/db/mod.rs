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
        Ok(Db {
            pool,
            backend,
            writes: sqlite.then(Default::default),
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
