//! Noisy-neighbour benchmark: `cargo build --release -p botbox -p botbox-bench &&
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
//! - `flood`: A's users send as fast as the server takes them;
//!
//! and one phase that is not an attack, the machine's floor: `idle-spin`, no tenant A, but
//! one thread per core in the bench spinning under `SCHED_IDLE` (it gets only the time
//! nothing else wants, so B's figure is what busy cores alone cost B on this machine).
//!
//! Prints B's p50/p99 per phase and the ratio to its baseline (goal: p99 within 2×): by
//! default B alone runs first and again after each attack, and an attack's baseline is the
//! mean of the alone phases on either side of it (`NOISY_INTERLEAVE`).
//! Options (environment): NOISY_SECONDS (per phase, default 8), NOISY_B_USERS (4),
//! NOISY_A_USERS (16), NOISY_B_PACE_MS (0: each B user sends its next message as soon as
//! the reply arrives, so B alone keeps the server busy; n: at most one message per n ms per
//! user, a tenant that uses a fraction of the machine), NOISY_PHASES (attacks to run, comma
//! separated, e.g. `flood,cpu-burn`; default all; B alone always runs first),
//! NOISY_A_OWN_CLIENT (0: A's and B's requests share one HTTP client, so one pool of
//! connections carries both tenants' webhooks, as a provider's does; 1: A has a client of
//! its own, as an attacker sending from its own machines), NOISY_A_IDLE (0; 1: A's load
//! generator, with a client of its own, runs on threads under `SCHED_IDLE`, so that it
//! takes only the CPU that the server and B's side leave: the closest this one machine
//! comes to an attacker whose machines are elsewhere; A's answered messages per second
//! show how hard it still pushes), NOISY_INTERLEAVE (1: B alone runs again after each
//! attack, and each attack's ratio is to the mean of the two alone phases around it, so
//! that the machine's drift during a run, which moves B alone's p99 by a quarter within
//! minutes on this VM, moves both sides of the ratio; 0: one alone phase first, the ratio
//! to it), NOISY_SPINNERS (the idle-spin phase's
//! spinning threads; default one per core: with fewer, some core stays idle).
//!
//! For each attack it also prints A's messages answered with a 2xx per second.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use botbox_bench::{Api, BenchServer, PASSWORD, env_num, percentile};

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
        "/../../examples/counter/bot.yml"
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

/// The bench's settings (environment; see the module's documentation).
struct Options {
    seconds: u64,
    b_users: usize,
    a_users: usize,
    pace: u64,
    a_idle: bool,
    a_own_client: bool,
    interleave: bool,
    spinners: usize,
}

impl Options {
    /// Reads the settings from the environment.
    fn from_env() -> Options {
        Options {
            seconds: env_num("NOISY_SECONDS", 8) as u64,
            b_users: env_num("NOISY_B_USERS", 4),
            a_users: env_num("NOISY_A_USERS", 16),
            pace: env_num("NOISY_B_PACE_MS", 0) as u64,
            a_idle: env_num("NOISY_A_IDLE", 0) > 0,
            a_own_client: env_num("NOISY_A_OWN_CLIENT", 0) > 0,
            interleave: env_num("NOISY_INTERLEAVE", 1) > 0,
            spinners: env_num(
                "NOISY_SPINNERS",
                std::thread::available_parallelism().map_or(2, |n| n.get()),
            ),
        }
    }
}

/// An HTTP client that keeps up to 64 idle connections per host.
fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
}

/// Tenant B on the counter bot with its sink, warmed up: the sink and B's webhook.
async fn tenant_b(c: &Api, admin: &str) -> anyhow::Result<(Sink, String)> {
    let sink = Sink::default();
    let sink_url = sink.start().await?;
    let b_hook = tenant(c, admin, "tenant-b", counter_bot(), &sink_url).await?;
    // Warm-up: B's revision gets its warm instance (the server waited for its sandbox).
    c.http
        .post(&b_hook)
        .json(&json!({"userId": "warm", "messages": [{"type": "text", "content": "hi"}]}))
        .send()
        .await?;
    sink.wait("warm", 1).await;
    Ok((sink, b_hook))
}

