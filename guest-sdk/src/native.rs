//! runtime-core + boa in-process, with a test environment's clock, randomness and HTTP stubs.

use crate::js::{HostClock, JsRuntime};
use runtime_core::host::{Host, HostError, HttpRequest, HttpResponse, JsCall, JsOutcome, LogLevel};
use runtime_core::model::CompiledBot;
use runtime_core::testing::{StepInput, Stepped, Stepper, TestEnv};
use serde_json::Value as Json;
use std::cell::Cell;
use std::rc::Rc;

/// A [`Host`] over a [`TestEnv`], with JavaScript on a per-step [`JsRuntime`].
pub struct NativeHost<'e> {
    pub env: &'e mut TestEnv,
    pub js: JsRuntime,
    pub logs: Vec<String>,
    /// The environment's time as JavaScript reads it (set before each JS call).
    pub js_now: Rc<Cell<i64>>,
}

impl<'e> NativeHost<'e> {
    /// A host over `env` for `bot`, JavaScript on its own clock cell.
    pub fn new(env: &'e mut TestEnv, bot: &CompiledBot) -> NativeHost<'e> {
        let js_now = Rc::new(Cell::new(env.now));
        let cell = js_now.clone();
        NativeHost {
            env,
            js: JsRuntime::new(HostClock::new(move || cell.get(), bot.timezone)),
            logs: vec![],
            js_now,
        }
    }
}

impl Host for NativeHost<'_> {
    fn now_ms(&mut self) -> i64 {
        self.env.now
    }
    fn random_u64(&mut self) -> u64 {
        self.env.random_u64()
    }
    fn http(&mut self, req: &HttpRequest) -> Result<HttpResponse, HostError> {
        self.env.http(req)
    }
    fn nl_predict(
        &mut self,
        nlu_id: &str,
        _text: &str,
        _options: &Json,
    ) -> Result<Json, HostError> {
        Err(HostError::Failed(format!(
            "no NL model {nlu_id} in this environment"
        )))
    }
    fn js(&mut self, call: JsCall<'_>) -> Result<JsOutcome, HostError> {
        self.js_now.set(self.env.now);
        self.js.call(call)
    }
    fn log(&mut self, _level: LogLevel, message: &str) {
        self.logs.push(message.to_string());
    }
}

/// Runs steps natively, a fresh JS runtime per step (the sandbox keeps one per instance and
/// resets it after each step: the same answers).
#[derive(Default)]
pub struct NativeStepper;

impl Stepper for NativeStepper {
    fn step(&mut self, input: StepInput<'_>) -> Stepped {
        let mut host = NativeHost::new(input.env, input.bot);
        runtime_core::converse(input.bot, input.session, input.msg, &mut host)
    }
}
