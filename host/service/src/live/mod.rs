//! Live conversations: a message for an environment's channel runs on the environment's
//! deployed revision in the sandbox; the session, transcripts, replies (outbox) and schedules
//! are written in one transaction.
//!
//! Ordering: the messages of one user are applied one at a time. In one process an async
//! mutex per session serves them in arrival order; across replicas the session row's version
//! makes a step that lost a race run again on the newer session (optimistic locking).

mod canary;
mod outbox;
mod receive;
pub mod retention;
mod revisions;
mod routing;
mod schedules;
mod writes;

pub use canary::{
    CANARY_EVERY, CANARY_SETTLE_MS, CanaryRoute, CanaryStart, Rates, Thresholds, breach, bucket,
    figures,
};
pub use outbox::{CHANNEL_CONCURRENCY, TENANT_CONCURRENCY};
pub use receive::{MAX_MESSAGES_PER_REQUEST, Receipt};
pub use writes::{
    ERROR_CODES, ERRORS_PER_STEP, TranscriptAt, channel_session, console_session, empty_payload,
    error_code, new_bot_error, step_transcript, transcript_json,
};

use crate::effects::LiveEffects;
use crate::learning::record::{Recorder, StepRecord};
use crate::nlu::NluService;
use anyhow::{Context, anyhow};
use botbox_channels::{self as channels, ChannelInfo, InboundItem};
use botbox_egress::{Egress, EgressConfig, Outbound, Use};
use botbox_sandbox::effects::Effects;
use botbox_sandbox::{
    RawOutcome, Revision, Sandbox, SandboxConfig, SandboxError, SessionJson, StepOutcome,
};
use botbox_store::{ChannelRow, Db, EnvironmentRow, NewTranscript, ScheduleRow, StepWrite, now_ms};
use runtime_core::session::{
    ConverseResult, Message, Meta, Response, ScheduleOp, Session, StepReport,
};
use serde_json::{Map, Value as Json, json};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument as _;

/// Settings of live conversations, in one typed place.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    pub sandbox: SandboxConfig,
    /// Where api actions, deliveries and provider reads may connect ([`botbox_egress`]).
    pub egress: EgressConfig,
    /// First retry delay of a failed delivery; doubles each attempt (capped at 10 minutes).
    pub outbox_backoff: Duration,
    /// Attempts before a delivery is marked failed.
    pub outbox_max_attempts: i64,
    /// How often the outbox and the schedules are polled (they are also woken directly).
    pub poll_interval: Duration,
    /// Time-out of one delivery.
    pub delivery_timeout: Duration,
    /// Responses one step may produce (200). A step over it fails like any step error
    /// (the session is unchanged, the user gets `defaultErrorMessage`), instead of storing
    /// and sending thousands of messages: a state with 2,800 text actions is a bug or an
    /// attack, and a provider would rate-limit the channel anyway.
    pub max_responses_per_step: usize,
    /// Channel messages of one tenant (a project's owner) handled at once, from the step to
    /// the commit, while other tenants have messages in flight too (default: two per core;
    /// alone, see `messages_per_tenant_alone`). More wait their turn before any work is done,
    /// so a tenant flooding its webhooks queues behind its own messages, and the shared
    /// path (the write turn, the outbox) sees at most this many of its messages at a time.
    /// Cost: one tenant alone cannot use more than this concurrency (the load bench's single
    /// tenant: docs/performance.md); one user's messages are serialised anyway. Interaction: the
    /// sandbox's `steps_per_tenant` caps the steps of all kinds (converse included).
    /// A malicious tenant can hold this many messages in flight, each until its step's
    /// deadline.
    pub messages_per_tenant: usize,
    /// The same bound while the tenant is the only one with channel messages in flight
    /// (default: four per core): work-conserving, so one tenant alone gets the whole machine
    /// (the load bench's throughput), and as soon as another tenant's message arrives, new
    /// messages of the first are held to `messages_per_tenant` (those already running
    /// finish). Must be at least `messages_per_tenant`.
    pub messages_per_tenant_alone: usize,
    /// A tenant's channel messages waiting for one of those turns at most (64); past it a
    /// webhook answers 429 without running anything (the provider retries), so a tenant
    /// flooding its webhooks cannot hold an unbounded number of connections and bodies.
    pub waiting_per_tenant: usize,
    /// NL Studio models: cache size and training slots ([`crate::nlu`]).
    pub nlu: crate::nlu::NluConfig,
    /// How long stored things are kept ([`retention`]).
    pub retention: retention::Retention,
    /// A tenant's stored bytes (`Db::storage_of`) past which its writes that can wait are
    /// refused: bot pushes (507) and Case task artifacts (the task fails with
    /// `storage-quota`). Channel messages never are: a provider's message is not lost for
    /// it. `None` (default): no quota.
    pub storage_quota_bytes: Option<i64>,
}

