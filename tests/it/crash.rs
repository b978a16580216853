//! The crash test: messages with provider ids from several senders across many
//! users, the server killed with SIGKILL at random moments and restarted on the same data,
//! senders retrying every request that did not get a 2xx with the same id, as providers do.
//! Then every message that got a 2xx is in the transcript exactly once, no incoming line is
//! duplicated, every reply was delivered at least once and no outbox row is stuck.
//!
//! Quick by default (well under a minute per backend). The longer mode:
//! `CRASH_MESSAGES=2000 CRASH_KILLS=20 cargo test --test crash -- --nocapture`.

use crate::common;

use crate::common::{Backend, Receiver, Server, deploy, one_state_bot, s};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::RwLock;

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Replies `echo <text>` to every message.
fn echo_bot() -> Value {
    one_state_bot(
        json!({"end": true, "action": {"name": "text", "options": {"text": "echo $(content)"}}}),
    )
}

on_both_backends!(messages_survive_kills);

async fn messages_survive_kills(backend: Backend) {
    let messages = env_num("CRASH_MESSAGES", 240);
    let kills = env_num("CRASH_KILLS", 4);
    let senders = 4;
    let users = 24;
    let seed: u64 = env_num("CRASH_SEED", rand::rng().random::<u32>() as usize) as u64;
    eprintln!("crash test: {backend:?}, seed {seed}");

    let (rx, rx_url) = Receiver::start().await;
    let server = Server::start(
        backend,
        &["--allow-private-egress", "--delivery-timeout-ms", "1000"],
    )
    .await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, echo_bot()).await;
    let ch_id = common::generic_channel(&api, &admin, &pid, &env, &rx_url).await;
    let server = Arc::new(RwLock::new(server));

    // Senders: each owns some users and sends their messages in order, retrying each until
    // it gets a 2xx.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let acked = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for sender in 0..senders {
        let acked = acked.clone();
        let server = server.clone();
        let http = http.clone();
        let ch_id = ch_id.clone();
        tasks.push(tokio::spawn(async move {
            let mut attempts = 0usize;
            for k in (sender..messages).step_by(senders) {
                let user = format!("u{}", k % users);
                let body = json!({"userId": user, "messages": [
                    {"id": format!("m{k}"), "type": "text", "content": format!("msg {k}")}
                ]});
                loop {
                    attempts += 1;
                    let base = server.read().await.base.clone();
                    let r = http
                        .post(format!("{base}/webhooks/{ch_id}"))
                        .json(&body)
                        .send()
                        .await;
                    match r {
                        Ok(r) if r.status().is_success() => {
                            acked.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        // Refused, reset, cut off or 5xx/429: the provider tries again.
                        _ => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            }
            attempts
        }));
    }

    // The killer: SIGKILL at random moments while the senders are at work (after a random
    // number of acknowledged messages, plus a random delay), then a restart on the same data.
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut at: Vec<usize> = (0..kills)
        .map(|_| rng.random_range(messages / 10..messages * 9 / 10))
        .collect();
    at.sort();
    for th in at {
        while acked.load(Ordering::SeqCst) < th {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..15))).await;
        server.write().await.restart().await;
    }
    let mut attempts = 0;
    for t in tasks {
        attempts += t.await.unwrap();
    }

    // Every message got a 2xx. Now the outbox drains (rows of a killed process are sent
    // by the new one after their lease).
    let db = server.read().await.db().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let rows = db.outbox_rows(&ch_id).await.unwrap();
        let waiting = rows.iter().filter(|r| r.status != "sent").count();
        if waiting == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{waiting} outbox rows still not sent: {:?}",
            rows.iter()
                .filter(|r| r.status != "sent")
                .map(|r| (&r.status, r.attempts, &r.last_error))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let lines = db
        .list_transcripts(&pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    let mut ins: HashMap<String, usize> = HashMap::new();
    let mut outs: HashMap<String, usize> = HashMap::new();
    for l in &lines {
        let m: Value = serde_json::from_str(&l.message).unwrap();
        let text = s(&m["content"]);
        let counter = if l.direction == "in" {
            &mut ins
        } else {
            &mut outs
        };
        *counter.entry(text).or_default() += 1;
    }
    let mut delivered: HashMap<String, usize> = HashMap::new();
    for (_, _, body) in rx.seen.lock().unwrap().iter() {
        for t in common::texts(body) {
            *delivered.entry(t).or_default() += 1;
        }
    }
    let duplicates: usize = ins.values().map(|n| n.saturating_sub(1)).sum();
    let missing: Vec<usize> = (0..messages)
        .filter(|k| !ins.contains_key(&format!("msg {k}")))
        .collect();
    let undelivered: Vec<usize> = (0..messages)
        .filter(|k| !delivered.contains_key(&format!("echo msg {k}")))
        .collect();
    let redelivered = delivered
        .values()
        .map(|n| n.saturating_sub(1))
        .sum::<usize>();
    eprintln!(
        "crash test ({backend:?}): {messages} messages, {attempts} requests, {kills} kills; \
         acknowledged {messages}, in the transcript {}, duplicated {duplicates}, replies \
         delivered {} ({redelivered} more than once), outbox rows all sent",
        ins.len(),
        messages - undelivered.len()
    );
    assert!(
        missing.is_empty(),
        "acknowledged but not in the transcript: {missing:?}"
    );
    assert_eq!(duplicates, 0, "incoming lines duplicated: {ins:?}");
    assert_eq!(ins.len(), messages, "unexpected incoming lines");
    assert!(
        outs.values().all(|n| *n == 1),
        "a reply was stored twice: {outs:?}"
    );
    assert!(
        undelivered.is_empty(),
        "replies never delivered: {undelivered:?}"
    );
}

