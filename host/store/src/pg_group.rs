//! PostgreSQL's message path in few round trips: the dedupe probes of the messages that
//! arrive together asked in one query ([`Postgres::seen`]), and the group commit in one
//! statement ([`commit`]).
//!
//! The group commit: the group's sessions, dedupe records,
//! transcripts, outbox rows and delivery records travel as arrays (`UNNEST`) in one
//! data-modifying `WITH` statement of fixed text, prepared once per connection and run in
//! one round trip (its own transaction). The statement-per-row form
//! ([`super::step::group_statements`]) costs 2 round trips per step plus 5 per group, with
//! multi-row inserts whose text changes with the group's size, so PostgreSQL plans them
//! anew.
//!
//! The statement keeps each step's guarantees: a step whose provider id is already recorded
//! writes nothing; a session is written only at its read version; a step's dedupe record,
//! transcripts and outbox rows are written only with its session. A provider id that another
//! transaction records while this one runs makes the dedupe insert fail (no `ON CONFLICT`),
//! and the caller commits the group again step by step, where that step finds it recorded.
//!
//! Groups it cannot express keep the statement-per-row form ([`fits`]): two steps of one
//! session or one provider id (their order inside one statement is undefined), and the rare
//! steps with bot errors or schedules.

use super::rows::OutboxRow;
use super::step::{OUTBOX_FORMAT, StepWrite, seen_key};
use super::{DbResult, new_row_id};

/// Whether one [`commit`] statement can store `writes` with the guarantees of the
/// statement-per-row form.
pub(crate) fn fits(writes: &[StepWrite]) -> bool {
    let mut sessions = std::collections::HashSet::with_capacity(writes.len());
    let mut seen = std::collections::HashSet::with_capacity(writes.len());
    writes.iter().all(|w| {
        w.errors.is_empty()
            && w.schedules_add.is_empty()
            && w.schedules_remove.is_empty()
            && sessions.insert(w.session_id.as_str())
            && w.provider_id
                .as_ref()
                .is_none_or(|p| seen.insert((w.channel_id.as_str(), p)))
    })
}

/// The group's statement. `$1` now, `$2` delivered outbox ids; the steps `$3`–`$10`; their
/// transcript lines `$11`–`$26` and outbox rows `$27`–`$33`, each with its step's index;
/// `$34` the outbox format. Answers the indexes of the steps written.
const GROUP: &str = "\
WITH s AS (
  SELECT u.* FROM UNNEST($3::int8[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int8[], $10::text[])
    AS u(idx, id, environment_id, channel_id, user_id, body, read_version, seen)
  LEFT JOIN LATERAL (
    SELECT 1 AS hit FROM inbound_seen i WHERE i.channel_id = u.channel_id AND i.provider_id = u.seen LIMIT 1
  ) d ON true
  WHERE d.hit IS NULL
), upd AS (
  UPDATE sessions t SET body = s.body, version = s.read_version + 1, updated_at = $1
  FROM s WHERE s.read_version IS NOT NULL AND t.id = s.id AND t.version = s.read_version
  RETURNING s.idx
), ins AS (
  INSERT INTO sessions (id, environment_id, channel_id, user_id, body, version, updated_at)
  SELECT id, environment_id, channel_id, user_id, body, 1, $1 FROM s WHERE read_version IS NULL
  ON CONFLICT (id) DO NOTHING
  RETURNING id
), w AS (
  SELECT idx FROM upd
  UNION ALL
  SELECT s.idx FROM s JOIN ins ON ins.id = s.id WHERE s.read_version IS NULL
), seen AS (
  INSERT INTO inbound_seen (channel_id, provider_id, created_at)
  SELECT s.channel_id, s.seen, $1 FROM s JOIN w ON w.idx = s.idx WHERE s.seen IS NOT NULL
), tr AS (
  INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, user_id,
                           direction, message, flow, intent, state, created_at, step_us,
                           dep_version, outcome, replay, miss, starts)
  SELECT t.id, t.project_id, t.environment_id, t.environment_name, t.channel_id, t.user_id,
         t.direction, t.message, t.flow, t.intent, t.state, t.created_at, t.step_us,
         t.dep_version, t.outcome, t.replay, t.miss, t.starts
  FROM UNNEST($11::int8[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[],
              $18::text[], $19::text[], $20::text[], $21::text[], $22::text[], $23::int8[], $24::int8[],
              $25::text[], $26::text[], $35::text[], $36::text[], $37::int8[])
    AS t(step, id, project_id, environment_id, environment_name, channel_id, user_id,
         direction, message, flow, intent, state, created_at, step_us, dep_version, outcome,
         replay, miss, starts)
  JOIN w ON w.idx = t.step
), ob AS (
  INSERT INTO outbox (id, channel_id, url, headers, body, status, attempts, next_at, created_at, format)
  SELECT o.id, o.channel_id, o.url, o.headers, o.body, 'pending', 0, o.next_at, $1, $34
  FROM UNNEST($27::int8[], $28::text[], $29::text[], $30::text[], $31::text[], $32::text[], $33::int8[])
    AS o(step, id, channel_id, url, headers, body, next_at)
  JOIN w ON w.idx = o.step
), sent AS (
  UPDATE outbox SET status = 'sent', attempts = attempts + 1, next_at = $1, last_error = NULL
  WHERE id = ANY($2::text[]) AND status = 'pending'
)
SELECT idx FROM w";

