//! Load shedding: caps on requests in flight, and a time-out on each request's answer.
//!
//! Past capacity a server that queues without bound answers everyone late; one that sheds
//! answers most on time and tells the rest when to come back. Every request counts against
//! the server's cap ([`Overload::max_in_flight`]) and its source's
//! ([`Overload::max_in_flight_per_source`]); past either it gets 503 with `Retry-After: 1`
//! at once, before any work (nothing ran, so a provider's retry is safe). A source is the
//! credential a request carries (its `Authorization` header), else the channel of a webhook
//! (`/webhooks/{channel}`), else the peer's address: a flood from one key, one channel or
//! one address fills its own cap and leaves the others' room. Then the answer must start
//! within [`Overload::request_timeout`], or the request gets 503 (a webhook's step goes on to
//! its end in its own task: the provider's retry finds it done).
//!
//! Streams count until their headers are sent: an open `/v1/chat/…/stream` holds no slot.
//!
//! Cost per request: two short lock holds on one map and a timer.

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The limits ([`crate::ApiConfig::overload`]).
#[derive(Debug, Clone)]
pub struct Overload {
    /// Requests in flight in the whole server (default 4096).
    pub max_in_flight: usize,
    /// Requests in flight per source (default 256: more than one provider's or client's
    /// connections usually carry at once).
    pub max_in_flight_per_source: usize,
    /// Time for a request's answer to start (default 60 s; an agent run answered as JSON
    /// waits for the run).
    pub request_timeout: Duration,
}

impl Default for Overload {
    fn default() -> Self {
        Overload {
            max_in_flight: 4096,
            max_in_flight_per_source: 256,
            request_timeout: Duration::from_secs(60),
        }
    }
}

/// The counts in flight, per source and in all.
#[derive(Default)]
pub struct InFlight {
    counts: Mutex<(usize, HashMap<u64, usize>)>,
    /// Keys the map by a hash of the source: no credential is kept.
    hasher: std::hash::RandomState,
}

/// A request's place in the counts, given back on drop.
struct Slot<'a>(&'a InFlight, u64);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut c = self.0.counts.lock().unwrap();
        c.0 -= 1;
        if let Some(n) = c.1.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                c.1.remove(&self.1);
            }
        }
    }
}

impl InFlight {
    fn take(&self, limits: &Overload, source: u64) -> Option<Slot<'_>> {
        let mut c = self.counts.lock().unwrap();
        let mine = c.1.get(&source).copied().unwrap_or(0);
        if c.0 >= limits.max_in_flight || mine >= limits.max_in_flight_per_source {
            return None;
        }
        c.0 += 1;
        *c.1.entry(source).or_default() += 1;
        Some(Slot(self, source))
    }

    fn source(&self, req: &Request) -> u64 {
        let mut h = self.hasher.build_hasher();
        if let Some(auth) = req.headers().get(header::AUTHORIZATION) {
            (0u8, auth.as_bytes()).hash(&mut h);
        } else if let Some(channel) = req.uri().path().strip_prefix("/webhooks/") {
            (1u8, channel.split('/').next().unwrap_or("")).hash(&mut h);
        } else if let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>() {
            (2u8, peer.ip()).hash(&mut h);
        }
        h.finish()
    }
}

/// The middleware: sheds past the caps, bounds the wait for the answer.
pub async fn shed(
    limits: Arc<Overload>,
    counts: Arc<InFlight>,
    req: Request,
    next: Next,
) -> Response {
    let source = counts.source(&req);
    let Some(_slot) = counts.take(&limits, source) else {
        metrics::counter!("botbox_refusals_total", "reason" => "overload").increment(1);
        return unavailable(
            req.uri().path(),
            "too many requests in flight from this client or in all; retry in a second",
        );
    };
    let path = req.uri().path().to_owned();
    match tokio::time::timeout(limits.request_timeout, next.run(req)).await {
        Ok(res) => res,
        Err(_) => {
            metrics::counter!("botbox_refusals_total", "reason" => "timeout").increment(1);
            unavailable(
                &path,
                &format!(
                    "the answer did not start within {} s; retry later",
                    limits.request_timeout.as_secs()
                ),
            )
        }
    }
}

/// 503 with `Retry-After: 1`: problem+json under `/v1` (as every `/v1` error), else the
/// project API's plain text.
fn unavailable(path: &str, detail: &str) -> Response {
    let mut res = if path.starts_with("/v1/") {
        crate::v1_problem::V1Error(botbox_service::agent::Problem::unavailable(detail))
            .into_response()
    } else {
        // The project API's 503 (it carries `Retry-After: 1` too).
        return crate::ApiError::Unavailable(detail.to_owned()).into_response();
    };
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-source cap refuses only that source; the total cap everyone; slots come back.
    #[test]
    fn caps_per_source_and_in_all() {
        let limits = Overload {
            max_in_flight: 3,
            max_in_flight_per_source: 2,
            ..Overload::default()
        };
        let counts = InFlight::default();
        let a1 = counts.take(&limits, 1).unwrap();
        let _a2 = counts.take(&limits, 1).unwrap();
        assert!(counts.take(&limits, 1).is_none(), "source 1 is at its cap");
        let _b1 = counts.take(&limits, 2).unwrap();
        assert!(
            counts.take(&limits, 3).is_none(),
            "the server is at its cap"
        );
        drop(a1);
        assert!(counts.take(&limits, 3).is_some(), "a slot came back");
        drop(_a2);
        drop(_b1);
        assert_eq!(
            counts.counts.lock().unwrap().1.len(),
            0,
            "no source left in the map"
        );
    }
}
