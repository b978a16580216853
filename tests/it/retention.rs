//! Retention: the pruner deletes what has outlived its window, in batches, on both
//! backends; young rows and undelivered replies stay.

use crate::common::*;
use botbox_service::live::retention::{Retention, SessionWalk, prune_all};
use botbox_store::{Expired, PRUNE_BATCH, SESSION_PAGE, now_ms};

const MINUTE: i64 = 60_000;
const DAY: i64 = 24 * 60 * MINUTE;

async fn exec(db: &botbox_store::Db, sql: &str) {
    sqlx::query(sql).execute(&db.pool).await.unwrap();
}

async fn outbox(db: &botbox_store::Db, id: &str, status: &str, next_at: i64) {
    exec(
        db,
        &format!(
            "INSERT INTO outbox (id, channel_id, url, headers, body, status, attempts, next_at, \
             last_error, created_at) VALUES ('{id}', 'c', 'http://x', '{{}}', '{{}}', '{status}', 1, \
             {next_at}, NULL, {next_at})"
        ),
    )
    .await
}

/// A project `id` whose transcript window is `days` (NULL: the server's).
async fn project(db: &botbox_store::Db, id: &str, days: Option<i64>) {
    let days = days.map_or("NULL".to_owned(), |d| d.to_string());
    exec(
        db,
        &format!(
            "INSERT INTO projects (id, owner_id, name, options, created_at, updated_at, \
             transcript_retention_days) VALUES ('{id}', 'o', '{id}', '{{}}', 0, 0, {days})"
        ),
    )
    .await
}

async fn transcript_of(db: &botbox_store::Db, project: &str, id: &str, at: i64) {
    exec(
        db,
        &format!(
            "INSERT INTO transcripts (id, project_id, environment_id, environment_name, \
             channel_id, user_id, direction, message, flow, intent, state, created_at) VALUES \
             ('{id}', '{project}', 'e', 'production', 'c', 'u', 'in', '{{}}', NULL, NULL, NULL, {at})"
        ),
    )
    .await
}

async fn transcript(db: &botbox_store::Db, id: &str, at: i64) {
    transcript_of(db, "p", id, at).await
}

/// An agent run `id` in `status`, ended at `ended` (none: in flight), with two chunks and
/// a steer.
async fn run(db: &botbox_store::Db, id: &str, status: &str, ended: Option<i64>) {
    let ended_sql = ended.map_or("NULL".to_owned(), |e| e.to_string());
    exec(
        db,
        &format!(
            "INSERT INTO agent_runs (id, conversation_id, environment_id, key_id, status, error, \
             created_at, started_at, ended_at, lease_until) VALUES ('{id}', 'conv', 'e', 'k', \
             '{status}', NULL, 0, 0, {ended_sql}, 0)"
        ),
    )
    .await;
    for seq in 0..2 {
        exec(
            db,
            &format!(
                "INSERT INTO agent_run_chunks (run_id, seq, body) VALUES ('{id}', {seq}, '{{}}')"
            ),
        )
        .await;
    }
    exec(
        db,
        &format!(
            "INSERT INTO agent_steers (id, run_id, message, status, created_at) VALUES \
             ('steer-{id}', '{id}', 'hi', 'applied', 0)"
        ),
    )
    .await
}

/// A Case webhook message in `status`, created at `at`, with one attempt.
async fn webhook_message(db: &botbox_store::Db, id: &str, status: &str, at: i64) {
    exec(
        db,
        &format!(
            "INSERT INTO webhook_messages (id, endpoint_id, workspace_id, event_type, body, \
             status, attempts, next_at, created_at) VALUES ('{id}', 'ep', 'w', 'task.completed', \
             '{{}}', '{status}', 1, 0, {at})"
        ),
    )
    .await;
    exec(
        db,
        &format!(
            "INSERT INTO webhook_attempts (message_id, attempt, at, status_code, error, \
             duration_ms) VALUES ('{id}', 1, {at}, 200, NULL, 5)"
        ),
    )
    .await
}

