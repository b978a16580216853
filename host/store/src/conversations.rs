//! Sessions, inbound dedupe, the outbox, transcripts and schedules.

use super::rows::*;
use super::step::*;
use super::{Db, DbError, DbResult, now_ms};

/// Steps waiting for a group commit, whether a committer task is running, and where the
/// groups' transactions run ([`Runner`]).
pub(crate) struct CommitQueue {
    state: std::sync::Mutex<QueueState>,
    /// Where the groups' transactions run.
    pub(crate) runner: Runner,
    /// Where the committer task runs: the runtime that opened the database (the main one),
    /// whoever queues the first step. It holds the write turn while it works, for every
    /// tenant's steps; started from a task on the background runtime
    /// (`botbox_lanes::background`), it would run there at nice 10, and every tenant's
    /// commits would wait for the CPU that the tenant over its share leaves.
    runtime: tokio::runtime::Handle,
    /// Per committer task started, whether it ran on the background runtime (for tests).
    #[cfg(test)]
    ran_in_background: std::sync::Mutex<Vec<bool>>,
}

impl CommitQueue {
    /// Called on the runtime that is to run the committer.
    pub(crate) fn new(runner: Runner) -> CommitQueue {
        CommitQueue {
            state: Default::default(),
            runner,
            runtime: tokio::runtime::Handle::current(),
            #[cfg(test)]
            ran_in_background: Default::default(),
        }
    }

    /// Closes PostgreSQL's message-path connections, waiting for a group commit in
    /// progress to end.
    pub(crate) async fn close(&self) {
        if let Runner::Postgres(pg) = &self.runner {
            pg.close().await;
        }
    }

    /// Starts the committer task ([`Db::commit_queued`]) on [`CommitQueue::runtime`].
    fn start(self: &std::sync::Arc<Self>, db: &Db) {
        self.runtime.spawn(db.clone().commit_queued(self.clone()));
    }
}

/// Where a backend's group commits run, and its dedupe probes.
pub(crate) enum Runner {
    /// SQLite's writer connection, with read connections of its own for the probes.
    Sqlite(Box<super::writer::Writer>),
    /// PostgreSQL's message-path connections and batched probes: one statement per group
    /// when it fits (`super::pg_group`), else a transaction on the main pool.
    Postgres(Box<super::pg_group::Postgres>),
}

#[derive(Default)]
struct QueueState {
    jobs: Vec<Job>,
    /// Groups formed of main-lane steps alone while background steps waited, since the
    /// last group that took background steps ([`next_group`]).
    passed_over: usize,
    /// Outbox rows delivered and not yet recorded as sent ([`Db::outbox_sent_soon`]).
    sent: Vec<String>,
    /// A timer will ask for the `sent` ids to be recorded ([`SENT_DELAY`]).
    sent_timer: bool,
    /// The timer fired: the committer records the `sent` ids even with no step to ride with.
    sent_due: bool,
    committer: bool,
    /// Per group committed, its steps' lanes (true: background), for tests.
    #[cfg(test)]
    groups: Vec<Vec<bool>>,
}

/// A step queued for a group commit: its writes, who waits for the outcome, and whether it
/// was queued from the background runtime (a tenant over its share: `botbox_lanes`).
struct Job {
    write: StepWrite,
    reply: tokio::sync::oneshot::Sender<Committed>,
    background: bool,
}

/// The steps of the next group commit, taken out of `jobs` (in arrival order within a lane).
/// While a main-lane step waits, the group is main-lane steps alone: a tenant within its
/// share commits in a small group of its own, not in one with the many steps of a tenant
/// over its share, and a step never waits for more than the group being written when it
/// came and its own. Background steps go into the groups that follow, up to [`GROUP_MAX`]
/// in arrival order. So that a steady stream of main-lane steps cannot hold them back for
/// ever, after [`PASSED_OVER_MAX`] main-only groups in a row the next group is formed in
/// arrival order whatever the lanes. `passed_over` counts those groups.
fn next_group(jobs: &mut Vec<Job>, passed_over: &mut usize) -> Vec<Job> {
    let any_main = jobs.iter().any(|j| !j.background);
    let any_background = jobs.iter().any(|j| j.background);
    if any_main && any_background && *passed_over < PASSED_OVER_MAX {
        *passed_over += 1;
        let mut group = Vec::new();
        let mut rest = Vec::with_capacity(jobs.len());
        for j in jobs.drain(..) {
            if !j.background && group.len() < GROUP_MAX {
                group.push(j);
            } else {
                rest.push(j);
            }
        }
        *jobs = rest;
        return group;
    }
    let group: Vec<Job> = jobs.drain(..jobs.len().min(GROUP_MAX)).collect();
    if group.iter().any(|j| j.background) {
        *passed_over = 0;
    }
    group
}

impl std::fmt::Debug for CommitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitQueue")
    }
}

/// Steps committed together at most.
const GROUP_MAX: usize = 64;

