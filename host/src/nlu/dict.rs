//! Dictionary entities (`type: dict`). PLACEHOLDER interface, to be implemented.

use super::Lang;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A hit of a dictionary in a text. Offsets are characters, end exclusive.
#[derive(Clone, Debug, PartialEq)]
pub struct DictHit {
    /// The dictionary key (canonical form), reported as `resolved.dictKey`.
    pub key: String,
    /// The text as written in the input.
    pub value: String,
    pub char_start: usize,
    pub char_end: usize,
    /// 1.0 for an exact (case-insensitive) match, lower for a typo-tolerant one.
    pub score: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DictMatcher {
    lang: Lang,
}

impl DictMatcher {
    pub fn new(_dictionary: &BTreeMap<String, Vec<String>>, lang: Lang) -> DictMatcher {
        DictMatcher { lang }
    }

    pub fn find(&self, _text: &str) -> Vec<DictHit> {
        Vec::new()
    }
}
