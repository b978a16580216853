//! The real world behind the sandbox's [`Effects`]: the system clock, OS randomness, api
//! actions through the egress module, and predictions of NL Studio models.

use crate::nlu::NluService;
use botbox_egress::{Egress, Outbound, Use, redact};
use botbox_sandbox::effects::{EffectFuture, Effects, HttpCall, HttpResult, Layer, NlRequest};
use botbox_sandbox::limits::Limits;
use runtime_core::host::{HttpRequest, HttpResponse};
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The real world: system clock, OS randomness, api calls through the egress module
/// ([`botbox_egress`]: its policy, redirects followed with every hop checked, caps) on a
/// small runtime of its own.
pub struct LiveEffects {
    rt: Option<tokio::runtime::Runtime>,
    egress: Arc<Egress>,
    /// NL Studio models (`None`: predictions fail, as in tests of the sandbox alone).
    nlu: Option<Arc<NluService>>,
    /// The server's runtime (where the database pool lives), when built inside one: NL
    /// predictions read models through it.
    main: Option<tokio::runtime::Handle>,
}

impl LiveEffects {
    pub fn new(egress: Arc<Egress>) -> anyhow::Result<LiveEffects> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("botbox-egress")
            .enable_all()
            .build()?;
        Ok(LiveEffects {
            rt: Some(rt),
            egress,
            nlu: None,
            main: tokio::runtime::Handle::try_current().ok(),
        })
    }

    /// Predictions of bots' `nl` NLUs come from `nlu`.
    pub fn with_nlu(mut self, nlu: Arc<NluService>) -> LiveEffects {
        self.nlu = Some(nlu);
        self
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

    /// The step's random seed: from the thread's generator (ChaCha, seeded by the OS), so a
    /// step makes no system call for it.
    fn random_u64(&self) -> u64 {
        rand::random()
    }

    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        limits: &'a Limits,
    ) -> EffectFuture<'a, Result<HttpResponse, String>> {
        tracing::Span::current().record("url", tracing::field::display(redact::url(&req.url)));
        let egress = self.egress.clone();
        let req = req.clone();
        let timeout = limits.http_timeout;
        let cap = limits.max_http_body;
        // The whole call (DNS, connect, redirects, headers, body) runs under the time-out on
        // this runtime; dropping the step's future aborts it, whatever the server does.
        let rt = self.rt.as_ref().expect("the runtime lives until drop");
        let task = InFlight(rt.spawn(async move {
            let out = egress
                .call(
                    Use::ApiAction,
                    Outbound {
                        method: &req.method,
                        url: &req.url,
                        headers: &req.headers,
                        body: req.body.map(String::into_bytes),
                    },
                    timeout,
                    cap,
                )
                .await;
            match out {
                Ok(a) => Ok(HttpResponse {
                    status: a.status,
                    body: String::from_utf8_lossy(&a.body).into_owned(),
                }),
                Err(e) => Err(e.to_string()),
            }
        }));
        Box::pin(async move {
            let mut task = task;
            (&mut task.0)
                .await
                .unwrap_or_else(|e| Err(format!("api call failed: {e}")))
        })
    }

    fn nl_predict<'a>(&'a self, req: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
        let NlRequest {
            scope,
            nlu_id,
            text,
            options: _,
        } = req;
        let Some(nlu) = self.nlu.clone() else {
            return Box::pin(std::future::ready(Err(format!(
                "NL model {nlu_id}: no NL models in this environment"
            ))));
        };
        let (scope, nlu_id, text) = (scope.clone(), nlu_id.to_owned(), text.to_owned());
        let call = async move { nlu.predict_for_bot(&scope, &nlu_id, &text).await };
        let handle = match &self.main {
            Some(h) => h.clone(),
            None => self
                .rt
                .as_ref()
                .expect("the runtime lives until drop")
                .handle()
                .clone(),
        };
        let task = InFlight(handle.spawn(call));
        Box::pin(async move {
            let mut task = task;
            (&mut task.0)
                .await
                .unwrap_or_else(|e| Err(format!("NL prediction failed: {e}")))
        })
    }
}

/// A host call's effect on a runtime, aborted when the step lets go of it.
struct InFlight<T>(tokio::task::JoinHandle<Result<T, String>>);

impl<T> Drop for InFlight<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Bytes of an api answer shown (in the agent stream, in the console's step) at most.
pub const SHOWN_BODY_MAX: usize = 4096;

/// An api call's outcome as the author's tools show it: `{status, body}` (the body cut at
/// [`SHOWN_BODY_MAX`] bytes), or the error. Headers are never shown: they may carry the
/// tenant's secrets.
pub fn shown_answer(result: &Result<HttpResponse, String>) -> Result<Json, String> {
    result.as_ref().map_err(Clone::clone).map(|r| {
        let mut body = r.body.clone();
        if body.len() > SHOWN_BODY_MAX {
            let mut cut = SHOWN_BODY_MAX;
            while !body.is_char_boundary(cut) {
                cut -= 1;
            }
            body.truncate(cut);
        }
        serde_json::json!({"status": r.status, "body": body})
    })
}

/// Effects that keep a log of a step's calls for its author (the console's debug panel):
/// each api call with its method, URL and answer or error, and each JavaScript method run.
pub struct CallLog {
    inner: Arc<dyn Effects>,
    calls: std::sync::Mutex<Vec<Json>>,
}

/// Calls logged per step at most (a bot looping over api calls is cut at its host-call cap
/// anyway).
const CALLS_MAX: usize = 50;

impl CallLog {
    pub fn new(inner: Arc<dyn Effects>) -> CallLog {
        CallLog {
            inner,
            calls: Default::default(),
        }
    }

    /// The calls so far, in order.
    pub fn take(&self) -> Vec<Json> {
        std::mem::take(&mut self.calls.lock().unwrap())
    }

    fn push(&self, call: Json) {
        let mut calls = self.calls.lock().unwrap();
        if calls.len() < CALLS_MAX {
            calls.push(call);
        }
    }
}

impl Layer for CallLog {
    fn inner(&self) -> &dyn Effects {
        &*self.inner
    }
    fn on_http<'a>(&'a self, call: HttpCall<'a>) -> EffectFuture<'a, HttpResult> {
        let HttpCall { req, limits } = call;
        Box::pin(async move {
            let result = self.inner.http(req, limits).await;
            let mut call = serde_json::json!({"type": "api", "method": req.method, "url": req.url});
            match shown_answer(&result) {
                Ok(answer) => call["result"] = answer,
                Err(e) => call["error"] = Json::String(e),
            }
            self.push(call);
            result
        })
    }
    fn on_js_method(&self, name: Option<&str>) {
        if let Some(name) = name {
            self.push(serde_json::json!({"type": "method", "name": name}));
        }
    }
}
