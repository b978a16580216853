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

/// A database that does not answer makes `/ready` answer 503 `database`; `/live` still 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_fails_while_the_database_does_not_answer() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    poll_until("ready", || async {
        let r = api.raw("GET", "/ready", None, vec![]).await;
        if r.status == 200 { Ok(()) } else { Err(r.text) }
    })
    .await;
    server.db().await.pool.close().await;
    let r = api.raw("GET", "/ready", None, vec![]).await;
    assert_eq!((r.status, r.json()), (503, json!({"status": "database"})));
    let r = api.raw("GET", "/live", None, vec![]).await;
    assert_eq!(r.status, 200);
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

/// A parsed `/metrics` exposition.
struct Scrape(
    openmetrics_parser::MetricsExposition<
        openmetrics_parser::PrometheusType,
        openmetrics_parser::PrometheusValue,
    >,
);

/// What to read of a sample: a counter's or gauge's value, a histogram's count or sum.
#[derive(Clone, Copy)]
enum Read {
    Value,
    Count,
    Sum,
}

impl Scrape {
    async fn read(base: &str, token: &str) -> Scrape {
        let r = reqwest::Client::new()
            .get(format!("{base}/metrics"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        Scrape(
            openmetrics_parser::prometheus::parse_prometheus(&text)
                .unwrap_or_else(|e| panic!("the exposition does not parse: {e:?}\n{text}")),
        )
    }

    /// The sum over the family `name`'s samples whose labels include `labels` (0 if none).
    fn get(&self, name: &str, labels: &[(&str, &str)], read: Read) -> f64 {
        use openmetrics_parser::PrometheusValue as V;
        let Some(family) = self
            .0
            .families
            .get(name)
            .or_else(|| self.0.families.get(name.trim_end_matches("_total")))
        else {
            return 0.0;
        };
        family
            .iter_samples()
            .filter(|s| {
                let set = s.get_labelset().unwrap();
                labels
                    .iter()
                    .all(|(k, v)| set.get_label_value(k) == Some(*v))
            })
            .map(|s| match (&s.value, read) {
                (V::Counter(c), Read::Value) => c.value.as_f64(),
                (V::Gauge(v) | V::Unknown(v), Read::Value) => v.as_f64(),
                (V::Histogram(h), Read::Count) => h.count.unwrap_or(0) as f64,
                (V::Histogram(h), Read::Sum) => h.sum.as_ref().map_or(0.0, |s| s.as_f64()),
                (v, _) => panic!("{name}: unexpected {v:?}"),
            })
            .sum()
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels, Read::Value)
    }

    fn has(&self, name: &str) -> bool {
        self.0.families.contains_key(name)
    }
}

fn echo_bot() -> Value {
    one_state_bot(
        json!({"end": true, "action": {"name": "text", "options": {"text": "echo $(content)"}}}),
    )
}

/// The echo bot deployed on `server`, with a generic channel whose replies go to a receiver:
/// (the deployment, the channel's id, the receiver).
async fn echo_on(server: Server) -> (Deployed, String, Receiver) {
    let (rx, rx_url) = Receiver::start().await;
    let d = Deployed::start(server, echo_bot()).await;
    let channel = generic_channel(&d.api, &d.admin, &d.pid, &d.env, &rx_url).await;
    (d, channel, rx)
}

/// [`echo_on`] a SQLite server started with `--allow-private-egress` and `flags` (keeping
/// its log if `logged`).
async fn echo_with(logged: bool, flags: &[&str]) -> (Deployed, String, Receiver) {
    let flags = [&["--allow-private-egress"], flags].concat();
    let server = if logged {
        Server::start_logged(Backend::Sqlite, &flags).await
    } else {
        Server::start(Backend::Sqlite, &flags).await
    };
    echo_on(server).await
}

/// After known traffic (three webhook messages answered and delivered), the exposition's
/// counters and histograms moved by exactly that much; `/metrics` needs the metrics token or
/// an admin's; with `--metrics-addr` it is served there and not on the main address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_steps_and_deliveries() {
    let (d, channel, rx) = echo_with(false, &["--metrics-token", "scrape-token"]).await;
    let base = d.server.base.clone();
    let anonymous = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let (_, developer) = d.api.user(&d.admin, "dev", "developer").await;
    let r = d.api.get("/metrics", &developer).await;
    assert_eq!(r.status, 403, "{}", r.text);
    let by_admin = Scrape::read(&base, &d.admin).await;
    assert!(by_admin.has("botbox_draining"));