async fn seen(db: &botbox_store::Db, id: &str, at: i64) {
    exec(
        db,
        &format!("INSERT INTO inbound_seen (channel_id, provider_id, created_at) VALUES ('c', '{id}', {at})"),
    )
    .await
}

/// A task in `status`, last changed at `at`, with one artifact (`art-<id>`).
async fn task_with_artifact(db: &botbox_store::Db, id: &str, status: &str, at: i64) {
    exec(
        db,
        &format!(
            "INSERT INTO tasks (id, case_id, workspace_id, status, inputs, attempts, lease_until, \
             created_by, created_at, updated_at) VALUES ('{id}', 'case', 'w', '{status}', '{{}}', \
             1, 0, 'u', {at}, {at})"
        ),
    )
    .await;
    exec(
        db,
        &format!(
            "INSERT INTO task_artifacts (id, task_id, name, media_type, size, content, created_at) \
             VALUES ('art-{id}', '{id}', 'summary', 'text/plain', 2, 'aGk=', {at})"
        ),
    )
    .await
}

async fn count(db: &botbox_store::Db, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&db.pool).await.unwrap()
}

/// Rows of every table the pruner visits, some past their window and some not (their ids
/// say which), as of `now`; how many delivered outbox rows are past their minute (more
/// than one batch holds).
async fn expired_and_kept_rows(db: &botbox_store::Db, now: i64) -> usize {
    // More delivered rows past their minute than one batch holds.
    let old_sent = PRUNE_BATCH as usize * 2 + 7;
    for i in 0..old_sent {
        outbox(db, &format!("old-sent-{i}"), "sent", now - 2 * MINUTE).await;
    }
    outbox(db, "young-sent", "sent", now - 10_000).await;
    // Undelivered: kept whatever their age.
    outbox(db, "pending-old", "pending", now - 30 * DAY).await;
    outbox(db, "failed-old", "failed", now - 8 * DAY).await;
    outbox(db, "failed-young", "failed", now - DAY).await;
    transcript(db, "t-old", now - 91 * DAY).await;
    transcript(db, "t-young", now - 89 * DAY).await;
    seen(db, "s-old", now - 8 * DAY).await;
    seen(db, "s-young", now - 6 * DAY).await;
    task_with_artifact(db, "done-old", "done", now - 31 * DAY).await;
    task_with_artifact(db, "failed-old", "failed", now - 31 * DAY).await;
    task_with_artifact(db, "done-young", "done", now - 29 * DAY).await;
    // Waiting for a review: its artifacts stay however old.
    task_with_artifact(db, "review-old", "review", now - 60 * DAY).await;
    run(db, "run-old", "completed", Some(now - 25 * 3600 * 1000)).await;
    run(db, "run-young", "completed", Some(now - 23 * 3600 * 1000)).await;
    run(db, "run-live", "in_progress", None).await;
    for (id, at) in [
        ("idem-old", now - 25 * 3600 * 1000),
        ("idem-young", now - 1000),
    ] {
        exec(
            db,
            &format!(
                "INSERT INTO v1_idempotency (scope, owner, fingerprint, status, headers, body, \
                 created_at) VALUES ('{id}', 'o', 'f', 200, '{{}}', '', {at})"
            ),
        )
        .await;
    }
    for (id, at) in [("rcpt-old", now - 8 * DAY), ("rcpt-young", now - 6 * DAY)] {
        exec(
            db,
            &format!(
                "INSERT INTO inbound_hook_receipts (hook_id, webhook_id, task_id, created_at) \
                 VALUES ('h', '{id}', 't', {at})"
            ),
        )
        .await;
    }
    webhook_message(db, "wm-old", "delivered", now - 31 * DAY).await;
    webhook_message(db, "wm-failed-old", "failed", now - 31 * DAY).await;
    webhook_message(db, "wm-young", "delivered", now - 29 * DAY).await;
    // Still being retried: kept whatever its age.
    webhook_message(db, "wm-pending-old", "pending", now - 60 * DAY).await;
    // Transcripts by their project's window: the server's (90 days) for `p`, an
    // administrator's 365 days for `keep`, for ever for `ever`, 7 days for `short`.
    project(db, "p", None).await;
    project(db, "keep", Some(365)).await;
    project(db, "ever", Some(0)).await;
    project(db, "short", Some(7)).await;
    transcript_of(db, "keep", "keep-200d", now - 200 * DAY).await;
    transcript_of(db, "keep", "keep-400d", now - 400 * DAY).await;
    transcript_of(db, "ever", "ever-1000d", now - 1000 * DAY).await;
    transcript_of(db, "short", "short-8d", now - 8 * DAY).await;
    transcript_of(db, "short", "short-6d", now - 6 * DAY).await;

    old_sent
}

