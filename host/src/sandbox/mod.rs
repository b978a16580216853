//! The WebAssembly sandbox: every bot revision runs in the guest component (runtime-core +
//! boa) under wasmtime, with a fuel budget, a memory cap, a wall-clock deadline and a cap on
//! host calls per step. The guest reaches nothing but the `host` interface of the WIT world
//! and a WASI with nothing in it (no files, sockets, environment or arguments).
//!
//! Instances: warm per revision. An instance holds only the loaded bot between steps (each
//! step's JavaScript runs in a fresh boa context that is dropped with the step), so a warm
//! instance can serve any conversation of its revision. An instance that trapped is thrown
//! away. Live instances are bounded by permits; when all are taken, an idle instance of
//! another revision is evicted, and otherwise the caller waits (back-pressure, not errors).

mod artifact;
pub mod effects;
pub mod limits;
pub mod testing;

use anyhow::{Context as _, Result};
use effects::Effects;
use limits::Limits;
use runtime_core::engine::StepError;
use runtime_core::host::HttpRequest;
use runtime_core::model::CompiledBot;
use runtime_core::session::{ConverseResult, Message, Session, StepReport};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ResourceLimiter, Store,
    Trap,
};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

mod wit {
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "bot-runtime",
        imports: { default: trappable },
    });
}

use wit::botbox::bot::host::{Host as HostImports, LogLevel};
use wit::{BotRuntime, BotRuntimePre, SessionIn, StepError as StepErrorWit};

/// The guest component, built by build.rs.
pub static GUEST_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.wasm"));

/// Epoch tick of the wall-clock deadline.
const TICK: Duration = Duration::from_millis(5);

#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub limits: Limits,
    /// Live instances at most (pooling allocator slots).
    pub slots: u32,
    /// Idle warm instances kept per revision.
    pub warm_per_revision: usize,
    /// Where the precompiled guest is cached.
    pub cache_dir: PathBuf,
    /// Write `/tmp/perf-<pid>.map` so that `perf` names the guest's functions (profiling only).
    pub perfmap: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            limits: Limits::default(),
            slots: 64,
            warm_per_revision: 4,
            cache_dir: PathBuf::from("data/cache"),
            perfmap: false,
        }
    }
}

/// A bot revision ready to run: the compiled bot the guest loads, and the host's own copy of
/// its maxRecursion (enforced whatever the guest believes).
#[derive(Debug, Clone)]
pub struct Revision {
    pub id: Arc<str>,
    guest_bot: Arc<str>,
    max_recursion: u32,
    /// The tenant's limits; `None` = the sandbox's defaults.
    limits: Option<Arc<Limits>>,
}

impl Revision {
    pub fn new(id: &str, bot: &CompiledBot) -> Revision {
        Revision {
            id: id.into(),
            guest_bot: serde_json::to_string(bot).expect("bots serialise").into(),
            max_recursion: bot.max_recursion,
            limits: None,
        }
    }

    /// Runs this revision under its tenant's own limits. The memory cap cannot exceed the
    /// sandbox's (the pooling allocator's slots are sized by it).
    pub fn with_limits(mut self, limits: Limits) -> Revision {
        self.limits = Some(Arc::new(limits));
        self
    }

    /// A revision whose guest sees `guest_bot` while the host enforces `max_recursion`: for
    /// tests of the host's own enforcement.
    #[doc(hidden)]
    pub fn with_host_max_recursion(
        id: &str,
        guest_bot: &CompiledBot,
        max_recursion: u32,
    ) -> Revision {
        Revision {
            max_recursion,
            ..Revision::new(id, guest_bot)
        }
    }
}

/// The result of a step and what it cost.
#[derive(Debug, Clone)]
pub struct StepOutcome {
    pub result: ConverseResult,
    pub fuel_used: u64,
    /// Whether a warm instance served the step.
    pub warm: bool,
}

