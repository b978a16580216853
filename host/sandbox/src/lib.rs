//! The WebAssembly sandbox: every bot revision runs in the guest component (runtime-core +
//! boa) under wasmtime, with a fuel budget, a memory cap, a wall-clock deadline and a cap on
//! host calls per step. The guest reaches nothing but the `host` interface of the WIT world
//! and a WASI with nothing in it (no files, sockets, environment or arguments).
//!
//! May depend on: `runtime-core`, wasmtime and `botbox-lanes` (the threads steps run on). Must
//! never reach the network, storage or NL models itself: the guest's host calls go through
//! the [`effects::Effects`] trait, which `botbox-service` implements for the real world.
//!
//! This file: the sandbox's configuration, the engine, and the public API. The instance
//! pool is in `pool.rs`, the host imports in `imports.rs`, a step in `step.rs`, who gets a
//! CPU slot in `sched.rs`, and the threads steps run on in `threads.rs`.
//!
//! Instances: warm per revision. An instance holds only the loaded bot between steps (its
//! one boa context is put back as the lockdown left it after each step: the globals a step
//! added are deleted, and a context that cannot be restored is dropped and made anew), so a
//! warm instance can serve any conversation of its revision. An instance that trapped is thrown
//! away. Live instances are bounded by permits; when all are taken, an idle instance of
//! another revision is evicted, and otherwise the caller waits (back-pressure, not errors).
//!
//! Steps are futures (wasmtime's async support: the guest runs on a fiber). A step holds a
//! CPU slot only while its guest runs; while a host call (an api action's HTTP) is awaited
//! the guest is suspended and the slot serves another step. A guest yields every
//! [`YIELD_FUEL`] units of fuel, so a step can run on any tokio runtime's worker without
//! holding it for long: where it is awaited ([`here`]), on the step threads ([`spawn`]) or
//! through [`block_on`]. Steps poll tokio timers, so they need a runtime with time enabled.

mod artifact;
mod check;
mod clock;
pub mod effects;
mod imports;
pub mod limits;
mod pool;
mod sched;
mod step;
pub mod testing;
mod threads;

use anyhow::{Context as _, Result};
use effects::Effects;
use limits::Limits;
use runtime_core::engine::StepError;
use runtime_core::model::CompiledBot;
use runtime_core::session::{ConverseResult, Message, Session, StepReport};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use imports::StepState;
pub use sched::TenantSteps;
use step::StepInput;
pub use threads::{block_on, here, spawn};

mod wit {
    wasmtime::component::bindgen!({
        path: "../../guest-sdk/wit",
        world: "bot-runtime",
        imports: {
            // The guest waits on its fiber for these; it holds no CPU slot meanwhile.
            "botbox:bot/host.http": async | trappable,
            "botbox:bot/host.nl-predict": async | trappable,
            default: trappable,
        },
        exports: { default: async },
    });
}

use wit::{BotRuntime, BotRuntimePre};

/// The guest component, built by build.rs.
pub static GUEST_WASM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest.wasm"));

