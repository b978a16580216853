//! The SQLite writer: a connection of its own on which the group commits' transactions
//! ([`Db::commit_step`](super::Db::commit_step)) run, synchronously, on the thread of the
//! committer task that formed the group.
//!
//! Why synchronously on the committer's thread: through sqlx every statement is a round trip
//! between the caller's task and the connection's worker thread (two wake-ups), and a group
//! commit is a dozen statements; while another tenant floods the server, each wake-up waits
//! behind that tenant's HTTP work, and the group holds SQLite's single write turn all along.
//! A thread of the writer's own would cost two hand-offs per group (to it and back) and its
//! own wake-ups. Here the whole transaction runs inside one poll of the committer task, with
//! its prepared statements cached: no hand-off, and nothing can cancel it halfway.
//! Cost: the committer's runtime worker is busy for the group's transaction (tens of µs to
//! a few hundred, most of it writing the log's pages); the runtime's other workers steal its
//! queued tasks meanwhile. A commit that crosses [`super::WAL_BACKSTOP_PAGES`] copies the
//! log into the database file on that worker; the checkpointer keeps the log far below that.
//!
//! The statements are the same as on the pool ([`group_statements`], run through [`Exec`]);
//! only the runner differs. The committer task holds the write turn while it commits, so
//! other writers of this process still take turns with it; writers that do not take the
//! turn meet SQLite's busy handler, as with any connection (5 s, like sqlx's). The
//! connection is opened once, at [`Writer::start`], with the pool's settings
//! ([`super::sqlite_pragmas`]; WAL is the file's own).

use super::rows::OutboxRow;
use super::step::{Arg, Committed, Exec, StepWrite, group_statements};
use super::{DbError, DbResult, now_ms};

/// The writer's connection, and the read connections of the provider-id checks.
pub(crate) struct Writer {
    /// Taken by the committer task, which holds the write turn: never contended.
    conn: std::sync::Mutex<WriterConn>,
    /// The database file, for [`Writer::seen`]'s connections.
    path: std::path::PathBuf,
    /// Idle read connections of [`Writer::seen`] ([`READERS`] at most).
    readers: std::sync::Mutex<Vec<rusqlite::Connection>>,
}

/// Read connections kept idle for [`Writer::seen`] (one per thread that may read at once).
const READERS: usize = 8;

/// Prepared statements kept by the writer's connection (64): the group's few fixed statements
/// and the multi-row inserts of the sizes that recur.
const STATEMENT_CACHE: usize = 64;

/// How long a statement waits for another connection's write lock (5 s, sqlx's default).
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Writer {
    /// Opens the writer's connection to the database of `url` (`sqlite://…`, migrated).
    pub(crate) fn start(url: &str) -> anyhow::Result<Writer> {
        use std::str::FromStr;
        // The writer opens the pool's file by its name, so the URL may carry nothing that
        // would make the pool's database another one (in memory, read-only, another VFS).
        let query = url.split_once('?').map_or("", |(_, q)| q);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            anyhow::ensure!(
                matches!(pair, "mode=rw" | "mode=rwc"),
                "the SQLite URL {url:?} cannot be used: its option {pair:?} would give the \
                 writer's connection another database than the pool's; a file \
                 (sqlite://<path>, optionally ?mode=rwc) can"
            );
        }
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)?;
        let path = options.get_filename().to_owned();
        let name = path.to_string_lossy();
        anyhow::ensure!(
            !name.is_empty() && !name.contains(":memory:") && !name.starts_with("file:"),
            "the SQLite URL {url:?} cannot be used: an in-memory database would be another \
             one for the writer's connection; give a file (sqlite://<path>)"
        );
        let conn = open(&path)
            .map_err(|e| anyhow::anyhow!("opening {} for the writer: {e}", path.display()))?;
        Ok(Writer {
            conn: std::sync::Mutex::new(WriterConn {
                conn,
                params: ParamMaps::new(),
            }),
            path,
            readers: Default::default(),
        })
    }

    /// Whether `inbound_seen` holds (`channel_id`, `key`): the provider-id check before each
    /// message's step, answered on the caller's thread by a connection of its own. Through
    /// the pool it would be two hand-offs between threads (to sqlx's worker and back) for a
    /// read of one index entry of a few microseconds. In WAL mode a reader does not wait for
    /// the writer, so this does not block on the group commits.
    pub(crate) fn seen(&self, channel_id: &str, key: &str) -> DbResult<bool> {
        let idle = self.readers.lock().unwrap().pop();
        let conn = match idle {
            Some(c) => c,
            None => open(&self.path)?,
        };
        let seen = conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM inbound_seen WHERE channel_id = ?1 AND provider_id = ?2)",
            )
            .and_then(|mut q| q.query_row((channel_id, key), |r| r.get::<_, bool>(0)));
        let mut readers = self.readers.lock().unwrap();
        if readers.len() < READERS {
            readers.push(conn);
        }
        Ok(seen?)
    }

    /// Commits `writes` in one transaction, with `sent` recorded as sent (a group that fails
    /// is retried step by step, after its delivery records); one outcome per step, in order.
    /// Runs on the calling thread, which must hold the write turn.
    pub(crate) fn commit(&self, writes: &[StepWrite], sent: &[String]) -> Vec<Committed> {
        // A panic in a transaction is caught inside it (`transaction`): never poisoned.
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        commit(&mut conn, writes, sent)
    }
}

