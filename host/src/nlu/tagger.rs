//! Phrase entities: a trained sequence tagger. PLACEHOLDER interface, to be implemented.

use super::Lang;
use serde::{Deserialize, Serialize};

/// A labelled span: `tag` is `entity` or `entity:label`. Offsets are characters, end exclusive.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub char_start: usize,
    pub char_end: usize,
    pub tag: String,
}

/// A predicted span with its score in (0, 1].
#[derive(Clone, Debug, PartialEq)]
pub struct Tagged {
    pub span: Span,
    pub score: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tagger {
    lang: Lang,
}

impl Tagger {
    /// Trains one tagger over all tags of `examples` (sentence, its spans); sentences without
    /// spans are negative examples.
    pub fn train(_examples: &[(&str, Vec<Span>)], lang: Lang) -> Tagger {
        Tagger { lang }
    }

    pub fn predict(&self, _text: &str) -> Vec<Tagged> {
        Vec::new()
    }

    /// Tokens, features and per-token tag scores, for the debug endpoint.
    pub fn debug(&self, _text: &str) -> serde_json::Value {
        serde_json::Value::Null
    }
}
