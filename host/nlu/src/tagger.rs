//! Phrase entities (`type: phrase`): a trained sequence tagger.
//!
//! One tagger serves all phrase entities of an NLU. Each span tag `x` (an entity name, or
//! `entity:label`) gets the BIO tags `B-x` (first token of a span) and `I-x` (the following
//! tokens); every other token is `O`. Sentences without spans are negative examples: all `O`.
//!
//! The model is a linear-chain conditional random field (Lafferty et al. 2001):
//! - emission features per token (from [`text::tokenize`]): the lower-cased word, its
//!   prefixes and suffixes of 1–3 characters, its shape (`Xxxx` → `Xx`, `12.5` → `d.d`),
//!   is-digit / has-digit / is-title / is-upper / is-punctuation / is-first flags, the words
//!   and shapes up to two tokens before and after, and pairs of neighbouring words;
//! - a tag-transition weight for each (previous tag, tag) pair: the previous-tag feature;
//! - Viterbi decoding, constrained to valid BIO sequences (`I-x` only after `B-x` or `I-x`);
//! - training by stochastic gradient ascent on the L2-penalised log-likelihood (the gradient
//!   from forward-backward), [`EPOCHS`] passes, the sentence order shuffled each pass by a
//!   fixed-seed generator: the same examples always give the same model, bit for bit.
//!
//! A CRF rather than an averaged perceptron: both learn from a dozen sentences, but the
//! perceptron's scores saturate (every span scored 1.0, a wrong one included), while the
//! CRF's are probabilities that thresholds can use.
//!
//! Scores: each token's marginal probability of its predicted tag (forward-backward); a
//! span's score is the mean over its tokens, in (0, 1].
//!
//! Cost: training is O(epochs × tokens × (features per token × tags + tags²)); prediction is
//! O(tokens × (features per token × tags + tags²)). The model stores one weight per
//! (feature, tag) for the features with a weight that matters, as a sorted list (serialised
//! as is; the lookup map is rebuilt lazily after deserialisation).
//!
//! Limits: scores are calibrated on the training sentences only (a dozen examples give
//! confident models); features are case-sensitive through the shape, so a model trained on
//! capitalised names may miss lower-cased ones; `lang` does not change the features; spans
//! are whole tokens (a span boundary inside a token covers the whole token); one BIO layer
//! cannot hold nested or overlapping spans (`(@item-1 … (@item-1.qty dua) …)`): where
//! training spans overlap, the first listed keeps the shared tokens; there is no
//! stemming or word-embedding generalisation: an unseen word is tagged from its shape,
//! affixes and context.

use super::Lang;
use super::SplitMix;
use super::text::{self, Token};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::sync::OnceLock;

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

/// Training passes over the examples.
pub const EPOCHS: usize = 30;
/// The initial learning rate.
const ETA0: f64 = 0.1;
/// The L2 penalty on the weights (over the whole training set).
const L2: f64 = 0.1;
/// The seed of the per-epoch shuffles.
const SHUFFLE_SEED: u64 = 0x5eed_b07b_0c5a_11ce;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tagger {
    lang: Lang,
    /// `O`, then `B-x`, `I-x` for each span tag `x` in sorted order.
    tags: Vec<String>,
    /// Feature names, sorted.
    features: Vec<String>,
    /// Emission weights, `features.len() × tags.len()`, row-major.
    weights: Vec<f32>,
    /// Transition weights, `(tags.len() + 1) × tags.len()`: row 0 is the sentence
    /// start, row `p + 1` the previous tag `p`.
    transitions: Vec<f32>,
    #[serde(skip)]
    index: OnceLock<HashMap<String, usize>>,
}

