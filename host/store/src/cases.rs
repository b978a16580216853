//! Cases and tasks: Cases, tasks with their leases and review records,
//! artifacts, callback endpoints with their messages and attempts, inbound hooks and the
//! `webhook-id`s they received. No HTTP and no permissions here: every lookup that a
//! caller names by id is keyed by the caller's workspace as well.
//!
//! A task's transitions are conditional updates (`WHERE status = <from>`, and the worker
//! for a running task), and the callback events of a transition are inserted in the same
//! transaction: an event is never lost and never sent for a transition that did not happen.

use super::{Db, DbError, DbResult, now_ms};
use serde_json::Value as Json;

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CaseRow {
    pub id: String,
    pub workspace_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub name: String,
    pub spec: String,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

const CASE_COLS: &str =
    "id, workspace_id, project_id, environment_id, name, spec, created_by, created_at, updated_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TaskRow {
    pub id: String,
    pub case_id: String,
    pub workspace_id: String,
    pub status: String,
    pub inputs: String,
    pub outputs: Option<String>,
    pub error: Option<String>,
    pub review: Option<String>,
    pub session: Option<String>,
    pub next_message: Option<String>,
    pub attempts: i64,
    pub lease_until: i64,
    pub worker: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

const TASK_COLS: &str = "id, case_id, workspace_id, status, inputs, outputs, error, review, session, next_message, attempts, lease_until, worker, created_by, created_at, updated_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TaskReviewRow {
    pub id: String,
    pub task_id: String,
    pub decision: String,
    pub comment: Option<String>,
    pub outputs: Option<String>,
    pub decided_by: String,
    pub decided_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ArtifactRow {
    pub id: String,
    pub task_id: String,
    pub name: String,
    pub media_type: String,
    pub size: i64,
    pub content: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EndpointRow {
    pub id: String,
    pub workspace_id: String,
    pub url: String,
    /// JSON array of event types.
    pub event_types: String,
    pub enabled: i64,
    pub disabled_reason: Option<String>,
    pub generation: i64,
    pub previous_until: Option<i64>,
    pub created_by: String,
    pub created_at: i64,
    /// Messages in a row that failed through the whole retry schedule.
    pub exhausted: i64,
    /// When the first of them failed (None: the endpoint is not failing).
    pub failing_since: Option<i64>,
}

const ENDPOINT_COLS: &str = "id, workspace_id, url, event_types, enabled, disabled_reason, generation, previous_until, created_by, created_at, exhausted, failing_since";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookMessageRow {
    pub id: String,
    pub endpoint_id: String,
    pub workspace_id: String,
    pub event_type: String,
    pub body: String,
    pub status: String,
    pub attempts: i64,
    pub next_at: i64,
    pub created_at: i64,
}

const MESSAGE_COLS: &str =
    "id, endpoint_id, workspace_id, event_type, body, status, attempts, next_at, created_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WebhookAttemptRow {
    pub message_id: String,
    pub attempt: i64,
    pub at: i64,
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HookRow {
    pub id: String,
    pub workspace_id: String,
    pub case_id: String,
    pub mapping: String,
    pub generation: i64,
    pub created_by: String,
    pub created_at: i64,
}

const HOOK_COLS: &str = "id, workspace_id, case_id, mapping, generation, created_by, created_at";

/// A callback event to enqueue with a transition: its type and its JSON body (the whole
/// Standard Webhooks payload, `{type, timestamp, data}`).
#[derive(Debug, Clone)]
pub struct Event {
    pub event_type: String,
    pub body: Json,
}

/// What a transition writes besides the status.
#[derive(Debug, Clone, Default)]
pub struct TaskWrite {
    pub outputs: Option<String>,
    pub error: Option<String>,
    pub review: Option<String>,
    pub session: Option<String>,
    pub next_message: Option<String>,
}

/// An artifact to store with a transition.
#[derive(Debug, Clone)]
pub struct NewArtifact {
    pub id: String,
    pub name: String,
    pub media_type: String,
    pub size: i64,
    pub content_b64: String,
}

type Tx<'a> = sqlx::Transaction<'a, sqlx::Any>;

/// A row kept per workspace (Cases, tasks, callback endpoints, inbound hooks): its table
/// and columns, so that the look-ups every id-taking route makes are one piece of code,
/// each keyed by the workspace as well as the id.
trait WorkspaceRow: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin {
    const TABLE: &'static str;
    const COLS: &'static str;
}

impl WorkspaceRow for CaseRow {
    const TABLE: &'static str = "cases";
    const COLS: &'static str = CASE_COLS;
}
impl WorkspaceRow for TaskRow {
    const TABLE: &'static str = "tasks";
    const COLS: &'static str = TASK_COLS;
}
impl WorkspaceRow for EndpointRow {
    const TABLE: &'static str = "webhook_endpoints";
    const COLS: &'static str = ENDPOINT_COLS;
}
impl WorkspaceRow for HookRow {
    const TABLE: &'static str = "inbound_hooks";
    const COLS: &'static str = HOOK_COLS;
}

impl Db {
    /// Row `id` of `workspace` (None: there is none, or it is another workspace's).
    async fn row_in<T: WorkspaceRow>(&self, workspace: &str, id: &str) -> DbResult<Option<T>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {} FROM {} WHERE id = $1 AND workspace_id = $2",
            T::COLS,
            T::TABLE
        ))
        .bind(id)
        .bind(workspace)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Row `id` whatever its workspace: for the server's own workers and for routes whose
    /// credential is a signature over the id.
    async fn row_by_id<T: WorkspaceRow>(&self, id: &str) -> DbResult<Option<T>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {} FROM {} WHERE id = $1",
            T::COLS,
            T::TABLE
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The workspace's rows, oldest first, `limit` at most.
    async fn rows_in<T: WorkspaceRow>(&self, workspace: &str, limit: i64) -> DbResult<Vec<T>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {} FROM {} WHERE workspace_id = $1 ORDER BY created_at, id LIMIT {limit}",
            T::COLS,
            T::TABLE
        ))
        .bind(workspace)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Deletes row `id` of `workspace`; false when there is none.
    async fn delete_in<T: WorkspaceRow>(&self, workspace: &str, id: &str) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let r = sqlx::query(&format!(
            "DELETE FROM {} WHERE id = $1 AND workspace_id = $2",
            T::TABLE
        ))
        .bind(id)
        .bind(workspace)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }
}