/// The group's transcript lines as columns, each line with its step's index.
#[derive(Default)]
struct Lines<'a> {
    step: Vec<i64>,
    id: Vec<String>,
    project_id: Vec<&'a str>,
    environment_id: Vec<&'a str>,
    environment_name: Vec<&'a str>,
    channel_id: Vec<&'a str>,
    user_id: Vec<&'a str>,
    direction: Vec<&'a str>,
    message: Vec<&'a str>,
    flow: Vec<Option<&'a str>>,
    intent: Vec<Option<&'a str>>,
    state: Vec<Option<&'a str>>,
    created_at: Vec<i64>,
    step_us: Vec<Option<i64>>,
    dep_version: Vec<Option<&'a str>>,
    outcome: Vec<Option<&'a str>>,
    replay: Vec<Option<&'a str>>,
    miss: Vec<Option<&'a str>>,
    starts: Vec<Option<i64>>,
}

impl<'a> Lines<'a> {
    /// Every line of `writes`, timed from `now` one millisecond apart in the group's order.
    fn of(writes: &'a [StepWrite], now: i64) -> Lines<'a> {
        let mut l = Lines::default();
        let lines = writes
            .iter()
            .enumerate()
            .flat_map(|(i, w)| w.transcripts.iter().map(move |t| (i, t)));
        for (n, (i, t)) in lines.enumerate() {
            l.step.push(i as i64);
            l.id.push(new_row_id());
            l.project_id.push(&t.project_id);
            l.environment_id.push(&t.environment_id);
            l.environment_name.push(&t.environment_name);
            l.channel_id.push(&t.channel_id);
            l.user_id.push(&t.user_id);
            l.direction.push(t.direction);
            l.message.push(&t.message);
            l.flow.push(t.flow.as_deref());
            l.intent.push(t.intent.as_deref());
            l.state.push(t.state.as_deref());
            l.created_at.push(now + n as i64);
            l.step_us.push(t.step_us);
            l.dep_version.push(t.dep_version.as_deref());
            l.outcome.push(t.outcome);
            l.replay.push(t.replay.as_deref());
            l.miss.push(t.miss.as_deref());
            l.starts.push(t.starts.then_some(1));
        }
        l
    }
}

/// Commits `writes` and records `sent` as delivered in one statement (see the module);
/// per step, its new outbox rows, or `None` when it wrote nothing. The caller checked
/// [`fits`]. An error leaves nothing written.
pub(crate) async fn commit(
    pg: &Postgres,
    writes: &[StepWrite],
    sent: &[String],
    now: i64,
) -> DbResult<Vec<Option<Vec<OutboxRow>>>> {
    let steps = 0..writes.len() as i64;
    let col = |f: fn(&StepWrite) -> &str| writes.iter().map(f).collect::<Vec<_>>();
    let seen: Vec<Option<String>> = writes
        .iter()
        .map(|w| w.provider_id.as_ref().map(|(user, id)| seen_key(user, id)))
        .collect();
    let lines = Lines::of(writes, now);
    let outbox = super::step::outbox_rows(&writes.iter().collect::<Vec<_>>(), now);
    let rows: Vec<(i64, &OutboxRow)> = outbox
        .iter()
        .enumerate()
        .flat_map(|(i, rows)| rows.iter().map(move |r| (i as i64, r)))
        .collect();
    let ocol = |f: fn(&OutboxRow) -> &str| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let statement = sqlx::query_scalar(GROUP)
        .bind(now)
        .bind(sent)
        .bind(steps.collect::<Vec<_>>())
        .bind(col(|w| w.session_id.as_str()))
        .bind(col(|w| w.environment_id.as_str()))
        .bind(col(|w| w.channel_id.as_str()))
        .bind(col(|w| w.user_id.as_str()))
        .bind(col(|w| &w.body))
        .bind(writes.iter().map(|w| w.read_version).collect::<Vec<_>>())
        .bind(seen)
        .bind(lines.step)
        .bind(lines.id)
        .bind(lines.project_id)
        .bind(lines.environment_id)
        .bind(lines.environment_name)
        .bind(lines.channel_id)
        .bind(lines.user_id)
        .bind(lines.direction)
        .bind(lines.message)
        .bind(lines.flow)
        .bind(lines.intent)
        .bind(lines.state)
        .bind(lines.created_at)
        .bind(lines.step_us)
        .bind(lines.dep_version)
        .bind(lines.outcome)
        .bind(rows.iter().map(|(i, _)| *i).collect::<Vec<_>>())
        .bind(ocol(|r| r.id.as_str()))
        .bind(ocol(|r| r.channel_id.as_str()))
        .bind(ocol(|r| r.url.as_str()))
        .bind(ocol(|r| r.headers.as_str()))
        .bind(ocol(|r| r.body.as_str()))
        .bind(rows.iter().map(|(_, r)| r.next_at).collect::<Vec<_>>())
        .bind(OUTBOX_FORMAT)
        .bind(lines.replay)
        .bind(lines.miss)
        .bind(lines.starts);
    let written: Vec<i64> = pg
        .committer
        .run(async move |c| statement.fetch_all(c).await)
        .await?;
    let mut stored = vec![false; writes.len()];
    for i in written {
        stored[i as usize] = true;
    }
    Ok(outbox
        .into_iter()
        .zip(stored)
        .map(|(rows, ok)| ok.then_some(rows))
        .collect())
}

/// PostgreSQL's side of the message path: typed connections of its own for the group
/// commits and the dedupe probes (`sqlx::Any` converts every argument and row through its
/// own types and cannot bind arrays), and the probes waiting to be asked.
pub(crate) struct Postgres {
    committer: Dedicated,
    prober: std::sync::Arc<Dedicated>,
    probes: std::sync::Arc<std::sync::Mutex<Probes>>,
}

/// A connection used by one task at a time (the committer, the prober), outside any pool:
/// sqlx's pool pings a connection before and after each use, two round trips more per
/// probe or commit. Opened at first use ([`open`]), named in `pg_stat_activity` by its
/// task (`botbox-committer`, `botbox-prober`). After an error it is dropped and the next
/// use opens another, unless the error was the statement's own conflict ([`keeps`]): a
/// connection the server ended answers its next statement with an error of the database's
/// own (`57P01`) before its socket fails. A use that outlasts [`STATEMENT_TIMEOUT`] fails and
/// drops it too (a server gone without closing the socket would hold the task, and every
/// message behind it, for ever).
struct Dedicated {
    options: sqlx::postgres::PgConnectOptions,
    conn: tokio::sync::Mutex<Option<sqlx::PgConnection>>,
    /// Set at shutdown: no use opens a connection again.
    closed: std::sync::atomic::AtomicBool,
}

/// How long one statement of the message path may take (30 s, as long as sqlx's pool
/// waits for a connection). A group's statement takes milliseconds.
const STATEMENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether the connection stays after error `e`: a constraint (class 23: another replica
/// recorded a provider id first, the very race the group's statement fails on) or a
/// deadlock or serialization failure (class 40) leave it sound.
fn keeps(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("23") || c.starts_with("40")),
        _ => false,
    }
}

