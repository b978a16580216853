//! Load benchmark of the generic channel path: `cargo build --release -p botbox -p botbox-bench
//! && target/release/load-bench`.
//!
//! Starts the release `botbox serve` beside this binary on a fresh SQLite data folder, deploys
//! the pizza bot with a generic channel whose replies go to a local sink, then plays the pizza
//! order (4 messages) for many users at once against the webhook. Prints messages per second
//! and the webhook's p50/p90/p99 latency (a webhook answers once its step is stored with its
//! replies in the outbox); deliveries to the sink are counted when the run ends.
//!
//! Options (environment): LOAD_USERS (concurrent users, default 64), LOAD_MESSAGES (total,
//! default 20000), LOAD_IDS (0: messages without provider ids; default 1),
//! DATABASE_URL (postgres://… to measure PostgreSQL instead).

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use botbox_bench::{Api, BenchServer, PASSWORD, env_num, percentile};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let users = env_num("LOAD_USERS", 64);
    let total = env_num("LOAD_MESSAGES", 20_000);
    let server = BenchServer::start(&[])?;
    let base = server.base.clone();

    // The sink that receives the replies.
    let delivered = Arc::new(AtomicUsize::new(0));
    let sink = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sink_url = format!("http://{}/sink", sink.local_addr()?);
    {
        let delivered = delivered.clone();
        let app = axum::Router::new().fallback(move || {
            let d = delivered.clone();
            async move {
                d.fetch_add(1, Ordering::Relaxed);
                "ok"
            }
        });
        tokio::spawn(async move { axum::serve(sink, app).await });
    }

    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(users)
        .build()?;
    let api = Api {
        http: http.clone(),
        base: base.clone(),
    };
    let token = api.login("admin", PASSWORD).await?;
    let bot_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pizza/bot.yml"
    ))?;
    let bot: Value = serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&bot_text)?)?;
    let webhook = api
        .deploy_on_generic(&token, "load", bot, &sink_url)
        .await?;

    let order = [
        json!({"type": "text", "content": "I want pizza"}),
        json!({"type": "data", "payload": {"type": "pizza", "pizza": "pepperoni"}}),
        json!({"type": "text", "content": "2"}),
        json!({"type": "data", "payload": {"type": "confirm", "confirm": "yes"}}),
    ];
    // Warm-up: the revision gets its warm instances (the server waited for its sandbox).
    for i in 0..users.min(16) {
        let body = json!({"userId": format!("warm-{i}"), "messages": [order[0]]});
        http.post(&webhook)
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
    }

    let with_ids = env_num("LOAD_IDS", 1) != 0;
    let sent = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for u in 0..users {
        let http = http.clone();
        let webhook = webhook.clone();
        let sent = sent.clone();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = 0usize;
            while sent.fetch_add(1, Ordering::Relaxed) < total {
                // A provider id on every message, as real providers send: the receive
                // pipeline checks it and records it with the step.
                let mut m = order[i % order.len()].clone();
                if with_ids {
                    m["id"] = json!(format!("m{i}"));
                }
                let body = json!({"userId": format!("user-{u}"), "messages": [m]});
                let t0 = Instant::now();
                let r = http.post(&webhook).json(&body).send().await;
                match r {
                    Ok(r) if r.status().is_success() => lat.push(t0.elapsed()),
                    Ok(r) => eprintln!("status {}", r.status()),
                    Err(e) => eprintln!("error {e}"),
                }
                i += 1;
            }
            lat
        }));
    }
    let mut lat: Vec<Duration> = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    let elapsed = started.elapsed();
    lat.sort();
    let pct = |p: f64| percentile(&lat, p);
    // Let the outbox drain.
    let drain = Instant::now();
    let mut last = 0;
    while drain.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = delivered.load(Ordering::Relaxed);
        if now == last && now > 0 {
            break;
        }
        last = now;
    }
    let backend = if std::env::var("DATABASE_URL").is_ok() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!(
        "generic channel, pizza bot, {backend}, {users} concurrent users, {} messages",
        lat.len()
    );
    println!(
        "  throughput  {:>8.0} messages/s",
        lat.len() as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  latency     p50 {:.1} ms   p90 {:.1} ms   p99 {:.1} ms   max {:.1} ms",
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.90).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        lat.last().unwrap().as_secs_f64() * 1e3
    );
    println!(
        "  deliveries  {} reply batches received by the sink",
        delivered.load(Ordering::Relaxed)
    );
    drop(server);
    Ok(())
}
