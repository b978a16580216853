//! Egress: every outbound call of the server goes through here — bots' api actions
//! (the sandbox's `Effects`), reply deliveries (`live/outbox.rs`), reads from a
//! provider's API (the Webex message text, `Live::fetch_text`), and later webhooks and
//! callbacks. One policy decides where the server may connect, checked where the address
//! is known, so that what was checked is what is connected to:
//!
//! May depend on: `runtime-core` (for redaction), reqwest and tokio. Must never be bypassed:
//! nothing else in the server builds an HTTP client for a tenant-controlled URL.
//!
//! - **Names** are resolved once, by the clients' own resolver ([`reqwest::dns::Resolve`]
//!   over an injectable [`Lookup`]), which drops every address the policy refuses and hands
//!   the rest to the connector: there is no second lookup that could answer differently
//!   (DNS rebinding), and a name none of whose addresses is allowed fails to connect.
//! - **Address literals** (`http://127.0.0.1/`, `http://[::ffff:a9fe:a9fe]/`) never reach a
//!   resolver, so [`Egress::check`] checks them before every request and at every redirect
//!   hop, with their port.
//! - **Redirects**, per use ([`Use`]): api actions follow up to 5, each hop's URL checked
//!   (literal hosts here, names by the resolver when the hop connects); deliveries and
//!   provider reads follow none (a 3xx is a failed delivery).
//! - **Caps**: every call runs under a time-out covering the whole call (lookup, connect,
//!   headers, body) and reads at most a given number of body bytes.
//! - **Proxies** from the environment are ignored: a proxy would connect on our behalf to
//!   addresses the policy never saw.
//! - **Errors** ([`EgressError`]) name the URL only as [`redact::url`] shows it, never the
//!   headers: they go to logs, to the outbox's `last_error` and to the bot's log.
//!
//! The policy ([`EgressConfig`]): an address is allowed when an `--egress-allow` entry
//! covers it (a CIDR, or an exact address and port; entries win over every other rule),
//! else when it is global (see [`addr`]: the IANA special-purpose registries, embedded IPv4
//! forms judged by the address they embed) and not one of the server's own addresses (the
//! listener's, and every interface's, re-read every 10 s).

pub mod addr;
pub mod redact;

use ipnet::IpNet;
use reqwest::Url;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Redirects an api action follows at most (each hop checked).
pub const MAX_REDIRECTS: usize = 5;

/// How long a reading of the interfaces' addresses is used.
const INTERFACES_TTL: Duration = Duration::from_secs(10);

/// One `--egress-allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allow {
    /// Every address of a network (`10.0.0.0/8`; a bare address is a /32 or /128).
    Net(IpNet),
    /// One address and port (`127.0.0.1:9000`, `[::1]:9000`). It applies to URLs that name
    /// the address literally: a name's lookup does not know the port it will be used with.
    Socket(SocketAddr),
}

impl FromStr for Allow {
    type Err = String;

    fn from_str(s: &str) -> Result<Allow, String> {
        let s = s.trim();
        if let Ok(sa) = s.parse::<SocketAddr>() {
            return Ok(Allow::Socket(SocketAddr::new(
                sa.ip().to_canonical(),
                sa.port(),
            )));
        }
        if let Ok(net) = s.parse::<IpNet>() {
            return Ok(Allow::Net(net.trunc()));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(Allow::Net(IpNet::from(ip.to_canonical())));
        }
        Err(format!(
            "{s:?}: expected an address and port (127.0.0.1:9000, [::1]:9000), a network \
             (10.0.0.0/8) or an address"
        ))
    }
}

/// A comma-separated list of [`Allow`] entries (`127.0.0.1:9000,10.0.0.0/8`).
pub fn parse_allow_list(s: &str) -> Result<Vec<Allow>, String> {
    s.split(',')
        .filter(|e| !e.trim().is_empty())
        .map(str::parse)
        .collect()
}

/// The egress policy's settings (`botbox serve --egress-allow`, `--allow-private-egress`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EgressConfig {
    /// Destinations allowed whatever their address (default: none). Cost: none. What a
    /// malicious tenant can do with an entry: reach it from its bots' api actions and its
    /// channels' delivery URLs, with requests it writes (method, path, headers, body).
    pub allow: Vec<Allow>,
    /// The server's own addresses besides its interfaces' (the listener's bound address).
    pub own: Vec<IpAddr>,
}

impl EgressConfig {
    /// Every address allowed: `--allow-private-egress`, for local development and tests.
    pub fn allow_all() -> EgressConfig {
        EgressConfig {
            allow: vec![
                Allow::Net("0.0.0.0/0".parse().unwrap()),
                Allow::Net("::/0".parse().unwrap()),
            ],
            own: vec![],
        }
    }
}

/// The low-level name lookup, injectable so that tests can answer without DNS.
pub trait Lookup: Send + Sync + 'static {
    /// Every address `host` resolves to (unfiltered).
    fn lookup(&self, host: &str) -> LookupFuture;
}

pub type LookupFuture = Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>;

/// The system's resolver (getaddrinfo on a blocking thread).
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> LookupFuture {
        let host = host.to_owned();
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    }
}

