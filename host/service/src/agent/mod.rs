//! The agent API under `/v1`: API keys, chat runs streamed as the AI SDK UI
//! message stream, their stored chunk logs, cancel and steer.
//!
//! An agent is one environment of a project: its deployment decides the revision, as for
//! channels. A run is one bot turn (the step, plus one more step per steer delivered at the
//! step boundary); its conversation is a bot session stored like a channel user's
//! (`<environment>:agent:<conversation>`). The HTTP handlers (`api/agent.rs`) are thin; what
//! runs lives here.

pub mod keys;
pub mod problem;
pub mod run;
pub mod stream;

pub use problem::{Problem, V1Result};
pub use run::{Agents, RunHandle};

/// Identifier prefixes.
pub const RUN_PREFIX: &str = "run_";
pub const CONVERSATION_PREFIX: &str = "conv_";
pub const STEER_PREFIX: &str = "steer_";

pub fn new_prefixed(prefix: &str) -> String {
    format!("{prefix}{}", botbox_store::new_id())
}

/// Whether `id` has the prefix and a well-formed tail (a malformed id answers 404 like an
/// unknown one, without a query).
pub fn well_formed(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .is_some_and(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Unix milliseconds as RFC 3339 UTC (`2026-11-22T21:58:49.123Z`).
pub fn iso_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso_dates() {
        assert_eq!(super::iso_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::iso_ms(1_795_384_729_123), "2026-11-22T21:58:49.123Z");
        assert!(super::well_formed(&super::new_prefixed("run_"), "run_"));
        assert!(!super::well_formed("run_x", "run_"));
    }
}