on_both_backends!(the_pruner_deletes_expired_rows_in_batches_and_keeps_the_rest);

async fn the_pruner_deletes_expired_rows_in_batches_and_keeps_the_rest(backend: Backend) {
    // A database alone: a server's own pruner would race with the test's.
    let bare = BareDb::new(backend).await;
    let db = bare.db.clone();
    let now = now_ms();
    let old_sent = expired_and_kept_rows(&db, now).await;

    // One batch: exactly PRUNE_BATCH rows go, the rest of them stay whole.
    let n = db
        .prune_batch(Expired::SentOutbox, now - MINUTE)
        .await
        .unwrap();
    assert_eq!(n, PRUNE_BATCH as u64);
    let left = count(
        &db,
        "SELECT COUNT(*) FROM outbox WHERE id LIKE 'old-sent-%'",
    )
    .await;
    assert_eq!(left as usize, old_sent - PRUNE_BATCH as usize);

    let pruned = prune_all(&db, &Retention::default(), now, &mut SessionWalk::default()).await;
    let of = |what: &str| pruned.iter().find(|(w, _)| *w == what).map(|(_, n)| *n);
    assert_eq!(of("sent_outbox"), Some(left as u64));
    assert_eq!(of("failed_outbox"), Some(1));
    assert_eq!(of("transcripts"), Some(3));
    assert_eq!(of("inbound_seen"), Some(1));
    assert_eq!(of("task_artifacts"), Some(2));
    assert_eq!(of("agent_runs"), Some(1));
    assert_eq!(of("idempotency"), Some(1));
    assert_eq!(of("hook_receipts"), Some(1));
    assert_eq!(of("webhook_messages"), Some(2));
    // Sessions are kept for ever by default: no walk.
    assert_eq!(of("idle_sessions"), None);
    let ids = |sql: &'static str| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, String>(sql)
                .fetch_all(&db.pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        ids("SELECT id FROM agent_runs ORDER BY id").await,
        ["run-live", "run-young"]
    );
    assert_eq!(
        ids("SELECT DISTINCT run_id FROM agent_run_chunks ORDER BY run_id").await,
        ["run-live", "run-young"]
    );
    assert_eq!(
        ids("SELECT run_id FROM agent_steers ORDER BY run_id").await,
        ["run-live", "run-young"]
    );
    assert_eq!(
        ids("SELECT scope FROM v1_idempotency").await,
        ["idem-young"]
    );
    assert_eq!(
        ids("SELECT webhook_id FROM inbound_hook_receipts").await,
        ["rcpt-young"]
    );
    assert_eq!(
        ids("SELECT id FROM webhook_messages ORDER BY id").await,
        ["wm-pending-old", "wm-young"]
    );
    assert_eq!(
        ids("SELECT message_id FROM webhook_attempts ORDER BY message_id").await,
        ["wm-pending-old", "wm-young"]
    );
    assert_eq!(
        ids("SELECT id FROM transcripts ORDER BY id").await,
        ["ever-1000d", "keep-200d", "short-6d", "t-young"]
    );
    let artifacts: Vec<String> = sqlx::query_scalar("SELECT id FROM task_artifacts ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(artifacts, ["art-done-young", "art-review-old"]);
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM outbox ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(ids, ["failed-young", "pending-old", "young-sent"]);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM inbound_seen").await, 1);

    // The database's size, as the metrics read it, on either backend.
    assert!(db.size_bytes().await.unwrap() > 4096);

    // Transcripts kept for ever when the window is off.
    transcript(&db, "t-ancient", now - 1000 * DAY).await;
    let forever = Retention {
        transcripts: None,
        ..Retention::default()
    };
    prune_all(&db, &forever, now, &mut SessionWalk::default()).await;
    assert_eq!(count(&db, "SELECT COUNT(*) FROM transcripts").await, 5);
}

on_both_backends!(a_batch_of_runs_goes_with_its_chunks_and_nothing_else);

/// One batch of the multi-table kinds is one transaction: after a single batch of more
/// ended runs than it holds, every run left has its whole chunk log and steers, and every
/// run gone took its own with it (no orphan, no half).
async fn a_batch_of_runs_goes_with_its_chunks_and_nothing_else(backend: Backend) {
    let bare = BareDb::new(backend).await;
    let db = bare.db.clone();
    let now = now_ms();
    let n = PRUNE_BATCH + 3;
    for i in 0..n {
        run(&db, &format!("r{i:04}"), "completed", Some(now - DAY - i)).await;
    }
    let gone = db.prune_batch(Expired::AgentRuns, now).await.unwrap();
    assert_eq!(gone, PRUNE_BATCH as u64);
    // Oldest first: the three youngest stay.
    let runs: Vec<String> = sqlx::query_scalar("SELECT id FROM agent_runs ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(runs, ["r0000", "r0001", "r0002"]);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM agent_run_chunks").await, 6);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM agent_run_chunks WHERE run_id NOT IN (SELECT id FROM agent_runs)"
        )
        .await,
        0
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM agent_steers").await, 3);
}

