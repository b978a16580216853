//! Canaries: an environment runs a second deployment version for a share of its channel
//! users, beside its own deployment (the control), and ends it by promotion, by abort, or by
//! itself when its figures are worse than its thresholds allow.
//!
//! - **Assignment** ([`bucket`]): a user's bucket (0–99) is a SHA-256 of the environment's
//!   and the user's ids, the same in every replica and release; users in buckets under the
//!   share get the canary. Raising the share keeps every user the canary had. Only channel
//!   messages are split: the console's test chats, agent runs and Cases' tasks run the
//!   environment's own deployment.
//! - **Figures**: each channel message's incoming transcript line records the deployment
//!   version that served it and how its step went (`ok`, `fallback`, `error`). A line is
//!   timed when its group commit starts and may be committed up to a statement time-out
//!   later, so the stored counts ([`run`], every [`CANARY_EVERY`]) cover only lines older
//!   than [`CANARY_SETTLE_MS`], added with a conditional update (replicas never count a
//!   span twice); the newer lines are counted afresh each time the figures are read
//!   ([`Live::canary_figures`]): the figures are up to date, and no line is missed.
//! - **Rollback**: once the canary served `minMessages`, an error rate over `maxErrorRate`
//!   or a fallback rate more than `maxFallbackIncrease` over the control's ends it as
//!   `rolled back`; the routes are dropped so its users get the control at their next
//!   message, and the audit trail records it with `system` as the actor.
//!
//! Every write here changes where messages go, and forgets the cached routes after it.

use super::{Live, LiveError, Route};
use crate::audit::{self, Actor};
use crate::error::ServiceError;
use botbox_sandbox::Revision;
use botbox_store::{CanaryRow, EnvironmentRow, NewAuditEntry, VersionCounts, now_ms};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// How often running canaries are counted and checked.
pub const CANARY_EVERY: Duration = Duration::from_secs(5);

/// How far the stored counts trail the clock (40 s): longer than a group commit may take
/// (PostgreSQL's statement time-out is 30 s), so no line of a counted span commits later.
pub const CANARY_SETTLE_MS: i64 = 40_000;

/// The canary a route splits its users with.
#[derive(Clone)]
pub struct CanaryRoute {
    pub dep_version: String,
    /// 1 to 99: users whose [`bucket`] is under it get the canary.
    pub share: i64,
    pub revision: Arc<Revision>,
}

/// A user's bucket in an environment, 0 to 99: stable across replicas and releases.
pub fn bucket(environment_id: &str, user_id: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(environment_id.as_bytes());
    h.update([0]);
    h.update(user_id.as_bytes());
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes")) % 100
}

impl Route {
    /// The revision and deployment version that serve `user_id`'s messages.
    pub fn serving(&self, user_id: &str) -> (&Arc<Revision>, &str) {
        match &self.canary {
            Some(c) if bucket(&self.env.id, user_id) < c.share as u64 => {
                (&c.revision, &c.dep_version)
            }
            _ => (&self.revision, &self.env.deployment_version),
        }
    }
}

/// When a canary rolls itself back (stored as JSON with the canary; the API's `rollback`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Thresholds {
    pub max_error_rate: f64,
    pub max_fallback_increase: f64,
    pub min_messages: i64,
}

impl Thresholds {
    fn check(&self) -> Result<(), ServiceError> {
        let rate = |name: &str, v: f64| {
            (0.0..=1.0).contains(&v).then_some(()).ok_or_else(|| {
                ServiceError::Invalid(format!(
                    "rollback.{name}: a fraction from 0 to 1 (0.05 is 5 %), got {v}"
                ))
            })
        };
        rate("maxErrorRate", self.max_error_rate)?;
        rate("maxFallbackIncrease", self.max_fallback_increase)?;
        if !(1..=1_000_000).contains(&self.min_messages) {
            return Err(ServiceError::Invalid(format!(
                "rollback.minMessages: 1 to 1000000, got {}",
                self.min_messages
            )));
        }
        Ok(())
    }
}

/// A canary's rates, as the API shows them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub messages: i64,
    pub error_rate: f64,
    pub fallback_rate: f64,
}

fn rates(messages: i64, errors: i64, fallbacks: i64) -> Rates {
    let of = |n: i64| {
        if messages > 0 {
            n as f64 / messages as f64
        } else {
            0.0
        }
    };
    Rates {
        messages,
        error_rate: of(errors),
        fallback_rate: of(fallbacks),
    }
}

