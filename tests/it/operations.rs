//! Running botbox in production: graceful drain on SIGTERM, readiness while draining.

use crate::common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A stand-in for the bots' outside world whose every request waits until the test opens
/// the gate: `/users/<name>` answers `{"email": "<name>@example.com"}` (the api-status
/// bot), `/invoice/<n>` an invoice (the invoice-case bot). Counts arrivals.
#[derive(Clone)]
struct Gated {
    url: String,
    arrived: Arc<AtomicUsize>,
    gate: tokio::sync::watch::Sender<bool>,
}

impl Gated {
    async fn start() -> Gated {
        let arrived = Arc::new(AtomicUsize::new(0));
        let (gate, _) = tokio::sync::watch::channel(false);
        let (a, g) = (arrived.clone(), gate.clone());
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let (a, mut open) = (a.clone(), g.subscribe());
            async move {
                a.fetch_add(1, Ordering::SeqCst);
                let _ = open.wait_for(|open| *open).await;
                let last = uri.path().rsplit('/').next().unwrap_or("").to_owned();
                axum::Json(if uri.path().starts_with("/invoice/") {
                    json!({"vendor": "ACME", "lines": [{"amount": 10, "qty": 2}]})
                } else {
                    json!({"email": format!("{last}@example.com")})
                })
            }
        });
        Gated {
            url: serve_stub(app).await,
            arrived,
            gate,
        }
    }

    async fn wait_arrived(&self, n: usize) {
        poll_until(&format!("{n} requests at the gate"), || async {
            let seen = self.arrived.load(Ordering::SeqCst);
            if seen >= n {
                Ok(())
            } else {
                Err(format!("{seen} arrived"))
            }
        })
        .await
    }

    fn open(&self) {
        self.gate.send_replace(true);
    }
}

fn api_bot(base: &str) -> Value {
    let mut bot = example_bot("api-status");
    bot["config"]["base"] = json!(base);
    bot
}

/// Whether a new connection to `base` is refused (the listener is closed).
async fn refused(base: &str) -> Result<(), String> {
    let addr = base.trim_start_matches("http://");
    match tokio::net::TcpStream::connect(addr).await {
        Err(_) => Ok(()),
        Ok(_) => Err("the listener still accepts".into()),
    }
}

on_both_backends!(a_drain_finishes_the_work_in_flight_and_loses_nothing);

