//! The rollups answer exactly what a scan of the lines answers, before and after pruning and
//! after a rebuild, on both backends: the expected analytics are computed here from the
//! generated lines themselves.

use super::{DAY_MS, HOUR_MS, SETTLE_MS};
use crate::{Analytics, Bucket, Db, Latency};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// 2026-01-01T00:00:00Z: the generated history starts 5 hours before it.
const T0: i64 = 1_767_225_600_000;
const PROJECT: &str = "p";

/// A generated transcript line or bot error.
#[derive(Clone)]
struct Line {
    env: (&'static str, &'static str),
    at: i64,
    console: bool,
    user: String,
    incoming: bool,
    intent: Option<&'static str>,
    flow: Option<&'static str>,
    step_us: Option<i64>,
    /// The deployment version that answered a channel user's line.
    version: Option<&'static str>,
    /// A channel user's line: `ok` or `fallback` (a fallback intent of any name, or none).
    outcome: Option<&'static str>,
    error: bool,
}

/// Deterministic lines over `[T0 - 5 h, T0 + 3 d + 7 h)`, in two environments of `p` and one
/// of another project whose environment has the same name.
fn history() -> Vec<Line> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let span = (3 * DAY_MS + 12 * HOUR_MS) as u64;
    let envs = [("production", "e1"), ("staging", "e2")];
    let intents = [None, Some("greeting"), Some("fallback"), Some("order")];
    (0..3000)
        .map(|_| {
            let incoming = next(2) == 0;
            let console = next(6) == 0;
            let intent = if incoming {
                intents[next(4) as usize]
            } else {
                None
            };
            // "order" is a fallback intent one time in three.
            let falls_back = intent.is_none() || (intent == Some("order") && next(3) == 0);
            Line {
                env: envs[(next(5) == 0) as usize],
                at: T0 - 5 * HOUR_MS + next(span) as i64,
                console,
                user: format!("u{}", next(9)),
                incoming,
                intent,
                flow: [None, Some("main"), Some("order")][next(3) as usize],
                step_us: (incoming && next(8) != 0).then(|| 5 + next(300_000) as i64),
                version: (incoming && !console)
                    .then(|| ["1.0.0", "1.0.1"][next(4).min(1) as usize]),
                outcome: (incoming && !console).then_some(if falls_back {
                    "fallback"
                } else {
                    "ok"
                }),
                error: next(12) == 0,
            }
        })
        .collect()
}

async fn store(db: &Db, lines: &[Line]) {
    for id in [PROJECT, "q"] {
        sqlx::query(
            "INSERT INTO projects (id, owner_id, name, options, created_at, updated_at) \
             VALUES ($1, 'o', $1, '{}', 0, 0)",
        )
        .bind(id)
        .execute(&db.pool)
        .await
        .unwrap();
    }
    for (project, name, id) in [
        (PROJECT, "production", "e1"),
        (PROJECT, "staging", "e2"),
        ("q", "production", "e3"),
    ] {
        sqlx::query(
            "INSERT INTO environments (id, project_id, name, slug, deployment_version, created_at) \
             VALUES ($1, $2, $3, $3, '0.0.1', 0)",
        )
        .bind(id)
        .bind(project)
        .bind(name)
        .execute(&db.pool)
        .await
        .unwrap();
    }
    for (i, l) in lines.iter().enumerate() {
        let channel = if l.console { "console" } else { "c" };
        let sql = if l.error {
            "INSERT INTO bot_errors (id, project_id, environment_id, channel_id, created_at, \
             error_group, error_code, message) VALUES ($1, $2, $3, $4, $5, 'bot', 'x', 'boom')"
        } else {
            "INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, \
             user_id, direction, message, flow, intent, state, created_at, step_us, dep_version, \
             outcome) VALUES ($1, $2, $3, $6, $4, $7, $8, '{}', $9, $10, 's', $5, $11, $12, $13)"
        };
        let q = sqlx::query(sql).bind(format!("l{i}")).bind(PROJECT);
        let q = q.bind(l.env.1).bind(channel).bind(l.at);
        let q = if l.error {
            q
        } else {
            q.bind(l.env.0)
                .bind(&l.user)
                .bind(if l.incoming { "in" } else { "out" })
                .bind(l.flow)
                .bind(l.intent)
                .bind(l.step_us)
                .bind(l.version)
                .bind(l.outcome)
        };
        q.execute(&db.pool).await.unwrap();
        // The other tenant's environment of the same name gets a copy of every line.
        if !l.error && l.env.0 == "production" {
            sqlx::query(
                "INSERT INTO transcripts (id, project_id, environment_id, environment_name, \
                 channel_id, user_id, direction, message, created_at) \
                 VALUES ($1, 'q', 'e3', 'production', 'c', 'u0', 'in', '{}', $2)",
            )
            .bind(format!("q{i}"))
            .bind(l.at)
            .execute(&db.pool)
            .await
            .unwrap();
        }
    }
}