/// A connection to the database file with the pool's settings (the writer's and the readers').
fn open(path: &std::path::Path) -> rusqlite::Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch(&super::sqlite_pragmas().join(";"))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// One transaction for the group; if it fails, the delivery records in one of their own,
/// then each step in one of its own, so that one bad step cannot fail the others.
fn commit(conn: &mut WriterConn, writes: &[StepWrite], sent: &[String]) -> Vec<Committed> {
    match transaction(conn, writes, sent) {
        Ok(stored) => stored.into_iter().map(Ok).collect(),
        Err(e) => {
            tracing::warn!(error = %e, steps = writes.len(), sent = sent.len(), "group commit failed; committing its parts one by one");
            if !sent.is_empty()
                && let Err(e) = transaction(conn, &[], sent)
            {
                // The rows stay pending: sent again after their lease.
                tracing::error!(error = %format!("{e:#}"), rows = sent.len(), "outbox: recording deliveries");
            }
            writes
                .iter()
                .map(|w| {
                    transaction(conn, std::slice::from_ref(w), &[])
                        .map(|mut v| v.pop().expect("one result"))
                })
                .collect()
        }
    }
}

/// One IMMEDIATE transaction (the write lock is taken at once, so no statement meets a lock
/// upgrade that fails halfway). A panic inside it (a bug) fails this transaction only: it is
/// rolled back as it unwinds, and the committer goes on.
fn transaction(
    WriterConn { conn, params }: &mut WriterConn,
    writes: &[StepWrite],
    sent: &[String],
) -> DbResult<Vec<Option<Vec<OutboxRow>>>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut runner = Runner { conn: &tx, params };
        let stored = ready(group_statements(&mut runner, writes, sent, now_ms()))?;
        tx.commit()?;
        Ok(stored)
    }))
    .unwrap_or_else(|_| {
        tracing::error!(
            steps = writes.len(),
            sent = sent.len(),
            "a SQLite group commit panicked in its transaction"
        );
        Err(DbError::worker_gone())
    })
}

/// Polls a future that never waits: [`Runner`]'s statements run synchronously, so
/// [`group_statements`] over it is ready at its first poll.
fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("the SQLite writer's statements never wait"),
    }
}

/// The writer's connection, with what it knows of its statements' parameters.
struct WriterConn {
    conn: rusqlite::Connection,
    params: ParamMaps,
}

/// For each statement's text, the argument (0-based) each of its parameters takes, in the
/// parameters' order. SQLite numbers `$n` placeholders by their first occurrence, and
/// reading a parameter's name back scans the statement's names: read per parameter of every
/// execution, the names cost time quadratic in a multi-row insert's parameters (3 % of the
/// server's CPU under load). Holds as many texts as the statement cache at most.
type ParamMaps = std::collections::HashMap<String, Vec<usize>>;

/// Runs statements on the writer's connection, synchronously.
struct Runner<'c> {
    conn: &'c rusqlite::Connection,
    params: &'c mut ParamMaps,
}

impl Exec for Runner<'_> {
    async fn exec(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64> {
        let mut st = self.conn.prepare_cached(sql)?;
        match self.params.get(sql) {
            Some(map) => bind(&mut st, map, sql, args)?,
            None => {
                let map = param_map(&st, sql)?;
                bind(&mut st, &map, sql, args)?;
                if self.params.len() >= STATEMENT_CACHE {
                    self.params.clear();
                }
                self.params.insert(sql.to_owned(), map);
            }
        }
        Ok(st.raw_execute()? as u64)
    }
}