use botbox_lanes::cores;

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            sandbox: SandboxConfig {
                // Enough idle instances for every concurrent step of a busy revision.
                warm_per_revision: cores() * 2,
                // Guests get all cores but one (at least one): the HTTP, storage and
                // delivery work of every tenant keeps a core, so a tenant burning its fuel
                // cannot slow the others' requests down through the OS scheduler.
                cpu_slots: cores().saturating_sub(1).max(1),
                // A step's first 2 ms (sched::EXPRESS_BUDGET) need not wait for a burning guest's yield.
                express_slots: 1,
                ..SandboxConfig::default()
            },
            egress: EgressConfig::default(),
            outbox_backoff: Duration::from_secs(1),
            outbox_max_attempts: 12,
            poll_interval: Duration::from_millis(500),
            delivery_timeout: Duration::from_secs(5),
            max_responses_per_step: 200,
            messages_per_tenant: cores() * 2,
            messages_per_tenant_alone: cores() * 4,
            waiting_per_tenant: 64,
            nlu: Default::default(),
            retention: Default::default(),
            storage_quota_bytes: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The bot's step failed (limit, maxRecursion, ...): nothing was stored.
    #[error("{0}")]
    Step(String),
    /// No deployed revision to run.
    #[error("{0}")]
    NotDeployed(String),
    /// The tenant already has too many messages waiting: nothing ran, retry later.
    #[error("{0}")]
    Busy(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<SandboxError> for LiveError {
    fn from(e: SandboxError) -> Self {
        match e {
            SandboxError::Step(e) => LiveError::Step(e.to_string()),
            SandboxError::Internal(e) => LiveError::Internal(e),
        }
    }
}

impl From<botbox_store::DbError> for LiveError {
    fn from(e: botbox_store::DbError) -> Self {
        LiveError::Internal(e.into())
    }
}

/// How long a cached route may be used without reading the database again.
pub const ROUTE_TTL: Duration = Duration::from_secs(1);

/// Bytes of session JSON kept in memory at most (64 MiB), and how long an unused one stays.
/// Bounded in bytes, not entries: 300 users with 0.9 MB sessions must not add 270 MB.
/// A session not in the cache is read from the database (one indexed read).
const SESSION_CACHE_BYTES: u64 = 64 << 20;
const SESSION_CACHE_IDLE: Duration = Duration::from_secs(600);
/// Bytes of compiled bots kept ready to run (256 MiB): a revision is kept as the JSON the
/// guest loads, up to the bot size cap each.
const REVISION_CACHE_BYTES: u64 = 256 << 20;

/// The shared value of `key` in `map` (a per-session lock, a per-tenant or per-channel
/// semaphore), made by `make` when missing. Past 10,000 keys, the values nobody holds or
/// waits for are dropped, so the map stays bounded by what is in use.
fn keyed<T>(map: &Mutex<HashMap<String, Arc<T>>>, key: &str, make: impl FnOnce() -> T) -> Arc<T> {
    let mut map = map.lock().unwrap();
    if map.len() > 10_000 {
        map.retain(|_, v| Arc::strong_count(v) > 1);
    }
    map.entry(key.to_owned())
        .or_insert_with(|| Arc::new(make()))
        .clone()
}

/// A tenant's turns: its share (`base`), the turns it may add while alone (`extra`), and
/// its messages in flight.
struct TenantTurns {
    base: Arc<tokio::sync::Semaphore>,
    extra: Arc<tokio::sync::Semaphore>,
    in_flight: std::sync::atomic::AtomicUsize,
}

impl TenantTurns {
    /// Messages waiting for a turn of the share `base` (roughly: messages on extra turns
    /// are not counted). References to `base`: the struct's, one per running message on a
    /// base turn and one per waiter.
    fn waiting(&self, base: usize) -> usize {
        Arc::strong_count(&self.base).saturating_sub(1 + base)
    }
}

/// One message's turn; counts the tenant out of the busy tenants when its last one ends.
struct TenantTurn {
    _permit: tokio::sync::OwnedSemaphorePermit,
    turns: Arc<TenantTurns>,
    busy: Arc<std::sync::atomic::AtomicUsize>,
}

impl Drop for TenantTurn {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        if self.turns.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// How long the machine counts as shared after two tenants last had messages in flight
/// together (1 s; see [`Live::over_share`]): a tenant that sends now and then (a message
/// every few hundred milliseconds per user) keeps the pushing one in the background between
/// its messages, so its next one does not meet that tenant's work at the same priority.
const SHARED_FOR_MS: i64 = 1_000;

/// How long bot errors (`GET /projects/{id}/errors`) are kept.
pub const BOT_ERROR_DAYS: i64 = 30;

/// Largest answer read when fetching a message's text from a provider (64 KiB).
const FETCH_BODY_MAX: usize = 64 << 10;

/// The weight of a cache entry: its size in bytes, plus the key and bookkeeping.
fn weight(key: &str, bytes: usize) -> u32 {
    u32::try_from(key.len() + bytes + 64).unwrap_or(u32::MAX)
}

/// See [`Live::route`].
#[derive(Clone)]
pub struct Route {
    pub channel: ChannelRow,
    pub env: EnvironmentRow,
    /// The tenant: the project's owner.
    pub owner: String,
    pub revision: Arc<Revision>,
    /// The environment's running canary: the users it serves get its revision.
    pub canary: Option<CanaryRoute>,
    /// The channel's type and options, read once.
    pub kind: &'static channels::Kind,
    pub options: Arc<Map<String, Json>>,
}

impl Route {
    /// The channel as the channel functions see it.
    pub fn info(&self) -> ChannelInfo<'_> {
        ChannelInfo {
            kind: self.kind.name,
            url: &self.channel.url,
            options: &self.options,
            now_ms: now_ms(),
        }
    }
}

/// What became of one inbound message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Its step ran and its outcome is stored (a failed step included: the user got the
    /// bot's `defaultErrorMessage`, and the provider must not retry it).
    Ran,
    /// A step already ran it (a provider's retry of a message it gave up waiting for).
    Duplicate,
}

/// Whether the sandbox can run steps: see [`Live::sandbox_readiness`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Being created (the first creation of a cold cache compiles the guest).
    Starting,
    /// The last attempt failed (the next message, or the background retry of
    /// [`Live::warm_sandbox`], tries again; the error went to its caller and the log).
    Failed,
}