/// A bucket being counted: its figures, its users, its step times.
type Counting<'a> = (Bucket, BTreeSet<&'a str>, BTreeMap<i64, i64>);

/// Two significant digits, rounded down.
fn two_digits(us: i64) -> i64 {
    let mut unit = 1;
    while us / unit >= 100 {
        unit *= 10;
    }
    us / unit * unit
}

/// The analytics of `env` computed from the lines: the range widened to whole buckets.
fn expected(
    lines: &[Line],
    env: &str,
    (from, to): (i64, i64),
    bucket: i64,
    tests: bool,
) -> Analytics {
    let (from, to) = (
        from.div_euclid(bucket) * bucket,
        (to + bucket - 1).div_euclid(bucket) * bucket,
    );
    let seen = lines
        .iter()
        .filter(|l| l.env.0 == env && l.at >= from && l.at < to && (tests || !l.console));
    let mut buckets: BTreeMap<i64, Counting> = BTreeMap::new();
    let (mut users, mut all_times) = (BTreeSet::new(), BTreeMap::new());
    let (mut intents, mut flows) = (HashMap::<String, i64>::new(), HashMap::<String, i64>::new());
    let mut versions = HashMap::<String, i64>::new();
    let (mut messages, mut fallback) = (0, 0);
    for l in seen {
        let t = l.at.div_euclid(bucket) * bucket;
        let b = buckets
            .entry(t)
            .or_insert_with(|| (Bucket::empty(t), BTreeSet::new(), BTreeMap::new()));
        if l.error {
            b.0.errors += 1;
            continue;
        }
        if !l.incoming {
            b.0.replies += 1;
            continue;
        }
        b.0.messages += 1;
        messages += 1;
        b.1.insert(l.user.as_str());
        users.insert(l.user.as_str());
        fallback += match l.outcome {
            Some(o) => o == "fallback",
            None => matches!(l.intent, None | Some("fallback")),
        } as i64;
        if let Some(i) = l.intent {
            *intents.entry(i.into()).or_default() += 1;
        }
        if let Some(v) = l.version {
            *versions.entry(v.into()).or_default() += 1;
        }
        if let Some(f) = l.flow {
            *flows.entry(f.into()).or_default() += 1;
        }
        if let Some(us) = l.step_us {
            *b.2.entry(two_digits(us)).or_default() += 1;
            *all_times.entry(two_digits(us)).or_default() += 1;
        }
    }
    let top = |m: HashMap<String, i64>| {
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    };
    Analytics {
        from,
        to,
        buckets: buckets
            .into_values()
            .map(|(mut b, u, times)| {
                b.active_users = u.len() as i64;
                b.latency = Latency::of(&times.into_iter().collect::<Vec<_>>());
                b
            })
            .collect(),
        active_users: users.len() as i64,
        top_intents: top(intents),
        top_flows: top(flows),
        versions: top(versions),
        fallback_messages: fallback,
        messages,
        latency: Latency::of(&all_times.into_iter().collect::<Vec<_>>()),
    }
}

