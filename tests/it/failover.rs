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

use crate::common::{self, ProviderLoad, Receiver, Server, deploy, one_state_bot};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    if is_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&exe)
            .args(args)
            .output()
    } else {
        Command::new(&exe).args(args).output()
    }
    .unwrap_or_else(|e| panic!("{program}: {e}"))
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
    // The writable host is chosen whatever the order: the standby listed first is passed by.
    let reversed = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} dbname=botbox user=postgres",
        pair.standby, pair.primary
    );
    let db = botbox_store::Db::connect(&reversed).await.unwrap();
    let chosen = db.primary.as_ref().and_then(|p| p.host());
    assert_eq!(chosen, Some(format!("127.0.0.1:{}", pair.primary)));
    db.close().await;
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

    // Providers through both replicas in turn, retrying each message until it gets a 2xx.
    let messages = 300;
    let bases = Arc::new(std::sync::RwLock::new(vec![
        one.base.clone(),
        two.base.clone(),
    ]));
    let mut load = ProviderLoad::start(bases.clone(), &channel, messages, 24);
    let http = reqwest::Client::new();

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
                let all = bases.read().unwrap().clone();
                for base in &all {
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
    load.until_acked(messages / 3).await;
    pair.crash_primary();
    let before = load.acked();
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
    let all = bases.read().unwrap().clone();
    for base in &all {
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
    load.finish().await;
    watching.store(false, Ordering::SeqCst);
    watcher.await.unwrap();
    // Each replica's metrics name the host in use, and count both choices.
    for base in &all {
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

    // Every acknowledged message is stored once, in order per user, and answered.
    load.check(&one.db().await, &pid, &channel, &rx).await;
}
