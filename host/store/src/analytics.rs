//! Analytics of an environment's conversations, aggregated in the database: messages and
//! active users per time bucket, top intents and flows, the share of messages no intent
//! understood, bot errors per bucket, step latency percentiles. Each figure is one grouped scan of the range, found by
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
    /// The steps' latency, median and 99th percentile, in microseconds ([`Latency`]).
    pub latency: Latency,
}

/// Percentiles of the time incoming messages' steps took, in microseconds, to two
/// significant digits rounded down (the database groups the times into buckets of that
/// width: a few hundred groups whatever the traffic). `None` without timed steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    pub p50_us: Option<i64>,
    pub p99_us: Option<i64>,
}

/// A step time rounded down to two significant digits, in SQL both backends run.
const LATENCY_BUCKET: &str = "CASE WHEN step_us < 100 THEN step_us \
     WHEN step_us < 1000 THEN step_us / 10 * 10 \
     WHEN step_us < 10000 THEN step_us / 100 * 100 \
     WHEN step_us < 100000 THEN step_us / 1000 * 1000 \
     WHEN step_us < 1000000 THEN step_us / 10000 * 10000 \
     WHEN step_us < 10000000 THEN step_us / 100000 * 100000 \
     ELSE step_us / 1000000 * 1000000 END";

impl Latency {
    /// The percentiles of a histogram of (time, count) pairs sorted by time.
    pub fn of(histogram: &[(i64, i64)]) -> Latency {
        let total: i64 = histogram.iter().map(|(_, n)| n).sum();
        let at = |p: f64| {
            // The smallest time with at least ceil(p * total) steps at or under it.
            let rank = ((p * total as f64).ceil() as i64).max(1);
            let mut seen = 0;
            histogram.iter().find_map(|&(t, n)| {
                seen += n;
                (seen >= rank).then_some(t)
            })
        };
        Latency {
            p50_us: at(0.50),
            p99_us: at(0.99),
        }
    }
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
    /// Step latency over the whole range.
    pub latency: Latency,
}

/// What one analytics request reads: the project, the environment (its name for the
/// transcripts, its id for the errors), the range `[from, to)` and the buckets' length.
struct Scope<'a> {
    project: &'a str,
    env_name: &'a str,
    env_id: &'a str,
    range: (i64, i64),
    bucket_ms: i64,
    /// The filter that leaves the console's test traffic out, or nothing.
    tests: &'static str,
    /// `FROM transcripts WHERE …`: the range's lines (`$1`–`$4`), test traffic filtered.
    range_sql: String,
}

impl<'a> Scope<'a> {
    /// The scope of `environment` (name, id) of `project` over `range`.
    fn new(
        project: &'a str,
        (env_name, env_id): (&'a str, &'a str),
        range: (i64, i64),
        bucket_ms: i64,
        include_tests: bool,
    ) -> Self {
        // The console's chat tester (channel `console`) is test traffic: left out unless asked.
        let tests = if include_tests {
            ""
        } else {
            " AND channel_id <> 'console'"
        };
        let range_sql = format!(
            "FROM transcripts WHERE project_id = $1 AND environment_name = $2 AND created_at >= $3 AND created_at < $4{tests}"
        );
        Scope {
            project,
            env_name,
            env_id,
            range,
            bucket_ms,
            tests,
            range_sql,
        }
    }
}

impl Db {
    /// The analytics of `environment` (its name; its id for the errors) of `project` over
    /// `[from, to)` in buckets of `bucket_ms`; the console's test traffic only with
    /// `include_tests`.
    pub async fn analytics(
        &self,
        project: &str,
        environment: (&str, &str),
        from: i64,
        to: i64,
        bucket_ms: i64,
        include_tests: bool,
    ) -> DbResult<Analytics> {
        let scope = Scope::new(project, environment, (from, to), bucket_ms, include_tests);
        let mut buckets = self.bucket_series(&scope).await?;
        let errors = self.error_counts(&scope).await?;
        add_errors(&mut buckets, errors);
        let times = self.step_times(&scope).await?;
        let latency = add_latencies(&mut buckets, &times);
        let (messages, fallback_messages, active_users) = self.totals(&scope).await?;
        let top_intents = self.top(&scope, "intent").await?;
        let top_flows = self.top(&scope, "flow").await?;
        Ok(Analytics {
            buckets,
            active_users,
            top_intents,
            top_flows,
            fallback_messages,
            messages,
            latency,
        })
    }

    /// The buckets with transcript lines: messages, replies and active users (no errors or
    /// latency yet), in time order.
    async fn bucket_series(&self, s: &Scope<'_>) -> DbResult<Vec<Bucket>> {
        let range_sql = s.range_sql.as_str();
        let series: Vec<(i64, i64, i64, i64)> = self
            .grouped(
                &format!(
                    "SELECT (created_at / $5) * $5 AS t, \
             CAST(SUM(CASE WHEN direction = 'in' THEN 1 ELSE 0 END) AS BIGINT), \
             CAST(SUM(CASE WHEN direction = 'out' THEN 1 ELSE 0 END) AS BIGINT), \
             COUNT(DISTINCT CASE WHEN direction = 'in' THEN user_id END) \
             {range_sql} GROUP BY t ORDER BY t"
                ),
                (s.project, s.env_name),
                s.range,
                Some(s.bucket_ms),
            )
            .await?;
        Ok(series
            .into_iter()
            .map(|(start, messages, replies, active_users)| Bucket {
                start,
                messages,
                replies,
                active_users,
                errors: 0,
                latency: Latency::default(),
            })
            .collect())
    }

