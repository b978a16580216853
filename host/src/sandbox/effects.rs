//! What the sandbox's host functions do in the world: the clock, randomness, outbound HTTP of
//! api actions and NL predictions. Swappable, so tests can stub them.

use super::limits::Limits;
use runtime_core::host::{HttpRequest, HttpResponse};
use serde_json::Value as Json;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

/// A host call's effect in flight. The step waits for it suspended, holding no CPU slot;
/// dropping it cancels the effect (the step hit its deadline, or was dropped).
pub type EffectFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub trait Effects: Send + Sync {
    fn now_ms(&self) -> i64;
    fn random_u64(&self) -> u64;
    /// An api action's request. `Err` is a network failure or time-out (result null).
    /// `limits.http_timeout` is this call's budget: the tenant's time-out cut to what is left
    /// of the step's deadline (the sandbox enforces both whatever the effect does).
    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        limits: &'a Limits,
    ) -> EffectFuture<'a, Result<HttpResponse, String>>;
    fn nl_predict<'a>(
        &'a self,
        nlu_id: &'a str,
        text: &'a str,
        options: &'a Json,
    ) -> EffectFuture<'a, Result<Json, String>>;
}

/// The real world: system clock, OS randomness, reqwest on a small runtime of its own.
pub struct LiveEffects {
    rt: Option<tokio::runtime::Runtime>,
    client: reqwest::Client,
}

impl LiveEffects {
    pub fn new() -> anyhow::Result<LiveEffects> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("botbox-egress")
            .enable_all()
            .build()?;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()?;
        Ok(LiveEffects {
            rt: Some(rt),
            client,
        })
    }
}

impl Drop for LiveEffects {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which panics inside another runtime's async context.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Effects for LiveEffects {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    fn random_u64(&self) -> u64 {
        let mut b = [0u8; 8];
        getrandom_fill(&mut b);
        u64::from_le_bytes(b)
    }

    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        limits: &'a Limits,
    ) -> EffectFuture<'a, Result<HttpResponse, String>> {
        let client = self.client.clone();
        let req = req.clone();
        let limits = limits.clone();
        let timeout = limits.http_timeout;
        // The whole call (DNS, connect, headers, body) runs under the time-out on this
        // runtime; dropping the step's future aborts it, whatever the server does.
        let rt = self.rt.as_ref().expect("the runtime lives until drop");
        let task = Egress(rt.spawn(async move {
            tokio::time::timeout(timeout, send(client, req, &limits))
                .await
                .unwrap_or_else(|_| Err(format!("timed out after {} s", timeout.as_secs_f32())))
        }));
        Box::pin(async move {
            let mut task = task;
            (&mut task.0)
                .await
                .unwrap_or_else(|e| Err(format!("api call failed: {e}")))
        })
    }

    fn nl_predict<'a>(
        &'a self,
        nlu_id: &'a str,
        _text: &'a str,
        _options: &'a Json,
    ) -> EffectFuture<'a, Result<Json, String>> {
        Box::pin(std::future::ready(Err(format!(
            "NL model {nlu_id} is not available (NL Studio models arrive with their own issue)"
        ))))
    }
}

/// An api call on the egress runtime, aborted when the step lets go of it.
struct Egress(tokio::task::JoinHandle<Result<HttpResponse, String>>);

impl Drop for Egress {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn send(
    client: reqwest::Client,
    req: HttpRequest,
    limits: &Limits,
) -> Result<HttpResponse, String> {
    let url = reqwest::Url::parse(&req.url).map_err(|e| format!("invalid url {}: {e}", req.url))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme {} is not allowed", url.scheme()));
    }
    if !limits.allow_private_network {
        check_egress(&url).await?;
    }
    let method = reqwest::Method::from_bytes(req.method.as_bytes()).map_err(|e| e.to_string())?;
    let mut rb = client.request(method, url);
    for (k, v) in &req.headers {
        rb = rb.header(k, v);
    }
    if let Some(b) = req.body {
        rb = rb.body(b);
    }
    let mut resp = rb.send().await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        body.extend_from_slice(&chunk);
        if body.len() > limits.max_http_body {
            return Err(format!(
                "response body over the cap of {} bytes",
                limits.max_http_body
            ));
        }
    }
    Ok(HttpResponse {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Refuses loopback, private, link-local and unspecified addresses (§7.5 egress policy).
pub(crate) async fn check_egress(url: &reqwest::Url) -> Result<(), String> {
    let host = url.host_str().ok_or("url without host")?;
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<IpAddr> = match host.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| e.to_string())?
            .map(|a| a.ip())
            .collect(),
    };
    for ip in addrs {
        if is_private(ip) {
            return Err(format!("address {ip} of {host} is not allowed"));
        }
    }
    Ok(())
}

pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_private(IpAddr::V4(v4)))
        }
    }
}

fn getrandom_fill(buf: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(buf).is_ok() {
            return;
        }
    }
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (t >> (i * 8)) as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.4",
            "169.254.1.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }
}
