//! The limits of one step in the sandbox: one typed place, configurable per tenant.

use std::time::Duration;

/// Wasm instructions per second of CPU measured for boa-in-wasm on this machine class; used
/// only to explain budgets in human terms.
pub const FUEL_PER_SECOND: u64 = 3_900_000_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Deterministic CPU budget: wasm instructions per step (≈ 13 ms of CPU by default).
    pub fuel: u64,
    /// Cap on each linear memory of the instance, in bytes.
    pub memory_bytes: usize,
    /// Wall-clock deadline of a step (checked at every fuel yield, and the bound of every host
    /// call); it must leave room for api calls.
    pub deadline: Duration,
    /// Host calls (HTTP, NLU, logs) allowed per step.
    pub max_host_calls: u32,
    /// Time-out of one api action's HTTP call, enforced by the host.
    pub http_timeout: Duration,
    /// Bigger api response bodies give a null result. (Where api actions may connect is the
    /// server's egress policy, `botbox_egress`, not a per-step limit.)
    pub max_http_body: usize,
    /// Bytes of guest stdout/stderr kept per instance.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: 50_000_000,
            memory_bytes: 32 << 20,
            deadline: Duration::from_secs(12),
            max_host_calls: 200,
            http_timeout: Duration::from_secs(5),
            max_http_body: 1 << 20,
            max_output_bytes: 64 << 10,
        }
    }
}
