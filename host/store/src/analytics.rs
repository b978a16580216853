//! Analytics of an environment's conversations: messages and active users per time bucket,
//! top intents and flows, the share of messages no intent understood, bot errors per bucket,
//! step latency percentiles. The range is whole buckets (its start rounded down and its end
//! rounded up to the bucket's length). What the rollups hold (`rollups.rs`: closed days,
//! closed hours) is read from them; only the lines after their watermark (the last hour or
//! so) are scanned, so a month costs about as much as a day.

use super::rollups::{self, COUNTED, DAY_MS, HOUR_MS, Row};
use super::{Db, DbResult};
use std::collections::{BTreeMap, HashMap};

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
    /// The range counted: the one asked for, widened to whole buckets.
    pub from: i64,
    pub to: i64,
    pub buckets: Vec<Bucket>,
    /// Distinct users who wrote in the whole range.
    pub active_users: i64,
    /// Incoming messages by intent, most frequent first (10 at most).
    pub top_intents: Vec<(String, i64)>,
    /// Incoming messages by the flow that handled them, most frequent first (10 at most).
    pub top_flows: Vec<(String, i64)>,
    /// Channel users' messages by the deployment version that answered them, most first
    /// (two while a canary runs).
    pub versions: Vec<(String, i64)>,
    /// Incoming messages that fell back: a channel user's whose step matched no intent,
    /// matched a fallback intent (`fallback: true`, whatever its name) or was handled by a
    /// fallback flow; a line stored without that outcome counts when it has no intent or
    /// the intent named `fallback`.
    pub fallback_messages: i64,
    pub messages: i64,
    /// Step latency over the whole range.
    pub latency: Latency,
}

/// What one analytics request reads: the project, the environment (its name for the lines,
/// its id for the errors), the buckets' length, and the range in three consecutive parts:
/// whole days of rollups, hours of rollups, then lines.
struct Scope<'a> {
    project: &'a str,
    env_name: &'a str,
    env_id: &'a str,
    bucket_ms: i64,
    /// The console's test traffic counts too.
    include_tests: bool,
    days: (i64, i64),
    hours: (i64, i64),
    lines: (i64, i64),
}

impl<'a> Scope<'a> {
    /// `[from, to)` widened to whole buckets, read from rollups up to `watermark` (days when
    /// the buckets are whole days, else hours) and from the lines after it.
    fn new(
        project: &'a str,
        (env_name, env_id): (&'a str, &'a str),
        (from, to): (i64, i64),
        bucket_ms: i64,
        include_tests: bool,
        watermark: Option<i64>,
    ) -> Self {
        let from = from.div_euclid(bucket_ms) * bucket_ms;
        let to = (to + bucket_ms - 1).div_euclid(bucket_ms) * bucket_ms;
        let rolled = match watermark {
            Some(w) if bucket_ms % HOUR_MS == 0 => w.clamp(from, to),
            _ => from,
        };
        let day_end = match bucket_ms % DAY_MS {
            0 => (rolled.div_euclid(DAY_MS) * DAY_MS).max(from),
            _ => from,
        };
        Scope {
            project,
            env_name,
            env_id,
            bucket_ms,
            include_tests,
            days: (from, day_end),
            hours: (day_end, rolled),
            lines: (rolled, to),
        }
    }

    /// The filter that leaves the console's test traffic out of lines, or nothing.
    fn tests_sql(&self) -> &'static str {
        match self.include_tests {
            true => "",
            false => " AND channel_id <> 'console'",
        }
    }
}

/// Rollup rows of one span over `[$3, $4)`, re-bucketed by `$5` (`$1` project, `$2` key,
/// `$6` span, `$7` the highest test flag counted); the metric filter follows.
const ROLLED_SQL: &str = "SELECT (start / $5) * $5 AS t, tests, metric, label, CAST(SUM(n) AS BIGINT) \
     FROM rollups WHERE project_id = $1 AND environment = $2 AND span_ms = $6 \
     AND start >= $3 AND start < $4 AND tests <= $7 AND ";