/// Every phase beside B alone, in order: the idle-spin floor, then A's tenants, one per attack.
async fn attacks(c: &Api, admin: &str) -> anyhow::Result<Vec<(&'static str, Load)>> {
    let hang = hanging().await?;
    let null_sink = Sink::default().start().await?;
    let slow_api = one_state(
        json!([
            {"name": "api", "options": {"method": "GET", "uri": format!("{hang}/a")}},
            {"name": "api", "options": {"method": "GET", "uri": format!("{hang}/b")}},
            {"name": "text", "options": {"text": "done"}}
        ]),
        json!({}),
    );
    let cpu_burn = one_state(
        json!([{"name": "method", "method": "spin"}]),
        json!({"spin()": "while (true) {}"}),
    );
    Ok(vec![
        ("idle-spin", Load::Spin),
        (
            "slow-api",
            Load::Hook(tenant(c, admin, "a-slow", slow_api, &null_sink).await?),
        ),
        (
            "hanging-endpoint",
            Load::Hook(tenant(c, admin, "a-hang", counter_bot(), &hang).await?),
        ),
        (
            "cpu-burn",
            Load::Hook(tenant(c, admin, "a-burn", cpu_burn, &null_sink).await?),
        ),
        (
            "flood",
            Load::Hook(tenant(c, admin, "a-flood", counter_bot(), &null_sink).await?),
        ),
    ])
}

/// Threads (`n`, one per core unless NOISY_SPINNERS says otherwise) that spin under
/// `SCHED_IDLE`, taking only the time nobody else wants, until `stop`.
fn spin(n: usize, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                botbox_lanes::idle_this_thread();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect()
}