pub struct Live {
    pub db: Db,
    /// The server's drain state, shared by every service built on this `Live`.
    pub drain: crate::drain::Drain,
    routes: moka::sync::Cache<String, Route>,
    /// The sessions this process stored last (as stored: JSON, with the tag under which a
    /// warm instance keeps them), with their versions: a user's next message needs no read,
    /// and usually no session crossing into the sandbox. A copy made stale by another
    /// replica (or a deleted environment) fails the version check at commit, and the step
    /// runs again on the stored session.
    sessions: moka::sync::Cache<String, (SessionJson, i64)>,
    pub cfg: LiveConfig,
    sandbox: tokio::sync::OnceCell<Arc<Sandbox>>,
    /// The last attempt to create the sandbox failed (for `GET /ready`).
    sandbox_failed: std::sync::atomic::AtomicBool,
    /// Ready revisions by `project/revision`, with the size of their compiled bot.
    revisions: moka::sync::Cache<String, (Arc<Revision>, usize)>,
    effects: Arc<dyn Effects>,
    /// NL Studio models: what bots' `nl` NLUs and the NLU API predict with.
    pub nlu: Arc<NluService>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Per tenant: its messages in flight (`LiveConfig::messages_per_tenant`).
    tenant_turns: Mutex<HashMap<String, Arc<TenantTurns>>>,
    /// Tenants with channel messages in flight: while there is one, it may use
    /// `messages_per_tenant_alone`.
    busy_tenants: Arc<std::sync::atomic::AtomicUsize>,
    /// When (Unix ms) a turn was last given while two tenants or more had messages in
    /// flight: the machine is shared for [`SHARED_FOR_MS`] after it.
    shared_at: std::sync::atomic::AtomicI64,
    /// Channels' `rpmLimit`, counted in messages.
    rpm: crate::rate::RateLimiter,
    /// Deliveries and provider reads (api actions reach it through `effects`).
    egress: Arc<Egress>,
    /// Outbox rows just committed by this process, for immediate delivery.
    direct: tokio::sync::mpsc::UnboundedSender<outbox::Batch>,
    direct_rx: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<outbox::Batch>>>,
    /// The runtime `Live` was made on: where live work within a tenant's share runs (a
    /// task of a connection served on the background runtime may spawn from there), and
    /// pooled I/O made from the background ([`Live::io_on_main`]).
    main: tokio::runtime::Handle,
}

/// What a step ran on, for the result's consumers.
pub struct StepDone {
    pub result: ConverseResult,
    pub fuel_used: u64,
}

impl Live {
    /// Call it on the server's main runtime (it panics outside one): live work within a
    /// tenant's share is spawned there.
    pub fn new(db: Db, cfg: LiveConfig) -> anyhow::Result<Arc<Live>> {
        let egress = Arc::new(Egress::new(&cfg.egress)?);
        let drain = crate::drain::Drain::default();
        let nlu = NluService::new(db.clone(), cfg.nlu.clone(), drain.clone());
        let effects: Arc<dyn Effects> =
            Arc::new(LiveEffects::new(egress.clone())?.with_nlu(nlu.clone()));
        Ok(Self::build(db, cfg, egress, effects, nlu, drain))
    }

    pub fn with_effects(
        db: Db,
        cfg: LiveConfig,
        egress: Arc<Egress>,
        effects: Arc<dyn Effects>,
    ) -> Arc<Live> {
        let drain = crate::drain::Drain::default();
        let nlu = NluService::new(db.clone(), cfg.nlu.clone(), drain.clone());
        Self::build(db, cfg, egress, effects, nlu, drain)
    }

