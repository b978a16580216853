//! Shared by the end-to-end tests: start the real `botbox serve` on loopback against a fresh
//! SQLite folder or a fresh PostgreSQL database, and talk to it over HTTP.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const ADMIN_PASSWORD: &str = "admin-password-for-tests";
/// One compiled sandbox guest for all test servers (`BOTBOX_CACHE`).
pub const GUEST_CACHE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/botbox-cache");
/// The PostgreSQL server of the development machine and CI (trust auth).
pub const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// `on_both_backends!(f, g)`: tests `f::sqlite`, `f::postgres`, ... that run `async fn
/// f(backend: Backend)` once on each storage backend (the caller imports `Backend`).
#[allow(unused_macros)]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $crate::common::bounded(super::$name(super::Backend::Sqlite)).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if $crate::common::postgres_skipped(module_path!()).await {
                    return;
                }
                $crate::common::bounded(super::$name(super::Backend::Postgres)).await
            }
        }
    )*};
}

/// Runs a test body for 300 s at most: a test that waits forever fails instead of hanging CI.
#[allow(dead_code)]
pub async fn bounded(f: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(std::time::Duration::from_secs(300), f)
        .await
        .is_err()
    {
        panic!("the test did not finish within 300 s");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A running server; killed (and its PostgreSQL database dropped) on drop.
pub struct Server {
    child: Child,
    pub base: String,
    pub db_url: String,
    pg_db: Option<String>,
    backend: Backend,
    extra: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Server {
    pub async fn start(backend: Backend, extra: &[&str]) -> Server {
        Self::start_logging(backend, extra, false).await
    }

    /// Like [`Server::start`], with the server's log (stderr, level `info`) kept in a file
    /// for [`Server::log`].
    pub async fn start_logged(backend: Backend, extra: &[&str]) -> Server {
        Self::start_logging(backend, extra, true).await
    }

    /// Everything the server logged so far (only for [`Server::start_logged`]).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("server.log")).unwrap_or_default()
    }

    /// Like [`Server::start`], returning as soon as the server listens, ready or not (for the
    /// test of `GET /ready` itself).
    pub async fn start_unready(backend: Backend, extra: &[&str]) -> Server {
        Self::start_with(backend, extra, false, false).await
    }

    async fn start_logging(backend: Backend, extra: &[&str], logged: bool) -> Server {
        Self::start_with(backend, extra, logged, true).await
    }

    async fn start_with(backend: Backend, extra: &[&str], logged: bool, ready: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let (db_url, pg_db) = fresh_database(backend, dir.path()).await;
        let log = logged.then(|| dir.path().join("server.log"));
        let (child, base) = spawn(
            THIS,
            dir.path(),
            backend,
            &db_url,
            extra,
            log.as_deref(),
            ready,
        )
        .await;
        Server {
            child,
            base,
            db_url,
            pg_db,
            backend,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            _dir: dir,
        }
    }

    /// A server on SQLite in an existing data folder (a restored backup, say).
    pub async fn start_on(dir: tempfile::TempDir, extra: &[&str]) -> Server {
        let db_url = botbox_store::sqlite_url(dir.path());
        let (child, base) = spawn(
            THIS,
            dir.path(),
            Backend::Sqlite,
            &db_url,
            extra,
            None,
            true,
        )
        .await;
        Server {
            child,
            base,
            db_url,
            pg_db: None,
            backend: Backend::Sqlite,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            _dir: dir,
        }
    }

    /// A server on the PostgreSQL database at `url` (which the test owns: nothing is dropped).
    pub async fn start_on_url(url: &str, extra: &[&str]) -> Server {
        Self::binary_on_url(THIS, url, extra).await
    }

    /// Another release's botbox (`bin`) on the PostgreSQL database at `url`, with a guest
    /// cache of its own beside the binary.
    pub async fn start_binary(bin: &Path, url: &str, extra: &[&str]) -> Server {
        let cache = bin.with_file_name("cache");
        let bin = (bin.to_str().unwrap(), cache.to_str().unwrap());
        Self::binary_on_url(bin, url, extra).await
    }

    async fn binary_on_url(bin: (&str, &str), url: &str, extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let pg = Backend::Postgres;
        let (child, base) = spawn(bin, dir.path(), pg, url, extra, None, true).await;
        Server {
            child,
            base,
            db_url: url.to_owned(),
            pg_db: None,
            backend: pg,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            _dir: dir,
        }
    }

    /// `n` servers started at the same moment on one new, empty PostgreSQL database (each
    /// with a data folder of its own), each returned once ready; the first drops the
    /// database when dropped.
    pub async fn start_together(n: usize, extra: &[&str]) -> Vec<Server> {
        let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let (db_url, pg_db) = fresh_database(Backend::Postgres, dirs[0].path()).await;
        let started = futures::future::join_all(dirs.iter().map(|dir| {
            spawn(
                THIS,
                dir.path(),
                Backend::Postgres,
                &db_url,
                extra,
                None,
                true,
            )
        }))
        .await;
        let mut pg_db = pg_db;
        started
            .into_iter()
            .zip(dirs)
            .map(|((child, base), dir)| Server {
                child,
                base,
                db_url: db_url.clone(),
                pg_db: pg_db.take(),
                backend: Backend::Postgres,
                extra: extra.iter().map(|s| s.to_string()).collect(),
                _dir: dir,
            })
            .collect()
    }

    /// Another server process on the same PostgreSQL database: a second replica. It does
    /// not own the database (the first server drops it).
    pub async fn replica(&self) -> Server {
        assert_eq!(
            self.backend,
            Backend::Postgres,
            "replicas share a PostgreSQL database"
        );
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        Self::binary_on_url(THIS, &self.db_url, &extra).await
    }

    /// Stops the server (as a crash would: SIGKILL) and starts it again on the same storage.
    pub async fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let (child, base) = spawn(
            THIS,
            self._dir.path(),
            self.backend,
            &self.db_url,
            &extra,
            None,
            true,
        )
        .await;
        self.child = child;
        self.base = base;
    }

    /// The server process's id (to read its memory use).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`libc::SIGTERM`, …) to the server process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// Waits (at most `within`) for the server process to exit; its exit status.
    pub async fn exited(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server did not exit within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The server's data folder (its SQLite database when not on PostgreSQL).
    pub fn data_dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    pub fn api(&self) -> Api {
        Api {
            http: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(60))
                .build()
                .unwrap(),
            base: self.base.clone(),
            router: None,
        }
    }

    /// The server's database, opened from the test (for what the API cannot do, such as
    /// making an already expired token).
    pub async fn db(&self) -> botbox_store::Db {
        botbox_store::Db::connect(&self.db_url).await.unwrap()
    }
}

/// The server in-process: the API's router over real storage (a fresh SQLite folder or
/// PostgreSQL database), every service wired as `botbox serve` wires it
/// (`botbox::server::build`), with no socket and no process. For what a test sees through
/// the API alone (permissions, validation, shapes, limits); what needs a real socket, a
/// process or a signal (replies delivered to stand-in providers, streams read as they come,
/// crashes, drains, replicas, the CLI, readiness, logs) uses [`Server`].
pub struct InProcess {
    router: axum::Router,
    /// The public URL the server believes it has (webhook URLs start with it).
    pub base: String,
    db: botbox_store::Db,
    /// The server's drain state (to start a drain without a signal).
    pub drain: botbox_service::drain::Drain,
    /// The server's live conversations (for work its background tasks do on a timer, run
    /// at once by a test: counting canaries, say).
    pub live: std::sync::Arc<botbox_service::live::Live>,
    pg_db: Option<String>,
    _dir: tempfile::TempDir,
}

impl InProcess {
    pub async fn start(backend: Backend) -> InProcess {
        Self::start_with(backend, botbox_api::ApiConfig::default()).await
    }

    /// [`InProcess::start`] with the API's settings `api` (a higher rate limit, say).
    pub async fn start_with(backend: Backend, api: botbox_api::ApiConfig) -> InProcess {
        Self::start_configured(backend, |cfg| cfg.api = api).await
    }

    /// [`InProcess::start`] with the server's configuration changed by `configure`: what a
    /// flag of `botbox serve` sets (`--storage-quota-mb` is `cfg.live.storage_quota_bytes`,
    /// say; `main.rs`'s `serve_config` maps each flag).
    pub async fn start_configured(
        backend: Backend,
        configure: impl FnOnce(&mut botbox::server::ServeConfig),
    ) -> InProcess {
        let server = Self::build(backend, configure).await;
        botbox::server::bootstrap_admin(&server.db, Some(ADMIN_PASSWORD))
            .await
            .unwrap();
        server
    }

    /// [`InProcess::start`] without the first admin: the database as a first start finds it.
    pub async fn start_empty(backend: Backend) -> InProcess {
        Self::build(backend, |_| {}).await
    }

    async fn build(
        backend: Backend,
        configure: impl FnOnce(&mut botbox::server::ServeConfig),
    ) -> InProcess {
        let dir = tempfile::tempdir().unwrap();
        let (db_url, pg_db) = fresh_database(backend, dir.path()).await;
        let db = botbox_store::Db::connect(&db_url).await.unwrap();
        let mut live = botbox_service::live::LiveConfig::default();
        live.sandbox.cache_dir = GUEST_CACHE.into();
        let mut cfg = botbox::server::ServeConfig {
            addr: ([127, 0, 0, 1], 0).into(),
            data_dir: dir.path().to_owned(),
            database_url: Some(db_url),
            admin_password: Some(ADMIN_PASSWORD.into()),
            public_url: Some("http://botbox.test".into()),
            api: botbox_api::ApiConfig::default(),
            tasks: Default::default(),
            callbacks: Default::default(),
            live,
            secret_key: None,
            shutdown_timeout: Duration::from_secs(30),
            metrics_addr: None,
            trusted_proxies: vec![],
        };
        configure(&mut cfg);
        let app = botbox::server::build(&cfg, db.clone(), cfg.addr)
            .await
            .unwrap();
        InProcess {
            drain: app.live.drain.clone(),
            live: app.live.clone(),
            router: botbox_api::router(app),
            base: cfg.public_url.clone().unwrap(),
            db,
            pg_db,
            _dir: dir,
        }
    }

    /// A client of the router, the same as [`Server::api`]'s over HTTP.
    pub fn api(&self) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: self.base.clone(),
            router: Some(self.router.clone()),
        }
    }

    /// The server's database (for what the API cannot do, such as making an already
    /// expired token).
    pub async fn db(&self) -> botbox_store::Db {
        self.db.clone()
    }
}

