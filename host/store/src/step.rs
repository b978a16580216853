//! What a step writes ([`StepWrite`]) and the statements that store it in one transaction,
//! the same on the pool (PostgreSQL, or SQLite alone) and on the SQLite writer's
//! connection: both run them through [`Exec`].

use super::rows::{NewBotError, NewTranscript, OutboxRow, ScheduleRow};
use super::{Db, DbResult, new_row_id, now_ms};

/// What a step changes, written in one transaction: the session (if nobody else stored one
/// since it was read), transcripts, outbound deliveries and schedules.
#[derive(Debug, Default)]
pub struct StepWrite {
    pub session_id: String,
    pub environment_id: String,
    pub channel_id: String,
    pub user_id: String,
    /// The new session's JSON.
    pub body: std::sync::Arc<str>,
    /// The session version the step started from (`None`: there was no session).
    pub read_version: Option<i64>,
    /// The provider's id of the message this step ran, as (user, id): recorded in the same
    /// transaction, so a message is marked seen exactly when its outcome is stored. A step
    /// whose id another process recorded first writes nothing ([`Db::commit_step`]).
    pub provider_id: Option<(String, String)>,
    pub transcripts: Vec<NewTranscript>,
    /// Bot errors of the step (`GET /projects/{id}/errors`).
    pub errors: Vec<NewBotError>,
    /// (url, headers JSON, body)
    pub outbox: Vec<(String, String, String)>,
    pub schedules_add: Vec<ScheduleRow>,
    pub schedules_remove: Vec<String>,
    /// Outbox rows become due for the polling worker only this long after the commit: the
    /// process that made them sends them at once, and a crash leaves them to the worker.
    pub outbox_lease_ms: i64,
    /// The step belongs to a tenant over its share (its work runs on the background lane):
    /// on SQLite its group commit may be passed over, a bounded number of times, for steps
    /// of tenants within their share (`next_group`). Plain data from the caller: storage
    /// does not choose lanes.
    pub background: bool,
}

/// The outcome of one step's commit: its outbox rows, or `None` when another step stored
/// the session in between or the message's provider id was recorded by another step
/// (nothing of it was written; the caller reads again and decides).
pub type Committed = DbResult<Option<Vec<OutboxRow>>>;

/// The version of the stored form of an outbox row: `url`, `headers` (a JSON list of
/// `[name, value]` pairs) and `body` (the request's JSON text). Bump it with any change to
/// that form; a process sends only rows of formats up to its own (the others wait for a
/// process that knows them). Kept in the `format` column.
pub const OUTBOX_FORMAT: i64 = 1;

/// The version of the stored form of a schedule: `message` is a language message's JSON.
/// Same rules as [`OUTBOX_FORMAT`].
pub const SCHEDULE_FORMAT: i64 = 1;

/// Delivered outbox rows recorded as sent in one statement at most (256).
pub(crate) const SENT_MAX: usize = 256;

/// Rows per multi-row INSERT: 13 parameters each at most, 5,200 in all, well under SQLite's
/// 32,766 and PostgreSQL's 65,535. Larger sets are inserted in chunks.
const ROWS_PER_INSERT: usize = 400;

/// The stored dedupe key of a provider id: the user's id, length-prefixed so that no pair of
/// (user, id) can spell another's, then the id.
pub(crate) fn seen_key(user_id: &str, provider_id: &str) -> String {
    format!("{}:{user_id}:{provider_id}", user_id.len())
}

/// The statement of [`Db::outbox_sent`] for `n` ids (`$1` is the time, `$2…` the ids).
///
/// The rows are found by their ids only: `status || ''` keeps the planner off the
/// `(status, next_at)` index. With `status = 'pending'` SQLite's planner takes that index as
/// soon as the list has four ids, and scans every pending row of every tenant under the
/// write turn: one tenant's backlog to a dead endpoint (thousands of pending retries) makes
/// each of these statements, and every commit queued behind it, milliseconds slower.
pub(crate) fn outbox_sent_sql(n: usize) -> String {
    format!(
        "UPDATE outbox SET status = 'sent', attempts = attempts + 1, next_at = $1, last_error = NULL \
         WHERE id IN ({}) AND status || '' = 'pending'",
        super::numbered_params(2, n)
    )
}