/// Main-lane groups that may go before waiting background steps in a row (8; see
/// [`next_group`]). Default cost: a background step waits for at most 8 more transactions
/// than it would in arrival order (on SQLite, a few milliseconds). Lower, a tenant within
/// its share more often finds its step in a group with the steps of one over its share;
/// higher, the one over its share waits longer when others commit without a pause. What
/// a malicious tenant can do with it: nothing; being within its share only ever puts its
/// steps first, and its share is bounded (`LiveConfig::messages_per_tenant`).
const PASSED_OVER_MAX: usize = 8;

/// How long delivered rows may wait to be recorded as sent (50 ms) when no step comes to
/// take them into its group commit ([`Db::outbox_sent_soon`]); past [`SENT_MAX`] ids they
/// are recorded at once. Under a tenant's flood, recording each delivery as soon as it is
/// made would be half of the SQLite writer's transactions, and every tenant's commit would
/// wait behind them. Cost: a row stays `pending` in the database up to this long after
/// its delivery; a process that stops in that time sends it again after its lease (as it
/// does for a stop between a delivery and its record). Nothing a tenant does
/// changes it.
const SENT_DELAY: std::time::Duration = std::time::Duration::from_millis(50);

impl Db {
    pub async fn session(&self, id: &str) -> DbResult<Option<SessionRow>> {
        Ok(
            sqlx::query_as("SELECT body, version FROM sessions WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Stores a step's outcome, only if the session is still at `read_version`; returns
    /// `None`, writing nothing, when another step stored it in between: the caller runs the
    /// step again on the newer session.
    ///
    /// Steps are committed in groups: a step queues its writes, and one committer task
    /// commits everything queued in one transaction, a few statements for the whole group
    /// and one flush to disk, on SQLite's writer connection (`super::writer`, on the
    /// committer's own thread, under the write turn) or as one statement on PostgreSQL (`super::pg_group`). While a group commits
    /// the next one forms, so under load a commit's cost is shared by the steps that arrived
    /// meanwhile; a step alone commits at once. A group that fails (a constraint, a PostgreSQL deadlock with
    /// another replica's group) is retried step by step, so one bad step cannot fail the
    /// others. Each step's guarantees are its own transaction's: its session is written
    /// only if still at its read version, its provider id is recorded with it.
    pub async fn commit_step(&self, w: StepWrite) -> Committed {
        let queue = &self.commits;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let start = {
            let mut q = queue.state.lock().unwrap();
            q.jobs.push(Job {
                background: w.background,
                write: w,
                reply: tx,
            });
            !std::mem::replace(&mut q.committer, true)
        };
        if start {
            // The groups are committed by a task of their own, not by one of the waiting
            // callers: a caller that is cancelled (its HTTP client went away) then cannot
            // abandon the other steps of its group halfway through their transaction.
            queue.start(self);
        }
        rx.await.unwrap_or_else(|_| Err(DbError::worker_gone()))
    }

    /// Records delivered outbox rows as sent, soon. On SQLite the ids ride in the next group
    /// commit's transaction, or get one of their own when no step comes within
    /// `SENT_DELAY` or `SENT_MAX` ids are waiting, so that recording deliveries does not
    /// take the single write turn between two groups of steps: recorded one by one, under a
    /// tenant's flood they would take it as often as the steps do, and every tenant's commit
    /// would wait behind them.
    /// Returns once the ids are queued; a failure is logged, and the rows stay pending, to
    /// be sent again after their lease (as when a process stops between a delivery and its
    /// record).
    pub async fn outbox_sent_soon(&self, ids: Vec<String>) -> DbResult<()> {
        let queue = &self.commits;
        let (start, timer) = {
            let mut q = queue.state.lock().unwrap();
            q.sent.extend(ids);
            let timer = !std::mem::replace(&mut q.sent_timer, true);
            let start = q.sent.len() >= SENT_MAX && !std::mem::replace(&mut q.committer, true);
            (start, timer)
        };
        if start {
            queue.start(self);
        }
        if timer {
            let (db, queue) = (self.clone(), queue.clone());
            queue.runtime.clone().spawn(async move {
                tokio::time::sleep(SENT_DELAY).await;
                let start = {
                    let mut q = queue.state.lock().unwrap();
                    q.sent_timer = false;
                    // Taken by a group meanwhile, or due now.
                    q.sent_due = !q.sent.is_empty();
                    q.sent_due && !std::mem::replace(&mut q.committer, true)
                };
                if start {
                    queue.start(&db);
                }
            });
        }
        Ok(())
    }

    /// Records at once the deliveries [`Self::outbox_sent_soon`] still holds, and waits for
    /// a group commit in progress (at shutdown: a delivery not recorded would be sent again
    /// by the next process). On PostgreSQL a group in progress holds the committer's
    /// connection, which closing it waits for ([`CommitQueue::close`]).
    pub(crate) async fn flush_sent(&self) -> DbResult<()> {
        let queue = &self.commits;
        // On SQLite the committer holds the write turn for each group: taking it waits for one.
        let ids = {
            let _turn = self.write_turn().await;
            std::mem::take(&mut queue.state.lock().unwrap().sent)
        };
        if !ids.is_empty() {
            self.outbox_sent(&ids).await?;
        }
        // A group the committer took meanwhile has committed once the turn is free again.
        drop(self.write_turn().await);
        Ok(())
    }

    /// Commits queued steps, a group of up to [`GROUP_MAX`] per transaction, main-lane steps
    /// first ([`next_group`]), until no step is queued; each group's transaction also
    /// records every delivery queued by [`Self::outbox_sent_soon`] so far (in [`SENT_MAX`]
    /// chunks; after a stall that may be thousands of ids, the same work that separate
    /// transactions would do). Deliveries with no step to ride with get a transaction of their
    /// own once due ([`SENT_DELAY`], [`SENT_MAX`]). The transactions run on the SQLite
    /// writer's connection, synchronously on this task's thread ([`super::writer`]), this
    /// task holding the write turn, or on PostgreSQL's committer connection
    /// (`super::pg_group`).
    async fn commit_queued(self, queue: std::sync::Arc<CommitQueue>) {
        #[cfg(test)]
        queue
            .ran_in_background
            .lock()
            .unwrap()
            .push(botbox_lanes::in_background());
        loop {
            let _turn = self.write_turn().await;
            let (jobs, sent): (Vec<_>, Vec<_>) = {
                let mut q = queue.state.lock().unwrap();
                let sent_due = !q.sent.is_empty() && (q.sent_due || q.sent.len() >= SENT_MAX);
                if q.jobs.is_empty() && !sent_due {
                    // Under the lock: a step queued after this sees no committer and starts
                    // one, and ids left here have a timer that does.
                    q.committer = false;
                    return;
                }
                q.sent_due = false;
                let st = &mut *q;
                let jobs = next_group(&mut st.jobs, &mut st.passed_over);
                #[cfg(test)]
                q.groups.push(jobs.iter().map(|j| j.background).collect());
                // All of them: ids queued before a step are recorded by the time it commits.
                (jobs, std::mem::take(&mut q.sent))
            };
            let (writes, replies): (Vec<_>, Vec<_>) =
                jobs.into_iter().map(|j| (j.write, j.reply)).unzip();
            let started = std::time::Instant::now();
            metrics::histogram!("botbox_commit_steps").record(writes.len() as f64);
            let results = match &queue.runner {
                Runner::Sqlite(writer) => writer.commit(&writes, &sent),
                Runner::Postgres(pg) => self.commit_group_on_postgres(pg, &writes, &sent).await,
            };
            metrics::histogram!("botbox_commit_duration_seconds")
                .record(started.elapsed().as_secs_f64());
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
            // The group's callers were just woken, the last of them into this worker's
            // next-task slot, which no other worker may take: let them run before the next
            // group holds the worker (on SQLite, for the whole of its transaction).
            tokio::task::yield_now().await;
        }
    }

    /// Steps queued for the next group commit (tests form groups with it).
    #[cfg(test)]
    pub(crate) fn queued_steps(&self) -> usize {
        self.commits.state.lock().unwrap().jobs.len()
    }

    /// Commits one step in its own transaction on the pool, statement by statement: a
    /// provider id recorded meanwhile by another transaction makes it write nothing, where
    /// the one-statement form would fail.
    async fn commit_alone(&self, w: &StepWrite) -> Committed {
        self.commit_statements(std::slice::from_ref(w), &[])
            .await
            .map(|mut v| v.pop().expect("one result"))
    }

    /// PostgreSQL's group commit: one transaction for the group; if it fails, the delivery
    /// records in one of their own, then each step in one of its own (as the SQLite writer
    /// does).
    async fn commit_group_on_postgres(
        &self,
        pg: &super::pg_group::Postgres,
        writes: &[StepWrite],
        sent: &[String],
    ) -> Vec<Committed> {
        match self.commit_on_postgres(pg, writes, sent).await {
            Ok(stored) => stored.into_iter().map(Ok).collect(),
            Err(e) => {
                tracing::warn!(error = %e, steps = writes.len(), sent = sent.len(), "group commit failed; committing its parts one by one");
                if !sent.is_empty()
                    && let Err(e) = self.commit_statements(&[], sent).await
                {
                    // The rows stay pending: sent again after their lease.
                    tracing::error!(error = %format!("{e:#}"), rows = sent.len(), "outbox: recording deliveries");
                }
                let mut out = Vec::with_capacity(writes.len());
                for w in writes {
                    out.push(self.commit_alone(w).await);
                }
                out
            }
        }
    }

    /// One transaction for `writes` (a group commit, without delivery records; see
    /// `group_statements`), on the path the backend's live commits take: on SQLite the
    /// writer's connection, under the write turn (a group that fails is retried step by step
    /// there); on PostgreSQL the group's one statement when it fits, else a pool
    /// connection (a failure fails the call). Public so that tests can form a group of their
    /// choosing.
    pub async fn commit_together(&self, writes: Vec<StepWrite>) -> DbResult<Vec<Committed>> {
        match &self.commits.runner {
            Runner::Sqlite(writer) => {
                let _turn = self.write_turn().await;
                Ok(writer.commit(&writes, &[]))
            }
            Runner::Postgres(pg) => Ok(self
                .commit_on_postgres(pg, &writes, &[])
                .await?
                .into_iter()
                .map(Ok)
                .collect()),
        }
    }

    /// One transaction for `writes` and the delivery records `sent` on PostgreSQL: one
    /// statement when the group allows it ([`super::pg_group`]), else statement by
    /// statement.
    async fn commit_on_postgres(
        &self,
        pg: &super::pg_group::Postgres,
        writes: &[StepWrite],
        sent: &[String],
    ) -> DbResult<Vec<Option<Vec<OutboxRow>>>> {
        if super::pg_group::fits(writes) {
            super::pg_group::commit(pg, writes, sent, now_ms()).await
        } else {
            self.commit_statements(writes, sent).await
        }
    }

    /// One transaction for `writes` and the delivery records `sent` on the pool, one
    /// statement per session and per table ([`group_statements`]).
    async fn commit_statements(
        &self,
        writes: &[StepWrite],
        sent: &[String],
    ) -> DbResult<Vec<Option<Vec<OutboxRow>>>> {
        let mut tx = self.pool.begin().await?;
        let stored = group_statements(&mut *tx, writes, sent, now_ms()).await?;
        tx.commit().await?;
        Ok(stored)
    }

    /// Whether a step already ran and stored the message `provider_id` of a channel user.
    ///
    /// The key is (channel, user, id): for generic channels the id is the sender's own
    /// (`messages[].id`) and unique only per user, so user X's id 42 must not hide user Y's
    /// id 42. For providers whose ids are unique per bot (LINE's `webhookEventId`, Telegram's
    /// `update_id`, Messenger's `mid`, Slack's `event_id`, WhatsApp's and Webex's message
    /// ids) adding the user changes nothing. Each channel module documents its id. The id is
    /// recorded by the step's own commit ([`StepWrite::provider_id`]), never before it.
    pub async fn seen(&self, channel_id: &str, user_id: &str, provider_id: &str) -> DbResult<bool> {
        let key = seen_key(user_id, provider_id);
        match &self.commits.runner {
            Runner::Sqlite(writer) => writer.seen(channel_id, &key),
            Runner::Postgres(pg) => pg.seen(&self.commits.runtime, channel_id, key).await,
        }
    }

    /// Deliveries due now, oldest first, at most `per_channel` of each channel (so one
    /// channel's backlog cannot crowd out the others) and `limit` in all, leaving out the
    /// channels in `except` (those whose rows are already being sent).
    pub async fn due_outbox(
        &self,
        now: i64,
        per_channel: i64,
        limit: i64,
        except: &[String],
    ) -> DbResult<Vec<OutboxRow>> {
        let outbox = super::due::DueRows {
            table: "outbox",
            key: "channel_id",
            cols: "id, channel_id, url, headers, body, status, attempts, next_at, last_error",
            order: "next_at, created_at",
            // Rows stored by a newer version wait for it (see `OUTBOX_FORMAT`).
            filter: format!("format <= {OUTBOX_FORMAT}"),
        };
        self.due_per_key(&outbox, now, per_channel, limit, except)
            .await
    }

    /// Claims a delivery for `lease_ms` (so another replica does not send it at the same
    /// time); false when someone else claimed it first.
    pub async fn claim_outbox(&self, row: &OutboxRow, lease_ms: i64) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        Ok(sqlx::query(
            "UPDATE outbox SET next_at = $1 WHERE id = $2 AND status = 'pending' AND next_at = $3",
        )
        .bind(now_ms() + lease_ms)
        .bind(&row.id)
        .bind(row.next_at)
        .execute(&self.pool)
        .await?
        .rows_affected()
            == 1)
    }

    /// Records a delivery attempt: sent, retry at `next_at`, or failed for good.
    pub async fn outbox_attempt(
        &self,
        id: &str,
        status: &str,
        attempts: i64,
        next_at: i64,
        error: Option<&str>,
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(
            "UPDATE outbox SET status = $1, attempts = $2, next_at = $3, last_error = $4 WHERE id = $5",
        )
        .bind(status)
        .bind(attempts)
        .bind(next_at)
        .bind(error)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records first attempts that succeeded, up to `SENT_MAX` rows per statement, now.
    pub async fn outbox_sent(&self, ids: &[String]) -> DbResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let _turn = self.write_turn().await;
        mark_sent(&mut *self.pool.acquire().await?, ids, now_ms()).await
    }

    pub async fn outbox_rows(&self, channel_id: &str) -> DbResult<Vec<OutboxRow>> {
        Ok(sqlx::query_as(
            "SELECT id, channel_id, url, headers, body, status, attempts, next_at, last_error FROM outbox \
             WHERE channel_id = $1 ORDER BY created_at, id",
        )
        .bind(channel_id)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn list_transcripts(
        &self,
        project_id: &str,
        environment_name: &str,
        start: i64,
        end: i64,
    ) -> DbResult<Vec<TranscriptRow>> {
        Ok(sqlx::query_as(
            "SELECT id, environment_name, channel_id, user_id, direction, message, flow, intent, state, created_at, step_us, dep_version \
             FROM transcripts WHERE project_id = $1 AND environment_name = $2 AND created_at >= $3 AND created_at <= $4 \
             ORDER BY created_at, id",
        )
        .bind(project_id)
        .bind(environment_name)
        .bind(start)
        .bind(end)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Transcript lines of an environment after `after` (Unix ms, exclusive) up to `end`
    /// (inclusive), of one user or all, oldest first, at most `limit`: a page of the
    /// structured transcript (`GET /projects/{id}/transcripts`).
    pub async fn transcript_page(
        &self,
        project_id: &str,
        environment_name: &str,
        user_id: Option<&str>,
        after: i64,
        end: i64,
        limit: i64,
    ) -> DbResult<Vec<TranscriptRow>> {
        let by_user = if user_id.is_some() {
            "AND user_id = $6"
        } else {
            ""
        };
        let sql = format!(
            "SELECT id, environment_name, channel_id, user_id, direction, message, flow, intent, state, created_at, step_us, dep_version \
             FROM transcripts WHERE project_id = $1 AND environment_name = $2 AND created_at > $3 AND created_at <= $4 \
             {by_user} ORDER BY created_at, id LIMIT $5"
        );
        let mut q = sqlx::query_as(&sql)
            .bind(project_id)
            .bind(environment_name)
            .bind(after)
            .bind(end)
            .bind(limit);
        if let Some(u) = user_id {
            q = q.bind(u);
        }
        Ok(q.fetch_all(&self.pool).await?)
    }

    pub async fn due_schedules(&self, now: i64, limit: i64) -> DbResult<Vec<ScheduleRow>> {
        Ok(sqlx::query_as(
            "SELECT id, session_id, channel_id, user_id, message, next_at, end_at, every_ms FROM schedules \
             WHERE next_at <= $1 AND format <= $3 ORDER BY next_at LIMIT $2",
        )
        .bind(now)
        .bind(limit)
        .bind(SCHEDULE_FORMAT)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Moves a fired schedule to its next time, or removes it; false when another replica
    /// already did (it fires there).
    pub async fn advance_schedule(&self, row: &ScheduleRow, next: Option<i64>) -> DbResult<bool> {
        let q = match next {
            Some(n) => {
                sqlx::query("UPDATE schedules SET next_at = $1 WHERE id = $2 AND next_at = $3")
                    .bind(n)
                    .bind(&row.id)
                    .bind(row.next_at)
            }
            None => sqlx::query("DELETE FROM schedules WHERE id = $1 AND next_at = $2")
                .bind(&row.id)
                .bind(row.next_at),
        };
        Ok(q.execute(&self.pool).await?.rows_affected() == 1)
    }

    pub async fn environment_by_id(&self, id: &str) -> DbResult<Option<super::EnvironmentRow>> {
        Ok(sqlx::query_as(
            "SELECT id, project_id, name, slug, deployment_version, created_at FROM environments WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn environment_by_name(
        &self,
        project_id: &str,
        name: &str,
    ) -> DbResult<Option<super::EnvironmentRow>> {
        Ok(sqlx::query_as(
            "SELECT id, project_id, name, slug, deployment_version, created_at FROM environments \
             WHERE project_id = $1 AND (name = $2 OR slug = $2)",
        )
        .bind(project_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }
}

impl Db {
    /// Bot errors of a project, newest first, filtered as asked.
    pub async fn bot_errors(
        &self,
        project_id: &str,
        q: &BotErrorQuery,
    ) -> DbResult<Vec<BotErrorRow>> {
        let codes = if q.codes.is_empty() {
            String::new()
        } else {
            format!(
                "AND error_code IN ({})",
                super::numbered_params(9, q.codes.len())
            )
        };
        let sql = format!(
            "SELECT id, environment_id, channel_id, user_id, created_at, error_group, error_code, message FROM bot_errors \
             WHERE project_id = $1 AND created_at >= $2 AND created_at <= $3 \
             AND ($4 IS NULL OR environment_id = $4) AND ($5 IS NULL OR channel_id = $5) \
             AND ($6 IS NULL OR error_group = $6) {codes} \
             ORDER BY created_at DESC, id LIMIT $7 OFFSET $8"
        );
        let mut query = sqlx::query_as(&sql)
            .bind(project_id)
            .bind(q.start)
            .bind(q.end)
            .bind(&q.environment_id)
            .bind(&q.channel_id)
            .bind(&q.group)
            .bind(q.limit)
            .bind(q.offset);
        for c in &q.codes {
            query = query.bind(c);
        }
        Ok(query.fetch_all(&self.pool).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(i: usize) -> StepWrite {
        StepWrite {
            session_id: format!("s{i}"),
            environment_id: "e".into(),
            channel_id: "c".into(),
            user_id: format!("u{i}"),
            body: "{}".into(),
            ..StepWrite::default()
        }
    }

    /// PostgreSQL commits in groups too: steps queued while a group commits go in one
    /// transaction, and a group with a failing step is committed again step by step (the
    /// others stored with their transcripts and outbox rows, the failing one writing
    /// nothing), with the delivery records queued with it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_commits_in_groups_and_a_failing_step_fails_alone() {
        use sqlx::Executor;
        let Some(db) = super::super::test_postgres().await else {
            return;
        };
        // Stands for any error a step's statements can meet.
        db.pool
            .execute(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN \
                 IF NEW.user_id = 'bad' THEN RAISE EXCEPTION 'refused by the test'; END IF; \
                 RETURN NEW; END $$ LANGUAGE plpgsql",
            )
            .await
            .unwrap();
        db.pool
            .execute("CREATE TRIGGER refuse BEFORE INSERT ON transcripts FOR EACH ROW EXECUTE FUNCTION refuse()")
            .await
            .unwrap();
        use crate::test_steps::step;
        let first = db.commit_step(step("early")).await.unwrap().unwrap();
        let queue = db.commits.clone();
        // Stand for a committer at work (on SQLite the write turn would be held), so that
        // the steps and the delivery record queue up; then start one.
        while std::mem::replace(&mut queue.state.lock().unwrap().committer, true) {
            tokio::task::yield_now().await;
        }
        db.outbox_sent_soon(vec![first[0].id.clone()])
            .await
            .unwrap();
        let outcomes = crate::test_steps::commit_three(&db, || queue.start(&db)).await;
        let groups = queue.state.lock().unwrap().groups.clone();
        assert_eq!(
            groups,
            [vec![false], vec![false; 3]],
            "the first step, then one group of three"
        );
        crate::test_steps::failing_step_failed_alone(&db, &first[0].id, &outcomes).await;
    }

    /// The group committer holds the write turn for every tenant's steps: it runs on the
    /// runtime that opened the database even when the step that starts it comes from the
    /// background runtime (a tenant over its share), not at that runtime's nice 10.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn the_committer_runs_on_the_runtime_that_opened_the_database() {
        let (_dir, db) = super::super::test_sqlite().await;
        let d = db.clone();
        let stored = botbox_lanes::background()
            .spawn(async move {
                assert!(botbox_lanes::in_background());
                d.commit_step(StepWrite {
                    background: true,
                    ..write(1)
                })
                .await
            })
            .await
            .unwrap()
            .unwrap();
        assert!(stored.is_some(), "the step was committed");
        let ran = db.commits.ran_in_background.lock().unwrap().clone();
        assert_eq!(ran, vec![false]);
    }

    /// Marking deliveries sent looks rows up by id, however many ids and however many
    /// pending rows other channels have (SQLite's plan; see [`outbox_sent_sql`]).
    #[tokio::test]
    async fn marking_sent_rows_does_not_scan_the_pending_backlog() {
        let (_dir, db) = super::super::test_sqlite().await;
        for n in [1, 4, 8, 64, 256] {
            let sql = outbox_sent_sql(n).replace('$', "?");
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(&explain).bind(0i64);
            for i in 0..n {
                q = q.bind(format!("id{i}"));
            }
            let plan: Vec<String> = q
                .fetch_all(&db.pool)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.3)
                .collect();
            assert!(
                plan.iter().all(|p| !p.contains("outbox_due")),
                "{n} ids: the plan scans the due index: {plan:?}"
            );
            assert!(
                plan.iter().any(|p| p.contains("autoindex_outbox")),
                "{n} ids: not looked up by id: {plan:?}"
            );
        }
        // And it marks exactly the pending rows it names.
        let mut w = write(1);
        for i in 0..6 {
            w.outbox
                .push((format!("https://example.com/{i}"), "[]".into(), "{}".into()));
        }
        let rows = db.commit_step(w).await.unwrap().unwrap();
        db.outbox_attempt(&rows[5].id, "failed", 12, 0, Some("gone"))
            .await
            .unwrap();
        let named: Vec<String> = rows[1..].iter().map(|r| r.id.clone()).collect();
        db.outbox_sent(&named).await.unwrap();
        let stored = db.outbox_rows("c").await.unwrap();
        let status: Vec<&str> = rows
            .iter()
            .map(|r| {
                let s = stored
                    .iter()
                    .find(|s| s.id == r.id)
                    .expect("the row is stored");
                s.status.as_str()
            })
            .collect();
        assert_eq!(
            status,
            ["pending", "sent", "sent", "sent", "sent", "failed"]
        );
    }

    /// Deliveries recorded with [`Db::outbox_sent_soon`] are written with the next group of
    /// steps (queued while the write turn was busy, both land in one group), and no later
    /// than that group's steps; more than one statement's worth of ids included.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deliveries_recorded_soon_are_written_no_later_than_the_next_step() {
        let (_dir, db) = super::super::test_sqlite().await;
        let mut w = write(1);
        for i in 0..(SENT_MAX + 44) {
            w.outbox
                .push((format!("https://example.com/{i}"), "[]".into(), "{}".into()));
        }
        let rows = db.commit_step(w).await.unwrap().unwrap();
        let ids = |r: &[OutboxRow]| r.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        let queued = |db: &Db| {
            let q = db.commits.state.lock().unwrap();
            (q.jobs.len(), q.sent.len())
        };
        // Another write holds the turn while the ids and a step queue up behind it.
        let turn = db.write_turn().await;
        // In two calls, as the delivery task sends them; the last row stays pending.
        db.outbox_sent_soon(ids(&rows[..10])).await.unwrap();
        db.outbox_sent_soon(ids(&rows[10..rows.len() - 1]))
            .await
            .unwrap();
        let step = tokio::spawn({
            let db = db.clone();
            async move { db.commit_step(write(2)).await }
        });
        while queued(&db).0 == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(queued(&db), (1, rows.len() - 1), "one group takes both");
        drop(turn);
        step.await.unwrap().unwrap().unwrap();
        assert_eq!(queued(&db), (0, 0));
        let stored = db.outbox_rows("c").await.unwrap();
        let sent = stored.iter().filter(|r| r.status == "sent").count();
        assert_eq!(sent, rows.len() - 1, "every id queued before the step");
        let last = stored.iter().find(|r| r.id == rows[rows.len() - 1].id);
        assert_eq!(last.map(|r| r.status.as_str()), Some("pending"));
    }

    /// With no step to ride with, delivery records get a transaction of their own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deliveries_recorded_soon_are_written_without_a_step() {
        let (_dir, db) = super::super::test_sqlite().await;
        let mut w = write(1);
        w.outbox
            .push(("https://example.com/0".into(), "[]".into(), "{}".into()));
        let rows = db.commit_step(w).await.unwrap().unwrap();
        db.outbox_sent_soon(vec![rows[0].id.clone()]).await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let stored = db.outbox_rows("c").await.unwrap();
            if stored[0].status == "sent" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never recorded");
            tokio::task::yield_now().await;
        }
    }

    /// Bot errors are written with their step, listed by project, and pruned by age.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bot_errors_are_stored_with_the_step_and_pruned_by_age() {
        let (_dir, db) = super::super::test_sqlite().await;
        let mut w = write(1);
        w.errors.push(NewBotError {
            project_id: "p".into(),
            environment_id: "e".into(),
            channel_id: "c".into(),
            user_id: Some("u".into()),
            group: "bot",
            code: "method-error".into(),
            message: "method boom threw".into(),
        });
        db.commit_step(w).await.unwrap().unwrap();
        let all = BotErrorQuery {
            end: i64::MAX,
            limit: 10,
            ..BotErrorQuery::default()
        };
        let listed = db.bot_errors("p", &all).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].error_code, "method-error");
        assert!(db.bot_errors("other", &all).await.unwrap().is_empty());
        let by_code = BotErrorQuery {
            codes: vec!["cpu-limit".into()],
            ..all.clone()
        };
        assert!(db.bot_errors("p", &by_code).await.unwrap().is_empty());
        let prune = |before| db.prune(crate::Expired::BotErrors, before);
        assert_eq!(prune(listed[0].created_at).await.unwrap(), 0);
        assert_eq!(prune(listed[0].created_at + 1).await.unwrap(), 1);
        assert!(db.bot_errors("p", &all).await.unwrap().is_empty());
    }

    /// Rows of channels the poller is already sending are left out, so another channel's
    /// due row is found even when the busy ones alone would fill the limit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn due_rows_leave_out_busy_channels() {
        let (_dir, db) = super::super::test_sqlite().await;
        for (i, ch) in ["busy-1", "busy-2", "busy-1", "other"].iter().enumerate() {
            super::super::due::tests::insert(&db, &format!("r{i}"), ch, i as i64).await;
        }
        let ids = |rows: Vec<OutboxRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        // The limit is filled by the busy channels' rows...
        assert_eq!(
            ids(db.due_outbox(100, 8, 2, &[]).await.unwrap()),
            ["r0", "r1"]
        );
        // ...unless they are left out.
        let busy = ["busy-1".to_string(), "busy-2".to_string()];
        assert_eq!(ids(db.due_outbox(100, 8, 2, &busy).await.unwrap()), ["r3"]);
    }

    fn job(i: usize, background: bool) -> Job {
        Job {
            write: write(i),
            reply: tokio::sync::oneshot::channel().0,
            background,
        }
    }

    fn sessions(group: &[Job]) -> Vec<String> {
        group.iter().map(|j| j.write.session_id.clone()).collect()
    }

    /// While a main-lane step waits, the next group is main-lane steps alone, in arrival
    /// order; the background steps, still in theirs, form the group after.
    #[test]
    fn main_lane_steps_form_a_group_of_their_own_first() {
        let mut jobs: Vec<Job> = [true, true, false, true, false]
            .into_iter()
            .enumerate()
            .map(|(i, bg)| job(i, bg))
            .collect();
        let mut passed_over = 0;
        let first = next_group(&mut jobs, &mut passed_over);
        assert_eq!(sessions(&first), ["s2", "s4"]);
        assert_eq!(passed_over, 1);
        let second = next_group(&mut jobs, &mut passed_over);
        assert_eq!(sessions(&second), ["s0", "s1", "s3"]);
        assert_eq!(passed_over, 0, "background steps were committed");
        assert!(jobs.is_empty());
    }

    /// A steady stream of main-lane steps passes a waiting background step over at most
    /// PASSED_OVER_MAX times in a row; then a group in arrival order takes it.
    #[test]
    fn background_steps_are_passed_over_a_bounded_number_of_times() {
        let mut jobs = vec![job(0, true)];
        let mut passed_over = 0;
        let mut groups = 0;
        loop {
            jobs.push(job(groups + 1, false));
            let group = next_group(&mut jobs, &mut passed_over);
            groups += 1;
            if group.iter().any(|j| j.background) {
                assert_eq!(sessions(&group)[0], "s0", "arrival order");
                break;
            }
            assert!(groups <= PASSED_OVER_MAX, "passed over {groups} times");
        }
        assert_eq!(groups, PASSED_OVER_MAX + 1);
    }

    /// Either way a group holds at most GROUP_MAX steps.
    #[test]
    fn a_group_holds_at_most_group_max_steps() {
        let mut jobs: Vec<Job> = (0..GROUP_MAX + 5).map(|i| job(i, i == 0)).collect();
        let mut passed_over = 0;
        assert_eq!(next_group(&mut jobs, &mut passed_over).len(), GROUP_MAX);
        assert_eq!(jobs.len(), 5, "the rest wait");
        assert!(jobs[0].background, "the background step, first of the rest");
        let mut jobs: Vec<Job> = (0..GROUP_MAX + 5).map(|i| job(i, true)).collect();
        assert_eq!(next_group(&mut jobs, &mut passed_over).len(), GROUP_MAX);
        assert_eq!(jobs.len(), 5);
    }

    /// Through the committer: background steps queued first (a tenant over its share) and a
    /// main-lane step queued after them while the write turn was busy; the main-lane step
    /// is committed first, in a group of its own, and every step is stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_main_lane_step_is_committed_before_background_steps_queued_earlier() {
        let (_dir, db) = super::super::test_sqlite().await;
        let queue = db.commits.clone();
        let turn = db.write_turn().await;
        let mut waiting = Vec::new();
        for i in 0..3 {
            let d = db.clone();
            waiting.push(botbox_lanes::background().spawn(async move {
                d.commit_step(StepWrite {
                    background: true,
                    ..write(i)
                })
                .await
            }));
            while queue.state.lock().unwrap().jobs.len() < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        let d = db.clone();
        waiting.push(tokio::spawn(async move { d.commit_step(write(3)).await }));
        while queue.state.lock().unwrap().jobs.len() < 4 {
            tokio::task::yield_now().await;
        }
        drop(turn);
        for w in waiting {
            assert!(w.await.unwrap().unwrap().is_some(), "stored");
        }
        let groups = queue.state.lock().unwrap().groups.clone();
        assert_eq!(groups, [vec![false], vec![true, true, true]]);
    }

    /// Delivery records with no step to ride with wait (SENT_DELAY) rather than take the
    /// write turn at once, unless SENT_MAX of them are waiting; either way they are written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delivery_records_alone_wait_unless_many() {
        let (_dir, db) = super::super::test_sqlite().await;
        let queue = db.commits.clone();
        let mut w = write(1);
        w.outbox
            .push(("https://example.com/0".into(), "[]".into(), "{}".into()));
        let rows = db.commit_step(w).await.unwrap().unwrap();
        let committer = |q: &CommitQueue| q.state.lock().unwrap().committer;
        // The step's own committer may still be finishing after its answer: wait until it
        // has left, so that a committer seen below is one the record started.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while committer(&queue) {
            assert!(
                std::time::Instant::now() < deadline,
                "the step's committer never left"
            );
            tokio::task::yield_now().await;
        }
        // The turn held, a committer that started would stay (waiting for it).
        let turn = db.write_turn().await;
        db.outbox_sent_soon(vec![rows[0].id.clone()]).await.unwrap();
        assert!(
            !committer(&queue),
            "one record started a transaction at once"
        );
        let many: Vec<String> = (0..SENT_MAX).map(|i| format!("none-{i}")).collect();
        db.outbox_sent_soon(many).await.unwrap();
        assert!(committer(&queue), "SENT_MAX records waited");
        drop(turn);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while db.outbox_rows("c").await.unwrap()[0].status != "sent" {
            assert!(std::time::Instant::now() < deadline, "never recorded");
            tokio::task::yield_now().await;
        }
    }

    /// A caller whose HTTP client went away is dropped while its group's transaction runs:
    /// the other steps of the group still get their outcome, and its own is committed too.
    /// (When the first caller led the group itself, dropping it rolled the group back and
    /// the others failed with "worker crashed".)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_caller_does_not_abandon_its_group() {
        let (_dir, db) = super::super::test_sqlite().await;
        let queue = db.commits.clone();
        // Hold the write turn so that every step queues.
        let turn = db.write_turn().await;
        let mut first = Box::pin(db.commit_step(write(0)));
        assert!(futures::poll!(first.as_mut()).is_pending());
        let others: Vec<_> = (1..8)
            .map(|i| {
                let db = db.clone();
                tokio::spawn(async move { db.commit_step(write(i)).await })
            })
            .collect();
        while queue.state.lock().unwrap().jobs.len() < 8 {
            tokio::task::yield_now().await;
        }
        drop(turn);
        // The first caller runs again (were it the group's leader, it would now take the
        // turn and begin the group's transaction), and is then cancelled.
        let _ = futures::poll!(first.as_mut());
        drop(first);
        for o in others {
            let committed = o.await.unwrap().expect("the step's commit");
            assert!(
                committed.is_some(),
                "the session was free, so it was written"
            );
        }
        for i in 0..8 {
            assert!(
                db.session(&format!("s{i}")).await.unwrap().is_some(),
                "session s{i} not written"
            );
        }
    }
}
