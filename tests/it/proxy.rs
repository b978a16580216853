//! botbox behind Debian's nginx as docs/nginx.conf sets it up (TLS with a self-signed
//! certificate, `--trusted-proxy 127.0.0.1`): a channel webhook's round trip over HTTPS, an
//! agent run's stream passed on while the run is still going, and per-client rate limits
//! that see each client's address and not what a client claims in X-Forwarded-For.
//!
//! Needs `nginx` and `openssl`; without them the test says so and passes, unless
//! `BOTBOX_REQUIRE_NGINX` is set (as `.ci/run` does, after installing nginx).

use crate::common::*;
use serde_json::json;
use std::net::IpAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// nginx in front of `upstream` (`http://127.0.0.1:<port>`), on an HTTPS port of its own;
/// stopped when dropped.
struct Nginx {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tools_present() -> bool {
    let runs = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    runs("nginx", "-v") && runs("openssl", "version")
}

fn start_nginx(upstream: &str) -> Nginx {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A private authority (ca.pem) and the server's certificate it signs, for 127.0.0.1.
    let openssl = |args: &[&str]| {
        let ok = Command::new("openssl")
            .args(args)
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "openssl {args:?} failed");
    };
    let new_key = ["-newkey", "rsa:2048", "-nodes"];
    openssl(
        &[
            &[
                "req",
                "-x509",
                "-days",
                "1",
                "-subj",
                "/CN=botbox test authority",
            ][..],
            &new_key,
            &["-keyout", "ca.key", "-out", "ca.pem"],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req", "-subj", "/CN=localhost"][..],
            &new_key,
            &["-keyout", "privkey.pem", "-out", "server.csr"],
        ]
        .concat(),
    );
    std::fs::write(
        d.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "server.ext",
        "-out",
        "fullchain.pem",
    ]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let site = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/nginx.conf"),
    )
    .unwrap()
    .replace("listen 443 ssl;", &format!("listen 127.0.0.1:{port} ssl;"))
    .replace("/etc/ssl/botbox", &d.display().to_string())
    .replace("http://127.0.0.1:8080", upstream);
    let p = d.display();
    let conf = format!(
        "pid {p}/nginx.pid;\nerror_log {p}/error.log;\nevents {{}}\nhttp {{\n\
         access_log off;\nclient_body_temp_path {p}/body;\nproxy_temp_path {p}/proxy;\n\
         fastcgi_temp_path {p}/fastcgi;\nuwsgi_temp_path {p}/uwsgi;\nscgi_temp_path {p}/scgi;\n\
         {site}\n}}\n"
    );
    std::fs::write(d.join("nginx.conf"), conf).unwrap();
    let child = Command::new("nginx")
        .arg("-p")
        .arg(d)
        .arg("-e")
        .arg(d.join("error.log"))
        .arg("-c")
        .arg(d.join("nginx.conf"))
        .args(["-g", "daemon off; master_process off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Nginx {
        child,
        base: format!("https://127.0.0.1:{port}"),
        _dir: dir,
    }
}

/// A client of the proxy (it trusts the test's certificate), from `from` (a loopback
/// address of its own, so the proxy sees a client of that address).
fn client(from: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .local_address(IpAddr::from(from))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_nginx_with_tls() {
    if !tools_present() {
        assert!(
            std::env::var_os("BOTBOX_REQUIRE_NGINX").is_none(),
            "nginx and openssl are required (BOTBOX_REQUIRE_NGINX)"
        );
        eprintln!("nginx or openssl is not installed: the reverse-proxy test did not run");
        return;
    }
    let server = Server::start(
        Backend::Sqlite,
        &[
            "--trusted-proxy",
            "127.0.0.1",
            "--rate-limit",
            "30",
            "--allow-private-egress",
        ],
    )
    .await;
    let nginx = start_nginx(&server.base);
    let api = Api::over_http(client([127, 0, 0, 1]), nginx.base.clone());
    // Ready once it answers through the proxy (polled; nothing is timed).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let r = api.http.get(format!("{}/ready", nginx.base)).send().await;
        if r.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "nginx did not answer");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let admin = api.admin_token().await;

    // A channel webhook over HTTPS, the bot's reply delivered.
    let bot = one_state_bot(
        json!({"end": true, "action": {"name": "text", "options": {"text": "hello"}}}),
    );
    let (pid, env) = deploy(&api, &admin, bot).await;
    let (rx, rx_url) = Receiver::start().await;
    let channel = generic_channel(&api, &admin, &pid, &env, &format!("{rx_url}/inbox")).await;
    post_webhook(
        &api,
        &channel,
        &json!({"userId": "u1", "messages": [{"type": "text", "content": "hi"}]}),
    )
    .await;
    assert_eq!(texts(&rx.wait_for(1).await[0].2), ["hello"]);

    stream_passes_through(&api, &admin).await;
    rate_limits_see_each_client(&nginx.base).await;
    cli_trusts_what_it_is_told_to(&nginx).await;
}

