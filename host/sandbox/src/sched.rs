//! Who runs: the fair scheduler of CPU slots, and the per-tenant cap on steps in flight.
//!
//! A step holds a CPU slot only while its guest runs ([`OnCpu`]): whenever the step's future
//! is pending (a host call in flight, a fuel yield, a wait for an instance) the slot goes
//! back, and the step queues again before it is polled next. Waiting steps queue per tenant,
//! and a freed slot goes to the next tenant in turn, not to the oldest step: a tenant with
//! many waiting steps gets one turn per round like a tenant with one.
//!
//! Express slots: besides the regular slots, a few slots serve only *fresh* steps, those
//! that have held a slot for less than [`EXPRESS_BUDGET`] so far. A guest that burns its
//! fuel holds a regular slot until its next yield, and its thread yields only when the OS
//! runs it: on busy cores that can take milliseconds, and every other tenant's step waited
//! that long behind it. A fresh step (a typical bot step runs for tens of µs) takes an
//! express slot instead and does not wait for the burning guest at all; once it has used its
//! budget it queues for the regular slots like any other.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::clock::StepClock;

/// How long a step may have held slots and still count as fresh, able to take an express
/// slot: 2 ms. A typical step runs for tens of µs, one that calls a JavaScript method for
/// about 0.7 ms (most of it creating the boa context; sandbox-bench, docs/performance.md), so both stay
/// fresh; a step that burns its fuel (13 ms of CPU by default) leaves the express lane after
/// this much, and then runs on the burn threads (`threads.rs`). A fresh guest still gives
/// its slot up at every fuel yield ([`super::YIELD_FUEL`]), like any other.
pub(crate) const EXPRESS_BUDGET: Duration = Duration::from_millis(2);

/// CPU slots, handed out round-robin between tenants.
pub(crate) struct Cpu {
    state: Mutex<State>,
}

/// Which kind of slot a step holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// Any step may hold it.
    Regular,
    /// Only a fresh step may hold it.
    Express,
}

#[derive(Default)]
struct State {
    /// Regular slots nobody holds. Never above zero while a step waits: a freed slot goes
    /// straight to a waiter.
    free: usize,
    /// Express slots nobody holds. Never above zero while a fresh step waits.
    express_free: usize,
    /// Tenants with waiting steps, in the order they will be served.
    ring: VecDeque<Arc<str>>,
    /// The tenant the last slot went to. A tenant that starts waiting goes into the ring
    /// before it (see [`State::enqueue`]).
    last: Option<Arc<str>>,
    /// Each waiting tenant's steps, oldest first.
    queues: HashMap<Arc<str>, VecDeque<Arc<Waiter>>>,
    /// Tenants with steps in flight that have used their express budget (burning steps),
    /// and how many. Such a tenant's fresh steps take no express slot: see [`Cpu::acquire`].
    burning: HashMap<Arc<str>, usize>,
}

/// A step waiting for a slot. Lock order: the scheduler's state, then a waiter.
struct Waiter {
    /// It may take an express slot.
    fresh: bool,
    wait: Mutex<Wait>,
}

#[derive(Default)]
struct Wait {
    /// A slot was handed over; the waiter owns it.
    granted: Option<Lane>,
    waker: Option<Waker>,
}

/// A CPU slot; given back (to the next tenant in turn) when dropped.
pub(crate) struct Slot<'a> {
    cpu: &'a Cpu,
    lane: Lane,
}

impl Cpu {
    /// `slots` regular slots (at least one) and `express` slots for fresh steps.
    pub fn new(slots: usize, express: usize) -> Cpu {
        Cpu {
            state: Mutex::new(State {
                free: slots.max(1),
                express_free: express,
                ..State::default()
            }),
        }
    }

    /// A slot for a step of `tenant`: at once when one is free, else in the tenant's turn.
    /// A `fresh` step may take an express slot, and takes one first when it can, unless its
    /// tenant has a burning step in flight ([`Cpu::burning`]): a tenant that keeps steps
    /// burning their fuel would otherwise hold the express slot for the first 2 ms of each
    /// new step, and every other tenant's short step would wait for its quantum there too.
    pub fn acquire<'a>(&'a self, tenant: &'a Arc<str>, fresh: bool) -> Acquire<'a> {
        Acquire {
            cpu: self,
            tenant,
            fresh,
            waiter: None,
            done: false,
        }
    }