impl Tagger {
    /// Trains one tagger over all tags of `examples` (sentence, its spans); sentences without
    /// spans are negative examples.
    pub fn train(examples: &[(&str, Vec<Span>)], lang: Lang) -> Tagger {
        let mut span_tags: Vec<String> = examples
            .iter()
            .flat_map(|(_, spans)| spans.iter().map(|s| s.tag.clone()))
            .collect();
        span_tags.sort();
        span_tags.dedup();
        let mut tags = vec!["O".to_string()];
        for t in &span_tags {
            tags.push(format!("B-{t}"));
            tags.push(format!("I-{t}"));
        }
        let nt = tags.len();
        let (names, data) = interned_sentences(examples, &span_tags, lang);
        let ne = names.len() * nt;
        let sgd = fit_crf(&data, ne, nt);
        let (w, transitions) = sgd.current(ne);
        let transitions: Vec<f32> = transitions.into_iter().map(|x| x as f32).collect();
        let (features, weights) = kept_features(names, &w, nt);
        Tagger {
            lang,
            tags,
            features,
            weights,
            transitions,
            index: OnceLock::new(),
        }
    }

    pub fn lang(&self) -> Lang {
        self.lang
    }

    /// The span tags this tagger predicts (`entity` or `entity:label`).
    pub fn span_tags(&self) -> Vec<&str> {
        self.tags
            .iter()
            .skip(1)
            .step_by(2)
            .map(|t| &t[2..])
            .collect()
    }

    fn index(&self) -> &HashMap<String, usize> {
        self.index.get_or_init(|| {
            self.features
                .iter()
                .enumerate()
                .map(|(i, f)| (f.clone(), i))
                .collect()
        })
    }

    /// Tokens, their features, the decoded tags and the per-token tag marginals.
    fn analyse(&self, text: &str) -> Analysis {
        let tokens = text::tokenize(text);
        let names = token_features(text, &tokens, self.lang);
        let nt = self.tags.len();
        let index = self.index();
        let ids: Vec<Vec<usize>> = names
            .iter()
            .map(|fs| fs.iter().filter_map(|f| index.get(f).copied()).collect())
            .collect();
        let weights: Vec<f64> = self.weights.iter().map(|&x| x as f64).collect();
        let transitions: Vec<f64> = self.transitions.iter().map(|&x| x as f64).collect();
        let emissions = emission_scores(ids.iter().map(|f| f.as_slice()), &weights, nt);
        let tags = viterbi(&emissions, &transitions, nt);
        let marginals = ForwardBackward::new(&emissions, &transitions, nt).marginals();
        Analysis {
            tokens,
            features: names,
            tags,
            marginals,
        }
    }

    pub fn predict(&self, text: &str) -> Vec<Tagged> {
        if self.tags.len() < 2 {
            return Vec::new();
        }
        let a = self.analyse(text);
        spans(&a.tags)
            .into_iter()
            .map(|(from, to, tag)| {
                let score =
                    (from..to).map(|t| a.marginals[t][a.tags[t]]).sum::<f64>() / (to - from) as f64;
                Tagged {
                    span: Span {
                        char_start: a.tokens[from].char_start,
                        char_end: a.tokens[to - 1].char_end,
                        tag: self.tags[tag][2..].to_string(),
                    },
                    score: score.clamp(f64::MIN_POSITIVE, 1.0),
                }
            })
            .collect()
    }

    /// Tokens, features and per-token tag scores, for the debug endpoint.
    pub fn debug(&self, text: &str) -> serde_json::Value {
        let a = self.analyse(text);
        let chars: Vec<char> = text.chars().collect();
        let slice = |s: usize, e: usize| chars[s..e].iter().collect::<String>();
        let tokens: Vec<serde_json::Value> = a
            .tokens
            .iter()
            .enumerate()
            .map(|(t, tok)| {
                let scores: serde_json::Map<String, serde_json::Value> = self
                    .tags
                    .iter()
                    .zip(&a.marginals[t])
                    .map(|(tag, p)| (tag.clone(), json!(round4(*p))))
                    .collect();
                json!({
                    "text": slice(tok.char_start, tok.char_end),
                    "start": tok.char_start,
                    "end": tok.char_end,
                    "tag": self.tags[a.tags[t]],
                    "score": round4(a.marginals[t][a.tags[t]]),
                    "scores": scores,
                    "features": a.features[t],
                })
            })
            .collect();
        let spans: Vec<serde_json::Value> = self
            .predict(text)
            .into_iter()
            .map(|s| {
                json!({
                    "tag": s.span.tag,
                    "value": slice(s.span.char_start, s.span.char_end),
                    "start": s.span.char_start,
                    "end": s.span.char_end,
                    "score": round4(s.score),
                })
            })
            .collect();
        json!({ "tags": self.tags, "tokens": tokens, "spans": spans })
    }
}

