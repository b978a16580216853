//! A step's clock: the wall time of a call into the guest, less the time the step waited for
//! a CPU slot (other steps' time), and the error of a step past its deadline.

use runtime_core::engine::StepError;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The wall time a call into the guest has taken: since it was (re)started, less the time
/// the step was queued for a CPU slot meanwhile.
pub struct StepClock {
    base: Instant,
    started_ns: AtomicU64,
    queued_ns: AtomicU64,
}

impl StepClock {
    pub fn start() -> Arc<StepClock> {
        Arc::new(StepClock {
            base: Instant::now(),
            started_ns: AtomicU64::new(0),
            queued_ns: AtomicU64::new(0),
        })
    }

    /// Starts again from now (the call into the guest after its instantiation).
    pub fn restart(&self) {
        self.started_ns
            .store(self.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.queued_ns.store(0, Ordering::Relaxed);
    }

    pub fn elapsed(&self) -> Duration {
        let spent =
            self.started_ns.load(Ordering::Relaxed) + self.queued_ns.load(Ordering::Relaxed);
        self.base
            .elapsed()
            .saturating_sub(Duration::from_nanos(spent))
    }

    pub fn add_queued(&self, d: Duration) {
        self.queued_ns
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

pub fn deadline_error(who: &str, deadline: Duration, elapsed: Duration) -> StepError {
    StepError::Aborted(format!(
        "{who} exceeded its deadline of {} ms (ran {} ms)",
        deadline.as_millis(),
        elapsed.as_millis()
    ))
}

/// Runs a call into the guest under its deadline: before each poll of the call the step's
/// clock is read, and past `deadline` the call is dropped (wasmtime unwinds the guest's
/// fiber) and answers `Trap::Interrupt`, which `step::explain` names as the deadline. The
/// guest is polled again at least every [`super::YIELD_FUEL`] units of fuel (its fuel
/// yields), and a host call it awaits has the deadline as its own time-out, so no call runs
/// past its deadline by more than one yield interval. After an interrupt the instance is
/// thrown away, as after any trap.
pub(crate) async fn within_deadline<T>(
    clock: &StepClock,
    deadline: Duration,
    call: impl std::future::Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        if clock.elapsed() >= deadline {
            return std::task::Poll::Ready(Err(wasmtime::Trap::Interrupt.into()));
        }
        call.as_mut().poll(cx)
    })
    .await
}