    /// Marks one of `tenant`'s steps as burning (it has used its express budget) until the
    /// returned guard is dropped, with the step.
    fn burning<'a>(&'a self, tenant: &'a Arc<str>) -> Burning<'a> {
        let mut st = self.state.lock().unwrap();
        *st.burning.entry(tenant.clone()).or_default() += 1;
        Burning { cpu: self, tenant }
    }

    /// Hands a freed slot to the next tenant in turn, or keeps it free.
    fn release(&self, lane: Lane) {
        let mut st = self.state.lock().unwrap();
        let woken = st.grant_next(lane);
        drop(st);
        if let Some(w) = woken {
            w.wake();
        }
    }

    /// Steps waiting for a slot, over all tenants.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        let st = self.state.lock().unwrap();
        st.queues.values().map(VecDeque::len).sum()
    }
}

impl State {
    /// Gives a slot of `lane` that was just freed to the oldest waiter that may hold it, of
    /// the first tenant in turn that has one; that tenant goes to the back of the ring if it
    /// has more. Returns the waker to wake (outside the lock).
    fn grant_next(&mut self, lane: Lane) -> Option<Waker> {
        let found = self.ring.iter().enumerate().find_map(|(i, tenant)| {
            let queue = self
                .queues
                .get(tenant)
                .expect("a tenant in the ring has a queue");
            if lane == Lane::Express && self.burning.contains_key(tenant) {
                return None;
            }
            queue
                .iter()
                .position(|w| lane == Lane::Regular || w.fresh)
                .map(|at| (i, at))
        });
        let Some((i, at)) = found else {
            match lane {
                Lane::Regular => self.free += 1,
                Lane::Express => self.express_free += 1,
            }
            return None;
        };
        let tenant = self.ring.remove(i).expect("found in the ring");
        let queue = self.queues.get_mut(&tenant).expect("found in the queues");
        let waiter = queue.remove(at).expect("found in the queue");
        if queue.is_empty() {
            self.queues.remove(&tenant);
        } else {
            self.ring.push_back(tenant.clone());
        }
        self.last = Some(tenant);
        let mut wait = waiter.wait.lock().unwrap();
        wait.granted = Some(lane);
        wait.waker.take()
    }

    fn enqueue(&mut self, tenant: &Arc<str>, waiter: Arc<Waiter>) {
        match self.queues.get_mut(tenant) {
            Some(q) => q.push_back(waiter),
            None => {
                self.queues.insert(tenant.clone(), VecDeque::from([waiter]));
                // Before the tenant that had the last slot, which is then last in the ring
                // (it went to the back when served, and arrivals since went before it): that
                // tenant has had its turn of this round. At the back instead, a tenant that
                // arrives while a busy tenant's step runs would wait for that step's quantum
                // and then the busy tenant's next one (B's step would queue two quanta of A's
                // CPU burn). A tenant gets into the ring this way only when it had no step
                // waiting, so it gains no more than one turn per round.
                let pos = match (self.ring.back(), &self.last) {
                    (Some(back), Some(last)) if back == last => self.ring.len() - 1,
                    _ => self.ring.len(),
                };
                self.ring.insert(pos, tenant.clone());
            }
        }
    }

    /// Takes a waiter out of its queue (it gave up before being served).
    fn dequeue(&mut self, tenant: &Arc<str>, waiter: &Arc<Waiter>) {
        let Some(q) = self.queues.get_mut(tenant) else {
            return;
        };
        q.retain(|w| !Arc::ptr_eq(w, waiter));
        if q.is_empty() {
            self.queues.remove(tenant);
            self.ring.retain(|t| t != tenant);
        }
    }
}

/// See [`Cpu::acquire`]. Dropping it gives up the place in the queue (or the slot, when one
/// was handed over but not yet taken).
pub(crate) struct Acquire<'a> {
    cpu: &'a Cpu,
    tenant: &'a Arc<str>,
    fresh: bool,
    waiter: Option<Arc<Waiter>>,
    done: bool,
}

