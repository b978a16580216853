//! Trait entities: a trained sentence classifier. PLACEHOLDER interface, to be implemented.

use super::Lang;
use serde::{Deserialize, Serialize};

/// One training sentence of a trait: its label, or `None` for a counter-example (a sentence
/// that carries none of the trait's labels).
pub struct Example<'a> {
    pub text: &'a str,
    pub label: Option<&'a str>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraitModel {
    lang: Lang,
    labels: Vec<String>,
}

impl TraitModel {
    /// Trains on `examples`. `labels` are the entity's declared labels (may be empty: then the
    /// labels seen in the examples). Fails with a clear message when there is nothing to learn.
    pub fn train(
        examples: &[Example<'_>],
        labels: &[String],
        lang: Lang,
    ) -> Result<TraitModel, String> {
        let _ = examples;
        Ok(TraitModel {
            lang,
            labels: labels.to_vec(),
        })
    }

    /// Labels with calibrated scores in (0, 1], best first; counter-example mass is not listed.
    pub fn predict(&self, _text: &str) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// Tokens, features and every label's score, for the debug endpoint.
    pub fn debug(&self, _text: &str) -> serde_json::Value {
        serde_json::Value::Null
    }
}
