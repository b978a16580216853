//! The effects a conversation step needs, performed by whoever runs the engine: the sandbox
//! guest (through host imports), the native test harness, or a benchmark.

use crate::model::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpResponse {
    pub status: u16,
    pub body: String,
}

/// A JavaScript evaluation the engine cannot do itself.
#[derive(Debug, Clone, Copy)]
pub enum JsCall<'a> {
    /// An expression outside the fast subset, with its variables as a JSON object.
    Expr { src: &'a str, scope: &'a Json },
    /// A bot method called with JSON arguments.
    Method {
        method: &'a Method,
        args: &'a [Json],
        /// The indexes of the arguments whose state after the call the engine reads (a
        /// method may change its arguments in place); converting the others back would be
        /// work for nothing.
        read_back: &'a [usize],
        /// When not empty, only these top-level keys of the read-back arguments are read (a
        /// mapping method's ctx: `context` and `data`); the others are left out.
        read_keys: &'a [ReadKey<'a>],
    },
}

/// A top-level key of a read-back argument that the engine reads.
#[derive(Debug, Clone, Copy)]
pub struct ReadKey<'a> {
    pub name: &'a str,
    /// The keys starting with `$` inside it are left out: the engine's meta keys, which it
    /// recomputes every step and never stores.
    pub without_meta: bool,
}

/// The result of a JS call: the returned value (`None` = undefined) and, for a method, its
/// arguments as they are after the call: those of `read_back`, the others null.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsOutcome {
    pub value: Option<Json>,
    pub args: Vec<Json>,
}

/// How an effect failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HostError {
    /// The effect failed at its site (a JS exception, a network error): the engine logs it and
    /// goes on (condition false, result null, ...).
    #[error("{0}")]
    Failed(String),
    /// A limit was hit (fuel, memory, deadline, host-call cap): the whole step is aborted.
    #[error("{0}")]
    Abort(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Info,
    UserError,
}

pub trait Host {
    /// Current time, epoch milliseconds.
    fn now_ms(&mut self) -> i64;
    /// Uniform random bits (ids, text variants).
    fn random_u64(&mut self) -> u64;
    /// An HTTP request of an api action. The host enforces the time-out and size caps.
    fn http(&mut self, req: &HttpRequest) -> Result<HttpResponse, HostError>;
    /// Raw prediction of an NL Studio model: `{entity: [{type, score, value, label?, ...}]}`.
    fn nl_predict(&mut self, nlu_id: &str, text: &str, options: &Json) -> Result<Json, HostError>;
    /// JavaScript evaluation.
    fn js(&mut self, call: JsCall<'_>) -> Result<JsOutcome, HostError>;
    /// Told of every state move of the step (count so far); may abort the step.
    fn state_moved(&mut self, _moves: u32) -> Result<(), HostError> {
        Ok(())
    }
    fn log(&mut self, _level: LogLevel, _message: &str) {}
}
