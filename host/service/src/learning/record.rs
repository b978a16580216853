//! What a channel user's step records for replay, and the effects that record it and replay
//! it. A step reads one clock time (every read in the step sees it) and draws its randomness
//! from one seed; its api calls are answered by the world and recorded ([`Recorder`]), or
//! answered from that record and never made ([`Replayer`]).

use botbox_egress::redact;
use botbox_sandbox::effects::{EffectFuture, Effects, HttpResult, NlRequest};
use botbox_sandbox::limits::Limits;
use runtime_core::host::{HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What replaying one step needs, stored as JSON with its user's incoming line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The step's clock (Unix ms).
    pub t: i64,
    /// The step's random seed.
    pub s: u64,
    /// The step's api calls in the order they were made, with their answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<RecordedCall>,
    /// The step failed (a limit, too many responses): the session stayed as it was.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
}

/// One api call of a step and what it answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// [`call_key`] of the request: how a replayed call finds its answer without the URL
    /// being stored (it may carry credentials).
    pub k: String,
    /// The method and the redacted URL: what a difference names.
    pub m: String,
    pub u: String,
    /// The answer's status and body, or the error the step saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The answer was not kept: the step's answers were over [`RECORD_BODIES_MAX`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unkept: bool,
}

/// Bytes of api answers one step's record keeps at most (a step may make 200 calls of up to
/// 1 MiB each; its record is stored with every channel message, which a quota never
/// refuses). A call past it is recorded without its answer, and a replay that reaches it
/// fails rather than guess.
pub const RECORD_BODIES_MAX: usize = 256 * 1024;

impl RecordedCall {
    fn of(req: &HttpRequest, result: &HttpResult) -> RecordedCall {
        let (status, body, error) = match result {
            Ok(r) => (Some(r.status), Some(r.body.clone()), None),
            Err(e) => (None, None, Some(e.clone())),
        };
        RecordedCall {
            k: call_key(req),
            m: req.method.clone(),
            u: redact::url(&req.url).to_string(),
            status,
            body,
            error,
            unkept: false,
        }
    }

    /// This call without its answer.
    fn without_answer(mut self) -> RecordedCall {
        (self.status, self.body, self.error, self.unkept) = (None, None, None, true);
        self
    }

    /// `METHOD url` (redacted).
    fn named(&self) -> String {
        format!("{} {}", self.m, self.u)
    }

    fn answer(&self) -> HttpResult {
        match (self.status, &self.error) {
            (Some(status), None) => Ok(HttpResponse {
                status,
                body: self.body.clone().unwrap_or_default(),
            }),
            (_, e) => Err(e.clone().unwrap_or_else(|| "api call failed".into())),
        }
    }
}

/// The request's method, URL and body hashed (SHA-256, hex): two calls with the same key
/// ask the same thing. Headers are left out: they carry tokens that the transcripts do not
/// keep.
pub fn call_key(req: &HttpRequest) -> String {
    let mut h = Sha256::new();
    for part in [
        req.method.as_bytes(),
        req.url.as_bytes(),
        req.body.as_deref().unwrap_or("").as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    hex::encode(&h.finalize()[..16])
}

/// SplitMix64 over an atomic state: the step's random numbers from its seed.
struct StepRandom(AtomicU64);

impl StepRandom {
    fn new(seed: u64) -> StepRandom {
        StepRandom(AtomicU64::new(seed))
    }

    fn next(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A live step's effects: its clock and seed fixed, its api calls made through `inner` and
/// recorded. One per step (a few words and the calls' answers).
pub struct Recorder {
    inner: Arc<dyn Effects>,
    now: i64,
    seed: u64,
    random: StepRandom,
    calls: Mutex<Vec<RecordedCall>>,
}

impl Recorder {
    pub fn new(inner: Arc<dyn Effects>, now: i64, seed: u64) -> Recorder {
        Recorder {
            inner,
            now,
            seed,
            random: StepRandom::new(seed),
            calls: Mutex::default(),
        }
    }

    /// The record of the step so far.
    pub fn record(&self) -> StepRecord {
        StepRecord {
            t: self.now,
            s: self.seed,
            calls: self.calls.lock().unwrap().clone(),
            failed: false,
        }
    }
}

/// Records a call when dropped: with its answer, or as timed out when the step let go of
/// it first (the sandbox cut it at the time-out or the deadline).
struct Pending<'a> {
    calls: &'a Mutex<Vec<RecordedCall>>,
    req: &'a HttpRequest,
    result: Option<HttpResult>,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let result = self
            .result
            .take()
            .unwrap_or_else(|| Err("timed out".into()));
        let mut calls = self.calls.lock().unwrap();
        let kept: usize = calls
            .iter()
            .filter_map(|c| c.body.as_ref())
            .map(String::len)
            .sum();
        let call = RecordedCall::of(self.req, &result);
        let size = call.body.as_ref().map_or(0, String::len);
        calls.push(match kept + size > RECORD_BODIES_MAX {
            true => call.without_answer(),
            false => call,
        });
    }
}

impl Effects for Recorder {
    fn now_ms(&self) -> i64 {
        self.now
    }
    fn random_u64(&self) -> u64 {
        self.random.next()
    }
    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        limits: &'a Limits,
    ) -> EffectFuture<'a, HttpResult> {
        Box::pin(async move {
            let mut pending = Pending {
                calls: &self.calls,
                req,
                result: None,
            };
            let result = self.inner.http(req, limits).await;
            pending.result = Some(result.clone());
            result
        })
    }
    fn nl_predict<'a>(&'a self, req: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
        self.inner.nl_predict(req)
    }
    fn js_method(&self, name: Option<&str>) {
        self.inner.js_method(name)
    }
}