/// A fresh database alone, migrated, with no server and no workers (for storage functions
/// that a server's own background work would race with); dropped with it.
pub struct BareDb {
    pub db: botbox_store::Db,
    pg_db: Option<String>,
    _dir: tempfile::TempDir,
}

impl BareDb {
    pub async fn new(backend: Backend) -> BareDb {
        let dir = tempfile::tempdir().unwrap();
        let (url, pg_db) = fresh_database(backend, dir.path()).await;
        BareDb {
            db: botbox_store::Db::connect(&url).await.unwrap(),
            pg_db,
            _dir: dir,
        }
    }
}

impl Drop for BareDb {
    fn drop(&mut self) {
        if let Some(name) = self.pg_db.take() {
            drop_database(name);
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(name) = self.pg_db.take() {
            drop_database(name);
        }
    }
}

/// What a test talks to: the real process ([`Server`]) or the server in-process
/// ([`InProcess`]), each with the same client.
pub trait Serves {
    fn api(&self) -> Api;
}

impl Serves for Server {
    fn api(&self) -> Api {
        Server::api(self)
    }
}

impl Serves for InProcess {
    fn api(&self) -> Api {
        InProcess::api(self)
    }
}

/// A server with one bot deployed by the admin, where most agent-API and Cases tests start.
/// Tests' own fixtures wrap it (and reach its fields through `Deref`).
pub struct Deployed<S = Server> {
    pub server: S,
    pub api: Api,
    pub admin: String,
    pub pid: String,
    pub env: String,
}

impl<S: Serves> Deployed<S> {
    pub async fn start(server: S, bot: Value) -> Deployed<S> {
        let api = server.api();
        let admin = api.admin_token().await;
        let (pid, env) = deploy(&api, &admin, bot).await;
        Deployed {
            server,
            api,
            admin,
            pid,
            env,
        }
    }

