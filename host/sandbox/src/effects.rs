//! What the sandbox's host functions do in the world: the clock, randomness, outbound HTTP of
//! api actions and NL predictions. A trait, so that the sandbox needs neither the network
//! nor NL models: the service layer implements it for the real world, tests stub it. A
//! [`Layer`] is effects over other effects (a run's tool-call stream, the console's call log).

use super::NlScope;
use super::limits::Limits;
use runtime_core::host::{HttpRequest, HttpResponse};
use serde_json::Value as Json;
use std::future::Future;
use std::pin::Pin;

/// A host call's effect in flight. The step waits for it suspended, holding no CPU slot;
/// dropping it cancels the effect (the step hit its deadline, or was dropped).
pub type EffectFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An api action's answer, or why there is none.
pub type HttpResult = Result<HttpResponse, String>;

/// A prediction's question: the NL Studio model `nlu_id` (`<account>:<nlu name>`) asked
/// about `text`, with the NLU's `options`, for a bot running for `scope`.
#[derive(Clone, Copy)]
pub struct NlRequest<'a> {
    pub scope: &'a NlScope,
    pub nlu_id: &'a str,
    pub text: &'a str,
    pub options: &'a Json,
}

pub trait Effects: Send + Sync {
    fn now_ms(&self) -> i64;
    fn random_u64(&self) -> u64;
    /// An api action's request. `Err` is a network failure or time-out (result null).
    /// `limits.http_timeout` is this call's budget: the tenant's time-out cut to what is left
    /// of the step's deadline (the sandbox enforces both whatever the effect does). Called
    /// inside the call's `api_call` span, whose `url` field the effect may record, redacted.
    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        limits: &'a Limits,
    ) -> EffectFuture<'a, Result<HttpResponse, String>>;
    /// A raw prediction `{entity: [{type, score, value, label?, start, end}]}`. `Err` is a
    /// clear message (unknown or private NLU, no model): the step logs a user error and the
    /// NLU's output is null.
    fn nl_predict<'a>(&'a self, req: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>>;
    /// Informational: the step enters the bot's JavaScript method `name` (`Some`), or leaves
    /// the method it entered (`None`). The agent API streams these as tool calls.
    fn js_method(&self, _name: Option<&str>) {}
}

/// An api call as a [`Layer`] sees it: [`Effects::http`]'s arguments.
#[derive(Clone, Copy)]
pub struct HttpCall<'a> {
    pub req: &'a HttpRequest,
    pub limits: &'a Limits,
}

/// Effects over other effects: a layer handles the api calls and JavaScript methods, and
/// leaves the clock, randomness and NL predictions to [`Layer::inner`]. Every layer is
/// [`Effects`].
pub trait Layer: Send + Sync {
    /// The effects under this layer.
    fn inner(&self) -> &dyn Effects;
    /// [`Effects::http`]: the layer performs the call, usually through the inner effects.
    fn on_http<'a>(&'a self, call: HttpCall<'a>) -> EffectFuture<'a, HttpResult>;
    /// [`Effects::js_method`]; the inner effects are not told.
    fn on_js_method(&self, name: Option<&str>);
}

impl<L: Layer> Effects for L {
    fn now_ms(&self) -> i64 {
        self.inner().now_ms()
    }
    fn random_u64(&self) -> u64 {
        self.inner().random_u64()
    }
    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        limits: &'a Limits,
    ) -> EffectFuture<'a, HttpResult> {
        self.on_http(HttpCall { req, limits })
    }
    fn nl_predict<'a>(&'a self, req: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
        self.inner().nl_predict(req)
    }
    fn js_method(&self, name: Option<&str>) {
        self.on_js_method(name)
    }
}