    let before = Scrape::read(&base, "scrape-token").await;
    for k in 0..3 {
        let body = json!({"userId": format!("u{k}"), "messages": [
            {"id": format!("m{k}"), "type": "text", "content": format!("hi {k}")}]});
        let r = hook(&d.api, &format!("{base}/webhooks/{channel}"), &[], &body).await;
        assert_eq!(r.status, 200, "{}", r.text);
    }
    rx.wait_for(3).await;
    // Deliveries are counted once sent and leave the backlog once recorded (in batches):
    // poll the exposition until both happened.
    let sent = [("outcome", "sent")];
    let after = poll_until("three deliveries counted and recorded", || async {
        let now = Scrape::read(&base, "scrape-token").await;
        let n = now.value("botbox_deliveries_total", &sent)
            - before.value("botbox_deliveries_total", &sent);
        let pending = now.value("botbox_outbox_pending", &[]);
        if n >= 3.0 && pending == 0.0 {
            Ok(now)
        } else {
            Err(format!("{n} counted, {pending} pending"))
        }
    })
    .await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    let delta_of =
        |name: &str, read: Read| after.get(name, &[], read) - before.get(name, &[], read);
    let webhook = [
        ("route", "/webhooks/{channelId}"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(delta("botbox_http_requests_total", &webhook), 3.0);
    let latency = "botbox_http_request_duration_seconds";
    assert_eq!(
        after.get(latency, &webhook[..2], Read::Count)
            - before.get(latency, &webhook[..2], Read::Count),
        3.0
    );
    assert_eq!(delta("botbox_steps_total", &[("outcome", "ok")]), 3.0);
    assert_eq!(delta_of("botbox_step_fuel", Read::Count), 3.0);
    assert_eq!(delta_of("botbox_step_duration_seconds", Read::Count), 3.0);
    assert_eq!(delta("botbox_deliveries_total", &sent), 3.0);
    assert_eq!(delta_of("botbox_commit_steps", Read::Sum), 3.0);
    assert!(after.value("botbox_sandbox_slots", &[]) > 0.0);
    assert!(after.value("botbox_process_resident_memory_bytes", &[]) > 1e6);
    assert!(after.value("botbox_database_bytes", &[]) > 4096.0);

    // On an address of its own, and then not on the main one.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let metrics_addr = format!("127.0.0.1:{port}");
    let own = Server::start(Backend::Sqlite, &["--metrics-addr", &metrics_addr]).await;
    let admin = own.api().admin_token().await;
    let r = own.api().get("/metrics", &admin).await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = reqwest::get(format!("http://{metrics_addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("botbox_draining 0"));
}

/// One source past its cap of requests in flight gets 503 with Retry-After at once while
/// another tenant's request answers; a request whose answer does not start in time gets 503,
/// and the provider's retry finds its message handled once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_shed_per_source_and_answers_time_out() {
    let gated = Gated::start().await;
    let (_rx, rx_url) = Receiver::start().await;
    let server = Server::start(
        Backend::Sqlite,
        &[
            "--allow-private-egress",
            "--max-in-flight-per-source",
            "2",
            // Under the api call's own 5 s (the held steps are still waiting when their
            // answers time out), with room for a slow machine to send the flood first.
            "--request-timeout",
            "4",
        ],
    )
    .await;
    let d = Deployed::start(server, api_bot(&gated.url)).await;
    let channel = generic_channel(&d.api, &d.admin, &d.pid, &d.env, &rx_url).await;
    let url = format!("{}/webhooks/{channel}", d.server.base);
    let message = |k: usize| {
        json!({"userId": format!("u{k}"), "messages": [
            {"id": format!("m{k}"), "type": "text", "content": format!("check u{k}")}]})
    };
    let mut held = Vec::new();
    for k in 0..2 {
        let (api, url, body) = (d.api.clone(), url.clone(), message(k));
        held.push(tokio::spawn(
            async move { hook(&api, &url, &[], &body).await },
        ));
    }
    gated.wait_arrived(2).await;
    let flood = hook(&d.api, &url, &[], &message(2)).await;
    assert_eq!(flood.status, 503, "{}", flood.text);
    assert_eq!(flood.header("retry-after"), Some("1"));
    // Another source (a token) during the flood.
    let other = d.api.get("/projects", &d.admin).await;
    assert_eq!(other.status, 200, "{}", other.text);
    // The held ones: no answer within 4 s.
    for h in held {
        let r = h.await.unwrap();
        assert_eq!(r.status, 503, "{}", r.text);
        assert_eq!(r.header("retry-after"), Some("1"));
    }
    gated.open();
    // The provider retries: each message handled once.
    for k in 0..2 {
        poll_until("the retry to be answered", || async {
            let r = hook(&d.api, &url, &[], &message(k)).await;
            if r.status == 200 {
                Ok(())
            } else {
                Err(format!("{} {}", r.status, r.text))
            }
        })
        .await;
    }
    let db = d.server.db().await;
    let lines = db
        .list_transcripts(&d.pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    assert_eq!(lines.iter().filter(|l| l.direction == "in").count(), 2);
}

/// `--log-format json`: every line is a JSON object; each request has an access-log line
/// with its route template and status, and the log holds no token or message text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_an_access_line_per_request_and_no_secrets() {
    let (d, channel, rx) = echo_with(true, &["--log-format", "json"]).await;
    let body = json!({"userId": "u1", "messages": [
        {"id": "m1", "type": "text", "content": "my secret words"}]});
    let r = hook(
        &d.api,
        &format!("{}/webhooks/{channel}", d.server.base),
        &[],
        &body,
    )
    .await;
    assert_eq!(r.status, 200);
    rx.wait_for(1).await;
    let log = poll_until("the webhook's access line", || async {
        let log = d.server.log();
        if log.contains("/webhooks/{channelId}") {
            Ok(log)
        } else {
            Err(log)
        }
    })
    .await;
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let access: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "botbox::access")
        .collect();
    let hook_line = access
        .iter()
        .find(|l| l["span"]["route"] == "/webhooks/{channelId}")
        .expect("an access line for the webhook");
    assert_eq!(hook_line["span"]["status"], 200, "{hook_line}");
    assert_eq!(hook_line["span"]["method"], "POST");
    assert!(hook_line["fields"]["latency_ms"].is_number());
    assert!(access.iter().any(|l| l["span"]["route"] == "/projects"));
    for secret in [d.admin.as_str(), "my secret words"] {
        assert!(!log.contains(secret), "the log holds {secret:?}");
    }
}

/// `botbox restore` of `archive` into the data folder `dir`.
fn restore_into(archive: &std::path::Path, dir: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_botbox"))
        .arg("restore")
        .arg(archive)
        .arg("--data")
        .arg(dir)
        .output()
        .unwrap()
}

/// `botbox serve --help` lists serve's own options, not the client's.
#[test]
fn serve_help_lists_only_serve_options() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("--shutdown-timeout"), "{help}");
    assert!(help.contains("--metrics-addr"), "{help}");
    assert!(!help.contains("--json"), "{help}");
    assert!(!help.contains("--server"), "{help}");
}

