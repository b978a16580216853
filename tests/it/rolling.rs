//! A rolling upgrade: a replica of the previous release (the commit in
//! `tests/previous-release`, built once by `tests/previous-release.sh`) serves on an empty
//! PostgreSQL database under load; a replica of this build starts on the same database,
//! migrates it, and both serve together while the load goes on through either. Every
//! message acknowledged with 200 is stored once and answered, and each user's messages are
//! stored in the order they were sent. Then this build also starts on a database migrated
//! by a later release (a migration it does not know), as the next rolling upgrade needs.
//!
//! Needs PostgreSQL and the previous release's binary: without them the test says so and
//! passes, unless `BOTBOX_REQUIRE_PREVIOUS` is set (as `.ci/run` does, after building it).

use crate::common::{self, PG_ADMIN_URL, ProviderLoad, Receiver, Server, deploy, one_state_bot};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The previous release's binary, as `tests/previous-release.sh` leaves it (in the target
/// folder this build's binary is in).
fn previous_release() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let commit = std::fs::read_to_string(root.join("tests/previous-release")).ok()?;
    let target = std::path::Path::new(env!("CARGO_BIN_EXE_botbox"))
        .parent()?
        .parent()?;
    let bin = target
        .join("previous-release/bin")
        .join(commit.trim())
        .join("botbox");
    bin.exists().then_some(bin)
}

/// A new, empty PostgreSQL database (no migration run): its name and URL.
async fn empty_database() -> (String, String) {
    use sqlx::Connection;
    let name = format!("botbox_rolling_{}", botbox_store::new_id());
    let mut admin = sqlx::postgres::PgConnection::connect(PG_ADMIN_URL)
        .await
        .unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    (name, url)
}

/// Replies `echo <text>` to every message.
fn echo_bot() -> Value {
    one_state_bot(
        json!({"end": true, "action": {"name": "text", "options": {"text": "echo $(content)"}}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_previous_release_and_this_one_serve_together() {
    if common::postgres_skipped("rolling::the_previous_release_and_this_one_serve_together").await {
        return;
    }
    let Some(previous) = previous_release() else {
        assert!(
            std::env::var_os("BOTBOX_REQUIRE_PREVIOUS").is_none_or(|v| v == "0"),
            "the previous release's binary is required (BOTBOX_REQUIRE_PREVIOUS): run tests/previous-release.sh"
        );
        eprintln!(
            "notice: tests/previous-release.sh has not built the previous release: the rolling-upgrade test did not run"
        );
        return;
    };
    let (name, url) = empty_database().await;
    let flags = ["--allow-private-egress", "--delivery-timeout-ms", "1000"];
    let old = Server::start_binary(&previous, &url, &flags).await;
    let (rx, rx_url) = Receiver::start().await;
    let api = old.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, echo_bot()).await;
    let channel = common::generic_channel(&api, &admin, &pid, &env, &rx_url).await;

    // Providers through the previous release until this build is up, then through both.
    let messages = 300;
    let bases = Arc::new(std::sync::RwLock::new(vec![old.base.clone()]));
    let mut load = ProviderLoad::start(bases.clone(), &channel, messages, 12);
    load.until_acked(messages / 4).await;
    // This build starts on the database the previous release serves, and migrates it.
    let new = Server::start_on_url(&url, &flags).await;
    bases.write().unwrap().push(new.base.clone());
    let at_upgrade = load.acked();
    load.finish().await;
    // Both still serve after the migration: the old replica answers the API too.
    for server in [&old, &new] {
        let r = server.api().get("/projects", &admin).await;
        assert_eq!(r.status, 200, "{}: {}", server.base, r.text);
    }
    let db = new.db().await;
    load.check(&db, &pid, &channel, &rx).await;
    eprintln!(
        "rolling upgrade: {at_upgrade} of {messages} messages acknowledged by the previous release alone, then both served"
    );
    drop(new);

    // The next upgrade: a later release has migrated the database further (a migration this
    // build does not know). This build still starts and serves on it.
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99991231000001, 'a later release', true, '\\x00'::bytea, 0)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let again = Server::start_on_url(&url, &flags).await;
    assert_eq!(again.api().get("/projects", &admin).await.status, 200);
    drop((old, again));
    db.close().await;
    use sqlx::Connection;
    let mut admin = sqlx::postgres::PgConnection::connect(PG_ADMIN_URL)
        .await
        .unwrap();
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}