/// A session as text, the way it is stored, with the tag under which a warm instance may
/// still keep it (0: none). Tags come from [`Sandbox::step_json`].
#[derive(Debug, Clone)]
pub struct SessionJson {
    pub json: Arc<str>,
    pub tag: u64,
}

impl SessionJson {
    /// A session no instance holds.
    pub fn new(json: impl Into<Arc<str>>) -> SessionJson {
        SessionJson {
            json: json.into(),
            tag: 0,
        }
    }
}

/// The result of [`Sandbox::step_json`]: the step's report, and the new session as text.
#[derive(Debug, Clone)]
pub struct RawOutcome {
    pub report: StepReport,
    pub session: SessionJson,
    pub fuel_used: u64,
    pub warm: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The step failed (maxRecursion, a limit, a trap); the session is unchanged.
    #[error(transparent)]
    Step(#[from] StepError),
    /// The sandbox itself failed (instantiation, a broken guest).
    #[error("sandbox failure: {0:#}")]
    Internal(anyhow::Error),
}

pub struct Sandbox {
    engine: Engine,
    pre: BotRuntimePre<StepState>,
    config: SandboxConfig,
    permits: Arc<Permits>,
    idle: Mutex<VecDeque<Warm>>,
    pooling: bool,
    stop: Arc<AtomicBool>,
}

struct Warm {
    revision: Arc<str>,
    /// Tags of the sessions the guest keeps, oldest first (a mirror of the guest's list).
    kept: VecDeque<u64>,
    store: Store<StepState>,
    bindings: BotRuntime,
    _permit: Permit,
}

impl Sandbox {
    /// Builds the engine (pooling allocator, or on-demand when the address space cannot be
    /// reserved), loads the guest from the artifact cache (compiling it once), and starts the
    /// epoch ticker.
    pub fn new(config: SandboxConfig) -> Result<Sandbox> {
        match Self::build(config.clone(), true) {
            Ok(s) => Ok(s),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "pooling allocator unavailable; using on-demand allocation");
                Self::build(config, false)
            }
        }
    }

    fn build(config: SandboxConfig, pooling: bool) -> Result<Sandbox> {
        let mut cfg = Config::new();
        cfg.wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            // Traps are explained by their code and the JavaScript site, not by a wasm
            // backtrace (capturing one is work on every trap for nothing).
            .wasm_backtrace_max_frames(None)
            .max_wasm_stack(1 << 20);
        if config.perfmap {
            cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        if pooling {
            let mut pool = PoolingAllocationConfig::default();
            let slots = config.slots;
            pool.total_component_instances(slots)
                .total_core_instances(slots * 8)
                .total_memories(slots * 2)
                .total_tables(slots * 8)
                .max_memories_per_component(4)
                .max_tables_per_component(16)
                .max_core_instances_per_component(16)
                .max_memory_size(config.limits.memory_bytes.max(1 << 20))
                .table_elements(20_000)
                .max_component_instance_size(1 << 20)
                .max_core_instance_size(1 << 20);
            cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        let engine = Engine::new(&cfg)?;
        let component = artifact::load(&engine, GUEST_WASM, &config.cache_dir)?;
        let mut linker: Linker<StepState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        BotRuntime::add_to_linker::<_, wasmtime::component::HasSelf<StepState>>(
            &mut linker,
            |s| s,
        )?;
        let pre = BotRuntimePre::new(linker.instantiate_pre(&component)?)?;
        let stop = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("botbox-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK);
                        engine.increment_epoch();
                    }
                })?;
        }
        let sandbox = Sandbox {
            engine,
            pre,
            permits: Arc::new(Permits::new(config.slots as usize)),
            idle: Mutex::new(VecDeque::new()),
            config,
            pooling,
            stop,
        };
        // Probe: one instance must come up, or this allocation strategy is unusable here.
        let probe = sandbox
            .instantiate("probe".into(), None, &sandbox.config.limits)
            .context("instantiating the guest")?;
        drop(probe);
        Ok(sandbox)
    }

    /// Whether the pooling allocator is in use (else on-demand allocation).
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    fn new_store(&self, limits: &Limits) -> Store<StepState> {
        let out = MemoryOutputPipe::new(limits.max_output_bytes);
        let wasi = empty_wasi(&out);
        let state = StepState {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                cap: limits.memory_bytes.min(self.config.limits.memory_bytes),
                denied: false,
            },
            limits: limits.clone(),
            effects: None,
            host_calls: 0,
            abort: None,
            site: String::new(),
            max_recursion: 0,
            output: out,
            revision: Arc::from(""),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store
    }

    /// A new instance with the bot loaded (`None`: nothing loaded, for the start-up probe).
    fn instantiate(&self, revision: Arc<str>, bot: Option<&str>, limits: &Limits) -> Result<Warm> {
        let permit = self.acquire();
        let mut store = self.new_store(limits);
        store.set_fuel(self.config.limits.fuel.max(200_000_000))?;
        store.set_epoch_deadline(ticks(self.config.limits.deadline));
        let bindings = self.pre.instantiate(&mut store)?;
        if let Some(bot) = bot {
            bindings
                .call_load(&mut store, bot)?
                .map_err(|e| anyhow::anyhow!("the guest rejected the bot: {e}"))?;
        }
        Ok(Warm {
            revision,
            kept: VecDeque::new(),
            store,
            bindings,
            _permit: permit,
        })
    }

    /// Takes a permit for a live instance, evicting idle instances when all are taken, and
    /// waiting when there is none to evict.
    fn acquire(&self) -> Permit {
        loop {
            if let Some(p) = self.permits.try_acquire() {
                return p;
            }
            let evicted = self.idle.lock().unwrap().pop_front();
            match evicted {
                Some(w) => drop(w),
                // Woken when a permit is freed or an instance becomes idle (evictable).
                None => self.permits.wait(Duration::from_millis(50)),
            }
        }
    }

    /// Runs one conversation step of `revision` in the sandbox.
    pub fn step(
        &self,
        revision: &Revision,
        session: &Session,
        message: &Message,
        effects: Arc<dyn Effects>,
    ) -> Result<StepOutcome, SandboxError> {
        let json = serde_json::to_string(session).map_err(|e| SandboxError::Internal(e.into()))?;
        let raw = self.run(revision, &json, 0, false, message, effects)?;
        let session: Session = serde_json::from_str(&raw.session.json).map_err(|e| {
            SandboxError::Internal(anyhow::anyhow!("guest session does not parse: {e}"))
        })?;
        Ok(StepOutcome {
            result: raw.report.with_session(session),
            fuel_used: raw.fuel_used,
            warm: raw.warm,
        })
    }

    /// Runs one conversation step on a session given as JSON, and gives the new session as
    /// JSON: the way the live path uses the sandbox, storing sessions as text. The instance
    /// keeps the new session under the returned tag, so that the conversation's next step on
    /// it sends the tag instead of the JSON.
    pub fn step_json(
        &self,
        revision: &Revision,
        session: &SessionJson,
        message: &Message,
        effects: Arc<dyn Effects>,
    ) -> Result<RawOutcome, SandboxError> {
        self.run(revision, &session.json, session.tag, true, message, effects)
    }

    fn run(
        &self,
        revision: &Revision,
        session_json: &str,
        tag: u64,
        keep: bool,
        message: &Message,
        effects: Arc<dyn Effects>,
    ) -> Result<RawOutcome, SandboxError> {
        let span = tracing::info_span!("bot_step", revision = %revision.id, fuel = tracing::field::Empty, warm = tracing::field::Empty);
        let _g = span.enter();
        let reused = {
            let mut idle = self.idle.lock().unwrap();
            // The instance that kept this session if it is idle, else the last one used.
            let holder = (tag != 0)
                .then(|| {
                    idle.iter()
                        .rposition(|w| w.revision == revision.id && w.kept.contains(&tag))
                })
                .flatten();
            holder
                .or_else(|| idle.iter().rposition(|w| w.revision == revision.id))
                .and_then(|i| idle.remove(i))
        };
        let warm = reused.is_some();
        let limits: &Limits = revision.limits.as_deref().unwrap_or(&self.config.limits);
        let mut inst = match reused {
            Some(w) => w,
            None => self
                .instantiate(revision.id.clone(), Some(&revision.guest_bot), limits)
                .map_err(SandboxError::Internal)?,
        };
        {
            let st = inst.store.data_mut();
            st.limits = limits.clone();
            st.limiter.cap = limits.memory_bytes.min(self.config.limits.memory_bytes);
            st.effects = Some(effects);
            st.host_calls = 0;
            st.abort = None;
            st.site.clear();
            st.max_recursion = revision.max_recursion;
            st.limiter.denied = false;
            st.revision = revision.id.clone();
        }
        let message_json =
            serde_json::to_string(message).map_err(|e| SandboxError::Internal(e.into()))?;
        let keep_as = if keep { next_tag() } else { 0 };
        let mut input = match inst.kept.iter().position(|t| *t == tag) {
            Some(i) if tag != 0 => {
                // Each kept session serves one step: the guest lets go of it now.
                inst.kept.remove(i);
                SessionIn::Kept(tag)
            }
            _ => SessionIn::Json(session_json.to_owned()),
        };
        let started = Instant::now();
        let (call, fuel_used) = loop {
            inst.store
                .set_fuel(limits.fuel)
                .map_err(|e| SandboxError::Internal(e.into()))?;
            inst.store.set_epoch_deadline(ticks(limits.deadline));
            let call = inst
                .bindings
                .call_converse(&mut inst.store, &input, keep_as, &message_json);
            let fuel_used = limits
                .fuel
                .saturating_sub(inst.store.get_fuel().unwrap_or(0));
            match call {
                // The guest dropped it (for size): the same step again, with the JSON.
                Ok(Err(StepErrorWit::NotKept(_))) if matches!(input, SessionIn::Kept(_)) => {
                    input = SessionIn::Json(session_json.to_owned());
                }
                call => break (call, fuel_used),
            }
        };
        span.record("fuel", fuel_used);
        span.record("warm", warm);
        inst.store.data_mut().effects = None;
        let out = match call {
            Ok(Ok(out)) => {
                let report: StepReport = serde_json::from_str(&out.report).map_err(|e| {
                    SandboxError::Internal(anyhow::anyhow!("guest result does not parse: {e}"))
                })?;
                let tag = if out.kept {
                    inst.kept.push_back(keep_as);
                    while inst.kept.len() > KEEP_MAX {
                        inst.kept.pop_front();
                    }
                    keep_as
                } else {
                    0
                };
                Ok(RawOutcome {
                    report,
                    session: SessionJson {
                        json: out.session.into(),
                        tag,
                    },
                    fuel_used,
                    warm,
                })
            }
            Ok(Err(e)) => Err(SandboxError::Step(match e {
                StepErrorWit::MaxRecursion(n) => StepError::MaxRecursion(n),
                StepErrorWit::Aborted(m) => StepError::Aborted(m),
                StepErrorWit::InvalidMessage(m) => StepError::InvalidMessage(m),
                StepErrorWit::NotLoaded | StepErrorWit::NotKept(_) => {
                    return Err(SandboxError::Internal(anyhow::anyhow!(
                        "the guest refused the step: {e:?}"
                    )));
                }
            })),
            Err(trap) => {
                let err = explain(&inst.store, limits, &trap, started.elapsed());
                tracing::warn!(error = %err, "step aborted; instance discarded");
                return Err(SandboxError::Step(err));
            }
        };
        for line in inst
            .store
            .data()
            .output
            .contents()
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
        {
            tracing::info!(target: "botbox::guest_output", "{}", String::from_utf8_lossy(line));
        }
        // Back to the pool, unless the revision already has enough idle instances.
        let mut idle = self.idle.lock().unwrap();
        if idle.iter().filter(|w| w.revision == revision.id).count() < self.config.warm_per_revision
        {
            idle.push_back(inst);
            // A waiter may now evict it.
            self.permits.freed.notify_all();
        }
        out
    }
}