/// The CLI over HTTPS: a server whose certificate a private authority signed is refused
/// with the reason named, then trusted with `--ca-cert` or `SSL_CERT_FILE`.
async fn cli_trusts_what_it_is_told_to(nginx: &Nginx) {
    let ca = nginx._dir.path().join("ca.pem");
    let home = tempfile::tempdir().unwrap();
    let login = |extra: &[&str], env: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_botbox"));
        cmd.args([
            "login",
            "-u",
            "admin",
            "-p",
            ADMIN_PASSWORD,
            "--server",
            &nginx.base,
        ])
        .args(extra)
        .env("BOTBOX_HOME", home.path())
        .env_remove("BOTBOX_CA_CERT")
        .env_remove("SSL_CERT_FILE");
        if let Some(file) = env {
            cmd.env("SSL_CERT_FILE", file);
        }
        cmd.output().unwrap()
    };
    let refused = login(&[], None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("the server's certificate is not trusted: ")
            && stderr.contains("--ca-cert"),
        "{stderr}"
    );
    for out in [
        login(&["--ca-cert", ca.to_str().unwrap()], None),
        login(&[], Some(&ca)),
    ] {
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A file that is no certificate is named as such.
    let out = login(&["--ca-cert", "/dev/null"], None);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--ca-cert /dev/null: no certificate"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An agent run whose api call hangs: its stream's first event arrives through the proxy
/// while the run is still in progress, so the proxy does not hold the stream back until the
/// run ends (botbox also sends `X-Accel-Buffering: no`, which nginx honours).
async fn stream_passes_through(api: &Api, admin: &str) {
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang_url = format!("http://{}/slow", hang.local_addr().unwrap());
    let (accepted_tx, accepted_rx) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn(async move {
        let (conn, _) = hang.accept().await.unwrap();
        let _ = accepted_tx.send(());
        // Holds the call open, unanswered, until the test ends.
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        drop(conn);
    });
    let bot = one_state_bot(json!({"end": true, "action": [
        {"name": "api", "options": {"method": "GET", "uri": hang_url}},
        {"name": "text", "options": {"text": "done"}}]}));
    let (pid, env) = deploy(api, admin, bot).await;
    let key = s(&api
        .post(
            &format!("/projects/{pid}/environments/{env}/keys"),
            admin,
            json!({"name": "proxy"}),
        )
        .await
        .ok()["key"]);
    let mut res = api
        .http
        .post(format!("{}/v1/chat", api.base))
        .bearer_auth(&key)
        .header("accept", "text/event-stream")
        .json(&json!({"messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "go"}]}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let run = res.headers()["x-run-id"].to_str().unwrap().to_owned();
    let first = res.chunk().await.unwrap().expect("a first event");
    let text = String::from_utf8_lossy(&first);
    assert!(text.contains("\"type\":\"start\""), "{text}");
    // When the first event arrived the run was still going: its api call is open and
    // unanswered (a proxy that buffered would pass nothing on before the run's end).
    tokio::time::timeout(std::time::Duration::from_secs(10), accepted_rx)
        .await
        .expect("the bot's api call reached the endpoint")
        .unwrap();
    let status = api
        .http
        .get(format!("{}/v1/chat/{run}", api.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(status["status"], "in_progress", "{status}");
    holder.abort();
}

/// Requests without a token count per address: client .2 runs out after 30, client .3
/// (even claiming to be .2 in X-Forwarded-For) still has its own.
async fn rate_limits_see_each_client(base: &str) {
    let (a, b) = (client([127, 0, 0, 2]), client([127, 0, 0, 3]));
    let get = |c: &reqwest::Client, forged: Option<&str>| {
        let mut r = c.get(format!("{base}/projects"));
        if let Some(f) = forged {
            r = r.header("x-forwarded-for", f);
        }
        async move { r.send().await.unwrap().status().as_u16() }
    };
    // A window boundary between requests resets the counters: then try once more.
    let (mut first, mut last, mut other) = (vec![], 0, 0);
    for _ in 0..2 {
        first.clear();
        for _ in 0..30 {
            first.push(get(&a, None).await);
        }
        last = get(&a, None).await;
        other = get(&b, Some("127.0.0.2")).await;
        if last == 429 {
            break;
        }
    }
    assert!(first.iter().all(|s| *s == 401), "{first:?}");
    assert_eq!((last, other), (429, 401));
}
