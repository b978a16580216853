//! The instance pool: new instances (a store, the guest instantiated, the bot loaded), warm
//! idle instances per revision, and the permits that bound live instances. When all permits
//! are taken an idle instance (of any revision) is evicted, and otherwise the step waits for
//! one: back-pressure, not errors.

use super::Sandbox;
use super::clock::{StepClock, within_deadline};
use super::imports::arm;
use super::imports::{Limiter, StepState};
use super::limits::Limits;
use super::wit::BotRuntime;
use anyhow::Result;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use wasmtime::Store;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

/// Sessions a warm instance keeps at most: the guest's own rule (`KEEP_MAX` in
/// guest-sdk/src/guest.rs), mirrored so that the host knows which tags an instance holds.
pub(super) const KEEP_MAX: usize = 16;

/// A live instance with its bot loaded.
pub(super) struct Warm {
    pub revision: Arc<str>,
    /// Tags of the sessions the guest keeps, oldest first (a mirror of the guest's list).
    pub kept: VecDeque<u64>,
    pub store: Store<StepState>,
    pub bindings: BotRuntime,
    _permit: Permit,
}

/// A fresh tag for a kept session (never 0, never reused in this process).
pub(super) fn next_tag() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The guest's WASI: no preopened directories (so no filesystem), no environment, no
/// arguments, no TCP, UDP or name lookup; stdout and stderr go to a capped in-memory pipe.
pub(super) fn empty_wasi(out: &MemoryOutputPipe) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(out.clone())
        .stderr(out.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

impl Sandbox {
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
            nl: Default::default(),
            clock: StepClock::start(),
            deadline: self.config.limits.deadline,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store
            .fuel_async_yield_interval(Some(super::YIELD_FUEL))
            .expect("the engine meters fuel");
        store
    }

    /// A new instance with the bot loaded (`None`: nothing loaded, for the start-up probe),
    /// under the sandbox's own deadline and a generous fuel budget.
    pub(super) async fn instantiate(
        &self,
        revision: Arc<str>,
        bot: Option<&str>,
        limits: &Limits,
        clock: &Arc<StepClock>,
    ) -> Result<Warm> {
        let permit = self.acquire().await;
        let mut store = self.new_store(limits);
        let fuel = self.config.limits.fuel.max(200_000_000);
        clock.restart();
        let deadline = self.config.limits.deadline;
        arm(&mut store, fuel, deadline, clock)?;
        let bindings =
            within_deadline(clock, deadline, self.pre.instantiate_async(&mut store)).await?;
        if let Some(bot) = bot {
            within_deadline(clock, deadline, bindings.call_load(&mut store, bot))
                .await?
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
    async fn acquire(&self) -> Permit {
        loop {
            if let Some(p) = self.permits.try_acquire() {
                return p;
            }
            let evicted = self.idle.lock().unwrap().pop_front();
            if let Some(w) = evicted {
                drop(w);
                continue;
            }
            // Woken when a permit is freed or an instance becomes idle (evictable); armed
            // before the second look so that neither is missed.
            let mut freed = std::pin::pin!(self.permits.freed.notified());
            freed.as_mut().enable();
            if self.permits.free() || !self.idle.lock().unwrap().is_empty() {
                continue;
            }
            freed.await;
        }
    }

    /// An idle instance of `revision`: the one that kept the session `tag` if there is one,
    /// else the last one used.
    pub(super) fn take_idle(&self, revision: &str, tag: u64) -> Option<Warm> {
        let mut idle = self.idle.lock().unwrap();
        let holder = (tag != 0)
            .then(|| {
                idle.iter()
                    .rposition(|w| *w.revision == *revision && w.kept.contains(&tag))
            })
            .flatten();
        holder
            .or_else(|| idle.iter().rposition(|w| *w.revision == *revision))
            .and_then(|i| idle.remove(i))
    }

    /// Back to the pool after a good step, unless the revision has enough idle instances.
    pub(super) fn put_idle(&self, inst: Warm) {
        let mut idle = self.idle.lock().unwrap();
        if idle.iter().filter(|w| w.revision == inst.revision).count()
            < self.config.warm_per_revision
        {
            idle.push_back(inst);
            drop(idle);
            // A waiter may now evict it.
            self.permits.freed.notify_waiters();
        }
    }
}

/// Counting permits for live instances.
pub(super) struct Permits {
    max: usize,
    used: Mutex<usize>,
    freed: tokio::sync::Notify,
}

struct Permit(Arc<Permits>);

impl Permits {
    pub fn new(max: usize) -> Permits {
        Permits {
            max,
            used: Mutex::new(0),
            freed: tokio::sync::Notify::new(),
        }
    }

    fn free(&self) -> bool {
        *self.used.lock().unwrap() < self.max
    }

    /// (instances alive, the cap).
    pub fn counts(&self) -> (usize, usize) {
        (*self.used.lock().unwrap(), self.max)
    }
}

trait PermitsExt {
    fn try_acquire(&self) -> Option<Permit>;
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
}

impl Drop for Permit {
    fn drop(&mut self) {
        *self.0.used.lock().unwrap() -= 1;
        self.0.freed.notify_waiters();
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
    use wasmtime_wasi::{WasiCtxView, WasiView};

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