    /// A new agent key (`sak_…`) of the bot's environment, named `name`.
    pub async fn agent_key(&self, name: &str) -> String {
        let (pid, env) = (&self.pid, &self.env);
        let k = self
            .api
            .post(
                &format!("/projects/{pid}/environments/{env}/keys"),
                &self.admin,
                json!({ "name": name }),
            )
            .await
            .ok();
        s(&k["key"])
    }

    /// A new workspace key of the admin's own workspace, named `name`.
    pub async fn workspace_key(&self, name: &str) -> String {
        let me = self.api.get("/me", &self.admin).await.ok();
        let k = self
            .api
            .post(
                &format!("/teams/{}/keys", s(&me["userId"])),
                &self.admin,
                json!({ "name": name }),
            )
            .await
            .ok();
        s(&k["key"])
    }
}

/// Polls `probe` until it answers `Ok`, 30 s at most, then fails the test with what it last
/// answered (`Err`: the state so far, for the message). For state that nothing announces,
/// such as rows in storage or an endpoint's status: a deadline, never a sleep that stands
/// for "long enough".
pub async fn poll_until<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(state) => assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}: {state}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A deployed bot, the key its test calls with, and the test's own stand-ins (`E`). The
/// deployment's fields are reached through `Deref`.
pub struct Keyed<E = (), S = Server> {
    pub deployed: Deployed<S>,
    pub key: String,
    pub stubs: E,
}

impl<E, S> std::ops::Deref for Keyed<E, S> {
    type Target = Deployed<S>;
    fn deref(&self) -> &Deployed<S> {
        &self.deployed
    }
}

impl<E, S> std::ops::DerefMut for Keyed<E, S> {
    fn deref_mut(&mut self) -> &mut Deployed<S> {
        &mut self.deployed
    }
}

/// Serves `app` on a new loopback port for as long as the test runs; returns its base URL
/// (`http://127.0.0.1:<port>`). The stand-ins for providers, customers' endpoints and
/// api-action servers.
pub async fn serve_stub(app: axum::Router) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    base
}

