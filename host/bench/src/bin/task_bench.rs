//! Task benchmark: `cargo build --release -p botbox -p botbox-bench &&
//! target/release/task-bench`.
//!
//! Starts the release `botbox serve` beside this binary on a fresh SQLite folder (PostgreSQL
//! when `DATABASE_URL` is set), deploys a bot that makes no outside calls (it doubles its
//! input in a JavaScript method and ends its flow), binds a Case without review to it and
//! registers a callback endpoint on a local receiver. Then TASK_CLIENTS clients create
//! TASK_COUNT tasks through `POST /v1/cases/{id}/tasks` as fast as they are answered.
//!
//! Prints tasks per second through create → done (the first creation to the last
//! `task.completed` callback) and the time from each creation request to its
//! `task.completed` callback at the receiver (p50/p99). Every task's outputs are read back
//! and checked after the clock stops. Then TASK_SERIAL tasks one at a time (each created when
//! the last one's callback arrived): the latency of a task alone. Options (environment):
//! TASK_COUNT (default 2000), TASK_CLIENTS (16), TASK_SERIAL (200).

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use botbox_bench::{Api, BenchServer, PASSWORD, env_num};

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn doubler_bot() -> Value {
    json!({
        "name": "doubler",
        "methods": {
            "double(message, context, data, options, config, result)":
                "data.outputs = {n: message.payload.inputs.n * 2}; return 'ok';"
        },
        "flows": {"task": {
            "intents": {"task": {"initial": true, "type": "data",
                "condition": "payload.type == 'task'"}},
            "states": {
                "start": {"initial": true, "transitions": {"work": {"fallback": true}}},
                "work": {"end": true, "action": {"name": "method", "method": "double"}}
            }
        }}
    })
}

/// The callback receiver: when each task's `task.completed` arrived, and its outputs.
#[derive(Clone, Default)]
struct Receiver {
    done: Arc<Mutex<HashMap<String, Instant>>>,
    notify: Arc<tokio::sync::Notify>,
}

impl Receiver {
    async fn start(&self) -> anyhow::Result<String> {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/callbacks", l.local_addr()?);
        let me = self.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let me = me.clone();
            async move {
                let at = Instant::now();
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                if v["type"] == "task.completed" {
                    let id = s(&v["data"]["taskId"]);
                    me.done.lock().unwrap().entry(id).or_insert(at);
                    me.notify.notify_waiters();
                }
                "ok"
            }
        });
        tokio::spawn(async move { axum::serve(l, app).await });
        Ok(url)
    }

    /// Waits until `n` tasks completed, or `limit` passed.
    async fn wait(&self, n: usize, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.done.lock().unwrap().len() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }
}

/// Creates a task of `case` whose input is `n`.
async fn create(api: &Api, case: &str, key: &str, n: usize) -> anyhow::Result<Value> {
    api.post(
        &format!("/v1/cases/{case}/tasks"),
        Some(key),
        json!({"inputs": {"n": n}}),
    )
    .await
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Deploys the doubler bot in a project's production environment; returns the environment.
async fn deploy_doubler(api: &Api, admin: &str) -> anyhow::Result<String> {
    let t = Some(admin);
    let pid = s(&api.post("/projects", t, json!({"name": "doubler"})).await?["id"]);
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), t, doubler_bot())
        .await?["revision"]);
    api.post(
        &format!("/projects/{pid}/deployment/versions"),
        t,
        json!({"version": "1.0.0", "botRevision": rev}),
    )
    .await?;
    Ok(s(&api
        .post(
            &format!("/projects/{pid}/environments"),
            t,
            json!({"depId": pid, "depVersion": "1.0.0", "name": "production"}),
        )
        .await?["id"]))
}

/// An agent key of the admin's team and a Case without review on `env`: (key, case).
async fn create_case(api: &Api, admin: &str, env: &str) -> anyhow::Result<(String, String)> {
    let me = api
        .http
        .get(format!("{}/me", api.base))
        .bearer_auth(admin)
        .send()
        .await?;
    let me: Value = me.json().await?;
    let key = s(&api
        .post(
            &format!("/teams/{}/keys", s(&me["userId"])),
            Some(admin),
            json!({"name": "bench"}),
        )
        .await?["key"]);
    let case = s(&api
        .post(
            "/v1/cases",
            Some(&key),
            json!({"name": "double", "environmentId": env, "review": false,
                "inputs": [{"name": "n", "type": "number"}],
                "outputs": [{"name": "n", "type": "number"}]}),
        )
        .await?["id"]);
    Ok((key, case))
}

/// Starts the callback receiver and registers it for `task.completed`.
async fn receiver(api: &Api, key: &str) -> anyhow::Result<Receiver> {
    let rx = Receiver::default();
    let url = rx.start().await?;
    api.post(
        "/v1/webhooks",
        Some(key),
        json!({"url": url, "eventTypes": ["task.completed"]}),
    )
    .await?;
    Ok(rx)
}

/// Warm-up: one task, so that the server loads the bot (it waited for its sandbox at start).
async fn warm_up(api: &Api, case: &str, key: &str, rx: &Receiver) -> anyhow::Result<()> {
    let warm = s(&api
        .post(
            &format!("/v1/cases/{case}/tasks"),
            Some(key),
            json!({"inputs": {"n": -1}}),
        )
        .await?["id"]);
    anyhow::ensure!(
        rx.wait(1, Duration::from_secs(120)).await,
        "the warm-up task {warm} did not complete"
    );
    Ok(())
}