    fn build(
        db: Db,
        cfg: LiveConfig,
        egress: Arc<Egress>,
        effects: Arc<dyn Effects>,
        nlu: Arc<NluService>,
        drain: crate::drain::Drain,
    ) -> Arc<Live> {
        let (direct, direct_rx) = tokio::sync::mpsc::unbounded_channel();
        Arc::new(Live {
            db,
            drain,
            nlu,
            sandbox: tokio::sync::OnceCell::new(),
            sandbox_failed: Default::default(),
            revisions: moka::sync::Cache::builder()
                .max_capacity(REVISION_CACHE_BYTES)
                .weigher(|k: &String, (_, bytes): &(Arc<Revision>, usize)| weight(k, *bytes))
                .build(),
            routes: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ROUTE_TTL)
                .build(),
            sessions: moka::sync::Cache::builder()
                .max_capacity(SESSION_CACHE_BYTES)
                .weigher(|k: &String, (s, _): &(SessionJson, i64)| weight(k, s.json.len()))
                .time_to_idle(SESSION_CACHE_IDLE)
                .build(),
            effects,
            locks: Mutex::new(HashMap::new()),
            tenant_turns: Mutex::new(HashMap::new()),
            busy_tenants: Default::default(),
            shared_at: std::sync::atomic::AtomicI64::new(i64::MIN / 2),
            rpm: crate::rate::RateLimiter::new(60),
            egress,
            direct,
            direct_rx: Mutex::new(Some(direct_rx)),
            main: tokio::runtime::Handle::current(),
            cfg,
        })
    }

    /// Starts the outbox, schedule and retention workers.
    pub fn spawn_workers(self: &Arc<Self>) {
        let rx = self.direct_rx.lock().unwrap().take();
        if let Some(rx) = rx {
            tokio::spawn(outbox::run(self.clone(), rx));
        }
        tokio::spawn(schedules::run(self.clone()));
        tokio::spawn(retention::run(self.clone()));
        tokio::spawn(canary::run(self.clone()));
    }

    /// Runs one step in the sandbox.
    pub async fn run_step(
        &self,
        tenant: &str,
        rev: Arc<Revision>,
        session: Session,
        message: Message,
    ) -> Result<StepDone, LiveError> {
        self.run_step_with(tenant, rev, session, message, self.effects.clone())
            .await
    }

    /// [`Live::run_step`] with effects of the caller's (the console logs the step's calls).
    pub async fn run_step_with(
        &self,
        tenant: &str,
        rev: Arc<Revision>,
        session: Session,
        message: Message,
        effects: Arc<dyn Effects>,
    ) -> Result<StepDone, LiveError> {
        let out = self
            .in_sandbox_with(
                tenant,
                rev,
                effects,
                move |sb, tenant, rev, effects| async move {
                    sb.step(&tenant, &rev, &session, &message, effects).await
                },
            )
            .await?;
        let StepOutcome {
            result, fuel_used, ..
        } = out;
        Ok(StepDone { result, fuel_used })
    }

    /// Runs one step on a session as stored (JSON), giving the new session as JSON: the
    /// live path, which never needs the session as a value.
    pub async fn run_step_json(
        &self,
        tenant: &str,
        rev: Arc<Revision>,
        session: SessionJson,
        message: Message,
    ) -> Result<(StepReport, SessionJson), LiveError> {
        self.run_step_json_with(tenant, rev, session, message, self.effects.clone())
            .await
    }

    /// [`Live::run_step_json`] with effects of the caller's (the agent API wraps the live
    /// effects to stream each api call and to abort it on cancel).
    pub async fn run_step_json_with(
        &self,
        tenant: &str,
        rev: Arc<Revision>,
        session: SessionJson,
        message: Message,
        effects: Arc<dyn Effects>,
    ) -> Result<(StepReport, SessionJson), LiveError> {
        let RawOutcome {
            report, session, ..
        } = self
            .in_sandbox_with(
                tenant,
                rev,
                effects,
                move |sb, tenant, rev, effects| async move {
                    sb.step_json(&tenant, &rev, &session, &message, effects)
                        .await
                },
            )
            .await?;
        Ok((report, session))
    }

    /// The egress policy's clients (callbacks go through them like every outbound call).
    pub fn egress(&self) -> Arc<Egress> {
        self.egress.clone()
    }

    /// The effects steps run with.
    pub fn effects(&self) -> Arc<dyn Effects> {
        self.effects.clone()
    }

    /// Runs `call` with `effects`, in a span naming the tenant and revision: on the calling
    /// task for a tenant within its share, on the background lane's step threads for one
    /// over it (`revisions::on_lane`). The sandbox bounds the tenant's steps in flight and
    /// shares the CPU between tenants.
    async fn in_sandbox_with<T, F>(
        &self,
        tenant: &str,
        rev: Arc<Revision>,
        effects: Arc<dyn Effects>,
        call: impl FnOnce(Arc<Sandbox>, String, Arc<Revision>, Arc<dyn Effects>) -> F,
    ) -> Result<T, LiveError>
    where
        F: Future<Output = Result<T, SandboxError>> + Send + 'static,
        T: Send + 'static,
    {
        let sandbox = self.sandbox().await?;
        let lane = self.lane(tenant);
        let span =
            tracing::info_span!("live_step", tenant = %tenant, revision = %rev.id, lane = ?lane);
        let step = call(sandbox, tenant.to_owned(), rev, effects).instrument(span);
        revisions::on_lane(lane, step)
            .await?
            .map_err(LiveError::from)
    }

    /// Records the errors of a step that commits no channel step (console, agent and task
    /// steps): its user errors (`Ok`, [`ERRORS_PER_STEP`] at most) or its failure (`Err`), so
    /// that `GET /projects/{id}/errors` shows every kind of step. A storage failure is
    /// logged, never the step's.
    pub async fn record_errors(
        &self,
        project_id: &str,
        environment_id: &str,
        (channel, user): (&str, Option<&str>),
        step: Result<&[String], &str>,
    ) {
        let error =
            |group, e: &str| new_bot_error(project_id, environment_id, (channel, user), group, e);
        let rows: Vec<_> = match step {
            Ok(errors) => errors
                .iter()
                .take(ERRORS_PER_STEP)
                .map(|e| error("bot", e))
                .collect(),
            Err(e) => vec![error("step", e)],
        };
        if let Err(e) = self.db.insert_bot_errors(&rows).await {
            tracing::warn!(project = %project_id, error = %e, "recording bot errors");
        }
    }

    /// The syntax errors of a bot's JavaScript ([`runtime_core::Compiled::js_sites`]),
    /// parsed by the sandbox guest in the tenant's turn ([`Sandbox::check_js`]).
    pub async fn check_js(
        &self,
        tenant: &str,
        sites: Vec<runtime_core::JsSite>,
    ) -> Result<Vec<runtime_core::JsProblem>, LiveError> {
        if sites.is_empty() {
            return Ok(vec![]);
        }
        let sandbox = self.sandbox().await?;
        let tenant = tenant.to_owned();
        let lane = self.lane(&tenant);
        let check = async move { sandbox.check_js(&tenant, &sites).await };
        revisions::on_lane(lane, check)
            .await?
            .map_err(LiveError::from)
    }

    /// Fails a step that produced more responses than a step may.
    pub fn check_responses(&self, n: usize) -> Result<(), LiveError> {
        let max = self.cfg.max_responses_per_step;
        if n > max {
            return Err(LiveError::Step(format!(
                "the step produced {n} responses; a step may produce at most {max}"
            )));
        }
        Ok(())
    }

    /// A turn for one of `tenant`'s messages (see `messages_per_tenant` and
    /// `messages_per_tenant_alone`).
    async fn tenant_turn(&self, tenant: &str) -> Result<TenantTurn, LiveError> {
        let base = self.cfg.messages_per_tenant.max(1);
        let extra = self.cfg.messages_per_tenant_alone.saturating_sub(base);
        let turns = keyed(&self.tenant_turns, tenant, || TenantTurns {
            base: Arc::new(tokio::sync::Semaphore::new(base)),
            extra: Arc::new(tokio::sync::Semaphore::new(extra)),
            in_flight: Default::default(),
        });
        let permit = match turns.base.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                // Alone (no other tenant has messages in flight): a turn beyond the share.
                let alone = self.busy_tenants.load(std::sync::atomic::Ordering::Acquire) <= 1;
                match turns.extra.clone().try_acquire_owned() {
                    Ok(p) if alone => p,
                    _ => {
                        if turns.waiting(base) >= self.cfg.waiting_per_tenant {
                            return Err(LiveError::Busy(format!(
                                "this tenant already has {} messages waiting; try again later",
                                self.cfg.waiting_per_tenant
                            )));
                        }
                        // Wait for a turn of the share, or, while alone, for one beyond it.
                        let base_turn = turns.base.clone().acquire_owned();
                        let acquired = if alone {
                            tokio::select! {
                                p = base_turn => p,
                                p = turns.extra.clone().acquire_owned() => p,
                            }
                        } else {
                            base_turn.await
                        };
                        acquired.map_err(|e| LiveError::Internal(anyhow!("{e}")))?
                    }
                }
            }
        };
        use std::sync::atomic::Ordering;
        let busy = if turns.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.busy_tenants.fetch_add(1, Ordering::AcqRel) + 1
        } else {
            self.busy_tenants.load(Ordering::Acquire)
        };
        if busy > 1 {
            self.shared_at.store(now_ms(), Ordering::Relaxed);
        }
        Ok(TenantTurn {
            _permit: permit,
            turns,
            busy: self.busy_tenants.clone(),
        })
    }

    /// Whether `tenant` sends more than its share of turns runs while the machine is
    /// shared: messages of its own wait for a turn, and another tenant has a message in
    /// flight or had one within the last `SHARED_FOR_MS`. Its live work then runs on the background
    /// runtime ([`botbox_lanes::background`]), after every other tenant's whenever the
    /// cores are busy: a tenant within its share keeps its latency however hard another one
    /// pushes, and the one pushing still gets every core nobody else wants. A tenant alone
    /// stays on the main runtime (at nice 10 it lost a tenth of its throughput to its own
    /// load generator in `load-bench`).
    pub fn over_share(&self, tenant: &str) -> bool {
        use std::sync::atomic::Ordering;
        // Shared now, or within the last second: a turn given then saw another tenant busy
        // (with no turn given for a while, as when every turn is held by a hanging step,
        // the count of busy tenants still says so).
        let shared = self.busy_tenants.load(Ordering::Acquire) > 1
            || now_ms().saturating_sub(self.shared_at.load(Ordering::Relaxed)) < SHARED_FOR_MS;
        if !shared {
            return false;
        }
        let base = self.cfg.messages_per_tenant.max(1);
        let turns = self.tenant_turns.lock().unwrap();
        turns.get(tenant).is_some_and(|t| t.waiting(base) > 0)
    }

    /// Where `tenant`'s live work runs now: the background lane while it is over its share
    /// ([`Live::over_share`]), else the main one. Its steps start on that lane's step
    /// threads (`sandbox::threads`).
    pub(crate) fn lane(&self, tenant: &str) -> botbox_lanes::Lane {
        if self.over_share(tenant) {
            botbox_lanes::Lane::Background
        } else {
            botbox_lanes::Lane::Main
        }
    }

    /// The runtime of `lane`: the background one for work over a tenant's share, else the
    /// main one.
    pub(crate) fn runtime(&self, lane: botbox_lanes::Lane) -> tokio::runtime::Handle {
        match lane {
            botbox_lanes::Lane::Background => botbox_lanes::background().clone(),
            botbox_lanes::Lane::Main => self.main.clone(),
        }
    }

    pub(crate) fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        keyed(&self.locks, key, Default::default)
    }

    /// Counts `messages` inbound messages against a channel's `rpmLimit` (messages per
    /// minute); false, counting nothing, when they do not all fit.
    pub fn channel_rpm_ok(&self, channel: &ChannelRow, messages: usize) -> bool {
        let Some(limit) = channel.rpm_limit.filter(|l| *l > 0) else {
            return true;
        };
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let n = u32::try_from(messages).unwrap_or(u32::MAX);
        self.rpm.hit_n(&channel.id, limit, n, now_ms() / 1000).0
    }

    /// Runs one inbound message of a channel user to completion: the step, then the session,
    /// transcript, replies, schedules and the message's provider id stored together. A
    /// failed step stores nothing but the incoming transcript line and, when the bot sets
    /// `config.defaultErrorMessage`, that message to the user. A message whose provider id
    /// is already stored does not run again.
    pub async fn handle(&self, route: &Route, item: InboundItem) -> Result<Handled, LiveError> {
        let key = format!("{}:{}:{}", route.env.id, route.channel.id, item.user_id);
        // The tenant's turn first, then the session's lock: a message waiting for either
        // counts against the tenant's bounds (`messages_per_tenant`, `waiting_per_tenant`).
        // The receive pipeline runs detached from the connection, so a caller that posts
        // many messages for one user and hangs up at once would otherwise pile up tasks
        // behind that user's lock without limit. One order everywhere: no deadlock.
        let _tenant_turn = self.tenant_turn(&route.owner).await?;
        let lock = self.lock_for(&key);
        let _turn = lock.lock().await;
        let info = route.info();
        // Credentials a channel put in the metadata (LINE's, Slack's, Messenger's tokens) are
        // the bot's to use, but not for a transcript's readers.
        let in_json = transcript_json(&item.message);
        let (revision, dep_version) = route.serving(&item.user_id);
        let m = InboundStep {
            route,
            revision,
            dep_version,
            item: &item,
            key: &key,
            info,
            in_json: &in_json,
        };
        for attempt in 0..20 {
            if self.already_ran(&m).await? {
                return Ok(Handled::Duplicate);
            }
            // The first attempt trusts this process's last write; a retry reads the database.
            let (session, version) = self.load_session(&m, attempt == 0).await?;
            let (step, record, step_us) = self.message_step(&m, &session).await;
            let at = StepAt {
                step_us,
                record: &record,
                starts: version.is_none(),
            };
            let w = self.step_write(&m, &step, &session, version, &at)?;
            if let Some(rows) = self.commit(w).await? {
                return self.keep_session(&m, rows, step, session, version);
            }
            self.sessions.invalidate(&key);
            tracing::debug!(session = %key, "session changed during the step; running it again");
        }
        Err(LiveError::Internal(anyhow!(
            "session {key} kept changing; gave up"
        )))
    }

    /// Whether a step already ran this message (its provider id is stored). Like
    /// [`Live::commit`] it runs where it is called: the check opens nothing of a pool (on
    /// SQLite a read connection of the writer's own, on PostgreSQL a probe queued for the
    /// prober on the runtime that opened the database).
    async fn already_ran(&self, m: &InboundStep<'_>) -> Result<bool, LiveError> {
        let (channel, item) = (&m.route.channel, m.item);
        // Read under the session's lock, so a retry waits for the first delivery's step
        // and then finds its id; another replica's is caught by the commit.
        if let Some(pid) = &item.provider_id
            && self.db.seen(&channel.id, &item.user_id, pid).await?
        {
            tracing::info!(channel = %channel.id, provider_id = %pid, "duplicate delivery ignored");
            return Ok(true);
        }
        Ok(false)
    }

    /// The user's session with the version it was read at: this process's cached copy
    /// (when `cached_ok`), else the stored one, else a new session (no version).
    async fn load_session(
        &self,
        m: &InboundStep<'_>,
        cached_ok: bool,
    ) -> Result<(SessionJson, Option<i64>), LiveError> {
        let cached = cached_ok.then(|| self.sessions.get(m.key)).flatten();
        Ok(match cached {
            Some((s, v)) => (s, Some(v)),
            None => match self
                .stored({
                    let (db, key) = (self.db.clone(), m.key.to_owned());
                    async move { db.session(&key).await }
                })
                .await?
            {
                Some(r) => (SessionJson::new(r.body), Some(r.version)),
                None => {
                    let s = channel_session(&m.route.env, &m.route.channel.id, &m.item.user_id);
                    (
                        SessionJson::new(serde_json::to_string(&s).context("session")?),
                        None,
                    )
                }
            },
        })
    }

    /// The message's step on `session` (failed if it produced more responses than a step
    /// may), with what replaying it needs and its time in microseconds.
    async fn message_step(
        &self,
        m: &InboundStep<'_>,
        session: &SessionJson,
    ) -> (MessageStep, StepRecord, i64) {
        // From asking for a CPU slot to the answer: the analytics' step latency.
        let started = std::time::Instant::now();
        let recorder = Arc::new(Recorder::new(
            self.effects.clone(),
            now_ms(),
            rand::random(),
        ));
        let step = self
            .run_step_json_with(
                &m.route.owner,
                m.revision.clone(),
                session.clone(),
                m.item.message.clone(),
                recorder.clone(),
            )
            .await
            .and_then(|(r, s)| {
                self.check_responses(r.responses.len())?;
                Ok((r, s))
            });
        let step_us = i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX);
        let mut record = recorder.record();
        record.failed = step.is_err();
        (step, record, step_us)
    }

    /// After the commit: the replies handed to this process's sender, the session kept
    /// for the user's next message (at the version just stored), and the step's outcome.
    fn keep_session(
        &self,
        m: &InboundStep<'_>,
        rows: Vec<botbox_store::OutboxRow>,
        step: MessageStep,
        session: SessionJson,
        version: Option<i64>,
    ) -> Result<Handled, LiveError> {
        if !rows.is_empty() {
            // Sent now by this process; the worker picks them up after the lease if not.
            let _ = self.direct.send((m.key.to_owned(), rows));
        }
        let kept = match &step {
            Ok((_, new_session)) => new_session.clone(),
            // The instance let go of the session it was given.
            Err(_) => SessionJson::new(session.json),
        };
        self.sessions
            .insert(m.key.to_owned(), (kept, version.map_or(1, |v| v + 1)));
        match step {
            Ok(_) => Ok(Handled::Ran),
            Err(e) => Err(e),
        }
    }

    /// A console session kept by the server under `key`: one step, stored with optimistic
    /// locking like a channel's (no transcripts, no deliveries).
    pub async fn converse_stored(
        &self,
        key: &str,
        tenant: &str,
        rev: Arc<Revision>,
        message: Message,
        effects: Arc<dyn Effects>,
    ) -> Result<ConverseResult, LiveError> {
        let lock = self.lock_for(key);
        let _turn = lock.lock().await;
        for _attempt in 0..20 {
            let (session, version) = match self.db.session(key).await? {
                Some(r) => (
                    serde_json::from_str::<Session>(&r.body).context("stored session")?,
                    Some(r.version),
                ),
                None => {
                    let mut s = console_session();
                    s.id = key.to_owned();
                    (s, None)
                }
            };
            let done = self
                .run_step_with(
                    tenant,
                    rev.clone(),
                    session,
                    message.clone(),
                    effects.clone(),
                )
                .await?;
            self.check_responses(done.result.responses.len())?;
            let body = serde_json::to_string(&done.result.session).context("session")?;
            let w = StepWrite {
                session_id: key.to_owned(),
                environment_id: "console".into(),
                channel_id: "console".into(),
                user_id: key.to_owned(),
                body: body.into(),
                read_version: version,
                background: botbox_lanes::in_background(),
                ..StepWrite::default()
            };
            if self.db.commit_step(w).await?.is_some() {
                return Ok(done.result);
            }
        }
        Err(LiveError::Internal(anyhow!(
            "session {key} kept changing; gave up"
        )))
    }

    /// What a channel's messages run on: the channel, its environment, the tenant and the
    /// revision the environment's deployment points at. Cached for [`ROUTE_TTL`]; a change
    /// made through this process's API drops the cache at once (the writes of `live/routing.rs`),
    /// so only other replicas' changes can take up to the TTL to be seen.
    pub async fn route(&self, channel_id: &str) -> Result<Option<Route>, LiveError> {
        if let Some(r) = self.cached_route(channel_id) {
            return Ok(Some(r));
        }
        let Some(channel) = self.db.channel_by_id(channel_id).await? else {
            return Ok(None);
        };
        let Some(env) = self.db.environment_by_id(&channel.environment_id).await? else {
            return Ok(None);
        };
        let Some(project) = self.db.project(&env.project_id).await? else {
            return Ok(None);
        };
        let revision = self.environment_revision(&env).await?;
        let canary = self.canary_route(&env).await?;
        let route = Route {
            canary,
            kind: channels::kind_of_stored(&channel.kind),
            options: Arc::new(serde_json::from_str(&channel.options).unwrap_or_default()),
            channel,
            env,
            owner: project.owner_id,
            revision,
        };
        self.routes.insert(channel_id.to_owned(), route.clone());
        Ok(Some(route))
    }

    /// [`Live::route`] if it is cached, without reading anything.
    pub fn cached_route(&self, channel_id: &str) -> Option<Route> {
        self.routes.get(channel_id)
    }

    /// Reads a message's text from the provider's API (Webex sends only the id), through the
    /// egress module: its policy, no redirects, the delivery time-out and a body cap (the
    /// answer is attacker-controlled: the channel's url is the tenant's; a message is a few
    /// KB). Errors show the URL redacted.
    ///
    /// Runs on the main runtime (see `Live::io_on_main`): the egress pool's connections
    /// are shared with every tenant's deliveries.
    pub async fn fetch_text(&self, fetch: &channels::FetchText) -> Result<String, String> {
        let (egress, fetch, timeout) = (
            self.egress.clone(),
            fetch.clone(),
            self.cfg.delivery_timeout,
        );
        let call = async move {
            let req = Outbound {
                method: "GET",
                url: &fetch.url,
                headers: &fetch.headers,
                body: None,
            };
            egress
                .call(Use::ProviderRead, req, timeout, FETCH_BODY_MAX)
                .await
        };
        let a = self
            .io_on_main(call)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        if !(200..300).contains(&a.status) {
            return Err(format!("{} answered {}", a.url, a.status));
        }
        let v: Json = serde_json::from_slice(&a.body).map_err(|e| format!("{}: {e}", a.url))?;
        v.get("text")
            .and_then(Json::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("{} gave no text", a.url))
    }

    /// Runs `io` on the main runtime when called from the background one
    /// ([`botbox_lanes::background`]), else here. What a pool opens belongs to the
    /// runtime or thread that opened it, and the pools are shared by every tenant: tokio
    /// registers a socket with its runtime's I/O driver (PostgreSQL's connections), hyper's
    /// client runs each pooled connection in a task there (the egress client), and a thread
    /// started by sqlx for a new SQLite connection inherits its creator's nice value. Opened
    /// from the background, any of them would go on serving other tenants' calls at nice 10,
    /// after the work of the tenant over its share. Cost: one task spawned per call made
    /// from the background. A panic or shutdown of the spawned task comes back as
    /// [`LiveError::Internal`]; the call runs to its end even if the caller goes away (as
    /// the receive pipeline, detached from its connection, does anyway).
    pub(crate) async fn io_on_main<T: Send + 'static>(
        &self,
        io: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, LiveError> {
        if !botbox_lanes::in_background() {
            return Ok(io.await);
        }
        self.main
            .spawn(io.in_current_span())
            .await
            .map_err(|e| LiveError::Internal(anyhow!("an I/O task on the main runtime: {e}")))
    }

    /// A storage call through [`Live::io_on_main`].
    async fn stored<T: Send + 'static>(
        &self,
        io: impl std::future::Future<Output = Result<T, botbox_store::DbError>> + Send + 'static,
    ) -> Result<T, LiveError> {
        Ok(self.io_on_main(io).await??)
    }

    /// A step's commit. It only queues the step for the group committer, which runs on the
    /// runtime that opened the database whoever starts it (`db::CommitQueue`), with the
    /// SQLite writer's connection or PostgreSQL's committer connection: nothing is opened here,
    /// so it runs where it is called (a task spawned per commit of a tenant over its share
    /// would be work on the main runtime for nothing).
    async fn commit(
        &self,
        mut w: botbox_store::StepWrite,
    ) -> Result<Option<Vec<botbox_store::OutboxRow>>, LiveError> {
        w.background = botbox_lanes::in_background();
        Ok(self.db.commit_step(w).await?)
    }

    /// Forgets cached routes: called after any change to projects, deployments,
    /// environments or channels (the writes in `routing.rs`).
    fn routes_changed(&self) {
        self.routes.invalidate_all();
    }

    /// Drops the ready revisions of these projects (and every route: they live a second
    /// anyway); the next message reads them from storage.
    pub fn forget_projects(&self, project_ids: &[String]) {
        let prefixes: Vec<String> = project_ids.iter().map(|p| format!("{p}/")).collect();
        for (key, _) in self.revisions.iter() {
            if prefixes.iter().any(|p| key.starts_with(p.as_str())) {
                self.revisions.invalidate(key.as_str());
            }
        }
        self.routes_changed();
    }
}