on_both_backends!(idle_sessions_go_when_a_window_is_set_page_by_page);

/// With a session window, the pruner walks the sessions by id a few pages per pass and
/// deletes those not changed within it; the walk goes on where it stopped and starts over
/// at the end. Without a window, no session goes.
async fn idle_sessions_go_when_a_window_is_set_page_by_page(backend: Backend) {
    let bare = BareDb::new(backend).await;
    let db = bare.db.clone();
    let now = now_ms();
    // More sessions than one pass's pages (10 × SESSION_PAGE): every third one idle.
    let n = SESSION_PAGE * 12;
    let mut tx = db.pool.begin().await.unwrap();
    for i in 0..n {
        let at = if i % 3 == 0 {
            now - 40 * DAY
        } else {
            now - DAY
        };
        sqlx::query(
            "INSERT INTO sessions (id, environment_id, channel_id, user_id, body, version, \
             updated_at) VALUES ($1, 'e', 'c', $2, '{}', 1, $3)",
        )
        .bind(format!("s{i:06}"))
        .bind(format!("u{i}"))
        .bind(at)
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let idle = (n + 2) / 3;

    let mut walk = SessionWalk::default();
    prune_all(&db, &Retention::default(), now, &mut walk).await;
    assert_eq!(count(&db, "SELECT COUNT(*) FROM sessions").await, n);

    let month = Retention {
        idle_sessions: Some(std::time::Duration::from_secs(30 * 24 * 3600)),
        ..Retention::default()
    };
    let of = |p: &[(&str, u64)]| p.iter().find(|(w, _)| *w == "idle_sessions").unwrap().1;
    // The first pass reads ten pages: the idle sessions among the first 10,000 go.
    let first = of(&prune_all(&db, &month, now, &mut walk).await);
    let in_first_pages = (SESSION_PAGE * 10 + 2) / 3;
    assert_eq!(first as i64, in_first_pages);
    // The second reaches the end; the third starts over and finds nothing left.
    let second = of(&prune_all(&db, &month, now, &mut walk).await);
    assert_eq!(first + second, idle as u64);
    assert_eq!(of(&prune_all(&db, &month, now, &mut walk).await), 0);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM sessions").await, n - idle);
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT COUNT(*) FROM sessions WHERE updated_at < {}",
                now - 30 * DAY
            )
        )
        .await,
        0
    );
}