/// Sessions a warm instance keeps at most: the guest's own rule (`KEEP_MAX` in
/// guest-sdk/src/guest.rs), mirrored so that the host knows which tags an instance holds.
const KEEP_MAX: usize = 16;

/// A fresh tag for a kept session (never 0, never reused in this process).
fn next_tag() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The guest's WASI: no preopened directories (so no filesystem), no environment, no
/// arguments, no TCP, UDP or name lookup; stdout and stderr go to a capped in-memory pipe.
fn empty_wasi(out: &MemoryOutputPipe) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(out.clone())
        .stderr(out.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

/// Names the limit a trap hit, and where.
fn explain(
    store: &Store<StepState>,
    limits: &Limits,
    trap: &wasmtime::Error,
    elapsed: Duration,
) -> StepError {
    let st = store.data();
    if let Some(e) = &st.abort {
        return e.clone();
    }
    let who = if st.site.is_empty() {
        "the step".to_string()
    } else {
        st.site.clone()
    };
    let msg = match trap.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => format!("{who} exceeded its fuel budget of {}", limits.fuel),
        Some(Trap::Interrupt) => format!(
            "{who} exceeded its deadline of {} ms (ran {} ms)",
            limits.deadline.as_millis(),
            elapsed.as_millis()
        ),
        Some(Trap::StackOverflow) => format!("{who} overflowed its stack"),
        // The guest's Rust stack lives in linear memory and wraps below address 0.
        Some(Trap::MemoryOutOfBounds) => {
            format!("{who} overflowed its stack (out-of-bounds memory access)")
        }
        _ if st.limiter.denied => format!(
            "{who} exceeded its memory cap of {} MiB",
            limits.memory_bytes >> 20
        ),
        Some(t) => format!("{who} trapped: {t}"),
        None => format!("{who} failed: {trap:#}"),
    };
    StepError::Aborted(msg)
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn ticks(d: Duration) -> u64 {
    (d.as_millis() / TICK.as_millis()).max(1) as u64 + 1
}

/// Per-instance state; the per-step part is reset before each step.
pub struct StepState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    limits: Limits,
    effects: Option<Arc<dyn Effects>>,
    host_calls: u32,
    /// Set when a host function decided to abort the step (it then traps).
    abort: Option<StepError>,
    site: String,
    max_recursion: u32,
    output: MemoryOutputPipe,
    revision: Arc<str>,
}