impl Dedicated {
    fn new(options: &sqlx::postgres::PgConnectOptions, task: &str) -> Dedicated {
        Dedicated {
            options: options.clone().application_name(task),
            conn: Default::default(),
            closed: Default::default(),
        }
    }

    /// Runs `f` on the connection, waiting for another use to end.
    async fn run<T>(
        &self,
        f: impl AsyncFnOnce(&mut sqlx::PgConnection) -> sqlx::Result<T>,
    ) -> DbResult<T> {
        let mut slot = self.conn.lock().await;
        if self.closed.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(sqlx::Error::PoolClosed.into());
        }
        let conn = match &mut *slot {
            Some(c) => c,
            None => slot.insert(open(&self.options).await?),
        };
        let out = tokio::time::timeout(STATEMENT_TIMEOUT, f(conn))
            .await
            .unwrap_or_else(|_| {
                let late = std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in 30 s");
                Err(sqlx::Error::Io(late))
            });
        if out.as_ref().is_err_and(|e| !keeps(e)) {
            *slot = None;
        }
        Ok(out?)
    }

    /// Closes the connection once a use in progress has ended; later uses fail.
    async fn close(&self) {
        use sqlx::Connection;
        let mut slot = self.conn.lock().await;
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(c) = slot.take() {
            let _ = c.close().await;
        }
    }
}