/// The ranges and buckets compared: whole history by day and by hour, ranges that start and
/// end inside hours and days, with and without test traffic, in both environments.
fn cases() -> Vec<(&'static str, (i64, i64), i64, bool)> {
    let mut v = Vec::new();
    for (env, tests) in [
        ("production", false),
        ("production", true),
        ("staging", false),
    ] {
        v.push((env, (T0 - DAY_MS, T0 + 5 * DAY_MS), DAY_MS, tests));
        v.push((env, (T0 - DAY_MS, T0 + 5 * DAY_MS), HOUR_MS, tests));
        v.push((
            env,
            (T0 + 7 * HOUR_MS + 123, T0 + 2 * DAY_MS + 1),
            DAY_MS,
            tests,
        ));
        v.push((
            env,
            (T0 + 30 * HOUR_MS + 5, T0 + 75 * HOUR_MS - 5),
            HOUR_MS,
            tests,
        ));
    }
    v
}

async fn check(db: &Db, lines: &[Line], when: &str) {
    for (env, range, bucket, tests) in cases() {
        let id = if env == "production" { "e1" } else { "e2" };
        let got = db
            .analytics(PROJECT, (env, id), range.0, range.1, bucket, tests)
            .await
            .unwrap();
        let want = expected(lines, env, range, bucket, tests);
        let mut want_top = want.clone();
        want_top.top_intents.truncate(10);
        want_top.top_flows.truncate(10);
        assert_eq!(
            got, want_top,
            "{when}: {env} {range:?} by {bucket} tests={tests}"
        );
    }
}

async fn rollups_equal_a_scan_of_the_lines(db: Db) {
    let lines = history();
    store(&db, &lines).await;
    check(&db, &lines, "before any rollup").await;
    // Rolled up to the middle of the history: rollups before, lines after.
    let now = T0 + 2 * DAY_MS + 3 * HOUR_MS + SETTLE_MS + 1;
    let rolled = db.roll_up(now, Duration::from_secs(600)).await.unwrap();
    assert_eq!(rolled, T0 + 2 * DAY_MS + 3 * HOUR_MS);
    check(&db, &lines, "rolled up to the middle").await;
    // A second pass at the same time rolls nothing again.
    assert_eq!(
        db.roll_up(now, Duration::from_secs(600)).await.unwrap(),
        rolled
    );
    check(&db, &lines, "after a second pass").await;
    // A rebuild re-counts the hours whose lines are all stored: a lost hour and a wrong
    // day come back right.
    sqlx::query("DELETE FROM rollups WHERE span_ms = $1 AND start = $2")
        .bind(HOUR_MS)
        .bind(T0 + 10 * HOUR_MS)
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE rollups SET n = n + 5 WHERE span_ms = $1 AND start = $2")
        .bind(DAY_MS)
        .bind(T0)
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(db.rebuild_rollups().await.unwrap() > 0);
    check(&db, &lines, "after a rebuild").await;
    // Pruning everything stops at the watermark, and the answers stay.
    let pruned = db
        .prune_transcripts(Some(i64::MAX), now, rolled)
        .await
        .unwrap();
    assert!(pruned > 0);
    let left: i64 = sqlx::query_scalar("SELECT MIN(created_at) FROM transcripts")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(left >= rolled);
    sqlx::query("DELETE FROM bot_errors WHERE created_at < $1")
        .bind(T0 + DAY_MS + 7)
        .execute(&db.pool)
        .await
        .unwrap();
    check(&db, &lines, "after pruning").await;
    // A rebuild after pruning keeps the counts of what is no longer stored.
    db.rebuild_rollups().await.unwrap();
    check(&db, &lines, "after pruning and a rebuild").await;
    // Rolled to the end: every range answers from rollups.
    db.roll_up(T0 + 5 * DAY_MS, Duration::from_secs(600))
        .await
        .unwrap();
    check(&db, &lines, "rolled to the end").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollups_equal_a_scan_on_sqlite() {
    let (_dir, db) = crate::test_sqlite().await;
    rollups_equal_a_scan_of_the_lines(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollups_equal_a_scan_on_postgres() {
    if let Some(db) = crate::test_postgres().await {
        rollups_equal_a_scan_of_the_lines(db).await;
    }
}
