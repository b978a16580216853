//! OS priorities for the server's threads, and the background runtime.
//!
//! May depend on: tokio and libc only. Must never know about tenants, storage or HTTP:
//! callers name the lane; this crate only moves work between threads of different priority.
//!
//! The OS divides the cores between runnable threads, not between tenants, and tokio's
//! scheduler has no priorities: a task waits behind every task queued before it. So where
//! one tenant's work must not delay another's, the work runs on threads of lower OS
//! priority, and the OS runs the other threads first whenever both want a core:
//!
//! - a tenant over its share's steps and the burning steps of every tenant under
//!   `SCHED_IDLE` (`botbox_sandbox`'s `threads`; other steps run on the thread of the
//!   request that brought them, a guest yielding every quarter of a millisecond);
//! - the live path's async work for a tenant that sends more than its share of turns runs
//!   (its messages wait for turns: `botbox_service::live`) on the [`background`] runtime at
//!   [`BACKGROUND_NICE`]: its receive pipeline (parse, dedupe, step; its storage and
//!   provider calls go back to the main runtime: `Live::io_on_main`) and the connections
//!   that bring its webhooks (a connection that also brings other tenants' only from the
//!   moment its webhook is routed until it is answered).
//!
//! Everything else (other connections, the project API, deliveries, storage I/O, the
//! committer with its SQLite transactions) runs at nice 0. Threads inherit their creator's
//! nice value, and sockets belong to the runtime that opened them: work on the background
//! runtime must not open what shared pools hand to other tenants ([`in_background`]). Lowering a thread's priority is allowed
//! unprivileged; raising it back is not, so each runtime's threads keep theirs for life.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::Poll;

/// The OS priority of the [`background`] runtime and of the main lane's step threads
/// (nice 10, the server's other threads run at 0). CFS weighs nice 10 at about a tenth of nice 0: when
/// the cores are busy, a thread at 0 that wakes gets the core first and most of its time.
/// A thread at nice 10 still gets a whole core when nothing else wants it: nothing is lost
/// while the machine has room.
pub const BACKGROUND_NICE: i32 = 10;

/// Sets the calling thread's nice value (Linux: per thread; elsewhere nothing).
pub fn nice_this_thread(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on this thread's own id; no memory is touched.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, tid, nice) != 0 {
            tracing::debug!(nice, "could not lower the thread's priority");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// Puts the calling thread under `SCHED_IDLE` (Linux: per thread; allowed unprivileged, as
/// it only lowers the priority), or nice 19 where that fails.
pub fn idle_this_thread() {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_setscheduler on this thread's own id, with a parameter that lives on
    // the stack for the call; no other memory is touched.
    unsafe {
        let tid = libc::gettid();
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) != 0 {
            nice_this_thread(19);
        }
    }
}

/// The calling thread's nice value (Linux; 0 elsewhere).
pub fn this_thread_nice() -> i32 {
    #[cfg(target_os = "linux")]
    // SAFETY: getpriority on this thread's own id; errno is cleared first because -1 is
    // also a valid answer.
    unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t)
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// A multi-thread runtime of one thread per core named `name`, each thread set up by
/// `on_start` (its priority) before it runs a task.
pub fn runtime(name: &str, on_start: fn()) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(crate::cores())
        .thread_name(name)
        .on_thread_start(on_start)
        .enable_all()
        .build()
        .expect("a runtime's threads")
}

/// The background runtime: one thread per core at [`BACKGROUND_NICE`], for the live work of
/// a tenant over its share (see the module's comment). Tasks on it may use everything the
/// main runtime made (database pools, HTTP clients): tokio's I/O and timers are driven by
/// the runtime that registered them, and a waker wakes a task wherever it runs. It lives
/// as long as the process.
///
/// Cost: one idle thread per core; a task spawned here from the main runtime is one
/// cross-thread wake-up, as `tokio::spawn` often is. What a malicious tenant can do with
/// it: nothing more than on the main runtime; its work runs later, never sooner.
pub fn background() -> &'static tokio::runtime::Handle {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        runtime("botbox-bg", || {
            nice_this_thread(BACKGROUND_NICE);
            IN_BACKGROUND.set(true);
        })
    })
    .handle()
}

thread_local! {
    /// Set on the [`background`] runtime's threads.
    static IN_BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is one of the [`background`] runtime's.
pub fn in_background() -> bool {
    IN_BACKGROUND.get()
}

/// Where a connection's work runs: the main runtime, or [`background`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Main,
    Background,
}

