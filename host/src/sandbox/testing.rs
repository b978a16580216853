//! Conversation tests in the sandbox: a [`Stepper`] that runs each step of a YAML test case
//! in the wasm sandbox, with the test environment's clock, randomness and HTTP stubs. Used by
//! `botbox test` and by the differential tests.

use super::effects::Effects;
use super::limits::Limits;
use super::{Revision, Sandbox, SandboxError};
use runtime_core::host::{HttpRequest, HttpResponse};
use runtime_core::testing::{Stepper, TestEnv};
use runtime_core::{CompiledBot, ConverseResult, Message, Session, StepError};
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
    fn http(&self, req: &HttpRequest, _: &Limits) -> Result<HttpResponse, String> {
        self.0.lock().unwrap().http(req).map_err(|e| e.to_string())
    }
    fn nl_predict(&self, _: &str, _: &str, _: &Json) -> Result<Json, String> {
        Err("no NL model in conversation tests".into())
    }
}

/// Runs test steps of one revision in a sandbox.
pub struct SandboxStepper<'a> {
    pub sandbox: &'a Sandbox,
    pub revision: Revision,
}

impl Stepper for SandboxStepper<'_> {
    fn step(
        &mut self,
        _: &CompiledBot,
        session: &Session,
        msg: Message,
        env: &mut TestEnv,
    ) -> Result<ConverseResult, StepError> {
        let effects = Arc::new(EnvEffects(Mutex::new(env.clone())));
        let out = self
            .sandbox
            .step(&self.revision, session, &msg, effects.clone());
        *env = effects.0.lock().unwrap().clone();
        match out {
            Ok(o) => Ok(o.result),
            Err(SandboxError::Step(e)) => Err(e),
            Err(SandboxError::Internal(e)) => {
                Err(StepError::Aborted(format!("sandbox failure: {e:#}")))
            }
        }
    }
}
