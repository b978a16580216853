//! Noisy-neighbour benchmark (issue 12): `cargo build --release -p host --bins &&
//! target/release/noisy-bench`.
//!
//! Starts the release `botbox serve` beside this binary on a fresh SQLite folder. Tenant B
//! runs the counter bot on a generic channel; a few of B's users each send a message and wait
//! for its reply to reach B's sink, again and again: B's latency is end to end (webhook, step,
//! commit, delivery). It is measured alone, then while tenant A runs each attack on the same
//! server:
//!
//! - `slow-api`: A's steps each make two api calls to a server that never answers (5 s each);
//! - `hanging-endpoint`: A's replies go to an endpoint that accepts and never answers;
//! - `cpu-burn`: A's steps run a JavaScript method that loops until its fuel budget;
//! - `flood`: A's users send as fast as the server takes them.
//!
//! Prints B's p50/p99 per phase and the ratio to its baseline (goal: p99 within 2×).
//! Options (environment): NOISY_SECONDS (per phase, default 8), NOISY_B_USERS (4),
//! NOISY_A_USERS (16), NOISY_B_PACE_MS (0: each B user sends its next message as soon as
//! the reply arrives, so B alone keeps the server busy; n: at most one message per n ms per
//! user, a tenant that uses a fraction of the machine), NOISY_PHASES (attacks to run, comma
//! separated, e.g. `flood,cpu-burn`; default all; B alone always runs first),
//! NOISY_A_OWN_CLIENT (0: A's and B's requests share one HTTP client, so one pool of
//! connections carries both tenants' webhooks, as a provider's does; 1: A has a client of
//! its own, as an attacker sending from its own machines).

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../bench_support.rs"]
mod bench_support;
use bench_support::{Api, BenchServer, PASSWORD, env_num, percentile};

/// A user with a project running `bot` on a generic channel whose replies go to `url`;
/// returns the channel's webhook.
async fn tenant(
    api: &Api,
    admin: &str,
    name: &str,
    bot: Value,
    url: &str,
) -> anyhow::Result<String> {
    let pw = format!("{name}-password");
    api.post(
        "/users",
        Some(admin),
        json!({"username": name, "password": pw, "roleId": "developer"}),
    )
    .await?;
    let token = api.login(name, &pw).await?;
    api.deploy_on_generic(&token, name, bot, url).await
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// B's sink: the latest reply count per user ("Message k (total k)").
#[derive(Clone, Default)]
struct Sink {
    counts: Arc<Mutex<HashMap<String, u64>>>,
    notify: Arc<tokio::sync::Notify>,
}

impl Sink {
    async fn start(&self) -> anyhow::Result<String> {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/sink", l.local_addr()?);
        let me = self.clone();
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let me = me.clone();
            async move {
                let v: Value = serde_json::from_slice(&body).unwrap_or_default();
                let user = s(&v["userId"]);
                let n = v["messages"][0]["content"]
                    .as_str()
                    .and_then(|t| t.strip_prefix("Message "))
                    .and_then(|t| t.split(' ').next())
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
                let mut c = me.counts.lock().unwrap();
                let e = c.entry(user).or_default();
                *e = (*e).max(n);
                drop(c);
                me.notify.notify_waiters();
                "ok"
            }
        });
        tokio::spawn(async move { axum::serve(l, app).await });
        Ok(url)
    }

    async fn wait(&self, user: &str, n: u64) {
        loop {
            // Registered before the check, so a reply arriving in between still wakes us.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.counts.lock().unwrap().get(user).copied().unwrap_or(0) >= n {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
        }
    }
}

/// A server that accepts connections and never answers.
async fn hanging() -> anyhow::Result<String> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", l.local_addr()?);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = l.accept().await {
            held.push(sock);
        }
    });
    Ok(url)
}

fn counter_bot() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/counter/bot.yml"
    ))
    .expect("the counter example");
    serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&text).unwrap()).unwrap()
}