impl WasiView for StepState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

struct Limiter {
    cap: usize,
    denied: bool,
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
    /// Counts a host call; past the cap the step is aborted.
    fn count_call(&mut self) -> wasmtime::Result<()> {
        self.host_calls += 1;
        if self.host_calls > self.limits.max_host_calls {
            let who = if self.site.is_empty() {
                "the step".to_string()
            } else {
                self.site.clone()
            };
            let e = StepError::Aborted(format!(
                "{who} exceeded its cap of {} host calls",
                self.limits.max_host_calls
            ));
            self.abort = Some(e.clone());
            return Err(wasmtime::Error::msg(e.to_string()));
        }
        Ok(())
    }

    fn effects(&self) -> Arc<dyn Effects> {
        self.effects.clone().expect("effects are set during a step")
    }
}

impl HostImports for StepState {
    fn http(&mut self, request: String) -> wasmtime::Result<Result<String, String>> {
        self.count_call()?;
        let req: HttpRequest = match serde_json::from_str(&request) {
            Ok(r) => r,
            Err(e) => return Ok(Err(format!("bad request: {e}"))),
        };
        let span = tracing::info_span!("api_call", revision = %self.revision, method = %req.method, url = %req.url);
        let _g = span.enter();
        let out = self.effects().http(&req, &self.limits);
        if let Err(e) = &out {
            tracing::info!(error = %e, "api call failed");
        }
        Ok(out.map(|r| serde_json::to_string(&r).expect("responses serialise")))
    }