/// `($1, …, $cols), ($cols+1, …), …` for `rows` rows.
pub(crate) fn placeholders(rows: usize, cols: usize) -> String {
    let mut out = String::with_capacity(rows * cols * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 1..=cols {
            if c > 1 {
                out.push_str(", ");
            }
            out.push('$');
            out.push_str(&(r * cols + c).to_string());
        }
        out.push(')');
    }
    out
}

/// One argument of a statement run through [`Exec`]: text or a 64-bit integer, either
/// possibly NULL.
#[derive(Debug)]
pub(crate) enum Arg<'a> {
    Text(Option<std::borrow::Cow<'a, str>>),
    Int(Option<i64>),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Some(v.into()))
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(Some(v.as_str().into()))
    }
}

impl From<String> for Arg<'_> {
    fn from(v: String) -> Self {
        Arg::Text(Some(v.into()))
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Arg::Text(v.as_deref().map(Into::into))
    }
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}

/// Runs one write statement (`$n` placeholders, `args[n - 1]` each) and says how many rows it
/// changed. The group commit's statements are written once, over this, and run by two
/// runners: sqlx on a pool connection (PostgreSQL, and tests), and the SQLite writer
/// thread's own connection ([`super::writer`]), which runs them back to back without a
/// hand-off between threads per statement.
pub(crate) trait Exec {
    async fn exec(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64>;
}

impl Exec for sqlx::AnyConnection {
    async fn exec(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64> {
        let mut q = sqlx::query(sql);
        for a in args {
            q = match a {
                Arg::Text(v) => q.bind(v.as_deref()),
                Arg::Int(v) => q.bind(*v),
            };
        }
        Ok(q.execute(self).await?.rows_affected())
    }
}

/// Records delivered outbox rows as sent, [`SENT_MAX`] ids per statement; the caller holds
/// the write turn.
pub(crate) async fn mark_sent<E: Exec>(e: &mut E, ids: &[String], now: i64) -> DbResult<()> {
    for chunk in ids.chunks(SENT_MAX) {
        let mut args: Vec<Arg> = Vec::with_capacity(chunk.len() + 1);
        args.push(now.into());
        args.extend(chunk.iter().map(Arg::from));
        e.exec(&outbox_sent_sql(chunk.len()), &args).await?;
    }
    Ok(())
}

/// The statements of a group commit, inside the caller's transaction: the deliveries `sent`
/// recorded as sent; each session written if still at its read version (and its provider
/// id recorded first, so that a message another step already stored writes nothing); then
/// the transcripts and outbox rows of the steps whose session was written, one statement
/// each for the whole group (in chunks); then schedules. Returns, per step, its outbox
/// rows, or `None` when it wrote nothing.
pub(crate) async fn group_statements<E: Exec>(
    e: &mut E,
    writes: &[StepWrite],
    sent: &[String],
    now: i64,
) -> DbResult<Vec<Option<Vec<OutboxRow>>>> {
    mark_sent(e, sent, now).await?;
    let mut stored = Vec::with_capacity(writes.len());
    for w in writes {
        stored.push(write_session(e, w, now).await?);
    }
    let kept: Vec<&StepWrite> = writes
        .iter()
        .zip(&stored)
        .filter(|(_, ok)| **ok)
        .map(|(w, _)| w)
        .collect();
    let lines: Vec<&NewTranscript> = kept.iter().flat_map(|w| &w.transcripts).collect();
    insert_transcript_rows(e, &lines, now).await?;
    insert_step_errors(e, &kept, now).await?;
    let created = outbox_rows(&kept, now);
    insert_outbox_rows(e, &created, now).await?;
    write_schedules(e, &kept, now).await?;
    let mut created = created.into_iter();
    Ok(stored
        .into_iter()
        .map(|ok| ok.then(|| created.next().expect("rows of a stored step")))
        .collect())
}

/// Writes one step's session if it is still at its read version, its provider id recorded
/// first; whether it was written (`false`: the step writes nothing more).
async fn write_session<E: Exec>(e: &mut E, w: &StepWrite, now: i64) -> DbResult<bool> {
    let seen = w.provider_id.as_ref().map(|(user, id)| seen_key(user, id));
    if let Some(seen) = &seen {
        // First, so that a message another step already stored writes nothing.
        let fresh = e
            .exec(
                "INSERT INTO inbound_seen (channel_id, provider_id, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (channel_id, provider_id) DO NOTHING",
                &[(&w.channel_id).into(), seen.into(), now.into()],
            )
            .await?;
        if fresh == 0 {
            return Ok(false);
        }
    }
    let done = put_session(e, w, now).await?;
    if done != 1
        && let Some(seen) = &seen
    {
        // The session changed under the step: it writes nothing and runs again on
        // the newer session, so its message must stay unseen (or the rerun would be
        // dropped as a duplicate of itself, and the message lost).
        e.exec(
            "DELETE FROM inbound_seen WHERE channel_id = $1 AND provider_id = $2",
            &[(&w.channel_id).into(), seen.into()],
        )
        .await?;
    }
    Ok(done == 1)
}

/// Inserts the step's session (none was read) or updates it if still at its read version;
/// the rows changed (1 when written).
async fn put_session<E: Exec>(e: &mut E, w: &StepWrite, now: i64) -> DbResult<u64> {
    match w.read_version {
        None => {
            e.exec(
                "INSERT INTO sessions (id, environment_id, channel_id, user_id, body, version, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, 1, $6) ON CONFLICT (id) DO NOTHING",
                &[
                    (&w.session_id).into(),
                    (&w.environment_id).into(),
                    (&w.channel_id).into(),
                    (&w.user_id).into(),
                    (&*w.body).into(),
                    now.into(),
                ],
            )
            .await
        }
        Some(v) => {
            e.exec(
                "UPDATE sessions SET body = $1, version = $2, updated_at = $3 WHERE id = $4 AND version = $5",
                &[
                    (&*w.body).into(),
                    (v + 1).into(),
                    now.into(),
                    (&w.session_id).into(),
                    v.into(),
                ],
            )
            .await
        }
    }
}

/// Inserts the bot errors of the stored steps.
async fn insert_step_errors<E: Exec>(e: &mut E, kept: &[&StepWrite], now: i64) -> DbResult<()> {
    // Bot errors are rare: one statement each; their times keep their order in the step.
    for (i, b) in kept.iter().flat_map(|w| &w.errors).enumerate() {
        e.exec(
            INSERT_BOT_ERROR,
            &[
                new_row_id().into(),
                (&b.project_id).into(),
                (&b.environment_id).into(),
                (&b.channel_id).into(),
                (now + i as i64).into(),
                b.group.into(),
                (&b.code).into(),
                (&b.message).into(),
                Arg::Text(b.user_id.as_deref().map(Into::into)),
            ],
        )
        .await?;
    }
    Ok(())
}

/// The pending outbox rows of each stored step, due once its lease has passed.
pub(crate) fn outbox_rows(kept: &[&StepWrite], now: i64) -> Vec<Vec<OutboxRow>> {
    let mut created: Vec<Vec<OutboxRow>> = Vec::with_capacity(kept.len());
    for w in kept {
        created.push(
            w.outbox
                .iter()
                .map(|(url, headers, body)| OutboxRow {
                    id: new_row_id(),
                    channel_id: w.channel_id.clone(),
                    url: url.clone(),
                    headers: headers.clone(),
                    body: body.clone(),
                    status: "pending".into(),
                    attempts: 0,
                    next_at: now + w.outbox_lease_ms,
                    last_error: None,
                })
                .collect(),
        );
    }
    created
}

/// Inserts the steps' outbox rows, [`ROWS_PER_INSERT`] per statement.
async fn insert_outbox_rows<E: Exec>(
    e: &mut E,
    created: &[Vec<OutboxRow>],
    now: i64,
) -> DbResult<()> {
    let rows: Vec<&OutboxRow> = created.iter().flatten().collect();
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO outbox (id, channel_id, url, headers, body, status, attempts, next_at, created_at, format) VALUES {}",
            placeholders(chunk.len(), 10)
        );
        let mut args: Vec<Arg> = Vec::with_capacity(chunk.len() * 10);
        for r in chunk {
            args.extend([
                (&r.id).into(),
                (&r.channel_id).into(),
                (&r.url).into(),
                (&r.headers).into(),
                (&r.body).into(),
                "pending".into(),
                0i64.into(),
                r.next_at.into(),
                now.into(),
                OUTBOX_FORMAT.into(),
            ]);
        }
        e.exec(&sql, &args).await?;
    }
    Ok(())
}

