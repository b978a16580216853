//! `botbox serve`: storage, the first admin account, the wiring of every service ([`build`]),
//! and the HTTP listener.

use anyhow::{Context, Result};
use botbox_api::{self as api, ApiConfig, App, Services};
use botbox_service::agent::Agents;
use botbox_service::auth;
use botbox_service::cases::webhooks::{CallbackConfig, Callbacks};
use botbox_service::cases::worker::{TaskConfig, Tasks};
use botbox_service::live::{Live, LiveConfig};
use botbox_store::{self as db, Db};
use std::net::SocketAddr;
use std::path::PathBuf;
use tower::ServiceExt as _;

/// Everything `botbox serve` needs, in one typed place.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    /// Folder of the embedded SQLite database (and later caches). Created when missing.
    pub data_dir: PathBuf,
    /// `postgres://…` to use PostgreSQL; `None` for SQLite in `data_dir`.
    pub database_url: Option<String>,
    /// The first admin's password; generated and printed once when `None`.
    pub admin_password: Option<String>,
    /// Overrides `http://<addr>` as the base of webhook URLs.
    pub public_url: Option<String>,
    pub api: ApiConfig,
    /// Cases and tasks: the worker's leases and slots.
    pub tasks: TaskConfig,
    /// Callback sending: retry schedule and time-out.
    pub callbacks: CallbackConfig,
    /// Live conversations: sandbox limits and cache folder, outbox retries.
    pub live: LiveConfig,
    /// The server key (`--secret-key`); `secret.key` in the data folder when `None`.
    pub secret_key: Option<String>,
    /// How long a drain (SIGTERM, SIGINT) may take before the process exits anyway.
    pub shutdown_timeout: std::time::Duration,
    /// Where `GET /metrics` listens on its own (then not on the main address).
    pub metrics_addr: Option<SocketAddr>,
    /// Reverse proxies (`--trusted-proxy`) whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// Installs the process's Prometheus recorder: histograms of seconds, fuel and group sizes
/// get fixed buckets (one series per bucket; without them the exporter would render
/// summaries, which cannot be aggregated across replicas). Call once, before serving.
pub fn install_metrics() -> Result<metrics_exporter_prometheus::PrometheusHandle> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    const SECONDS: &[f64] = &[
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
        60.0,
    ];
    const FUEL: &[f64] = &[1e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7, 1e8, 1e9];
    const GROUP: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
    Ok(PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)?
        .set_buckets_for_metric(Matcher::Full("botbox_step_fuel".into()), FUEL)?
        .set_buckets_for_metric(Matcher::Full("botbox_commit_steps".into()), GROUP)?
        .install_recorder()?)
}

/// Makes glibc's allocator give blocks of 128 KiB and more back to the OS when they are freed
/// (`mallopt(M_MMAP_THRESHOLD)`; a fixed threshold also turns off glibc's raising of it).
///
/// By default glibc raises the threshold to the largest block freed so far (up to 32 MiB),
/// after which such blocks are carved from the per-thread arenas and kept there: 96
/// concurrent logins (argon2: 19 MiB each) leave 236 MB resident, and 0.9 MB sessions do
/// the same. Blocks this large are rare on the message path (sessions and replies are a few
/// KB), so the extra mmap/munmap costs nothing measurable there (load-bench, docs/performance.md).
pub fn return_big_blocks_to_the_os() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before any other thread.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Opens the database named by the config (SQLite in the data folder by default).
pub async fn open_db(data_dir: &std::path::Path, database_url: Option<&str>) -> Result<Db> {
    let url = match database_url {
        Some(u) => u.to_owned(),
        None => {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("creating the data folder {}", data_dir.display()))?;
            db::sqlite_url(data_dir)
        }
    };
    Db::connect(&url).await
}

/// The first start's administrator, when this call created it: the password it generated
/// (`None`: the one given was used).
pub struct FirstAdmin {
    pub generated: Option<String>,
}

/// Creates the `admin` account on first start. Safe when several processes start together
/// on an empty database: one creates the account, the others find it made.
pub async fn bootstrap_admin(db: &Db, password: Option<&str>) -> Result<Option<FirstAdmin>> {
    if let Some(p) = password {
        // The same rule as every account's: a configuration error stops the start, even
        // when the account exists already (the setting is wrong either way).
        auth::check_password(p).map_err(|e| {
            anyhow::anyhow!("BOTBOX_ADMIN_PASSWORD (--admin-password): {e}; refusing to start")
        })?;
    }
    if db.user_count().await? > 0 {
        return Ok(None);
    }
    let (password, generated) = match password {
        Some(p) => (p.to_owned(), false),
        None => (auth::new_password(), true),
    };
    let phc = auth::hash_password(&password);
    let created = db.insert_first_user("admin", &phc, "admin").await?;
    Ok(created.then(|| FirstAdmin {
        generated: generated.then_some(password),
    }))
}