/// The canary's and the control's rates, and its thresholds.
pub fn figures(c: &CanaryRow) -> (Rates, Rates, Thresholds) {
    let thresholds = serde_json::from_str(&c.rollback).unwrap_or(Thresholds {
        max_error_rate: 1.0,
        max_fallback_increase: 1.0,
        min_messages: i64::MAX,
    });
    (
        rates(c.canary_messages, c.canary_errors, c.canary_fallbacks),
        rates(c.control_messages, c.control_errors, c.control_fallbacks),
        thresholds,
    )
}

/// Why the canary must roll back, if it must.
pub fn breach(c: &CanaryRow) -> Option<String> {
    let (canary, control, t) = figures(c);
    if canary.messages < t.min_messages {
        return None;
    }
    let pct = |r: f64| format!("{:.1} %", r * 100.0);
    if canary.error_rate > t.max_error_rate {
        return Some(format!(
            "error rate {} over {} messages is above maxErrorRate {}",
            pct(canary.error_rate),
            canary.messages,
            pct(t.max_error_rate)
        ));
    }
    let increase = canary.fallback_rate - control.fallback_rate;
    (increase > t.max_fallback_increase).then(|| {
        format!(
            "fallback rate {} against the control's {} is {:.1} points above it, more than maxFallbackIncrease {}",
            pct(canary.fallback_rate),
            pct(control.fallback_rate),
            increase * 100.0,
            pct(t.max_fallback_increase)
        )
    })
}

/// What `PUT …/canary` asks for.
pub struct CanaryStart<'a> {
    pub dep_version: &'a str,
    pub share: i64,
    pub thresholds: Thresholds,
}

/// Adds the canary's and the control's counts to `c`'s.
fn add_sides(c: &mut CanaryRow, (canary, control): (VersionCounts, VersionCounts)) {
    c.canary_messages += canary.messages;
    c.canary_errors += canary.errors;
    c.canary_fallbacks += canary.fallbacks;
    c.control_messages += control.messages;
    c.control_errors += control.errors;
    c.control_fallbacks += control.fallbacks;
}

/// `lines` split into the canary's version and the rest (the control).
fn sides(canary_version: &str, lines: Vec<VersionCounts>) -> (VersionCounts, VersionCounts) {
    let (mut canary, mut control) = (VersionCounts::default(), VersionCounts::default());
    for l in lines {
        let side = if l.dep_version == canary_version {
            &mut canary
        } else {
            &mut control
        };
        side.messages += l.messages;
        side.errors += l.errors;
        side.fallbacks += l.fallbacks;
    }
    (canary, control)
}

impl Live {
    /// The canary with the lines its stored counts do not hold yet (newer than its
    /// `counted_until`, up to `now`) added: its figures as of now.
    pub async fn canary_figures(
        &self,
        mut c: CanaryRow,
        env_name: &str,
        now: i64,
    ) -> botbox_store::DbResult<CanaryRow> {
        let lines = self
            .db
            .canaries()
            .count_lines(&c.project_id, env_name, (c.counted_until, now + 1))
            .await?;
        let counts = sides(&c.dep_version, lines);
        add_sides(&mut c, counts);
        Ok(c)
    }