/// A training sentence: the interned feature ids of each token, and each token's gold tag.
type Sentence = (Vec<Vec<usize>>, Vec<usize>);

/// The feature names (ids are their positions) and the sentences of `examples` with their
/// features interned; sentences without tokens are left out.
fn interned_sentences(
    examples: &[(&str, Vec<Span>)],
    span_tags: &[String],
    lang: Lang,
) -> (Vec<String>, Vec<Sentence>) {
    let mut feature_ids: HashMap<String, usize> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut data: Vec<Sentence> = Vec::new();
    for (sentence, spans) in examples {
        let tokens = text::tokenize(sentence);
        if tokens.is_empty() {
            continue;
        }
        let gold = gold_tags(&tokens, spans, span_tags);
        let feats = token_features(sentence, &tokens, lang)
            .into_iter()
            .map(|fs| {
                fs.into_iter()
                    .map(|f| {
                        *feature_ids.entry(f.clone()).or_insert_with(|| {
                            names.push(f);
                            names.len() - 1
                        })
                    })
                    .collect()
            })
            .collect();
        data.push((feats, gold));
    }
    (names, data)
}

/// Trains the weights (`ne` emission weights, then the transition weights) by stochastic
/// gradient ascent over [`EPOCHS`] shuffled passes; nothing to learn with `O` alone.
fn fit_crf(data: &[Sentence], ne: usize, nt: usize) -> Sgd {
    let mut sgd = Sgd::new(ne + (nt + 1) * nt);
    let mut order: Vec<usize> = (0..data.len()).collect();
    let mut rng = SplitMix(SHUFFLE_SEED);
    let lambda = L2 / data.len().max(1) as f64;
    let mut step = 0.0;
    if nt > 1 {
        for _ in 0..EPOCHS {
            rng.shuffle(&mut order);
            for &i in &order {
                let (feats, gold) = &data[i];
                let eta = ETA0 / (1.0 + ETA0 * lambda * step);
                step += 1.0;
                sgd.decay(eta * lambda);
                sentence_step(&mut sgd, feats, gold, eta, ne, nt);
            }
        }
    }
    sgd
}

/// One step on a sentence along the gradient of its log-likelihood: observed minus expected
/// counts (from forward-backward) of each emission and transition feature.
fn sentence_step(
    sgd: &mut Sgd,
    feats: &[Vec<usize>],
    gold: &[usize],
    eta: f64,
    ne: usize,
    nt: usize,
) {
    let transitions: Vec<f64> = sgd.w[ne..].iter().map(|x| x * sgd.scale).collect();
    let mut emissions = emission_scores(feats.iter().map(|f| f.as_slice()), &sgd.w, nt);
    for x in emissions.iter_mut().flatten() {
        *x *= sgd.scale;
    }
    let fb = ForwardBackward::new(&emissions, &transitions, nt);
    for (t, fs) in feats.iter().enumerate() {
        for y in 0..nt {
            let g = f64::from(u8::from(gold[t] == y)) - fb.node(t, y);
            if g.abs() > 1e-12 {
                for &f in fs {
                    sgd.add(f * nt + y, eta * g);
                }
            }
        }
        for p in 0..=nt {
            if (t == 0) != (p == 0) {
                continue;
            }
            for c in 0..nt {
                let expected = fb.edge(t, p, c, &emissions, &transitions);
                let observed = if t == 0 {
                    gold[0] == c
                } else {
                    gold[t - 1] + 1 == p && gold[t] == c
                };
                let g = f64::from(u8::from(observed)) - expected;
                if g.abs() > 1e-12 {
                    sgd.add(ne + p * nt + c, eta * g);
                }
            }
        }
    }
}