impl Db {
    // ---- Cases

    pub async fn insert_case(&self, c: &CaseRow) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(&format!(
            "INSERT INTO cases ({CASE_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        ))
        .bind(&c.id)
        .bind(&c.workspace_id)
        .bind(&c.project_id)
        .bind(&c.environment_id)
        .bind(&c.name)
        .bind(&c.spec)
        .bind(&c.created_by)
        .bind(c.created_at)
        .bind(c.updated_at)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(())
    }

    /// Replaces a Case's environment, name and spec; false when it is not the workspace's.
    pub async fn update_case(&self, c: &CaseRow) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let r = sqlx::query(
            "UPDATE cases SET project_id = $1, environment_id = $2, name = $3, spec = $4, updated_at = $5 WHERE id = $6 AND workspace_id = $7",
        )
        .bind(&c.project_id)
        .bind(&c.environment_id)
        .bind(&c.name)
        .bind(&c.spec)
        .bind(c.updated_at)
        .bind(&c.id)
        .bind(&c.workspace_id)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(r.rows_affected() > 0)
    }

    /// A Case of `workspace` (`None` for another workspace's).
    pub async fn case_in(&self, workspace: &str, id: &str) -> DbResult<Option<CaseRow>> {
        self.row_in(workspace, id).await
    }

    /// A Case by id alone: for the worker, which holds a task of it.
    pub async fn case_by_id(&self, id: &str) -> DbResult<Option<CaseRow>> {
        self.row_by_id(id).await
    }

    pub async fn list_cases(&self, workspace: &str) -> DbResult<Vec<CaseRow>> {
        self.rows_in(workspace, 1000).await
    }

