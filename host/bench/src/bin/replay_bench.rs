//! Replay benchmark: `cargo build --release -p botbox-bench --bin replay-bench --bin botbox
//! && target/release/replay-bench`.
//!
//! Starts the server (SQLite in a temporary folder, or DATABASE_URL), deploys the pizza bot
//! on a generic channel whose replies go to a local sink, records REPLAY_CONVERSATIONS
//! conversations (default 1,000: users who each play the four-message pizza order, 32 at a
//! time), then replays them all on the revision that served them and prints the replay's
//! wall time (from the POST to the GET that says `done`), the server's CPU time over it, and
//! the CPU per replayed message. Every conversation must come back identical.

use botbox_bench::{Api, BenchServer, PASSWORD, env_num};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Conversations recorded at once.
const IN_FLIGHT: usize = 32;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let conversations = env_num("REPLAY_CONVERSATIONS", 1_000);
    let server = BenchServer::start(&[])?;
    let sink = start_sink().await?;
    let api = Api {
        http: reqwest::Client::new(),
        base: server.base.clone(),
    };
    let token = api.login("admin", PASSWORD).await?;
    let bot_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pizza/bot.yml"
    ))?;
    let bot: Value = serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&bot_text)?)?;
    let d = api.deploy(&token, "production", bot, &sink).await?;
    record(&api, &d.webhook, conversations).await?;

    let cpu_before = server.cpu_seconds()?;
    let started = Instant::now();
    let ask =
        json!({"environment": d.environment, "botRevision": d.revision, "last": conversations});
    let r = api
        .post(
            &format!("/projects/{}/replays", d.project),
            Some(&token),
            ask,
        )
        .await?;
    let path = format!(
        "/projects/{}/replays/{}",
        d.project,
        r["id"].as_str().unwrap_or("")
    );
    let done = loop {
        let r = api.get(&path, Some(&token)).await?;
        if r["status"] != "running" {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let wall = started.elapsed();
    let cpu = server.cpu_seconds()? - cpu_before;
    report(&done, wall, cpu)
}

/// Plays the pizza order for `n` users, `IN_FLIGHT` at a time.
async fn record(api: &Api, webhook: &str, n: usize) -> anyhow::Result<()> {
    let order = [
        json!({"type": "text", "content": "I want pizza"}),
        json!({"type": "data", "payload": {"type": "pizza", "pizza": "pepperoni"}}),
        json!({"type": "text", "content": "2"}),
        json!({"type": "data", "payload": {"type": "confirm", "confirm": "yes"}}),
    ];
    let all: Vec<usize> = (0..n).collect();
    for chunk in all.chunks(IN_FLIGHT) {
        let users = chunk.iter().map(|&u| {
            let (http, order) = (api.http.clone(), order.clone());
            let webhook = webhook.to_owned();
            async move {
                for m in order {
                    let body = json!({"userId": format!("u{u}"), "messages": [m]});
                    let r = http.post(&webhook).json(&body).send().await?;
                    anyhow::ensure!(r.status().is_success(), "webhook: {}", r.status());
                }
                anyhow::Ok(())
            }
        });
        for r in futures_join(users).await {
            r?;
        }
    }
    Ok(())
}

/// Runs the futures together (one task each).
async fn futures_join<F>(fs: impl Iterator<Item = F>) -> Vec<anyhow::Result<()>>
where
    F: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = vec![];
    for h in handles {
        out.push(h.await.unwrap_or_else(|e| Err(e.into())));
    }
    out
}

fn report(done: &Value, wall: Duration, cpu: f64) -> anyhow::Result<()> {
    let n = |k: &str| done[k].as_i64().unwrap_or(0);
    anyhow::ensure!(done["status"] == "done", "the replay ended {done}");
    let messages: i64 = done["results"]
        .as_array()
        .map(|rs| rs.iter().filter_map(|r| r["messages"].as_i64()).sum())
        .unwrap_or(0);
    println!(
        "replay of {} conversations ({messages} messages): {} identical, {} differing, {} failed",
        n("conversations"),
        n("identical"),
        n("differing"),
        n("failed")
    );
    println!("  wall        {:.2} s (POST to done)", wall.as_secs_f64());
    println!("  server CPU  {cpu:.2} s");
    if messages > 0 {
        println!(
            "  per message {:.0} µs of server CPU",
            cpu * 1e6 / messages as f64
        );
    }
    anyhow::ensure!(
        n("identical") == n("conversations"),
        "not every conversation was identical"
    );
    Ok(())
}

/// A sink for the replies: answers 200 to anything; its URL.
async fn start_sink() -> anyhow::Result<String> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/sink", l.local_addr()?);
    let app = axum::Router::new().fallback(|| async { "ok" });
    tokio::spawn(async move { axum::serve(l, app).await });
    Ok(url)
}