/// The features with a weight that matters, sorted by name, and their emission weights
/// (`nt` per feature, in the same order).
fn kept_features(names: Vec<String>, w: &[f64], nt: usize) -> (Vec<String>, Vec<f32>) {
    let mut kept: Vec<(String, usize)> = names
        .into_iter()
        .enumerate()
        .filter(|(f, _)| w[f * nt..(f + 1) * nt].iter().any(|x| x.abs() > 1e-4))
        .map(|(f, name)| (name, f))
        .collect();
    kept.sort();
    let mut weights = Vec::with_capacity(kept.len() * nt);
    for (_, f) in &kept {
        weights.extend(w[f * nt..(f + 1) * nt].iter().map(|&x| x as f32));
    }
    (kept.into_iter().map(|(n, _)| n).collect(), weights)
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

struct Analysis {
    tokens: Vec<Token>,
    features: Vec<Vec<String>>,
    tags: Vec<usize>,
    marginals: Vec<Vec<f64>>,
}

/// Whether tag `cur` may follow `prev` (`None` = sentence start): `I-x` only after `B-x`/`I-x`.
fn allowed(prev: Option<usize>, cur: usize) -> bool {
    if cur == 0 || cur % 2 == 1 {
        return true;
    }
    prev.is_some_and(|p| p == cur || p + 1 == cur)
}

/// The gold tag index of each token: tokens overlapping a span get its B/I tags.
fn gold_tags(tokens: &[Token], spans: &[Span], span_tags: &[String]) -> Vec<usize> {
    let mut gold = vec![0usize; tokens.len()];
    for span in spans {
        let Ok(k) = span_tags.binary_search(&span.tag) else {
            continue;
        };
        let mut first = true;
        for (t, tok) in tokens.iter().enumerate() {
            if tok.char_start < span.char_end && span.char_start < tok.char_end && gold[t] == 0 {
                gold[t] = if first { 1 + 2 * k } else { 2 + 2 * k };
                first = false;
            }
        }
    }
    // Repair sequences a span overlap may have broken (an I-x not after its B-x/I-x).
    for t in 0..gold.len() {
        let prev = if t == 0 { None } else { Some(gold[t - 1]) };
        if !allowed(prev, gold[t]) {
            gold[t] -= 1;
        }
    }
    gold
}

/// The (first token, end token, B tag) of each span of a decoded tag sequence.
fn spans(tags: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut t = 0;
    while t < tags.len() {
        let b = tags[t];
        if b != 0 && b % 2 == 1 {
            let mut e = t + 1;
            while e < tags.len() && tags[e] == b + 1 {
                e += 1;
            }
            out.push((t, e, b));
            t = e;
        } else {
            t += 1;
        }
    }
    out
}

/// The feature names of each token.
fn token_features(text: &str, tokens: &[Token], _lang: Lang) -> Vec<Vec<String>> {
    let words: Vec<&str> = tokens.iter().map(|t| t.norm.as_str()).collect();
    let shapes: Vec<String> = tokens
        .iter()
        .map(|t| shape(&text[t.byte_start..t.byte_end]))
        .collect();
    let word_at = |i: isize| -> &str {
        if i < 0 {
            "<s>"
        } else {
            words.get(i as usize).copied().unwrap_or("</s>")
        }
    };
    let shape_at = |i: isize| -> &str {
        if i < 0 {
            "<s>"
        } else {
            shapes.get(i as usize).map(String::as_str).unwrap_or("</s>")
        }
    };
    (0..tokens.len())
        .map(|i| {
            let w = words[i];
            let chars: Vec<char> = w.chars().collect();
            let n = chars.len();
            let ii = i as isize;
            let mut f = vec![
                "bias".to_string(),
                format!("w={w}"),
                format!("sh={}", shapes[i]),
                format!("w-1={}", word_at(ii - 1)),
                format!("w-2={}", word_at(ii - 2)),
                format!("w+1={}", word_at(ii + 1)),
                format!("w+2={}", word_at(ii + 2)),
                format!("w-1|w+1={}|{}", word_at(ii - 1), word_at(ii + 1)),
                format!("w-2|w-1={}|{}", word_at(ii - 2), word_at(ii - 1)),
                format!("sh-1={}", shape_at(ii - 1)),
                format!("sh+1={}", shape_at(ii + 1)),
            ];
            for k in 1..=3.min(n) {
                f.push(format!("p{k}={}", chars[..k].iter().collect::<String>()));
                f.push(format!(
                    "s{k}={}",
                    chars[n - k..].iter().collect::<String>()
                ));
            }
            let original = &tokens[i];
            if chars.iter().all(|c| c.is_numeric()) {
                f.push("digit".into());
            } else if chars.iter().any(|c| c.is_numeric()) {
                f.push("hasdigit".into());
            }
            if !original.is_word() {
                f.push("punct".into());
            }
            if shapes[i].starts_with('X') && shapes[i].len() > 1 && shapes[i] != "X." {
                f.push("title".into());
            }
            if shapes[i] == "X" && n > 1 {
                f.push("upper".into());
            }
            if i == 0 {
                f.push("first".into());
            }
            f
        })
        .collect()
}

/// The word's shape from its original casing: upper → `X`, lower → `x`, digit → `d`, others
/// kept, runs collapsed (`Bandung` → `Xx`, `KFC` → `X`, `12.500` → `d.d`).
fn shape(original: &str) -> String {
    let mut out = String::new();
    for c in original.chars() {
        let s = if c.is_uppercase() {
            'X'
        } else if c.is_lowercase() {
            'x'
        } else if c.is_numeric() {
            'd'
        } else {
            c
        };
        if !out.ends_with(s) {
            out.push(s);
        }
    }
    out
}

/// Sum of the weights of each token's features, per tag.
fn emission_scores<'a>(
    feats: impl Iterator<Item = &'a [usize]>,
    weights: &[f64],
    nt: usize,
) -> Vec<Vec<f64>> {
    feats
        .map(|fs| {
            let mut s = vec![0.0; nt];
            for &f in fs {
                for (t, x) in s.iter_mut().enumerate() {
                    *x += weights[f * nt + t];
                }
            }
            s
        })
        .collect()
}

