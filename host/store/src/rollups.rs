//! Analytics rollups: for each closed hour, and each closed day, of every environment, the
//! counts the analytics read — incoming and outgoing messages, fallbacks, bot errors, messages
//! per intent, per flow and per user, and the step-latency histogram — split into the
//! console's test traffic and the rest. A month of an environment then answers from a few
//! thousand rows whatever its traffic, and the counts outlive the lines they came from
//! (retention pruning never deletes a line that is not rolled up yet).
//!
//! **Exactness.** An hour is rolled once it is closed and settled ([`SETTLE_MS`] after its
//! end: every line is stored within a transaction's time of its `created_at`, and replicas'
//! clocks agree to well within that), so its rows are the grouped scan of its lines. A day's
//! rows are the sums of its hours' (a user's row counts the user's messages, so a day's
//! active users are its user rows). The watermark ([`Db::rolled_until`]) says up to where
//! rollups hold; the analytics read rollups before it and the lines after it.
//!
//! **Cost.** Nothing on the message path: the pruner's pass rolls what has closed since the
//! last pass, one transaction per hour (per environment a grouped scan of the hour's lines by
//! the transcripts' (project, environment, time) index), claimed through the watermark so
//! that replicas never roll an hour twice.

use super::{Db, DbResult};
use std::time::{Duration, Instant};

pub const HOUR_MS: i64 = 3_600_000;
pub const DAY_MS: i64 = 24 * HOUR_MS;
/// How long after its end an hour's lines are final and it may be rolled up.
pub const SETTLE_MS: i64 = 5 * 60_000;

/// The metrics a rollup row counts (its `metric` column; `label` in parentheses):
/// `in`, `out`, `fallback` (incoming lines no intent understood), `intent` (the intent),
/// `flow` (the flow), `latency` (the step time rounded to two significant digits, µs, as
/// text), `version` (the deployment version that answered a channel user's line), `user`
/// (the user id; incoming lines) and `error` (bot errors; keyed by the environment's id
/// where the others are keyed by its name).
pub const COUNTED: &[&str] = &[
    "in", "out", "fallback", "intent", "flow", "latency", "version",
];

/// A step time rounded down to two significant digits, in SQL both backends run.
const LATENCY_BUCKET: &str = "CASE WHEN step_us < 100 THEN step_us \
     WHEN step_us < 1000 THEN step_us / 10 * 10 \
     WHEN step_us < 10000 THEN step_us / 100 * 100 \
     WHEN step_us < 100000 THEN step_us / 1000 * 1000 \
     WHEN step_us < 1000000 THEN step_us / 10000 * 10000 \
     WHEN step_us < 10000000 THEN step_us / 100000 * 100000 \
     ELSE step_us / 1000000 * 1000000 END";

/// `1` for the console's chat tester (test traffic), `0` for the rest.
const TEST_FLAG: &str = "CASE WHEN channel_id = 'console' THEN 1 ELSE 0 END";

/// The rollup rows of the lines of one environment (`$1` project, `$2` environment name)
/// in `[$3, $4)`, bucketed by `$5`: (bucket start, test flag, metric, label, count); the
/// user rows only `with_users`.
pub(crate) fn transcript_rows_sql(with_users: bool) -> String {
    let range = "FROM transcripts WHERE project_id = $1 AND environment_name = $2 \
                 AND created_at >= $3 AND created_at < $4";
    let head = format!("SELECT (created_at / $5) * $5 AS t, {TEST_FLAG} AS k");
    let arm = |metric: &str, label: &str, filter: &str, group: &str| {
        format!(
            "{head}, '{metric}' AS metric, {label} AS label, COUNT(*) AS n {range}{filter} \
             GROUP BY 1, 2{group}"
        )
    };
    [
        arm("in", "''", " AND direction = 'in'", ""),
        arm("out", "''", " AND direction = 'out'", ""),
        arm(
            "fallback",
            "''",
            " AND direction = 'in' AND (outcome = 'fallback' \
             OR (outcome IS NULL AND (intent IS NULL OR intent = 'fallback')))",
            "",
        ),
        arm(
            "intent",
            "intent",
            " AND direction = 'in' AND intent IS NOT NULL",
            ", 4",
        ),
        arm(
            "flow",
            "flow",
            " AND direction = 'in' AND flow IS NOT NULL",
            ", 4",
        ),
        arm(
            "version",
            "dep_version",
            " AND direction = 'in' AND dep_version IS NOT NULL",
            ", 4",
        ),
        arm(
            "latency",
            &format!("CAST({LATENCY_BUCKET} AS TEXT)"),
            " AND direction = 'in' AND step_us IS NOT NULL",
            ", 4",
        ),
    ]
    .into_iter()
    .chain(with_users.then(|| arm("user", "user_id", " AND direction = 'in'", ", 4")))
    .collect::<Vec<_>>()
    .join(" UNION ALL ")
}