/// An administrator sets a project's own transcript window; its owner can read it and
/// cannot change it; a window out of range is refused naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_sets_a_projects_transcript_window() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (_, dev) = api.user(&admin, "dev", "developer").await;
    let (pid, _) = deploy(&api, &dev, example_bot("pizza")).await;
    let path = format!("/projects/{pid}/retention");
    let view = api.get(&path, &dev).await.ok();
    assert_eq!(
        view,
        serde_json::json!({"transcriptDays": 90.0, "overridden": false, "serverTranscriptDays": 90.0})
    );
    let r = api
        .put(&path, &dev, serde_json::json!({"transcriptDays": 3650}))
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = api
        .put(&path, &admin, serde_json::json!({"transcriptDays": -1}))
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("transcriptDays"), "{}", r.text);
    let view = api
        .put(&path, &admin, serde_json::json!({"transcriptDays": 365}))
        .await
        .ok();
    assert_eq!(view["transcriptDays"], 365.0);
    assert_eq!(view["overridden"], true);
    assert_eq!(api.get(&path, &dev).await.ok(), view);
    let view = api
        .put(&path, &admin, serde_json::json!({"transcriptDays": 0}))
        .await
        .ok();
    assert_eq!(
        view["transcriptDays"],
        serde_json::Value::Null,
        "0: for ever"
    );
    let view = api
        .put(&path, &admin, serde_json::json!({"transcriptDays": null}))
        .await
        .ok();
    assert_eq!(view["overridden"], false);
    assert_eq!(view["transcriptDays"], 90.0);
}

on_both_backends!(storage_counts_a_tenants_rows_and_bytes);