/// The best valid tag sequence.
fn viterbi(emissions: &[Vec<f64>], transitions: &[f64], nt: usize) -> Vec<usize> {
    let n = emissions.len();
    if n == 0 {
        return Vec::new();
    }
    let mut score = vec![vec![f64::NEG_INFINITY; nt]; n];
    let mut back = vec![vec![0usize; nt]; n];
    for c in 0..nt {
        if allowed(None, c) {
            score[0][c] = transitions[c] + emissions[0][c];
        }
    }
    for t in 1..n {
        for c in 0..nt {
            let mut best = f64::NEG_INFINITY;
            let mut arg = 0;
            for p in 0..nt {
                if !allowed(Some(p), c) || score[t - 1][p] == f64::NEG_INFINITY {
                    continue;
                }
                let s = score[t - 1][p] + transitions[(p + 1) * nt + c];
                if s > best {
                    best = s;
                    arg = p;
                }
            }
            score[t][c] = best + emissions[t][c];
            back[t][c] = arg;
        }
    }
    let mut best = 0;
    for c in 1..nt {
        if score[n - 1][c] > score[n - 1][best] {
            best = c;
        }
    }
    let mut out = vec![0; n];
    out[n - 1] = best;
    for t in (1..n).rev() {
        out[t - 1] = back[t][out[t]];
    }
    out
}