/// Fuel a guest runs between yields to the executor (1 M units, about 0.25 ms of CPU at
/// [`limits::FUEL_PER_SECOND`]). At each yield the step gives its CPU slot back (to the next
/// tenant in turn when one waits, `sched.rs`), its deadline is checked, and a cancelled step
/// is dropped; the worker thread it runs on serves its other tasks between two yields. A
/// typical step (tens of µs, 0.1–0.3 M fuel) never yields; a guest burning its fuel (50 M
/// by default) yields about 50 times. Cost: one fiber switch and one slot hand-back per
/// yield, about a microsecond per quarter of a millisecond of guest CPU. Fuel meters every
/// guest already, so no thread wakes to interrupt guests (wasmtime's epoch interruption is
/// off).
pub const YIELD_FUEL: u64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub limits: Limits,
    /// Live instances at most (pooling allocator slots).
    pub slots: u32,
    /// Idle warm instances kept per revision.
    pub warm_per_revision: usize,
    /// Guests running at once (default: the cores). A step holds a slot only while its
    /// guest, or the host's work for it, runs: not while it waits in a host call, for an
    /// instance, or for its turn after a fuel yield ([`YIELD_FUEL`]). Steps waiting for a
    /// slot are served round-robin between tenants.
    ///
    /// Cost: fewer slots than cores leave cores idle while steps queue; more only make the
    /// OS time-slice guests: steps run on the runtime's workers (one per core) or on the
    /// step and burn threads (one per core each, `threads.rs`).
    /// Interaction: the server's own threads (HTTP, storage) share the cores with the
    /// guests; `steps_per_tenant` bounds what one tenant can queue for slots.
    /// A malicious guest holds a slot until its next fuel yield (about 0.25 ms), then queues
    /// behind every other waiting tenant; its CPU per step is bounded by its fuel.
    pub cpu_slots: usize,
    /// Slots beyond `cpu_slots` that only a fresh step may hold: one that has held slots for
    /// less than 2 ms of wall time so far (`sched::EXPRESS_BUDGET`), of a tenant within its
    /// share (its steps run where they are awaited, [`here`], not on the background lane's
    /// step threads) (default 0; the server's `LiveConfig` uses 1).
    ///
    /// Why: a guest yields its slot only when its thread runs, and on saturated cores a
    /// thread can wait milliseconds for a core; every other tenant's step then waited
    /// behind a guest that was not even running. With an express slot, a
    /// tenant's short step (most bot steps run for tens of µs) does not wait for another
    /// tenant's burning guest at all. Cost: up to `cpu_slots + express_slots` guests run at
    /// once, so while fresh steps run the shared path may have one core less; a burning
    /// guest leaves the express lane after its budget, so its share of the express slots is
    /// its first 2 ms per step. Interaction: served round-robin between tenants like the
    /// regular slots; a fresh step takes an express slot first and a regular one when none
    /// is free. A tenant over its share (its steps on the background lane) takes none: its
    /// fresh steps, on threads under `SCHED_IDLE`, would otherwise hold the express slot too, and
    /// the short step of a tenant within its share waited for a guest that the OS left off
    /// the cores. A malicious tenant gets at most its round-robin turns of the express slots,
    /// for at most 2 ms of each step, yielding every [`YIELD_FUEL`]; then its step
    /// moves to the burn threads (`threads.rs`, `SCHED_IDLE`), and while it has such a step
    /// in flight its new steps take no express slot at all (they queue for the regular
    /// slots).
    pub express_slots: usize,
    /// Steps of one tenant (a project's owner) in flight at once: running, queued for a CPU
    /// slot, or suspended in a host call (default: twice the cores, the whole server's cap
    /// before steps could suspend). More wait in arrival order (back-pressure, not errors).
    ///
    /// Cost: each step in flight holds a live instance, so busy tenants times this should
    /// stay below `slots`, or steps wait for instances as well. Interaction: a tenant whose
    /// api calls are slow gets at most this many steps per api latency.
    /// A malicious tenant can keep this many steps in flight (api calls to a server that
    /// never answers, each until the time-out or the step's deadline), holding as many
    /// instances, but no CPU slot while they wait.
    pub steps_per_tenant: usize,
    /// Where the precompiled guest is cached.
    pub cache_dir: PathBuf,
    /// Write `/tmp/perf-<pid>.map` so that `perf` names the guest's functions (profiling only).
    pub perfmap: bool,
}

use botbox_lanes::cores;

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            limits: Limits::default(),
            slots: 64,
            warm_per_revision: 4,
            cpu_slots: cores(),
            express_slots: 0,
            steps_per_tenant: cores() * 2,
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
    /// `config.defaultErrorMessage`: sent to a channel user when a step fails.
    pub default_error_message: Option<Arc<str>>,
    /// Who the bot runs for, as its `nl` NLUs' predictions see it (visibility and pinning).
    pub nl: NlScope,
    /// The bot's fallback intents (`flow.intent`): what [`Revision::falls_back`] reads.
    fallbacks: Arc<[String]>,
}

/// The account and project a revision runs for, and the deployment's NLU revision pin: what
/// the NL host function needs to decide which models the bot may use, at which revision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NlScope {
    /// The project's owner (a user or a team id).
    pub owner: Arc<str>,
    pub project: Arc<str>,
    /// The deployment's `nluRevision`: models of the project's own NLUs are read at it.
    pub pin: Option<Arc<str>>,
}

impl Revision {
    pub fn new(id: &str, bot: &CompiledBot) -> Revision {
        Revision {
            id: id.into(),
            guest_bot: serde_json::to_string(bot).expect("bots serialise").into(),
            max_recursion: bot.max_recursion,
            limits: None,
            default_error_message: bot.default_error_message().map(Into::into),
            nl: NlScope::default(),
            fallbacks: bot
                .flows
                .iter()
                .flat_map(|f| {
                    let intents = f.intents.iter().filter(|i| i.fallback);
                    intents.map(|i| format!("{}.{}", f.name, i.name))
                })
                .collect(),
        }
    }

