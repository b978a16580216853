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
//!
//! The server's CPU time per message (user + system, from its `/proc` stat) is printed too:
//! it does not depend on the machine's mood as much as throughput does; so are, per
//! message, its CPU by thread kind, its voluntary and involuntary context switches and its
//! system calls (`botbox_bench::counts`; perf counts the calls). `BENCH_SERVER=<path>`
//! measures another build of `botbox` with this same bench (old against new in one run). Then (unless
//! LOAD_FLOOR=0) the same load runs against the floor: this binary started again with
//! `--floor`, a bare axum server that only parses the same JSON bodies and answers 200, and
//! the ratio botbox / floor is printed.
//!
//! Soak mode (LOAD_SOAK_SECS > 0): the same load for that long instead of a message count,
//! each user a new one every order (so sessions, caches and per-user state churn), with
//! every retention window divided by LOAD_RETENTION_SCALE (default 129600: transcripts 1 min,
//! the dedupe window 5 s), idle sessions kept 2 min and a pruning pass every 5 s. Every
//! LOAD_SAMPLE_SECS (default 10) it prints the messages/s, the server's RSS and the
//! database's size on disk; at the end, whether both levelled off after the warm-up (the
//! first third): the largest value of the last third within 10 % of the largest of the
//! middle third.

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use botbox_bench::{Api, BenchServer, PASSWORD, env_num, percentile};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("--floor") {
        return floor().await;
    }
    let users = env_num("LOAD_USERS", 64);
    let total = env_num("LOAD_MESSAGES", 20_000);
    let soak = Duration::from_secs(env_num("LOAD_SOAK_SECS", 0) as u64);
    let server = start_server(soak)?;
    let (delivered, sink_url) = start_sink().await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(users)
        .build()?;
    let webhook = deploy_pizza(&http, &server.base, &sink_url).await?;
    let order = pizza_order();
    warm_up(&http, &webhook, users, &order).await?;

    let (load, run) = run_botbox(&server, &http, &webhook, &order, users, total, soak).await?;
    drain(&delivered).await;
    print_botbox(&run, users, &delivered);
    drop(server);
    let rate = run.lat.len() as f64 / run.elapsed.as_secs_f64();
    if env_num("LOAD_FLOOR", 1) == 0 || load.deadline.is_some() {
        return Ok(());
    }
    let floor = run_floor(&http, &load, &order).await?;
    print_floor(&floor, rate);
    Ok(())
}

/// Starts botbox; in soak mode with retention windows scaled down and frequent pruning.
fn start_server(soak: Duration) -> anyhow::Result<BenchServer> {
    let scale = env_num("LOAD_RETENTION_SCALE", 129_600).to_string();
    let soak_args = [
        "--retention-scale",
        &scale,
        "--session-retention",
        "2m",
        "--prune-every",
        "5s",
    ];
    BenchServer::start(if soak.is_zero() { &[] } else { &soak_args })
}

/// Starts the sink that receives the replies: its count of deliveries, and its URL.
async fn start_sink() -> anyhow::Result<(Arc<AtomicUsize>, String)> {
    let delivered = Arc::new(AtomicUsize::new(0));
    let sink = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let sink_url = format!("http://{}/sink", sink.local_addr()?);
    let counter = delivered.clone();
    let app = axum::Router::new().fallback(move || {
        let d = counter.clone();
        async move {
            d.fetch_add(1, Ordering::Relaxed);
            "ok"
        }
    });
    tokio::spawn(async move { axum::serve(sink, app).await });
    Ok((delivered, sink_url))
}

/// Deploys the pizza bot on a generic channel whose replies go to `sink_url`; returns the
/// channel's webhook.
async fn deploy_pizza(
    http: &reqwest::Client,
    base: &str,
    sink_url: &str,
) -> anyhow::Result<String> {
    let api = Api {
        http: http.clone(),
        base: base.to_owned(),
    };
    let token = api.login("admin", PASSWORD).await?;
    let bot_text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/pizza/bot.yml"
    ))?;
    let bot: Value = serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&bot_text)?)?;
    api.deploy_on_generic(&token, "load", bot, sink_url).await
}

/// The pizza order: the four messages every user plays.
fn pizza_order() -> [Value; 4] {
    [
        json!({"type": "text", "content": "I want pizza"}),
        json!({"type": "data", "payload": {"type": "pizza", "pizza": "pepperoni"}}),
        json!({"type": "text", "content": "2"}),
        json!({"type": "data", "payload": {"type": "confirm", "confirm": "yes"}}),
    ]
}

