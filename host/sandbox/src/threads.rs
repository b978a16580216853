//! Where steps run: where they are awaited, for a tenant within its share; on the background
//! lane's step threads, for a tenant over its share; and on burn threads, at the OS's lowest
//! priority, once a step has used its express budget.
//!
//! A step of a tenant within its share runs on the thread of the task that awaits it
//! ([`here`]): the HTTP task that received the message carries it to its end, with no
//! hand-off to another thread. The guest yields every [`super::YIELD_FUEL`] units of fuel,
//! so the worker serves its other tasks at least every quarter of a millisecond, and the CPU
//! slots (`sched.rs`) decide which tenant's guest runs. Once a step has held slots for
//! [`super::sched::EXPRESS_BUDGET`] (2 ms) it is *burning*, and before its next poll it
//! moves, for good, to a burn thread (`SCHED_IDLE` on Linux: any other thread that wakes
//! takes the core from it at once). Why: the OS divides the cores between runnable threads,
//! not between tenants. A guest burning its fuel on a worker would keep the other tenants'
//! HTTP, storage and short steps waiting at every one of its quanta; on a burn thread it only
//! takes what nobody else wants. A typical step (tens of µs) never moves.
//!
//! A tenant over its share (`Live::over_share`: its messages wait for turns while another
//! tenant has some in flight) starts its steps on the background lane's step threads
//! ([`spawn`], `SCHED_IDLE` like the burn threads, no express slot): its steps take only what
//! nobody else wants from their first instruction (B's p99 under A's CPU burn 2.0–2.8 ms
//! against 3.7–4.4 ms at nice 19, 4 runs each).
//!
//! Cost: a step that computes for more than 2 ms gets only idle CPU while the cores are
//! saturated; its wall-clock deadline (12 s by default) still runs meanwhile, so on a
//! server overloaded for seconds such a step can hit its deadline (its fuel, 13 ms of CPU
//! by default, is the budget that matters on a healthy one). Moving costs one task spawn
//! per burning step. A malicious guest gains nothing by moving: it keeps its fuel, deadline
//! and turn in the CPU ring, on a thread the OS serves last. A tenant over its share gets
//! its steps' CPU after everyone else's while the cores are busy (and all of it while they
//! are not); while the cores are saturated by other tenants' work for longer than its
//! deadline, its steps fail with a time-out instead of running slowly (`SCHED_IDLE` is
//! still the lowest weight of the fair class, not a class that waits for idle cores: see
//! the test `a_background_lane_step_runs_while_every_core_is_busy`). A single tenant's
//! steps (never over its share: no other tenant is busy) run where they are awaited.

use botbox_lanes::{Lane, idle_this_thread, nice_this_thread, runtime};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use tokio::task::JoinHandle;

/// The OS priority of the main lane's step threads against the server's other threads
/// (nice 10, the others run at 0): when the cores are busy, the HTTP, storage and delivery
/// work of every tenant runs first and guests get the rest, so tenants' JavaScript cannot
/// starve the shared path through the OS scheduler (a guest alone still gets a whole core).
/// Cost: a step's own guest work also yields to that shared work while the cores are
/// saturated. The same as [`botbox_lanes::BACKGROUND_NICE`], the live work of a tenant
/// over its share; that tenant's own steps run under `SCHED_IDLE` (the background lane).
const STEP_THREAD_NICE: i32 = botbox_lanes::BACKGROUND_NICE;

/// A lane's step threads, one per core, shared by every sandbox of the process (guests run
/// under CPU slots, so more threads would only wait). Their timers serve the deadline of
/// host calls. The main lane's run at [`STEP_THREAD_NICE`], the background lane's under
/// `SCHED_IDLE` (nice 19 where that fails).
fn step_threads(lane: Lane) -> &'static tokio::runtime::Runtime {
    static MAIN: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    static BACKGROUND: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    match lane {
        Lane::Main => {
            MAIN.get_or_init(|| runtime("botbox-step", || nice_this_thread(STEP_THREAD_NICE)))
        }
        Lane::Background => BACKGROUND.get_or_init(|| {
            runtime("botbox-step-bg", || {
                idle_this_thread();
                IN_BACKGROUND_LANE.set(true);
            })
        }),
    }
}

/// Whether the calling thread is one of the background lane's step threads: a step polled
/// there is of a tenant over its share, and takes no express slot (`sched::OnCpu`).
pub(crate) fn in_background_lane() -> bool {
    IN_BACKGROUND_LANE.get()
}

/// The threads burning steps run on, one per core, under `SCHED_IDLE`.
fn burn_threads() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| runtime("botbox-burn", idle_this_thread))
}

