//! Running one step: the tenant's turn under its cap, a CPU slot while the guest runs, the
//! instance (the one that kept the session, if idle), fuel and the wall-clock deadline, the
//! guest's `converse`, and on a trap the limit it hit and the JavaScript site.
//!
//! Deadline: a step's clock runs from the call into the guest to its return, through host
//! calls (an api action's HTTP counts), but not while the step is queued for a CPU slot: that
//! is other steps' time. The guest yields every [`super::YIELD_FUEL`] units of fuel; at each
//! yield its CPU slot goes back (to the next tenant in turn, if one waits) and, polled
//! again, the step checks its clock (`clock::within_deadline`): a guest burning CPU never
//! holds a slot for longer than one yield interval, and traps at its deadline.

use super::clock::{StepClock, deadline_error, within_deadline};
use super::effects::Effects;
use super::imports::{StepState, arm};
use super::limits::Limits;
use super::pool::{KEEP_MAX, Warm, next_tag};
use super::sched::OnCpu;
use super::wit::{SessionIn, StepError as StepErrorWit, StepOut};
use super::{RawOutcome, Revision, Sandbox, SandboxError, SessionJson};
use runtime_core::engine::StepError;
use runtime_core::session::{Message, StepReport};
use std::collections::VecDeque;
use std::pin::pin;
use std::sync::Arc;
use tracing::Instrument as _;
use wasmtime::{Store, Trap};

/// One step's inputs, from [`Sandbox::step`] or [`Sandbox::step_json`] to the guest.
pub(super) struct StepInput<'a> {
    pub tenant: &'a str,
    pub revision: &'a Revision,
    /// The session as JSON, sent to the guest unless the instance keeps it under `tag`.
    pub session_json: &'a str,
    /// The tag an instance may keep the session under (0: none).
    pub tag: u64,
    /// Whether the instance may keep the new session, under a new tag.
    pub keep: bool,
    pub message: &'a Message,
    pub effects: Arc<dyn Effects>,
}

impl Sandbox {
    /// A step in the tenant's turn: waits under the tenant's cap, then runs holding a CPU
    /// slot only while the guest (or the host's own work for the step) runs.
    pub(super) async fn run(&self, step: StepInput<'_>) -> Result<RawOutcome, SandboxError> {
        let tenant = step.tenant;
        let span = tracing::info_span!("bot_step", tenant = %tenant, revision = %step.revision.id, fuel = tracing::field::Empty, warm = tracing::field::Empty);
        let started = std::time::Instant::now();
        let out = async {
            let turn = self.tenants.enter(tenant).await;
            let clock = StepClock::start();
            let step = pin!(self.run_on_cpu(step, &clock));
            OnCpu::new(&self.cpu, &turn.tenant, &clock, step).await
        }
        .instrument(span)
        .await;
        record_step(&out, started.elapsed());
        out
    }

    /// The step itself, on the instance that kept the session (or another idle one, or a
    /// new one): the guest's `converse` under fuel and the deadline, its outcome read back;
    /// the instance goes back to the idle list unless the step trapped.
    async fn run_on_cpu(
        &self,
        step: StepInput<'_>,
        clock: &Arc<StepClock>,
    ) -> Result<RawOutcome, SandboxError> {
        let StepInput {
            revision,
            session_json,
            tag,
            keep,
            message,
            effects,
            ..
        } = step;
        let limits: &Limits = revision.limits.as_deref().unwrap_or(&self.config.limits);
        let (mut inst, warm) = self.instance_for(revision, tag, limits, clock).await?;
        self.prepare_state(inst.store.data_mut(), revision, limits, effects);
        let message_json =
            serde_json::to_string(message).map_err(|e| SandboxError::Internal(e.into()))?;
        let keep_as = if keep { next_tag() } else { 0 };
        let input = session_input(&mut inst.kept, tag, session_json);
        // The step's deadline starts now: not while it waited for an instance, nor for the
        // instance's load (which has the sandbox's own deadline).
        clock.restart();
        let (call, fuel_used) = call_converse(
            &mut inst,
            limits,
            clock,
            input,
            keep_as,
            &message_json,
            session_json,
        )
        .await?;
        let span = tracing::Span::current();
        span.record("fuel", fuel_used);
        span.record("warm", warm);
        inst.store.data_mut().effects = None;
        let out = match call {
            Ok(Ok(out)) => Ok(finished(&mut inst, out, keep_as, fuel_used, warm)?),
            Ok(Err(e)) => Err(SandboxError::Step(step_error(e)?)),
            Err(trap) => {
                let err = explain(&inst.store, limits, &trap);
                tracing::warn!(error = %err, "step aborted; instance discarded");
                return Err(SandboxError::Step(err));
            }
        };
        log_guest_output(&inst.store);
        self.put_idle(inst);
        out
    }

    /// An idle instance of the revision (the one that kept session `tag`, if any), else a
    /// new one; and whether it was idle (warm).
    async fn instance_for(
        &self,
        revision: &Revision,
        tag: u64,
        limits: &Limits,
        clock: &Arc<StepClock>,
    ) -> Result<(Warm, bool), SandboxError> {
        let reused = self.take_idle(&revision.id, tag);
        let warm = reused.is_some();
        let inst = match reused {
            Some(w) => w,
            None => self
                .instantiate(
                    revision.id.clone(),
                    Some(&revision.guest_bot),
                    limits,
                    clock,
                )
                .await
                .map_err(SandboxError::Internal)?,
        };
        Ok((inst, warm))
    }

