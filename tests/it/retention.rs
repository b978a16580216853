//! Retention: the pruner deletes what has outlived its window, in batches, on both
//! backends; young rows and undelivered replies stay.

use crate::common::*;
use botbox_service::live::retention::{Retention, prune_all};
use botbox_store::{Expired, PRUNE_BATCH, now_ms};

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

async fn transcript(db: &botbox_store::Db, id: &str, at: i64) {
    exec(
        db,
        &format!(
            "INSERT INTO transcripts (id, project_id, environment_id, environment_name, \
             channel_id, user_id, direction, message, flow, intent, state, created_at) VALUES \
             ('{id}', 'p', 'e', 'production', 'c', 'u', 'in', '{{}}', NULL, NULL, NULL, {at})"
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

on_both_backends!(the_pruner_deletes_expired_rows_in_batches_and_keeps_the_rest);

async fn the_pruner_deletes_expired_rows_in_batches_and_keeps_the_rest(backend: Backend) {
    // A database alone: a server's own pruner would race with the test's.
    let bare = BareDb::new(backend).await;
    let db = bare.db.clone();
    let now = now_ms();
    // More delivered rows past their minute than one batch holds.
    let old_sent = PRUNE_BATCH as usize * 2 + 7;
    for i in 0..old_sent {
        outbox(&db, &format!("old-sent-{i}"), "sent", now - 2 * MINUTE).await;
    }
    outbox(&db, "young-sent", "sent", now - 10_000).await;
    // Undelivered: kept whatever their age.
    outbox(&db, "pending-old", "pending", now - 30 * DAY).await;
    outbox(&db, "failed-old", "failed", now - 8 * DAY).await;
    outbox(&db, "failed-young", "failed", now - DAY).await;
    transcript(&db, "t-old", now - 91 * DAY).await;
    transcript(&db, "t-young", now - 89 * DAY).await;
    seen(&db, "s-old", now - 8 * DAY).await;
    seen(&db, "s-young", now - 6 * DAY).await;
    task_with_artifact(&db, "done-old", "done", now - 31 * DAY).await;
    task_with_artifact(&db, "failed-old", "failed", now - 31 * DAY).await;
    task_with_artifact(&db, "done-young", "done", now - 29 * DAY).await;
    // Waiting for a review: its artifacts stay however old.
    task_with_artifact(&db, "review-old", "review", now - 60 * DAY).await;

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

    let pruned = prune_all(&db, &Retention::default(), now).await;
    let of = |what: &str| pruned.iter().find(|(w, _)| *w == what).map(|(_, n)| *n);
    assert_eq!(of("sent_outbox"), Some(left as u64));
    assert_eq!(of("failed_outbox"), Some(1));
    assert_eq!(of("transcripts"), Some(1));
    assert_eq!(of("inbound_seen"), Some(1));
    assert_eq!(of("task_artifacts"), Some(2));
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
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM transcripts WHERE id = 't-young'").await,
        1
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM transcripts").await, 1);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM inbound_seen").await, 1);

    // The database's size, as the metrics read it, on either backend.
    assert!(db.size_bytes().await.unwrap() > 4096);

    // Transcripts kept for ever when the window is off.
    transcript(&db, "t-ancient", now - 1000 * DAY).await;
    let forever = Retention {
        transcripts: None,
        ..Retention::default()
    };
    prune_all(&db, &forever, now).await;
    assert_eq!(count(&db, "SELECT COUNT(*) FROM transcripts").await, 2);
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
        let r = api
            .raw(
                "POST",
                &format!("/webhooks/{channel}"),
                None,
                body.to_string().into_bytes(),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let db = server.db().await;
    let lines = db
        .list_transcripts(&pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    let line_bytes: usize = lines.iter().map(|l| l.message.len()).sum();
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
    let server = Server::start(Backend::Sqlite, &["--storage-quota-mb", "1"]).await;
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
