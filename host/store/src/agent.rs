//! The agent API's storage: API keys, agent conversations and their messages,
//! chat runs with their chunk logs, steers.

use super::{Db, DbError, DbResult, now_ms};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ApiKeyRow {
    pub id: String,
    pub hash: String,
    /// `agent` or `workspace`.
    pub kind: String,
    /// The environment of an agent key; the team (or user) of a workspace key.
    pub scope: String,
    pub project_id: Option<String>,
    /// The tenant: the project's owner (agent key) or the workspace itself.
    pub owner_id: String,
    pub name: String,
    pub hint: String,
    pub created_at: i64,
    pub created_by: String,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

const KEY_COLUMNS: &str = "id, hash, kind, scope, project_id, owner_id, name, hint, created_at, created_by, last_used_at, revoked_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AgentConversationRow {
    pub id: String,
    pub environment_id: String,
    pub chat_id: Option<String>,
    pub created_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AgentMessageRow {
    pub id: String,
    pub seq: i64,
    pub role: String,
    pub body: String,
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AgentRunRow {
    pub id: String,
    pub conversation_id: String,
    pub environment_id: String,
    pub key_id: String,
    pub status: String,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
}

const RUN_COLUMNS: &str =
    "id, conversation_id, environment_id, key_id, status, error, created_at, started_at, ended_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AgentSteerRow {
    pub id: String,
    pub run_id: String,
    pub message: String,
    pub status: String,
    pub created_at: i64,
}

/// SQLite's "database is locked" (SQLITE_BUSY and its extended codes, BUSY_SNAPSHOT among
/// them): seen under load when a transaction that read first then writes finds a newer
/// snapshot; the transaction is rolled back and may simply run again.
fn is_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c == "5" || c.parse::<i64>().is_ok_and(|n| n & 0xff == 5)),
        _ => false,
    }
}

impl Db {
    // ---- keys

