//! Parsing a bot's JavaScript without running it, at push and validate time: the guest's
//! `check-js` in a fresh instance that is thrown away after. runtime-core has no JavaScript
//! parser and the host runs none natively: a hostile bot's code is parsed only inside the
//! sandbox, under its memory cap, a fuel budget and a deadline.

use super::clock::{StepClock, within_deadline};
use super::imports::arm;
use super::limits::Limits;
use super::sched::OnCpu;
use super::step::explain;
use super::{Sandbox, SandboxError};
use runtime_core::{JsProblem, JsSite};
use std::pin::pin;
use std::time::Duration;

/// Fuel for one check (2,000 M, about half a second of CPU): parsing is linear in the code,
/// and a bot's JavaScript is bounded by the bot's size cap.
const CHECK_FUEL: u64 = 2_000_000_000;

/// Wall-clock deadline of one check (at least 10 s).
const CHECK_DEADLINE: Duration = Duration::from_secs(10);

impl Sandbox {
    /// The syntax errors of `sites` (none: an empty list), parsed in the tenant's turn
    /// (its cap on steps in flight, a CPU slot shared round-robin). A check that exceeds
    /// its budget is `SandboxError::Step`, naming the limit.
    pub async fn check_js(
        &self,
        tenant: &str,
        sites: &[JsSite],
    ) -> Result<Vec<JsProblem>, SandboxError> {
        if sites.is_empty() {
            return Ok(vec![]);
        }
        let json = serde_json::to_string(sites).map_err(|e| SandboxError::Internal(e.into()))?;
        let turn = self.tenants.enter(tenant).await;
        let clock = StepClock::start();
        let work = pin!(async {
            let limits = self.config.limits.clone();
            let mut inst = self
                .instantiate("check-js".into(), None, &limits, &clock)
                .await
                .map_err(SandboxError::Internal)?;
            inst.store.data_mut().site = "the JavaScript check".into();
            let budget = Limits {
                fuel: CHECK_FUEL,
                deadline: CHECK_DEADLINE.max(limits.deadline),
                ..limits
            };
            clock.restart();
            arm(&mut inst.store, budget.fuel, budget.deadline, &clock)
                .map_err(|e| SandboxError::Internal(e.into()))?;
            let call = inst.bindings.call_check_js(&mut inst.store, &json);
            match within_deadline(&clock, budget.deadline, call).await {
                Ok(Ok(out)) => serde_json::from_str(&out).map_err(|e| {
                    SandboxError::Internal(anyhow::anyhow!("check result does not parse: {e}"))
                }),
                Ok(Err(e)) => Err(SandboxError::Internal(anyhow::anyhow!(e))),
                Err(trap) => Err(SandboxError::Step(explain(&inst.store, &budget, &trap))),
            }
        });
        OnCpu::new(&self.cpu, &turn.tenant, &clock, work).await
    }
}