/// One of A's users (`u` of phase `phase_no`): posts to `hook` as fast as it is answered until `stop`, counting the
/// messages answered with a 2xx in `answered`.
async fn a_user(
    http: reqwest::Client,
    hook: String,
    (phase_no, u): (u64, usize),
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::Relaxed) {
        let body = json!({"userId": format!("a{phase_no}-{u}"), "messages": [{"type": "text", "content": "hi"}]});
        if let Ok(r) = http.post(&hook).json(&body).send().await
            && r.status().is_success()
        {
            answered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One of B's users until `until`: each message's time to its reply at the sink, and to the
/// webhook's answer.
async fn b_user(
    c: Arc<Api>,
    sink: Sink,
    b_hook: String,
    user: String,
    pace: u64,
    until: Instant,
) -> (Vec<Duration>, Vec<Duration>) {
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
}

/// What every phase needs: B's side, A's load generator and the settings.
struct Phases {
    opts: Options,
    c: Arc<Api>,
    sink: Sink,
    b_hook: String,
    a_client: reqwest::Client,
    /// Where A's users run: this runtime, or threads under SCHED_IDLE (NOISY_A_IDLE).
    a_spawn: tokio::runtime::Handle,
    phase_no: u64,
}

impl Phases {
    /// B alone first, then each attack that NOISY_PHASES names (all by default), each
    /// followed by B alone again when interleaved.
    async fn run_all(&mut self, attacks: Vec<(&'static str, Load)>) -> Vec<Phase> {
        let only = std::env::var("NOISY_PHASES").unwrap_or_default();
        let mut rows = Vec::new();
        rows.push(self.run("alone", Load::Alone).await);
        for (name, load) in attacks {
            if !only.is_empty() && !only.split(',').any(|p| p.trim() == name) {
                continue;
            }
            rows.push(self.run(name, load).await);
            if self.opts.interleave {
                rows.push(self.run("alone", Load::Alone).await);
            }
        }
        rows
    }

    /// One phase: `load` beside B while B's users measure their latency for NOISY_SECONDS.
    async fn run(&mut self, name: &'static str, load: Load) -> Phase {
        self.phase_no += 1;
        let phase_no = self.phase_no;
        let stop = Arc::new(AtomicBool::new(false));
        let a_answered = Arc::new(AtomicU64::new(0));
        let mut attackers = Vec::new();
        let mut spinners = Vec::new();
        let attack = matches!(load, Load::Hook(_));
        if let Load::Spin = load {
            spinners = spin(self.opts.spinners, &stop);
        }
        if let Load::Hook(hook) = load {
            for u in 0..self.opts.a_users {
                let (http, hook, stop) = (self.a_client.clone(), hook.clone(), stop.clone());
                let answered = a_answered.clone();
                attackers.push(self.a_spawn.spawn(a_user(
                    http,
                    hook,
                    (phase_no, u),
                    stop,
                    answered,
                )));
            }
            // Let the attack take hold first.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let a_before = a_answered.load(Ordering::Relaxed);
        let started = Instant::now();
        let (mut lat, mut acked) = self
            .b_users(started + Duration::from_secs(self.opts.seconds))
            .await;
        let a_rate = attack.then(|| {
            (a_answered.load(Ordering::Relaxed) - a_before) as f64 / started.elapsed().as_secs_f64()
        });
        stop.store(true, Ordering::Relaxed);
        for a in attackers {
            a.abort();
        }
        // Gone before the next phase starts (they see `stop` within a spin).
        for t in spinners {
            let _ = t.join();
        }
        lat.sort();
        acked.sort();
        Phase {
            name,
            replies: lat.len(),
            p50: percentile(&lat, 0.5),
            p99: percentile(&lat, 0.99),
            acked_p50: percentile(&acked, 0.5),
            acked_p99: percentile(&acked, 0.99),
            a_rate,
        }
    }

    /// B's users until `until`: all their reply latencies, and their webhook answer times.
    async fn b_users(&self, until: Instant) -> (Vec<Duration>, Vec<Duration>) {
        let phase_no = self.phase_no;
        let mut users = Vec::new();
        for u in 0..self.opts.b_users {
            let user = format!("b{phase_no}-{u}");
            let (c, sink, b_hook) = (self.c.clone(), self.sink.clone(), self.b_hook.clone());
            users.push(tokio::spawn(b_user(
                c,
                sink,
                b_hook,
                user,
                self.opts.pace,
                until,
            )));
        }
        let (mut lat, mut acked) = (Vec::new(), Vec::new());
        for u in users {
            let (l, a) = u.await.unwrap();
            lat.extend(l);
            acked.extend(a);
        }
        (lat, acked)
    }
}

/// Prints each phase's row: B's figures and the p99's ratio to its baseline.
fn print_rows(rows: &[Phase], interleave: bool) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (i, r) in rows.iter().enumerate() {
        // The baseline: the first alone phase, or (interleaved) the mean of the alone
        // phases just before and after this attack.
        let base = if r.name == "alone" {
            r.p99
        } else if interleave {
            (rows[i - 1].p99 + rows[i + 1].p99) / 2
        } else {
            rows[0].p99
        };
        let ratio = r.p99.as_secs_f64() / base.as_secs_f64();
        let a = r
            .a_rate
            .map(|rate| format!("   A answered {rate:>5.0}/s"))
            .unwrap_or_default();
        println!(
            "  {:<17} B replies {:>5}   p50 {:>7.1} ms   p99 {:>7.1} ms   p99 × {ratio:.2} of alone   (webhook answered: p50 {:>5.1} ms, p99 {:>5.1} ms){a}",
            r.name,
            r.replies,
            ms(r.p50),
            ms(r.p99),
            ms(r.acked_p50),
            ms(r.acked_p99),
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let opts = Options::from_env();
    let server = BenchServer::start(&[])?;
    let c = Arc::new(Api {
        http: client()?,
        base: server.base.clone(),
    });
    let admin = c.login("admin", PASSWORD).await?;
    // A's generator's runtime: this one, or threads under SCHED_IDLE (NOISY_A_IDLE).
    let a_rt = opts
        .a_idle
        .then(|| botbox_lanes::runtime("a-idle", botbox_lanes::idle_this_thread));
    let a_spawn = a_rt
        .as_ref()
        .map(|rt| rt.handle().clone())
        .unwrap_or_else(tokio::runtime::Handle::current);
    let a_client = if opts.a_idle || opts.a_own_client {
        client()?
    } else {
        c.http.clone()
    };
    let (sink, b_hook) = tenant_b(&c, &admin).await?;
    let attacks = attacks(&c, &admin).await?;
    let Options {
        seconds,
        b_users,
        a_users,
        interleave,
        ..
    } = opts;
    println!(
        "noisy neighbours: tenant B = {b_users} users on the counter bot (end to end: webhook → step → delivery); tenant A = {a_users} users attacking; {seconds} s per phase"
    );
    let mut phases = Phases {
        opts,
        c,
        sink,
        b_hook,
        a_client,
        a_spawn,
        phase_no: 0,
    };
    let rows = phases.run_all(attacks).await;
    print_rows(&rows, interleave);
    drop(server);
    if let Some(rt) = a_rt {
        // Dropping a runtime inside this one's context would block: let it go.
        rt.shutdown_background();
    }
    Ok(())
}

/// What runs beside B in a phase.
enum Load {
    Alone,
    /// No tenant A: `NOISY_SPINNERS` threads (one per core by default) in this process under
    /// `SCHED_IDLE`, spinning. It
    /// takes only CPU time that nothing else wants, so what it costs B is what busy cores
    /// cost on this machine whoever keeps them busy (wake-ups from idle, the hypervisor):
    /// the floor under every attack's figure.
    Spin,
    /// Tenant A's users posting to this webhook.
    Hook(String),
}

/// One phase's figures: B's latencies, and (in an attack) A's answered messages per second.
struct Phase {
    name: &'static str,
    replies: usize,
    p50: Duration,
    p99: Duration,
    acked_p50: Duration,
    acked_p99: Duration,
    a_rate: Option<f64>,
}