/// One inbound message on its way through [`Live::handle`], as its steps see it.
struct InboundStep<'a> {
    route: &'a Route,
    /// The revision that serves the user (the environment's, or its canary's), and its
    /// deployment version.
    revision: &'a Arc<Revision>,
    dep_version: &'a str,
    item: &'a InboundItem,
    /// The user's session: `<environment>:<channel>:<user>`.
    key: &'a str,
    /// The channel as the channel functions see it.
    info: ChannelInfo<'a>,
    /// The user's message as transcripts store it.
    in_json: &'a str,
}

impl InboundStep<'_> {
    /// A bot error of this message's step (`group`: `bot` or `step`).
    fn bot_error(&self, group: &'static str, message: &str) -> botbox_store::NewBotError {
        new_bot_error(
            &self.route.env.project_id,
            &self.route.env.id,
            (&self.route.channel.id, Some(&self.item.user_id)),
            group,
            message,
        )
    }
}

/// A channel message's step: the report and new session, or why it failed.
type MessageStep = Result<(StepReport, SessionJson), LiveError>;

/// What a channel message's step adds to its user's incoming line besides the transcript:
/// its time, what replaying it needs, and whether it started a session.
struct StepAt<'a> {
    step_us: i64,
    record: &'a StepRecord,
    starts: bool,
}