impl<'a> Future for Acquire<'a> {
    type Output = Slot<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Slot<'a>> {
        let cpu = self.cpu;
        if let Some(w) = &self.waiter {
            let mut wait = w.wait.lock().unwrap();
            if let Some(lane) = wait.granted {
                drop(wait);
                self.done = true;
                return Poll::Ready(Slot { cpu, lane });
            }
            match &mut wait.waker {
                Some(old) if old.will_wake(cx.waker()) => {}
                waker => *waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        let mut st = cpu.state.lock().unwrap();
        // A fresh step takes an express slot first, leaving the regular ones to the others;
        // not while its tenant has a step burning (see `Cpu::acquire`).
        let express = self.fresh && !st.burning.contains_key(self.tenant);
        let lane = if express && st.express_free > 0 {
            st.express_free -= 1;
            Some(Lane::Express)
        } else if st.free > 0 {
            st.free -= 1;
            Some(Lane::Regular)
        } else {
            None
        };
        if let Some(lane) = lane {
            st.last = Some(self.tenant.clone());
            drop(st);
            self.done = true;
            return Poll::Ready(Slot { cpu, lane });
        }
        let w = Arc::new(Waiter {
            fresh: self.fresh,
            wait: Mutex::new(Wait {
                granted: None,
                waker: Some(cx.waker().clone()),
            }),
        });
        st.enqueue(self.tenant, w.clone());
        drop(st);
        self.waiter = Some(w);
        Poll::Pending
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        let Some(w) = self.waiter.take() else {
            return;
        };
        if self.done {
            return;
        }
        let mut st = self.cpu.state.lock().unwrap();
        let granted = w.wait.lock().unwrap().granted;
        if let Some(lane) = granted {
            // Handed over but never taken: pass it on.
            let woken = st.grant_next(lane);
            drop(st);
            if let Some(k) = woken {
                k.wake();
            }
        } else {
            st.dequeue(self.tenant, &w);
        }
    }
}

/// One of a tenant's steps is burning; see [`Cpu::burning`].
struct Burning<'a> {
    cpu: &'a Cpu,
    tenant: &'a Arc<str>,
}

impl Drop for Burning<'_> {
    fn drop(&mut self) {
        let mut st = self.cpu.state.lock().unwrap();
        let Some(n) = st.burning.get_mut(self.tenant) else {
            return;
        };
        *n -= 1;
        if *n > 0 {
            return;
        }
        st.burning.remove(self.tenant);
        // The tenant's fresh waiters may now take the express slots nobody holds.
        let mut woken = Vec::new();
        while st.express_free > 0 {
            st.express_free -= 1;
            let before = st.express_free;
            woken.extend(st.grant_next(Lane::Express));
            if st.express_free > before {
                // Nobody eligible: `grant_next` put the slot back.
                break;
            }
        }
        drop(st);
        woken.into_iter().for_each(Waker::wake);
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.cpu.release(self.lane);
    }
}

/// Polls a step's future only while holding a CPU slot of its tenant, and gives the slot
/// back whenever the future is pending. Time spent queued for a slot is recorded on the
/// step's clock: it is other steps' time, not this step's. The step asks for an express
/// slot while it has held slots for less than [`EXPRESS_BUDGET`]; then it moves to the burn
/// threads (`threads.rs`) before its next poll.
pub(crate) struct OnCpu<'a, F> {
    cpu: &'a Cpu,
    tenant: &'a Arc<str>,
    clock: &'a StepClock,
    step: Pin<&'a mut F>,
    queued: Option<(Acquire<'a>, Instant)>,
    /// Wall time the step has held slots (its polls).
    on_slot: Duration,
    /// It has used its express budget: marked burning, and asked to go to the burn threads.
    burning: Option<Burning<'a>>,
}

impl<'a, F: Future> OnCpu<'a, F> {
    pub fn new(
        cpu: &'a Cpu,
        tenant: &'a Arc<str>,
        clock: &'a StepClock,
        step: Pin<&'a mut F>,
    ) -> Self {
        OnCpu {
            cpu,
            tenant,
            clock,
            step,
            queued: None,
            on_slot: Duration::ZERO,
            burning: None,
        }
    }
}

impl<F: Future> Future for OnCpu<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let slot = match &mut this.queued {
            Some((acquire, since)) => match Pin::new(acquire).poll(cx) {
                Poll::Ready(slot) => {
                    this.clock.add_queued(since.elapsed());
                    this.queued = None;
                    slot
                }
                Poll::Pending => return Poll::Pending,
            },
            None => {
                let fresh = this.on_slot < EXPRESS_BUDGET;
                if !fresh && this.burning.is_none() {
                    // Burning: on to the burn threads (`threads.rs`), and polled there next.
                    this.burning = Some(this.cpu.burning(this.tenant));
                    if super::threads::ask_to_move() {
                        return Poll::Pending;
                    }
                }
                // A step of a tenant over its share (polled on the background lane's
                // step threads) takes no express slot: those are for the short steps of
                // tenants within their share, which then never wait for the flood's.
                let express = fresh && !super::threads::in_background_lane();
                let mut acquire = this.cpu.acquire(this.tenant, express);
                match Pin::new(&mut acquire).poll(cx) {
                    Poll::Ready(slot) => slot,
                    Poll::Pending => {
                        this.queued = Some((acquire, Instant::now()));
                        return Poll::Pending;
                    }
                }
            }
        };
        let t0 = Instant::now();
        let out = this.step.as_mut().poll(cx);
        this.on_slot += t0.elapsed();
        drop(slot);
        out
    }
}