    /// Bot errors per bucket, as (bucket start, errors) in time order.
    async fn error_counts(&self, s: &Scope<'_>) -> DbResult<Vec<(i64, i64)>> {
        let tests = s.tests;
        self.grouped(
            &format!(
                "SELECT (created_at / $5) * $5 AS t, COUNT(*) FROM bot_errors \
                 WHERE project_id = $1 AND environment_id = $2 AND created_at >= $3 AND created_at < $4{tests} \
                 GROUP BY t ORDER BY t"
            ),
            (s.project, s.env_id),
            s.range,
            Some(s.bucket_ms),
        )
        .await
    }

    /// Timed incoming steps as (bucket start, step time, steps), ordered by both.
    async fn step_times(&self, s: &Scope<'_>) -> DbResult<Vec<(i64, i64, i64)>> {
        let range_sql = s.range_sql.as_str();
        self.grouped(
            &format!(
                "SELECT (created_at / $5) * $5 AS t, {LATENCY_BUCKET} AS b, COUNT(*) \
                 {range_sql} AND direction = 'in' AND step_us IS NOT NULL GROUP BY t, b ORDER BY t, b"
            ),
            (s.project, s.env_name),
            s.range,
            Some(s.bucket_ms),
        )
        .await
    }

    /// The whole range's incoming messages, those no intent understood, and active users.
    async fn totals(&self, s: &Scope<'_>) -> DbResult<(i64, i64, i64)> {
        let range_sql = s.range_sql.as_str();
        let totals: Vec<(i64, i64, i64)> = self
            .grouped(
                &format!(
                    "SELECT COUNT(*), \
                     CAST(COALESCE(SUM(CASE WHEN intent IS NULL OR intent = 'fallback' THEN 1 ELSE 0 END), 0) AS BIGINT), \
                     COUNT(DISTINCT user_id) {range_sql} AND direction = 'in'"
                ),
                (s.project, s.env_name),
                s.range,
                None,
            )
            .await?;
        Ok(totals[0])
    }

    /// The 10 most frequent values of `column` (intent or flow) among incoming messages.
    async fn top(&self, s: &Scope<'_>, column: &'static str) -> DbResult<Vec<(String, i64)>> {
        let range_sql = s.range_sql.as_str();
        let sql = format!(
            "SELECT {column}, COUNT(*) AS n {range_sql} AND direction = 'in' AND {column} IS NOT NULL \
             GROUP BY {column} ORDER BY n DESC, {column} LIMIT 10"
        );
        self.grouped::<(String, i64)>(&sql, (s.project, s.env_name), s.range, None)
            .await
    }
}

/// Sets the error counts of the buckets, adding (in time order) buckets that have errors only.
fn add_errors(buckets: &mut Vec<Bucket>, errors: Vec<(i64, i64)>) {
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
                    latency: Latency::default(),
                },
            ),
        }
    }
}

/// Sets each bucket's latency from its steps' times (see [`Db::step_times`]); returns the
/// whole range's.
fn add_latencies(buckets: &mut [Bucket], times: &[(i64, i64, i64)]) -> Latency {
    let mut all: std::collections::BTreeMap<i64, i64> = Default::default();
    for group in times.chunk_by(|a, b| a.0 == b.0) {
        let histogram: Vec<(i64, i64)> = group.iter().map(|&(_, t, n)| (t, n)).collect();
        for &(t, n) in &histogram {
            *all.entry(t).or_default() += n;
        }
        if let Ok(i) = buckets.binary_search_by_key(&group[0].0, |b| b.start) {
            buckets[i].latency = Latency::of(&histogram);
        }
    }
    Latency::of(&all.into_iter().collect::<Vec<_>>())
}

impl Db {
    /// Rows of `sql`, whose `$1`–`$4` are the project, the environment (its name, or its id
    /// for the errors) and the range `[from, to)`, and `$5` the bucket's length when given.
    async fn grouped<O>(
        &self,
        sql: &str,
        (project, environment): (&str, &str),
        (from, to): (i64, i64),
        bucket_ms: Option<i64>,
    ) -> DbResult<Vec<O>>
    where
        O: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
    {
        let mut q = sqlx::query_as::<_, O>(sql)
            .bind(project)
            .bind(environment)
            .bind(from)
            .bind(to);
        if let Some(b) = bucket_ms {
            q = q.bind(b);
        }
        Ok(q.fetch_all(&self.pool).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::Latency;

    #[test]
    fn percentiles_of_a_histogram() {
        // 100 steps: 50 at 10 us, 49 at 20 us, 1 at 900 us.
        let l = Latency::of(&[(10, 50), (20, 49), (900, 1)]);
        assert_eq!((l.p50_us, l.p99_us), (Some(10), Some(20)));
        let l = Latency::of(&[(10, 50), (20, 48), (900, 2)]);
        assert_eq!((l.p50_us, l.p99_us), (Some(10), Some(900)));
        assert_eq!(Latency::of(&[(7, 1)]).p99_us, Some(7));
        assert_eq!(Latency::of(&[]), Latency::default());
    }
}