/// A backup taken while messages flow, restored into a fresh folder: the restored server
/// has the same projects and channel (its webhook answers, under the same key), and a
/// transcript that is a prefix of the live one, holding at least what was stored before the
/// backup began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_load_restores_into_a_working_server() {
    let (d, channel, _rx) = echo_with(false, &[]).await;
    let url = format!("{}/webhooks/{channel}", d.server.base);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let sender = {
        let (api, url, stop, sent) = (d.api.clone(), url.clone(), stop.clone(), sent.clone());
        tokio::spawn(async move {
            let mut k = 0;
            while !stop.load(Ordering::SeqCst) {
                let body = json!({"userId": format!("u{}", k % 5), "messages": [
                    {"id": format!("m{k}"), "type": "text", "content": format!("msg {k}")}]});
                let r = hook(&api, &url, &[], &body).await;
                assert_eq!(r.status, 200, "{}", r.text);
                k += 1;
                sent.store(k, Ordering::SeqCst);
            }
        })
    };
    poll_until("20 messages answered", || async {
        let n = sent.load(Ordering::SeqCst);
        if n >= 20 { Ok(()) } else { Err(format!("{n}")) }
    })
    .await;
    let answered_before = sent.load(Ordering::SeqCst);
    let out_dir = tempfile::tempdir().unwrap();
    let archive = out_dir.path().join("botbox.backup");
    let mut backup = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"));
    backup
        .args(["backup", "--out"])
        .arg(&archive)
        .arg("--data")
        .arg(d.server.data_dir())
        .env_remove("DATABASE_URL");
    // Off the runtime's threads: the sender goes on meanwhile.
    let backup = tokio::task::spawn_blocking(move || backup.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        backup.status.success(),
        "{}",
        String::from_utf8_lossy(&backup.stderr)
    );
    poll_until("messages after the backup", || async {
        let n = sent.load(Ordering::SeqCst);
        if n >= answered_before + 10 {
            Ok(())
        } else {
            Err(format!("{n}"))
        }
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    sender.await.unwrap();
    let live_lines = d
        .server
        .db()
        .await
        .list_transcripts(&d.pid, "production", 0, i64::MAX)
        .await
        .unwrap();

    let restored_dir = tempfile::tempdir().unwrap();
    let restore = restore_into(&archive, restored_dir.path());
    assert!(
        restore.status.success(),
        "{}",
        String::from_utf8_lossy(&restore.stderr)
    );
    // Restoring over a database is refused.
    let again = restore_into(&archive, restored_dir.path());
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a database"));
    assert_eq!(
        std::fs::read(restored_dir.path().join("secret.key")).unwrap(),
        std::fs::read(d.server.data_dir().join("secret.key")).unwrap()
    );

    let restored = Server::start_on(restored_dir, &["--allow-private-egress"]).await;
    let api = restored.api();
    let admin = api.admin_token().await;
    let projects = api.get("/projects", &admin).await.ok();
    assert!(
        projects.to_string().contains(&d.pid),
        "the project is restored: {projects}"
    );
    let restored_lines = restored
        .db()
        .await
        .list_transcripts(&d.pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    let key = |l: &botbox_store::TranscriptRow| (l.direction.clone(), l.message.clone());
    let live: std::collections::HashSet<_> = live_lines.iter().map(key).collect();
    assert!(restored_lines.iter().all(|l| live.contains(&key(l))));
    let incoming = restored_lines
        .iter()
        .filter(|l| l.direction == "in")
        .count();
    assert!(
        incoming >= answered_before && restored_lines.len() < live_lines.len(),
        "restored {incoming} incoming lines; {answered_before} answered before the backup, {} lines live",
        live_lines.len()
    );
    // The restored server serves the channel (same id, same key).
    let body = json!({"userId": "u1", "messages": [
        {"id": "after-restore", "type": "text", "content": "hello again"}]});
    let r = hook(
        &api,
        &format!("{}/webhooks/{channel}", restored.base),
        &[],
        &body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// Three servers started at the same moment on an empty PostgreSQL database, ten times: all
/// three ready every time (migrations run once under PostgreSQL's advisory lock, the first
/// admin is created once), and each lets the admin in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_together_are_all_ready() {
    if postgres_skipped("replicas_started_together_are_all_ready").await {
        return;
    }
    for _ in 0..10 {
        let servers = Server::start_together(3, &[]).await;
        for s in &servers {
            s.api().admin_token().await;
        }
        let admins = servers[0].db().await.user_count().await.unwrap();
        assert_eq!(admins, 1);
    }
}