fn one_state(actions: Value, methods: Value) -> Value {
    json!({"name": "a", "methods": methods, "flows": {"main": {"fallback": true,
        "intents": {"any": {"fallback": true}},
        "states": {"start": {"initial": true, "transitions": {"s": {"fallback": true}}},
            "s": {"end": true, "action": actions}}}}})
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds = env_num("NOISY_SECONDS", 8) as u64;
    let b_users = env_num("NOISY_B_USERS", 4);
    let a_users = env_num("NOISY_A_USERS", 16);
    let pace = env_num("NOISY_B_PACE_MS", 0) as u64;
    let server = BenchServer::start(&[])?;
    let base = server.base.clone();
    let c = Arc::new(Api {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()?,
        base,
    });
    let admin = c.login("admin", PASSWORD).await?;
    let a_client = if env_num("NOISY_A_OWN_CLIENT", 0) > 0 {
        reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()?
    } else {
        c.http.clone()
    };

    let sink = Sink::default();
    let sink_url = sink.start().await?;
    let b_hook = tenant(&c, &admin, "tenant-b", counter_bot(), &sink_url).await?;
    // Warm-up: B's revision gets its warm instance (the server waited for its sandbox).
    c.http
        .post(&b_hook)
        .json(&json!({"userId": "warm", "messages": [{"type": "text", "content": "hi"}]}))
        .send()
        .await?;
    sink.wait("warm", 1).await;
    let hang = hanging().await?;
    let null_sink = Sink::default().start().await?;
    let attacks: Vec<(&str, String)> = vec![
        (
            "slow-api",
            tenant(
                &c,
                &admin,
                "a-slow",
                one_state(
                    json!([
                        {"name": "api", "options": {"method": "GET", "uri": format!("{hang}/a")}},
                        {"name": "api", "options": {"method": "GET", "uri": format!("{hang}/b")}},
                        {"name": "text", "options": {"text": "done"}}
                    ]),
                    json!({}),
                ),
                &null_sink,
            )
            .await?,
        ),
        (
            "hanging-endpoint",
            tenant(&c, &admin, "a-hang", counter_bot(), &hang).await?,
        ),
        (
            "cpu-burn",
            tenant(
                &c,
                &admin,
                "a-burn",
                one_state(
                    json!([{"name": "method", "method": "spin"}]),
                    json!({"spin()": "while (true) {}"}),
                ),
                &null_sink,
            )
            .await?,
        ),
        (
            "flood",
            tenant(&c, &admin, "a-flood", counter_bot(), &null_sink).await?,
        ),
    ];

    println!(
        "noisy neighbours: tenant B = {b_users} users on the counter bot (end to end: webhook → step → delivery); tenant A = {a_users} users attacking; {seconds} s per phase"
    );
    let mut phase_no = 0u64;
    let mut baseline_p99 = None;
    let mut run_phase = |name: &'static str, attack: Option<String>| {
        phase_no += 1;
        let c = c.clone();
        let sink = sink.clone();
        let b_hook = b_hook.clone();
        let a_client = a_client.clone();
        async move {
            let stop = Arc::new(AtomicBool::new(false));
            let mut attackers = Vec::new();
            if let Some(hook) = attack {
                for u in 0..a_users {
                    let (http, hook, stop) = (a_client.clone(), hook.clone(), stop.clone());
                    attackers.push(tokio::spawn(async move {
                        while !stop.load(Ordering::Relaxed) {
                            let body = json!({"userId": format!("a{phase_no}-{u}"), "messages": [{"type": "text", "content": "hi"}]});
                            let _ = http.post(&hook).json(&body).send().await;
                        }
                    }));
                }
                // Let the attack take hold first.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            let until = Instant::now() + Duration::from_secs(seconds);
            let mut users = Vec::new();
            for u in 0..b_users {
                let (c, sink, b_hook) = (c.clone(), sink.clone(), b_hook.clone());
                users.push(tokio::spawn(async move {
                    let user = format!("b{phase_no}-{u}");
                    let (mut lat, mut acked) = (Vec::new(), Vec::new());
                    let mut k = 0u64;
                    let mut tick = (pace > 0).then(|| {
                        let mut t = tokio::time::interval(Duration::from_millis(pace));
                        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                        t
                    });
                    while Instant::now() < until {
                        if let Some(t) = tick.as_mut() {
                            t.tick().await;
                        }
                        k += 1;
                        let body = json!({"userId": user, "messages": [{"type": "text", "content": "hi"}]});
                        let t0 = Instant::now();
                        if c.http.post(&b_hook).json(&body).send().await.is_err() {
                            continue;
                        }
                        // The webhook answers once the step is committed; the rest is delivery.
                        acked.push(t0.elapsed());
                        sink.wait(&user, k).await;
                        lat.push(t0.elapsed());
                    }
                    (lat, acked)
                }));
            }
            let (mut lat, mut acked) = (Vec::new(), Vec::new());
            for u in users {
                let (l, a) = u.await.unwrap();
                lat.extend(l);
                acked.extend(a);
            }
            stop.store(true, Ordering::Relaxed);
            for a in attackers {
                a.abort();
            }
            lat.sort();
            acked.sort();
            (
                name,
                lat.len(),
                percentile(&lat, 0.5),
                percentile(&lat, 0.99),
                percentile(&acked, 0.5),
                percentile(&acked, 0.99),
            )
        }
    };
    let only = std::env::var("NOISY_PHASES").unwrap_or_default();
    let mut rows = Vec::new();
    rows.push(run_phase("alone", None).await);
    for (name, hook) in attacks {
        if !only.is_empty() && !only.split(',').any(|p| p.trim() == name) {
            continue;
        }
        rows.push(run_phase(name, Some(hook)).await);
    }
    for (name, n, p50, p99, a50, a99) in rows {
        let base: &mut Option<Duration> = &mut baseline_p99;
        let ratio = match base {
            None => {
                *base = Some(p99);
                1.0
            }
            Some(b) => p99.as_secs_f64() / b.as_secs_f64(),
        };
        println!(
            "  {name:<17} B replies {n:>5}   p50 {:>7.1} ms   p99 {:>7.1} ms   p99 × {ratio:.2} of alone   (webhook answered: p50 {:>5.1} ms, p99 {:>5.1} ms)",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            a50.as_secs_f64() * 1e3,
            a99.as_secs_f64() * 1e3
        );
    }
    drop(server);
    Ok(())
}