/// How long a server may take to start listening and be ready (the first start of a cold cache
/// compiles the sandbox guest: a minute or more of both cores in a loaded debug build).
const START_TIMEOUT_S: u64 = 240;

/// This build's botbox and its guest cache, for [`spawn`].
const THIS: (&str, &str) = (env!("CARGO_BIN_EXE_botbox"), GUEST_CACHE);

/// Starts the botbox binary `bin.0` (its guest cache in `bin.1`; [`THIS`] for this build's)
/// as a server on `db_url`.
async fn spawn(
    bin: (&str, &str),
    dir: &std::path::Path,
    backend: Backend,
    db_url: &str,
    extra: &[&str],
    log: Option<&std::path::Path>,
    ready: bool,
) -> (Child, String) {
    let mut cmd = Command::new(bin.0);
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--data"])
        .arg(dir)
        .args(extra)
        .env("BOTBOX_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .env("BOTBOX_LOG", if log.is_some() { "info" } else { "warn" })
        .env("BOTBOX_CACHE", bin.1)
        .env_remove("BOTBOX_RATE_LIMIT")
        .stdout(Stdio::piped())
        .stderr(match log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::inherit(),
        });
    match backend {
        Backend::Sqlite => cmd.env_remove("DATABASE_URL"),
        Backend::Postgres => cmd.env("DATABASE_URL", db_url),
    };
    let mut child = cmd.spawn().expect("starting botbox serve");
    let stdout = child.stdout.take().unwrap();
    // A plain thread, not `spawn_blocking`: a runtime that shuts down (a failed test) never
    // waits for it, and the wait below is bounded so a server that never listens fails the test.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if let Some(url) = line.strip_prefix("botbox listening on ") {
                let _ = tx.send(Some(url.to_owned()));
                // Keep draining stdout so the server never blocks on a full pipe.
                for _ in lines {}
                return;
            }
        }
        let _ = tx.send(None);
    });
    let started = tokio::time::timeout(Duration::from_secs(START_TIMEOUT_S), async {
        let Some(base) = rx.await.ok().flatten() else {
            return Err("botbox serve exited before listening".to_owned());
        };
        if ready {
            wait_ready(&base, &mut child).await?;
        }
        Ok(base)
    })
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "botbox serve was not listening and ready within {START_TIMEOUT_S} s"
        ))
    });
    match started {
        Ok(base) => (child, base),
        Err(why) => {
            // Never leave a server behind a failed start (it would hold the test's output).
            let _ = child.kill();
            let _ = child.wait();
            panic!("{why}");
        }
    }
}

/// Waits until the server answers `GET /ready` with 200: its sandbox is loaded (or, with a cold
/// cache, compiled), so no test times a guest compilation as if it were a step (a cold
/// cache would otherwise compile the guest inside, say, a test's 30-second wait for a bot's
/// api call).
async fn wait_ready(base: &str, child: &mut Child) -> Result<(), String> {
    let http = reqwest::Client::new();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "botbox serve exited ({status}) before it was ready"
            ));
        }
        if let Ok(r) = http.get(format!("{base}/ready")).send().await {
            match r.status().as_u16() {
                200 => return Ok(()),
                503 => {
                    let body: Value = r.json().await.unwrap_or_default();
                    if body["status"] == "failed" {
                        return Err("the server's sandbox did not start".into());
                    }
                }
                other => return Err(format!("GET /ready answered {other}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether the PostgreSQL half of `test` is skipped: PostgreSQL at 127.0.0.1:5432 does not
/// answer and `BOTBOX_REQUIRE_POSTGRES` is not set (a developer's machine without it). Prints
/// a notice naming the test. `.ci/run` sets the variable, so that there an unreachable
/// PostgreSQL fails the test instead.
pub async fn postgres_skipped(test: &str) -> bool {
    static REACHABLE: tokio::sync::OnceCell<bool> = tokio::sync::OnceCell::const_new();
    let reachable = *REACHABLE
        .get_or_init(|| async {
            tokio::time::timeout(
                Duration::from_secs(5),
                tokio::net::TcpStream::connect("127.0.0.1:5432"),
            )
            .await
            .is_ok_and(|c| c.is_ok())
        })
        .await;
    if reachable || std::env::var_os("BOTBOX_REQUIRE_POSTGRES").is_some_and(|v| v != "0") {
        return false;
    }
    eprintln!(
        "notice: PostgreSQL at 127.0.0.1:5432 does not answer: skipping {test} \
         (set BOTBOX_REQUIRE_POSTGRES=1 to make it fail instead)"
    );
    true
}

/// A new, empty database of `backend`: SQLite in `dir`, or a PostgreSQL database of its own,
/// copied from the migrated template (its name is returned: [`drop_database`] removes it).
async fn fresh_database(backend: Backend, dir: &std::path::Path) -> (String, Option<String>) {
    match backend {
        Backend::Sqlite => (botbox_store::sqlite_url(dir), None),
        Backend::Postgres => {
            let name = format!("botbox_test_{}", botbox_store::new_id());
            let template = pg_template();
            let admin = pg_admin().await;
            sqlx::query(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
                .execute(&admin)
                .await
                .expect("creating a test database on 127.0.0.1:5432 (is PostgreSQL running?)");
            (
                format!("postgres://postgres@127.0.0.1:5432/{name}"),
                Some(name),
            )
        }
    }
}

/// A PostgreSQL database with every migration applied, named after the migrations (a
/// migration added or changed makes a new one), made once per run when it is missing: each
/// test's database is a copy, so no test pays for migrating its own.
fn pg_template() -> &'static str {
    static TEMPLATE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for m in botbox_store::MIGRATOR.iter() {
            (m.version, &m.checksum[..]).hash(&mut h);
        }
        let name = format!("botbox_tpl_{:016x}", h.finish());
        let made = name.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(make_template(&made));
        })
        .join()
        .expect("making the migrated PostgreSQL template");
        name
    })
}

