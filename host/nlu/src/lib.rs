//! NL Studio models: the project NLUs that bots' `type: nl` NLUs call. Everything here is
//! pure: text in, model and predictions out.
//!
//! A crate of its own so that it builds and tests without tokio, sqlx or wasmtime. May
//! depend on: serde, regex, aho-corasick and a stemmer; must never do I/O (storage and the
//! model cache are `botbox-service`'s `NluService`).
//!
//! - [`text`]: tokenisation, normalisation and stemming for `en` and `id`.
//! - [`lines`]: the training line format (`… (@city:dest Bandung) … #intent:order`).
//! - [`dict`]: dictionary entities (aho-corasick over surface forms, typo tolerance).
//! - [`builtin`]: rule-based phrase profiles (number, email, phone, url, currency, time, units).
//! - [`classify`]: trait entities, a trained sentence classifier with calibrated scores.
//! - [`tagger`]: phrase entities, a trained sequence tagger over BIO tags.
//! - [`model`]: one NLU's trained model: all its entities, trained together, predicted
//!   together, serialised as one blob per NLU revision.

pub mod builtin;
pub mod classify;
pub mod dict;
pub mod lines;
pub mod model;

pub mod tagger;
pub mod text;

use serde::{Deserialize, Serialize};

/// The languages with their own tokenisation and stemming. Any other `lang` string is
/// accepted and treated as [`Lang::Other`] (no stemming).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    En,
    Id,
    Other,
}

impl Lang {
    pub fn parse(s: &str) -> Lang {
        match s.to_ascii_lowercase().as_str() {
            "en" => Lang::En,
            "id" => Lang::Id,
            _ => Lang::Other,
        }
    }
}

/// One labelled span or sentence label of a training sentence (the API's TrainingEntity).
/// `start`/`end` are character (not byte) offsets into `input`, end exclusive. A trait label
/// is an entry with `value` = the label, `start` 0 and `end` = the input's length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingEntity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub entity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub start: usize,
    pub end: usize,
    pub value: String,
    #[serde(default, rename = "belongsTo", skip_serializing_if = "Option::is_none")]
    pub belongs_to: Option<BelongsTo>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BelongsTo {
    pub entity: String,
    pub id: String,
}

/// One training sentence (the API's TrainingData): the text without markup and its labels.
/// A sentence without entities is a negative example for every trait and phrase entity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainingData {
    pub input: String,
    #[serde(default)]
    pub entities: Vec<TrainingEntity>,
}

impl TrainingData {
    /// Gives every label without an `id` one (`e1`, `e2`, …, skipping ids the sentence's
    /// labels already have), so each can be named by `belongsTo` and by clients.
    pub fn with_ids(mut self) -> TrainingData {
        give_ids(&mut self.entities);
        self
    }
}

/// The labels of one sentence, each with an id (see [`TrainingData::with_ids`]).
pub fn give_ids(entities: &mut [TrainingEntity]) {
    let taken: std::collections::HashSet<String> =
        entities.iter().filter_map(|e| e.id.clone()).collect();
    let mut n = 0;
    for e in entities.iter_mut().filter(|e| e.id.is_none()) {
        let id = loop {
            n += 1;
            let id = format!("e{n}");
            if !taken.contains(&id) {
                break id;
            }
        };
        e.id = Some(id);
    }
}

/// One prediction of one entity (the public prediction API's shape).
/// `start`/`end` are character offsets into the predicted text (end exclusive); a trait
/// prediction spans the whole sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    #[serde(rename = "type")]
    pub kind: String,
    pub score: f64,
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub start: usize,
    pub end: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<serde_json::Value>,
    #[serde(default, rename = "belongsTo", skip_serializing_if = "Option::is_none")]
    pub belongs_to: Option<serde_json::Value>,
}

/// SplitMix64: the seeded generator of the training shuffles (the same data always gives the
/// same model, whatever a crate's version).
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1): the top 24 bits, exactly representable in an `f32`.
    pub(crate) fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u32 << 24) as f32
    }

    /// Fisher–Yates.
    pub(crate) fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(id: Option<&str>) -> TrainingEntity {
        TrainingEntity {
            id: id.map(str::to_owned),
            entity: "city".into(),
            label: None,
            start: 0,
            end: 1,
            value: "a".into(),
            belongs_to: None,
        }
    }

    #[test]
    fn every_label_gets_an_id_that_no_other_label_of_its_sentence_has() {
        let d = TrainingData {
            input: "a".into(),
            entities: vec![
                label(None),
                label(Some("e1")),
                label(None),
                label(Some("x")),
            ],
        }
        .with_ids();
        let ids: Vec<_> = d.entities.iter().map(|e| e.id.clone().unwrap()).collect();
        assert_eq!(ids, ["e2", "e1", "e3", "x"]);
    }
}