/// `ln Σ exp(x)` over the finite values of `xs` (−∞ when there are none).
fn log_sum_exp(xs: &[f64]) -> f64 {
    let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + xs.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// The forward-backward tables of a sentence: log-sums of all valid tag sequences up to
/// (`alpha`) and from (`beta`) each token, and the log-partition `log_z`.
struct ForwardBackward {
    alpha: Vec<Vec<f64>>,
    beta: Vec<Vec<f64>>,
    log_z: f64,
}

impl ForwardBackward {
    fn new(emissions: &[Vec<f64>], transitions: &[f64], nt: usize) -> ForwardBackward {
        let n = emissions.len();
        let ninf = f64::NEG_INFINITY;
        let mut alpha = vec![vec![ninf; nt]; n];
        let mut beta = vec![vec![0.0; nt]; n];
        if n == 0 {
            return ForwardBackward {
                alpha,
                beta,
                log_z: 0.0,
            };
        }
        for c in 0..nt {
            if allowed(None, c) {
                alpha[0][c] = transitions[c] + emissions[0][c];
            }
        }
        let mut buf = vec![f64::NEG_INFINITY; nt];
        for t in 1..n {
            for c in 0..nt {
                for p in 0..nt {
                    buf[p] = if allowed(Some(p), c) {
                        alpha[t - 1][p] + transitions[(p + 1) * nt + c]
                    } else {
                        f64::NEG_INFINITY
                    };
                }
                alpha[t][c] = log_sum_exp(&buf) + emissions[t][c];
            }
        }
        for t in (0..n - 1).rev() {
            for p in 0..nt {
                for c in 0..nt {
                    buf[c] = if allowed(Some(p), c) {
                        transitions[(p + 1) * nt + c] + emissions[t + 1][c] + beta[t + 1][c]
                    } else {
                        f64::NEG_INFINITY
                    };
                }
                beta[t][p] = log_sum_exp(&buf);
            }
        }
        let log_z = log_sum_exp(&alpha[n - 1]);
        ForwardBackward { alpha, beta, log_z }
    }

    fn prob(x: f64) -> f64 {
        if x.is_finite() { x.exp().min(1.0) } else { 0.0 }
    }

    /// P(tag of token `t` = `y`).
    fn node(&self, t: usize, y: usize) -> f64 {
        Self::prob(self.alpha[t][y] + self.beta[t][y] - self.log_z)
    }

    /// P(tag of token `t - 1` = `p - 1` and tag of token `t` = `c`), where `p` is a row of
    /// the transition table (0 = the sentence start, only for `t` = 0).
    fn edge(&self, t: usize, p: usize, c: usize, emissions: &[Vec<f64>], tr: &[f64]) -> f64 {
        let nt = emissions[0].len();
        if t == 0 {
            return if p == 0 { self.node(0, c) } else { 0.0 };
        }
        if p == 0 || !allowed(Some(p - 1), c) {
            return 0.0;
        }
        Self::prob(
            self.alpha[t - 1][p - 1] + tr[p * nt + c] + emissions[t][c] + self.beta[t][c]
                - self.log_z,
        )
    }

    /// Every token's marginal probability of every tag.
    fn marginals(&self) -> Vec<Vec<f64>> {
        (0..self.alpha.len())
            .map(|t| (0..self.alpha[t].len()).map(|y| self.node(t, y)).collect())
            .collect()
    }
}

/// Stochastic gradient ascent with L2 decay by a shared scale factor (the true weights are
/// `w × scale`), so each step only touches the weights of the sentence's features.
struct Sgd {
    w: Vec<f64>,
    scale: f64,
}

impl Sgd {
    fn new(n: usize) -> Sgd {
        Sgd {
            w: vec![0.0; n],
            scale: 1.0,
        }
    }

    fn decay(&mut self, rate: f64) {
        self.scale *= 1.0 - rate.min(0.5);
        if self.scale < 1e-6 {
            for x in &mut self.w {
                *x *= self.scale;
            }
            self.scale = 1.0;
        }
    }

    fn add(&mut self, i: usize, delta: f64) {
        self.w[i] += delta / self.scale;
    }

    /// The current (emission, transition) weights.
    fn current(&self, ne: usize) -> (Vec<f64>, Vec<f64>) {
        let w: Vec<f64> = self.w.iter().map(|x| x * self.scale).collect();
        let t = w[ne..].to_vec();
        let mut e = w;
        e.truncate(ne);
        (e, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(@tag text)` markup → (plain sentence, spans), character offsets.
    fn parse(line: &str) -> (String, Vec<Span>) {
        let mut out = String::new();
        let mut spans = Vec::new();
        let mut rest = line;
        while let Some(i) = rest.find("(@") {
            out.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let close = after.find(')').expect("closing paren");
            let inner = &after[..close];
            let (tag, value) = inner.split_once(' ').expect("tag and value");
            let start = out.chars().count();
            out.push_str(value);
            spans.push(Span {
                char_start: start,
                char_end: start + value.chars().count(),
                tag: tag.to_string(),
            });
            rest = &after[close + 1..];
        }
        out.push_str(rest);
        (out, spans)
    }

    fn train(lines: &[&str], lang: Lang) -> Tagger {
        let parsed: Vec<(String, Vec<Span>)> = lines.iter().map(|l| parse(l)).collect();
        let examples: Vec<(&str, Vec<Span>)> = parsed
            .iter()
            .map(|(s, spans)| (s.as_str(), spans.clone()))
            .collect();
        Tagger::train(&examples, lang)
    }

    /// (tag, text) of each predicted span.
    fn found(t: &Tagger, text: &str) -> Vec<(String, String)> {
        let chars: Vec<char> = text.chars().collect();
        t.predict(text)
            .into_iter()
            .map(|x| {
                assert!(x.score > 0.0 && x.score <= 1.0, "score {}", x.score);
                (
                    x.span.tag,
                    chars[x.span.char_start..x.span.char_end].iter().collect(),
                )
            })
            .collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    const EN: &[&str] = &[
        "I want to fly to (@city:dest Bandung)",
        "book a flight to (@city:dest Jakarta) please",
        "a ticket to (@city:dest Surabaya) for tomorrow",
        "I need to go to (@city:dest Medan)",
        "fly me to (@city:dest Tokyo)",
        "from (@city:origin Jakarta) to (@city:dest Bali)",
        "flights from (@city:origin Bandung) to (@city:dest Singapore) next week",
        "I am leaving from (@city:origin Yogyakarta) to (@city:dest Kuala Lumpur)",
        "departing from (@city:origin London) to (@city:dest Paris) please",
        "one ticket from (@city:origin Surabaya) to (@city:dest Medan)",
        "book a flight to (@city:dest New York) for two",
        "hello there",
        "thank you very much",
        "what is the weather like today",
        "I want to talk to a human",
        "cancel my booking please",
    ];

    const ID: &[&str] = &[
        "saya mau ke (@city:dest Bandung)",
        "tiket ke (@city:dest Jakarta) untuk besok",
        "pesan tiket pesawat ke (@city:dest Surabaya) ya",
        "aku mau pergi ke (@city:dest Medan)",
        "tolong pesankan tiket ke (@city:dest Bali)",
        "dari (@city:origin Jakarta) ke (@city:dest Yogyakarta)",
        "tiket dari (@city:origin Bandung) ke (@city:dest Denpasar) besok pagi",
        "berangkat dari (@city:origin Medan) ke (@city:dest Batam)",
        "saya dari (@city:origin Surabaya) mau ke (@city:dest Malang)",
        "penerbangan dari (@city:origin Semarang) ke (@city:dest Jakarta) hari ini",
        "mau ke (@city:dest Kuala Lumpur) dong",
        "halo selamat pagi",
        "terima kasih banyak",
        "saya mau batalkan pesanan",
        "berapa harganya",
    ];

    #[test]
    fn learns_destinations_in_english_and_generalises() {
        let t = train(EN, Lang::En);
        assert_eq!(
            found(&t, "I want to fly to Makassar"),
            pairs(&[("city:dest", "Makassar")])
        );
        assert_eq!(
            found(&t, "book a flight to Lombok please"),
            pairs(&[("city:dest", "Lombok")])
        );
        // Labels from context: from X to Y, with two cities it never saw.
        assert_eq!(
            found(&t, "from Palembang to Pontianak"),
            pairs(&[("city:origin", "Palembang"), ("city:dest", "Pontianak")])
        );
        assert!(found(&t, "thank you so much").is_empty());
        assert!(found(&t, "hello").is_empty());
    }

    #[test]
    fn learns_destinations_in_indonesian_and_generalises() {
        let t = train(ID, Lang::Id);
        assert_eq!(
            found(&t, "saya mau ke Makassar"),
            pairs(&[("city:dest", "Makassar")])
        );
        assert_eq!(
            found(&t, "tiket dari Palembang ke Pontianak"),
            pairs(&[("city:origin", "Palembang"), ("city:dest", "Pontianak")])
        );
        assert!(found(&t, "terima kasih ya").is_empty());
        // A multi-token span seen in training.
        assert_eq!(
            found(&t, "mau ke Kuala Lumpur"),
            pairs(&[("city:dest", "Kuala Lumpur")])
        );
    }

    #[test]
    fn offsets_are_characters() {
        let t = train(ID, Lang::Id);
        let text = "Ké 😀 saya mau ke Bandung";
        let p = t.predict(text);
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].span.char_start, p[0].span.char_end), (17, 24));
    }

    #[test]
    fn training_is_deterministic_and_survives_serde() {
        let a = train(EN, Lang::En);
        let b = train(EN, Lang::En);
        let ja = serde_json::to_string(&a).unwrap();
        assert_eq!(ja, serde_json::to_string(&b).unwrap());
        let back: Tagger = serde_json::from_str(&ja).unwrap();
        let text = "from Palembang to Pontianak";
        assert_eq!(back.predict(text), a.predict(text));
        assert_eq!(back.span_tags(), ["city:dest", "city:origin"]);
    }

    #[test]
    fn no_spans_without_training_spans() {
        let t = train(&["hello there", "thank you"], Lang::En);
        assert!(t.predict("fly to Bandung").is_empty());
        let t = Tagger::train(&[], Lang::En);
        assert!(t.predict("fly to Bandung").is_empty());
        assert!(t.predict("").is_empty());
    }

    #[test]
    fn scores_are_probabilities_not_saturated() {
        let t = train(EN, Lang::En);
        let p = t.predict("I want to fly to Makassar");
        assert!(p[0].score > 0.8 && p[0].score < 1.0, "{p:?}");
        // A context the examples never showed is less certain than a familiar one.
        let q = t.predict("from Jakarta");
        assert!(q.iter().all(|x| x.score < p[0].score), "{q:?}");
    }

    #[test]
    fn overlapping_training_spans_keep_the_first() {
        // `Pizza (@item-1 bbq dua) …` with `(@item-1.qty dua)` inside: one BIO layer.
        let text = "pizza bbq dua ya";
        let spans = vec![
            Span {
                char_start: 6,
                char_end: 13,
                tag: "item".into(),
            },
            Span {
                char_start: 10,
                char_end: 13,
                tag: "qty".into(),
            },
        ];
        let tokens = text::tokenize(text);
        let tags = ["item".to_string(), "qty".to_string()];
        // O, B-item, I-item, O (indexes: O=0, B-item=1, I-item=2, B-qty=3, I-qty=4).
        assert_eq!(gold_tags(&tokens, &spans, &tags), [0, 1, 2, 0]);
        let t = Tagger::train(&[(text, spans)], Lang::Id);
        assert_eq!(t.span_tags(), ["item", "qty"]);
        assert!(t.predict(text).iter().all(|p| p.span.tag == "item"));
    }

    #[test]
    fn debug_lists_tokens_tags_and_scores() {
        let t = train(EN, Lang::En);
        let d = t.debug("fly to Makassar");
        let tokens = d["tokens"].as_array().unwrap();
        assert_eq!(tokens.len(), 3);
        assert_eq!(tokens[2]["text"], "Makassar");
        assert_eq!(tokens[2]["tag"], "B-city:dest");
        assert_eq!(tokens[0]["tag"], "O");
        let p = tokens[2]["score"].as_f64().unwrap();
        assert!(p > 0.5 && p <= 1.0);
        assert!(
            tokens[2]["features"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!("w-1=to"))
        );
        assert_eq!(d["spans"][0]["value"], "Makassar");
    }

    mod fuzz {
        use super::super::*;
        use super::{EN, train};
        use proptest::prelude::*;
        use std::sync::LazyLock;

        static MODEL: LazyLock<Tagger> = LazyLock::new(|| train(EN, Lang::En));

        proptest! {
            #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

            #[test]
            fn spans_are_valid_for_any_text(
                words in prop::collection::vec(
                    prop_oneof![
                        prop::sample::select(vec![
                            "to", "from", "fly", "Bandung", "Kuala", "Lumpur", "😀", "Ké", ",", "İ",
                        ])
                        .prop_map(String::from),
                        "[a-zA-Z]{1,8}",
                    ],
                    0..12,
                ),
            ) {
                let text = words.join(" ");
                let chars = text.chars().count();
                let mut last = 0;
                for t in MODEL.predict(&text) {
                    prop_assert!(t.span.char_start >= last && t.span.char_start < t.span.char_end);
                    prop_assert!(t.span.char_end <= chars);
                    prop_assert!(t.score > 0.0 && t.score <= 1.0);
                    last = t.span.char_end;
                }
                prop_assert!(MODEL.debug(&text)["tokens"].is_array());
            }
        }
    }
}