/// Makes template `name` unless it exists: migrated under another name, then renamed, so a
/// template that exists is complete (another run making it at the same time loses nothing).
async fn make_template(name: &str) {
    let admin = pg_admin().await;
    let exists: Option<i32> = sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(name)
        .fetch_optional(&admin)
        .await
        .unwrap();
    if exists.is_some() {
        return;
    }
    let building = format!("{name}_{}", botbox_store::new_id());
    sqlx::query(&format!("CREATE DATABASE {building}"))
        .execute(&admin)
        .await
        .expect("creating a test database on 127.0.0.1:5432 (is PostgreSQL running?)");
    let db = botbox_store::Db::connect(&format!("postgres://postgres@127.0.0.1:5432/{building}"))
        .await
        .expect("migrating the template database");
    db.pool.close().await;
    drop(db);
    let _ =
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
            .bind(&building)
            .execute(&admin)
            .await;
    let renamed = sqlx::query(&format!("ALTER DATABASE {building} RENAME TO {name}"))
        .execute(&admin)
        .await;
    if renamed.is_err() {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
            .execute(&admin)
            .await;
    }
}

/// Drops a database made by [`fresh_database`], from a thread with a runtime of its own:
/// a drop may run inside or outside the test's runtime.
fn drop_database(name: String) {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let admin = pg_admin().await;
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&admin)
                .await;
        });
    })
    .join()
    .ok();
}

async fn pg_admin() -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .connect(PG_ADMIN_URL)
        .await
        .expect("connecting to PostgreSQL at 127.0.0.1:5432 (database test, user postgres)")
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(name) = self.pg_db.take() {
            drop_database(name);
        }
    }
}

/// A response: status, headers and body text.
#[derive(Debug)]
pub struct Res {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Res {
    /// Reads a response whole.
    pub async fn read(r: reqwest::Response) -> Res {
        Res {
            status: r.status().as_u16(),
            headers: r.headers().clone(),
            text: r.text().await.unwrap(),
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// Asserts the status and returns the JSON body.
    #[track_caller]
    pub fn ok(&self) -> Value {
        assert_eq!(self.status, 200, "body: {}", self.text);
        self.json()
    }
}

#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    /// Set for an [`InProcess`] server: requests go to its router instead of a socket.
    router: Option<axum::Router>,
}

impl Api {
    /// A client of a server at `base` over HTTP with `http`.
    pub fn over_http(http: reqwest::Client, base: String) -> Api {
        Api {
            http,
            base,
            router: None,
        }
    }

    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Res {
        if self.router.is_some() {
            let bytes = body.map(|b| serde_json::to_vec(b).unwrap());
            return self.in_process(method, path, token, bytes).await;
        }
        let mut rb = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", self.base),
        );
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        if let Some(b) = body {
            rb = rb
                .header("content-type", "application/json")
                .body(serde_json::to_vec(b).unwrap());
        }
        Res::read(rb.send().await.expect("request failed")).await
    }