/// The cap on each tenant's steps in flight (running, queued for a slot, or suspended in a
/// host call). Steps over the cap wait in arrival order.
pub(crate) struct TenantCaps {
    cap: usize,
    tenants: Mutex<HashMap<Arc<str>, Arc<Semaphore>>>,
}

/// A tenant's step in flight; the next waiting step of the tenant goes when it is dropped.
pub(crate) struct InFlight {
    pub tenant: Arc<str>,
    _permit: OwnedSemaphorePermit,
}

/// What a tenant has in flight, and what waits for the tenant's cap (a snapshot, for
/// observation: a step just arriving may be counted as waiting a moment before it enters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TenantSteps {
    pub in_flight: usize,
    pub waiting: usize,
}

impl TenantCaps {
    pub fn new(cap: usize) -> TenantCaps {
        TenantCaps {
            cap: cap.max(1),
            tenants: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for the tenant's turn under its cap.
    pub async fn enter(&self, tenant: &str) -> InFlight {
        let (key, sem) = {
            let mut map = self.tenants.lock().unwrap();
            if map.len() > 10_000 {
                // Tenants with nothing in flight and nothing waiting.
                map.retain(|_, s| Arc::strong_count(s) > 1);
            }
            match map.get_key_value(tenant) {
                Some((k, s)) => (k.clone(), s.clone()),
                None => {
                    let k: Arc<str> = tenant.into();
                    let s = Arc::new(Semaphore::new(self.cap));
                    map.insert(k.clone(), s.clone());
                    (k, s)
                }
            }
        };
        let permit = sem.acquire_owned().await.expect("never closed");
        InFlight {
            tenant: key,
            _permit: permit,
        }
    }

    pub fn steps(&self, tenant: &str) -> TenantSteps {
        let map = self.tenants.lock().unwrap();
        let Some(sem) = map.get(tenant) else {
            return TenantSteps::default();
        };
        let in_flight = self.cap - sem.available_permits();
        // The map, each permit and each waiting `enter` hold the semaphore.
        let holders = Arc::strong_count(sem) - 1;
        TenantSteps {
            in_flight,
            waiting: holders.saturating_sub(in_flight),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn poll<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    fn tenant(name: &str) -> Arc<str> {
        name.into()
    }

    /// A slot that must be free: taken at once, or the test fails with `why`.
    fn taken<'a>(cpu: &'a Cpu, tenant: &'a Arc<str>, fresh: bool, why: &str) -> Slot<'a> {
        match poll(&mut cpu.acquire(tenant, fresh)) {
            Poll::Ready(slot) => slot,
            Poll::Pending => panic!("{why}"),
        }
    }

    /// The order in which a freed slot reaches the waiters: each one in turn is the one
    /// whose poll is ready; the slot it got is dropped with the `Ready` value, freeing it
    /// for the next.
    fn served_order<'n>(mut pending: Vec<(&'n str, &mut Acquire)>) -> Vec<&'n str> {
        let mut order = vec![];
        while !pending.is_empty() {
            let i = pending
                .iter_mut()
                .position(|(_, f)| poll(*f).is_ready())
                .expect("a freed slot is handed to a waiter");
            order.push(pending.remove(i).0);
        }
        order
    }

    /// A fresh step polled on the background lane's step threads (its tenant is over its
    /// share) takes no express slot: with the regular slot held it waits, where the same
    /// step on the main lane runs at once in the express slot.
    #[test]
    fn a_fresh_step_on_the_background_lane_takes_no_express_slot() {
        use crate::threads::{block_on, spawn};
        use botbox_lanes::Lane;
        let runs_at_once = |lane| {
            block_on(spawn(lane, async {
                let cpu = Cpu::new(1, 1);
                let (holder, a) = (tenant("holder"), tenant("a"));
                let _regular = taken(&cpu, &holder, false, "the regular slot is free");
                let clock = StepClock::start();
                let step = std::pin::pin!(async {});
                poll(&mut OnCpu::new(&cpu, &a, &clock, step)).is_ready()
            }))
            .unwrap()
        };
        assert!(
            runs_at_once(Lane::Main),
            "the main lane's step took no express slot"
        );
        assert!(
            !runs_at_once(Lane::Background),
            "the background lane's step took the express slot"
        );
    }

    #[test]
    fn a_tenant_that_arrives_while_a_busy_tenant_runs_is_served_before_its_next_step() {
        let cpu = Cpu::new(1, 0);
        let (a, b) = (tenant("a"), tenant("b"));
        let mut held = cpu.acquire(&a, true);
        let Poll::Ready(held) = poll(&mut held) else {
            panic!("a free slot is taken at once")
        };
        // A queues three steps, then B one.
        let mut a1 = cpu.acquire(&a, true);
        let mut a2 = cpu.acquire(&a, true);
        let mut a3 = cpu.acquire(&a, true);
        let mut b1 = cpu.acquire(&b, true);
        for f in [&mut a1, &mut a2, &mut a3, &mut b1] {
            assert!(poll(f).is_pending());
        }
        assert_eq!(cpu.waiting(), 4);
        drop(held);
        let order = served_order(vec![
            ("a1", &mut a1),
            ("a2", &mut a2),
            ("a3", &mut a3),
            ("b1", &mut b1),
        ]);
        // A holds the slot: B goes first when it is freed (were A's next step first, B's
        // step would wait for two of A's quanta under A's CPU burn instead of one).
        assert_eq!(order, ["b1", "a1", "a2", "a3"]);
        assert_eq!(cpu.waiting(), 0);
    }

    #[test]
    fn the_tenant_that_ran_last_goes_behind_those_that_came_meanwhile_and_those_before() {
        let cpu = Cpu::new(1, 0);
        let (a, b, c) = (tenant("a"), tenant("b"), tenant("c"));
        let held = taken(&cpu, &a, true, "a free slot is taken at once");
        // C waits; A's running step yields and queues again; then B arrives.
        let mut c1 = cpu.acquire(&c, true);
        assert!(poll(&mut c1).is_pending());
        let mut a2 = cpu.acquire(&a, true);
        assert!(poll(&mut a2).is_pending());
        let mut b1 = cpu.acquire(&b, true);
        assert!(poll(&mut b1).is_pending());
        drop(held);
        let order = served_order(vec![("a2", &mut a2), ("b1", &mut b1), ("c1", &mut c1)]);
        assert_eq!(order, ["c1", "b1", "a2"]);
        assert_eq!(cpu.waiting(), 0);
    }

    #[test]
    fn a_step_that_gives_up_its_place_does_not_lose_the_slot() {
        let cpu = Cpu::new(1, 0);
        let (a, b) = (tenant("a"), tenant("b"));
        let mut first = cpu.acquire(&a, true);
        let Poll::Ready(held) = poll(&mut first) else {
            panic!()
        };
        let mut gone = cpu.acquire(&a, true);
        let mut next = cpu.acquire(&b, true);
        assert!(poll(&mut gone).is_pending());
        assert!(poll(&mut next).is_pending());
        // The slot is handed to `gone`, which is dropped before taking it: `next` gets it.
        drop(held);
        drop(gone);
        assert!(poll(&mut next).is_ready());
        // And a waiter dropped while queued leaves no trace.
        let mut x = cpu.acquire(&a, true);
        let Poll::Ready(s) = poll(&mut x) else {
            panic!("the slot came back")
        };
        let mut y = cpu.acquire(&b, true);
        assert!(poll(&mut y).is_pending());
        drop(y);
        assert_eq!(cpu.waiting(), 0);
        drop(s);
        assert!(poll(&mut cpu.acquire(&a, true)).is_ready());
    }

    #[test]
    fn a_fresh_step_takes_an_express_slot_while_a_burning_step_holds_the_regular_one() {
        let cpu = Cpu::new(1, 1);
        let (a, b) = (tenant("a"), tenant("b"));
        // A's burning step holds the regular slot; its next quantum waits for it.
        let burning = taken(&cpu, &a, false, "a free slot is taken at once");
        let mut a_next = cpu.acquire(&a, false);
        assert!(
            poll(&mut a_next).is_pending(),
            "a burning step never takes an express slot"
        );
        // B's fresh step does not wait for A's quantum.
        let b1 = taken(&cpu, &b, true, "a fresh step takes the free express slot");
        // The express slot is B's, so B's next fresh step waits; when B's first step is done
        // the express slot goes to it, although A waited longer (A may not hold it).
        let mut b2 = cpu.acquire(&b, true);
        assert!(poll(&mut b2).is_pending());
        drop(b1);
        assert!(poll(&mut b2).is_ready());
        assert!(poll(&mut a_next).is_pending());
        assert_eq!(cpu.waiting(), 1);
        // The regular slot, freed, goes to A.
        drop(burning);
        assert!(poll(&mut a_next).is_ready());
        assert_eq!(cpu.waiting(), 0);
    }

    #[test]
    fn a_tenant_with_a_burning_step_takes_no_express_slot_until_that_step_is_done() {
        let cpu = Cpu::new(1, 1);
        let (a, b) = (tenant("a"), tenant("b"));
        let regular = taken(&cpu, &a, false, "a free regular slot is taken at once");
        let burning = cpu.burning(&a);
        // A's new step is fresh, but A has a step burning: it does not take the free
        // express slot, and waits for the regular one.
        let mut a_fresh = cpu.acquire(&a, true);
        assert!(
            poll(&mut a_fresh).is_pending(),
            "a burning tenant's fresh step took the express slot"
        );
        // B's fresh step takes the express slot at once.
        let b1 = taken(&cpu, &b, true, "the express slot is free for B");
        // When B's step is done the express slot stays free: A may not hold it yet.
        drop(b1);
        assert!(poll(&mut a_fresh).is_pending());
        // When A's burning step is done, A's waiting fresh step gets the free express slot,
        // although the regular slot is still held.
        drop(burning);
        let Poll::Ready(slot) = poll(&mut a_fresh) else {
            panic!("the free express slot went to A's fresh waiter when A stopped burning")
        };
        assert_eq!(slot.lane, Lane::Express);
        assert_eq!(cpu.waiting(), 0);
        drop((slot, regular));
    }

    #[test]
    fn a_fresh_step_takes_the_express_slot_first_and_leaves_the_regular_one_to_others() {
        let cpu = Cpu::new(1, 1);
        let (a, b) = (tenant("a"), tenant("b"));
        let _fresh = taken(&cpu, &b, true, "a free slot is taken at once");
        // The regular slot is still free for a step that has used its budget.
        let _long = taken(
            &cpu,
            &a,
            false,
            "the fresh step took the express slot, not the regular one",
        );
        // Both slots are held now: anyone waits.
        let mut c = cpu.acquire(&b, true);
        assert!(poll(&mut c).is_pending());
    }

    #[test]
    fn a_freed_regular_slot_goes_to_fresh_and_burning_steps_in_turn() {
        let cpu = Cpu::new(1, 1);
        let (a, b) = (tenant("a"), tenant("b"));
        let held = taken(&cpu, &a, false, "a free slot is taken at once");
        let express = taken(&cpu, &b, true, "a free slot is taken at once");
        let mut a2 = cpu.acquire(&a, false);
        let mut b2 = cpu.acquire(&b, true);
        assert!(poll(&mut a2).is_pending());
        assert!(poll(&mut b2).is_pending());
        // B took the express slot after A took the regular one, so B was served last: A's
        // turn comes first on the freed regular slot, and B's fresh step waits for either.
        drop(held);
        let Poll::Ready(_a2) = poll(&mut a2) else {
            panic!("the regular slot goes to A in its turn")
        };
        assert!(poll(&mut b2).is_pending());
        drop(express);
        assert!(poll(&mut b2).is_ready());
    }

    #[tokio::test]
    async fn a_tenant_over_its_cap_waits_and_others_do_not() {
        let caps = TenantCaps::new(2);
        let a1 = caps.enter("a").await;
        let _a2 = caps.enter("a").await;
        let mut a3 = Box::pin(caps.enter("a"));
        assert!(futures_poll(&mut a3).is_pending());
        assert_eq!(
            caps.steps("a"),
            TenantSteps {
                in_flight: 2,
                waiting: 1
            }
        );
        let _b = caps.enter("b").await;
        drop(a1);
        assert!(futures_poll(&mut a3).is_ready());
    }

    fn futures_poll<F: Future>(f: &mut Pin<Box<F>>) -> Poll<F::Output> {
        f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }
}
