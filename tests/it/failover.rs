//! A PostgreSQL failover under load: a primary and a synchronous standby on two ports of
//! their own (the machine's PostgreSQL binaries, run as the `postgres` user), two botbox
//! replicas given both hosts, senders retrying every request that did not get a 2xx as
//! providers do. Mid-load the primary is stopped with `-m immediate` and the standby
//! promoted. Then every message acknowledged with 200 is stored exactly once and answered,
//! both replicas serve again within 15 s of the promotion without a restart, and `/ready`
//! answered 503 in between.
//!
//! Needs PostgreSQL's server binaries (`pg_config --bindir`) and, when run as root, a
//! `postgres` user; without them the test says so and passes, unless
//! `BOTBOX_REQUIRE_POSTGRES` is set.

use crate::common::{self, Receiver, Server, deploy, one_state_bot, s};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// PostgreSQL's server programs, if this machine has them.
fn pg_bindir() -> Option<PathBuf> {
    let out = Command::new("pg_config").arg("--bindir").output().ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    dir.join("initdb").exists().then_some(dir)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a PostgreSQL program as the `postgres` user when this test runs as root (the
/// server refuses to run as root).
fn pg(bindir: &Path, program: &str, args: &[&str]) -> Output {
    let exe = bindir.join(program);
    let out = if is_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&exe)
            .args(args)
            .output()
    } else {
        Command::new(&exe).args(args).output()
    }
    .unwrap_or_else(|e| panic!("{program}: {e}"));
    out
}

#[track_caller]
fn pg_ok(bindir: &Path, program: &str, args: &[&str]) {
    let out = pg(bindir, program, args);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A primary and a synchronous standby; both stopped (immediately) when dropped.
struct Pair {
    bindir: PathBuf,
    dir: tempfile::TempDir,
    primary: u16,
    standby: u16,
}

impl Pair {
    fn data(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn start(bindir: PathBuf) -> Pair {
        let dir = tempfile::tempdir().unwrap();
        if is_root() {
            let ok = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success(), "chown postgres");
        }
        let pair = Pair {
            bindir,
            dir,
            primary: free_port(),
            standby: free_port(),
        };
        let (p1, p2) = (pair.data("primary"), pair.data("standby"));
        let b = &pair.bindir;
        pg_ok(
            b,
            "initdb",
            &["-D", &p1, "-U", "postgres", "--auth=trust", "-N"],
        );
        // Commits wait for the standby (synchronous replication); fsync is off, as nothing
        // here outlives the test.
        let conf = format!(
            "port = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             wal_level = replica\nmax_wal_senders = 4\nsynchronous_standby_names = '*'\n\
             synchronous_commit = on\nfsync = off\nmax_connections = 100\n",
            pair.primary,
            pair.dir.path().display()
        );
        append(&format!("{p1}/postgresql.conf"), &conf);
        pg_ok(
            b,
            "pg_ctl",
            &["-D", &p1, "-l", &format!("{p1}.log"), "-w", "start"],
        );
        let port = pair.primary.to_string();
        pg_ok(
            b,
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                &p2,
                "-R",
                "-X",
                "stream",
            ],
        );
        // Once promoted, the standby has no standby of its own to wait for.
        append(
            &format!("{p2}/postgresql.conf"),
            &format!("port = {}\nsynchronous_standby_names = ''\n", pair.standby),
        );
        pg_ok(
            b,
            "pg_ctl",
            &["-D", &p2, "-l", &format!("{p2}.log"), "-w", "start"],
        );
        pair
    }

    /// `postgres://…` with both hosts, primary first.
    fn url(&self, db: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{db}?target_session_attrs=read-write",
            self.primary, self.standby
        )
    }

    fn crash_primary(&self) {
        pg_ok(
            &self.bindir,
            "pg_ctl",
            &["-D", &self.data("primary"), "-m", "immediate", "stop"],
        );
    }

    fn promote_standby(&self) {
        pg_ok(
            &self.bindir,
            "pg_ctl",
            &["-D", &self.data("standby"), "-w", "promote"],
        );
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for d in ["primary", "standby"] {
            let _ = pg(
                &self.bindir,
                "pg_ctl",
                &["-D", &self.data(d), "-m", "immediate", "stop"],
            );
        }
    }
}

