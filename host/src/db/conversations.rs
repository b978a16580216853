//! Sessions, inbound dedupe, the outbox, transcripts and schedules.

use super::{Db, DbError, DbResult, new_id, now_ms};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    pub body: String,
    pub version: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxRow {
    pub id: String,
    pub channel_id: String,
    pub url: String,
    pub headers: String,
    pub body: String,
    pub status: String,
    pub attempts: i64,
    pub next_at: i64,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TranscriptRow {
    pub id: String,
    pub environment_name: String,
    pub channel_id: String,
    pub user_id: String,
    pub direction: String,
    pub message: String,
    pub flow: Option<String>,
    pub intent: Option<String>,
    pub state: Option<String>,
    pub created_at: i64,
}

/// A transcript line to record.
#[derive(Debug, Clone)]
pub struct NewTranscript {
    pub project_id: String,
    pub environment_id: String,
    pub environment_name: String,
    pub channel_id: String,
    pub user_id: String,
    /// `in` or `out`.
    pub direction: &'static str,
    pub message: String,
    pub flow: Option<String>,
    pub intent: Option<String>,
    pub state: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ScheduleRow {
    pub id: String,
    pub session_id: String,
    pub channel_id: String,
    pub user_id: String,
    pub message: String,
    pub next_at: i64,
    pub end_at: Option<i64>,
    pub every_ms: Option<i64>,
}

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
    pub transcripts: Vec<NewTranscript>,
    /// (url, headers JSON, body)
    pub outbox: Vec<(String, String, String)>,
    pub schedules_add: Vec<ScheduleRow>,
    pub schedules_remove: Vec<String>,
    /// Outbox rows become due for the polling worker only this long after the commit: the
    /// process that made them sends them at once, and a crash leaves them to the worker.
    pub outbox_lease_ms: i64,
}

/// The outcome of one step's commit: its outbox rows, or `None` when another step stored
/// the session in between (nothing of it was written).
pub type Committed = DbResult<Option<Vec<OutboxRow>>>;

/// Steps waiting for a group commit (SQLite).
#[derive(Default)]
pub(crate) struct CommitQueue {
    jobs: std::sync::Mutex<Vec<(StepWrite, tokio::sync::oneshot::Sender<Committed>)>>,
}

impl std::fmt::Debug for CommitQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitQueue")
    }
}

/// Steps committed together at most.
const GROUP_MAX: usize = 64;

/// Rows per multi-row INSERT: 12 parameters each at most, 4,800 in all, well under SQLite's
/// 32,766 and PostgreSQL's 65,535. Larger sets are inserted in chunks.
const ROWS_PER_INSERT: usize = 400;

/// The stored dedupe key of a provider id: the user's id, length-prefixed so that no pair of
/// (user, id) can spell another's, then the id.
fn seen_key(user_id: &str, provider_id: &str) -> String {
    format!("{}:{user_id}:{provider_id}", user_id.len())
}