impl StepAt<'_> {
    /// Marks the user's line: the replay record, the session start, and the inbox group of
    /// a text message that fell back.
    fn mark(&self, m: &InboundStep<'_>, user_line: &mut NewTranscript) {
        user_line.replay = Some(serde_json::to_string(self.record).expect("records serialise"));
        user_line.starts = self.starts;
        if user_line.outcome == Some("fallback") {
            user_line.miss = crate::learning::miss_key(&m.item.message);
        }
    }
}

#[cfg(test)]
mod turn_tests {
    use super::*;
    use futures_util::FutureExt;

    /// A `Live` on a fresh SQLite folder (kept while the first value lives) with these
    /// turns per tenant: its share, and while alone.
    async fn live_with_turns(share: usize, alone: usize) -> (tempfile::TempDir, Arc<Live>) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::connect(&botbox_store::sqlite_url(dir.path()))
            .await
            .unwrap();
        let cfg = LiveConfig {
            messages_per_tenant: share,
            messages_per_tenant_alone: alone,
            ..LiveConfig::default()
        };
        (dir, Live::new(db, cfg).unwrap())
    }

    /// A tenant alone uses `messages_per_tenant_alone` turns; once another tenant has a
    /// message in flight, its new messages wait for a turn of its share.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tenant_alone_may_go_beyond_its_share_and_not_while_another_is_busy() {
        let (_dir, live) = live_with_turns(2, 4).await;
        // Alone: four turns at once (two of its share, two beyond); a fifth waits.
        let mut a = Vec::new();
        for _ in 0..4 {
            a.push(live.tenant_turn("a").now_or_never().unwrap().unwrap());
        }
        assert!(live.tenant_turn("a").now_or_never().is_none());
        // B arrives and gets a turn at once, whatever A holds.
        let b = live.tenant_turn("b").now_or_never().unwrap().unwrap();
        // A's two turns beyond its share end; with B busy, A may not take them again.
        a.truncate(2);
        assert!(live.tenant_turn("a").now_or_never().is_none());
        // B is done: A is alone again and goes beyond its share.
        drop(b);
        let more = live.tenant_turn("a").now_or_never().unwrap().unwrap();
        // A turn of the share freed while B is busy is A's again.
        let b = live.tenant_turn("b").now_or_never().unwrap().unwrap();
        drop(a.pop());
        let again = live.tenant_turn("a").now_or_never().unwrap().unwrap();
        drop((more, again, b));
    }

    /// I/O made from the background runtime (a provider read, storage) runs on the main
    /// one, where the shared pools' connections belong; from the main runtime it runs where
    /// it was called.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shared_connections_are_used_from_the_main_runtime_only() {
        use botbox_lanes::{background, in_background};
        let (_dir, live) = live_with_turns(2, 2).await;
        let where_io = |live: Arc<Live>, on_bg: bool| async move {
            let run = async move {
                let io = live.io_on_main(async { in_background() }).await.unwrap();
                let stored = live.stored(async { Ok(in_background()) }).await.unwrap();
                (in_background(), io, stored)
            };
            if on_bg {
                background().spawn(run).await.unwrap()
            } else {
                tokio::spawn(run).await.unwrap()
            }
        };
        assert_eq!(where_io(live.clone(), false).await, (false, false, false));
        assert_eq!(where_io(live, true).await, (true, false, false));
    }

    /// A tenant is over its share while messages of its own wait for a turn and another
    /// tenant is busy; only then does its live work go to the background runtime.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tenant_whose_messages_wait_for_turns_runs_in_the_background() {
        let (_dir, live) = live_with_turns(2, 2).await;
        let nice = |h: tokio::runtime::Handle| async move {
            h.spawn(async { botbox_lanes::this_thread_nice() })
                .await
                .unwrap()
        };
        let main_nice = nice(live.runtime(live.lane("a"))).await;
        // Its whole share in use, nothing waiting: not over it.
        let held: Vec<_> = (0..2)
            .map(|_| live.tenant_turn("a").now_or_never().unwrap().unwrap())
            .collect();
        assert!(!live.over_share("a"));
        // A third message waits for a turn, but A is alone: it keeps the main runtime.
        let mut waiting = Box::pin(live.tenant_turn("a"));
        assert!(futures_util::poll!(waiting.as_mut()).is_pending());
        assert!(!live.over_share("a"));
        // B has a message in flight: A, with a message waiting, is over its share.
        let b = live.tenant_turn("b").now_or_never().unwrap().unwrap();
        assert!(live.over_share("a"));
        assert!(!live.over_share("b"), "another tenant is not");
        assert_eq!(
            nice(live.runtime(live.lane("a"))).await,
            botbox_lanes::BACKGROUND_NICE
        );
        assert_eq!(nice(live.runtime(live.lane("b"))).await, main_nice);
        // Its steps start on the background lane's step threads, B's where they are awaited.
        let step_thread = |lane| async move {
            super::revisions::on_lane(lane, async {
                std::thread::current().name().unwrap_or("").to_owned()
            })
            .await
            .unwrap()
        };
        let here = std::thread::current().name().unwrap_or("").to_owned();
        assert_eq!(step_thread(live.lane("a")).await, "botbox-step-bg");
        assert_eq!(step_thread(live.lane("b")).await, here);
        // The waiting message gets its turn: no longer over.
        drop(held);
        let turn = waiting.await.unwrap();
        assert!(!live.over_share("a"));
        assert_eq!(live.lane("a"), botbox_lanes::Lane::Main);
        drop((turn, b));
    }
}