/// The rollup rows of one environment's bot errors (`$1` project, `$2` environment id) in
/// `[$3, $4)`, bucketed by `$5`.
pub(crate) fn error_rows_sql() -> String {
    format!(
        "SELECT (created_at / $5) * $5 AS t, {TEST_FLAG} AS k, 'error' AS metric, '' AS label, \
         COUNT(*) AS n FROM bot_errors WHERE project_id = $1 AND environment_id = $2 \
         AND created_at >= $3 AND created_at < $4 GROUP BY 1, 2"
    )
}

/// Days' rows from their hours' (`$1` project, `$2` key, the days in `[$3, $4)`); a
/// source's metric filter and [`DAYS_GROUP`] follow.
const DAYS_SQL: &str = "INSERT INTO rollups (project_id, environment, span_ms, start, tests, metric, label, n) \
     SELECT project_id, environment, 86400000, (start / 86400000) * 86400000, tests, metric, label, \
     CAST(SUM(n) AS BIGINT) FROM rollups WHERE project_id = $1 AND environment = $2 \
     AND span_ms = 3600000 AND start >= $3 AND start < $4";
const DAYS_GROUP: &str =
    "GROUP BY project_id, environment, (start / 86400000) * 86400000, tests, metric, label";

/// Rows per INSERT of hour rows (8 parameters each).
const ROWS_PER_INSERT: usize = 500;

/// The watermark moves from `$1` to `$2` only if no one moved it first.
const CLAIM_SQL: &str =
    "UPDATE rollup_progress SET rolled_until = $2 WHERE id = 1 AND rolled_until = $1";

type Tx = sqlx::Transaction<'static, sqlx::Any>;
/// An environment's rows from one source, with the project and key they belong to.
type Counted<'a> = (&'a str, &'a str, &'static Source, Vec<Row>);
/// A counted row: bucket start, test flag, metric, label, count.
pub(crate) type Row = (i64, i64, String, String, i64);

