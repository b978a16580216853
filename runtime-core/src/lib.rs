//! runtime-core: the bot language of botbox.
//!
//! Pure and sans-I/O: it reads and validates bot definitions, compiles them, evaluates
//! expressions and runs conversation steps. Every effect (HTTP, NLU models, JavaScript, clock,
//! randomness) goes through the [`host::Host`] trait, which the sandbox guest and the tests
//! implement. No tokio, no sockets, no JS engine: it builds for `wasm32-wasip2` unchanged.
//!
//! May depend on: serde, regex and a YAML reader, and no crate of this workspace. Must
//! never do I/O, read a clock, block, or recurse without a bound over a tenant's input: a
//! bot file and a conversation are hostile input here.

pub mod compile;
pub mod engine;
pub mod expr;
pub mod host;
pub mod interp;
pub mod model;
pub mod regex;
pub mod session;
pub mod source;
pub mod value;

pub use compile::{Compiled, JsCode, JsProblem, JsSite, Rejected, compile, compile_source};
pub use engine::{StepError, converse, converse_owned};
pub use host::{Host, HostError, HttpRequest, HttpResponse, JsCall, JsOutcome};
pub use model::CompiledBot;
pub use session::{ConverseResult, Message, Response, Session};
pub mod testing;
