//! Test support shared by the crates whose tests and benchmarks run bots, the way spin's
//! testkit serves its crates: the example bots read as `botbox push` reads them, and
//! [`StubEffects`], a stand-in for the outside world behind the sandbox's
//! [`Effects`] (a fixed clock, deterministic randomness, api calls answered by the test).
//!
//! May depend on: `runtime-core`, `botbox-botfiles` and `botbox-sandbox` (for the `Effects`
//! trait) only, so testing the sandbox builds no storage, service or HTTP server code. Never
//! a dependency of production code, and never reaches the network: an api call is answered
//! by the test's function or not at all.

use botbox_sandbox::effects::{EffectFuture, Effects, NlRequest};
use botbox_sandbox::limits::Limits;
use runtime_core::CompiledBot;
use runtime_core::host::{HttpRequest, HttpResponse};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The repository's `examples/` folder.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Every example bot's folder, sorted by name.
pub fn example_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("the examples folder")
        .map(|e| e.expect("an examples entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Example bot `name`, read as `botbox push` reads it (includes expanded), compiled.
/// Panics with the bot's problems when it does not compile.
pub fn example(name: &str) -> CompiledBot {
    let path = examples_dir().join(name).join("bot.yml");
    let loaded = botbox_botfiles::load(&path).unwrap_or_else(|e| panic!("{e}"));
    runtime_core::compile(&loaded.doc)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .bot
}

/// What a stubbed api call does.
pub enum Reply {
    /// Answers with this status and body.
    Answer(HttpResponse),
    /// Fails with this message, as a refused or unreachable address does.
    Fail(String),
    /// Never answers: the sandbox's own time-outs must end the call.
    Hang,
}

type Handler = Box<dyn Fn(&HttpRequest) -> Reply + Send + Sync>;

/// The outside world as a test sets it: the clock reads [`StubEffects::NOW_MS`], randomness
/// is a fixed sequence, api calls go to the test's handler, NL predictions fail.
pub struct StubEffects {
    random: AtomicU64,
    http: Handler,
}

impl StubEffects {
    /// The time every step sees (2023-11-14T22:13:20Z).
    pub const NOW_MS: i64 = 1_700_000_000_000;

    /// No network: every api call fails with "offline".
    pub fn offline() -> StubEffects {
        StubEffects::answering(|_| Reply::Fail("offline".into()))
    }

    /// Api calls answered by `handler`.
    pub fn answering(handler: impl Fn(&HttpRequest) -> Reply + Send + Sync + 'static) -> Self {
        StubEffects {
            random: AtomicU64::new(0),
            http: Box::new(handler),
        }
    }
}

impl Effects for StubEffects {
    fn now_ms(&self) -> i64 {
        StubEffects::NOW_MS
    }

    fn random_u64(&self) -> u64 {
        self.random
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
    }

    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        _: &'a Limits,
    ) -> EffectFuture<'a, Result<HttpResponse, String>> {
        match (self.http)(req) {
            Reply::Answer(r) => Box::pin(std::future::ready(Ok(r))),
            Reply::Fail(e) => Box::pin(std::future::ready(Err(e))),
            Reply::Hang => Box::pin(std::future::pending()),
        }
    }

    fn nl_predict<'a>(&'a self, _: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
        Box::pin(std::future::ready(Err("no NL models in this test".into())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_reads_and_compiles() {
        let dirs = example_dirs();
        assert!(dirs.len() > 5, "{dirs:?}");
        for d in dirs {
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            let bot = example(&name);
            assert!(!bot.flows.is_empty(), "{name} has flows");
        }
    }
}
