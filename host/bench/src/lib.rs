//! The benchmark binaries (`src/bin/`) and what they share: the release `botbox serve`
//! started beside them on a fresh data folder, and small helpers. Not a default member of the
//! workspace: `cargo build --release -p botbox -p botbox-bench` builds the benches with the
//! server they drive. Figures go to `docs/performance.md`; speed goals live here, never in
//! timed tests.
//!
//! May depend on: the crates it measures (`runtime-core`, `botbox-lanes`, `botbox-nlu`,
//! `botbox-sandbox`, `botbox-store`) and `botbox-testkit`. It drives the server over HTTP as
//! a client would and never reaches into its state.

pub mod counts;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub const PASSWORD: &str = "bench-admin-password";

/// The value at fraction `p` (0.5: the median) of `sorted`, which is not empty.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> T {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// A number from the environment, or `default`.
pub fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A running server; killed on drop.
pub struct BenchServer {
    child: Child,
    pub base: String,
    data: tempfile::TempDir,
}

impl BenchServer {
    /// Starts `botbox serve` (the binary beside this one, or `BENCH_SERVER`'s: an older
    /// build measured by the same bench) with a huge rate limit, private egress allowed
    /// (sinks are on loopback) and `extra` arguments. SQLite in a temporary folder unless
    /// `DATABASE_URL` is set.
    pub fn start(extra: &[&str]) -> anyhow::Result<BenchServer> {
        let exe = match std::env::var_os("BENCH_SERVER") {
            Some(path) => std::path::PathBuf::from(path),
            None => std::env::current_exe()?.with_file_name("botbox"),
        };
        let data = tempfile::tempdir()?;
        let mut cmd = Command::new(&exe);
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--rate-limit", "1000000"])
            .arg("--allow-private-egress")
            .args(extra)
            .arg("--data")
            .arg(data.path())
            .env("BOTBOX_ADMIN_PASSWORD", PASSWORD)
            .env("BOTBOX_LOG", "error")
            .stdout(Stdio::piped());
        if std::env::var("DATABASE_URL").is_err() {
            cmd.env_remove("DATABASE_URL");
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", exe.display()))?;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let base = loop {
            let line = lines
                .next()
                .ok_or_else(|| anyhow::anyhow!("server exited"))??;
            if let Some(u) = line.strip_prefix("botbox listening on ") {
                break u.to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        wait_ready(&base)?;
        Ok(BenchServer { child, base, data })
    }

    /// The server's resident memory in bytes: all of it (`VmRSS`) and its anonymous part
    /// (`RssAnon`: the heap and the guests' linear memories, not mapped files).
    pub fn rss_bytes(&self) -> anyhow::Result<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let field = |name: &str| {
            counts::status_field(&status, name)
                .map(|kb| kb * 1024)
                .ok_or_else(|| anyhow::anyhow!("no {name} in the server's status"))
        };
        Ok((field("VmRSS:")?, field("RssAnon:")?))
    }

    /// The server's CPU time so far (user + system), from its `/proc` stat.
    pub fn cpu_seconds(&self) -> anyhow::Result<f64> {
        cpu_seconds(self.child.id())
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Bytes of the SQLite database on disk: the file with its WAL (0 on PostgreSQL).
    pub fn database_file_bytes(&self) -> u64 {
        ["botbox.db", "botbox.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(self.data.path().join(f)).ok())
            .map(|m| m.len())
            .sum()
    }
}

/// Waits until `GET /ready` answers 200: the server's sandbox is up (with this fresh data
/// folder's empty cache, the guest compiles first: seconds), so no bench times it.
fn wait_ready(base: &str) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://");
    let started = std::time::Instant::now();
    loop {
        let mut answer = String::new();
        if let Ok(mut c) = std::net::TcpStream::connect(addr) {
            let _ = write!(c, "GET /ready HTTP/1.0\r\nHost: {addr}\r\n\r\n");
            let _ = c.read_to_string(&mut answer);
        }
        if answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200") {
            return Ok(());
        }
        if answer.contains("\"failed\"") {
            anyhow::bail!("the server's sandbox did not start (see its log)");
        }
        if started.elapsed() > std::time::Duration::from_secs(300) {
            anyhow::bail!("the server was not ready within 300 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The project API as the benches use it: JSON POSTs.
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

impl Api {
    /// POSTs `body`; the answer's JSON, or an error naming the path and status.
    pub async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        body: Value,
    ) -> anyhow::Result<Value> {
        let rb = self.http.post(format!("{}{path}", self.base)).json(&body);
        Self::call(path, rb, token).await
    }

    /// GETs `path`; the answer's JSON, or an error naming the path and status.
    #[allow(dead_code)] // not every bench reads back
    pub async fn get(&self, path: &str, token: Option<&str>) -> anyhow::Result<Value> {
        Self::call(path, self.http.get(format!("{}{path}", self.base)), token).await
    }

    async fn call(
        path: &str,
        mut rb: reqwest::RequestBuilder,
        token: Option<&str>,
    ) -> anyhow::Result<Value> {
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        let r = rb.send().await?;
        let status = r.status();
        let v: Value = r.json().await?;
        anyhow::ensure!(status.is_success(), "{path}: {status} {v}");
        Ok(v)
    }

    /// Logs in; the token.
    pub async fn login(&self, username: &str, password: &str) -> anyhow::Result<String> {
        let t = self
            .post(
                "/login",
                None,
                json!({"username": username, "password": password}),
            )
            .await?;
        Ok(text(&t["id"]))
    }

    #[allow(dead_code)] // not every bench deploys on a channel
    /// A project `name` of the token's owner running `bot` (deployed as 1.0.0 on an
    /// environment `name`) on a generic channel whose replies go to `url`; the webhook.
    pub async fn deploy_on_generic(
        &self,
        token: &str,
        name: &str,
        bot: Value,
        url: &str,
    ) -> anyhow::Result<String> {
        Ok(self.deploy(token, name, bot, url).await?.webhook)
    }

    /// [`Api::deploy_on_generic`], with the ids of what it made.
    pub async fn deploy(
        &self,
        token: &str,
        name: &str,
        bot: Value,
        url: &str,
    ) -> anyhow::Result<Deployed> {
        let t = Some(token);
        let pid = text(&self.post("/projects", t, json!({"name": name})).await?["id"]);
        let rev = text(
            &self
                .post(&format!("/projects/{pid}/bot/revisions"), t, bot)
                .await?["revision"],
        );
        self.post(
            &format!("/projects/{pid}/deployment/versions"),
            t,
            json!({"version": "1.0.0", "botRevision": rev}),
        )
        .await?;
        let env = text(
            &self
                .post(
                    &format!("/projects/{pid}/environments"),
                    t,
                    json!({"depId": pid, "depVersion": "1.0.0", "name": name}),
                )
                .await?["id"],
        );
        let ch = self
            .post(
                &format!("/projects/{pid}/environments/{env}/channels"),
                t,
                json!({"name": "web", "type": "generic", "url": url}),
            )
            .await?;
        Ok(Deployed {
            project: pid,
            revision: rev,
            environment: env,
            webhook: text(&ch["webhook"]),
        })
    }
}

/// What [`Api::deploy`] made.
pub struct Deployed {
    pub project: String,
    pub revision: String,
    pub environment: String,
    pub webhook: String,
}

/// A process's CPU time so far (user + system seconds), from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let ticks =
        counts::cpu_ticks(&stat).ok_or_else(|| anyhow::anyhow!("unreadable /proc/{pid}/stat"))?;
    Ok(ticks as f64 / counts::ticks_per_second())
}