/// A replayed step's effects: the recorded clock and seed, api calls answered from the
/// record (in order among calls with the same key) and never made, NL predictions from
/// `inner`. A call that was not recorded fails, and the first is kept for the result.
pub struct Replayer {
    inner: Arc<dyn Effects>,
    now: i64,
    random: StepRandom,
    answers: Mutex<VecDeque<RecordedCall>>,
    unrecorded: Mutex<Option<String>>,
    unkept: Mutex<Option<String>>,
}

/// What a replayed step's api call that was not recorded gets.
pub const NOT_RECORDED: &str =
    "this call was not made when the conversation was recorded; a replay makes no call";

impl Replayer {
    pub fn new(inner: Arc<dyn Effects>, record: &StepRecord) -> Replayer {
        Replayer {
            inner,
            now: record.t,
            random: StepRandom::new(record.s),
            answers: Mutex::new(record.calls.iter().cloned().collect()),
            unrecorded: Mutex::default(),
            unkept: Mutex::default(),
        }
    }

    /// The first call the step made whose answer the record did not keep: `METHOD url`.
    pub fn unkept(&self) -> Option<String> {
        self.unkept.lock().unwrap().clone()
    }

    /// The first call the step made that was not recorded: `METHOD url` (redacted).
    pub fn unrecorded(&self) -> Option<String> {
        self.unrecorded.lock().unwrap().clone()
    }
}