/// Dedupe probes waiting for the next query, and whether a prober task is asking.
#[derive(Default)]
struct Probes {
    waiting: Vec<Probe>,
    running: bool,
    /// Queries asked so far (for tests).
    #[cfg(test)]
    batches: usize,
}

/// One message's dedupe probe: its channel, its stored key ([`seen_key`]), and who waits.
struct Probe {
    channel_id: String,
    key: String,
    reply: tokio::sync::oneshot::Sender<DbResult<bool>>,
}

/// Which of a batch's probes are recorded: the 1-based positions of those found. Each probe
/// is one index lookup (`LATERAL … LIMIT 1`), whatever the plan's estimates.
const PROBE: &str = "\
SELECT u.n FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS u(channel_id, key, n)
CROSS JOIN LATERAL (
  SELECT 1 FROM inbound_seen i WHERE i.channel_id = u.channel_id AND i.provider_id = u.key LIMIT 1
) hit";

impl Postgres {
    /// The message path's connections to the database of `url`, opened at first use.
    pub(crate) fn new(url: &str) -> anyhow::Result<Postgres> {
        let options: sqlx::postgres::PgConnectOptions = url
            .parse()
            .map_err(|e| anyhow::anyhow!("the database URL: {e}"))?;
        Ok(Postgres {
            committer: Dedicated::new(&options, "botbox-committer"),
            prober: std::sync::Arc::new(Dedicated::new(&options, "botbox-prober")),
            probes: Default::default(),
        })
    }

    /// Closes the connections, once a group commit or a probe in progress has ended.
    pub(crate) async fn close(&self) {
        self.committer.close().await;
        self.prober.close().await;
    }

    /// Whether (`channel_id`, `key`) is recorded in `inbound_seen`. The probes of messages
    /// arriving together are asked in one query by a prober task on `runtime` (the one that
    /// opened the database, whatever lane the caller runs on): while one batch is asked the
    /// next gathers, so under load a message's probe costs a share of a round trip instead of
    /// a transaction of its own. Alone, a probe is asked at once.
    pub(crate) async fn seen(
        &self,
        runtime: &tokio::runtime::Handle,
        channel_id: &str,
        key: String,
    ) -> DbResult<bool> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let start = {
            let mut p = self.probes.lock().unwrap();
            p.waiting.push(Probe {
                channel_id: channel_id.to_owned(),
                key,
                reply,
            });
            !std::mem::replace(&mut p.running, true)
        };
        if start {
            runtime.spawn(ask(self.prober.clone(), self.probes.clone()));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(super::DbError::worker_gone()))
    }
}