/// Removes and adds the stored steps' schedules (an added schedule replaces one of its id).
async fn write_schedules<E: Exec>(e: &mut E, kept: &[&StepWrite], now: i64) -> DbResult<()> {
    for w in kept {
        for id in &w.schedules_remove {
            e.exec("DELETE FROM schedules WHERE id = $1", &[id.into()])
                .await?;
        }
        for s in &w.schedules_add {
            e.exec("DELETE FROM schedules WHERE id = $1", &[(&s.id).into()])
                .await?;
            e.exec(
                "INSERT INTO schedules (id, session_id, channel_id, user_id, message, next_at, end_at, every_ms, created_at, format) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    (&s.id).into(),
                    (&s.session_id).into(),
                    (&s.channel_id).into(),
                    (&s.user_id).into(),
                    (&s.message).into(),
                    s.next_at.into(),
                    s.end_at.into(),
                    s.every_ms.into(),
                    now.into(),
                    SCHEDULE_FORMAT.into(),
                ],
            )
            .await?;
        }
    }
    Ok(())
}

/// Inserts transcript lines timed from `now` (one millisecond apart, keeping their order),
/// in chunks: one statement per chunk keeps under the databases' caps on parameters (SQLite
/// 32,766, PostgreSQL 65,535) however many lines there are.
async fn insert_transcript_rows<E: Exec>(
    e: &mut E,
    lines: &[&NewTranscript],
    now: i64,
) -> DbResult<()> {
    for (c, chunk) in lines.chunks(ROWS_PER_INSERT).enumerate() {
        let sql = format!(
            "INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, user_id, \
             direction, message, flow, intent, state, created_at, step_us, dep_version, outcome, replay, miss, \
             starts) VALUES {}",
            placeholders(chunk.len(), 18)
        );
        let mut args: Vec<Arg> = Vec::with_capacity(chunk.len() * 18);
        for (n, t) in chunk.iter().enumerate() {
            args.extend([
                new_row_id().into(),
                (&t.project_id).into(),
                (&t.environment_id).into(),
                (&t.environment_name).into(),
                (&t.channel_id).into(),
                (&t.user_id).into(),
                t.direction.into(),
                (&t.message).into(),
                (&t.flow).into(),
                (&t.intent).into(),
                (&t.state).into(),
                (now + (c * ROWS_PER_INSERT + n) as i64).into(),
                Arg::Int(t.step_us),
                (&t.dep_version).into(),
                Arg::Text(t.outcome.map(Into::into)),
                (&t.replay).into(),
                (&t.miss).into(),
                Arg::Int(t.starts.then_some(1)),
            ]);
        }
        e.exec(&sql, &args).await?;
    }
    Ok(())
}

