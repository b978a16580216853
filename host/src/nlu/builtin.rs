//! Rule-based phrase profiles. PLACEHOLDER interface, to be implemented.

use super::Lang;

/// The phrase profiles resolved by rules rather than learned.
pub const RULE_PROFILES: &[&str] = &[
    "number", "email", "phone", "url", "currency", "time", "units",
];

/// A span found by a rule. Offsets are characters, end exclusive.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltinHit {
    pub value: String,
    pub char_start: usize,
    pub char_end: usize,
    /// The resolved value (a number, a normalised phone, `{amount, currency}`, …).
    pub resolved: serde_json::Value,
}

/// The spans of `profile` in `text`; `None` when `profile` is not one of [`RULE_PROFILES`].
pub fn find(profile: &str, _text: &str, _lang: Lang) -> Option<Vec<BuiltinHit>> {
    RULE_PROFILES.contains(&profile).then(Vec::new)
}
