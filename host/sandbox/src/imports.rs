//! What the guest can ask of the host: the per-instance state (`StepState`), the memory
//! limiter, how a call into the guest is armed, and the `host` interface of the WIT world. `http` and `nl-predict` are async:
//! the guest waits on its fiber while the effect is awaited, holding no CPU slot, and the
//! wait counts against the step's deadline.

use super::clock::{StepClock, deadline_error};
use super::effects::{Effects, NlRequest};
use super::limits::Limits;
use super::wit::botbox::bot::host::{Host as HostImports, LogLevel};
use runtime_core::engine::StepError;
use runtime_core::host::HttpRequest;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Per-instance state; the per-step part is reset before each step.
pub struct StepState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limiter: Limiter,
    pub(super) limits: Limits,
    pub(super) effects: Option<Arc<dyn Effects>>,
    pub(super) host_calls: u32,
    /// Set when a host function decided to abort the step (it then traps).
    pub(super) abort: Option<StepError>,
    pub(super) site: String,
    pub(super) max_recursion: u32,
    pub(super) output: MemoryOutputPipe,
    pub(super) revision: Arc<str>,
    pub(super) nl: super::NlScope,
    /// The running call's clock, and the wall time it may take.
    pub(super) clock: Arc<StepClock>,
    pub(super) deadline: Duration,
}

impl WasiView for StepState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

pub(super) struct Limiter {
    pub cap: usize,
    pub denied: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.denied = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

impl StepState {
    /// The method or expression running, for error messages.
    pub(super) fn who(&self) -> String {
        if self.site.is_empty() {
            "the step".to_string()
        } else {
            self.site.clone()
        }
    }

    /// Aborts the step with `e` (the trap that follows is explained by it).
    fn abort(&mut self, e: StepError) -> wasmtime::Error {
        let msg = e.to_string();
        self.abort = Some(e);
        wasmtime::Error::msg(msg)
    }

    /// Counts a host call; past the cap the step is aborted.
    fn count_call(&mut self) -> wasmtime::Result<()> {
        self.host_calls += 1;
        if self.host_calls > self.limits.max_host_calls {
            let e = StepError::Aborted(format!(
                "{} exceeded its cap of {} host calls",
                self.who(),
                self.limits.max_host_calls
            ));
            return Err(self.abort(e));
        }
        Ok(())
    }

    fn effects(&self) -> Arc<dyn Effects> {
        self.effects.clone().expect("effects are set during a step")
    }

    /// Awaits a host call's effect for at most `timeout`, and never past the step's deadline:
    /// `Ok(None)` when the time-out passed, a trap (the deadline error) when the deadline did.
    /// Dropping the effect's future cancels it.
    async fn await_effect<T>(
        &mut self,
        timeout: Duration,
        effect: impl Future<Output = T>,
    ) -> wasmtime::Result<Option<T>> {
        let left = self.deadline.saturating_sub(self.clock.elapsed());
        let out = tokio::time::timeout(timeout.min(left), effect).await.ok();
        let elapsed = self.clock.elapsed();
        if elapsed >= self.deadline || (out.is_none() && left <= timeout) {
            let e = deadline_error(&self.who(), self.deadline, elapsed);
            return Err(self.abort(e));
        }
        Ok(out)
    }
}

impl HostImports for StepState {
    async fn http(&mut self, request: String) -> wasmtime::Result<Result<String, String>> {
        self.count_call()?;
        let req: HttpRequest = match serde_json::from_str(&request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(format!("bad request: {e}"))),
        };
        // `url` is recorded by the effect, which knows how to redact it (the sandbox does not
        // know which parts of a URL are secrets).
        let span = tracing::info_span!("api_call", revision = %self.revision, method = %req.method, url = tracing::field::Empty);
        // The effect gets the call's own budget: the time-out, cut to what is left of the
        // step's deadline.
        let mut limits = self.limits.clone();
        let left = self.deadline.saturating_sub(self.clock.elapsed());
        limits.http_timeout = limits.http_timeout.min(left);
        let effects = self.effects();
        let call = span.in_scope(|| effects.http(&req, &limits));
        let out = self
            .await_effect(limits.http_timeout, call)
            .instrument(span.clone())
            .await?
            .unwrap_or_else(|| {
                Err(format!(
                    "timed out after {} s",
                    limits.http_timeout.as_secs_f32()
                ))
            });
        if let Err(e) = &out {
            span.in_scope(|| tracing::info!(error = %e, "api call failed"));
        }
        Ok(out.map(|r| serde_json::to_string(&r).expect("responses serialise")))
    }

    async fn nl_predict(
        &mut self,
        nlu_id: String,
        text: String,
        options: String,
    ) -> wasmtime::Result<Result<String, String>> {
        self.count_call()?;
        let options = serde_json::from_str(&options).unwrap_or(serde_json::Value::Null);
        let effects = self.effects();
        let nl = self.nl.clone();
        let timeout = self.limits.http_timeout;
        let req = NlRequest {
            scope: &nl,
            nlu_id: &nlu_id,
            text: &text,
            options: &options,
        };
        Ok(self
            .await_effect(timeout, effects.nl_predict(req))
            .await?
            .unwrap_or_else(|| Err(format!("NL model {nlu_id} timed out")))
            .map(|j| j.to_string()))
    }

    fn now_ms(&mut self) -> wasmtime::Result<i64> {
        Ok(self.effects().now_ms())
    }

    fn random_u64(&mut self) -> wasmtime::Result<u64> {
        Ok(self.effects().random_u64())
    }

    fn state_moved(&mut self, moves: u32) -> wasmtime::Result<Result<(), String>> {
        if moves > self.max_recursion {
            let e = StepError::MaxRecursion(self.max_recursion);
            return Err(self.abort(e));
        }
        Ok(Ok(()))
    }

    fn enter_js(&mut self, site: String) -> wasmtime::Result<()> {
        if let Some(effects) = &self.effects {
            if let Some(name) = site.strip_prefix("method ") {
                effects.js_method(Some(name));
            } else if site.is_empty() && self.site.starts_with("method ") {
                effects.js_method(None);
            }
        }
        self.site = site;
        Ok(())
    }

    fn log(&mut self, level: LogLevel, message: String) -> wasmtime::Result<()> {
        self.count_call()?;
        let message: String = message.chars().take(2000).collect();
        match level {
            LogLevel::Info => tracing::info!(revision = %self.revision, "{message}"),
            LogLevel::UserError => {
                tracing::warn!(revision = %self.revision, user_error = true, "{message}")
            }
            LogLevel::Console => {
                tracing::info!(revision = %self.revision, console = true, "{message}")
            }
        }
        Ok(())
    }
}

/// Sets up a call into the guest: its fuel, and the deadline of its clock.
pub(super) fn arm(
    store: &mut Store<StepState>,
    fuel: u64,
    deadline: Duration,
    clock: &Arc<StepClock>,
) -> wasmtime::Result<()> {
    store.set_fuel(fuel)?;
    let st = store.data_mut();
    st.clock = clock.clone();
    st.deadline = deadline;
    Ok(())
}
