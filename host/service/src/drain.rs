//! Graceful drain: what a stopping server still owes, and the signal that it is stopping.
//!
//! On SIGTERM or SIGINT the binary calls [`Drain::start`]: `GET /ready` answers 503 from
//! then on, the listener stops accepting, and every worker stops taking new work (the
//! outbox and schedule pollers, the task worker, the callback sender). Work already begun
//! holds a [`Busy`] token of its kind and is waited for ([`Drain::finished`]): connections
//! (and so webhook steps and open agent-run streams), agent runs, Case tasks, reply
//! deliveries, callback attempts, NLU trainings. The binary bounds the wait
//! (`--shutdown-timeout`); what is still running then is left as a crash would leave it,
//! which the stores already survive (a reply's outbox row is sent by whoever holds it next,
//! a task is taken over after its lease, an agent run ends as failed at the next start).
//!
//! Cost: one reference count per piece of work begun and ended (an atomic increment and
//! decrement); nothing while no drain runs.

use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// The kinds of work a drain waits for (and names in its log lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Open HTTP connections: their requests in flight (webhook steps, streams) finish.
    Connections,
    /// Agent runs cycling in this process.
    AgentRuns,
    /// Case tasks this process's worker took.
    Tasks,
    /// Reply deliveries queued or in flight (direct path and retries).
    Deliveries,
    /// Callback (outbound webhook) attempts in flight.
    Callbacks,
    /// NLU trainings running here.
    Trainings,
}

impl Work {
    pub const ALL: [Work; 6] = [
        Work::Connections,
        Work::AgentRuns,
        Work::Tasks,
        Work::Deliveries,
        Work::Callbacks,
        Work::Trainings,
    ];

    /// The name used in log lines.
    pub fn name(self) -> &'static str {
        match self {
            Work::Connections => "connections",
            Work::AgentRuns => "agent_runs",
            Work::Tasks => "tasks",
            Work::Deliveries => "deliveries",
            Work::Callbacks => "callbacks",
            Work::Trainings => "trainings",
        }
    }
}

/// A piece of work in flight: the drain waits until it is dropped.
pub type Busy = TaskTrackerToken;

/// The server's drain state; clones share it.
#[derive(Clone, Default)]
pub struct Drain {
    started: CancellationToken,
    work: Arc<[TaskTracker; Work::ALL.len()]>,
}

impl Drain {
    /// Starts draining (idempotent): readiness fails and workers stop taking new work.
    pub fn start(&self) {
        self.started.cancel();
        for t in self.work.iter() {
            t.close();
        }
    }

    /// Whether a drain has started.
    pub fn draining(&self) -> bool {
        self.started.is_cancelled()
    }

    /// Resolves once a drain starts (for workers' `select!`).
    pub async fn started(&self) {
        self.started.cancelled().await
    }

    /// Marks a piece of work begun; it counts as in flight until the token is dropped.
    /// Work begun after the drain started is counted too (an in-flight request's delivery).
    pub fn busy(&self, kind: Work) -> Busy {
        self.work[kind as usize].token()
    }

    /// The work still in flight, by kind (kinds with none left out).
    pub fn in_flight(&self) -> Vec<(&'static str, usize)> {
        Work::ALL
            .iter()
            .map(|w| (w.name(), self.work[*w as usize].len()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Resolves once a drain has started and no work of any kind is in flight.
    pub async fn finished(&self) {
        self.started().await;
        for t in self.work.iter() {
            t.wait().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work begun before the drain keeps `finished` pending until it ends; readiness flips at
    /// `start`, and work begun during the drain is waited for too.
    #[tokio::test]
    async fn a_drain_waits_for_the_work_in_flight() {
        let drain = Drain::default();
        let run = drain.busy(Work::AgentRuns);
        assert!(!drain.draining());
        drain.start();
        assert!(drain.draining());
        let late = drain.busy(Work::Deliveries);
        assert_eq!(
            drain.in_flight(),
            vec![("agent_runs", 1), ("deliveries", 1)]
        );
        let mut finished = std::pin::pin!(drain.finished());
        assert!(futures_util::poll!(finished.as_mut()).is_pending());
        drop(run);
        assert!(futures_util::poll!(finished.as_mut()).is_pending());
        drop(late);
        assert!(futures_util::poll!(finished.as_mut()).is_ready());
    }

    /// Without a drain, `finished` never resolves, even with nothing in flight.
    #[tokio::test]
    async fn nothing_finishes_before_a_drain_starts() {
        let drain = Drain::default();
        let mut finished = std::pin::pin!(drain.finished());
        assert!(futures_util::poll!(finished.as_mut()).is_pending());
    }
}