/// Why a call failed. Its text names the URL only as [`redact::url`] shows it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EgressError {
    /// The policy refused the destination (or a redirect hop): nothing was sent to it.
    #[error(
        "{url}: refused by the server's egress policy: {reason} (an operator may allow it with --egress-allow)"
    )]
    Refused { url: String, reason: String },
    #[error("{url}: invalid request: {reason}")]
    Invalid { url: String, reason: String },
    #[error("{url}: timed out after {secs} s")]
    TimedOut { url: String, secs: f32 },
    #[error("{url}: answer over the cap of {cap} bytes")]
    TooBig { url: String, cap: usize },
    /// Connection, TLS or protocol failure.
    #[error("{url}: {detail}")]
    Failed { url: String, detail: String },
}

/// Who makes the call: decides the redirect rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// A bot's api action: up to [`MAX_REDIRECTS`] redirects, each hop checked.
    ApiAction,
    /// A reply to a provider: no redirect followed (a 3xx is a failed attempt).
    Delivery,
    /// A read from a provider's API (the Webex message text): no redirect followed.
    ProviderRead,
}

/// One outbound request.
pub struct Outbound<'a> {
    pub method: &'a str,
    pub url: &'a str,
    pub headers: &'a [(String, String)],
    pub body: Option<Vec<u8>>,
}

/// A call's answer: the status and at most the body cap's bytes.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    /// `Retry-After` in seconds, when the answer has one (delta-seconds or an HTTP date).
    pub retry_after: Option<u64>,
    /// The URL as it may be logged ([`redact::url`]).
    pub url: String,
}

/// `Retry-After` (RFC 9110 §10.2.3) in seconds from now: delta-seconds, or an HTTP date
/// (a date in the past is 0).
pub fn retry_after_secs(v: &str) -> Option<u64> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(s);
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .map(|d| d.as_secs())
            .unwrap_or(0),
    )
}

/// A refusal inside reqwest (from the resolver or the redirect policy), found again in the
/// error's chain.
#[derive(Debug)]
struct Refusal(String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// The policy, shared by the clients' resolver and redirect rule.
struct Policy {
    allow: Vec<Allow>,
    own: Vec<IpAddr>,
    interfaces: Mutex<Option<(Instant, Arc<Vec<IpAddr>>)>>,
}

impl Policy {
    /// Whether `ip` may be connected to (`port`: when the URL names the address literally).
    fn verdict(&self, ip: IpAddr, port: Option<u16>) -> Result<(), String> {
        let ip = ip.to_canonical();
        let allowed = self.allow.iter().any(|a| match a {
            Allow::Net(n) => n.contains(&ip),
            Allow::Socket(s) => s.ip() == ip && Some(s.port()) == port,
        });
        if allowed {
            return Ok(());
        }
        if let Some(why) = addr::non_global(ip) {
            return Err(format!("{ip} is {why}"));
        }
        if self.own.contains(&ip) || self.interfaces().contains(&ip) {
            return Err(format!("{ip} is this server's own address"));
        }
        Ok(())
    }

    /// The interfaces' addresses, read again when older than [`INTERFACES_TTL`].
    fn interfaces(&self) -> Arc<Vec<IpAddr>> {
        let mut cached = self.interfaces.lock().unwrap();
        if let Some((at, addrs)) = cached.as_ref()
            && at.elapsed() < INTERFACES_TTL
        {
            return addrs.clone();
        }
        let addrs: Arc<Vec<IpAddr>> = Arc::new(match if_addrs::get_if_addrs() {
            Ok(list) => list.iter().map(|i| i.ip().to_canonical()).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "egress: reading the interfaces' addresses");
                // Keep the last reading, if any.
                cached
                    .as_ref()
                    .map(|(_, a)| (**a).clone())
                    .unwrap_or_default()
            }
        });
        *cached = Some((Instant::now(), addrs.clone()));
        addrs
    }

    /// The checks a URL gets before it is requested and at every redirect hop: the scheme,
    /// and a literal address with its port. A name is checked when it is resolved.
    fn check_url(&self, url: &Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("scheme {} is not allowed", url.scheme()));
        }
        let port = url.port_or_known_default();
        match url.host() {
            None => Err("the url has no host".into()),
            Some(url::Host::Domain(_)) => Ok(()),
            Some(url::Host::Ipv4(ip)) => self.verdict(ip.into(), port),
            Some(url::Host::Ipv6(ip)) => self.verdict(ip.into(), port),
        }
    }
}

/// The clients' resolver: one lookup, the refused addresses dropped.
struct Resolver {
    policy: Arc<Policy>,
    lookup: Arc<dyn Lookup>,
}

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let lookup = self.lookup.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = lookup.lookup(&host).await.map_err(BoxError::from)?;
            let mut refused = None;
            let allowed: Vec<SocketAddr> = found
                .iter()
                .filter_map(|&ip| match policy.verdict(ip, None) {
                    Ok(()) => Some(SocketAddr::new(ip, 0)),
                    Err(e) => {
                        refused.get_or_insert(e);
                        None
                    }
                })
                .collect();
            if allowed.is_empty() {
                let why = refused.unwrap_or_else(|| "no address".into());
                return Err(Box::new(Refusal(format!("{host}: {why}"))) as BoxError);
            }
            Ok::<reqwest::dns::Addrs, BoxError>(Box::new(allowed.into_iter()))
        })
    }
}

