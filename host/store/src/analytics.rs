//! Analytics of an environment's conversations, aggregated in the database: messages and
//! active users per time bucket, top intents and flows, the share of messages no intent
//! understood, bot errors per bucket. Each figure is one grouped scan of the range, found by
//! the transcripts' (project_id, environment_name, created_at) index and the bot errors'
//! (project_id, created_at) index; nothing is downloaded line by line.

use super::{Db, DbResult};

/// Counts of one time bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's start (Unix ms, a multiple of the bucket's length).
    pub start: i64,
    /// Messages from users.
    pub messages: i64,
    /// Messages from the bot.
    pub replies: i64,
    /// Distinct users who wrote in the bucket.
    pub active_users: i64,
    /// Bot errors (steps that failed, user errors) in the bucket.
    pub errors: i64,
}

/// An environment's analytics over `[from, to)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Analytics {
    pub buckets: Vec<Bucket>,
    /// Distinct users who wrote in the whole range.
    pub active_users: i64,
    /// Incoming messages by intent, most frequent first (10 at most).
    pub top_intents: Vec<(String, i64)>,
    /// Incoming messages by the flow that handled them, most frequent first (10 at most).
    pub top_flows: Vec<(String, i64)>,
    /// Incoming messages no intent matched (no intent, or the intent named `fallback`).
    pub fallback_messages: i64,
    pub messages: i64,
}

impl Db {
    /// The analytics of `environment` (its name; its id for the errors) of `project` over
    /// `[from, to)` in buckets of `bucket_ms`.
    pub async fn analytics(
        &self,
        project: &str,
        environment: (&str, &str),
        from: i64,
        to: i64,
        bucket_ms: i64,
    ) -> DbResult<Analytics> {
        let (env_name, env_id) = environment;
        const RANGE: &str = "FROM transcripts WHERE project_id = $1 AND environment_name = $2 AND created_at >= $3 AND created_at < $4";
        let series: Vec<(i64, i64, i64, i64)> = sqlx::query_as(&format!(
            "SELECT (created_at / $5) * $5 AS t, \
             CAST(SUM(CASE WHEN direction = 'in' THEN 1 ELSE 0 END) AS BIGINT), \
             CAST(SUM(CASE WHEN direction = 'out' THEN 1 ELSE 0 END) AS BIGINT), \
             COUNT(DISTINCT CASE WHEN direction = 'in' THEN user_id END) \
             {RANGE} GROUP BY t ORDER BY t"
        ))
        .bind(project)
        .bind(env_name)
        .bind(from)
        .bind(to)
        .bind(bucket_ms)
        .fetch_all(&self.pool)
        .await?;
        let errors: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT (created_at / $5) * $5 AS t, COUNT(*) FROM bot_errors \
             WHERE project_id = $1 AND environment_id = $2 AND created_at >= $3 AND created_at < $4 \
             GROUP BY t ORDER BY t",
        )
        .bind(project)
        .bind(env_id)
        .bind(from)
        .bind(to)
        .bind(bucket_ms)
        .fetch_all(&self.pool)
        .await?;
        let mut buckets: Vec<Bucket> = series
            .into_iter()
            .map(|(start, messages, replies, active_users)| Bucket {
                start,
                messages,
                replies,
                active_users,
                errors: 0,
            })
            .collect();
        for (start, n) in errors {
            match buckets.binary_search_by_key(&start, |b| b.start) {
                Ok(i) => buckets[i].errors = n,
                Err(i) => buckets.insert(
                    i,
                    Bucket {
                        start,
                        messages: 0,
                        replies: 0,
                        active_users: 0,
                        errors: n,
                    },
                ),
            }
        }
        let (messages, fallback_messages, active_users): (i64, i64, i64) =
            sqlx::query_as(&format!(
                "SELECT COUNT(*), \
                 CAST(COALESCE(SUM(CASE WHEN intent IS NULL OR intent = 'fallback' THEN 1 ELSE 0 END), 0) AS BIGINT), \
                 COUNT(DISTINCT user_id) {RANGE} AND direction = 'in'"
            ))
            .bind(project)
            .bind(env_name)
            .bind(from)
            .bind(to)
            .fetch_one(&self.pool)
            .await?;
        let top = |column: &'static str| {
            let sql = format!(
                "SELECT {column}, COUNT(*) AS n {RANGE} AND direction = 'in' AND {column} IS NOT NULL \
                 GROUP BY {column} ORDER BY n DESC, {column} LIMIT 10"
            );
            async move {
                sqlx::query_as::<_, (String, i64)>(&sql)
                    .bind(project)
                    .bind(env_name)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&self.pool)
                    .await
            }
        };
        let top_intents = top("intent").await?;
        let top_flows = top("flow").await?;
        Ok(Analytics {
            buckets,
            active_users,
            top_intents,
            top_flows,
            fallback_messages,
            messages,
        })
    }
}