/// The prober: asks the waiting probes, a batch per query, until none waits. A batch whose
/// query fails is asked once more (on a new connection if the old one was lost); if that
/// fails too, each of its callers gets the error.
async fn ask(conn: std::sync::Arc<Dedicated>, probes: std::sync::Arc<std::sync::Mutex<Probes>>) {
    loop {
        let batch = {
            let mut p = probes.lock().unwrap();
            if p.waiting.is_empty() {
                // Under the lock: a probe queued after this sees no prober and starts one.
                p.running = false;
                return;
            }
            #[cfg(test)]
            {
                p.batches += 1;
            }
            std::mem::take(&mut p.waiting)
        };
        let found = match probe(&conn, &batch).await {
            Ok(found) => Ok(found),
            Err(_) => probe(&conn, &batch).await,
        };
        match found {
            Ok(found) => {
                for (n, p) in batch.into_iter().enumerate() {
                    let _ = p.reply.send(Ok(found.contains(&(n as i64 + 1))));
                }
            }
            Err(e) => {
                let text = format!("checking provider ids: {e}");
                for p in batch {
                    let failed = sqlx::Error::Protocol(text.clone());
                    let _ = p.reply.send(Err(failed.into()));
                }
            }
        }
    }
}

/// The positions (1-based) of `batch`'s probes that are recorded.
async fn probe(conn: &Dedicated, batch: &[Probe]) -> DbResult<Vec<i64>> {
    let channels: Vec<&str> = batch.iter().map(|p| p.channel_id.as_str()).collect();
    let keys: Vec<&str> = batch.iter().map(|p| p.key.as_str()).collect();
    let query = sqlx::query_scalar(PROBE).bind(channels).bind(keys);
    conn.run(async move |c| query.fetch_all(c).await).await
}