impl Db {
    /// The analytics of `environment` (its name; its id for the errors) of `project` over
    /// `[from, to)`, widened to whole buckets of `bucket_ms`; the console's test traffic
    /// only with `include_tests`.
    pub async fn analytics(
        &self,
        project: &str,
        environment: (&str, &str),
        from: i64,
        to: i64,
        bucket_ms: i64,
        include_tests: bool,
    ) -> DbResult<Analytics> {
        let watermark = self.rolled_until().await?;
        let scope = Scope::new(
            project,
            environment,
            (from, to),
            bucket_ms,
            include_tests,
            watermark,
        );
        let mut rows = self.rolled_rows(&scope).await?;
        rows.extend(self.line_rows(&scope).await?);
        rows.retain(|r| include_tests || r.1 == 0);
        let (per_bucket, active_users) = self.active_users(&scope).await?;
        let range = (scope.days.0, scope.lines.1);
        Ok(assemble(range, rows, &per_bucket, active_users))
    }

    /// The rows the rollups hold for the scope's days and hours.
    async fn rolled_rows(&self, s: &Scope<'_>) -> DbResult<Vec<Row>> {
        let counted = COUNTED
            .iter()
            .map(|m| format!("'{m}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let lines = format!("{ROLLED_SQL}metric IN ({counted}) GROUP BY 1, 2, 3, 4");
        let errors = format!("{ROLLED_SQL}metric = 'error' GROUP BY 1, 2, 3, 4");
        let mut rows = Vec::new();
        for (span, (from, to)) in [(DAY_MS, s.days), (HOUR_MS, s.hours)] {
            if from >= to {
                continue;
            }
            for (sql, key) in [(&lines, s.env_name), (&errors, s.env_id)] {
                let q = sqlx::query_as::<_, Row>(sql).bind(s.project).bind(key);
                let q = q.bind(from).bind(to).bind(s.bucket_ms).bind(span);
                rows.extend(q.bind(s.include_tests as i64).fetch_all(&self.pool).await?);
            }
        }
        Ok(rows)
    }

    /// The rows of the lines and errors after the watermark, counted as the rollups count.
    async fn line_rows(&self, s: &Scope<'_>) -> DbResult<Vec<Row>> {
        let (from, to) = s.lines;
        if from >= to {
            return Ok(Vec::new());
        }
        let mut rows = Vec::new();
        let sources = [
            (rollups::transcript_rows_sql(false), s.env_name),
            (rollups::error_rows_sql(), s.env_id),
        ];
        for (sql, key) in &sources {
            let q = sqlx::query_as::<_, Row>(sql).bind(s.project).bind(*key);
            let q = q.bind(from).bind(to).bind(s.bucket_ms);
            rows.extend(q.fetch_all(&self.pool).await?);
        }
        Ok(rows)
    }

    /// Distinct users who wrote, per bucket (in time order) and over the whole range: the
    /// rollups' user rows and the lines after the watermark, counted together.
    async fn active_users(&self, s: &Scope<'_>) -> DbResult<(Vec<(i64, i64)>, i64)> {
        let rolled = |span: i64, from: &str, to: &str| {
            format!(
                "SELECT (start / $3) * $3 AS t, label AS u FROM rollups WHERE project_id = $1 \
                 AND environment = $2 AND span_ms = {span} AND start >= {from} AND start < {to} \
                 AND tests <= $4 AND metric = 'user'"
            )
        };
        let users = format!(
            "{} UNION ALL {} UNION ALL SELECT (created_at / $3) * $3, user_id FROM transcripts \
             WHERE project_id = $1 AND environment_name = $2 AND created_at >= $9 \
             AND created_at < $10 AND direction = 'in'{}",
            rolled(DAY_MS, "$5", "$6"),
            rolled(HOUR_MS, "$7", "$8"),
            s.tests_sql()
        );
        use sqlx::Row as _;
        if let super::Backend::Postgres = self.backend {
            // Per bucket and over the range in one scan.
            let sql = format!(
                "SELECT t, COUNT(DISTINCT u) FROM ({users}) x GROUP BY GROUPING SETS ((t), ())"
            );
            let (mut per_bucket, mut total) = (Vec::new(), 0);
            for r in users_query(&sql, s).fetch_all(&self.pool).await? {
                match r.get::<Option<i64>, _>(0) {
                    Some(t) => per_bucket.push((t, r.get::<i64, _>(1))),
                    None => total = r.get::<i64, _>(1),
                }
            }
            per_bucket.sort_unstable();
            return Ok((per_bucket, total));
        }
        let per_bucket_sql =
            format!("SELECT t, COUNT(DISTINCT u) FROM ({users}) x GROUP BY t ORDER BY t");
        let per_bucket = users_query(&per_bucket_sql, s)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|r| (r.get::<i64, _>(0), r.get::<i64, _>(1)))
            .collect();
        let total_sql = format!("SELECT COUNT(DISTINCT u) FROM ({users}) x");
        let total = users_query(&total_sql, s)
            .fetch_one(&self.pool)
            .await?
            .get::<i64, _>(0);
        Ok((per_bucket, total))
    }
}

/// `sql` over the users of the scope's parts, bound as [`Db::active_users`] numbers them.
fn users_query<'q>(
    sql: &'q str,
    s: &Scope<'q>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    let q = sqlx::query(sql).bind(s.project).bind(s.env_name);
    let q = q.bind(s.bucket_ms).bind(s.include_tests as i64);
    let q = q.bind(s.days.0).bind(s.days.1).bind(s.hours.0);
    q.bind(s.hours.1).bind(s.lines.0).bind(s.lines.1)
}