impl Db {
    /// Up to where rollups hold (an hour's start, Unix ms); `None` before the first pass.
    pub async fn rolled_until(&self) -> DbResult<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT rolled_until FROM rollup_progress WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Rolls up every hour that has closed and settled by `now` (and the days they
    /// complete), a day at most per transaction, for `budget` at most; returns the
    /// watermark. The first pass starts at the hour of the oldest line or error.
    pub async fn roll_up(&self, now: i64, budget: Duration) -> DbResult<i64> {
        let started = Instant::now();
        let settled = (now - SETTLE_MS).div_euclid(HOUR_MS) * HOUR_MS;
        let mut at = match self.rolled_until().await? {
            Some(at) => at,
            None => self.start_rollups(settled).await?,
        };
        while at < settled && started.elapsed() < budget {
            let end = ((at.div_euclid(DAY_MS) + 1) * DAY_MS).min(settled);
            self.roll(at, end).await?;
            // Another replica may have rolled it (and more): go on from where it stands.
            at = self.rolled_until().await?.unwrap_or(end);
        }
        Ok(at)
    }

    /// Sets the first watermark: the hour of the oldest line or error, else `settled`.
    async fn start_rollups(&self, settled: i64) -> DbResult<i64> {
        let mut oldest = settled;
        for (project, name, id) in &self.environment_keys().await? {
            for (source, key) in Source::of(name, id) {
                let min = source.oldest(&self.pool, project, key).await?;
                oldest = oldest.min(min.unwrap_or(oldest));
            }
        }
        let _turn = self.write_turn().await;
        sqlx::query(
            "INSERT INTO rollup_progress (id, rolled_until) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
        )
        .bind(oldest.div_euclid(HOUR_MS) * HOUR_MS)
        .execute(&self.pool)
        .await?;
        Ok(self.rolled_until().await?.unwrap_or(settled))
    }

    /// Every environment as (project, name, id).
    async fn environment_keys(&self) -> DbResult<Vec<(String, String, String)>> {
        Ok(
            sqlx::query_as("SELECT project_id, name, id FROM environments ORDER BY id")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    /// Rolls the hours of `[from, to)` (within one day) for every environment, and the day
    /// when `to` ends it. The lines are read first, outside the transaction (on SQLite the
    /// messages' writer waits only for the inserts); the transaction claims the watermark
    /// and writes nothing when another replica claimed it first.
    async fn roll(&self, from: i64, to: i64) -> DbResult<()> {
        let envs = self.environment_keys().await?;
        let mut counted: Vec<Counted> = Vec::new();
        for (project, name, id) in &envs {
            for (source, key) in Source::of(name, id) {
                let rows = source.rows(&self.pool, project, key, (from, to)).await?;
                counted.push((project, key, source, rows));
            }
        }
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let claim = sqlx::query(CLAIM_SQL).bind(from).bind(to);
        if claim.execute(&mut *tx).await?.rows_affected() == 0 {
            return Ok(());
        }
        for (project, key, source, rows) in &counted {
            insert_hours(&mut tx, project, key, rows).await?;
            if to % DAY_MS == 0 {
                source
                    .roll_days(&mut tx, project, key, (to - DAY_MS, to))
                    .await?;
            }
        }
        tx.commit().await.map_err(super::DbError::from_sqlx)?;
        Ok(())
    }

    /// Rebuilds every environment's rollups from what is still stored, up to the
    /// watermark: for its lines, and apart for its errors (kept for a shorter time), every
    /// hour after the hour of the oldest one, a day per transaction, and those days' rows.
    /// An hour retention has begun to prune keeps its rows, and so does every older hour.
    /// Returns the hours rebuilt, over all environments and both sources.
    pub async fn rebuild_rollups(&self) -> DbResult<i64> {
        let Some(watermark) = self.rolled_until().await? else {
            return Ok(0);
        };
        let mut hours = 0;
        for (project, name, id) in &self.environment_keys().await? {
            for (source, key) in Source::of(name, id) {
                let Some(oldest) = source.oldest(&self.pool, project, key).await? else {
                    continue;
                };
                let mut at = ((oldest.div_euclid(HOUR_MS) + 1) * HOUR_MS).min(watermark);
                hours += (watermark - at) / HOUR_MS;
                while at < watermark {
                    let end = ((at.div_euclid(DAY_MS) + 1) * DAY_MS).min(watermark);
                    source.rebuild(self, project, key, (at, end)).await?;
                    at = end;
                }
            }
        }
        Ok(hours)
    }
}

/// Inserts hour rows of one environment's source.
async fn insert_hours(tx: &mut Tx, project: &str, key: &str, rows: &[Row]) -> DbResult<()> {
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO rollups (project_id, environment, span_ms, start, tests, metric, label, n) \
             VALUES {}",
            super::step::placeholders(chunk.len(), 8)
        );
        let mut q = sqlx::query(&sql);
        for (start, tests, metric, label, n) in chunk {
            q = q
                .bind(project)
                .bind(key)
                .bind(HOUR_MS)
                .bind(start)
                .bind(tests);
            q = q.bind(metric).bind(label).bind(n);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Where rollup rows come from: an environment's transcript lines (keyed by its name) or
/// its bot errors (keyed by its id).
struct Source {
    /// The grouped scan (`$1` project, `$2` key, `[$3, $4)`, buckets of `$5`).
    rows: fn() -> String,
    table: &'static str,
    key_column: &'static str,
    /// The rollup rows that are this source's.
    metrics: &'static str,
}

impl Source {
    const LINES: Source = Source {
        rows: || transcript_rows_sql(true),
        table: "transcripts",
        key_column: "environment_name",
        metrics: "metric <> 'error'",
    };
    const ERRORS: Source = Source {
        rows: error_rows_sql,
        table: "bot_errors",
        key_column: "environment_id",
        metrics: "metric = 'error'",
    };

    /// The sources of an environment with the key each uses.
    fn of<'a>(name: &'a str, id: &'a str) -> [(&'static Source, &'a str); 2] {
        [(&Source::LINES, name), (&Source::ERRORS, id)]
    }

    /// The hour rows of `[from, to)`.
    async fn rows(
        &self,
        pool: &sqlx::AnyPool,
        project: &str,
        key: &str,
        (from, to): (i64, i64),
    ) -> DbResult<Vec<Row>> {
        let sql = (self.rows)();
        let q = sqlx::query_as::<_, Row>(&sql).bind(project).bind(key);
        Ok(q.bind(from).bind(to).bind(HOUR_MS).fetch_all(pool).await?)
    }

    /// Writes the day rows of the days in `[from, to)` from their hour rows.
    async fn roll_days(
        &self,
        tx: &mut Tx,
        project: &str,
        key: &str,
        days: (i64, i64),
    ) -> DbResult<()> {
        let sql = format!("{DAYS_SQL} AND {} {DAYS_GROUP}", self.metrics);
        let q = sqlx::query(&sql).bind(project).bind(key).bind(days.0);
        q.bind(days.1).execute(&mut **tx).await?;
        Ok(())
    }

    /// Replaces the hour rows of `[from, to)` (within one day) with those of the stored
    /// lines or errors, and that day's row.
    async fn rebuild(
        &self,
        db: &Db,
        project: &str,
        key: &str,
        (from, to): (i64, i64),
    ) -> DbResult<()> {
        let rows = self.rows(&db.pool, project, key, (from, to)).await?;
        let day = from.div_euclid(DAY_MS) * DAY_MS;
        let _turn = db.write_turn().await;
        let mut tx = db.pool.begin().await?;
        for (span, start, end) in [(HOUR_MS, from, to), (DAY_MS, day, day + 1)] {
            let sql = format!(
                "DELETE FROM rollups WHERE project_id = $1 AND environment = $2 AND span_ms = $3 \
                 AND start >= $4 AND start < $5 AND {}",
                self.metrics
            );
            let q = sqlx::query(&sql).bind(project).bind(key).bind(span);
            q.bind(start).bind(end).execute(&mut *tx).await?;
        }
        insert_hours(&mut tx, project, key, &rows).await?;
        // A day's row exists once the day is rolled to its end.
        if to == day + DAY_MS {
            self.roll_days(&mut tx, project, key, (day, to)).await?;
        }
        tx.commit().await.map_err(super::DbError::from_sqlx)?;
        Ok(())
    }

    /// When the oldest stored row of this source for `key` was written.
    async fn oldest(
        &self,
        pool: &sqlx::AnyPool,
        project: &str,
        key: &str,
    ) -> DbResult<Option<i64>> {
        let sql = format!(
            "SELECT MIN(created_at) FROM {} WHERE project_id = $1 AND {} = $2",
            self.table, self.key_column
        );
        Ok(sqlx::query_scalar(&sql)
            .bind(project)
            .bind(key)
            .fetch_one(pool)
            .await?)
    }
}

#[cfg(test)]
mod tests;
