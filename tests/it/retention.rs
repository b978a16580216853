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
    let server = InProcess::start(backend).await;
    let db = server.db().await;
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

    // Transcripts kept for ever when the window is off.
    transcript(&db, "t-ancient", now - 1000 * DAY).await;
    let forever = Retention {
        transcripts: None,
        ..Retention::default()
    };
    prune_all(&db, &forever, now).await;
    assert_eq!(count(&db, "SELECT COUNT(*) FROM transcripts").await, 2);
}
