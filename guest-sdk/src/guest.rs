//! The sandbox guest: exports `load` and `converse` of the `bot-runtime` world, and implements
//! runtime-core's `Host` with the world's imports plus boa for JavaScript.
//!
//! The guest keeps the loaded bot between steps, and the last sessions it produced, each under
//! a tag the host chose, so that a conversation's next step can name its session instead of
//! sending it again. A kept session is only ever handed to the step that names its tag. One
//! `JsRuntime` serves the instance's steps and puts its context back as it was after each
//! one (see `js.rs`), so nothing one conversation does in JavaScript reaches the next.

use crate::js::{HostClock, JsRuntime};
use runtime_core::engine::StepError as CoreError;
use runtime_core::host::{Host, HostError, HttpRequest, HttpResponse, JsCall, JsOutcome, LogLevel};
use runtime_core::model::CompiledBot;
use runtime_core::session::{Message, Session};
use serde_json::Value as Json;
use std::cell::RefCell;
use std::collections::VecDeque;

/// Small blocks from free lists, the rest from talc (see `alloc.rs`). The guest is
/// single-threaded (no `atomics`), which both assume.
#[global_allocator]
static ALLOCATOR: crate::alloc::SmallBlocks<talc::wasm::WasmDynamicTalc> =
    crate::alloc::SmallBlocks::new(talc::wasm::new_wasm_dynamic_allocator());

wit_bindgen::generate!({ path: "wit", world: "bot-runtime" });

use botbox::bot::host as imports;

thread_local! {
    static BOT: RefCell<Option<CompiledBot>> = const { RefCell::new(None) };
    /// Sessions of earlier steps, by the host's tag, oldest first (see [`keep`]).
    static KEPT: RefCell<VecDeque<(u64, Session, usize)>> = const { RefCell::new(VecDeque::new()) };
    /// JavaScript for the loaded bot, its context kept between steps.
    static JS: RefCell<Option<JsRuntime>> = const { RefCell::new(None) };
}

/// Sessions kept at most, and their JSON's total size at most. The host mirrors the count
/// rule; a session dropped for size is reported as `not-kept` and sent again as JSON.
pub const KEEP_MAX: usize = 16;
const KEEP_MAX_BYTES: usize = 256 * 1024;

/// Keeps `session` under `tag`, dropping the oldest beyond the caps. False when it is too big.
fn keep(tag: u64, session: Session, bytes: usize) -> bool {
    if bytes > KEEP_MAX_BYTES / 4 {
        return false;
    }
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        k.push_back((tag, session, bytes));
        while k.len() > KEEP_MAX || k.iter().map(|e| e.2).sum::<usize>() > KEEP_MAX_BYTES {
            k.pop_front();
        }
    });
    true
}

/// Takes the session kept under `tag`: each kept session serves one step.
fn take_kept(tag: u64) -> Option<Session> {
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        let i = k.iter().position(|e| e.0 == tag)?;
        k.remove(i).map(|e| e.1)
    })
}

struct Component;

impl Guest for Component {
    fn load(compiled_bot: String) -> Result<(), String> {
        let bot: CompiledBot = serde_json::from_str(&compiled_bot)
            .map_err(|e| format!("compiled bot does not parse: {e}"))?;
        if bot.format != runtime_core::model::COMPILED_FORMAT {
            // The host recompiles other formats from source before loading them.
            return Err(format!(
                "compiled bot of format {}; this guest runs format {}",
                bot.format,
                runtime_core::model::COMPILED_FORMAT
            ));
        }
        let mut js = JsRuntime::new(
            HostClock::new(imports::now_ms, bot.timezone).with_random(imports::random_u64),
        );
        if bot.uses_js {
            js.prepare();
        }
        JS.with(|cell| *cell.borrow_mut() = Some(js));
        BOT.with(|b| *b.borrow_mut() = Some(bot));
        Ok(())
    }

    fn check_js(sites: String) -> Result<String, String> {
        let sites: Vec<runtime_core::JsSite> =
            serde_json::from_str(&sites).map_err(|e| format!("sites do not parse: {e}"))?;
        let problems = crate::js::check_sites(&sites);
        Ok(serde_json::to_string(&problems).expect("problems serialise"))
    }

    fn converse(session: SessionIn, keep_as: u64, message: String) -> Result<StepOut, StepError> {
        let session: Session = match session {
            SessionIn::Json(json) => serde_json::from_str(&json)
                .map_err(|e| StepError::InvalidMessage(format!("session: {e}")))?,
            SessionIn::Kept(tag) => take_kept(tag).ok_or(StepError::NotKept(tag))?,
        };
        let message = Message::from_json_text(&message).map_err(StepError::InvalidMessage)?;
        BOT.with(|b| {
            let b = b.borrow();
            let Some(bot) = b.as_ref() else {
                return Err(StepError::NotLoaded);
            };
            let (result, logs) = JS.with(|js| {
                let mut js = js.borrow_mut();
                let js = js.as_mut().expect("loaded with the bot");
                let result =
                    runtime_core::converse_owned(bot, session, message, &mut WasmHost { js });
                (result, js.finish_step())
            });
            for line in logs {
                imports::log(imports::LogLevel::Console, &line);
            }
            match result {
                Ok(r) => {
                    let (report, session) = r.into_parts();
                    let report = crate::json::to_string(&report).expect("reports serialise");
                    let json = crate::json::to_string(&session).expect("sessions serialise");
                    let kept = keep_as != 0 && keep(keep_as, session, json.len());
                    Ok(StepOut {
                        report,
                        session: json,
                        kept,
                    })
                }
                Err(CoreError::MaxRecursion(n)) => Err(StepError::MaxRecursion(n)),
                Err(CoreError::Aborted(m)) => Err(StepError::Aborted(m)),
                Err(CoreError::InvalidMessage(m)) => Err(StepError::InvalidMessage(m)),
            }
        })
    }
}

struct WasmHost<'a> {
    js: &'a mut JsRuntime,
}

impl Host for WasmHost<'_> {
    fn now_ms(&mut self) -> i64 {
        imports::now_ms()
    }
    fn random_u64(&mut self) -> u64 {
        imports::random_u64()
    }
    fn http(&mut self, req: &HttpRequest) -> Result<HttpResponse, HostError> {
        let text = imports::http(&serde_json::to_string(req).expect("requests serialise"))
            .map_err(HostError::Failed)?;
        serde_json::from_str(&text)
            .map_err(|e| HostError::Failed(format!("bad response from host: {e}")))
    }
    fn nl_predict(&mut self, nlu_id: &str, text: &str, options: &Json) -> Result<Json, HostError> {
        let out =
            imports::nl_predict(nlu_id, text, &options.to_string()).map_err(HostError::Failed)?;
        serde_json::from_str(&out).map_err(|e| HostError::Failed(e.to_string()))
    }
    fn js(&mut self, call: JsCall<'_>) -> Result<JsOutcome, HostError> {
        let site = match call {
            JsCall::Method { method, .. } => format!("method {}", method.name),
            JsCall::Expr { src, .. } => format!("expression \"{src}\""),
        };
        imports::enter_js(&site);
        let out = self.js.call(call);
        imports::enter_js("");
        out
    }
    fn state_moved(&mut self, moves: u32) -> Result<(), HostError> {
        imports::state_moved(moves).map_err(HostError::Abort)
    }
    fn log(&mut self, level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Info => imports::LogLevel::Info,
            LogLevel::UserError => imports::LogLevel::UserError,
        };
        imports::log(level, message);
    }
}

export!(Component);