/// How long opening a message-path connection may take (10 s): its task (the committer,
/// the prober) waits meanwhile, and every message with it. sqlx's pool waits 30 s for a
/// connection.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens one of the message path's connections. It plans each statement once, without
/// sequential scans (`plan_cache_mode = force_generic_plan`, `enable_seqscan = off`): its
/// statements find their rows by key, so one plan serves every run, where PostgreSQL would
/// otherwise plan the group's statement anew at each run (a tenth of its CPU under load).
/// And a plan made while a table is small (just after start) must not read the whole
/// table: kept while the table grows, it would read every stored provider id at each
/// commit.
async fn open(options: &sqlx::postgres::PgConnectOptions) -> sqlx::Result<sqlx::PgConnection> {
    use sqlx::{ConnectOptions, Executor};
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, options.connect())
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)??;
    conn.execute("SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off")
        .await?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_steps::step;
    use crate::{Db, conversations::Runner};

    fn pg(db: &Db) -> &Postgres {
        match &db.commits.runner {
            Runner::Postgres(pg) => pg,
            Runner::Sqlite(_) => unreachable!("a PostgreSQL database"),
        }
    }

    /// `u`'s step carrying provider id `id`, from session version `read` (`None`: new).
    fn step_of(u: &str, id: &str, read: Option<i64>) -> StepWrite {
        StepWrite {
            provider_id: Some((u.into(), id.into())),
            read_version: read,
            ..step(u)
        }
    }

    /// This database's connections waiting for a lock.
    const WAITING: &str = "SELECT COUNT(*) FROM pg_stat_activity \
                           WHERE datname = current_database() AND wait_event_type = 'Lock'";

    async fn count(db: &Db, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&db.pool).await.unwrap()
    }

    #[test]
    fn groups_with_a_session_or_provider_id_twice_or_rare_writes_do_not_fit() {
        assert!(fits(&[step_of("a", "1", None), step_of("b", "1", None)]));
        assert!(!fits(&[step("a"), step("a")]), "one session twice");
        let mut other = step_of("b", "1", None);
        other.provider_id = Some(("a".into(), "1".into()));
        assert!(
            !fits(&[step_of("a", "1", None), other]),
            "one provider id twice"
        );
        let mut scheduled = step("a");
        scheduled.schedules_remove.push("x".into());
        assert!(!fits(&[scheduled]));
    }

    /// One statement stores a group as the statement-per-row form does: the new and the
    /// updated sessions with their lines, outbox rows, dedupe records and delivery records;
    /// a step at a stale version or with a recorded provider id writes nothing, not even its
    /// dedupe record, so that it can run again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_statement_keeps_each_steps_guarantees() {
        let Some(db) = crate::test_postgres().await else {
            return;
        };
        let (pool, pg) = (&db.pool, pg(&db));
        let first = commit(
            pg,
            &[step_of("a", "1", None), step_of("b", "1", None)],
            &[],
            1_000,
        )
        .await
        .unwrap();
        assert!(
            first
                .iter()
                .all(|r| r.as_ref().is_some_and(|rows| rows.len() == 1))
        );
        let sent = first[0].as_ref().unwrap()[0].id.clone();
        let group = [
            step_of("a", "2", Some(1)), // written: version 1 → 2
            step_of("b", "3", Some(7)), // stale version: nothing
            step_of("c", "1", None),    // new session
            step_of("d", "9", None),    // provider id recorded below: nothing
        ];
        sqlx::query("INSERT INTO inbound_seen VALUES ('c', $1, 0)")
            .bind(seen_key("d", "9"))
            .execute(pool)
            .await
            .unwrap();
        let out = commit(pg, &group, std::slice::from_ref(&sent), 2_000)
            .await
            .unwrap();
        let written: Vec<bool> = out.iter().map(Option::is_some).collect();
        assert_eq!(written, [true, false, true, false]);
        let versions: Vec<(String, i64)> =
            sqlx::query_as("SELECT user_id, version FROM sessions ORDER BY user_id")
                .fetch_all(pool)
                .await
                .unwrap();
        let want = [("a", 2), ("b", 1), ("c", 1)].map(|(u, v)| (u.to_string(), v));
        assert_eq!(versions, want);
        assert_eq!(count(&db, "SELECT COUNT(*) FROM transcripts").await, 4);
        assert_eq!(
            count(&db, "SELECT COUNT(*) FROM outbox WHERE status = 'pending'").await,
            3
        );
        assert_eq!(
            count(&db, "SELECT COUNT(*) FROM outbox WHERE status = 'sent'").await,
            1
        );
        let seen: Vec<(String,)> =
            sqlx::query_as("SELECT provider_id FROM inbound_seen ORDER BY provider_id")
                .fetch_all(pool)
                .await
                .unwrap();
        let keys = [("a", "1"), ("a", "2"), ("b", "1"), ("c", "1"), ("d", "9")];
        assert_eq!(seen, keys.map(|(u, id)| (seen_key(u, id),)));
        let times: Vec<(i64,)> = sqlx::query_as(
            "SELECT created_at FROM transcripts WHERE created_at >= 2000 ORDER BY id",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert!(
            times.windows(2).all(|t| t[0] < t[1]),
            "lines keep their order: {times:?}"
        );
    }

    /// A provider id that another transaction records while the group's statement runs
    /// fails the statement (nothing of the group is written), and the group committed again
    /// step by step stores the others while that step writes nothing: the message runs once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_provider_id_recorded_meanwhile_makes_its_step_write_nothing() {
        let Some(db) = crate::test_postgres().await else {
            return;
        };
        let pool = &db.pool;
        let mut other = pool.begin().await.unwrap();
        sqlx::query("INSERT INTO inbound_seen VALUES ('c', $1, 0)")
            .bind(seen_key("b", "5"))
            .execute(&mut *other)
            .await
            .unwrap();
        let steps = ["a", "b", "c"].map(|u| {
            let (db, w) = (db.clone(), step_of(u, "5", None));
            tokio::spawn(async move { db.commit_step(w).await })
        });
        // The group's dedupe insert waits for `other`'s uncommitted record of the same key.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while count(&db, WAITING).await == 0 {
            assert!(std::time::Instant::now() < give_up, "no statement waited");
            tokio::task::yield_now().await;
        }
        other.commit().await.unwrap();
        let mut written = Vec::new();
        for s in steps {
            written.push(s.await.unwrap().unwrap().is_some());
        }
        assert_eq!(written, [true, false, true]);
        let users: Vec<(String,)> = sqlx::query_as("SELECT user_id FROM sessions ORDER BY user_id")
            .fetch_all(pool)
            .await
            .unwrap();
        assert_eq!(users, [("a".into(),), ("c".into(),)]);
        assert_eq!(
            count(&db, "SELECT COUNT(*) FROM transcripts WHERE user_id = 'b'").await,
            0
        );
    }

    /// Probes queued while a batch is being asked are asked together in the next query,
    /// each answered for its own message: recorded ones true, the others (another user's
    /// id, another channel) false.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn probes_queued_together_are_one_query_answered_each_for_its_own() {
        let Some(db) = crate::test_postgres().await else {
            return;
        };
        let pg = pg(&db);
        for i in (0..40).step_by(2) {
            sqlx::query("INSERT INTO inbound_seen VALUES ('c', $1, 0)")
                .bind(seen_key(&format!("u{i}"), "1"))
                .execute(&db.pool)
                .await
                .unwrap();
        }
        // Stand for a prober at work, so that the probes queue.
        pg.probes.lock().unwrap().running = true;
        let ask_for = |channel: &'static str, user: String| {
            let db = db.clone();
            tokio::spawn(async move { db.seen(channel, &user, "1").await.unwrap() })
        };
        let mut asks: Vec<_> = (0..40).map(|i| ask_for("c", format!("u{i}"))).collect();
        asks.push(ask_for("other", "u0".into()));
        while pg.probes.lock().unwrap().waiting.len() < 41 {
            tokio::task::yield_now().await;
        }
        tokio::spawn(ask(pg.prober.clone(), pg.probes.clone()));
        let mut answers = Vec::new();
        for a in asks {
            answers.push(a.await.unwrap());
        }
        let want: Vec<bool> = (0..40).map(|i| i % 2 == 0).chain([false]).collect();
        assert_eq!(answers, want);
        assert_eq!(pg.probes.lock().unwrap().batches, 1, "one query for the 41");
        // Alone, a probe starts a prober of its own.
        assert!(db.seen("c", "u2", "1").await.unwrap());
    }

    /// The message path's connections killed under it (a server restart, an idle timeout)
    /// cost nothing lost: the next probe is asked again on a new connection and answers,
    /// and the next group commit, whose statement fails on the dead one, is committed
    /// again on the main pool and then on a new connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lost_connections_are_opened_again() {
        let Some(db) = crate::test_postgres().await else {
            return;
        };
        let pool = &db.pool;
        assert!(
            db.commit_step(step_of("a", "1", None))
                .await
                .unwrap()
                .is_some()
        );
        assert!(db.seen("c", "a", "1").await.unwrap());
        let killed: Vec<(bool,)> = sqlx::query_as(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name LIKE 'botbox-%'",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(
            killed,
            [(true,), (true,)],
            "the committer's and the prober's"
        );
        assert!(db.seen("c", "a", "1").await.unwrap());
        assert!(!db.seen("c", "a", "2").await.unwrap());
        for id in ["2", "3"] {
            let stored = db.commit_step(step_of(id, id, None)).await.unwrap();
            assert!(stored.is_some(), "step {id}");
        }
        assert!(db.seen("c", "3", "3").await.unwrap());
        assert_eq!(count(&db, "SELECT COUNT(*) FROM sessions").await, 3);
        // Step 2's statement met the dead connection (its group was committed again on the
        // main pool); step 3's ran on a new one.
        let committers = "SELECT COUNT(*) FROM pg_stat_activity \
                          WHERE datname = current_database() AND application_name = 'botbox-committer'";
        assert_eq!(count(&db, committers).await, 1);
    }
}