/// Three webhook steps blocked in slow api actions, an agent run streaming and a Case task
/// running, then SIGTERM: the listener closes at once, and once the outside world answers
/// every webhook gets its 2xx with its reply delivered, the stream ends with the run's
/// normal finish, the task completes, and the process exits 0. After a restart nothing is
/// lost, duplicated or marked failed.
async fn a_drain_finishes_the_work_in_flight_and_loses_nothing(backend: Backend) {
    let gated = Gated::start().await;
    let (rx, rx_url) = Receiver::start().await;
    let server = Server::start_logged(
        backend,
        &["--allow-private-egress", "--shutdown-timeout", "120"],
    )
    .await;
    let d = Deployed::start(server, api_bot(&gated.url)).await;
    // The webhooks' bot is another tenant's: a tenant's steps in flight are capped (4 on
    // this machine), and all five must be in flight at once.
    let (_, other) = d.api.user(&d.admin, "other", "developer").await;
    let (webhook_pid, webhook_env) = deploy(&d.api, &other, api_bot(&gated.url)).await;
    let channel = generic_channel(&d.api, &other, &webhook_pid, &webhook_env, &rx_url).await;
    let agent_key = d.agent_key("drain").await;
    let workspace_key = d.workspace_key("drain").await;
    let (_, invoice_env) = deploy(&d.api, &d.admin, example_bot("invoice-case")).await;
    let case = d
        .api
        .post(
            "/v1/cases",
            &workspace_key,
            crate::cases::case_doc("invoice", false, &invoice_env),
        )
        .await;
    assert_eq!(case.status, 201, "{}", case.text);
    let case = case.json();
    let mut d = d;

    // The slowest to start first: every api call must still be waiting at the gate when
    // it opens, inside the 5 s an api action may take.
    let task = d
        .api
        .post(
            &format!("/v1/cases/{}/tasks", s(&case["id"])),
            &workspace_key,
            json!({"inputs": {"invoice_url": format!("{}/invoice/1", gated.url)}}),
        )
        .await;
    assert_eq!(task.status, 201, "{}", task.text);
    let task = s(&task.json()["id"]);
    let http = reqwest::Client::new();
    let mut webhooks = Vec::new();
    for user in ["ann", "bob", "cy"] {
        let body = json!({"userId": user, "messages": [
            {"id": format!("m-{user}"), "type": "text", "content": format!("check {user}")}]});
        let req = http
            .post(format!("{}/webhooks/{channel}", d.server.base))
            .json(&body)
            .send();
        webhooks.push(tokio::spawn(req));
    }
    let stream = tokio::spawn(
        http.post(format!("{}/v1/chat", d.server.base))
            .bearer_auth(&agent_key)
            .header("accept", "text/event-stream")
            .json(&json!({"messages": [{"id": "u1", "role": "user",
                "parts": [{"type": "text", "text": "check dee"}]}]}))
            .send(),
    );
    gated.wait_arrived(5).await;

    d.server.signal(libc::SIGTERM);
    poll_until("the listener to close", || refused(&d.server.base)).await;
    gated.open();

    for w in webhooks {
        let r = w.await.unwrap().expect("a webhook in flight was cut");
        assert!(r.status().is_success(), "webhook answered {}", r.status());
    }
    let streamed = stream
        .await
        .unwrap()
        .expect("the stream was cut")
        .text()
        .await
        .expect("the stream was cut");
    assert!(
        streamed.contains("email of dee is dee@example.com"),
        "{streamed}\n{}",
        d.server.log()
    );
    assert!(streamed.trim_end().ends_with("data: [DONE]"), "{streamed}");
    assert!(streamed.contains(r#""status":"completed""#), "{streamed}");
    let status = d.server.exited(Duration::from_secs(60)).await;
    assert!(status.success(), "exit status {status}\n{}", d.server.log());
    // Every reply went out before the process exited.
    let mut delivered: Vec<String> = rx
        .seen
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, _, body)| texts(body))
        .filter(|t| t.starts_with("email of"))
        .collect();
    delivered.sort();
    assert_eq!(
        delivered,
        [
            "email of ann is ann@example.com",
            "email of bob is bob@example.com",
            "email of cy is cy@example.com"
        ],
        "{}",
        d.server.log()
    );
    let log = d.server.log();
    assert!(log.contains("drain started"), "{log}");
    assert!(log.contains("drain finished"), "{log}");

    d.server.restart().await;
    d.api = d.server.api();
    let t = d
        .api
        .get(&format!("/v1/tasks/{task}"), &workspace_key)
        .await
        .ok();
    assert_eq!(t["status"], "done", "{t}");
    assert_eq!(t["outputs"]["total"], 20, "{t}");
    let db = d.server.db().await;
    let rows = db.outbox_rows(&channel).await.unwrap();
    assert!(
        rows.iter().all(|r| r.status == "sent"),
        "outbox rows not recorded as sent: {:?}",
        rows.iter().map(|r| &r.status).collect::<Vec<_>>()
    );
    let lines = db
        .list_transcripts(&webhook_pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    let incoming = lines.iter().filter(|l| l.direction == "in").count();
    assert_eq!(incoming, 3, "each message stored once");
    // Nothing was run twice: the outside world saw each request once.
    assert_eq!(gated.arrived.load(Ordering::SeqCst), 5);
}

/// A second signal during a drain exits at once, with work still in flight (a webhook whose
/// api call never answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    let gated = Gated::start().await;
    let (_rx, rx_url) = Receiver::start().await;
    let server = Server::start_logged(
        Backend::Sqlite,
        &["--allow-private-egress", "--shutdown-timeout", "600"],
    )
    .await;
    let mut d = Deployed::start(server, api_bot(&gated.url)).await;
    let channel = generic_channel(&d.api, &d.admin, &d.pid, &d.env, &rx_url).await;
    let body = json!({"userId": "ann", "messages": [
        {"id": "m1", "type": "text", "content": "check ann"}]});
    let _webhook = tokio::spawn(
        reqwest::Client::new()
            .post(format!("{}/webhooks/{channel}", d.server.base))
            .json(&body)
            .send(),
    );
    gated.wait_arrived(1).await;
    d.server.signal(libc::SIGTERM);
    poll_until("the drain to start", || async {
        let log = d.server.log();
        if log.contains("drain started") {
            Ok(())
        } else {
            Err(log)
        }
    })
    .await;
    d.server.signal(libc::SIGINT);
    // Far inside the 600 s drain time, with the webhook still waiting at the gate.
    let status = d.server.exited(Duration::from_secs(30)).await;
    assert!(!status.success(), "{status}");
    assert!(d.server.log().contains("second signal"));
}

/// Once a drain starts `/ready` answers 503 `draining` (load balancers stop sending), while
/// `/live` and `/healthz` still answer 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_fails_while_draining() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    server.drain.start();
    let r = api.raw("GET", "/ready", None, vec![]).await;
    assert_eq!((r.status, r.json()), (503, json!({"status": "draining"})));
    for probe in ["/live", "/healthz"] {
        let r = api.raw("GET", probe, None, vec![]).await;
        assert_eq!((r.status, r.json()), (200, json!({"status": "alive"})));
    }
}
