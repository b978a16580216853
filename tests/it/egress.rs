//! The egress module against the real `botbox serve`: where outbound calls may
//! connect, redirects, and what of a call is written down. The servers a bot or a channel
//! reaches here are on loopback; `--egress-allow` opens exactly the ports a test means.
//!
//! | attack | test |
//! |---|---|
//! | an allowed api server redirecting to another local port | `an_api_redirect_to_another_local_port_is_refused` |
//! | bot tokens in delivery URLs, in logs and `last_error` | `delivery_tokens_stay_out_of_logs_and_last_error` |
//! | channel tokens in message metadata, in transcripts | `metadata_tokens_stay_out_of_transcripts` |
//!
//! A name resolving to a private address (DNS rebinding) is tested with a scripted resolver
//! in `host/egress/src/tests.rs`, and the address lists in `host/egress/src/addr.rs`.

use crate::common::{
    Backend, Receiver, Server, channel, converse_text, deploy, example_bot, hook, line_body, s,
};
use axum::http::{StatusCode, header::LOCATION};
use axum::response::IntoResponse;
use base64::Engine as _;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A server on loopback; `route` answers each path. Counts the requests it got.
async fn stub(
    route: impl Fn(&str) -> axum::response::Response + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let route = Arc::new(route);
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let (h, route) = (h.clone(), route.clone());
        async move {
            h.fetch_add(1, Ordering::SeqCst);
            route(uri.path())
        }
    });
    let base = crate::common::serve_stub(app).await;
    (base, hits)
}

/// A bot that calls the message's text as an api action and says the result.
fn api_bot() -> Value {
    json!({
        "name": "caller",
        "flows": {"main": {
            "fallback": true,
            "intents": {"any": {"fallback": true}},
            "states": {
                "start": {"initial": true, "transitions": {"call": {"fallback": true}}},
                "call": {"end": true, "action": [
                    {"name": "api", "options": {"uri": "$(content)"}},
                    {"name": "text", "options": {"text": "result=$(result)"}}
                ]}
            }
        }}
    })
}

fn port(base: &str) -> &str {
    base.rsplit(':').next().unwrap()
}

/// (a) An api server the operator allowed (`--egress-allow 127.0.0.1:<port>`) answers 302
/// to another local port: the bot gets a null result, never the other server's content,
/// and the other server sees no request. A redirect that stays on the allowed server is
/// followed, so the refusal is the hop check's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_redirect_to_another_local_port_is_refused() {
    let (internal, internal_hits) =
        stub(|_| axum::Json(json!({"secret": "internal-data"})).into_response()).await;
    let target = format!("{internal}/latest/meta-data");
    let (allowed, _) = stub(move |path| match path {
        "/ok" => axum::Json(json!({"fine": "yes"})).into_response(),
        "/stay" => (StatusCode::FOUND, [(LOCATION, "/ok".to_owned())]).into_response(),
        _ => (StatusCode::FOUND, [(LOCATION, target.clone())]).into_response(),
    })
    .await;
    let allow = format!("127.0.0.1:{}", port(&allowed));
    let server = Server::start(Backend::Sqlite, &["--egress-allow", &allow]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, _) = deploy(&api, &admin, api_bot()).await;
    let say = |url: String| {
        let (api, admin, pid) = (api.clone(), admin.clone(), pid.clone());
        async move {
            let r = converse_text(&api, &admin, &pid, &url).await;
            r["responses"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| s(&m["content"]))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        say(format!("{allowed}/ok")).await,
        ["result={\"fine\":\"yes\"}"]
    );
    assert_eq!(
        say(format!("{allowed}/stay")).await,
        ["result={\"fine\":\"yes\"}"]
    );
    assert_eq!(say(format!("{allowed}/go")).await, ["result="]);
    // Nor directly: the allow-list names one port.
    assert_eq!(
        say(format!("{internal}/latest/meta-data")).await,
        ["result="]
    );
    assert_eq!(
        internal_hits.load(Ordering::SeqCst),
        0,
        "the internal server was reached"
    );
}

/// Channels of project `pid`'s environment `env` whose first delivery fails, each fed one
/// message: Telegram (its token in the path) to the unreachable address `closed`, to a port
/// the egress policy refuses, and to `failing` (a 500); a generic channel whose URL carries
/// a token in its query, to `failing`. Their names and ids.
async fn failing_channels(
    api: &crate::common::Api,
    admin: &str,
    (pid, env): (&str, &str),
    failing: &str,
    closed: std::net::SocketAddr,
) -> Vec<(&'static str, String)> {
    let tg_token = "123456:TG-SECRET-TOKEN";
    // Telegram to an unreachable port, to a port not allowed (refused), and to a 500.
    let mut channels = vec![];
    for (name, url) in [
        ("tg-closed", format!("http://{closed}")),
        ("tg-refused", "http://127.0.0.1:9".to_owned()),
        ("tg-500", failing.to_owned()),
    ] {
        let ch = channel(
            api,
            admin,
            pid,
            env,
            json!({"name": name, "type": "telegram", "url": url,
                "options": {"token": tg_token, "secretToken": "tg-secret"}}),
        )
        .await;
        let update = json!({"update_id": 1, "message": {"message_id": 1, "from": {"id": 7},
            "chat": {"id": 7}, "date": 1, "text": "hi"}});
        hook(
            api,
            &s(&ch["webhook"]),
            &[("x-telegram-bot-api-secret-token", "tg-secret".into())],
            &update,
        )
        .await
        .ok();
        channels.push((name, s(&ch["id"])));
    }
    // A generic channel whose URL carries the token in its query.
    let ch = channel(
        api,
        admin,
        pid,
        env,
        json!({"name": "fb", "type": "generic",
            "url": format!("{failing}/me/messages?access_token=FB-SECRET-TOKEN")}),
    )
    .await;
    hook(
        api,
        &s(&ch["webhook"]),
        &[],
        &json!({"userId": "u", "messages": [{"type": "text", "content": "hi"}]}),
    )
    .await
    .ok();
    channels.push(("fb", s(&ch["id"])));

    channels
}