thread_local! {
    /// Set on the background lane's step threads.
    static IN_BACKGROUND_LANE: Cell<bool> = const { Cell::new(false) };
    /// Set while a [`Movable`] polls its step on this thread: the step may ask to move.
    static MAY_MOVE: Cell<bool> = const { Cell::new(false) };
    /// Set by a step (through [`ask_to_move`]) that wants to go to the burn threads.
    static MOVE_ASKED: Cell<bool> = const { Cell::new(false) };
}

/// Called by a step that has used its express budget, before its next poll. True: the
/// step returns `Pending` without doing anything more, and it is polled next on a burn
/// thread (with a new waker). False: it is not polled by a [`here`] or [`spawn`] that can
/// move it (it is on a burn thread already, or under [`block_on`]), and it goes on where it
/// is.
pub(crate) fn ask_to_move() -> bool {
    if MAY_MOVE.get() {
        MOVE_ASKED.set(true);
        true
    } else {
        false
    }
}

/// Runs a sandbox future (a step) where it is awaited, on the awaiting task's thread: the
/// common path, with no hand-off. It moves to the burn threads when it asks to
/// (`ask_to_move`) and is awaited there from then on; dropping it drops the step wherever it
/// runs.
pub fn here<F>(future: F) -> impl Future<Output = F::Output> + Send
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Movable::Here(Box::pin(future))
}

/// Runs a sandbox future (a step) on `lane`'s step threads; it moves to the burn threads
/// when it asks to (`ask_to_move`). Aborting the returned handle aborts the step wherever
/// it runs.
pub fn spawn<F>(lane: Lane, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    step_threads(lane).spawn(here(future))
}

/// Runs a sandbox future on this thread, for synchronous callers (the CLI, tests, benches).
/// It does not move. Panics inside an async context: there, use [`spawn`].
pub fn block_on<F: Future>(future: F) -> F::Output {
    step_threads(Lane::Main).block_on(future)
}

/// A step that is polled where it is awaited (or on a step thread) until it asks to move,
/// then on a burn thread.
enum Movable<F: Future> {
    Here(Pin<Box<F>>),
    Moved(AbortOnDrop<F::Output>),
    /// Only while moving.
    Gone,
}