    /// The canary running in `env`, as its route splits users (`None` without one, or when
    /// its version no longer loads: its users get the control, and the reason is logged).
    pub(super) async fn canary_route(
        &self,
        env: &EnvironmentRow,
    ) -> Result<Option<CanaryRoute>, LiveError> {
        let Some(c) = self.db.canaries().running(&env.project_id, &env.id).await? else {
            return Ok(None);
        };
        match self
            .version_revision(&env.project_id, &c.dep_version, &env.name)
            .await
        {
            Ok(revision) => Ok(Some(CanaryRoute {
                dep_version: c.dep_version,
                share: c.share,
                revision,
            })),
            Err(LiveError::NotDeployed(why)) => {
                tracing::warn!(environment = %env.id, canary = %c.dep_version, %why,
                    "canary version cannot run; its users get the control");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Starts a canary in `env`, or reshapes the running one when it runs the same
    /// version (a rollout's next step: its share and thresholds).
    pub async fn start_canary(
        &self,
        env: &EnvironmentRow,
        req: CanaryStart<'_>,
        by: &Actor,
    ) -> Result<CanaryRow, ServiceError> {
        if !(1..=99).contains(&req.share) {
            return Err(ServiceError::Invalid(format!(
                "share: the percentage of users the canary serves, 1 to 99; got {}",
                req.share
            )));
        }
        req.thresholds.check()?;
        if req.dep_version == env.deployment_version {
            return Err(ServiceError::Invalid(format!(
                "depVersion: environment {} already runs {} for everyone; a canary runs another version beside it",
                env.name, req.dep_version
            )));
        }
        match self
            .version_revision(&env.project_id, req.dep_version, &env.name)
            .await
        {
            Ok(_) => {}
            Err(LiveError::NotDeployed(why)) => {
                return Err(ServiceError::Invalid(format!("depVersion: {why}")));
            }
            Err(e) => return Err(ServiceError::Internal(anyhow::anyhow!("{e}"))),
        }
        let store = self.db.canaries();
        let rollback = serde_json::to_string(&req.thresholds).expect("thresholds serialise");
        let row = match store.running(&env.project_id, &env.id).await? {
            Some(c) if c.dep_version == req.dep_version => {
                store.reshape(&c.id, req.share, &rollback).await?;
                store.running(&env.project_id, &env.id).await?
            }
            Some(c) => {
                return Err(ServiceError::Conflict(format!(
                    "environment {} already runs a canary of {}: promote or abort it first",
                    env.name, c.dep_version
                )));
            }
            None => store
                .start(
                    &env.project_id,
                    &env.id,
                    (req.dep_version, req.share, &rollback),
                    (&by.label(), now_ms()),
                )
                .await
                .map_err(|e| match e {
                    botbox_store::DbError::Conflict => ServiceError::Conflict(format!(
                        "environment {} already runs a canary",
                        env.name
                    )),
                    e => e.into(),
                })?,
        };
        self.routes_changed();
        row.ok_or_else(|| {
            ServiceError::Conflict(format!(
                "environment {} changed meanwhile (it runs {} now, or the canary ended): look again",
                env.name, req.dep_version
            ))
        })
    }

    /// Ends `env`'s running canary as `promoted` (the environment moves to its version) or
    /// `aborted`; `Conflict` when none runs.
    pub async fn end_canary(
        &self,
        env: &EnvironmentRow,
        promote: bool,
        by: &Actor,
    ) -> Result<CanaryRow, ServiceError> {
        let store = self.db.canaries();
        let c = store
            .running(&env.project_id, &env.id)
            .await?
            .ok_or_else(|| {
                ServiceError::Conflict(format!("environment {} runs no canary", env.name))
            })?;
        let outcome = if promote { "promoted" } else { "aborted" };
        let ended = store
            .end(&c, (outcome, None), (&by.label(), now_ms()), promote)
            .await?;
        self.routes_changed();
        if !ended {
            return Err(ServiceError::Conflict(format!(
                "the canary of {} in environment {} ended meanwhile",
                c.dep_version, env.name
            )));
        }
        Ok(c)
    }

    /// Brings every running canary's stored counts up to [`CANARY_SETTLE_MS`] before `now`
    /// (Unix ms), and rolls back those whose figures as of `now` are past their thresholds;
    /// the canaries rolled back, with their reasons.
    pub async fn evaluate_canaries(&self, now: i64) -> anyhow::Result<Vec<(CanaryRow, String)>> {
        let mut rolled = Vec::new();
        for c in self.db.canaries().all_running().await? {
            if let Some(done) = self.evaluate(c, now).await? {
                rolled.push(done);
            }
        }
        Ok(rolled)
    }

    /// One running canary: its counts settled, its figures checked, and rolled back past
    /// its thresholds (with the reason).
    async fn evaluate(
        &self,
        c: CanaryRow,
        now: i64,
    ) -> anyhow::Result<Option<(CanaryRow, String)>> {
        let Some(env) = self
            .db
            .environment(&c.project_id, &c.environment_id)
            .await?
        else {
            let store = self.db.canaries();
            store
                .end_for_environment(&c.environment_id, now_ms())
                .await?;
            return Ok(None);
        };
        let Some(c) = self.settle(c, &env, now).await? else {
            return Ok(None);
        };
        let current = self.canary_figures(c, &env.name, now).await?;
        let Some(reason) = breach(&current) else {
            return Ok(None);
        };
        Ok(self
            .roll_back(&current, &env, &reason)
            .await?
            .then_some((current, reason)))
    }

    /// The canary with its stored counts brought up to [`CANARY_SETTLE_MS`] before `now`
    /// (`None`: it ended meanwhile).
    async fn settle(
        &self,
        c: CanaryRow,
        env: &EnvironmentRow,
        now: i64,
    ) -> botbox_store::DbResult<Option<CanaryRow>> {
        let settled = now - CANARY_SETTLE_MS;
        if settled <= c.counted_until {
            return Ok(Some(c));
        }
        let store = self.db.canaries();
        let lines = store
            .count_lines(&c.project_id, &env.name, (c.counted_until, settled))
            .await?;
        let (canary, control) = sides(&c.dep_version, lines);
        match store.add_counts(&c, settled, &canary, &control).await? {
            Some(c) => Ok(Some(c)),
            // Another pass or replica counted it; read it again.
            None => store.running(&c.project_id, &c.environment_id).await,
        }
    }

    /// Ends the canary as `rolled back` by `system`, with its log line, metric and audit
    /// entry; false when it had ended already.
    async fn roll_back(
        &self,
        c: &CanaryRow,
        env: &EnvironmentRow,
        reason: &str,
    ) -> botbox_store::DbResult<bool> {
        let system = Actor::system();
        let outcome = ("rolled back", Some(reason));
        if !self
            .db
            .canaries()
            .end(c, outcome, (&system.label(), now_ms()), false)
            .await?
        {
            return Ok(false);
        }
        self.routes_changed();
        tracing::warn!(project = %c.project_id, environment = %env.name, canary = %c.dep_version,
            %reason, "canary rolled back");
        metrics::counter!("botbox_canary_rollbacks_total").increment(1);
        let owner = self.db.project(&c.project_id).await?.map(|p| p.owner_id);
        let entry = NewAuditEntry {
            action: "canary.rollback".into(),
            resource_kind: "environment".into(),
            resource_id: env.id.clone(),
            project_id: Some(c.project_id.clone()),
            owner_id: owner,
            outcome: "ok",
            detail: Some(format!("{}: {reason}", c.dep_version)),
            ..Default::default()
        };
        audit::record(&self.db, &system, entry).await;
        Ok(true)
    }
}

/// Counts and checks the running canaries every [`CANARY_EVERY`] until a drain starts.
pub(super) async fn run(live: Arc<Live>) {
    while !live.drain.draining() {
        if let Err(e) = live.evaluate_canaries(now_ms()).await {
            tracing::error!(error = %format!("{e:#}"), "canaries");
        }
        tokio::select! {
            _ = tokio::time::sleep(CANARY_EVERY) => {}
            _ = live.drain.started() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_stable_and_spread() {
        assert_eq!(bucket("env", "u1"), bucket("env", "u1"));
        let mut counts = [0u32; 10];
        for u in 0..10_000 {
            counts[(bucket("env-a", &format!("user-{u}")) / 10) as usize] += 1;
        }
        // Each tenth of the buckets gets about a tenth of the users (1,000 ± 15 %).
        assert!(
            counts.iter().all(|n| (850..=1150).contains(n)),
            "{counts:?}"
        );
        // Another environment splits its users otherwise.
        let same = (0..1000)
            .filter(|u| {
                let u = format!("user-{u}");
                bucket("env-a", &u) == bucket("env-b", &u)
            })
            .count();
        assert!(same < 50, "{same}");
    }

    fn row(canary: (i64, i64, i64), control: (i64, i64, i64)) -> CanaryRow {
        CanaryRow {
            id: "c".into(),
            project_id: "p".into(),
            environment_id: "e".into(),
            dep_version: "1.0.1".into(),
            share: 10,
            rollback: r#"{"maxErrorRate":0.05,"maxFallbackIncrease":0.1,"minMessages":50}"#.into(),
            started_at: 0,
            started_by: "dev".into(),
            counted_until: 0,
            canary_messages: canary.0,
            canary_errors: canary.1,
            canary_fallbacks: canary.2,
            control_messages: control.0,
            control_errors: control.1,
            control_fallbacks: control.2,
            ended_at: None,
            outcome: None,
            reason: None,
            ended_by: None,
        }
    }

    #[test]
    fn a_canary_rolls_back_only_past_its_thresholds_and_minimum() {
        // Too few messages: whatever the rates.
        assert_eq!(breach(&row((49, 49, 0), (100, 0, 0))), None);
        // Errors: 3 of 50 is 6 % > 5 %.
        let why = breach(&row((50, 3, 0), (100, 0, 0))).unwrap();
        assert!(why.contains("error rate 6.0 %"), "{why}");
        assert_eq!(breach(&row((50, 2, 0), (100, 0, 0))), None);
        // Fallbacks: 20 % against 5 % is 15 points over; 14 % is only 9.
        let why = breach(&row((50, 0, 10), (100, 0, 5))).unwrap();
        assert!(why.contains("fallback rate 20.0 %"), "{why}");
        assert_eq!(breach(&row((50, 0, 7), (100, 0, 5))), None);
    }
}