/// Where the first start writes a generated administrator password: a file of the data
/// folder readable by its owner only (never the log, which a journal keeps and others read).
pub const ADMIN_PASSWORD_FILE: &str = "admin-password";

/// Says who the first administrator is; a generated password goes to
/// [`ADMIN_PASSWORD_FILE`] (mode 0600), whose path is printed.
fn announce_admin(data_dir: &std::path::Path, first: FirstAdmin) -> Result<()> {
    let Some(password) = first.generated else {
        println!(
            "created the admin account: username admin, with the password of BOTBOX_ADMIN_PASSWORD"
        );
        return Ok(());
    };
    let path = data_dir.join(ADMIN_PASSWORD_FILE);
    let _ = std::fs::remove_file(&path);
    let mut f = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("writing {}", path.display()))?
    };
    std::io::Write::write_all(&mut f, format!("{password}\n").as_bytes())?;
    println!(
        "created the admin account: username admin; its password is in {} (readable by this user only): log in, change it with `botbox passwd`, then delete the file",
        path.display()
    );
    Ok(())
}

/// The wired server: the API state with every service built and started (workers, the
/// sandbox warming in the background, leftovers of a previous process cleaned up). `addr`
/// is where it listens: the server's own address, which no outbound call may reach, and
/// the base of webhook URLs unless `cfg.public_url` says otherwise.
pub async fn build(cfg: &ServeConfig, db: Db, addr: SocketAddr) -> Result<App> {
    let mut api_cfg = cfg.api.clone();
    api_cfg.public_url = cfg
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    // The listener's address is the server's own: no outbound call may reach it (unless an
    // --egress-allow entry covers it). The interfaces' addresses are added by the policy.
    let mut live_cfg = cfg.live.clone();
    live_cfg.egress.own.push(addr.ip());
    let live = Live::new(db.clone(), live_cfg)?;
    live.spawn_workers();
    // The guest is loaded (or compiled, with a cold cache) while the server already listens.
    live.warm_sandbox();
    // A training that was running when the last process stopped will not finish.
    let interrupted = db.fail_interrupted_trainings().await?;
    if interrupted > 0 {
        tracing::warn!(
            interrupted,
            "NLU trainings interrupted by the last stop are marked failed"
        );
    }
    api_cfg.server_key =
        botbox_service::cases::webhooks::ServerKey::load(cfg.secret_key.as_deref(), &cfg.data_dir)
            .context("loading the server's secret key")?;
    let callbacks = Callbacks::new(
        db.clone(),
        live.egress(),
        api_cfg.server_key.clone(),
        cfg.callbacks.clone(),
        live.drain.clone(),
    );
    let tasks = Tasks::new(
        db.clone(),
        live.clone(),
        callbacks,
        api_cfg.server_key.clone(),
        cfg.tasks.clone(),
    );
    let agents = Agents::new(db.clone(), live.clone());
    let app = App::new(
        db,
        api_cfg,
        Services {
            live,
            agents,
            tasks,
        },
    );
    // Cases and tasks: callbacks, and the worker (which takes over tasks of a dead process).
    app.tasks.callbacks.spawn();
    app.tasks.spawn().await?;
    // Runs that were in flight when the last process stopped end as failed before anyone
    // can read them; then the sweep repeats for other replicas' expired leases.
    app.agents.sweep(true).await?;
    if app.db.backend == botbox_store::Backend::Sqlite {
        // One process per SQLite database: Idempotency-Keys its predecessor's requests
        // held are free again (PostgreSQL replicas take them over after 5 minutes).
        app.db.forget_running_idempotent().await?;
    }
    app.agents.spawn_sweeper();
    Ok(app)
}