/// The moved step's task: aborted when the [`Movable`] that awaits it is dropped, so that
/// cancelling a step cancels it wherever it runs.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<F> Future for Movable<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Every field is boxed or a handle: nothing here is pinned in place.
        let this = self.get_mut();
        loop {
            match this {
                Movable::Here(step) => {
                    MAY_MOVE.set(true);
                    MOVE_ASKED.set(false);
                    let out = step.as_mut().poll(cx);
                    MAY_MOVE.set(false);
                    if out.is_ready() || !MOVE_ASKED.replace(false) {
                        return out;
                    }
                    // The boxed step keeps its address; its next poll is on a burn thread.
                    let Movable::Here(step) = std::mem::replace(this, Movable::Gone) else {
                        unreachable!("matched above")
                    };
                    *this = Movable::Moved(AbortOnDrop(burn_threads().spawn(step)));
                }
                Movable::Moved(task) => {
                    return match Pin::new(&mut task.0).poll(cx) {
                        Poll::Ready(Ok(out)) => Poll::Ready(out),
                        Poll::Ready(Err(e)) if e.is_panic() => {
                            std::panic::resume_unwind(e.into_panic())
                        }
                        Poll::Ready(Err(e)) => panic!("a moved step was cancelled: {e}"),
                        Poll::Pending => Poll::Pending,
                    };
                }
                Movable::Gone => unreachable!("a step is never left half moved"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread_name() -> String {
        std::thread::current().name().unwrap_or("").to_owned()
    }

    /// A step that asks to move at its `ask_at`-th poll and records where each poll ran.
    struct Probe {
        polls: usize,
        ask_at: usize,
        seen: Vec<String>,
        moved: bool,
    }

    impl Future for Probe {
        type Output = Vec<String>;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<String>> {
            self.polls += 1;
            if self.polls >= self.ask_at && !self.moved {
                self.moved = true;
                if ask_to_move() {
                    return Poll::Pending;
                }
            }
            let name = thread_name();
            self.seen.push(name);
            if self.polls >= 5 {
                return Poll::Ready(std::mem::take(&mut self.seen));
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[test]
    fn a_step_that_asks_runs_on_the_burn_threads_from_then_on() {
        let seen = block_on(spawn(
            Lane::Main,
            Probe {
                polls: 0,
                ask_at: 3,
                seen: vec![],
                moved: false,
            },
        ))
        .unwrap();
        assert_eq!(
            seen,
            ["botbox-step", "botbox-step", "botbox-burn", "botbox-burn"]
        );
    }

    /// A step run `here` is polled on the thread of the task that awaits it, with no
    /// hand-off, until it asks to move; then on a burn thread.
    #[test]
    fn here_a_step_runs_on_the_awaiting_thread_until_it_asks_to_move() {
        let awaiting = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let seen = awaiting.block_on(here(Probe {
            polls: 0,
            ask_at: 3,
            seen: vec![],
            moved: false,
        }));
        let this = thread_name();
        assert_eq!(seen, [&*this, &*this, "botbox-burn", "botbox-burn"]);
    }

    #[test]
    fn under_block_on_a_step_stays_where_it_is() {
        let seen = block_on(Probe {
            polls: 0,
            ask_at: 2,
            seen: vec![],
            moved: false,
        });
        assert_eq!(seen.len(), 5, "the step went on after asking: {seen:?}");
        assert!(seen.iter().all(|t| !t.starts_with("botbox-burn")));
    }

    /// The calling thread's scheduling policy (Linux).
    #[cfg(target_os = "linux")]
    fn policy() -> i32 {
        // SAFETY: reads this thread's own policy.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn burn_threads_run_under_sched_idle() {
        let policy = block_on(burn_threads().spawn(async { policy() })).unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
    }

    #[test]
    fn a_step_starts_on_its_lanes_threads_at_its_lanes_priority() {
        let on = |lane| {
            block_on(spawn(lane, async {
                (
                    thread_name(),
                    botbox_lanes::this_thread_nice(),
                    in_background_lane(),
                    #[cfg(target_os = "linux")]
                    policy(),
                )
            }))
            .unwrap()
        };
        let main = on(Lane::Main);
        let background = on(Lane::Background);
        assert_eq!(main.0, "botbox-step");
        assert_eq!(background.0, "botbox-step-bg");
        assert!(!main.2 && background.2);
        #[cfg(target_os = "linux")]
        {
            assert_eq!((main.1, main.3), (STEP_THREAD_NICE, libc::SCHED_OTHER));
            assert_eq!(background.3, libc::SCHED_IDLE);
        }
    }

    /// Runs `step` (which sends where it ran) while one thread per core spins at normal
    /// priority, and returns where it ran; panics if it got no CPU in 30 s.
    fn runs_while_every_core_is_busy(step: impl FnOnce(std::sync::mpsc::Sender<String>)) -> String {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..botbox_lanes::cores())
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        step(tx);
        let got = rx.recv_timeout(std::time::Duration::from_secs(30));
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        got.expect("the step got no CPU in 30 s while the cores were busy")
    }

    /// Some guest-like work.
    fn guest_like_work() -> u64 {
        let mut x = 0u64;
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        x
    }

    /// A moved step still gets CPU while every core is kept busy by threads at normal
    /// priority (another process, an NLU training, argon2): on Linux `SCHED_IDLE` is the
    /// lowest weight of the fair class (about 0.3% of a core against each busy thread), not
    /// a class that waits for idle cores, so a burning step, which holds its CPU slot, always
    /// ends. A policy that starved it would stall every step waiting for that slot.
    #[test]
    fn a_moved_step_runs_while_every_core_is_busy() {
        let at = runs_while_every_core_is_busy(|tx| {
            spawn(Lane::Main, async move {
                move_to_burn_threads().await;
                guest_like_work();
                tx.send(thread_name()).unwrap();
            });
        });
        assert_eq!(at, "botbox-burn");
    }

    /// The same for a step of a tenant over its share, which runs under `SCHED_IDLE` from
    /// its first poll: it holds a regular CPU slot while it runs, so it must end too.
    #[test]
    fn a_background_lane_step_runs_while_every_core_is_busy() {
        let at = runs_while_every_core_is_busy(|tx| {
            spawn(Lane::Background, async move {
                guest_like_work();
                tx.send(thread_name()).unwrap();
            });
        });
        assert_eq!(at, "botbox-step-bg");
    }

    /// Asks to move, and goes on from its next poll (on a burn thread, under [`spawn`]).
    async fn move_to_burn_threads() {
        std::future::poll_fn(|_| {
            if ask_to_move() {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await
    }

    /// Says where it was dropped.
    struct DropFlag(std::sync::mpsc::Sender<String>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            let _ = self.0.send(thread_name());
        }
    }

    #[test]
    fn aborting_a_moved_step_drops_it_on_the_burn_threads() {
        let (dropped_tx, dropped) = std::sync::mpsc::channel();
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = DropFlag(dropped_tx);
        let handle = spawn(Lane::Main, async move {
            let _flag = flag;
            move_to_burn_threads().await;
            tx.send(thread_name()).unwrap();
            std::future::pending::<()>().await
        });
        assert_eq!(rx.recv().unwrap(), "botbox-burn");
        assert!(dropped.try_recv().is_err(), "dropped before the abort");
        handle.abort();
        assert!(block_on(handle).unwrap_err().is_cancelled());
        // The moved task is aborted too: its future (and the flag in it) is dropped there.
        let at = dropped
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the moved step was not dropped after its handle was aborted");
        assert_eq!(at, "botbox-burn");
    }
}