    /// Deletes a Case of `workspace`; its tasks stay readable (their Case is gone, so no new
    /// task can be created). False when there is no such Case.
    pub async fn delete_case(&self, workspace: &str, id: &str) -> DbResult<bool> {
        self.delete_in::<CaseRow>(workspace, id).await
    }

    // ---- Tasks

    /// Stores a new pending task. With `receipt` (an inbound hook's id and the call's
    /// `webhook-id`), the receipt is stored in the same transaction: `Err(task id)` when
    /// that `webhook-id` was already received (nothing is created).
    pub async fn insert_task(
        &self,
        t: &TaskRow,
        receipt: Option<(&str, &str)>,
    ) -> DbResult<Result<(), String>> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        if let Some((hook, webhook_id)) = receipt {
            let seen: Option<(String,)> = sqlx::query_as(
                "SELECT task_id FROM inbound_hook_receipts WHERE hook_id = $1 AND webhook_id = $2",
            )
            .bind(hook)
            .bind(webhook_id)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some((task,)) = seen {
                return Ok(Err(task));
            }
            let ins = sqlx::query(
                "INSERT INTO inbound_hook_receipts (hook_id, webhook_id, task_id, created_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(hook)
            .bind(webhook_id)
            .bind(&t.id)
            .bind(now_ms())
            .execute(&mut *tx)
            .await;
            if let Err(e) = ins {
                // Another replica stored the same webhook-id between our read and insert.
                drop(tx);
                let e = DbError::from_sqlx(e);
                if matches!(e, DbError::Conflict) {
                    let (task,): (String,) = sqlx::query_as(
                        "SELECT task_id FROM inbound_hook_receipts WHERE hook_id = $1 AND webhook_id = $2",
                    )
                    .bind(hook)
                    .bind(webhook_id)
                    .fetch_one(&self.pool)
                    .await?;
                    return Ok(Err(task));
                }
                return Err(e);
            }
        }
        sqlx::query(&format!(
            "INSERT INTO tasks ({TASK_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
        ))
        .bind(&t.id)
        .bind(&t.case_id)
        .bind(&t.workspace_id)
        .bind(&t.status)
        .bind(&t.inputs)
        .bind(&t.outputs)
        .bind(&t.error)
        .bind(&t.review)
        .bind(&t.session)
        .bind(&t.next_message)
        .bind(t.attempts)
        .bind(t.lease_until)
        .bind(&t.worker)
        .bind(&t.created_by)
        .bind(t.created_at)
        .bind(t.updated_at)
        .execute(&mut *tx)
        .await
        .map_err(DbError::from_sqlx)?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// A task of `workspace` (`None` for another workspace's).
    pub async fn task_in(&self, workspace: &str, id: &str) -> DbResult<Option<TaskRow>> {
        self.row_in(workspace, id).await
    }

    pub async fn list_tasks(&self, workspace: &str, case_id: &str) -> DbResult<Vec<TaskRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {TASK_COLS} FROM tasks WHERE workspace_id = $1 AND case_id = $2 ORDER BY created_at DESC, id LIMIT 100"
        ))
        .bind(workspace)
        .bind(case_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Takes up to `limit` tasks for `worker`: pending ones, and running ones whose lease
    /// passed (their worker died, or a reviewer asked for changes). Each is taken by a
    /// conditional update, so two workers (two replicas) never take the same task.
    pub async fn claim_tasks(
        &self,
        worker: &str,
        lease_ms: i64,
        limit: i64,
    ) -> DbResult<Vec<TaskRow>> {
        let now = now_ms();
        let ids: Vec<(String,)> = sqlx::query_as(
            "SELECT id FROM tasks WHERE status = 'pending' OR (status = 'in_progress' AND lease_until < $1) ORDER BY created_at LIMIT $2",
        )
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::new();
        for (id,) in ids {
            let _turn = self.write_turn().await;
            let r = sqlx::query(
                "UPDATE tasks SET status = 'in_progress', worker = $1, lease_until = $2, attempts = attempts + 1, updated_at = $3 WHERE id = $4 AND (status = 'pending' OR (status = 'in_progress' AND lease_until < $5))",
            )
            .bind(worker)
            .bind(now + lease_ms)
            .bind(now)
            .bind(&id)
            .bind(now)
            .execute(&self.pool)
            .await?;
            drop(_turn);
            if r.rows_affected() == 1
                && let Some(t) = sqlx::query_as::<_, TaskRow>(&format!(
                    "SELECT {TASK_COLS} FROM tasks WHERE id = $1"
                ))
                .bind(&id)
                .fetch_optional(&self.pool)
                .await?
            {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// Extends `worker`'s lease on a running task; false when it is no longer the worker's.
    pub async fn renew_task_lease(&self, id: &str, worker: &str, until: i64) -> DbResult<bool> {
        self.set_held_lease(id, worker, until, 0).await
    }

    /// Gives a taken task back without counting the take: the server was too busy to run
    /// it (not a lost worker), so its lease ends at `until` and `attempts` is restored.
    pub async fn give_back_task(&self, id: &str, worker: &str, until: i64) -> DbResult<bool> {
        self.set_held_lease(id, worker, until, 1).await
    }

    /// Sets the lease of a task `worker` still runs to `until`, taking `uncount` takes off
    /// its `attempts`; false when the task is no longer the worker's.
    async fn set_held_lease(
        &self,
        id: &str,
        worker: &str,
        until: i64,
        uncount: i64,
    ) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let r = sqlx::query(
            "UPDATE tasks SET lease_until = $1, attempts = attempts - $2 WHERE id = $3 AND worker = $4 AND status = 'in_progress' AND attempts >= $2",
        )
        .bind(until)
        .bind(uncount)
        .bind(id)
        .bind(worker)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// At start-up on SQLite (one process per database): the running tasks' worker was this
    /// process's predecessor, so their leases end now and they are taken over at once.
    pub async fn release_task_leases(&self) -> DbResult<u64> {
        let _turn = self.write_turn().await;
        let r = sqlx::query("UPDATE tasks SET lease_until = 0 WHERE status = 'in_progress'")
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected())
    }

    /// One transition of a task: `from` → `to` with `w`'s fields, only if the task is still
    /// in `from` (and, when `worker` is given, still that worker's). The review record,
    /// the artifacts and the events are written in the same transaction. False: the task
    /// had moved on (nothing written).
    #[allow(clippy::too_many_arguments)]
    pub async fn transition_task(
        &self,
        id: &str,
        from: &str,
        worker: Option<&str>,
        to: &str,
        w: &TaskWrite,
        lease_until: i64,
        review: Option<&TaskReviewRow>,
        artifacts: &[NewArtifact],
        events: &[Event],
    ) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let now = now_ms();
        let mut q = String::from(
            "UPDATE tasks SET status = $1, outputs = $2, error = $3, review = $4, session = COALESCE($5, session), next_message = $6, lease_until = $7, updated_at = $8",
        );
        if to != "in_progress" {
            q.push_str(", worker = NULL");
        }
        q.push_str(" WHERE id = $9 AND status = $10");
        if worker.is_some() {
            q.push_str(" AND worker = $11");
        }
        let mut query = sqlx::query(&q)
            .bind(to)
            .bind(&w.outputs)
            .bind(&w.error)
            .bind(&w.review)
            .bind(&w.session)
            .bind(&w.next_message)
            .bind(lease_until)
            .bind(now)
            .bind(id)
            .bind(from);
        if let Some(wk) = worker {
            query = query.bind(wk);
        }
        if query.execute(&mut *tx).await?.rows_affected() == 0 {
            return Ok(false);
        }
        if from == "in_progress" {
            // A run's outcome: its artifacts replace an earlier pass's (a review's changes).
            sqlx::query("DELETE FROM task_artifacts WHERE task_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if to == "in_progress" {
            // A reviewer's "changes": the next run starts afresh.
            sqlx::query("UPDATE tasks SET attempts = 0 WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(r) = review {
            sqlx::query(
                "INSERT INTO task_reviews (id, task_id, decision, comment, outputs, decided_by, decided_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&r.id)
            .bind(&r.task_id)
            .bind(&r.decision)
            .bind(&r.comment)
            .bind(&r.outputs)
            .bind(&r.decided_by)
            .bind(r.decided_at)
            .execute(&mut *tx)
            .await?;
        }
        for a in artifacts {
            sqlx::query(
                "INSERT INTO task_artifacts (id, task_id, name, media_type, size, content, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&a.id)
            .bind(id)
            .bind(&a.name)
            .bind(&a.media_type)
            .bind(a.size)
            .bind(&a.content_b64)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        if !events.is_empty() {
            let (workspace,): (String,) =
                sqlx::query_as("SELECT workspace_id FROM tasks WHERE id = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            enqueue_events(&mut tx, &workspace, events, now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub async fn task_reviews(&self, task_id: &str) -> DbResult<Vec<TaskReviewRow>> {
        Ok(sqlx::query_as(
            "SELECT id, task_id, decision, comment, outputs, decided_by, decided_at FROM task_reviews WHERE task_id = $1 ORDER BY decided_at, id",
        )
        .bind(task_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A task's artifacts without their content.
    pub async fn task_artifacts(&self, task_id: &str) -> DbResult<Vec<ArtifactRow>> {
        Ok(sqlx::query_as(
            "SELECT id, task_id, name, media_type, size, '' AS content, created_at FROM task_artifacts WHERE task_id = $1 ORDER BY name, id",
        )
        .bind(task_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// One artifact with its content (the caller checked the URL's signature).
    pub async fn artifact(&self, id: &str) -> DbResult<Option<ArtifactRow>> {
        Ok(sqlx::query_as(
            "SELECT id, task_id, name, media_type, size, content, created_at FROM task_artifacts WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    // ---- Callback endpoints

    pub async fn insert_endpoint(&self, e: &EndpointRow) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(&format!(
            "INSERT INTO webhook_endpoints ({ENDPOINT_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, NULL)"
        ))
        .bind(&e.id)
        .bind(&e.workspace_id)
        .bind(&e.url)
        .bind(&e.event_types)
        .bind(e.enabled)
        .bind(&e.disabled_reason)
        .bind(e.generation)
        .bind(e.previous_until)
        .bind(&e.created_by)
        .bind(e.created_at)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(())
    }

    pub async fn endpoint_in(&self, workspace: &str, id: &str) -> DbResult<Option<EndpointRow>> {
        self.row_in(workspace, id).await
    }

    pub async fn endpoint(&self, id: &str) -> DbResult<Option<EndpointRow>> {
        self.row_by_id(id).await
    }

    pub async fn list_endpoints(&self, workspace: &str) -> DbResult<Vec<EndpointRow>> {
        self.rows_in(workspace, 1000).await
    }

    pub async fn delete_endpoint(&self, workspace: &str, id: &str) -> DbResult<bool> {
        self.delete_in::<EndpointRow>(workspace, id).await
    }

    /// A new signing generation; the previous one stays valid until `previous_until`.
    pub async fn rotate_endpoint(
        &self,
        workspace: &str,
        id: &str,
        previous_until: i64,
    ) -> DbResult<Option<EndpointRow>> {
        let _turn = self.write_turn().await;
        let r = sqlx::query(
            "UPDATE webhook_endpoints SET generation = generation + 1, previous_until = $1 WHERE id = $2 AND workspace_id = $3",
        )
        .bind(previous_until)
        .bind(id)
        .bind(workspace)
        .execute(&self.pool)
        .await?;
        drop(_turn);
        if r.rows_affected() == 0 {
            return Ok(None);
        }
        self.endpoint_in(workspace, id).await
    }

    /// Turns an endpoint on (`reason` None) or off; its pending messages are failed when it
    /// goes off.
    pub async fn set_endpoint_enabled(&self, id: &str, reason: Option<&str>) -> DbResult<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        // Turning it on again starts a clean count.
        sqlx::query(
            "UPDATE webhook_endpoints SET enabled = $1, disabled_reason = $2, exhausted = CASE WHEN $1 = 1 THEN 0 ELSE exhausted END, failing_since = CASE WHEN $1 = 1 THEN NULL ELSE failing_since END WHERE id = $3",
        )
        .bind(i64::from(reason.is_none()))
        .bind(reason)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if reason.is_some() {
            sqlx::query(
                "UPDATE webhook_messages SET status = 'failed' WHERE endpoint_id = $1 AND status = 'pending'",
            )
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A message was delivered: the endpoint is not failing any more.
    pub async fn endpoint_delivered(&self, id: &str) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query("UPDATE webhook_endpoints SET exhausted = 0, failing_since = NULL WHERE id = $1 AND (exhausted > 0 OR failing_since IS NOT NULL)")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A message failed through the whole schedule: the endpoint is failing (since `now`
    /// if it was not), and after `disable_after` such messages in a row it is disabled.
    /// True when this disabled it.
    pub async fn endpoint_exhausted(
        &self,
        id: &str,
        now: i64,
        disable_after: i64,
    ) -> DbResult<bool> {
        {
            let _turn = self.write_turn().await;
            sqlx::query(
                "UPDATE webhook_endpoints SET exhausted = exhausted + 1, failing_since = COALESCE(failing_since, $1) WHERE id = $2",
            )
            .bind(now)
            .bind(id)
            .execute(&self.pool)
            .await?;
        }
        let n: Option<(i64, i64)> =
            sqlx::query_as("SELECT exhausted, enabled FROM webhook_endpoints WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        match n {
            Some((n, 1)) if n >= disable_after => {
                self.set_endpoint_enabled(
                    id,
                    Some(&format!("{n} messages in a row failed through every retry")),
                )
                .await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Messages due for an attempt (oldest first).
    ///
    /// At most `per_endpoint` of each endpoint and `limit` in all, leaving out the endpoints
    /// in `except` (their lanes are full): one endpoint's backlog (a dead receiver with
    /// thousands of retries due) cannot fill every batch and starve the others, as the
    /// outbox does for channels ([`Db::due_outbox`]).
    pub async fn due_webhook_messages(
        &self,
        now: i64,
        per_endpoint: i64,
        limit: i64,
        except: &[String],
    ) -> DbResult<Vec<WebhookMessageRow>> {
        let messages = super::due::DueRows {
            table: "webhook_messages",
            key: "endpoint_id",
            cols: MESSAGE_COLS,
            order: "next_at, id",
            filter: "TRUE".into(),
        };
        self.due_per_key(&messages, now, per_endpoint, limit, except)
            .await
    }

    /// Claims a message for one attempt: its `next_at` moves to `until` only if it is still
    /// `seen` (no other sender took it).
    pub async fn claim_webhook_message(&self, id: &str, seen: i64, until: i64) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let r = sqlx::query(
            "UPDATE webhook_messages SET next_at = $1 WHERE id = $2 AND next_at = $3 AND status = 'pending'",
        )
        .bind(until)
        .bind(id)
        .bind(seen)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    /// Records an attempt and the message's new state (`delivered`, `failed`, or `pending`
    /// with its next time).
    pub async fn record_webhook_attempt(
        &self,
        a: &WebhookAttemptRow,
        status: &str,
        next_at: i64,
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO webhook_attempts (message_id, attempt, at, status_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&a.message_id)
        .bind(a.attempt)
        .bind(a.at)
        .bind(a.status_code)
        .bind(&a.error)
        .bind(a.duration_ms)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE webhook_messages SET status = $1, attempts = $2, next_at = $3 WHERE id = $4",
        )
        .bind(status)
        .bind(a.attempt)
        .bind(next_at)
        .bind(&a.message_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn endpoint_messages(&self, endpoint: &str) -> DbResult<Vec<WebhookMessageRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {MESSAGE_COLS} FROM webhook_messages WHERE endpoint_id = $1 ORDER BY created_at DESC, id LIMIT 100"
        ))
        .bind(endpoint)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn webhook_attempts(&self, message: &str) -> DbResult<Vec<WebhookAttemptRow>> {
        Ok(sqlx::query_as(
            "SELECT message_id, attempt, at, status_code, error, duration_ms FROM webhook_attempts WHERE message_id = $1 ORDER BY attempt",
        )
        .bind(message)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Events not tied to a task transition (`run.completed`, `run.failed`).
    pub async fn enqueue_webhook_events(&self, workspace: &str, events: &[Event]) -> DbResult<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        enqueue_events(&mut tx, workspace, events, now_ms()).await?;
        tx.commit().await?;
        Ok(())
    }

    // ---- Inbound hooks

    pub async fn insert_hook(&self, h: &HookRow) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(&format!(
            "INSERT INTO inbound_hooks ({HOOK_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(&h.id)
        .bind(&h.workspace_id)
        .bind(&h.case_id)
        .bind(&h.mapping)
        .bind(h.generation)
        .bind(&h.created_by)
        .bind(h.created_at)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(())
    }

    /// A hook by id alone: the caller of `POST /v1/hooks/{id}` is authenticated by the
    /// signature made with this hook's secret.
    pub async fn hook(&self, id: &str) -> DbResult<Option<HookRow>> {
        self.row_by_id(id).await
    }

    pub async fn hook_in(&self, workspace: &str, id: &str) -> DbResult<Option<HookRow>> {
        self.row_in(workspace, id).await
    }

    pub async fn list_hooks(&self, workspace: &str) -> DbResult<Vec<HookRow>> {
        self.rows_in(workspace, 1000).await
    }

    pub async fn delete_hook(&self, workspace: &str, id: &str) -> DbResult<bool> {
        self.delete_in::<HookRow>(workspace, id).await
    }
}

/// Inserts one message per enabled endpoint of `workspace` subscribed to each event.
async fn enqueue_events(
    tx: &mut Tx<'_>,
    workspace: &str,
    events: &[Event],
    now: i64,
) -> DbResult<()> {
    let endpoints: Vec<(String, String)> = sqlx::query_as(
        "SELECT id, event_types FROM webhook_endpoints WHERE workspace_id = $1 AND enabled = 1",
    )
    .bind(workspace)
    .fetch_all(&mut **tx)
    .await?;
    for (endpoint, types) in endpoints {
        let types: Vec<String> = serde_json::from_str(&types).unwrap_or_default();
        for ev in events {
            if !types.iter().any(|t| t == &ev.event_type || t == "*") {
                continue;
            }
            sqlx::query(&format!(
                "INSERT INTO webhook_messages ({MESSAGE_COLS}) VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $7)"
            ))
            .bind(format!("msg_{}", crate::new_row_id()))
            .bind(&endpoint)
            .bind(workspace)
            .bind(&ev.event_type)
            .bind(ev.body.to_string())
            .bind(now)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dead endpoint's backlog does not crowd out another endpoint's callback.
    #[tokio::test]
    async fn due_messages_take_a_lane_of_each_endpoint() {
        let (_dir, db) = super::super::test_sqlite().await;
        let rows = (0..100).map(|i| ("dead", format!("m{i:03}"), i)).chain([(
            "live",
            "z".to_string(),
            500,
        )]);
        for (ep, id, at) in rows {
            sqlx::query(
                "INSERT INTO webhook_messages (id, endpoint_id, workspace_id, event_type, body, status, attempts, next_at, created_at) \
                 VALUES ($1, $2, 'w', 'task.completed', '{}', 'pending', 1, $3, $3)",
            )
            .bind(id)
            .bind(ep)
            .bind(at as i64)
            .execute(&db.pool)
            .await
            .unwrap();
        }
        let ids = |rows: Vec<WebhookMessageRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(
            ids(db.due_webhook_messages(1000, 2, 64, &[]).await.unwrap()),
            ["m000", "m001", "z"]
        );
        assert_eq!(
            ids(db
                .due_webhook_messages(1000, 2, 64, &["dead".into()])
                .await
                .unwrap()),
            ["z"]
        );
        assert!(
            db.due_webhook_messages(400, 2, 64, &[])
                .await
                .unwrap()
                .iter()
                .all(|m| m.endpoint_id == "dead")
        );
    }
}