/// Binds `args` to `st`'s parameters, the i-th parameter taking argument `map[i]`: `$n` is
/// the statement's n-th argument, wherever and however often it occurs.
fn bind(
    st: &mut rusqlite::Statement<'_>,
    map: &[usize],
    sql: &str,
    args: &[Arg<'_>],
) -> DbResult<()> {
    for (i, n) in map.iter().enumerate() {
        let arg = args.get(*n).ok_or_else(|| {
            rusqlite::Error::InvalidParameterName(format!(
                "parameter {} of {sql:?} has no argument ({} given)",
                i + 1,
                args.len()
            ))
        })?;
        match arg {
            Arg::Text(v) => st.raw_bind_parameter(i + 1, v.as_deref())?,
            Arg::Int(v) => st.raw_bind_parameter(i + 1, *v)?,
        }
    }
    Ok(())
}

/// The argument each parameter of `st` takes: `$n` takes the n-th (from 1).
fn param_map(st: &rusqlite::Statement<'_>, sql: &str) -> DbResult<Vec<usize>> {
    (1..=st.parameter_count())
        .map(|i| {
            st.parameter_name(i)
                .and_then(|name| name.strip_prefix('$')?.parse::<usize>().ok())
                .and_then(|n| n.checked_sub(1))
                .ok_or_else(|| {
                    rusqlite::Error::InvalidParameterName(format!(
                        "parameter {i} of {sql:?} is not a `$n` placeholder"
                    ))
                    .into()
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_sqlite;
    use crate::test_steps::step;
    use sqlx::Executor;

    /// `$n` is bound to the n-th argument wherever it stands and however often it occurs, as
    /// sqlx binds it on the pool; a placeholder with no argument is an error naming it.
    #[tokio::test]
    async fn arguments_are_bound_by_their_number() {
        let (dir, db) = test_sqlite().await;
        db.pool
            .execute("CREATE TABLE t (a TEXT, b INTEGER, c TEXT, d INTEGER)")
            .await
            .unwrap();
        let conn = open(&dir.path().join("botbox.db")).unwrap();
        let mut params = ParamMaps::new();
        let mut r = Runner {
            conn: &conn,
            params: &mut params,
        };
        let insert = "INSERT INTO t (a, b, c, d) VALUES ($3, $1, $3, $2)";
        let args = [Arg::from(7i64), Arg::Int(None), Arg::from("x")];
        assert_eq!(ready(r.exec(insert, &args)).unwrap(), 1);
        let row: (String, i64, String, Option<i64>) = sqlx::query_as("SELECT a, b, c, d FROM t")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(row, ("x".into(), 7, "x".into(), None));
        let err = ready(r.exec(insert, &args[..2])).unwrap_err().to_string();
        assert!(err.contains("has no argument (2 given)"), "{err}");
    }

    /// A group with a step that fails is committed step by step: the other steps of the group
    /// are stored with their transcripts and outbox rows, the failing one gets its error and
    /// writes nothing, and the deliveries queued with the group are recorded.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_step_fails_alone() {
        let (_dir, db) = test_sqlite().await;
        // Stands for any error a step's statements can meet.
        db.pool
            .execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON transcripts WHEN NEW.user_id = 'bad' \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
            )
            .await
            .unwrap();
        let first = db.commit_step(step("early")).await.unwrap().unwrap();
        let turn = db.write_turn().await;
        db.outbox_sent_soon(vec![first[0].id.clone()])
            .await
            .unwrap();
        // One group takes the three steps and the delivery once the turn is free.
        let outcomes = crate::test_steps::commit_three(&db, || drop(turn)).await;
        crate::test_steps::failing_step_failed_alone(&db, &first[0].id, &outcomes).await;
    }

    /// A URL whose database would not be the same file for the pool and the writer (in
    /// memory, read-only, another VFS) is refused with a reason; a file is taken.
    #[test]
    fn only_a_file_database_is_taken() {
        for url in [
            "sqlite::memory:",
            "sqlite://file::memory:?cache=shared",
            "sqlite://x.db?mode=memory",
            "sqlite://x.db?mode=ro",
            "sqlite://x.db?mode=rwc&vfs=unix-none",
        ] {
            let err = Writer::start(url).err().expect(url).to_string();
            assert!(err.contains("cannot be used"), "{url}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.db");
        rusqlite::Connection::open(&file).unwrap();
        for url in [
            format!("sqlite://{}", file.display()),
            format!("sqlite://{}?mode=rwc", file.display()),
        ] {
            Writer::start(&url).expect(&url);
        }
    }
}
