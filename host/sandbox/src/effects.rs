//! What the sandbox's host functions do in the world: the clock, randomness, outbound HTTP of
//! api actions and NL predictions. A trait, so that the sandbox needs neither the network
//! nor NL models: the service layer implements it for the real world, tests stub it.

use super::NlScope;
use super::limits::Limits;
use runtime_core::host::{HttpRequest, HttpResponse};
use serde_json::Value as Json;
use std::future::Future;
use std::pin::Pin;

/// A host call's effect in flight. The step waits for it suspended, holding no CPU slot;
/// dropping it cancels the effect (the step hit its deadline, or was dropped).
pub type EffectFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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
    /// A raw prediction `{entity: [{type, score, value, label?, start, end}]}` of the NL
    /// Studio model `nlu_id` (`<account>:<nlu name>`) for a bot running for `scope`. `Err`
    /// is a clear message (unknown or private NLU, no model): the step logs a user error and
    /// the NLU's output is null.
    fn nl_predict<'a>(
        &'a self,
        scope: &'a NlScope,
        nlu_id: &'a str,
        text: &'a str,
        options: &'a Json,
    ) -> EffectFuture<'a, Result<Json, String>>;
    /// Informational: the step enters the bot's JavaScript method `name` (`Some`), or leaves
    /// the method it entered (`None`). The agent API streams these as tool calls.
    fn js_method(&self, _name: Option<&str>) {}
}