    pub async fn raw(&self, method: &str, path: &str, token: Option<&str>, body: Vec<u8>) -> Res {
        if self.router.is_some() {
            return self.in_process(method, path, token, Some(body)).await;
        }
        let mut rb = self.http.request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", self.base),
        );
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        Res::read(
            rb.header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// Sends a request built on [`Api::http`] (its own headers, a multipart form, a
    /// webhook URL): to the in-process router when it is addressed to this server's base
    /// URL, else over HTTP. Reads the answer whole.
    pub async fn send(&self, rb: reqwest::RequestBuilder) -> Res {
        let req = rb.build().unwrap();
        if self.router.is_none() || !req.url().as_str().starts_with(&self.base) {
            return Res::read(self.http.execute(req).await.expect("request failed")).await;
        }
        let path = match req.url().query() {
            Some(q) => format!("{}?{q}", req.url().path()),
            None => req.url().path().to_owned(),
        };
        let mut req = axum::http::Request::try_from(req)
            .unwrap()
            .map(axum::body::Body::new);
        *req.uri_mut() = path.parse().unwrap();
        self.route(req).await
    }

    /// A request through the in-process router, as the accept loop hands it over (the
    /// trailing slash trimmed, the peer's address attached).
    async fn in_process(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Res {
        let mut rb = axum::http::Request::builder().method(method).uri(path);
        if let Some(t) = token {
            rb = rb.header("authorization", format!("Bearer {t}"));
        }
        if body.is_some() {
            rb = rb.header("content-type", "application/json");
        }
        let req = rb
            .body(axum::body::Body::from(body.unwrap_or_default()))
            .unwrap();
        self.route(req).await
    }

    async fn route(&self, mut req: axum::http::Request<axum::body::Body>) -> Res {
        use tower::ServiceExt as _;
        let router = self.router.clone().expect("an in-process client");
        let peer: std::net::SocketAddr = ([127, 0, 0, 1], 40000).into();
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let res = router
            .oneshot(botbox_api::trim_trailing_slash(req))
            .await
            .unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        Res {
            status,
            headers,
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    pub async fn get(&self, path: &str, token: &str) -> Res {
        self.call("GET", path, Some(token), None).await
    }
    pub async fn post(&self, path: &str, token: &str, body: Value) -> Res {
        self.call("POST", path, Some(token), Some(&body)).await
    }
    pub async fn put(&self, path: &str, token: &str, body: Value) -> Res {
        self.call("PUT", path, Some(token), Some(&body)).await
    }
    pub async fn delete(&self, path: &str, token: &str) -> Res {
        self.call("DELETE", path, Some(token), None).await
    }

    /// Logs in; returns the Token.
    pub async fn login(&self, username: &str, password: &str) -> Value {
        self.call(
            "POST",
            "/login",
            None,
            Some(&serde_json::json!({"username": username, "password": password})),
        )
        .await
        .ok()
    }

    pub async fn admin_token(&self) -> String {
        self.login("admin", ADMIN_PASSWORD).await["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Adds a user through the admin and logs them in; returns (user id, token).
    pub async fn user(&self, admin: &str, name: &str, role: &str) -> (String, String) {
        let u = self
            .post(
                "/users",
                admin,
                serde_json::json!({"username": name, "password": format!("{name}-password"), "roleId": role}),
            )
            .await
            .ok();
        let t = self.login(name, &format!("{name}-password")).await;
        (
            u["id"].as_str().unwrap().to_owned(),
            t["id"].as_str().unwrap().to_owned(),
        )
    }

    /// A team token for `team_id`.
    pub async fn team_token(&self, token: &str, team_id: &str) -> String {
        self.post(
            "/tokens",
            token,
            serde_json::json!({"type": "team", "teamId": team_id}),
        )
        .await
        .ok()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// An example bot of `examples/` as a JSON document.
pub fn example_bot(name: &str) -> Value {
    let path = format!(
        "{}/../../examples/{name}/bot.yml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    serde_json::to_value(yaml).unwrap()
}

// ---------------------------------------------------------------------------------------
// Live conversations: provider stand-ins and set-up shared by the live and hostile suites.

pub fn s(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}

/// A stand-in provider API: records every request and answers 200.
#[derive(Clone, Default)]
pub struct Receiver {
    pub seen: Arc<Mutex<Vec<(String, axum::http::HeaderMap, Value)>>>,
    pub notify: Arc<tokio::sync::Notify>,
}

impl Receiver {
    pub async fn start() -> (Receiver, String) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let r = Receiver::default();
        r.serve(l);
        (r, format!("http://{addr}"))
    }

    pub fn serve(&self, l: tokio::net::TcpListener) {
        let me = self.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let me = me.clone();
                async move {
                    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    me.seen.lock().unwrap().push((uri.to_string(), headers, v));
                    me.notify.notify_waiters();
                    axum::Json(json!({"ok": true}))
                }
            },
        );
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    }

    /// Waits (at most 30 s) until `n` requests arrived; returns them.
    pub async fn wait_for(&self, n: usize) -> Vec<(String, axum::http::HeaderMap, Value)> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            // Registered before the check, so a request arriving in between still wakes us.
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let seen = self.seen.lock().unwrap();
                if seen.len() >= n {
                    return seen.clone();
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let seen = self.seen.lock().unwrap();
                panic!(
                    "expected {n} deliveries, got {}: {:?}",
                    seen.len(),
                    seen.iter().map(|s| &s.2).collect::<Vec<_>>()
                );
            }
        }
    }
}

/// A bot whose every message ends in `state` (`s`), reached from the initial state by a
/// fallback transition.
pub fn one_state_bot(mut state: Value) -> Value {
    state.as_object_mut().unwrap().remove("initial");
    json!({
        "name": "b",
        "flows": {"main": {
            "fallback": true,
            "intents": {"any": {"fallback": true}},
            "states": {
                "start": {"initial": true, "transitions": {"s": {"fallback": true}}},
                "s": state
            }
        }}
    })
}

/// A generic channel named `g` of environment `env` whose replies go to `url`; its id.
pub async fn generic_channel(api: &Api, token: &str, pid: &str, env: &str, url: &str) -> String {
    s(&channel(api, token, pid, env, generic_body("g", url)).await["id"])
}

/// The body of a generic channel named `name` whose replies go to `url`.
pub fn generic_body(name: &str, url: &str) -> Value {
    json!({"name": name, "type": "generic", "url": url})
}

/// A project with `bot` deployed as 1.0.0 on environment "production".
pub async fn deploy(api: &Api, token: &str, bot: Value) -> (String, String) {
    let pid = s(&api
        .post(
            "/projects",
            token,
            json!({"name": format!("live-{}", &botbox_store::new_id()[..8])}),
        )
        .await
        .ok()["id"]);
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), token, bot)
        .await
        .ok()["revision"]);
    api.post(
        &format!("/projects/{pid}/deployment/versions"),
        token,
        json!({"version": "1.0.0", "botRevision": rev}),
    )
    .await
    .ok();
    let env = api
        .post(
            &format!("/projects/{pid}/environments"),
            token,
            json!({"depId": pid, "depVersion": "1.0.0", "name": "production"}),
        )
        .await
        .ok();
    (pid, s(&env["id"]))
}

pub async fn channel(api: &Api, token: &str, pid: &str, env: &str, body: Value) -> Value {
    api.post(
        &format!("/projects/{pid}/environments/{env}/channels"),
        token,
        body,
    )
    .await
    .ok()
}

/// POSTs `body` to a webhook's URL with extra headers (through [`Api::send`]: in-process
/// for an [`InProcess`] server's webhooks).
pub async fn hook(api: &Api, url: &str, headers: &[(&str, String)], body: &Value) -> Res {
    let mut rb = api
        .http
        .post(url)
        .header("content-type", "application/json");
    for (k, v) in headers {
        rb = rb.header(*k, v);
    }
    api.send(rb.body(body.to_string())).await
}

pub fn texts(delivery: &Value) -> Vec<String> {
    delivery["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m["type"].as_str() {
            Some("text") => s(&m["content"]),
            _ => format!(
                "[{}]",
                m["payload"]["template_type"].as_str().unwrap_or("data")
            ),
        })
        .collect()
}

/// Posts `body` to a generic channel's webhook (in-process or on the real server) and
/// checks it is answered 200.
pub async fn post_webhook(api: &Api, channel: &str, body: &Value) {
    let r = api
        .raw(
            "POST",
            &format!("/webhooks/{channel}"),
            None,
            body.to_string().into_bytes(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// A one-flow bot that, for any text, runs the method `method` (whose code is `code`), then
/// an api GET of `uri`, then says `text`: the smallest bot with a method call and an api
/// call for the tests of a step's calls and errors.
pub fn method_and_api_bot(name: &str, method: &str, code: &str, uri: &str, text: &str) -> Value {
    json!({
        "name": name,
        "methods": {format!("{method}(message, context, data, options, config, result)"): code},
        "flows": {"main": {
            "intents": {"any": {"initial": true, "type": "text"}},
            "states": {
                "init": {"initial": true, "transitions": {"answer": "intent == 'any'"}},
                "answer": {"end": true, "action": [
                    {"name": "method", "method": method},
                    {"name": "api", "options": {"method": "GET", "uri": uri}},
                    {"name": "text", "options": {"text": text}}
                ]}
            }
        }}
    })
}

/// Says `text` to project `pid`'s bot through the converse endpoint; the answer's body
/// (checked 2xx).
pub async fn converse_text(api: &Api, token: &str, pid: &str, text: &str) -> Value {
    api.post(
        &format!("/projects/{pid}/bot/converse"),
        token,
        json!({"message": {"type": "text", "content": text}}),
    )
    .await
    .ok()
}

/// The body of a Webex ("spark") channel named `webex` whose Webex API stands at `url`,
/// with bot token `bot_token`.
pub fn webex_body(url: &str, bot_token: &str) -> Value {
    json!({"name": "webex", "type": "spark", "url": url,
        "options": {"token": bot_token, "botId": "BOT"}})
}

/// Webex's notice that message `id` was created in room R1.
pub fn webex_created(id: &str) -> Value {
    json!({"resource": "messages", "event": "created",
    "data": {"id": id, "roomId": "R1", "personId": "P1", "personEmail": "p@x"}})
}

/// The body of a LINE channel named `line` whose push messages go to `{url}/line`.
pub fn line_body(url: &str, secret: &str, line_token: &str) -> Value {
    json!({"name": "line", "type": "line", "url": format!("{url}/line"),
        "options": {"secret": secret, "token": line_token}})
}

/// `token` gives user `uid` the role `role` in team `tid`.
pub async fn set_role(api: &Api, tid: &str, uid: &str, token: &str, role: &str) -> Res {
    api.post(
        &format!("/teams/{tid}/users/{uid}"),
        token,
        json!({"role": role}),
    )
    .await
}

/// A login with `username` and `password`, answered whatever it is.
pub async fn login_attempt(api: &Api, username: &str, password: &str) -> Res {
    api.call(
        "POST",
        "/login",
        None,
        Some(&json!({"username": username, "password": password})),
    )
    .await
}

/// Fails, showing `text`, unless `text` contains `part`.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{}", text);
}

/// Providers under load: `messages` messages (`msg <k>`, id `m<k>`, from user
/// `u<k % users>`) sent by four tasks, each user's in order, each message retried through
/// the servers of `bases` in turn (a server added meanwhile joins the turn) until it gets a
/// 2xx, as providers retry.
pub struct ProviderLoad {
    pub acked: Arc<std::sync::atomic::AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    messages: usize,
    users: usize,
}

impl ProviderLoad {
    const SENDERS: usize = 4;

    pub fn start(
        bases: Arc<std::sync::RwLock<Vec<String>>>,
        channel: &str,
        messages: usize,
        users: usize,
    ) -> ProviderLoad {
        // A user's messages all come from one sender, so they are sent in order.
        assert_eq!(users % Self::SENDERS, 0);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let acked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let tasks = (0..Self::SENDERS)
            .map(|sender| {
                let (acked, bases, http) = (acked.clone(), bases.clone(), http.clone());
                let channel = channel.to_owned();
                tokio::spawn(async move {
                    for k in (sender..messages).step_by(Self::SENDERS) {
                        let body = json!({"userId": format!("u{}", k % users), "messages": [
                            {"id": format!("m{k}"), "type": "text", "content": format!("msg {k}")}
                        ]});
                        for attempt in 0.. {
                            let base = {
                                let b = bases.read().unwrap();
                                b[(k + attempt) % b.len()].clone()
                            };
                            let url = format!("{base}/webhooks/{channel}");
                            let r = http.post(url).json(&body).send().await;
                            if r.is_ok_and(|r| r.status().is_success()) {
                                acked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                })
            })
            .collect();
        ProviderLoad {
            acked,
            tasks,
            messages,
            users,
        }
    }

    /// Messages acknowledged so far.
    pub fn acked(&self) -> usize {
        self.acked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until `n` messages were acknowledged.
    pub async fn until_acked(&self, n: usize) {
        while self.acked() < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits for every message to be acknowledged (two minutes at most).
    pub async fn finish(&mut self) {
        for t in self.tasks.drain(..) {
            tokio::time::timeout(Duration::from_secs(120), t)
                .await
                .expect("the senders finish")
                .unwrap();
        }
    }

    /// After [`ProviderLoad::finish`]: every reply sent, every message stored exactly once,
    /// each user's in the order sent, and each answered (`echo msg <k>` reached `rx`).
    pub async fn check(&self, db: &botbox_store::Db, pid: &str, channel: &str, rx: &Receiver) {
        poll_until("every reply sent", || async {
            let rows = db.outbox_rows(channel).await.unwrap();
            let waiting = rows.iter().filter(|r| r.status != "sent").count();
            if waiting == 0 {
                Ok(())
            } else {
                Err(format!("{waiting} outbox rows not sent"))
            }
        })
        .await;
        let lines = db
            .list_transcripts(pid, "production", 0, i64::MAX)
            .await
            .unwrap();
        let mut by_user: std::collections::HashMap<usize, Vec<usize>> = Default::default();
        for l in lines.iter().filter(|l| l.direction == "in") {
            let m: Value = serde_json::from_str(&l.message).unwrap();
            let k: usize = s(&m["content"]).trim_start_matches("msg ").parse().unwrap();
            by_user.entry(k % self.users).or_default().push(k);
        }
        let stored: usize = by_user.values().map(Vec::len).sum();
        assert_eq!(
            stored, self.messages,
            "each message stored once: {by_user:?}"
        );
        for (user, ks) in &by_user {
            assert!(
                ks.windows(2).all(|w| w[0] < w[1]),
                "u{user}'s messages out of order: {ks:?}"
            );
        }
        let delivered: std::collections::HashSet<String> = rx
            .seen
            .lock()
            .unwrap()
            .iter()
            .flat_map(|(_, _, body)| texts(body))
            .collect();
        let unanswered: Vec<usize> = (0..self.messages)
            .filter(|k| !delivered.contains(&format!("echo msg {k}")))
            .collect();
        assert!(unanswered.is_empty(), "never answered: {unanswered:?}");
    }
}