impl Effects for Replayer {
    fn now_ms(&self) -> i64 {
        self.now
    }
    fn random_u64(&self) -> u64 {
        self.random.next()
    }
    fn http<'a>(&'a self, req: &'a HttpRequest, _: &'a Limits) -> EffectFuture<'a, HttpResult> {
        let key = call_key(req);
        let found = {
            let mut answers = self.answers.lock().unwrap();
            let at = answers.iter().position(|c| c.k == key);
            at.and_then(|i| answers.remove(i))
        };
        let out = match found {
            Some(call) if call.unkept => {
                let mut first = self.unkept.lock().unwrap();
                first.get_or_insert_with(|| call.named());
                Err(NOT_RECORDED.into())
            }
            Some(call) => call.answer(),
            None => {
                let mut first = self.unrecorded.lock().unwrap();
                first.get_or_insert_with(|| format!("{} {}", req.method, redact::url(&req.url)));
                Err(NOT_RECORDED.into())
            }
        };
        Box::pin(std::future::ready(out))
    }
    fn nl_predict<'a>(&'a self, req: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
        self.inner.nl_predict(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    struct World(AtomicU64);

    impl Effects for World {
        fn now_ms(&self) -> i64 {
            self.0.fetch_add(1, Ordering::Relaxed) as i64
        }
        fn random_u64(&self) -> u64 {
            self.0.fetch_add(1, Ordering::Relaxed)
        }
        fn http<'a>(&'a self, req: &'a HttpRequest, _: &'a Limits) -> EffectFuture<'a, HttpResult> {
            let n = self.0.fetch_add(1, Ordering::Relaxed);
            let body = format!("{} answer {n}", req.method);
            Box::pin(std::future::ready(Ok(HttpResponse { status: 200, body })))
        }
        fn nl_predict<'a>(&'a self, _: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
            Box::pin(std::future::ready(Err("no models".into())))
        }
    }

    fn get(url: &str) -> HttpRequest {
        HttpRequest {
            method: "GET".into(),
            url: url.into(),
            headers: Default::default(),
            body: None,
        }
    }

    #[test]
    fn a_replayed_step_sees_the_recorded_clock_randomness_and_answers() {
        let world: Arc<dyn Effects> = Arc::new(World(AtomicU64::new(100)));
        let limits = Limits::default();
        let rec = Recorder::new(world.clone(), 1_700_000_000_000, 42);
        let (a, b) = (
            get("https://a.example/x?key=secret"),
            get("https://b.example/"),
        );
        let live_answers: Vec<_> = [&a, &b, &a]
            .iter()
            .map(|r| rec.http(r, &limits).now_or_never().unwrap())
            .collect();
        let live_random: Vec<u64> = (0..3).map(|_| rec.random_u64()).collect();
        assert_eq!(rec.now_ms(), rec.now_ms());
        let record: StepRecord =
            serde_json::from_str(&serde_json::to_string(&rec.record()).unwrap()).unwrap();
        assert!(!serde_json::to_string(&record).unwrap().contains("secret"));

        let replay = Replayer::new(world, &record);
        assert_eq!(replay.now_ms(), 1_700_000_000_000);
        let answers: Vec<_> = [&a, &b, &a]
            .iter()
            .map(|r| replay.http(r, &limits).now_or_never().unwrap())
            .collect();
        assert_eq!(answers, live_answers);
        assert_eq!(
            (0..3).map(|_| replay.random_u64()).collect::<Vec<_>>(),
            live_random
        );
        assert_eq!(replay.unrecorded(), None);
        // A fourth call was never made live: it fails, and is named.
        let extra = replay.http(&a, &limits).now_or_never().unwrap();
        assert_eq!(extra, Err(NOT_RECORDED.to_string()));
        let named = replay.unrecorded().unwrap();
        assert!(named.starts_with("GET https://a.example/x"), "{named}");
        assert!(!named.contains("secret"), "{named}");
    }

    #[test]
    fn answers_past_the_records_budget_are_not_kept_and_a_replay_names_them() {
        struct Big;
        impl Effects for Big {
            fn now_ms(&self) -> i64 {
                0
            }
            fn random_u64(&self) -> u64 {
                0
            }
            fn http<'a>(
                &'a self,
                _: &'a HttpRequest,
                _: &'a Limits,
            ) -> EffectFuture<'a, HttpResult> {
                let body = "x".repeat(100 * 1024);
                Box::pin(std::future::ready(Ok(HttpResponse { status: 200, body })))
            }
            fn nl_predict<'a>(
                &'a self,
                _: NlRequest<'a>,
            ) -> EffectFuture<'a, Result<Json, String>> {
                Box::pin(std::future::pending())
            }
        }
        let rec = Recorder::new(Arc::new(Big), 0, 1);
        let limits = Limits::default();
        let reqs: Vec<_> = (0..4)
            .map(|i| get(&format!("https://big.example/{i}")))
            .collect();
        for r in &reqs {
            assert!(rec.http(r, &limits).now_or_never().unwrap().is_ok());
        }
        let record = rec.record();
        let kept: Vec<bool> = record.calls.iter().map(|c| !c.unkept).collect();
        assert_eq!(kept, [true, true, false, false]);
        let replay = Replayer::new(Arc::new(Big), &record);
        assert!(
            replay
                .http(&reqs[1], &limits)
                .now_or_never()
                .unwrap()
                .is_ok()
        );
        assert_eq!(replay.unkept(), None);
        assert!(
            replay
                .http(&reqs[2], &limits)
                .now_or_never()
                .unwrap()
                .is_err()
        );
        assert_eq!(
            replay.unkept().as_deref(),
            Some("GET https://big.example/2")
        );
    }

    #[test]
    fn a_call_the_step_let_go_of_is_recorded_as_timed_out() {
        struct Hangs;
        impl Effects for Hangs {
            fn now_ms(&self) -> i64 {
                0
            }
            fn random_u64(&self) -> u64 {
                0
            }
            fn http<'a>(
                &'a self,
                _: &'a HttpRequest,
                _: &'a Limits,
            ) -> EffectFuture<'a, HttpResult> {
                Box::pin(std::future::pending())
            }
            fn nl_predict<'a>(
                &'a self,
                _: NlRequest<'a>,
            ) -> EffectFuture<'a, Result<Json, String>> {
                Box::pin(std::future::pending())
            }
        }
        let rec = Recorder::new(Arc::new(Hangs), 0, 1);
        let (req, limits) = (get("https://slow.example/"), Limits::default());
        assert!(rec.http(&req, &limits).now_or_never().is_none());
        let calls = rec.record().calls;
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].error.as_deref(), Some("timed out"));
    }
}