/// Runs the server until a SIGTERM or SIGINT has been drained (see [`botbox_service::drain`]).
pub async fn serve(mut cfg: ServeConfig) -> Result<()> {
    // With an address of its own, `/metrics` is served there and not on the main router.
    let own_metrics = match cfg.metrics_addr {
        Some(addr) => cfg.api.metrics.take().map(|route| (addr, route)),
        None => None,
    };
    let db = open_db(&cfg.data_dir, cfg.database_url.as_deref()).await?;
    if let Some(first) = bootstrap_admin(&db, cfg.admin_password.as_deref()).await? {
        announce_admin(&cfg.data_dir, first)?;
    }
    let listener = tokio::net::TcpListener::bind(cfg.addr)
        .await
        .with_context(|| format!("binding {}", cfg.addr))?;
    let addr = listener.local_addr()?;
    let app = build(&cfg, db, addr).await?;
    if let Some((metrics_addr, route)) = own_metrics {
        let listener = tokio::net::TcpListener::bind(metrics_addr)
            .await
            .with_context(|| format!("binding the metrics address {metrics_addr}"))?;
        tracing::info!(addr = %listener.local_addr()?, "metrics on their own address");
        let app = app.clone();
        let metrics = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let (app, route) = (app.clone(), route.clone());
                async move { api::exposition::render(&app, &route).await }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, metrics).await });
    }
    let drain = app.live.drain.clone();
    let db = app.db.clone();
    let router = api::router(app);
    let service = tower::service_fn(move |req: axum::extract::Request| {
        router.clone().oneshot(api::trim_trailing_slash(req))
    });
    tokio::spawn(on_signals(drain.clone()));
    println!("botbox listening on http://{addr}");
    use std::io::Write;
    std::io::stdout().flush().ok();
    let proxies = std::sync::Arc::new(cfg.trusted_proxies.clone());
    let connections = serve_connections(listener, service, drain.clone(), proxies).await;
    finish_drain(&drain, connections, cfg.shutdown_timeout).await;
    db.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// The first SIGTERM or SIGINT starts the drain; a second one exits at once (status 1),
/// leaving what was in flight as a crash would.
async fn on_signals(drain: botbox_service::drain::Drain) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot listen for SIGTERM and SIGINT: stop the server with SIGKILL");
        return;
    };
    let mut next = async || {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    };
    let first = next().await;
    tracing::info!(signal = first, in_flight = ?drain.in_flight(),
        "drain started: not ready, accepting no new connections, finishing the work in flight");
    drain.start();
    let second = next().await;
    tracing::warn!(signal = second, in_flight = ?drain.in_flight(),
        "second signal: exiting at once");
    std::process::exit(1);
}

/// Waits, up to `timeout`, for the open connections to finish their requests (hyper closes
/// each after its response in flight) and for every other piece of work in flight; logs
/// what is left every 5 s, and what was cut if the time runs out.
async fn finish_drain(
    drain: &botbox_service::drain::Drain,
    connections: hyper_util::server::graceful::GracefulShutdown,
    timeout: std::time::Duration,
) {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut done = std::pin::pin!(async {
        connections.shutdown().await;
        drain.finished().await;
    });
    let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
    every.tick().await;
    loop {
        tokio::select! {
            _ = &mut done => {
                tracing::info!("drain finished: nothing in flight");
                return;
            }
            _ = every.tick() => tracing::info!(in_flight = ?drain.in_flight(), "draining"),
            _ = tokio::time::sleep_until(deadline) => {
                tracing::warn!(in_flight = ?drain.in_flight(), timeout_s = timeout.as_secs_f64(),
                    "drain time over: exiting with work in flight (as after a crash, nothing \
                     stored is lost: replies are sent and tasks taken over by the next process)");
                return;
            }
        }
    }
}

/// The address a request comes from: the connection's peer, unless the peer is one of the
/// trusted reverse `proxies` (`--trusted-proxy`); then the right-most address of
/// `X-Forwarded-For` that is not itself a trusted proxy (what the nearest proxy saw).
/// A client's own `X-Forwarded-For` is ignored: only a trusted peer's is read, and a proxy
/// appends the address it saw, so what a client forges stays to the left of it. Rate
/// limits, overload caps and the access log all key on this address.
fn client_address(
    peer: SocketAddr,
    headers: &axum::http::HeaderMap,
    proxies: &[ipnet::IpNet],
) -> SocketAddr {
    let trusted = |ip: &std::net::IpAddr| proxies.iter().any(|p| p.contains(ip));
    if !trusted(&peer.ip()) {
        return peer;
    }
    let forwarded = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    forwarded
        .iter()
        .rev()
        .filter_map(|a| a.parse::<std::net::IpAddr>().ok())
        .find(|ip| !trusted(ip))
        .map_or(peer, |ip| SocketAddr::new(ip, 0))
}

