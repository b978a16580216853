//! Stored data survives upgrades: a revision, a session, an outbox row and a
//! schedule stored by the botbox of commit 7a3e5c5 (before stored forms had versions; files
//! in `tests/fixtures/format-0/`) are put in a database and run by this build: the compiled
//! bot is recompiled from its stored source (and the new form stored), the session is read
//! and continued, the reply waiting in the outbox is sent and the schedule fires.

use crate::common;

use crate::common::{Backend, Receiver, Server, deploy, hook, s, texts};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/format-0/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

on_both_backends!(format_0_data_runs_after_the_upgrade);

async fn format_0_data_runs_after_the_upgrade(backend: Backend) {
    let (rx, rx_url) = Receiver::start().await;
    let mut server = Server::start(backend, &["--allow-private-egress"]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let source: Value = serde_json::from_str(&fixture("bot.source.json")).unwrap();
    let (pid, env) = deploy(&api, &admin, source).await;
    let ch_id = common::generic_channel(&api, &admin, &pid, &env, &rx_url).await;

    // What the old build stored, put in place while no process has anything cached.
    let db = server.db().await;
    let (rev_id,): (String,) = sqlx::query_as(
        "SELECT id FROM bot_revisions WHERE project_id = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(&pid)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let old_compiled = fixture("bot.compiled.json");
    assert!(
        !old_compiled.contains("\"format\""),
        "the fixture predates formats"
    );
    sqlx::query("UPDATE bot_revisions SET compiled = $1 WHERE id = $2")
        .bind(old_compiled.trim())
        .bind(&rev_id)
        .execute(&db.pool)
        .await
        .unwrap();
    let old_session = fixture("session.json");
    let key = format!("{env}:{ch_id}:ann");
    sqlx::query(
        "INSERT INTO sessions (id, environment_id, channel_id, user_id, body, version, updated_at) \
         VALUES ($1, $2, $3, 'ann', $4, 1, 0)",
    )
    .bind(&key)
    .bind(&env)
    .bind(&ch_id)
    .bind(old_session.trim())
    .execute(&db.pool)
    .await
    .unwrap();
    // Rows of the old schema name no format column: the migration gives them format 1.
    let outbox: Value = serde_json::from_str(&fixture("outbox.json")).unwrap();
    sqlx::query(
        "INSERT INTO outbox (id, channel_id, url, headers, body, status, attempts, next_at, created_at) \
         VALUES ('old-row', $1, $2, $3, $4, 'pending', 0, 0, 0)",
    )
    .bind(&ch_id)
    .bind(&rx_url)
    .bind(outbox["headers"].to_string())
    .bind(s(&outbox["body"]))
    .execute(&db.pool)
    .await
    .unwrap();
    let schedule: Value = serde_json::from_str(&fixture("schedule.json")).unwrap();
    sqlx::query(
        "INSERT INTO schedules (id, session_id, channel_id, user_id, message, next_at, end_at, every_ms, created_at) \
         VALUES ('old-schedule', $1, $2, 'bob', $3, 0, NULL, NULL, 0)",
    )
    .bind(format!("{env}:{ch_id}:bob"))
    .bind(&ch_id)
    .bind(s(&schedule["message"]))
    .execute(&db.pool)
    .await
    .unwrap();
    server.restart().await;
    let api = server.api();

    // The waiting reply and the schedule's reply arrive.
    let seen = rx.wait_for(2).await;
    let bodies: Vec<&Value> = seen.iter().map(|(_, _, b)| b).collect();
    let old_body: Value = serde_json::from_str(&s(&outbox["body"])).unwrap();
    assert!(bodies.contains(&&old_body), "{bodies:?}");
    let bob = bodies
        .iter()
        .find(|b| b["userId"] == "bob")
        .unwrap_or_else(|| panic!("no reply to the schedule: {bodies:?}"));
    assert_eq!(texts(bob), vec!["[carousel]", "Which one do you want?"]);

    // Ann's session (an order waiting for a quantity of pepperoni) continues.
    let url = format!("{}/webhooks/{ch_id}", server.base);
    let r = hook(
        &api,
        &url,
        &[],
        &json!({"userId": "ann", "messages": [{"type": "text", "content": "2"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let seen = rx.wait_for(3).await;
    let ann = &seen[2].2;
    assert_eq!(ann["userId"], "ann");
    assert_eq!(
        ann["messages"][0]["payload"]["items"]["text"],
        "Is it correct: 2 x pepperoni?"
    );

    // The new forms were stored.
    let (compiled,): (String,) = sqlx::query_as("SELECT compiled FROM bot_revisions WHERE id = $1")
        .bind(&rev_id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let compiled: Value = serde_json::from_str(&compiled).unwrap();
    assert_eq!(compiled["format"], runtime_core::model::COMPILED_FORMAT);
    let (session,): (String,) = sqlx::query_as("SELECT body FROM sessions WHERE id = $1")
        .bind(&key)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let session: Value = serde_json::from_str(&session).unwrap();
    assert_eq!(session["format"], runtime_core::session::SESSION_FORMAT);
    assert_eq!(session["states"]["order"], "confirmOrder", "{session}");
}