/// Warm-up: the revision gets its warm instances (the server waited for its sandbox).
async fn warm_up(
    http: &reqwest::Client,
    webhook: &str,
    users: usize,
    order: &[Value],
) -> anyhow::Result<()> {
    for i in 0..users.min(16) {
        let body = json!({"userId": format!("warm-{i}"), "messages": [order[0]]});
        http.post(webhook)
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
    }
    Ok(())
}

/// A run's figures: each answered message's latency, the wall time, and the server's CPU
/// seconds and what it spent them on.
struct Run {
    lat: Vec<Duration>,
    elapsed: Duration,
    cpu: f64,
    spent: botbox_bench::counts::Spent,
}

/// Plays the load against botbox's `webhook` (for LOAD_SOAK_SECS when set, sampling as it
/// goes); the latencies come sorted.
async fn run_botbox(
    server: &BenchServer,
    http: &reqwest::Client,
    webhook: &str,
    order: &[Value],
    users: usize,
    total: usize,
    soak: Duration,
) -> anyhow::Result<(Load, Run)> {
    let with_ids = env_num("LOAD_IDS", 1) != 0;
    let done = Arc::new(AtomicUsize::new(0));
    let cpu_before = server.cpu_seconds()?;
    let window = botbox_bench::counts::Window::open(server.pid(), on_postgres());
    let started = Instant::now();
    let deadline = (!soak.is_zero()).then(|| started + soak);
    let load = Load {
        users,
        total,
        with_ids,
        deadline,
    };
    let tasks = players(http, webhook, &load, order, &done);
    if let Some(deadline) = deadline {
        sample(server, &done, deadline).await;
    }
    let mut lat = collect(tasks).await?;
    let elapsed = started.elapsed();
    let cpu = server.cpu_seconds()? - cpu_before;
    let spent = window.close();
    lat.sort();
    Ok((
        load,
        Run {
            lat,
            elapsed,
            cpu,
            spent,
        },
    ))
}

/// Lets the outbox drain: waits (30 s at most) until the sink's count stops moving.
async fn drain(delivered: &AtomicUsize) {
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
}

/// Whether the server runs on PostgreSQL (DATABASE_URL names one).
fn on_postgres() -> bool {
    std::env::var("DATABASE_URL").is_ok_and(|u| u.starts_with("postgres"))
}

/// Microseconds of CPU per message.
fn per_message(cpu: f64, n: usize) -> f64 {
    cpu / n.max(1) as f64 * 1e6
}