/// The analytics from counted rows and the active users.
fn assemble(
    (from, to): (i64, i64),
    rows: Vec<Row>,
    users: &[(i64, i64)],
    active_users: i64,
) -> Analytics {
    let mut buckets: BTreeMap<i64, (Bucket, BTreeMap<i64, i64>)> = BTreeMap::new();
    let mut all_times: BTreeMap<i64, i64> = BTreeMap::new();
    let (mut intents, mut flows, mut versions) = (HashMap::new(), HashMap::new(), HashMap::new());
    let (mut messages, mut fallback_messages) = (0, 0);
    for (t, _, metric, label, n) in rows {
        match metric.as_str() {
            "fallback" => fallback_messages += n,
            "intent" => *intents.entry(label).or_default() += n,
            "flow" => *flows.entry(label).or_default() += n,
            "version" => *versions.entry(label).or_default() += n,
            _ => {
                let (b, times) = buckets
                    .entry(t)
                    .or_insert_with(|| (Bucket::empty(t), BTreeMap::new()));
                match metric.as_str() {
                    "in" => {
                        b.messages += n;
                        messages += n;
                    }
                    "out" => b.replies += n,
                    "error" => b.errors += n,
                    "latency" => {
                        let us: i64 = label.parse().unwrap_or_default();
                        *times.entry(us).or_default() += n;
                        *all_times.entry(us).or_default() += n;
                    }
                    _ => {}
                }
            }
        }
    }
    for &(t, n) in users {
        if let Some((b, _)) = buckets.get_mut(&t) {
            b.active_users = n;
        }
    }
    let buckets = buckets
        .into_values()
        .map(|(mut b, times)| {
            b.latency = Latency::of(&times.into_iter().collect::<Vec<_>>());
            b
        })
        .collect();
    Analytics {
        from,
        to,
        buckets,
        active_users,
        top_intents: top(intents),
        top_flows: top(flows),
        versions: top(versions),
        fallback_messages,
        messages,
        latency: Latency::of(&all_times.into_iter().collect::<Vec<_>>()),
    }
}

impl Bucket {
    /// A bucket with nothing counted yet.
    pub(crate) fn empty(start: i64) -> Bucket {
        Bucket {
            start,
            messages: 0,
            replies: 0,
            active_users: 0,
            errors: 0,
            latency: Latency::default(),
        }
    }
}

/// The 10 largest counts, most frequent first, then by name.
fn top(counts: HashMap<String, i64>) -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(10);
    v
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
