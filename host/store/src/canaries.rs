//! Canaries (`canaries`): a second deployment version an environment runs for a share of its
//! users, at most one at a time per environment, kept after they end as its history; and
//! the counts that decide an automatic rollback, read from the transcripts' incoming lines
//! (`dep_version`, `outcome`) and added up as time passes.

use super::{Db, DbError, DbResult, new_id};

/// The canaries' store, reached with [`Db::canaries`].
#[derive(Clone)]
pub struct Canaries {
    db: Db,
}

impl Db {
    /// Environments' canaries.
    pub fn canaries(&self) -> Canaries {
        Canaries { db: self.clone() }
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CanaryRow {
    pub id: String,
    pub project_id: String,
    pub environment_id: String,
    pub dep_version: String,
    pub share: i64,
    /// The rollback thresholds as JSON (the API's `rollback` object).
    pub rollback: String,
    pub started_at: i64,
    pub started_by: String,
    /// Incoming lines before this time (Unix ms) are in the counts.
    pub counted_until: i64,
    pub canary_messages: i64,
    pub canary_errors: i64,
    pub canary_fallbacks: i64,
    pub control_messages: i64,
    pub control_errors: i64,
    pub control_fallbacks: i64,
    pub ended_at: Option<i64>,
    pub outcome: Option<String>,
    pub reason: Option<String>,
    pub ended_by: Option<String>,
}

const COLS: &str = "id, project_id, environment_id, dep_version, share, rollback, started_at, \
     started_by, counted_until, canary_messages, canary_errors, canary_fallbacks, \
     control_messages, control_errors, control_fallbacks, ended_at, outcome, reason, ended_by";

/// Messages of one deployment version in a span of time: how many, and how many of them
/// erred or fell back.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct VersionCounts {
    pub dep_version: String,
    pub messages: i64,
    pub errors: i64,
    pub fallbacks: i64,
}

impl Canaries {
    /// Starts a canary of `dep_version` for `share` % of the environment's users;
    /// [`DbError::Conflict`] while another runs there, `None` when the environment (of this
    /// project) is gone or runs that version itself.
    pub async fn start(
        &self,
        project_id: &str,
        environment_id: &str,
        (dep_version, share, rollback): (&str, i64, &str),
        (by, now): (&str, i64),
    ) -> DbResult<Option<CanaryRow>> {
        let id = new_id();
        let _turn = self.db.write_turn().await;
        // Only beside another version than the environment's (checked in the statement: a
        // concurrent move of the environment cannot make them the same).
        let r = sqlx::query(&format!(
            "INSERT INTO canaries ({COLS}) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $7, 0, 0, 0, 0, 0, 0, \
             NULL, NULL, NULL, NULL FROM environments e \
             WHERE e.project_id = $2 AND e.id = $3 AND e.deployment_version <> $4"
        ))
        .bind(&id)
        .bind(project_id)
        .bind(environment_id)
        .bind(dep_version)
        .bind(share)
        .bind(rollback)
        .bind(now)
        .bind(by)
        .execute(&self.db.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        if r.rows_affected() == 0 {
            return Ok(None);
        }
        self.by_id(&id).await
    }

    async fn by_id(&self, id: &str) -> DbResult<Option<CanaryRow>> {
        Ok(
            sqlx::query_as(&format!("SELECT {COLS} FROM canaries WHERE id = $1"))
                .bind(id)
                .fetch_optional(&self.db.pool)
                .await?,
        )
    }

    /// Changes a running canary's share and thresholds (a rollout's next step); false when
    /// it no longer runs.
    pub async fn reshape(&self, id: &str, share: i64, rollback: &str) -> DbResult<bool> {
        let _turn = self.db.write_turn().await;
        let r = sqlx::query(
            "UPDATE canaries SET share = $1, rollback = $2 WHERE id = $3 AND ended_at IS NULL",
        )
        .bind(share)
        .bind(rollback)
        .bind(id)
        .execute(&self.db.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    /// The canary running in an environment of `project_id`.
    pub async fn running(
        &self,
        project_id: &str,
        environment_id: &str,
    ) -> DbResult<Option<CanaryRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLS} FROM canaries WHERE project_id = $1 AND environment_id = $2 AND ended_at IS NULL"
        ))
        .bind(project_id)
        .bind(environment_id)
        .fetch_optional(&self.db.pool)
        .await?)
    }

    /// The environment's canary that ended last.
    pub async fn last_ended(
        &self,
        project_id: &str,
        environment_id: &str,
    ) -> DbResult<Option<CanaryRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLS} FROM canaries WHERE project_id = $1 AND environment_id = $2 \
             AND ended_at IS NOT NULL ORDER BY ended_at DESC, id LIMIT 1"
        ))
        .bind(project_id)
        .bind(environment_id)
        .fetch_optional(&self.db.pool)
        .await?)
    }

    /// The environments (by id) whose running canary runs deployment `version`.
    pub async fn using(&self, project_id: &str, version: &str) -> DbResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT environment_id FROM canaries WHERE project_id = $1 AND dep_version = $2 AND ended_at IS NULL",
        )
        .bind(project_id)
        .bind(version)
        .fetch_all(&self.db.pool)
        .await?;
        Ok(rows.into_iter().map(|(e,)| e).collect())
    }

    /// Every running canary (few: one per environment at most).
    pub async fn all_running(&self) -> DbResult<Vec<CanaryRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLS} FROM canaries WHERE ended_at IS NULL ORDER BY started_at"
        ))
        .fetch_all(&self.db.pool)
        .await?)
    }

    /// Ends a running canary with its outcome; false when it had already ended (another
    /// request or replica ended it first). With `promote`, the environment moves to the
    /// canary's version in the same transaction.
    pub async fn end(
        &self,
        c: &CanaryRow,
        (outcome, reason): (&str, Option<&str>),
        (by, now): (&str, i64),
        promote: bool,
    ) -> DbResult<bool> {
        let _turn = self.db.write_turn().await;
        let mut tx = self.db.pool.begin().await?;
        let ended = sqlx::query(
            "UPDATE canaries SET ended_at = $1, outcome = $2, reason = $3, ended_by = $4 \
             WHERE id = $5 AND ended_at IS NULL",
        )
        .bind(now)
        .bind(outcome)
        .bind(reason)
        .bind(by)
        .bind(&c.id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if ended && promote {
            sqlx::query(
                "UPDATE environments SET deployment_version = $1 WHERE project_id = $2 AND id = $3",
            )
            .bind(&c.dep_version)
            .bind(&c.project_id)
            .bind(&c.environment_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await.map_err(DbError::from_sqlx)?;
        Ok(ended)
    }

    /// Ends an environment's running canary as `aborted` when the environment or its
    /// deployment goes away (no canary outlives what it runs beside).
    pub async fn end_for_environment(&self, environment_id: &str, now: i64) -> DbResult<()> {
        let _turn = self.db.write_turn().await;
        sqlx::query(
            "UPDATE canaries SET ended_at = $1, outcome = 'aborted', reason = 'the environment was deleted', ended_by = 'system' \
             WHERE environment_id = $2 AND ended_at IS NULL",
        )
        .bind(now)
        .bind(environment_id)
        .execute(&self.db.pool)
        .await?;
        Ok(())
    }

    /// The incoming channel messages of environment `env_name` of a project with `from <=
    /// created_at < to`, by the deployment version that served them (the transcripts'
    /// index on project, environment and time).
    pub async fn count_lines(
        &self,
        project_id: &str,
        env_name: &str,
        (from, to): (i64, i64),
    ) -> DbResult<Vec<VersionCounts>> {
        Ok(sqlx::query_as(
            "SELECT dep_version, COUNT(*) AS messages, \
             SUM(CASE WHEN outcome = 'error' THEN 1 ELSE 0 END) AS errors, \
             SUM(CASE WHEN outcome = 'fallback' THEN 1 ELSE 0 END) AS fallbacks \
             FROM transcripts WHERE project_id = $1 AND environment_name = $2 \
             AND created_at >= $3 AND created_at < $4 AND direction = 'in' AND dep_version IS NOT NULL \
             GROUP BY dep_version ORDER BY dep_version",
        )
        .bind(project_id)
        .bind(env_name)
        .bind(from)
        .bind(to)
        .fetch_all(&self.db.pool)
        .await?)
    }

    /// Adds the counts of `counted_until <= created_at < until` to a running canary, only if
    /// no one added them first (the `counted_until` it was read at); the canary as stored
    /// after, or `None` when another pass or replica got there first or it ended.
    pub async fn add_counts(
        &self,
        c: &CanaryRow,
        until: i64,
        canary: &VersionCounts,
        control: &VersionCounts,
    ) -> DbResult<Option<CanaryRow>> {
        let turn = self.db.write_turn().await;
        let r = sqlx::query(
            "UPDATE canaries SET counted_until = $1, \
             canary_messages = canary_messages + $2, canary_errors = canary_errors + $3, \
             canary_fallbacks = canary_fallbacks + $4, control_messages = control_messages + $5, \
             control_errors = control_errors + $6, control_fallbacks = control_fallbacks + $7 \
             WHERE id = $8 AND counted_until = $9 AND ended_at IS NULL",
        )
        .bind(until)
        .bind(canary.messages)
        .bind(canary.errors)
        .bind(canary.fallbacks)
        .bind(control.messages)
        .bind(control.errors)
        .bind(control.fallbacks)
        .bind(&c.id)
        .bind(c.counted_until)
        .execute(&self.db.pool)
        .await?;
        drop(turn);
        if r.rows_affected() == 0 {
            return Ok(None);
        }
        self.by_id(&c.id).await
    }
}