thread_local! {
    /// The lane of the connection [`hopping`] polls on this thread, while it polls it.
    static POLLING: Cell<Option<Lane>> = const { Cell::new(None) };
    /// The lane the request being handled asked for ([`prefer`]).
    static WANTED: Cell<Option<Lane>> = const { Cell::new(None) };
    /// The tenants whose requests the connection carried during this poll ([`prefer_for`]).
    static CLAIMED: Cell<Claim> = const { Cell::new(Claim::Nobody) };
}

/// Tenants named by the requests of one poll of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    Nobody,
    /// One tenant (a hash of its id: two tenants whose ids collide look like one, and their
    /// shared connection is then treated as one tenant's: it may stay in the background
    /// between requests).
    One(u64),
    Several,
}

impl Claim {
    fn and(self, tenant: u64) -> Claim {
        match self {
            Claim::Nobody => Claim::One(tenant),
            Claim::One(t) if t == tenant => self,
            _ => Claim::Several,
        }
    }

    /// The tenants of both.
    fn with(self, other: Claim) -> Claim {
        match other {
            Claim::Nobody => self,
            Claim::One(t) => self.and(t),
            Claim::Several => Claim::Several,
        }
    }
}

/// Asks that the connection whose request is being handled on this thread go on in `lane`:
/// once its poll returns (the handler waits for something), [`hopping`] moves it there, so
/// that the rest of this request and the reading of the next one run on that lane's
/// threads (a shared connection reads the next one on the main runtime: [`prefer_for`]).
/// The last call of a poll wins. Outside a connection's poll (a task of its own,
/// an HTTP/2 stream) it does nothing.
pub fn prefer(lane: Lane) {
    if POLLING.get().is_some() {
        WANTED.set(Some(lane));
    }
}

/// [`prefer`], for a request that belongs to `tenant` (a webhook of one of its channels).
/// A connection that has carried requests of two tenants is shared (a provider's
/// connection brings many tenants' webhooks): it follows each request's wish only while
/// that request is being handled, and goes back to the main runtime as soon as it has none
/// in hand ([`hopping`]), so that the next tenant's request is read there, not behind the
/// first one's work.
pub fn prefer_for(tenant: &str, lane: Lane) {
    if POLLING.get().is_some() {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        tenant.hash(&mut h);
        CLAIMED.set(CLAIMED.get().and(h.finish()));
    }
    prefer(lane);
}

/// [`prefer_for`] (or [`prefer`] without a tenant), then, if that moves the connection
/// being polled, lets it move before going on: what the request does next (taking its
/// body, parsing it, answering) runs on `lane`'s threads. Costs one yield whenever the
/// connection is polled on another lane than `lane` (also when it then stays, as a shared
/// connection with no request in hand does), nothing otherwise; outside a connection's
/// poll it is [`prefer`]'s no-op.
pub async fn go_to(tenant: Option<&str>, lane: Lane) {
    match tenant {
        Some(t) => prefer_for(t, lane),
        None => prefer(lane),
    }
    if POLLING.get().is_some_and(|on| on != lane) {
        tokio::task::yield_now().await;
    }
}

/// The requests a connection has in hand: [`hopping`] sends a shared connection back to
/// the main runtime when there are none. Each request's future is wrapped in `track`
/// (`InFlight::track`) by whoever creates it.
#[derive(Clone, Default)]
pub struct InFlight(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    /// `request`, counted in from now until it ends or is dropped.
    pub fn track<F: Future>(&self, request: F) -> impl Future<Output = F::Output> + use<F> {
        use std::sync::atomic::Ordering;
        struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.0.fetch_add(1, Ordering::AcqRel);
        let counted = Counted(self.0.clone());
        async move {
            let out = request.await;
            drop(counted);
            out
        }
    }

    fn busy(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire) > 0
    }
}