    pub async fn insert_api_key(&self, k: &ApiKeyRow) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(&format!(
            "INSERT INTO api_keys ({KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ))
        .bind(&k.id)
        .bind(&k.hash)
        .bind(&k.kind)
        .bind(&k.scope)
        .bind(&k.project_id)
        .bind(&k.owner_id)
        .bind(&k.name)
        .bind(&k.hint)
        .bind(k.created_at)
        .bind(&k.created_by)
        .bind(k.last_used_at)
        .bind(k.revoked_at)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(())
    }

    /// A key by its hash, if it is not revoked. Read on every request: revocation is
    /// effective on the next one.
    pub async fn live_api_key(&self, hash: &str) -> DbResult<Option<ApiKeyRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = $1 AND revoked_at IS NULL"
        ))
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn list_api_keys(&self, kind: &str, scope: &str) -> DbResult<Vec<ApiKeyRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE kind = $1 AND scope = $2 ORDER BY created_at, id"
        ))
        .bind(kind)
        .bind(scope)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn api_key(&self, kind: &str, scope: &str, id: &str) -> DbResult<Option<ApiKeyRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {KEY_COLUMNS} FROM api_keys WHERE kind = $1 AND scope = $2 AND id = $3"
        ))
        .bind(kind)
        .bind(scope)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Revokes a key of `scope` (idempotent); false when there is no such key.
    pub async fn revoke_api_key(&self, kind: &str, scope: &str, id: &str) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let n = sqlx::query(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE kind = $2 AND scope = $3 AND id = $4",
        )
        .bind(now_ms())
        .bind(kind)
        .bind(scope)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    pub async fn touch_api_key(&self, id: &str) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
            .bind(now_ms())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    // ---- conversations

    pub async fn agent_conversation(
        &self,
        environment_id: &str,
        id: &str,
    ) -> DbResult<Option<AgentConversationRow>> {
        Ok(sqlx::query_as(
            "SELECT id, environment_id, chat_id, created_at FROM agent_conversations WHERE id = $1 AND environment_id = $2",
        )
        .bind(id)
        .bind(environment_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn agent_conversation_by_chat(
        &self,
        environment_id: &str,
        chat_id: &str,
    ) -> DbResult<Option<AgentConversationRow>> {
        Ok(sqlx::query_as(
            "SELECT id, environment_id, chat_id, created_at FROM agent_conversations WHERE environment_id = $1 AND chat_id = $2",
        )
        .bind(environment_id)
        .bind(chat_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// A new conversation; with a chat id already mapped (a concurrent first request), the
    /// existing one.
    pub async fn insert_agent_conversation(
        &self,
        id: &str,
        environment_id: &str,
        chat_id: Option<&str>,
    ) -> DbResult<AgentConversationRow> {
        let r = {
            let _turn = self.write_turn().await;
            sqlx::query(
                "INSERT INTO agent_conversations (id, environment_id, chat_id, created_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(id)
            .bind(environment_id)
            .bind(chat_id)
            .bind(now_ms())
            .execute(&self.pool)
            .await
            .map_err(DbError::from_sqlx)
        };
        match (r, chat_id) {
            (Ok(_), _) => {}
            (Err(DbError::Conflict), Some(chat)) => {
                if let Some(c) = self
                    .agent_conversation_by_chat(environment_id, chat)
                    .await?
                {
                    return Ok(c);
                }
                return Err(DbError::Conflict);
            }
            (Err(e), _) => return Err(e),
        }
        Ok(self
            .agent_conversation(environment_id, id)
            .await?
            .expect("just inserted"))
    }

    pub async fn agent_messages(&self, conversation_id: &str) -> DbResult<Vec<AgentMessageRow>> {
        Ok(sqlx::query_as(
            "SELECT id, seq, role, body, run_id FROM agent_messages WHERE conversation_id = $1 ORDER BY seq",
        )
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Appends messages to a conversation's history after its last one; ids already
    /// stored are skipped.
    pub async fn append_agent_messages(
        &self,
        conversation_id: &str,
        messages: &[(String, String, String, Option<String>)],
    ) -> DbResult<()> {
        let mut attempt = 0;
        loop {
            match self
                .append_agent_messages_once(conversation_id, messages)
                .await
            {
                Err(DbError::Sqlx(e)) if attempt < 5 && is_busy(&e) => {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "SQLite busy; appending the messages again");
                }
                r => return r,
            }
        }
    }

    async fn append_agent_messages_once(
        &self,
        conversation_id: &str,
        messages: &[(String, String, String, Option<String>)],
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let (max,): (Option<i64>,) =
            sqlx::query_as("SELECT MAX(seq) FROM agent_messages WHERE conversation_id = $1")
                .bind(conversation_id)
                .fetch_one(&mut *tx)
                .await?;
        let mut seq = max.unwrap_or(0);
        for (id, role, body, run) in messages {
            seq += 1;
            sqlx::query(
                "INSERT INTO agent_messages (conversation_id, id, seq, role, body, run_id) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (conversation_id, id) DO NOTHING",
            )
            .bind(conversation_id)
            .bind(id)
            .bind(seq)
            .bind(role)
            .bind(body)
            .bind(run)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    // ---- runs

    /// A new queued run with the first chunk of its stream, unless the conversation has a
    /// run queued or in progress: then that run's id (`Err`).
    pub async fn insert_agent_run(
        &self,
        run: &AgentRunRow,
        first_chunk: &str,
        lease_until: i64,
    ) -> DbResult<Result<(), String>> {
        let mut attempt = 0;
        loop {
            match self
                .insert_agent_run_once(run, first_chunk, lease_until)
                .await
            {
                Err(DbError::Sqlx(e)) if attempt < 5 && is_busy(&e) => attempt += 1,
                r => return r,
            }
        }
    }

    async fn insert_agent_run_once(
        &self,
        run: &AgentRunRow,
        first_chunk: &str,
        lease_until: i64,
    ) -> DbResult<Result<(), String>> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let active: Option<(String,)> = sqlx::query_as(
            "SELECT id FROM agent_runs WHERE conversation_id = $1 AND status IN ('queued', 'in_progress')",
        )
        .bind(&run.conversation_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((id,)) = active {
            return Ok(Err(id));
        }
        sqlx::query(&format!(
            "INSERT INTO agent_runs ({RUN_COLUMNS}, lease_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(&run.id)
        .bind(&run.conversation_id)
        .bind(&run.environment_id)
        .bind(&run.key_id)
        .bind(&run.status)
        .bind(&run.error)
        .bind(run.created_at)
        .bind(run.started_at)
        .bind(run.ended_at)
        .bind(lease_until)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO agent_run_chunks (run_id, seq, body) VALUES ($1, 1, $2)")
            .bind(&run.id)
            .bind(first_chunk)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    pub async fn agent_run(&self, id: &str) -> DbResult<Option<AgentRunRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {RUN_COLUMNS} FROM agent_runs WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The conversation's queued or in-progress run.
    pub async fn active_agent_run(&self, conversation_id: &str) -> DbResult<Option<AgentRunRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {RUN_COLUMNS} FROM agent_runs WHERE conversation_id = $1 AND status IN ('queued', 'in_progress')"
        ))
        .bind(conversation_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Moves a run to `in_progress` (if queued), renewing its lease.
    pub async fn start_agent_run(&self, id: &str, lease_until: i64) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let n = sqlx::query(
            "UPDATE agent_runs SET status = 'in_progress', started_at = $1, lease_until = $2 WHERE id = $3 AND status = 'queued'",
        )
        .bind(now_ms())
        .bind(lease_until)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n == 1)
    }

    /// Appends chunks (`seq` numbered from `first`) and, with `end`, ends the run with that
    /// status and error, in one transaction.
    pub async fn append_agent_chunks(
        &self,
        run_id: &str,
        first: i64,
        chunks: &[String],
        end: Option<(&str, Option<&str>)>,
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        for (i, c) in chunks.iter().enumerate() {
            sqlx::query(
                "INSERT INTO agent_run_chunks (run_id, seq, body) VALUES ($1, $2, $3) ON CONFLICT (run_id, seq) DO NOTHING",
            )
            .bind(run_id)
            .bind(first + i as i64)
            .bind(c)
            .execute(&mut *tx)
            .await?;
        }
        if let Some((status, error)) = end {
            sqlx::query(
                "UPDATE agent_runs SET status = $1, error = $2, ended_at = $3 WHERE id = $4 AND status IN ('queued', 'in_progress')",
            )
            .bind(status)
            .bind(error)
            .bind(now_ms())
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE agent_steers SET status = 'expired' WHERE run_id = $1 AND status = 'queued'",
            )
            .bind(run_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Chunks of a run after `after`, in order.
    pub async fn agent_chunks(&self, run_id: &str, after: i64) -> DbResult<Vec<(i64, String)>> {
        Ok(sqlx::query_as(
            "SELECT seq, body FROM agent_run_chunks WHERE run_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(run_id)
        .bind(after)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Runs in flight whose process is gone: all of them (`all`, SQLite: one process per
    /// database), else those whose lease has passed.
    pub async fn orphaned_agent_runs(&self, all: bool) -> DbResult<Vec<String>> {
        let rows: Vec<(String,)> = if all {
            sqlx::query_as("SELECT id FROM agent_runs WHERE status IN ('queued', 'in_progress')")
                .fetch_all(&self.pool)
                .await?
        } else {
            sqlx::query_as(
                "SELECT id FROM agent_runs WHERE status IN ('queued', 'in_progress') AND lease_until < $1",
            )
            .bind(now_ms())
            .fetch_all(&self.pool)
            .await?
        };
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    // ---- steers

    pub async fn insert_agent_steer(&self, s: &AgentSteerRow) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(
            "INSERT INTO agent_steers (id, run_id, message, status, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&s.id)
        .bind(&s.run_id)
        .bind(&s.message)
        .bind(&s.status)
        .bind(s.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn set_agent_steer(&self, id: &str, status: &str) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query("UPDATE agent_steers SET status = $1 WHERE id = $2")
            .bind(status)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn agent_steers(&self, run_id: &str) -> DbResult<Vec<AgentSteerRow>> {
        Ok(sqlx::query_as(
            "SELECT id, run_id, message, status, created_at FROM agent_steers WHERE run_id = $1 ORDER BY created_at, id",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?)
    }
}

/// A stored `/v1` answer under an `Idempotency-Key` (`status` None: still running).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct IdempotencyRow {
    pub fingerprint: String,
    pub status: Option<i64>,
    /// JSON array of [name, value] pairs.
    pub headers: Option<String>,
    /// base64.
    pub body: Option<String>,
    pub created_at: i64,
}

/// What [`Db::begin_idempotent`] found.
pub enum IdemStart {
    /// This request holds the key under this owner token: run it, then
    /// [`Db::finish_idempotent`] (or [`Db::forget_idempotent`]) with the token.
    Run(String),
    /// The key was taken by an earlier request.
    Seen(IdempotencyRow),
}

impl Db {
    /// Takes `scope` for a request with body `fingerprint`, unless an earlier request holds
    /// it. A request still "running" since before `stale_before` (its process died) is
    /// taken over. Each take writes a fresh owner token, so a slow first request that was
    /// taken over can neither store nor free the key it lost.
    pub async fn begin_idempotent(
        &self,
        scope: &str,
        fingerprint: &str,
        now: i64,
        stale_before: i64,
    ) -> DbResult<IdemStart> {
        // The row can vanish between the insert and the read (its request freed it): try
        // again, a few times at most.
        for _ in 0..3 {
            let owner = super::new_id();
            let _turn = self.write_turn().await;
            let r = sqlx::query(
                "INSERT INTO v1_idempotency (scope, owner, fingerprint, status, headers, body, created_at) VALUES ($1, $2, $3, NULL, NULL, NULL, $4) ON CONFLICT (scope) DO NOTHING",
            )
            .bind(scope)
            .bind(&owner)
            .bind(fingerprint)
            .bind(now)
            .execute(&self.pool)
            .await?;
            if r.rows_affected() == 1 {
                return Ok(IdemStart::Run(owner));
            }
            let taken = sqlx::query(
                "UPDATE v1_idempotency SET owner = $1, created_at = $2 WHERE scope = $3 AND fingerprint = $4 AND status IS NULL AND created_at < $5",
            )
            .bind(&owner)
            .bind(now)
            .bind(scope)
            .bind(fingerprint)
            .bind(stale_before)
            .execute(&self.pool)
            .await?;
            if taken.rows_affected() == 1 {
                return Ok(IdemStart::Run(owner));
            }
            drop(_turn);
            let row: Option<IdempotencyRow> = sqlx::query_as(
                "SELECT fingerprint, status, headers, body, created_at FROM v1_idempotency WHERE scope = $1",
            )
            .bind(scope)
            .fetch_optional(&self.pool)
            .await?;
            if let Some(r) = row {
                return Ok(IdemStart::Seen(r));
            }
        }
        // Taken and freed over and over meanwhile: say it is in progress.
        Ok(IdemStart::Seen(IdempotencyRow {
            fingerprint: fingerprint.to_owned(),
            status: None,
            headers: None,
            body: None,
            created_at: now,
        }))
    }

    /// Stores the answer of the request that holds `scope` as `owner`; false when it no
    /// longer holds it (taken over after `begin_idempotent`'s stale limit).
    pub async fn finish_idempotent(
        &self,
        scope: &str,
        owner: &str,
        status: u16,
        headers: &str,
        body_b64: &str,
    ) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let r = sqlx::query(
            "UPDATE v1_idempotency SET status = $1, headers = $2, body = $3 WHERE scope = $4 AND owner = $5 AND status IS NULL",
        )
        .bind(i64::from(status))
        .bind(headers)
        .bind(body_b64)
        .bind(scope)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    /// Frees `scope` held by `owner` when its request ended without an answer to keep (a
    /// stream, a server error, a panic).
    pub async fn forget_idempotent(&self, scope: &str, owner: &str) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(
            "DELETE FROM v1_idempotency WHERE scope = $1 AND owner = $2 AND status IS NULL",
        )
        .bind(scope)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// At start-up on SQLite (one process per database): keys held by requests of the
    /// previous process are freed.
    pub async fn forget_running_idempotent(&self) -> DbResult<u64> {
        let _turn = self.write_turn().await;
        let r = sqlx::query("DELETE FROM v1_idempotency WHERE status IS NULL")
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected())
    }
}
