//! Conversation tests in the sandbox: a [`Stepper`] that runs each step of a YAML test case
//! in the wasm sandbox, with the test environment's clock, randomness and HTTP stubs. Used by
//! `botbox test` and by the differential tests.

use super::effects::{EffectFuture, Effects, NlRequest};
use super::limits::Limits;
use super::{Revision, Sandbox, SandboxError, block_on};
use runtime_core::StepError;
use runtime_core::host::{HttpRequest, HttpResponse};
use runtime_core::testing::{StepInput, Stepped, Stepper, TestEnv};
use serde_json::Value as Json;
use std::sync::{Arc, Mutex};

/// Effects over a test environment (clock, deterministic randomness, HTTP stubs).
pub struct EnvEffects(pub Mutex<TestEnv>);

impl Effects for EnvEffects {
    fn now_ms(&self) -> i64 {
        self.0.lock().unwrap().now
    }
    fn random_u64(&self) -> u64 {
        self.0.lock().unwrap().random_u64()
    }
    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        _: &'a Limits,
    ) -> EffectFuture<'a, Result<HttpResponse, String>> {
        let out = self.0.lock().unwrap().http(req).map_err(|e| e.to_string());
        Box::pin(std::future::ready(out))
    }
    fn nl_predict<'a>(&'a self, _: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
        Box::pin(std::future::ready(Err(
            "type nl NLUs are trained models on the server: run these tests with `botbox test --remote` (the server's latest revision, with its NLU)".into()
        )))
    }
}

/// The tenant conversation tests run as.
pub const TENANT: &str = "local";

/// Runs test steps of one revision in a sandbox (on this thread: not in an async context).
pub struct SandboxStepper<'a> {
    pub sandbox: &'a Sandbox,
    pub revision: Revision,
}

impl Stepper for SandboxStepper<'_> {
    fn step(&mut self, input: StepInput<'_>) -> Stepped {
        let effects = Arc::new(EnvEffects(Mutex::new(input.env.clone())));
        let (session, msg) = (input.session, &input.msg);
        let out =
            block_on(
                self.sandbox
                    .step(TENANT, &self.revision, session, msg, effects.clone()),
            );
        *input.env = effects.0.lock().unwrap().clone();
        match out {
            Ok(o) => Ok(o.result),
            Err(SandboxError::Step(e)) => Err(e),
            Err(SandboxError::Internal(e)) => {
                Err(StepError::Aborted(format!("sandbox failure: {e:#}")))
            }
        }
    }
}