type BoxedConnection = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Serves a connection (`conn`: hyper's future for it) on the lane its requests ask for
/// ([`prefer`], [`prefer_for`]), starting on the main runtime, the one this is awaited on.
///
/// HTTP parsing and answering are the bulk of a webhook's work outside the step: a tenant
/// flooding its webhooks over its share otherwise keeps the main runtime's workers busy
/// with its connections, and every other tenant's requests queue behind them (tokio runs
/// tasks in order, without priorities). Cost: a move is one task spawned on the other
/// runtime (a cross-thread wake-up); a connection that keeps to one lane never moves.
/// A connection that carried two tenants' requests is shared: it follows a request's wish
/// only while `requests` counts some request in hand, and otherwise waits on the main
/// runtime (two moves per request that asks for the background). Cancelling the returned
/// future (dropping its task) cancels the connection wherever it runs.
pub async fn hopping<F>(conn: F, requests: InFlight)
where
    F: Future<Output = ()> + Send + 'static,
{
    let mut conn = Connection {
        future: Box::pin(conn),
        lane: Lane::Main,
        tenants: Claim::Nobody,
        requests,
    };
    loop {
        let lane = conn.lane;
        let run = until_moved(conn);
        let moved = match lane {
            Lane::Main => run.await,
            Lane::Background => {
                let mut task = AbortOnDrop(background().spawn(run));
                match (&mut task.0).await {
                    Ok(m) => m,
                    Err(_) => return,
                }
            }
        };
        match moved {
            None => return,
            Some(c) => conn = c,
        }
    }
}

/// A connection served by [`hopping`], and what it knows of its requests so far.
struct Connection {
    future: BoxedConnection,
    /// Where it runs.
    lane: Lane,
    /// The tenants its requests named so far ([`prefer_for`]); once several, it is shared.
    tenants: Claim,
    /// Its requests in hand.
    requests: InFlight,
}

impl Connection {
    /// Takes in what the requests of the poll just made said; the lane it should be on.
    /// A shared connection with no request in hand goes back to the main runtime.
    fn heard(&mut self, wanted: Option<Lane>, claimed: Claim) -> Lane {
        self.tenants = self.tenants.with(claimed);
        if self.tenants == Claim::Several && !self.requests.busy() {
            Lane::Main
        } else {
            wanted.unwrap_or(self.lane)
        }
    }
}

/// Polls the connection on its lane until it ends (`None`) or, returning pending, should
/// go to the other lane (`Some`: the connection, its lane set to where it goes).
fn until_moved(conn: Connection) -> impl Future<Output = Option<Connection>> + Send {
    /// Clears this thread's marks however the poll ends (a panic included).
    struct Polling;
    impl Drop for Polling {
        fn drop(&mut self) {
            POLLING.set(None);
            WANTED.set(None);
            CLAIMED.set(Claim::Nobody);
        }
    }
    let mut slot = Some(conn);
    std::future::poll_fn(move |cx| {
        let conn = slot.as_mut().expect("polled after it ended");
        let (wanted, claimed) = {
            let _marks = Polling;
            WANTED.set(None);
            CLAIMED.set(Claim::Nobody);
            POLLING.set(Some(conn.lane));
            match conn.future.as_mut().poll(cx) {
                Poll::Ready(()) => return Poll::Ready(None),
                Poll::Pending => (WANTED.get(), CLAIMED.get()),
            }
        };
        let to = conn.heard(wanted, claimed);
        if to == conn.lane {
            return Poll::Pending;
        }
        let mut moving = slot.take().expect("checked above");
        moving.lane = to;
        Poll::Ready(Some(moving))
    })
}

/// A task aborted when this is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The cores this process may use (2 when the OS does not say): what thread pools, CPU
/// slots and per-tenant shares are sized by.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn background_tasks_run_at_the_background_priority_and_others_do_not() {
        let base = this_thread_nice();
        assert!(
            base < BACKGROUND_NICE,
            "the test runs at the usual priority"
        );
        let there = background()
            .spawn(async { (this_thread_nice(), in_background()) })
            .await
            .unwrap();
        assert_eq!(there, (BACKGROUND_NICE, true));
        let here = tokio::spawn(async { (this_thread_nice(), in_background()) })
            .await
            .unwrap();
        assert_eq!(
            here,
            (base, false),
            "the main runtime keeps the process's priority"
        );
    }

    fn lane_of_this_thread() -> Lane {
        let name = std::thread::current().name().unwrap_or_default().to_owned();
        if name == "botbox-bg" {
            assert_eq!(this_thread_nice(), BACKGROUND_NICE);
            Lane::Background
        } else {
            Lane::Main
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_connection_goes_where_its_requests_ask_and_comes_back() {
        let seen = tokio::spawn(hopping_probe(vec![
            None,
            Some(Lane::Background),
            None,
            Some(Lane::Main),
            Some(Lane::Main),
            Some(Lane::Background),
        ]))
        .await
        .unwrap();
        // Each poll runs where the previous one asked for.
        use Lane::*;
        assert_eq!(seen, vec![Main, Main, Background, Background, Main, Main]);
    }

    /// A connection whose polls ask for `asks` in turn (`None`: nothing) and yield between
    /// them; where each poll ran.
    async fn hopping_probe(asks: Vec<Option<Lane>>) -> Vec<Lane> {
        let asks = asks
            .into_iter()
            .map(|a| a.map(|lane| (None, lane)).into_iter().collect())
            .collect();
        tenants_probe(asks).await
    }

    /// A connection whose polls make the wishes of `polls` in turn (each `(tenant, lane)`:
    /// [`prefer_for`] with a tenant, [`prefer`] without) and yield between them; where each
    /// poll ran.
    async fn tenants_probe(polls: Vec<Vec<(Option<&'static str>, Lane)>>) -> Vec<Lane> {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        hopping(
            async move {
                for wishes in polls {
                    log.lock().unwrap().push(lane_of_this_thread());
                    for (tenant, lane) in wishes {
                        match tenant {
                            Some(t) => prefer_for(t, lane),
                            None => prefer(lane),
                        }
                    }
                    tokio::task::yield_now().await;
                }
            },
            InFlight::default(),
        )
        .await;
        std::mem::take(&mut *seen.lock().unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_connection_that_carried_two_tenants_waits_on_the_main_runtime() {
        use Lane::*;
        let a = |lane| vec![(Some("tenant-a"), lane)];
        // One tenant's connection follows its wishes, whatever it asks; a request that names
        // no tenant (the project API) moves it too, and shares nothing.
        let seen = tokio::spawn(tenants_probe(vec![
            a(Background),
            vec![],
            a(Main),
            vec![(None, Background)],
            a(Background),
            vec![],
        ]))
        .await
        .unwrap();
        assert_eq!(
            seen,
            vec![Main, Background, Background, Main, Background, Background]
        );
        // Another tenant's request on it: back to the main runtime, and there while it has
        // no request in hand (these polls have none; see the next test for those).
        let seen = tokio::spawn(tenants_probe(vec![
            a(Background),
            vec![(Some("tenant-b"), Main)],
            a(Background),
            vec![(None, Background)],
            vec![],
        ]))
        .await
        .unwrap();
        assert_eq!(seen, vec![Main, Background, Main, Main, Main]);
        // Two tenants' requests in one poll (pipelined): the same.
        let seen = tokio::spawn(tenants_probe(vec![
            vec![
                (Some("tenant-a"), Background),
                (Some("tenant-b"), Background),
            ],
            a(Background),
            vec![],
        ]))
        .await
        .unwrap();
        assert_eq!(seen, vec![Main, Main, Main]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_shared_connection_follows_the_request_in_hand_and_waits_on_the_main_runtime() {
        use Lane::*;
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let note = move || log.lock().unwrap().push(lane_of_this_thread());
        let requests = InFlight::default();
        let in_hand = requests.clone();
        tokio::spawn(hopping(
            async move {
                // Tenant a's request, then tenant b's: the connection is shared.
                in_hand
                    .track(async {
                        prefer_for("tenant-a", Main);
                        tokio::task::yield_now().await;
                    })
                    .await;
                in_hand
                    .track(async {
                        note();
                        // b is over its share: the rest of its request runs there...
                        go_to(Some("tenant-b"), Background).await;
                        note();
                        tokio::task::yield_now().await;
                        note();
                    })
                    .await;
                // ...and once it has been answered, the connection waits on main.
                tokio::task::yield_now().await;
                note();
                // A wish made with no request in hand moves nothing.
                go_to(Some("tenant-b"), Background).await;
                tokio::task::yield_now().await;
                note();
            },
            requests,
        ))
        .await
        .unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![Main, Background, Background, Main, Main]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_wish_made_outside_a_connection_moves_nothing() {
        // Asked by a task that is no connection: no effect, now or on a later poll.
        tokio::spawn(async { prefer(Lane::Background) })
            .await
            .unwrap();
        prefer(Lane::Background);
        let seen = tokio::spawn(hopping_probe(vec![None, None, None]))
            .await
            .unwrap();
        assert_eq!(seen, vec![Lane::Main; 3]);
    }
}