/// After a known workload (three users' messages to an echo bot), `GET /storage` gives the
/// tenant's transcript lines and sessions with their bytes as stored; another tenant's
/// figures stay at zero.
async fn storage_counts_a_tenants_rows_and_bytes(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let bot = one_state_bot(
        serde_json::json!({"end": true, "action": {"name": "text", "options": {"text": "echo $(content)"}}}),
    );
    let (pid, env) = deploy(&api, &admin, bot).await;
    let channel = generic_channel(&api, &admin, &pid, &env, "http://127.0.0.1:9/sink").await;
    for k in 0..3 {
        let body = serde_json::json!({"userId": format!("u{k}"), "messages": [
            {"id": format!("m{k}"), "type": "text", "content": format!("hello {k}")}]});
        post_webhook(&api, &channel, &body).await;
    }
    let db = server.db().await;
    let lines = db
        .list_transcripts(&pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    // A message's line with its replay record (a user's line).
    let (records,): (i64,) = sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(LENGTH(replay)), 0) AS BIGINT) FROM transcripts WHERE project_id = $1",
    )
    .bind(&pid)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(records > 0, "the users' lines carry their replay records");
    let line_bytes = lines.iter().map(|l| l.message.len()).sum::<usize>() + records as usize;
    let storage = api.get("/storage", &admin).await.ok();
    let kind = |k: &str| {
        storage["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["kind"] == k)
            .cloned()
            .unwrap()
    };
    assert_eq!(kind("transcripts")["rows"], lines.len());
    assert_eq!(kind("transcripts")["bytes"], line_bytes);
    assert_eq!(kind("sessions")["rows"], 3);
    assert!(kind("sessions")["bytes"].as_i64().unwrap() > 0);
    assert_eq!(kind("task_artifacts")["rows"], 0);
    let total: i64 = storage["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(storage["totalBytes"], total);

    let (_, other) = api.user(&admin, "other", "developer").await;
    let theirs = api.get("/storage", &other).await.ok();
    assert_eq!(theirs["totalBytes"], 0, "{theirs}");
}

/// With `--storage-quota-mb 1`, a tenant storing more than 1 MiB gets 507 on its next bot
/// push, naming the figures; another tenant pushes as before, and the first tenant's
/// channel messages still run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_past_its_storage_quota_cannot_push() {
    let server = InProcess::start_configured(Backend::Sqlite, |cfg| {
        cfg.live.storage_quota_bytes = Some(1 << 20);
    })
    .await;
    let api = server.api();
    let admin = api.admin_token().await;
    let bot = example_bot("pizza");
    let (pid, env) = deploy(&api, &admin, bot.clone()).await;
    let db = server.db().await;
    let big = "x".repeat(1_100_000);
    sqlx::query(
        "INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, \
         user_id, direction, message, flow, intent, state, created_at) VALUES \
         ('big', $1, $2, 'production', 'c', 'u', 'in', $3, NULL, NULL, NULL, $4)",
    )
    .bind(&pid)
    .bind(&env)
    .bind(&big)
    .bind(now_ms())
    .execute(&db.pool)
    .await
    .unwrap();
    let r = api
        .post(
            &format!("/projects/{pid}/bot/revisions"),
            &admin,
            bot.clone(),
        )
        .await;
    assert_eq!(r.status, 507, "{}", r.text);
    assert!(r.text.contains("storage quota reached"), "{}", r.text);
    assert!(r.text.contains("of its 1048576"), "{}", r.text);
    let (_, other) = api.user(&admin, "other", "developer").await;
    deploy(&api, &other, bot).await;
    // Messages are never refused for the quota.
    let channel = generic_channel(&api, &admin, &pid, &env, "http://127.0.0.1:9/sink").await;
    let body = serde_json::json!({"userId": "u1", "messages": [
        {"id": "m1", "type": "text", "content": "hi"}]});
    let r = hook(
        &api,
        &format!("{}/webhooks/{channel}", server.base),
        &[],
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// `botbox rebuild-rollups` recounts a data folder's analytics rollups: an hour whose rows
/// were lost is counted again from its lines, and the answer says how much was rebuilt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_rollups_recounts_a_data_folder() {
    const HOUR: i64 = 60 * MINUTE;
    let dir = tempfile::tempdir().unwrap();
    let db = botbox_store::Db::connect(&botbox_store::sqlite_url(dir.path()))
        .await
        .unwrap();
    exec(
        &db,
        "INSERT INTO environments (id, project_id, name, slug, deployment_version, created_at) \
         VALUES ('e', 'p', 'production', 'production', '0.0.1', 0)",
    )
    .await;
    let t0 = (now_ms() / DAY - 2) * DAY;
    for h in 0..6 {
        for n in 0..=h {
            transcript(&db, &format!("l{h}-{n}"), t0 + h * HOUR + n * MINUTE).await;
        }
    }
    db.roll_up(t0 + DAY, std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let hours =
        |a: &botbox_store::Analytics| a.buckets.iter().map(|b| b.messages).collect::<Vec<_>>();
    let counted = || db.analytics("p", ("production", "e"), t0, t0 + 6 * HOUR, HOUR, false);
    assert_eq!(hours(&counted().await.unwrap()), [1, 2, 3, 4, 5, 6]);
    exec(
        &db,
        &format!("DELETE FROM rollups WHERE start = {}", t0 + 3 * HOUR),
    )
    .await;
    assert_eq!(hours(&counted().await.unwrap()), [1, 2, 3, 5, 6]);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["rebuild-rollups", "--data"])
        .arg(dir.path())
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.starts_with("rebuilt ") && said.contains("environment-hours"),
        "{said}"
    );
    assert_eq!(hours(&counted().await.unwrap()), [1, 2, 3, 4, 5, 6]);
}