/// Accepts connections and serves each in a task of its own, on the lane its requests ask
/// for ([`botbox_lanes::hopping`]): the project API on the main runtime, a webhook of a
/// tenant over its share on the background runtime ([`botbox_service::live::Live::over_share`]);
/// a connection that has carried several tenants' webhooks goes there only while it
/// handles such a webhook, and waits for the next request on the main runtime. Requests
/// carry their peer's address (`ConnectInfo<SocketAddr>`), as `axum::serve` gives.
///
/// Returns once `drain` starts, having closed the listener; the connections still open are
/// in the returned [`GracefulShutdown`](hyper_util::server::graceful::GracefulShutdown),
/// whose `shutdown` lets each finish its request in flight, then closes it.
async fn serve_connections<S>(
    listener: tokio::net::TcpListener,
    service: S,
    drain: botbox_service::drain::Drain,
    proxies: std::sync::Arc<Vec<ipnet::IpNet>>,
) -> hyper_util::server::graceful::GracefulShutdown
where
    S: tower::Service<
            axum::extract::Request,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    use botbox_lanes::{InFlight, Lane, hopping, prefer};
    use botbox_service::drain::Work;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = drain.started() => return graceful,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            // The peer went away before we took it: nothing to serve.
            Err(e) if is_connection_error(&e) => continue,
            // Out of file descriptors and the like: wait for some to free up (as hyper and
            // axum do) instead of spinning.
            Err(e) => {
                tracing::error!(error = %e, "accepting a connection");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        let service = service.clone();
        let proxies = proxies.clone();
        let requests = InFlight::default();
        let in_hand = requests.clone();
        let hyper_service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut req = req.map(axum::body::Body::new);
                let client = client_address(peer, req.headers(), &proxies);
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(client));
                // Every request runs on the main runtime unless its handler asks otherwise.
                prefer(Lane::Main);
                in_hand.track(service.clone().oneshot(req))
            });
        let connection = graceful.watch(
            builder
                .serve_connection_with_upgrades(TokioIo::new(stream), hyper_service)
                .into_owned(),
        );
        let busy = drain.busy(Work::Connections);
        tokio::spawn(hopping(
            async move {
                let _busy = busy;
                if let Err(e) = connection.await {
                    tracing::trace!(error = %e, "connection ended");
                }
            },
            requests,
        ));
    }
}

/// An accept error about that one connection (the listener itself is fine).
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use botbox_lanes::{Lane, go_to, in_background};

    /// Through the real accept loop: one keep-alive connection carries tenant a's request,
    /// then tenant b's, which asks for the background (b over its share), then a request
    /// that asks for nothing, then b's again. The connection is shared from b's request
    /// on: each of b's requests goes on in the background once it asks, and each request
    /// is read on the main runtime. Fails if the accept loop stops counting requests in
    /// hand (the shared connection then never leaves the main runtime).
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_shared_connection_follows_each_request_through_the_accept_loop() {
        let service = tower::service_fn(|req: axum::extract::Request| async move {
            let read_in_background = in_background();
            let path = req.uri().path().to_owned();
            match path.as_str() {
                "/a" => go_to(Some("tenant-a"), Lane::Main).await,
                "/b" => go_to(Some("tenant-b"), Lane::Background).await,
                _ => {}
            }
            let body = format!("{read_in_background} {}", in_background());
            Ok::<_, std::convert::Infallible>(axum::response::Response::new(body.into()))
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(super::serve_connections(
            listener,
            service,
            Default::default(),
            Default::default(),
        ));
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let mut seen = Vec::new();
        for path in ["/a", "/b", "/c", "/b"] {
            let answer = client
                .get(format!("http://{addr}{path}"))
                .send()
                .await
                .unwrap();
            seen.push(answer.text().await.unwrap());
        }
        server.abort();
        // (read in the background, handled in the background after its wish)
        assert_eq!(
            seen,
            vec!["false false", "false true", "false false", "false true"]
        );
    }

    /// Behind a trusted proxy the client is the right-most untrusted address of
    /// X-Forwarded-For; a client's own header is ignored, and a forged entry to the left of
    /// what the proxy appended changes nothing.
    #[test]
    fn the_client_is_read_from_trusted_proxies_only() {
        let proxies: Vec<ipnet::IpNet> = vec![
            "127.0.0.1/32".parse().unwrap(),
            "10.0.0.0/8".parse().unwrap(),
        ];
        let mut h = axum::http::HeaderMap::new();
        h.insert(
            "x-forwarded-for",
            "6.6.6.6, 203.0.113.7, 10.1.2.3".parse().unwrap(),
        );
        use super::{SocketAddr, client_address};
        let via_proxy: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert_eq!(
            client_address(via_proxy, &h, &proxies).ip().to_string(),
            "203.0.113.7"
        );
        let direct: SocketAddr = "198.51.100.9:5000".parse().unwrap();
        assert_eq!(client_address(direct, &h, &proxies), direct);
        assert_eq!(client_address(via_proxy, &h, &[]), via_proxy);
        assert_eq!(
            client_address(via_proxy, &axum::http::HeaderMap::new(), &proxies),
            via_proxy
        );
    }
}