    fn nl_predict(
        &mut self,
        nlu_id: String,
        text: String,
        options: String,
    ) -> wasmtime::Result<Result<String, String>> {
        self.count_call()?;
        let options = serde_json::from_str(&options).unwrap_or(serde_json::Value::Null);
        Ok(self
            .effects()
            .nl_predict(&nlu_id, &text, &options)
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
            self.abort = Some(e.clone());
            return Err(wasmtime::Error::msg(e.to_string()));
        }
        Ok(Ok(()))
    }

    fn enter_js(&mut self, site: String) -> wasmtime::Result<()> {
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

/// Counting permits for live instances (std has no semaphore; tokio's is async).
struct Permits {
    max: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

struct Permit(Arc<Permits>);

impl Permits {
    fn new(max: usize) -> Permits {
        Permits {
            max,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }
}

trait PermitsExt {
    fn try_acquire(&self) -> Option<Permit>;
    fn wait(&self, at_most: Duration);
}

impl PermitsExt for Arc<Permits> {
    fn try_acquire(&self) -> Option<Permit> {
        let mut used = self.used.lock().unwrap();
        if *used < self.max {
            *used += 1;
            Some(Permit(self.clone()))
        } else {
            None
        }
    }

    fn wait(&self, at_most: Duration) {
        let used = self.used.lock().unwrap();
        if *used >= self.max {
            let _ = self.freed.wait_timeout(used, at_most).unwrap();
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        *self.0.used.lock().unwrap() -= 1;
        self.0.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_wasi::cli::WasiCliView;
    use wasmtime_wasi::filesystem::WasiFilesystemView;
    use wasmtime_wasi::p2::bindings::cli::environment::Host as _;
    use wasmtime_wasi::p2::bindings::filesystem::preopens::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::instance_network::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::network::IpAddressFamily;
    use wasmtime_wasi::p2::bindings::sockets::tcp_create_socket::Host as _;
    use wasmtime_wasi::p2::bindings::sockets::udp_create_socket::Host as _;
    use wasmtime_wasi::sockets::WasiSocketsView;

    struct Guest {
        wasi: WasiCtx,
        table: ResourceTable,
    }

    impl WasiView for Guest {
        fn ctx(&mut self) -> WasiCtxView<'_> {
            WasiCtxView {
                ctx: &mut self.wasi,
                table: &mut self.table,
            }
        }
    }

    /// The WASI calls a guest would make to reach files, the environment or the network,
    /// answered by exactly the context every instance gets.
    #[tokio::test]
    async fn the_guest_wasi_has_no_files_environment_arguments_or_network() {
        let mut g = Guest {
            wasi: empty_wasi(&MemoryOutputPipe::new(1024)),
            table: ResourceTable::new(),
        };
        // In WASI 0.2 a directory handle comes only from the preopens.
        assert!(g.filesystem().get_directories().unwrap().is_empty());
        assert!(g.cli().get_environment().unwrap().is_empty());
        assert!(g.cli().get_arguments().unwrap().is_empty());
        assert_eq!(g.cli().initial_cwd().unwrap(), None);
        let mut net = g.sockets();
        assert!(net.create_tcp_socket(IpAddressFamily::Ipv4).is_err());
        assert!(net.create_tcp_socket(IpAddressFamily::Ipv6).is_err());
        assert!(net.create_udp_socket(IpAddressFamily::Ipv4).await.is_err());
        let network = net.instance_network().unwrap();
        assert!(net.resolve_addresses(network, "localhost".into()).is_err());
    }
}