/// The burst's creations: when it started, how long creating took, and each task's
/// creation time and input by id.
struct Burst {
    start: Instant,
    create_s: f64,
    created: HashMap<String, (Instant, i64)>,
}

/// Creates `count` tasks from `clients` clients at once, each as soon as the last was answered.
async fn create_burst(
    api: &Arc<Api>,
    case: &str,
    key: &str,
    count: usize,
    clients: usize,
) -> anyhow::Result<Burst> {
    let created: Arc<Mutex<HashMap<String, (Instant, i64)>>> = Default::default();
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..clients {
        let (api, created, next, case, key) = (
            api.clone(),
            created.clone(),
            next.clone(),
            case.to_owned(),
            key.to_owned(),
        );
        handles.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return anyhow::Ok(());
                }
                let at = Instant::now();
                let t = create(&api, &case, &key, i).await?;
                created.lock().unwrap().insert(s(&t["id"]), (at, i as i64));
            }
        }));
    }
    for h in handles {
        h.await??;
    }
    let create_s = start.elapsed().as_secs_f64();
    let created = created.lock().unwrap().clone();
    Ok(Burst {
        start,
        create_s,
        created,
    })
}

/// Each completed task's time from creation to callback (ms), and the last callback's time.
fn latencies(burst: &Burst, done: &HashMap<String, Instant>) -> (Vec<f64>, Instant) {
    let mut lat = Vec::new();
    let mut last = burst.start;
    for (id, (at, _)) in &burst.created {
        if let Some(cb) = done.get(id) {
            lat.push(cb.duration_since(*at).as_secs_f64() * 1000.0);
            last = last.max(*cb);
        }
    }
    (lat, last)
}

/// Checks every task's outputs, read back after the clock stopped (callbacks are thin: ids
/// and status).
async fn check_outputs(
    api: &Api,
    key: &str,
    created: &HashMap<String, (Instant, i64)>,
) -> anyhow::Result<()> {
    for (id, (_, n)) in created {
        let out = api
            .get(&format!("/v1/tasks/{id}/outputs"), Some(key))
            .await?;
        anyhow::ensure!(
            out["outputs"]["n"] == json!(n * 2),
            "task {id}: outputs {out}"
        );
    }
    Ok(())
}

/// Prints the burst's figures: creations per second, tasks per second and callback latency.
fn print_burst(count: usize, clients: usize, create_s: f64, lat: &[f64], total_s: f64, all: bool) {
    println!(
        "task-bench: {count} tasks, {clients} clients, {}",
        if std::env::var("DATABASE_URL").is_ok() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    );
    println!(
        "  creations answered in {create_s:.2} s ({:.0}/s)",
        count as f64 / create_s
    );
    println!(
        "  create → done: {} completed in {total_s:.2} s = {:.0} tasks/s{}",
        lat.len(),
        lat.len() as f64 / total_s,
        if all {
            ""
        } else {
            " (NOT ALL COMPLETED within 600 s)"
        }
    );
    println!(
        "  creation → task.completed callback: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pct(lat, 0.5),
        pct(lat, 0.99),
        lat.last().copied().unwrap_or(f64::NAN)
    );
}

/// One task at a time (TASK_SERIAL): the latency of a task alone, without the burst's queue.
async fn one_at_a_time(api: &Api, case: &str, key: &str, rx: &Receiver) -> anyhow::Result<()> {
    let serial = env_num("TASK_SERIAL", 200);
    let mut alone = Vec::new();
    for i in 0..serial {
        let before = rx.done.lock().unwrap().len();
        let at = Instant::now();
        let t = create(api, case, key, i).await?;
        anyhow::ensure!(
            rx.wait(before + 1, Duration::from_secs(60)).await,
            "task {} did not complete",
            s(&t["id"])
        );
        let cb = rx.done.lock().unwrap()[&s(&t["id"])];
        alone.push(cb.duration_since(at).as_secs_f64() * 1000.0);
    }
    alone.sort_by(f64::total_cmp);
    println!(
        "  one task at a time ({serial}): creation → task.completed p50 {:.1} ms, p99 {:.1} ms",
        pct(&alone, 0.5),
        pct(&alone, 0.99)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count = env_num("TASK_COUNT", 2000);
    let clients = env_num("TASK_CLIENTS", 16);
    let server = BenchServer::start(&[
        "--agent-chat-limit",
        "100000000",
        "--agent-read-limit",
        "100000000",
    ])?;
    let api = Arc::new(Api {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()?,
        base: server.base.clone(),
    });
    let admin = api.login("admin", PASSWORD).await?;
    let env = deploy_doubler(&api, &admin).await?;
    let (key, case) = create_case(&api, &admin, &env).await?;
    let rx = receiver(&api, &key).await?;
    warm_up(&api, &case, &key, &rx).await?;

    let burst = create_burst(&api, &case, &key, count, clients).await?;
    let all = rx.wait(count + 1, Duration::from_secs(600)).await;
    let done = rx.done.lock().unwrap().clone();
    let (mut lat, last) = latencies(&burst, &done);
    check_outputs(&api, &key, &burst.created).await?;
    lat.sort_by(f64::total_cmp);
    let total_s = last.duration_since(burst.start).as_secs_f64();
    print_burst(count, clients, burst.create_s, &lat, total_s, all);
    anyhow::ensure!(
        all,
        "{} of {count} tasks did not complete",
        count - lat.len()
    );
    one_at_a_time(&api, &case, &key, &rx).await
}