/// The egress clients. Cheap to share (`Arc`); the clients keep their connection pools.
pub struct Egress {
    policy: Arc<Policy>,
    /// Api actions: redirects followed, each hop checked.
    follow: reqwest::Client,
    /// Deliveries and provider reads: no redirects.
    direct: reqwest::Client,
}

impl Egress {
    /// The egress of `cfg`, resolving names with the system's resolver.
    pub fn new(cfg: &EgressConfig) -> anyhow::Result<Egress> {
        Self::with_lookup(cfg, Arc::new(SystemLookup))
    }

    /// The egress of `cfg`, resolving names with `lookup`.
    pub fn with_lookup(cfg: &EgressConfig, lookup: Arc<dyn Lookup>) -> anyhow::Result<Egress> {
        let policy = Arc::new(Policy {
            allow: cfg.allow.clone(),
            own: cfg
                .own
                .iter()
                .map(|ip| ip.to_canonical())
                .filter(|ip| !ip.is_unspecified())
                .collect(),
            interfaces: Mutex::new(None),
        });
        let client = |redirect| {
            reqwest::Client::builder()
                .dns_resolver(Arc::new(Resolver {
                    policy: policy.clone(),
                    lookup: lookup.clone(),
                }))
                .no_proxy()
                .redirect(redirect)
                .build()
        };
        let hops = policy.clone();
        let follow = client(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > MAX_REDIRECTS {
                return attempt.error(Refusal(format!("more than {MAX_REDIRECTS} redirects")));
            }
            match hops.check_url(attempt.url()) {
                Ok(()) => attempt.follow(),
                Err(why) => {
                    let to = redact::url(attempt.url().as_str());
                    attempt.error(Refusal(format!("redirect to {to}: {why}")))
                }
            }
        }))?;
        let direct = client(reqwest::redirect::Policy::none())?;
        Ok(Egress {
            policy,
            follow,
            direct,
        })
    }

    /// Whether `url` may be requested, as far as the URL tells: the scheme, and a literal
    /// address with its port (a name is checked when it is resolved).
    pub fn check(&self, url: &str) -> Result<(), EgressError> {
        let shown = redact::url(url);
        let parsed = Url::parse(url).map_err(|e| EgressError::Invalid {
            url: shown.clone(),
            reason: e.to_string(),
        })?;
        self.policy
            .check_url(&parsed)
            .map_err(|reason| EgressError::Refused { url: shown, reason })
    }

    /// Sends `req` for `use_` and reads at most `body_cap` bytes of the answer (0: the body
    /// is not read), all under `timeout`.
    pub async fn call(
        &self,
        use_: Use,
        req: Outbound<'_>,
        timeout: Duration,
        body_cap: usize,
    ) -> Result<Answer, EgressError> {
        let shown = redact::url(req.url);
        self.check(req.url)?;
        let invalid = |reason: String| EgressError::Invalid {
            url: shown.clone(),
            reason,
        };
        let method = reqwest::Method::from_bytes(req.method.as_bytes())
            .map_err(|e| invalid(e.to_string()))?;
        let client = match use_ {
            Use::ApiAction => &self.follow,
            Use::Delivery | Use::ProviderRead => &self.direct,
        };
        let mut rb = client.request(method, req.url);
        for (k, v) in req.headers {
            rb = rb.header(k, v);
        }
        if let Some(b) = req.body {
            rb = rb.body(b);
        }
        let work = async {
            let mut resp = rb.send().await.map_err(|e| failure(&shown, e))?;
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(retry_after_secs);
            let mut body = Vec::new();
            if body_cap > 0 {
                while let Some(chunk) = resp.chunk().await.map_err(|e| failure(&shown, e))? {
                    if body.len() + chunk.len() > body_cap {
                        return Err(EgressError::TooBig {
                            url: shown.clone(),
                            cap: body_cap,
                        });
                    }
                    body.extend_from_slice(&chunk);
                }
            }
            Ok(Answer {
                status,
                body,
                retry_after,
                url: shown.clone(),
            })
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(out) => out,
            Err(_) => Err(EgressError::TimedOut {
                url: shown.clone(),
                secs: timeout.as_secs_f32(),
            }),
        }
    }
}

/// A reqwest error as an [`EgressError`]: a refusal found in its chain, or its text without
/// the URL (reqwest's text names the full URL).
fn failure(shown: &str, e: reqwest::Error) -> EgressError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<Refusal>() {
            return EgressError::Refused {
                url: shown.to_owned(),
                reason: r.0.clone(),
            };
        }
        cause = c.source();
    }
    let e = e.without_url();
    let mut detail = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        detail.push_str(": ");
        detail.push_str(&c.to_string());
        cause = c.source();
    }
    EgressError::Failed {
        url: shown.to_owned(),
        detail,
    }
}

#[cfg(test)]
mod tests;
