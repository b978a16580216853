//! The egress clients against servers on loopback (127.0.0.1 and 127.0.0.2 stand for a
//! private and an allowed address), with a scripted [`Lookup`] instead of DNS.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server on loopback that answers every request with what `answer` gives for its path
/// (status, extra header lines, body), closing each connection; counts requests.
struct Stub {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Stub {
    async fn on(l: TcpListener, answer: fn(&str) -> (u16, String, String)) -> Stub {
        let addr = l.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = l.accept().await {
                let h = h.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    let head = String::from_utf8_lossy(&buf);
                    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
                    let (status, headers, body) = answer(&path);
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        Stub { addr, hits }
    }

    async fn start(ip: &str, answer: fn(&str) -> (u16, String, String)) -> Stub {
        Stub::on(TcpListener::bind((ip, 0)).await.unwrap(), answer).await
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

fn ok_body(_: &str) -> (u16, String, String) {
    (200, String::new(), "{\"secret\":\"internal\"}".into())
}

fn public_body(_: &str) -> (u16, String, String) {
    (200, String::new(), "{\"from\":\"public\"}".into())
}

/// A name → addresses script: each lookup takes the next answer (the last one repeats).
struct Script {
    answers: Vec<Vec<IpAddr>>,
    calls: AtomicUsize,
}

impl Lookup for Script {
    fn lookup(&self, _host: &str) -> LookupFuture {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let a = self.answers[n.min(self.answers.len() - 1)].clone();
        Box::pin(async move { Ok(a) })
    }
}

fn script(answers: &[&[&str]]) -> Arc<Script> {
    Arc::new(Script {
        answers: answers
            .iter()
            .map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect(),
        calls: AtomicUsize::new(0),
    })
}

fn cfg(allow: &str) -> EgressConfig {
    EgressConfig {
        allow: parse_allow_list(allow).unwrap(),
        own: vec![],
    }
}

const T: Duration = Duration::from_secs(5);

async fn get(e: &Egress, use_: Use, url: &str) -> Result<Answer, EgressError> {
    let req = Outbound {
        method: "GET",
        url,
        headers: &[],
        body: None,
    };
    e.call(use_, req, T, 1 << 20).await
}

fn refused(r: Result<Answer, EgressError>) -> String {
    match r {
        Err(EgressError::Refused { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn body(r: Result<Answer, EgressError>) -> String {
    let a = r.expect("an answer");
    assert_eq!(a.status, 200);
    String::from_utf8(a.body).unwrap()
}

#[test]
fn allow_entries_parse() {
    let l = parse_allow_list("127.0.0.1:9000, 10.0.0.0/8,[::1]:80,192.168.1.7,fd00::/8,").unwrap();
    assert_eq!(
        l,
        vec![
            Allow::Socket("127.0.0.1:9000".parse().unwrap()),
            Allow::Net("10.0.0.0/8".parse().unwrap()),
            Allow::Socket("[::1]:80".parse().unwrap()),
            Allow::Net("192.168.1.7/32".parse().unwrap()),
            Allow::Net("fd00::/8".parse().unwrap()),
        ]
    );
    // A network given with host bits is the network.
    assert_eq!(
        parse_allow_list("10.1.2.3/8").unwrap(),
        vec![Allow::Net("10.0.0.0/8".parse().unwrap())]
    );
    for bad in [
        "localhost:9000",
        "10.0.0.0/33",
        "example.com",
        "127.0.0.1:99999",
    ] {
        assert!(parse_allow_list(bad).is_err(), "{bad}");
    }
}

#[test]
fn verdicts() {
    let e = Egress::new(&EgressConfig {
        allow: parse_allow_list("127.0.0.1:9000,10.0.0.0/8").unwrap(),
        own: vec!["1.2.3.4".parse().unwrap(), "0.0.0.0".parse().unwrap()],
    })
    .unwrap();
    let p = &e.policy;
    let v = |ip: &str, port: Option<u16>| p.verdict(ip.parse().unwrap(), port);
    // A socket entry: that address and port, the IPv4-mapped spelling included.
    assert!(v("127.0.0.1", Some(9000)).is_ok());
    assert!(v("::ffff:127.0.0.1", Some(9000)).is_ok());
    assert!(v("127.0.0.1", Some(9001)).is_err());
    // A name's address has no port: socket entries do not apply.
    assert!(v("127.0.0.1", None).is_err());
    // A network entry: every port, names included.
    assert!(v("10.9.8.7", None).is_ok());
    assert!(v("10.9.8.7", Some(1)).is_ok());
    assert!(v("11.0.0.1", None).is_ok());
    // The server's own addresses.
    assert_eq!(
        v("1.2.3.4", Some(80)),
        Err("1.2.3.4 is this server's own address".into())
    );
    assert_eq!(
        v("169.254.169.254", Some(80)),
        Err("169.254.169.254 is link-local (169.254.0.0/16)".into())
    );
    assert!(v("8.8.8.8", Some(443)).is_ok());
}

/// Every redirect hop's URL goes through the same check as the first: a hop to the cloud
/// metadata address (literal, so no resolver sees it) is refused before any connection.
/// (Checked on the hop rule itself: a test must not send anything to 169.254.169.254.)
#[test]
fn the_hop_check_refuses_metadata_and_other_schemes() {
    let e = Egress::new(&cfg("127.0.0.1:9000")).unwrap();
    for (url, why) in [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://[fd00:ec2::254]/", "unique-local"),
        ("http://2852039166/", "link-local"), // 169.254.169.254 as one number
        ("http://0x7f.1:9001/", "loopback"),  // 127.0.0.1, another port
        ("http://127.0.0.1:9001/", "loopback"),
        ("http://[::1]:9000/", "loopback"),
        ("file:///etc/passwd", "scheme file"),
        ("gopher://127.0.0.1:9000/", "scheme gopher"),
    ] {
        let r = e.check(url);
        match r {
            Err(EgressError::Refused { reason, .. }) => {
                assert!(reason.contains(why), "{url}: {reason}")
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    // 0x7f.1 is 127.0.0.1: allowed on the listed port only.
    assert!(e.check("http://0x7f.1:9000/x").is_ok());
    assert!(e.check("https://example.com/").is_ok());
}

#[tokio::test]
async fn a_redirect_to_another_local_port_is_refused_and_never_reached() {
    let internal = Stub::start("127.0.0.1", ok_body).await;
    // The allowed server redirects to the internal one.
    static TARGET: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TARGET.set(internal.url("/secret")).unwrap();
    let redirector = Stub::start("127.0.0.1", |path| match path {
        "/self" => (302, "location: /ok\r\n".into(), String::new()),
        "/ok" => (200, String::new(), "{\"fine\":true}".into()),
        _ => (
            302,
            format!("location: {}\r\n", TARGET.get().unwrap()),
            String::new(),
        ),
    })
    .await;
    let e = Egress::new(&cfg(&redirector.addr.to_string())).unwrap();
    // The allowed server itself, and a redirect that stays on it, are fine.
    assert_eq!(
        body(get(&e, Use::ApiAction, &redirector.url("/self")).await),
        "{\"fine\":true}"
    );
    // Its redirect to another local port is refused.
    let why = refused(get(&e, Use::ApiAction, &redirector.url("/go")).await);
    assert!(why.contains("loopback"), "{why}");
    // Deliveries follow no redirect: the 302 is their answer.
    let d = get(&e, Use::Delivery, &redirector.url("/go"))
        .await
        .unwrap();
    assert_eq!(d.status, 302);
    assert_eq!(internal.hits(), 0, "the internal server was never reached");
    // The internal server is private: direct calls are refused too.
    refused(get(&e, Use::ApiAction, &internal.url("/secret")).await);
    refused(get(&e, Use::Delivery, &internal.url("/secret")).await);
    assert_eq!(internal.hits(), 0);
    // The same redirect with the internal server allowed goes through: the refusal above
    // was the policy, not the stub.
    let open = Egress::new(&EgressConfig::allow_all()).unwrap();
    assert_eq!(
        body(get(&open, Use::ApiAction, &redirector.url("/go")).await),
        "{\"secret\":\"internal\"}"
    );
}

#[tokio::test]
async fn redirects_stop_after_five() {
    let s = Stub::start("127.0.0.1", |path| {
        let n: usize = path.trim_start_matches('/').parse().unwrap_or(0);
        if n == 0 {
            (200, String::new(), "done".into())
        } else {
            (302, format!("location: /{}\r\n", n - 1), String::new())
        }
    })
    .await;
    let e = Egress::new(&cfg(&s.addr.to_string())).unwrap();
    assert_eq!(body(get(&e, Use::ApiAction, &s.url("/5")).await), "done");
    let why = refused(get(&e, Use::ApiAction, &s.url("/6")).await);
    assert!(why.contains("more than 5 redirects"), "{why}");
}

/// DNS rebinding: the name answers an allowed address first and a private one after. The
/// address that is checked is the one connected to, so the first call reaches the allowed
/// server and the second is refused; the private server sees nothing.
#[tokio::test]
async fn a_name_is_resolved_once_and_a_private_answer_is_refused() {
    // The same port on an allowed address (127.0.0.2, "public") and a private one.
    let (public, internal) = loop {
        let a = TcpListener::bind("127.0.0.2:0").await.unwrap();
        let port = a.local_addr().unwrap().port();
        if let Ok(b) = TcpListener::bind(("127.0.0.1", port)).await {
            break (Stub::on(a, public_body).await, Stub::on(b, ok_body).await);
        }
    };
    let port = public.addr.port();
    let lookup = script(&[&["127.0.0.2"], &["127.0.0.1"]]);
    let e = Egress::with_lookup(&cfg("127.0.0.2/32"), lookup.clone()).unwrap();
    let url = format!("http://rebind.test:{port}/");
    assert_eq!(
        body(get(&e, Use::ApiAction, &url).await),
        "{\"from\":\"public\"}"
    );
    assert_eq!(
        lookup.calls.load(Ordering::SeqCst),
        1,
        "one lookup per connection"
    );
    let why = refused(get(&e, Use::ApiAction, &url).await);
    assert!(why.contains("rebind.test: 127.0.0.1 is loopback"), "{why}");
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 2);
    // Deliveries and provider reads use the same resolver.
    refused(get(&e, Use::Delivery, &url).await);
    refused(get(&e, Use::ProviderRead, &url).await);
    assert_eq!(internal.hits(), 0, "the private server was never reached");
    assert_eq!(public.hits(), 1);

    // A mixed answer: only the allowed address is connected to.
    let mixed = script(&[&["127.0.0.1", "127.0.0.2", "::1"]]);
    let e = Egress::with_lookup(&cfg("127.0.0.2/32"), mixed).unwrap();
    for _ in 0..3 {
        assert_eq!(
            body(get(&e, Use::Delivery, &url).await),
            "{\"from\":\"public\"}"
        );
    }
    assert_eq!(internal.hits(), 0);
    assert_eq!(public.hits(), 4);
}

#[tokio::test]
async fn body_and_time_caps() {
    let big = Stub::start("127.0.0.1", |_| (200, String::new(), "x".repeat(4096))).await;
    let e = Egress::new(&EgressConfig::allow_all()).unwrap();
    let req = |url: &'static str| Outbound {
        method: "GET",
        url,
        headers: &[],
        body: None,
    };
    let url: &'static str = Box::leak(big.url("/").into_boxed_str());
    assert!(matches!(
        e.call(Use::ProviderRead, req(url), T, 1024).await,
        Err(EgressError::TooBig { cap: 1024, .. })
    ));
    assert_eq!(
        e.call(Use::ProviderRead, req(url), T, 4096)
            .await
            .unwrap()
            .body
            .len(),
        4096
    );
    // A server that accepts and never answers: cut at the time-out.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang: &'static str =
        Box::leak(format!("http://{}/", l.local_addr().unwrap()).into_boxed_str());
    tokio::spawn(async move {
        let mut held = vec![];
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let r = e
        .call(Use::Delivery, req(hang), Duration::from_millis(200), 0)
        .await;
    assert!(matches!(r, Err(EgressError::TimedOut { .. })), "{r:?}");
}

/// A Telegram-style token in the path and a Messenger-style one in the query appear in no
/// error text: refused, unreachable, or answered with an error status.
#[tokio::test]
async fn errors_do_not_show_credentials() {
    let path = "/bot123456:SECRET-TOKEN/sendMessage?access_token=SECRET-QUERY";
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let failing = Stub::start("127.0.0.1", |_| (500, String::new(), String::new())).await;
    let strict = Egress::new(&EgressConfig::default()).unwrap();
    let open = Egress::new(&EgressConfig::allow_all()).unwrap();
    let texts = [
        refused_text(get(&strict, Use::Delivery, &format!("http://{closed}{path}")).await),
        refused_text(get(&open, Use::Delivery, &format!("http://{closed}{path}")).await),
        refused_text(
            get(
                &open,
                Use::Delivery,
                &format!("http://user:SECRET-PW@{closed}{path}"),
            )
            .await,
        ),
        refused_text(get(&open, Use::Delivery, &format!("http://[{path}")).await),
    ];
    for t in &texts {
        assert!(!t.contains("SECRET"), "{t}");
    }
    assert!(
        texts[0].contains("bot***/sendMessage?access_token=***"),
        "{}",
        texts[0]
    );
    let a = get(&open, Use::Delivery, &failing.url(path)).await.unwrap();
    assert_eq!(a.status, 500);
    assert!(
        !a.url.contains("SECRET") && a.url.contains("bot***"),
        "{}",
        a.url
    );
}

fn refused_text(r: Result<Answer, EgressError>) -> String {
    r.expect_err("a failure").to_string()
}