/// Prints botbox's figures: throughput, latency, deliveries and the server's CPU per message.
fn print_botbox(run: &Run, users: usize, delivered: &AtomicUsize) {
    let Run {
        lat,
        elapsed,
        cpu,
        spent,
    } = run;
    let pct = |p: f64| percentile(lat, p);
    let backend = if on_postgres() {
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
    println!(
        "  server CPU  {:.0} µs per message ({cpu:.1} s, user + system; deliveries included)",
        per_message(*cpu, lat.len())
    );
    for line in spent.report(lat.len()) {
        println!("{line}");
    }
}

/// The floor: the same load against this binary started again with `--floor`, a server
/// that only parses the bodies.
async fn run_floor(http: &reqwest::Client, load: &Load, order: &[Value]) -> anyhow::Result<Run> {
    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(exe)
        .arg("--floor")
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let addr = {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        line.trim()
            .strip_prefix("floor listening on ")
            .ok_or_else(|| anyhow::anyhow!("the floor did not start: {line:?}"))?
            .to_owned()
    };
    let floor_url = format!("{addr}/webhooks/floor");
    let cpu_before = botbox_bench::cpu_seconds(child.id())?;
    let window = botbox_bench::counts::Window::open(child.id(), false);
    let started = Instant::now();
    let floor_done = Arc::new(AtomicUsize::new(0));
    let lat = collect(players(http, &floor_url, load, order, &floor_done)).await?;
    let elapsed = started.elapsed();
    let cpu = botbox_bench::cpu_seconds(child.id())? - cpu_before;
    let spent = window.close();
    let _ = child.kill();
    let _ = child.wait();
    Ok(Run {
        lat,
        elapsed,
        cpu,
        spent,
    })
}

/// Prints the floor's figures per request, and botbox's `rate` as a fraction of the floor's.
fn print_floor(floor: &Run, rate: f64) {
    let floor_rate = floor.lat.len() as f64 / floor.elapsed.as_secs_f64();
    println!(
        "  floor       {floor_rate:>8.0} requests/s, {:.0} µs CPU per request (a bare axum server parsing the same bodies)",
        per_message(floor.cpu, floor.lat.len())
    );
    for line in floor.spent.report(floor.lat.len()) {
        println!(
            "  floor{}",
            line.trim_start_matches("  per message")
                .replacen(' ', " per request ", 1)
        );
    }
    println!("  ratio       {:.3} of the floor", rate / floor_rate);
}

/// What the players do: `users` at once, `total` messages in all, or until `deadline`.
struct Load {
    users: usize,
    total: usize,
    with_ids: bool,
    deadline: Option<Instant>,
}

/// Starts the users, each playing the pizza `order` again and again against `url`; each
/// answered message counts in `done`. The handles give each user's latencies.
fn players(
    http: &reqwest::Client,
    url: &str,
    load: &Load,
    order: &[Value],
    done: &Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<Vec<Duration>>> {
    let sent = Arc::new(AtomicUsize::new(0));
    (0..load.users)
        .map(|u| {
            let http = http.clone();
            let url = url.to_owned();
            let sent = sent.clone();
            let done = done.clone();
            let order = order.to_vec();
            let (total, with_ids, deadline) = (load.total, load.with_ids, load.deadline);
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = 0usize;
                let more = || match deadline {
                    Some(d) => Instant::now() < d,
                    None => sent.fetch_add(1, Ordering::Relaxed) < total,
                };
                while more() {
                    // A provider id on every message, as real providers send: the receive
                    // pipeline checks it and records it with the step.
                    let mut m = order[i % order.len()].clone();
                    if with_ids {
                        m["id"] = json!(format!("m{i}"));
                    }
                    // A soak's users are new ones every order: per-user state churns.
                    let user = match deadline {
                        Some(_) => format!("user-{u}-{}", i / order.len()),
                        None => format!("user-{u}"),
                    };
                    let body = json!({"userId": user, "messages": [m]});
                    let t0 = Instant::now();
                    match http.post(&url).json(&body).send().await {
                        Ok(r) if r.status().is_success() => {
                            lat.push(t0.elapsed());
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => eprintln!("status {}", r.status()),
                        Err(e) => eprintln!("error {e}"),
                    }
                    i += 1;
                }
                lat
            })
        })
        .collect()
}

async fn collect(
    tasks: Vec<tokio::task::JoinHandle<Vec<Duration>>>,
) -> anyhow::Result<Vec<Duration>> {
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    Ok(lat)
}

/// `--floor`: a bare axum server that parses each body as JSON and answers `{"status":"ok"}`,
/// the least a webhook server can do; prints its address, serves until killed.
async fn floor() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("floor listening on http://{}", listener.local_addr()?);
    let app = axum::Router::new().fallback(|axum::Json(body): axum::Json<Value>| async move {
        std::hint::black_box(body);
        axum::Json(json!({"status": "ok"}))
    });
    axum::serve(listener, app).await?;
    Ok(())
}

/// Soak mode: every LOAD_SAMPLE_SECS until `deadline`, the messages/s of the interval, the
/// server's RSS and the database's bytes on disk; then whether both levelled off.
async fn sample(server: &BenchServer, done: &AtomicUsize, deadline: Instant) {
    let every = Duration::from_secs(env_num("LOAD_SAMPLE_SECS", 10) as u64);
    let started = Instant::now();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut rss = Vec::new();
    let mut disk = Vec::new();
    let mut last = 0;
    println!("     t   messages/s   RSS MiB  (anonymous)   database MiB");
    while Instant::now() + every <= deadline {
        tokio::time::sleep(every).await;
        let now = done.load(Ordering::Relaxed);
        let (r, anon) = server.rss_bytes().unwrap_or((0, 0));
        let d = server.database_file_bytes();
        println!(
            "{:>5.0}s {:>11.0} {:>9.1} {:>12.1} {:>14.1}",
            started.elapsed().as_secs_f64(),
            (now - last) as f64 / every.as_secs_f64(),
            mib(r),
            mib(anon),
            mib(d)
        );
        last = now;
        rss.push(r);
        disk.push(d);
    }
    for (what, v) in [("RSS", &rss), ("database", &disk)] {
        match levelled(v) {
            Some((middle, end)) => println!(
                "  {what}: largest of the middle third {:.1} MiB, of the last third {:.1} MiB \
                 ({:+.1} %): {}",
                mib(middle),
                mib(end),
                (end as f64 / middle.max(1) as f64 - 1.0) * 100.0,
                if end as f64 <= middle as f64 * 1.10 {
                    "levelled off"
                } else {
                    "STILL GROWING"
                }
            ),
            None => println!("  {what}: too few samples to judge (run longer)"),
        }
    }
}

/// The largest sample of the middle third and of the last third (the first third is the
/// warm-up); `None` with fewer than six samples.
fn levelled(samples: &[u64]) -> Option<(u64, u64)> {
    if samples.len() < 6 {
        return None;
    }
    let third = samples.len() / 3;
    let max = |s: &[u64]| s.iter().copied().max().unwrap_or(0);
    Some((max(&samples[third..2 * third]), max(&samples[2 * third..])))
}