    /// Whether a message the step gave to `flow` with `intent` fell back: it matched no
    /// intent, or a fallback intent (`fallback: true`, whatever its name). A fallback flow's
    /// own intents that matched are understood.
    pub fn falls_back(&self, flow: Option<&str>, intent: Option<&str>) -> bool {
        let (Some(flow), Some(intent)) = (flow, intent) else {
            return true;
        };
        self.fallbacks
            .iter()
            .any(|f| f.len() == flow.len() + 1 + intent.len() && *f == format!("{flow}.{intent}"))
    }

    /// This revision running for `scope` (owner, project and NLU pin).
    pub fn with_nl(mut self, scope: NlScope) -> Revision {
        self.nl = scope;
        self
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

/// The sandbox's instances at one moment ([`Sandbox::stats`]).
#[derive(Debug, Clone, Copy)]
pub struct SandboxStats {
    /// Instances alive: running a step, or idle and warm.
    pub live: usize,
    /// Of those, idle (kept warm for the next step).
    pub idle: usize,
    /// The cap on instances alive (the pooling allocator's slots).
    pub max: usize,
}

pub struct Sandbox {
    engine: Engine,
    pre: BotRuntimePre<StepState>,
    config: SandboxConfig,
    permits: Arc<pool::Permits>,
    idle: Mutex<VecDeque<pool::Warm>>,
    cpu: sched::Cpu,
    tenants: sched::TenantCaps,
    pooling: bool,
}

impl Sandbox {
    /// Builds the engine (pooling allocator, or on-demand when the address space cannot be
    /// reserved) and loads the guest from the artifact cache (compiling it once).
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
        // (Async support, which steps need, is always on in wasmtime 48.)
        cfg.wasm_component_model(true)
            .consume_fuel(true)
            // Traps are explained by their code and the JavaScript site, not by a wasm
            // backtrace (capturing one is work on every trap for nothing).
            .wasm_backtrace_max_frames(None)
            // The guest's fiber stack: its wasm stack plus 1 MiB for host frames.
            .max_wasm_stack(1 << 20)
            .async_stack_size(2 << 20);
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
                // A store keeps the fiber stack of its last call: one per live instance.
                .total_stacks(slots)
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
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        BotRuntime::add_to_linker::<_, wasmtime::component::HasSelf<StepState>>(
            &mut linker,
            |s| s,
        )?;
        let pre = BotRuntimePre::new(linker.instantiate_pre(&component)?)?;
        let sandbox = Sandbox {
            engine,
            pre,
            permits: Arc::new(pool::Permits::new(config.slots as usize)),
            idle: Mutex::new(VecDeque::new()),
            cpu: sched::Cpu::new(config.cpu_slots, config.express_slots),
            tenants: sched::TenantCaps::new(config.steps_per_tenant),
            config,
            pooling,
        };
        // Probe: one instance must come up, or this allocation strategy is unusable here.
        let probe = block_on(sandbox.instantiate(
            "probe".into(),
            None,
            &sandbox.config.limits,
            &clock::StepClock::start(),
        ))
        .context("instantiating the guest")?;
        drop(probe);
        Ok(sandbox)
    }

    /// Whether the pooling allocator is in use (else on-demand allocation).
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// Instances now (for metrics).
    pub fn stats(&self) -> SandboxStats {
        let (live, max) = self.permits.counts();
        SandboxStats {
            live,
            idle: self.idle.lock().unwrap().len(),
            max,
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// What `tenant` has in flight and waiting under its cap.
    pub fn tenant_steps(&self, tenant: &str) -> TenantSteps {
        self.tenants.steps(tenant)
    }

    /// Runs one conversation step of `revision` for `tenant` (whose steps share its cap and
    /// its turns for the CPU) in the sandbox.
    pub async fn step(
        &self,
        tenant: &str,
        revision: &Revision,
        session: &Session,
        message: &Message,
        effects: Arc<dyn Effects>,
    ) -> Result<StepOutcome, SandboxError> {
        let json = serde_json::to_string(session).map_err(|e| SandboxError::Internal(e.into()))?;
        let raw = self
            .run(StepInput {
                tenant,
                revision,
                session_json: &json,
                tag: 0,
                keep: false,
                message,
                effects,
            })
            .await?;
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
    pub async fn step_json(
        &self,
        tenant: &str,
        revision: &Revision,
        session: &SessionJson,
        message: &Message,
        effects: Arc<dyn Effects>,
    ) -> Result<RawOutcome, SandboxError> {
        self.run(StepInput {
            tenant,
            revision,
            session_json: &session.json,
            tag: session.tag,
            keep: true,
            message,
            effects,
        })
        .await
    }
}