fn append(file: &str, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Replies `echo <text>` to every message.
fn echo_bot() -> Value {
    one_state_bot(
        json!({"end": true, "action": {"name": "text", "options": {"text": "echo $(content)"}}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_loses_no_acknowledged_message() {
    let Some(bindir) = pg_bindir() else {
        assert!(
            std::env::var_os("BOTBOX_REQUIRE_POSTGRES").is_none_or(|v| v == "0"),
            "PostgreSQL's server programs are required (BOTBOX_REQUIRE_POSTGRES)"
        );
        eprintln!("notice: pg_config --bindir has no initdb: the failover test did not run");
        return;
    };
    let pair = Pair::start(bindir);
    {
        use sqlx::Connection;
        let admin = format!("postgres://postgres@127.0.0.1:{}/postgres", pair.primary);
        let mut c = sqlx::postgres::PgConnection::connect(&admin).await.unwrap();
        sqlx::query("CREATE DATABASE botbox")
            .execute(&mut c)
            .await
            .unwrap();
    }
    let url = pair.url("botbox");
    let flags = [
        "--allow-private-egress",
        "--delivery-timeout-ms",
        "1000",
        "--metrics-token",
        "scrape",
    ];
    let one = Server::start_on_url(&url, &flags).await;
    let two = Server::start_on_url(&url, &flags).await;
    let (rx, rx_url) = Receiver::start().await;
    let api = one.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, echo_bot()).await;
    let channel = common::generic_channel(&api, &admin, &pid, &env, &rx_url).await;

    // Senders: each owns some users and sends their messages in order through both
    // replicas in turn, retrying each until it gets a 2xx.
    let (messages, senders, users) = (300usize, 4usize, 24usize);
    let bases = Arc::new([one.base.clone(), two.base.clone()]);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let acked = Arc::new(AtomicUsize::new(0));
    let mut tasks = vec![];
    for sender in 0..senders {
        let (acked, bases, http, channel) =
            (acked.clone(), bases.clone(), http.clone(), channel.clone());
        tasks.push(tokio::spawn(async move {
            for k in (sender..messages).step_by(senders) {
                let body = json!({"userId": format!("u{}", k % users), "messages": [
                    {"id": format!("m{k}"), "type": "text", "content": format!("msg {k}")}
                ]});
                for attempt in 0.. {
                    let base = &bases[(k + attempt) % 2];
                    let r = http
                        .post(format!("{base}/webhooks/{channel}"))
                        .json(&body)
                        .send()
                        .await;
                    if r.is_ok_and(|r| r.status().is_success()) {
                        acked.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }));
    }

    // Readiness of both replicas, polled from here on.
    let unready_seen = Arc::new(AtomicBool::new(false));
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (bases, unready_seen, watching, http) = (
            bases.clone(),
            unready_seen.clone(),
            watching.clone(),
            http.clone(),
        );
        tokio::spawn(async move {
            while watching.load(Ordering::SeqCst) {
                for base in bases.iter() {
                    let r = http.get(format!("{base}/ready")).send().await;
                    if r.is_ok_and(|r| r.status() == 503) {
                        unready_seen.store(true, Ordering::SeqCst);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    // A third of the way: the primary dies; the standby is promoted.
    while acked.load(Ordering::SeqCst) < messages / 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pair.crash_primary();
    let before = acked.load(Ordering::SeqCst);
    // Both replicas find the primary gone before the promotion.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !unready_seen.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "/ready never said 503 without a primary"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pair.promote_standby();
    let promoted = Instant::now();
    for base in bases.iter() {
        loop {
            let r = http.get(format!("{base}/ready")).send().await;
            if r.is_ok_and(|r| r.status() == 200) {
                break;
            }
            assert!(
                promoted.elapsed() < Duration::from_secs(15),
                "{base} not ready 15 s after the promotion"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    eprintln!(
        "failover: {before} messages acknowledged before the crash; both replicas ready {} ms after the promotion",
        promoted.elapsed().as_millis()
    );
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("senders finish")
            .unwrap();
    }
    watching.store(false, Ordering::SeqCst);
    watcher.await.unwrap();
    // Each replica's metrics name the host in use, and count both choices.
    for base in bases.iter() {
        let text = http
            .get(format!("{base}/metrics"))
            .bearer_auth("scrape")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let line = |l: &str| text.lines().any(|x| x == l);
        assert!(
            line(&format!(
                "botbox_database_primary{{host=\"127.0.0.1:{}\"}} 1",
                pair.standby
            )),
            "{text}"
        );
        assert!(
            line(&format!(
                "botbox_database_primary{{host=\"127.0.0.1:{}\"}} 0",
                pair.primary
            )),
            "{text}"
        );
        assert!(line("botbox_database_primary_switches_total 2"), "{text}");
    }

    // Every acknowledged message is stored once, every reply delivered.
    let db = one.db().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = db.outbox_rows(&channel).await.unwrap();
        let waiting = rows.iter().filter(|r| r.status != "sent").count();
        if waiting == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{waiting} outbox rows still not sent"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lines = db
        .list_transcripts(&pid, "production", 0, i64::MAX)
        .await
        .unwrap();
    let mut ins: HashMap<String, usize> = HashMap::new();
    for l in lines.iter().filter(|l| l.direction == "in") {
        let m: Value = serde_json::from_str(&l.message).unwrap();
        *ins.entry(s(&m["content"])).or_default() += 1;
    }
    let delivered: std::collections::HashSet<String> = rx
        .seen
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, _, body)| common::texts(body))
        .collect();
    let missing: Vec<usize> = (0..messages)
        .filter(|k| !ins.contains_key(&format!("msg {k}")))
        .collect();
    let twice: Vec<&String> = ins
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(t, _)| t)
        .collect();
    let unanswered: Vec<usize> = (0..messages)
        .filter(|k| !delivered.contains(&format!("echo msg {k}")))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged but not stored: {missing:?}"
    );
    assert!(twice.is_empty(), "stored twice: {twice:?}");
    assert!(unanswered.is_empty(), "never answered: {unanswered:?}");
}