/// (c) Replies whose URL carries a Telegram bot token (in the path) or a Messenger-style
/// `access_token` (in the query) fail — refused, unreachable, or answered 500 — and the
/// tokens are in neither the server's log nor the outbox's `last_error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_tokens_stay_out_of_logs_and_last_error() {
    let (failing, failing_hits) = stub(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()).await;
    // A port with nobody listening (allowed: the attempt fails to connect).
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let allow = format!("127.0.0.1:{},{closed}", port(&failing));
    let server = Server::start_logged(
        Backend::Sqlite,
        &["--egress-allow", &allow, "--outbox-backoff-ms", "50"],
    )
    .await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("hello")).await;
    let channels = failing_channels(&api, &admin, (&pid, &env), &failing, closed).await;

    // Each delivery fails at least twice (retried), with its error stored.
    let db = server.db().await;
    let mut errors = vec![];
    for (name, cid) in &channels {
        let error = crate::common::poll_until(&format!("{name}'s failed attempts"), || async {
            let rows = db.outbox_rows(cid).await.unwrap();
            rows.iter()
                .find(|r| r.attempts >= 2)
                .map(|r| r.last_error.clone().expect("an error is stored"))
                .ok_or_else(|| format!("{rows:?}"))
        })
        .await;
        errors.push((*name, error));
    }
    assert!(failing_hits.load(Ordering::SeqCst) >= 4);
    let log = server.log();
    for (name, e) in &errors {
        assert!(!e.contains("SECRET"), "{name}: last_error {e}");
        // The error is about this delivery, its URL shown redacted.
        let shown = if *name == "fb" {
            "/me/messages?access_token=***"
        } else {
            "/bot***/sendMessage"
        };
        assert!(e.contains(shown), "{name}: {e}");
        assert!(log.contains(e.as_str()), "{name}: {e} not logged:\n{log}");
    }
    let by_name = |n: &str| &errors.iter().find(|(name, _)| *name == n).unwrap().1;
    assert!(
        by_name("tg-refused")
            .contains("refused by the server's egress policy: 127.0.0.1 is loopback")
    );
    assert!(by_name("tg-500").contains("answered 500"));
    assert!(by_name("fb").contains("answered 500"));
    assert!(!log.contains("SECRET"), "a token in the log:\n{log}");
    assert!(log.contains("delivery failed; will retry"), "{log}");
}

/// LINE puts the channel's access token in the message metadata (bots use it to call
/// LINE's API); the transcript shows it masked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_tokens_stay_out_of_transcripts() {
    let (rx, rx_url) = Receiver::start().await;
    let allow = format!("127.0.0.1:{}", port(&rx_url));
    let server = Server::start(Backend::Sqlite, &["--egress-allow", &allow]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("hello")).await;
    let body = line_body(&rx_url, "line-secret", "LINE-SECRET-TOKEN");
    let line = channel(&api, &admin, &pid, &env, body).await;
    let event = json!({"events": [{"type": "message", "webhookEventId": "e1",
        "source": {"type": "user", "userId": "U1"}, "message": {"type": "text", "id": "m1", "text": "hi"}}]});
    let sig = botbox_channels::hmac_sha256(b"line-secret", event.to_string().as_bytes());
    hook(
        &api,
        &s(&line["webhook"]),
        &[(
            "x-line-signature",
            base64::engine::general_purpose::STANDARD.encode(sig),
        )],
        &event,
    )
    .await
    .ok();
    // The reply went out with the token (the delivery needs it)...
    let got = rx.wait_for(1).await;
    assert_eq!(got[0].1["authorization"], "Bearer LINE-SECRET-TOKEN");
    // ...and the transcript has the message, its token masked.
    let rows = api
        .get(
            &format!("/analytics/{pid}/production/list_transcript"),
            &admin,
        )
        .await
        .ok();
    let incoming: Vec<Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["direction"] == "in")
        .map(|r| serde_json::from_str(r["message"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(incoming.len(), 1, "{rows}");
    assert_eq!(incoming[0]["content"], "hi");
    assert_eq!(incoming[0]["metadata"]["lineSenderId"], "U1");
    assert_eq!(incoming[0]["metadata"]["lineAccessToken"], "********");
    assert!(!rows.to_string().contains("LINE-SECRET"), "{rows}");
}

/// The flags are listed, and a wrong entry stops the server before it listens.
#[test]
fn serve_lists_the_egress_flags_and_checks_them() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("--egress-allow <LIST>"), "{text}");
    assert!(text.contains("--allow-private-egress"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--egress-allow",
            "localhost:9000",
        ])
        .arg("--data")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("localhost:9000"), "{err}");
}