    /// Sets the instance's state for this step: the revision's limits, the step's effects,
    /// and nothing left of the previous step.
    fn prepare_state(
        &self,
        st: &mut StepState,
        revision: &Revision,
        limits: &Limits,
        effects: Arc<dyn Effects>,
    ) {
        st.limits = limits.clone();
        st.limiter.cap = limits.memory_bytes.min(self.config.limits.memory_bytes);
        st.effects = Some(effects);
        st.host_calls = 0;
        st.abort = None;
        st.site.clear();
        st.max_recursion = revision.max_recursion;
        st.limiter.denied = false;
        st.revision = revision.id.clone();
        st.nl = revision.nl.clone();
    }
}

/// What the guest's `converse` returned, or its trap.
type GuestCall = wasmtime::Result<Result<StepOut, StepErrorWit>>;

/// The session the step runs on: the one the instance kept under `tag`, else its JSON.
fn session_input(kept: &mut VecDeque<u64>, tag: u64, session_json: &str) -> SessionIn {
    match kept.iter().position(|t| *t == tag) {
        Some(i) if tag != 0 => {
            // Each kept session serves one step: the guest lets go of it now.
            kept.remove(i);
            SessionIn::Kept(tag)
        }
        _ => SessionIn::Json(session_json.to_owned()),
    }
}

/// Calls the guest's `converse` under the step's fuel and deadline (again with the session's
/// JSON if the guest no longer keeps it); its result and the fuel it used.
async fn call_converse(
    inst: &mut Warm,
    limits: &Limits,
    clock: &Arc<StepClock>,
    mut input: SessionIn,
    keep_as: u64,
    message_json: &str,
    session_json: &str,
) -> Result<(GuestCall, u64), SandboxError> {
    loop {
        arm(&mut inst.store, limits.fuel, limits.deadline, clock)
            .map_err(|e| SandboxError::Internal(e.into()))?;
        let converse = inst
            .bindings
            .call_converse(&mut inst.store, &input, keep_as, message_json);
        let call = within_deadline(clock, limits.deadline, converse).await;
        let fuel_used = limits
            .fuel
            .saturating_sub(inst.store.get_fuel().unwrap_or(0));
        match call {
            // The guest dropped it (for size): the same step again, with the JSON.
            Ok(Err(StepErrorWit::NotKept(_))) if matches!(input, SessionIn::Kept(_)) => {
                input = SessionIn::Json(session_json.to_owned());
            }
            call => return Ok((call, fuel_used)),
        }
    }
}

/// The outcome of a step the guest finished: its report and new session (kept under
/// `keep_as` if the guest kept it, the oldest kept sessions forgotten past [`KEEP_MAX`]).
fn finished(
    inst: &mut Warm,
    out: StepOut,
    keep_as: u64,
    fuel_used: u64,
    warm: bool,
) -> Result<RawOutcome, SandboxError> {
    let report: StepReport = serde_json::from_str(&out.report)
        .map_err(|e| SandboxError::Internal(anyhow::anyhow!("guest result does not parse: {e}")))?;
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

/// The step error the guest answered with; an internal error when it refused the step
/// (no bot loaded, or a kept session it does not have).
fn step_error(e: StepErrorWit) -> Result<StepError, SandboxError> {
    Ok(match e {
        StepErrorWit::MaxRecursion(n) => StepError::MaxRecursion(n),
        StepErrorWit::Aborted(m) => StepError::Aborted(m),
        StepErrorWit::InvalidMessage(m) => StepError::InvalidMessage(m),
        StepErrorWit::NotLoaded | StepErrorWit::NotKept(_) => {
            return Err(SandboxError::Internal(anyhow::anyhow!(
                "the guest refused the step: {e:?}"
            )));
        }
    })
}

/// Logs what the guest wrote to its output during the step, line by line.
fn log_guest_output(store: &Store<StepState>) {
    for line in store
        .data()
        .output
        .contents()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
    {
        tracing::info!(target: "botbox::guest_output", "{}", String::from_utf8_lossy(line));
    }
}

/// Metrics of one step: its outcome, its latency (the wait for the tenant's turn included)
/// and, when it ran to its end, its fuel.
fn record_step(out: &Result<RawOutcome, SandboxError>, took: std::time::Duration) {
    let outcome = match out {
        Ok(_) => "ok",
        Err(SandboxError::Step(StepError::MaxRecursion(_))) => "max_recursion",
        Err(SandboxError::Step(StepError::Aborted(_))) => "aborted",
        Err(SandboxError::Step(StepError::InvalidMessage(_))) => "invalid_message",
        Err(SandboxError::Internal(_)) => "internal",
    };
    metrics::counter!("botbox_steps_total", "outcome" => outcome).increment(1);
    metrics::histogram!("botbox_step_duration_seconds").record(took.as_secs_f64());
    if let Ok(o) = out {
        metrics::histogram!("botbox_step_fuel").record(o.fuel_used as f64);
    }
}

/// Names the limit a trap hit, and where.
pub(super) fn explain(
    store: &Store<StepState>,
    limits: &Limits,
    trap: &wasmtime::Error,
) -> StepError {
    let st = store.data();
    if let Some(e) = &st.abort {
        return e.clone();
    }
    let who = st.who();
    let msg = match trap.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => format!("{who} exceeded its fuel budget of {}", limits.fuel),
        Some(Trap::Interrupt) => return deadline_error(&who, st.deadline, st.clock.elapsed()),
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