/// `($1, …, $cols), ($cols+1, …), …` for `rows` rows.
fn placeholders(rows: usize, cols: usize) -> String {
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
    /// On SQLite (one writer at a time) steps are committed in groups: a step queues its
    /// writes, and whoever holds the write turn commits everything queued in one
    /// transaction, a few statements for the whole group. A group that fails is retried
    /// step by step, so one bad step cannot fail the others.
    pub async fn commit_step(&self, w: StepWrite) -> Committed {
        let Some(queue) = &self.commits else {
            return self.commit_alone(&w).await;
        };
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        queue.jobs.lock().unwrap().push((w, tx));
        let _turn = self.write_turn().await;
        // Lead groups until this step's own is done (the queue is first in, first out, so
        // only the steps queued before it are committed here); later steps lead their own.
        loop {
            match rx.try_recv() {
                Ok(result) => return result,
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                    return Err(DbError::Sqlx(sqlx::Error::WorkerCrashed));
                }
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {}
            }
            let jobs: Vec<_> = {
                let mut q = queue.jobs.lock().unwrap();
                let n = q.len().min(GROUP_MAX);
                q.drain(..n).collect()
            };
            if jobs.is_empty() {
                // Not reached: a step is queued until a leader answers it.
                break;
            }
            let (writes, replies): (Vec<_>, Vec<_>) = jobs.into_iter().unzip();
            let results = match self.commit_together(&writes).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, steps = writes.len(), "group commit failed; committing its steps one by one");
                    let mut r = Vec::with_capacity(writes.len());
                    for w in &writes {
                        r.push(self.commit_alone(w).await);
                    }
                    r
                }
            };
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
        }
        rx.await
            .unwrap_or_else(|_| Err(DbError::Sqlx(sqlx::Error::WorkerCrashed)))
    }

    /// Commits one step in its own transaction.
    async fn commit_alone(&self, w: &StepWrite) -> Committed {
        self.commit_together(std::slice::from_ref(w))
            .await
            .and_then(|mut v| v.pop().expect("one result"))
    }

    /// One transaction for `writes` (what a group commit runs): each session written if
    /// still at its read version; then the transcripts and outbox rows of the steps whose
    /// session was written, one statement each for the whole group; then schedules. Public
    /// so that tests can form a group of their choosing.
    pub async fn commit_together(&self, writes: &[StepWrite]) -> DbResult<Vec<Committed>> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let mut stored = Vec::with_capacity(writes.len());
        for w in writes {
            let done = match w.read_version {
                None => sqlx::query(
                    "INSERT INTO sessions (id, environment_id, channel_id, user_id, body, version, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, 1, $6) ON CONFLICT (id) DO NOTHING",
                )
                .bind(&w.session_id)
                .bind(&w.environment_id)
                .bind(&w.channel_id)
                .bind(&w.user_id)
                .bind(&*w.body)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected(),
                Some(v) => sqlx::query(
                    "UPDATE sessions SET body = $1, version = $2, updated_at = $3 WHERE id = $4 AND version = $5",
                )
                .bind(&*w.body)
                .bind(v + 1)
                .bind(now)
                .bind(&w.session_id)
                .bind(v)
                .execute(&mut *tx)
                .await?
                .rows_affected(),
            };
            stored.push(done == 1);
        }
        let kept: Vec<&StepWrite> = writes
            .iter()
            .zip(&stored)
            .filter(|(_, ok)| **ok)
            .map(|(w, _)| w)
            .collect();
        let lines: Vec<&NewTranscript> = kept.iter().flat_map(|w| &w.transcripts).collect();
        // In chunks: one statement per chunk keeps under the databases' caps on parameters
        // (SQLite 32,766, PostgreSQL 65,535) however many lines a group of steps has.
        for (c, chunk) in lines.chunks(ROWS_PER_INSERT).enumerate() {
            let sql = format!(
                "INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, user_id, \
                 direction, message, flow, intent, state, created_at) VALUES {}",
                placeholders(chunk.len(), 12)
            );
            let mut q = sqlx::query(&sql);
            for (n, t) in chunk.iter().enumerate() {
                q = q
                    .bind(new_id())
                    .bind(&t.project_id)
                    .bind(&t.environment_id)
                    .bind(&t.environment_name)
                    .bind(&t.channel_id)
                    .bind(&t.user_id)
                    .bind(t.direction)
                    .bind(&t.message)
                    .bind(&t.flow)
                    .bind(&t.intent)
                    .bind(&t.state)
                    // Keeps the order of lines when listed by time.
                    .bind(now + (c * ROWS_PER_INSERT + n) as i64);
            }
            q.execute(&mut *tx).await?;
        }
        let mut created: Vec<Vec<OutboxRow>> = Vec::with_capacity(kept.len());
        for w in &kept {
            created.push(
                w.outbox
                    .iter()
                    .map(|(url, headers, body)| OutboxRow {
                        id: new_id(),
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
        let rows: Vec<&OutboxRow> = created.iter().flatten().collect();
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let sql = format!(
                "INSERT INTO outbox (id, channel_id, url, headers, body, status, attempts, next_at, created_at) VALUES {}",
                placeholders(chunk.len(), 9)
            );
            let mut q = sqlx::query(&sql);
            for r in chunk {
                q = q
                    .bind(&r.id)
                    .bind(&r.channel_id)
                    .bind(&r.url)
                    .bind(&r.headers)
                    .bind(&r.body)
                    .bind("pending")
                    .bind(0i64)
                    .bind(r.next_at)
                    .bind(now);
            }
            q.execute(&mut *tx).await?;
        }
        for w in &kept {
            for id in &w.schedules_remove {
                sqlx::query("DELETE FROM schedules WHERE id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            for s in &w.schedules_add {
                sqlx::query("DELETE FROM schedules WHERE id = $1")
                    .bind(&s.id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO schedules (id, session_id, channel_id, user_id, message, next_at, end_at, every_ms, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&s.id)
                .bind(&s.session_id)
                .bind(&s.channel_id)
                .bind(&s.user_id)
                .bind(&s.message)
                .bind(s.next_at)
                .bind(s.end_at)
                .bind(s.every_ms)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        let mut created = created.into_iter();
        Ok(stored
            .into_iter()
            .map(|ok| Ok(ok.then(|| created.next().expect("rows of a stored step"))))
            .collect())
    }

    /// Records a provider message id of a channel user; false when it was seen before.
    ///
    /// The key is (channel, user, id): for generic channels the id is the sender's own
    /// (`messages[].id`) and unique only per user, so user X's id 42 must not hide user Y's
    /// id 42. For providers whose ids are unique per bot (LINE's `webhookEventId`, Telegram's
    /// `update_id`, Messenger's `mid`, Slack's `event_id`, WhatsApp's and Webex's message
    /// ids) adding the user changes nothing. Each channel module documents its id.
    pub async fn mark_seen(
        &self,
        channel_id: &str,
        user_id: &str,
        provider_id: &str,
    ) -> DbResult<bool> {
        let provider_id = &seen_key(user_id, provider_id);
        let _turn = self.write_turn().await;
        match sqlx::query(
            "INSERT INTO inbound_seen (channel_id, provider_id, created_at) VALUES ($1, $2, $3)",
        )
        .bind(channel_id)
        .bind(provider_id)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)
        {
            Ok(_) => Ok(true),
            Err(DbError::Conflict) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Forgets a provider message id, so the provider's retry runs it after all.
    pub async fn unmark_seen(
        &self,
        channel_id: &str,
        user_id: &str,
        provider_id: &str,
    ) -> DbResult<()> {
        let provider_id = &seen_key(user_id, provider_id);
        sqlx::query("DELETE FROM inbound_seen WHERE channel_id = $1 AND provider_id = $2")
            .bind(channel_id)
            .bind(provider_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deliveries due now, oldest first, at most `per_channel` of each channel (so one
    /// channel's backlog cannot crowd out the others) and `limit` in all.
    pub async fn due_outbox(
        &self,
        now: i64,
        per_channel: i64,
        limit: i64,
    ) -> DbResult<Vec<OutboxRow>> {
        Ok(sqlx::query_as(
            "SELECT id, channel_id, url, headers, body, status, attempts, next_at, last_error FROM ( \
               SELECT *, ROW_NUMBER() OVER (PARTITION BY channel_id ORDER BY next_at, created_at) AS n \
               FROM outbox WHERE status = 'pending' AND next_at <= $1 \
             ) due WHERE n <= $2 ORDER BY next_at, created_at LIMIT $3",
        )
        .bind(now)
        .bind(per_channel)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
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

    /// Records first attempts that succeeded, many rows in one statement.
    pub async fn outbox_sent(&self, ids: &[String]) -> DbResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let marks: Vec<String> = (0..ids.len()).map(|i| format!("${}", i + 2)).collect();
        let sql = format!(
            "UPDATE outbox SET status = 'sent', attempts = attempts + 1, next_at = $1, last_error = NULL \
             WHERE status = 'pending' AND id IN ({})",
            marks.join(", ")
        );
        let _turn = self.write_turn().await;
        let mut q = sqlx::query(&sql).bind(now_ms());
        for id in ids {
            q = q.bind(id);
        }
        q.execute(&self.pool).await?;
        Ok(())
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
            "SELECT id, environment_name, channel_id, user_id, direction, message, flow, intent, state, created_at \
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

    pub async fn due_schedules(&self, now: i64, limit: i64) -> DbResult<Vec<ScheduleRow>> {
        Ok(sqlx::query_as(
            "SELECT id, session_id, channel_id, user_id, message, next_at, end_at, every_ms FROM schedules \
             WHERE next_at <= $1 ORDER BY next_at LIMIT $2",
        )
        .bind(now)
        .bind(limit)
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