/// A server whose every request waits until the test opens the gate; counts arrivals.
async fn gated_server() -> (String, Arc<tokio::sync::Notify>, Arc<AtomicUsize>) {
    let gate = Arc::new(tokio::sync::Notify::new());
    let arrived = Arc::new(AtomicUsize::new(0));
    let (g, a) = (gate.clone(), arrived.clone());
    let app = axum::Router::new().fallback(move || {
        let (g, a) = (g.clone(), a.clone());
        async move {
            let opened = g.notified();
            a.fetch_add(1, Ordering::SeqCst);
            opened.await;
            axum::Json(json!({"ok": true}))
        }
    });
    let url = crate::common::serve_stub(app).await;
    (url, gate, arrived)
}

on_both_backends!(a_provider_that_hangs_up_does_not_lose_its_message);

/// The provider gives up while the step waits in an api call and retries the same id: the
/// first delivery's step still completes, the retry waits for it and runs nothing, and the
/// message is in the transcript and answered exactly once.
async fn a_provider_that_hangs_up_does_not_lose_its_message(backend: Backend) {
    let (rx, rx_url) = Receiver::start().await;
    let (api_url, gate, arrived) = gated_server().await;
    let server = Server::start(backend, &["--allow-private-egress"]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let bot = one_state_bot(json!({"end": true, "action": [
        {"name": "api", "options": {"method": "GET", "uri": format!("{api_url}/x")}},
        {"name": "text", "options": {"text": "done $(content)"}}
    ]}));
    let (pid, env) = deploy(&api, &admin, bot).await;
    let ch_id = common::generic_channel(&api, &admin, &pid, &env, &rx_url).await;
    let url = format!("{}/webhooks/{ch_id}", server.base);
    let body =
        json!({"userId": "ann", "messages": [{"id": "42", "type": "text", "content": "hello"}]});

    // First delivery: the provider hangs up once the step is inside its api call.
    let first = {
        let (http, url, body) = (reqwest::Client::new(), url.clone(), body.clone());
        tokio::spawn(async move { http.post(url).json(&body).send().await })
    };
    while arrived.load(Ordering::SeqCst) < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.abort();
    let _ = first.await;
    // The retry, with the same id, while the first step still waits.
    let retry = {
        let (http, url, body) = (reqwest::Client::new(), url.clone(), body.clone());
        tokio::spawn(async move { http.post(url).json(&body).send().await })
    };
    gate.notify_waiters();
    let retry = retry.await.unwrap().unwrap();
    assert_eq!(retry.status(), 200);
    // The api server saw one call: the retry ran nothing.
    assert_eq!(arrived.load(Ordering::SeqCst), 1);
    let seen = rx.wait_for(1).await;
    assert_eq!(common::texts(&seen[0].2), vec!["done hello"]);

    let db = server.db().await;
    let lines = db
        .list_transcripts(&pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    let ins = lines.iter().filter(|l| l.direction == "in").count();
    let outs = lines.iter().filter(|l| l.direction == "out").count();
    assert_eq!((ins, outs), (1, 1), "{lines:?}");
    // A third delivery of the same id, after the fact, is acknowledged and runs nothing.
    let again = common::hook(&api, &url, &[], &body).await;
    assert_eq!(again.status, 200);
    assert_eq!(arrived.load(Ordering::SeqCst), 1);
}