/// One bot error (`NewBotError`), with its id and time.
const INSERT_BOT_ERROR: &str = "INSERT INTO bot_errors (id, project_id, environment_id, channel_id, created_at, error_group, error_code, message, user_id) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

impl Db {
    /// Records transcript lines of steps that commit no channel step (the console's chat
    /// tester in an environment); one transaction.
    pub async fn insert_transcripts(&self, lines: &[NewTranscript]) -> DbResult<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let refs: Vec<&NewTranscript> = lines.iter().collect();
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        insert_transcript_rows(&mut *tx, &refs, now_ms()).await?;
        tx.commit().await.map_err(super::DbError::from_sqlx)?;
        Ok(())
    }

    /// Records bot errors of steps that commit no channel step (console, agent and task
    /// steps that failed, console steps); one transaction.
    pub async fn insert_bot_errors(&self, rows: &[NewBotError]) -> DbResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        for (i, b) in rows.iter().enumerate() {
            sqlx::query(INSERT_BOT_ERROR)
                .bind(new_row_id())
                .bind(&b.project_id)
                .bind(&b.environment_id)
                .bind(&b.channel_id)
                .bind(now + i as i64)
                .bind(b.group)
                .bind(&b.code)
                .bind(&b.message)
                .bind(&b.user_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await.map_err(super::DbError::from_sqlx)?;
        Ok(())
    }
}
