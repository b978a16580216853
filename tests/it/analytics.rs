//! The analytics endpoint: the server aggregates an environment's transcripts and errors
//! into buckets, top intents and flows and a fallback rate, on both backends.

use crate::common::*;
use serde_json::{Value, json};

on_both_backends!(
    analytics_aggregate_a_known_conversation,
    days_and_bad_ranges_answer_clearly,
);

/// Three messages of two users to the hello bot now, and one line (its step took 2.5 ms) and
/// one error two hours earlier: two hourly buckets with their counts and step latencies, the
/// intents and flow, a fallback rate of two in four.
async fn analytics_aggregate_a_known_conversation(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("hello")).await;
    let channel = generic_channel(&api, &admin, &pid, &env, "http://127.0.0.1:9/sink").await;
    for (user, text) in [("ann", "hi"), ("bob", "hi"), ("ann", "what")] {
        let body = json!({"userId": user, "messages": [{"type": "text", "content": text}]});
        post_webhook(&api, &channel, &body).await;
    }
    const HOUR: i64 = 3_600_000;
    let now = botbox_store::now_ms();
    let earlier = (now / HOUR - 2) * HOUR + 60_000;
    backdated_history(&server.db().await, (&pid, &env), earlier, now).await;

    let path = format!(
        "/projects/{pid}/analytics?environment=production&from={}&to={}",
        now - 3 * HOUR,
        now + HOUR
    );
    let a: Value = api.get(&path, &admin).await.ok();
    assert_eq!(a["bucket"], "hour");
    // The live steps' times are the machine's: read back from the transcript (each user
    // message's line carries its step's), then rounded as the server rounds them.
    let lines: Value = api
        .get(
            // After the old line (exclusive): the three live messages and their replies.
            &format!("/projects/{pid}/transcripts?environment=production&after={earlier}"),
            &admin,
        )
        .await
        .ok();
    let mut times: Vec<i64> = lines["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["direction"] == "in")
        .map(|l| {
            l["stepUs"]
                .as_i64()
                .expect("a user's line has its step's time")
        })
        .map(two_digits)
        .collect();
    times.sort();
    assert_eq!(times.len(), 3, "{lines}");
    assert!(
        lines["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| (l["direction"] == "out") == l["stepUs"].is_null())
    );
    assert_eq!(
        a["series"],
        json!([
            {"start": earlier / HOUR * HOUR, "messages": 1, "replies": 0, "activeUsers": 1, "errors": 1,
             "latencyP50Us": 2500, "latencyP99Us": 2500},
            {"start": now / HOUR * HOUR, "messages": 3, "replies": 3, "activeUsers": 2, "errors": 0,
             "latencyP50Us": times[1], "latencyP99Us": times[2]},
        ]),
        "{a}"
    );
    // Over the range: four steps, the median the second smallest, the 99th the largest.
    let mut all = [2500, times[0], times[1], times[2]];
    all.sort();
    assert_eq!(
        (a["latencyP50Us"].as_i64(), a["latencyP99Us"].as_i64()),
        (Some(all[1]), Some(all[3])),
        "{a}"
    );
    assert_eq!(a["messages"], 4);
    assert_eq!(a["activeUsers"], 3);
    assert_eq!(
        a["fallbackRate"], 0.5,
        "two of four: the old line and 'what'"
    );
    assert_eq!(
        a["topIntents"],
        json!([{"name": "greeting", "count": 2}, {"name": "fallback", "count": 1}])
    );
    assert_eq!(a["topFlows"], json!([{"name": "hello", "count": 4}]));
}

/// One line (its step took 2.5 ms) and one bot error of project `pid`'s environment `env`
/// at `earlier`, then a first rollup pass at `now`: history a server meets on its first
/// pass, rolled up from the hour of the oldest, the live messages' hour still open.
async fn backdated_history(
    db: &botbox_store::Db,
    (pid, env): (&str, &str),
    earlier: i64,
    now: i64,
) {
    sqlx::query(
        "INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, \
         user_id, direction, message, flow, intent, state, created_at, step_us) VALUES \
         ('old', $1, $2, 'production', 'c', 'cid', 'in', '{}', 'hello', NULL, 'init', $3, 2567)",
    )
    .bind(pid)
    .bind(env)
    .bind(earlier)
    .execute(&db.pool)
    .await
    .unwrap();
    db.insert_bot_errors(&[botbox_service::live::new_bot_error(
        pid,
        env,
        ("c", Some("u1")),
        "bot",
        "method boom threw",
    )])
    .await
    .unwrap();
    sqlx::query("UPDATE bot_errors SET created_at = $1")
        .bind(earlier)
        .execute(&db.pool)
        .await
        .unwrap();
    for sql in ["DELETE FROM rollup_progress", "DELETE FROM rollups"] {
        sqlx::query(sql).execute(&db.pool).await.unwrap();
    }
    let rolled = db
        .roll_up(now, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    assert!(rolled > earlier && rolled <= now, "rolled up to {rolled}");
}

/// Days as buckets, and a clear error for an unknown bucket or a range that ends before
/// it starts.
async fn days_and_bad_ranges_answer_clearly(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, _) = deploy(&api, &admin, example_bot("hello")).await;
    let day = api
        .get(
            &format!("/projects/{pid}/analytics?environment=production&bucket=day"),
            &admin,
        )
        .await
        .ok();
    assert_eq!(day["bucket"], "day");
    let r = api
        .get(
            &format!("/projects/{pid}/analytics?environment=production&bucket=week"),
            &admin,
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("bucket: hour or day"), "{}", r.text);
    let r = api
        .get(
            &format!("/projects/{pid}/analytics?environment=production&from=10&to=5"),
            &admin,
        )
        .await;
    assert_eq!(r.status, 400);
}

/// A time rounded down to two significant digits, as the analytics report it.
fn two_digits(us: i64) -> i64 {
    let mut unit = 1;
    while us / unit >= 100 {
        unit *= 10;
    }
    us / unit * unit
}
