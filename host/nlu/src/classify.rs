//! Trait entities: a trained sentence classifier with calibrated scores.
//!
//! **The model** is a multinomial logistic regression (softmax) over sparse, hashed features
//! of the sentence: lower-cased tokens, their stems ([`text::stem`]), stem bigrams (with
//! sentence-start and -end markers) and character n-grams taken inside each word padded as
//! `<word>`. Each group is L2-normalised and weighted, the whole vector is normalised
//! again, and a constant bias feature is added (IDF weighting is available, off by default:
//! it does not help in cross-validation). Counter-examples (label `None`) train an implicit
//! "none" class (class 0) that takes probability mass but is never reported.
//!
//! **Training** is AdaGrad SGD on the cross-entropy, label-balanced (every label weighs the
//! same in the loss, so a label with 2 examples is not drowned by one with 20; the
//! counter-examples keep their share, so the "none" prior is the data's), with an L2 penalty applied to the weights a step touches, over a seeded shuffle
//! (the same data always gives the same model, bit for bit). A step updates only the classes
//! whose gradient is not negligible (|p − y| ≥ `min_grad` = 0.03): a class the sentence is
//! already confidently in, or confidently not in, is left alone. That acts as a margin,
//! keeps many-label models sparse (a feature only gets weights for the classes it competed
//! for) and makes steps fast. The number of passes shrinks as the data grows
//! (`updates / n`, clamped to `min_epochs..=max_epochs`).
//!
//! **Calibration**: the softmax temperature is fitted on out-of-fold predictions (3-fold
//! cross-validation on the training data, or one 25 % holdout above 3,000 sentences) by
//! minimising the negative log-likelihood, so a score of 0.8 means right about 80 % of the
//! time on data like the training data. Tiny sets (fewer than 12 examples) keep T = 1.
//!
//! **Storage**: after training, weights below `prune` × the largest weight are dropped and the
//! rest quantised to 16 bits; the model serialises as a few scalars plus one base64 string of
//! varint-packed (feature, class, weight) rows (see the `nlu-bench` figures for bytes per
//! 1,000 training sentences).
//!
//! **Cost**: features per sentence ≈ 30 per word; prediction is one sparse dot product per
//! feature row (binary search over the sorted feature ids), well under a millisecond for
//! 150 labels. Training is O(passes × Σ features × active classes), plus the calibration
//! folds (≈ 2× more).
//!
//! **Limits**: a bag of words and n-grams, no word embeddings: it knows only words (or word
//! pieces) it has seen in training, so paraphrases with unseen vocabulary score low. Word
//! order beyond bigrams is ignored. Hyperparameters ([`Config::default`]) were chosen by
//! repeated 5-fold cross-validation on the training sentences (only) of the Braun et al.
//! 2017 corpora, with the feature rows also scored on many labels (CLINC150's validation
//! sentences, `nlu-bench --clinc`), and the sparsity settings on a synthetic 150-label set
//! (`nlu-bench --cv` prints those tables; docs/nl-studio.md tells how the current ones were
//! chosen). Scores are calibrated on data like the training data; sentences unlike all of
//! it get whatever the bias and shared n-grams give them, so counter-examples in training
//! are what teaches a trait to say "none of these".

use super::Lang;
use super::SplitMix;
use super::text::{self, Token};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// One training sentence of a trait: its label, or `None` for a counter-example (a sentence
/// that carries none of the trait's labels).
pub struct Example<'a> {
    pub text: &'a str,
    pub label: Option<&'a str>,
}

/// The features a model extracts (stored with the model: prediction must extract the same).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FeatureConfig {
    /// Lower-cased tokens (punctuation included).
    pub words: bool,
    /// Stems of the word tokens.
    pub stems: bool,
    /// Stem bigrams, with `<s>`/`</s>` at the ends.
    pub bigrams: bool,
    /// Character n-grams of `<word>`, lengths `char_min..=char_max` (none if `char_max` is 0).
    pub char_min: usize,
    pub char_max: usize,
    /// Weight of the character n-gram group against each word group (default 2.0: the best
    /// row of the Braun training-sentence CV and of CLINC150's validation set). Cost: a
    /// larger weight leaves more classes unsure for longer in training, so more weights are
    /// updated per step (about twice the training time of 1.0 on 150 labels). Models store
    /// their own value, so a change of default changes only new trainings.
    pub char_weight: f32,
    /// Weight features by their inverse document frequency in the training sentences,
    /// ln((1 + n) / (1 + df)) + 1 (unseen features: df = 0).
    #[serde(default)]
    pub idf: bool,
}

/// Training hyperparameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub features: FeatureConfig,
    /// L2 penalty per touched weight and step.
    pub l2: f32,
    /// AdaGrad learning rate.
    pub rate: f32,
    /// Passes = clamp(updates / examples, min_epochs, max_epochs). Default 10,000: sets
    /// under 250 sentences still get `max_epochs`; 1,000 sentences get 10 passes.
    pub updates: usize,
    pub min_epochs: usize,
    pub max_epochs: usize,
    /// Weights smaller than `prune` × the largest are dropped from the stored model.
    pub prune: f32,
    /// Fit the softmax temperature on out-of-fold predictions.
    pub calibrate: bool,
    /// Weight labelled examples by labelled / (labels × examples of their label), so that
    /// every label weighs the same in the loss; counter-examples keep weight 1.
    pub balanced: bool,
    /// A step updates the classes whose gradient |p − y| is at least this: with many labels,
    /// a feature's weights stay zero for the classes it never competed with (sparse models,
    /// fast steps); with few labels every class is updated, as in plain SGD.
    pub min_grad: f32,
    /// Average the weights of this many runs over different shuffles (1: a single run).
    pub ensemble: usize,
    /// Seed of the example shuffles.
    pub seed: u64,
    /// Train on each label's own name as one more sentence of that label (`DeleteAccount`,
    /// `delete_account` and `delete account` all read as "delete account").
    pub label_names: bool,
    /// Feature dropout while training: each pass drops each feature of an example with this
    /// probability and scales the rest by 1 / (1 − p), so that no single word or n-gram
    /// carries a label alone (0: off).
    pub dropout: f32,
    /// One-vs-rest: each class's logit is trained as its own logistic regression (sigmoid
    /// cross-entropy) instead of one softmax over the classes; prediction is unchanged (the
    /// calibrated softmax of the logits).
    pub ovr: bool,
}

impl Default for Config {
    /// The defaults chosen by `nlu-bench --cv` (see the module docs).
    fn default() -> Self {
        Config {
            features: FeatureConfig {
                words: true,
                stems: true,
                bigrams: true,
                char_min: 2,
                char_max: 5,
                char_weight: 2.0,
                idf: false,
            },
            l2: 1e-4,
            rate: 0.2,
            updates: 10_000,
            min_epochs: 4,
            max_epochs: 40,
            prune: 0.05,
            calibrate: true,
            balanced: true,
            min_grad: 0.03,
            ensemble: 1,
            seed: 0x5eed,
            label_names: false,
            dropout: 0.0,
            ovr: false,
        }
    }
}

/// A trained trait classifier. Class 0 is the implicit "none" class; class `i + 1` is
/// `labels[i]`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(into = "Packed", try_from = "Packed")]
pub struct TraitModel {
    lang: Lang,
    labels: Vec<String>,
    features: FeatureConfig,
    temperature: f32,
    /// Sorted feature ids; row `r`'s weights are `cls/w[offs[r]..offs[r + 1]]`.
    ids: Vec<u32>,
    /// With IDF weighting: the IDF of each row (all training features are kept as rows), and
    /// that of features never seen in training.
    idf: Vec<f32>,
    idf_unseen: f32,
    offs: Vec<u32>,
    cls: Vec<u16>,
    w: Vec<f32>,
}

impl TraitModel {
    /// Trains on `examples`. `labels` are the entity's declared labels (may be empty: then the
    /// labels seen in the examples). Fails with a clear message when there is nothing to learn.
    pub fn train(
        examples: &[Example<'_>],
        labels: &[String],
        lang: Lang,
    ) -> Result<TraitModel, String> {
        Self::train_with(examples, labels, lang, &Config::default())
    }

    /// [`TraitModel::train`] with explicit hyperparameters. Labels of examples that are not
    /// among `labels` are added (after the declared ones).
    pub fn train_with(
        examples: &[Example<'_>],
        labels: &[String],
        lang: Lang,
        cfg: &Config,
    ) -> Result<TraitModel, String> {
        check_examples(examples)?;
        let classes = class_names(labels, examples)?;
        let k = classes.len() + 1;
        let (mut xs, idf_table) = example_features(examples, lang, cfg);
        let mut ys: Vec<usize> = examples
            .iter()
            .map(|e| {
                e.label
                    .map_or(0, |l| 1 + classes.iter().position(|c| c == l).unwrap())
            })
            .collect();
        if cfg.label_names {
            add_label_names(&classes, lang, cfg, &mut xs, &mut ys);
        }
        let temperature = if cfg.calibrate && xs.len() >= 12 {
            fit_temperature(&xs, &ys, k, cfg)
        } else {
            1.0
        };
        let (ids, dense) = fit(&xs, &ys, k, cfg, None);
        let rows = pruned_rows(&ids, &dense, k, cfg);
        // IDF of the kept rows (training features are all rows when IDF is on).
        let idf: Vec<f32> = if cfg.features.idf {
            rows.ids
                .iter()
                .map(|id| idf_table.idf[idf_table.ids.binary_search(id).unwrap()])
                .collect()
        } else {
            Vec::new()
        };
        let model = TraitModel {
            lang,
            labels: classes,
            features: cfg.features.clone(),
            temperature,
            ids: rows.ids,
            idf,
            idf_unseen: idf_table.unseen,
            offs: rows.offs,
            cls: rows.cls,
            w: rows.w,
        };
        // Store what is served: round-trip through the 16-bit quantisation now, so a model
        // predicts the same before and after storage.
        TraitModel::try_from(Packed::from(model))
    }

    /// The labels the model knows (declared first, then those only seen in examples).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Labels with calibrated scores in (0, 1], best first; counter-example mass is not listed.
    pub fn predict(&self, text: &str) -> Vec<(String, f64)> {
        let (_, x) = extract(text, self.lang, &self.features, None, &|id| self.idf_of(id));
        let p = self.probs(&x);
        let mut out: Vec<(String, f64)> = self
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.clone(), p[i + 1]))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1));
        out
    }

    fn idf_of(&self, id: u32) -> f32 {
        if self.idf.is_empty() {
            return 1.0;
        }
        match self.ids.binary_search(&id) {
            Ok(r) => self.idf[r],
            Err(_) => self.idf_unseen,
        }
    }

    fn logits(&self, x: &[(u32, f32)]) -> Vec<f32> {
        let mut z = vec![0f32; self.labels.len() + 1];
        for &(id, v) in x {
            if let Ok(r) = self.ids.binary_search(&id) {
                let (a, b) = (self.offs[r] as usize, self.offs[r + 1] as usize);
                for (c, w) in self.cls[a..b].iter().zip(&self.w[a..b]) {
                    z[*c as usize] += v * w;
                }
            }
        }
        z
    }

    fn probs(&self, x: &[(u32, f32)]) -> Vec<f64> {
        softmax(&self.logits(x), self.temperature)
    }

    /// Tokens, stems, the active features with their weights for the top label, and every
    /// label's score (the "none" class included), for the debug endpoint.
    pub fn debug(&self, text: &str) -> serde_json::Value {
        let mut names = Vec::new();
        let (tokens, x) = extract(text, self.lang, &self.features, Some(&mut names), &|id| {
            self.idf_of(id)
        });
        let p = self.probs(&x);
        let top = (0..p.len())
            .max_by(|&a, &b| p[a].total_cmp(&p[b]))
            .unwrap_or(0);
        let class_name = |c: usize| {
            if c == 0 {
                "(none)".to_string()
            } else {
                self.labels[c - 1].clone()
            }
        };
        let mut feats: Vec<(String, f32, f32)> = x
            .iter()
            .map(|&(id, v)| {
                let w = self.ids.binary_search(&id).ok().and_then(|r| {
                    let (a, b) = (self.offs[r] as usize, self.offs[r + 1] as usize);
                    (a..b)
                        .find(|&j| self.cls[j] as usize == top)
                        .map(|j| self.w[j])
                });
                let name = names
                    .iter()
                    .filter(|(i, _)| *i == id)
                    .map(|(_, n)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(" | ");
                (name, v, w.unwrap_or(0.0))
            })
            .collect();
        feats.sort_by(|a, b| (b.1 * b.2).abs().total_cmp(&(a.1 * a.2).abs()));
        let mut scores: Vec<(String, f64)> = (0..p.len()).map(|c| (class_name(c), p[c])).collect();
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        json!({
            "tokens": tokens.iter().map(|t| t.norm.clone()).collect::<Vec<_>>(),
            "stems": tokens.iter().filter(|t| t.is_word())
                .map(|t| text::stem(&t.norm, self.lang)).collect::<Vec<_>>(),
            "top": class_name(top),
            "temperature": self.temperature,
            "features": feats.iter().map(|(n, v, w)| json!({
                "feature": n, "value": v, "weight": w, "contribution": v * w,
            })).collect::<Vec<_>>(),
            "scores": scores.iter().map(|(l, s)| json!({"label": l, "score": s}))
                .collect::<Vec<_>>(),
        })
    }
}

fn softmax(z: &[f32], t: f32) -> Vec<f64> {
    let m = z.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let e: Vec<f64> = z
        .iter()
        .map(|&x| ((x as f64 - m) / t as f64).exp())
        .collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|x| x / s).collect()
}

// ---- features ----------------------------------------------------------------------------

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

fn fold(h: u64) -> u32 {
    (h ^ (h >> 32)) as u32
}

/// Feature id of `tag` + `s` (stable across versions: FNV-1a, folded to 32 bits).
fn fid(tag: u8, s: &str) -> u32 {
    fold(fnv(fnv(FNV_OFFSET, &[tag]), s.as_bytes()))
}

const BIAS: u8 = b'0';

/// The inverse document frequency of a feature id (1 when IDF weighting is off).
type Idf<'a> = &'a dyn Fn(u32) -> f32;

fn no_idf(_: u32) -> f32 {
    1.0
}

/// One group of counted feature ids, L2-normalised to `weight`.
fn push_group(out: &mut Vec<(u32, f32)>, mut ids: Vec<u32>, weight: f32, idf: Idf<'_>) {
    if ids.is_empty() || weight <= 0.0 {
        return;
    }
    ids.sort_unstable();
    let start = out.len();
    for id in ids {
        let len = out.len();
        match out.last_mut() {
            Some(last) if len > start && last.0 == id => last.1 += 1.0,
            _ => out.push((id, 1.0)),
        }
    }
    for x in &mut out[start..] {
        x.1 *= idf(x.0);
    }
    let norm = out[start..].iter().map(|x| x.1 * x.1).sum::<f32>().sqrt();
    for x in &mut out[start..] {
        x.1 *= weight / norm;
    }
}

/// Records a feature's readable name (for the debug endpoint); the name is built only when
/// asked for.
type Namer<'a> = &'a mut dyn FnMut(u32, &dyn Fn() -> String);

/// The tokens of `text` and its feature vector: (id, value) sorted by id, unit L2 norm plus
/// the bias feature. With `names`, also (id, readable name) of every feature.
fn extract(
    text: &str,
    lang: Lang,
    f: &FeatureConfig,
    mut names: Option<&mut Vec<(u32, String)>>,
    idf: Idf<'_>,
) -> (Vec<Token>, Vec<(u32, f32)>) {
    let tokens = text::tokenize(text);
    let mut out: Vec<(u32, f32)> = Vec::with_capacity(tokens.len() * 32);
    let mut name = |id: u32, n: &dyn Fn() -> String| {
        if let Some(v) = names.as_deref_mut() {
            v.push((id, n()));
        }
    };
    if f.words {
        let ids = tokens
            .iter()
            .map(|t| {
                let id = fid(b'w', &t.norm);
                name(id, &|| format!("word:{}", t.norm));
                id
            })
            .collect();
        push_group(&mut out, ids, 1.0, idf);
    }
    let words: Vec<&Token> = tokens.iter().filter(|t| t.is_word()).collect();
    if f.stems || f.bigrams {
        push_stem_groups(&mut out, &words, lang, f, &mut name, idf);
    }
    if f.char_max > 0 {
        push_group(
            &mut out,
            char_ngrams(&words, f, &mut name),
            f.char_weight,
            idf,
        );
    }
    let bias = fid(BIAS, "bias");
    let merged = merged_with_bias(out, bias);
    name(bias, &|| "bias".into());
    (tokens, merged)
}

/// The stem group and the stem-bigram group (with `<s>`/`</s>` at the ends), as configured.
fn push_stem_groups(
    out: &mut Vec<(u32, f32)>,
    words: &[&Token],
    lang: Lang,
    f: &FeatureConfig,
    name: Namer<'_>,
    idf: Idf<'_>,
) {
    let stems: Vec<String> = words.iter().map(|t| text::stem(&t.norm, lang)).collect();
    if f.stems {
        let ids = stems
            .iter()
            .map(|s| {
                let id = fid(b's', s);
                name(id, &|| format!("stem:{s}"));
                id
            })
            .collect();
        push_group(out, ids, 1.0, idf);
    }
    if f.bigrams {
        let seq: Vec<&str> = std::iter::once("<s>")
            .chain(stems.iter().map(String::as_str))
            .chain(std::iter::once("</s>"))
            .collect();
        let ids = seq
            .windows(2)
            .map(|p| {
                let s = format!("{} {}", p[0], p[1]);
                let id = fid(b'b', &s);
                name(id, &|| format!("bigram:{s}"));
                id
            })
            .collect();
        push_group(out, ids, 1.0, idf);
    }
}

/// The ids of the character n-grams of `<word>` for every word, lengths
/// `char_min..=char_max`.
fn char_ngrams(words: &[&Token], f: &FeatureConfig, name: Namer<'_>) -> Vec<u32> {
    let mut ids = Vec::new();
    let mut buf = [0u8; 4];
    for t in words {
        let chars: Vec<char> = std::iter::once('<')
            .chain(t.norm.chars())
            .chain(std::iter::once('>'))
            .collect();
        for i in 0..chars.len() {
            let mut h = fnv(FNV_OFFSET, b"c");
            for n in 1..=f.char_max.min(chars.len() - i) {
                h = fnv(h, chars[i + n - 1].encode_utf8(&mut buf).as_bytes());
                if n >= f.char_min.max(1) {
                    let id = fold(h);
                    ids.push(id);
                    name(id, &|| {
                        format!("chars:{}", chars[i..i + n].iter().collect::<String>())
                    });
                }
            }
        }
    }
    ids
}

/// One vector from the groups: ids shared by groups (hash collisions) merged, normalised,
/// and the `bias` feature added.
fn merged_with_bias(mut out: Vec<(u32, f32)>, bias: u32) -> Vec<(u32, f32)> {
    out.sort_unstable_by_key(|x| x.0);
    let mut merged: Vec<(u32, f32)> = Vec::with_capacity(out.len() + 1);
    for (id, v) in out {
        match merged.last_mut() {
            Some(last) if last.0 == id => last.1 += v,
            _ => merged.push((id, v)),
        }
    }
    let norm = merged.iter().map(|x| x.1 * x.1).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut merged {
            x.1 /= norm;
        }
    }
    match merged.binary_search_by_key(&bias, |x| x.0) {
        Ok(i) => merged[i].1 += 1.0,
        Err(i) => merged.insert(i, (bias, 1.0)),
    }
    merged
}

// ---- training ----------------------------------------------------------------------------

/// Refuses training sets with nothing to learn: no sentences, or no labelled sentence.
fn check_examples(examples: &[Example<'_>]) -> Result<(), String> {
    if examples.is_empty() {
        return Err("cannot train a trait classifier without training sentences".into());
    }
    if examples.iter().all(|e| e.label.is_none()) {
        return Err(format!(
            "cannot train a trait classifier from counter-examples only: none of the {} \
             training sentences has a label",
            examples.len()
        ));
    }
    Ok(())
}

/// The classes' labels: the declared ones, then those only seen in examples, each once.
fn class_names(labels: &[String], examples: &[Example<'_>]) -> Result<Vec<String>, String> {
    let mut classes: Vec<String> = Vec::new();
    for l in labels
        .iter()
        .map(String::as_str)
        .chain(examples.iter().filter_map(|e| e.label))
    {
        if !classes.iter().any(|c| c == l) {
            classes.push(l.to_string());
        }
    }
    if classes.len() + 1 > u16::MAX as usize {
        return Err(format!("too many labels ({})", classes.len()));
    }
    Ok(classes)
}

/// The IDF of the training features: sorted feature ids with their IDF, and the IDF of an
/// unseen feature (empty, and 1, when IDF weighting is off).
struct IdfTable {
    ids: Vec<u32>,
    idf: Vec<f32>,
    unseen: f32,
}

impl IdfTable {
    /// ln((1 + n) / (1 + df)) + 1 of every feature of the `n` vectors `xs`.
    fn of_documents(xs: &[Vec<(u32, f32)>]) -> IdfTable {
        let mut df: Vec<u32> = xs.iter().flat_map(|x| x.iter().map(|f| f.0)).collect();
        df.sort_unstable();
        let n = xs.len() as f32;
        let unseen = ((1.0 + n) / 1.0).ln() + 1.0;
        let (mut ids, mut idf) = (Vec::new(), Vec::new());
        for chunk in df.chunk_by(|a, b| a == b) {
            ids.push(chunk[0]);
            idf.push(((1.0 + n) / (1.0 + chunk.len() as f32)).ln() + 1.0);
        }
        IdfTable { ids, idf, unseen }
    }

    /// The IDF of a feature id.
    fn lookup(&self, id: u32) -> f32 {
        match self.ids.binary_search(&id) {
            Ok(i) => self.idf[i],
            Err(_) => self.unseen,
        }
    }
}

/// The examples' feature vectors and, with IDF weighting, the IDF table they are weighted by.
fn example_features(
    examples: &[Example<'_>],
    lang: Lang,
    cfg: &Config,
) -> (Vec<Vec<(u32, f32)>>, IdfTable) {
    let mut xs: Vec<Vec<(u32, f32)>> = examples
        .iter()
        .map(|e| extract(e.text, lang, &cfg.features, None, &no_idf).1)
        .collect();
    let mut table = IdfTable {
        ids: Vec::new(),
        idf: Vec::new(),
        unseen: 1.0,
    };
    if cfg.features.idf {
        table = IdfTable::of_documents(&xs);
        let lookup = |id: u32| table.lookup(id);
        xs = examples
            .iter()
            .map(|e| extract(e.text, lang, &cfg.features, None, &lookup).1)
            .collect();
    }
    (xs, table)
}

/// Adds each label's name, as words, as one more sentence of that label.
fn add_label_names(
    classes: &[String],
    lang: Lang,
    cfg: &Config,
    xs: &mut Vec<Vec<(u32, f32)>>,
    ys: &mut Vec<usize>,
) {
    for (i, c) in classes.iter().enumerate() {
        let name = label_words(c);
        if !name.trim().is_empty() {
            xs.push(extract(&name, lang, &cfg.features, None, &no_idf).1);
            ys.push(i + 1);
        }
    }
}

/// The stored weights: row `r` (feature `ids[r]`) holds classes `cls[offs[r]..offs[r + 1]]`
/// with weights `w[offs[r]..offs[r + 1]]`.
struct SparseRows {
    ids: Vec<u32>,
    offs: Vec<u32>,
    cls: Vec<u16>,
    w: Vec<f32>,
}

/// The dense rows of `k` weights without the weights under `cfg.prune` × the largest; rows
/// left empty are dropped, unless IDF is on (its table keeps every training feature).
fn pruned_rows(ids: &[u32], dense: &[f32], k: usize, cfg: &Config) -> SparseRows {
    let max = dense.iter().fold(0f32, |m, w| m.max(w.abs()));
    let cut = max * cfg.prune;
    let (mut offs, mut cls, mut w) = (vec![0u32], Vec::new(), Vec::new());
    let mut kept = Vec::new();
    for (r, id) in ids.iter().enumerate() {
        let row = &dense[r * k..(r + 1) * k];
        let before = cls.len();
        for (c, &x) in row.iter().enumerate() {
            if x != 0.0 && x.abs() >= cut {
                cls.push(c as u16);
                w.push(x);
            }
        }
        if cls.len() > before || cfg.features.idf {
            kept.push(*id);
            offs.push(cls.len() as u32);
        }
    }
    SparseRows {
        ids: kept,
        offs,
        cls,
        w,
    }
}

/// A label's name as words: `DeleteAccount`, `delete_account` and `delete-account` all give
/// "delete account".
fn label_words(label: &str) -> String {
    let mut out = String::with_capacity(label.len() + 4);
    let mut prev_lower = false;
    for c in label.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                out.push(' ');
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            out.extend(c.to_lowercase());
        } else {
            out.push(' ');
            prev_lower = false;
        }
    }
    out
}

/// Trains dense weights on the examples `subset` (all if `None`): returns the sorted feature
/// ids and their rows of `k` weights; with `cfg.ensemble` > 1, the average of the weights of
/// that many runs over different shuffles.
fn fit(
    xs: &[Vec<(u32, f32)>],
    ys: &[usize],
    k: usize,
    cfg: &Config,
    subset: Option<&[usize]>,
) -> (Vec<u32>, Vec<f32>) {
    let runs = cfg.ensemble.max(1);
    let (ids, mut w) = fit_once(xs, ys, k, cfg, subset, cfg.seed);
    for r in 1..runs {
        let (_, w2) = fit_once(xs, ys, k, cfg, subset, cfg.seed.wrapping_add(r as u64));
        w.iter_mut().zip(w2).for_each(|(a, b)| *a += b);
    }
    if runs > 1 {
        w.iter_mut().for_each(|a| *a /= runs as f32);
    }
    (ids, w)
}

/// One training run over the examples `subset` (all if `None`) with shuffles seeded by
/// `seed`: AdaGrad on the (class-weighted) cross-entropy, softmax or one-vs-rest.
fn fit_once(
    xs: &[Vec<(u32, f32)>],
    ys: &[usize],
    k: usize,
    cfg: &Config,
    subset: Option<&[usize]>,
    seed: u64,
) -> (Vec<u32>, Vec<f32>) {
    let all: Vec<usize>;
    let subset = match subset {
        Some(s) => s,
        None => {
            all = (0..xs.len()).collect();
            &all
        }
    };
    let (ids, rows) = indexed_rows(xs, subset);
    let n = rows.len();
    let class_weight = class_weights(ys, subset, k, cfg.balanced);
    let passes = (cfg.updates / n.max(1)).clamp(cfg.min_epochs, cfg.max_epochs);
    let mut w = vec![0f32; ids.len() * k];
    let mut g2 = vec![1e-8f32; ids.len() * k];
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix(seed);
    let mut z = vec![0f32; k];
    let mut g = vec![0f32; k];
    let keep = 1.0 - cfg.dropout.clamp(0.0, 0.9);
    let mut kept: Vec<(usize, f32)> = Vec::new();
    for _ in 0..passes {
        rng.shuffle(&mut order);
        for &i in &order {
            let x = dropped_out(&rows[i], keep, &mut rng, &mut kept);
            class_outputs(x, &w, cfg.ovr, &mut z, &mut g);
            let y = ys[subset[i]];
            g[y] -= 1.0;
            if class_weight[y] != 1.0 {
                g.iter_mut().for_each(|gc| *gc *= class_weight[y]);
            }
            adagrad_step(x, &g, &mut w, &mut g2, cfg);
        }
    }
    (ids, w)
}

/// The sorted feature ids of the `subset` of examples, and each example's features as
/// (row of its id, value).
fn indexed_rows(xs: &[Vec<(u32, f32)>], subset: &[usize]) -> (Vec<u32>, Vec<Vec<(usize, f32)>>) {
    let mut ids: Vec<u32> = subset
        .iter()
        .flat_map(|&i| xs[i].iter().map(|x| x.0))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let rows: Vec<Vec<(usize, f32)>> = subset
        .iter()
        .map(|&i| {
            xs[i]
                .iter()
                .map(|&(id, v)| (ids.binary_search(&id).unwrap(), v))
                .collect()
        })
        .collect();
    (ids, rows)
}

/// The loss weight of each of the `k` classes: 1, or with `balanced` each label weighted
/// by labelled / (labels present × its examples).
fn class_weights(ys: &[usize], subset: &[usize], k: usize, balanced: bool) -> Vec<f32> {
    let mut per_class = vec![0usize; k];
    for &i in subset {
        per_class[ys[i]] += 1;
    }
    // Balancing is among the labels only: the labelled examples keep their total weight
    // against the counter-examples, whose share tells how often "none of these" happens.
    let present = per_class[1..].iter().filter(|&&c| c > 0).count();
    let labelled: usize = per_class[1..].iter().sum();
    per_class
        .iter()
        .enumerate()
        .map(|(class, &c)| {
            if balanced && class > 0 && c > 0 {
                labelled as f32 / (present * c) as f32
            } else {
                1.0
            }
        })
        .collect()
}

/// The example's features with feature dropout: each kept with probability `keep` and
/// scaled by 1 / `keep` (into `kept`); the row itself when dropout is off.
fn dropped_out<'r>(
    row: &'r [(usize, f32)],
    keep: f32,
    rng: &mut SplitMix,
    kept: &'r mut Vec<(usize, f32)>,
) -> &'r [(usize, f32)] {
    if keep < 1.0 {
        kept.clear();
        for &(r, v) in row {
            if rng.unit() < keep {
                kept.push((r, v / keep));
            }
        }
        kept
    } else {
        row
    }
}

/// The logits `z` of features `x` under weights `w` (rows of `z.len()` classes), and into
/// `g` each class's predicted probability: softmax, or one sigmoid per class with `ovr`.
fn class_outputs(x: &[(usize, f32)], w: &[f32], ovr: bool, z: &mut [f32], g: &mut [f32]) {
    let k = z.len();
    z.iter_mut().for_each(|v| *v = 0.0);
    for &(r, v) in x {
        for (zc, wc) in z.iter_mut().zip(&w[r * k..(r + 1) * k]) {
            *zc += v * wc;
        }
    }
    if ovr {
        for (gc, zc) in g.iter_mut().zip(z.iter()) {
            *gc = 1.0 / (1.0 + (-zc).exp());
        }
    } else {
        let m = z.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let mut s = 0.0;
        for (gc, zc) in g.iter_mut().zip(z.iter()) {
            *gc = (zc - m).exp();
            s += *gc;
        }
        for gc in g.iter_mut() {
            *gc /= s;
        }
    }
}

/// An AdaGrad step on the weights of the features `x`, for the classes whose gradient `g`
/// is at least `cfg.min_grad` (with the L2 penalty of each touched weight).
fn adagrad_step(x: &[(usize, f32)], g: &[f32], w: &mut [f32], g2: &mut [f32], cfg: &Config) {
    let k = g.len();
    let active: Vec<usize> = (0..k).filter(|&c| g[c].abs() >= cfg.min_grad).collect();
    for &(r, v) in x {
        for &c in &active {
            let j = r * k + c;
            let grad = g[c] * v + cfg.l2 * w[j];
            g2[j] += grad * grad;
            w[j] -= cfg.rate * grad / g2[j].sqrt();
        }
    }
}

/// The softmax temperature minimising the out-of-fold negative log-likelihood.
fn fit_temperature(xs: &[Vec<(u32, f32)>], ys: &[usize], k: usize, cfg: &Config) -> f32 {
    let n = xs.len();
    let mut order: Vec<usize> = (0..n).collect();
    SplitMix(cfg.seed ^ 0xca1b).shuffle(&mut order);
    // 3 folds, or a single 25 % holdout on large sets.
    let folds = 3;
    let rounds = if n > 3000 { 1 } else { folds };
    let held_out = |f: usize, pos: usize| {
        if rounds == 1 {
            pos.is_multiple_of(4)
        } else {
            pos % folds == f
        }
    };
    let mut oof: Vec<(Vec<f32>, usize)> = Vec::with_capacity(n);
    for f in 0..rounds {
        let train: Vec<usize> = (0..n)
            .filter(|&p| !held_out(f, p))
            .map(|p| order[p])
            .collect();
        let (ids, w) = fit(xs, ys, k, cfg, Some(&train));
        for p in (0..n).filter(|&p| held_out(f, p)) {
            let i = order[p];
            let mut z = vec![0f32; k];
            for &(id, v) in &xs[i] {
                if let Ok(r) = ids.binary_search(&id) {
                    for (zc, wc) in z.iter_mut().zip(&w[r * k..(r + 1) * k]) {
                        *zc += v * wc;
                    }
                }
            }
            oof.push((z, ys[i]));
        }
    }
    let nll = |t: f32| -> f64 {
        oof.iter()
            .map(|(z, y)| -softmax(z, t)[*y].max(1e-12).ln())
            .sum::<f64>()
    };
    // A geometric grid from 0.05 to 5.
    (0..=60)
        .map(|i| 0.05f32 * 100f32.powf(i as f32 / 60.0))
        .map(|t| (t, nll(t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|x| x.0)
        .unwrap_or(1.0)
}

// ---- storage -----------------------------------------------------------------------------

/// The stored form: weights quantised to i16 against `scale`, rows varint-packed, base64.
#[derive(Serialize, Deserialize)]
struct Packed {
    v: u32,
    lang: Lang,
    labels: Vec<String>,
    features: FeatureConfig,
    temperature: f32,
    scale: f32,
    /// IDF of features unseen in training (with IDF weighting).
    #[serde(default)]
    idf_unseen: f32,
    /// For each row: varint id delta, [with IDF: varint round(IDF × 1000)], varint count,
    /// then count × (varint class, i16 LE).
    rows: String,
}

fn put_varint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

fn get_varint(b: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut x = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos).ok_or("truncated trait model")?;
        *pos += 1;
        x |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            return Ok(x);
        }
    }
    Err("bad varint in trait model".into())
}

impl From<TraitModel> for Packed {
    fn from(m: TraitModel) -> Packed {
        let max = m.w.iter().fold(0f32, |a, w| a.max(w.abs()));
        let scale = if max > 0.0 { max / 32767.0 } else { 1.0 };
        let mut b = Vec::with_capacity(m.w.len() * 3 + m.ids.len() * 4);
        put_varint(&mut b, m.ids.len() as u64);
        let mut prev = 0u32;
        for (r, id) in m.ids.iter().enumerate() {
            put_varint(&mut b, (id - prev) as u64);
            prev = *id;
            if m.features.idf {
                put_varint(&mut b, (m.idf[r] * 1000.0).round() as u64);
            }
            let (a, e) = (m.offs[r] as usize, m.offs[r + 1] as usize);
            put_varint(&mut b, (e - a) as u64);
            for j in a..e {
                put_varint(&mut b, m.cls[j] as u64);
                let q = (m.w[j] / scale).round().clamp(-32767.0, 32767.0) as i16;
                b.extend_from_slice(&q.to_le_bytes());
            }
        }
        Packed {
            v: 1,
            lang: m.lang,
            labels: m.labels,
            features: m.features,
            temperature: m.temperature,
            scale,
            idf_unseen: m.idf_unseen,
            rows: base64::engine::general_purpose::STANDARD_NO_PAD.encode(b),
        }
    }
}

impl TryFrom<Packed> for TraitModel {
    type Error = String;

    fn try_from(p: Packed) -> Result<TraitModel, String> {
        if p.v != 1 {
            return Err(format!("unsupported trait model version {}", p.v));
        }
        let b = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(p.rows.as_bytes())
            .map_err(|e| format!("bad trait model rows: {e}"))?;
        let k = p.labels.len() + 1;
        let mut pos = 0;
        let n = get_varint(&b, &mut pos)? as usize;
        let (mut ids, mut offs, mut cls, mut w) =
            (Vec::with_capacity(n), vec![0u32], Vec::new(), Vec::new());
        let mut prev = 0u64;
        let mut idf = Vec::new();
        for _ in 0..n {
            prev += get_varint(&b, &mut pos)?;
            ids.push(u32::try_from(prev).map_err(|_| "bad feature id in trait model")?);
            if p.features.idf {
                idf.push(get_varint(&b, &mut pos)? as f32 / 1000.0);
            }
            let count = get_varint(&b, &mut pos)? as usize;
            for _ in 0..count {
                let c = get_varint(&b, &mut pos)? as usize;
                if c >= k {
                    return Err("bad class in trait model".into());
                }
                let q = b.get(pos..pos + 2).ok_or("truncated trait model")?;
                pos += 2;
                cls.push(c as u16);
                w.push(i16::from_le_bytes([q[0], q[1]]) as f32 * p.scale);
            }
            offs.push(cls.len() as u32);
        }
        Ok(TraitModel {
            lang: p.lang,
            labels: p.labels,
            features: p.features,
            temperature: p.temperature,
            ids,
            idf,
            idf_unseen: p.idf_unseen,
            offs,
            cls,
            w,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex<'a>(v: &[(&'a str, Option<&'a str>)]) -> Vec<Example<'a>> {
        v.iter()
            .map(|&(text, label)| Example { text, label })
            .collect()
    }

    const EN: &[(&str, Option<&str>)] = &[
        ("I want to order a pizza", Some("order")),
        ("can I order two pizzas please", Some("order")),
        ("I'd like to buy a large pizza", Some("order")),
        ("get me a pepperoni pizza", Some("order")),
        ("ordering a margherita for delivery", Some("order")),
        ("where is my order", Some("track")),
        ("how long until my pizza arrives", Some("track")),
        ("track my delivery", Some("track")),
        ("is my food on the way", Some("track")),
        ("when will the pizza arrive", Some("track")),
        ("cancel my order", Some("cancel")),
        ("I don't want the pizza anymore, cancel it", Some("cancel")),
        ("please cancel the delivery", Some("cancel")),
        ("stop my order", Some("cancel")),
        ("what's the weather like today", None),
        ("tell me a joke", None),
        ("who won the football match", None),
        ("good morning", None),
    ];

    const ID: &[(&str, Option<&str>)] = &[
        ("saya mau pesan tiket ke Bandung", Some("pesan")),
        ("pesankan tiket kereta besok", Some("pesan")),
        ("tolong pesan tiket pesawat", Some("pesan")),
        ("saya ingin memesan dua tiket", Some("pesan")),
        ("batalkan pesanan saya", Some("batal")),
        ("saya mau membatalkan tiket", Some("batal")),
        ("tolong batalkan pemesanan kemarin", Some("batal")),
        ("pembatalan tiket kereta", Some("batal")),
        ("berapa harga tiket ke Jakarta", Some("harga")),
        ("harganya berapa", Some("harga")),
        ("berapa biaya perjalanan ke Surabaya", Some("harga")),
        ("mahal tidak tiketnya", Some("harga")),
        ("cuaca hari ini bagaimana", None),
        ("selamat pagi", None),
        ("siapa presiden pertama", None),
    ];

    fn top(m: &TraitModel, s: &str) -> (String, f64) {
        m.predict(s)[0].clone()
    }

    #[test]
    fn learns_english_intents() {
        let m = TraitModel::train(&ex(EN), &[], Lang::En).unwrap();
        assert_eq!(m.labels(), ["order", "track", "cancel"]);
        assert_eq!(top(&m, "I would like to order a pizza").0, "order");
        assert_eq!(top(&m, "where's my pizza? is it on the way").0, "track");
        assert_eq!(top(&m, "cancel the order please").0, "cancel");
        let p = m.predict("cancel my order");
        assert!(p[0].1 > 0.5, "{p:?}");
        let total: f64 = p.iter().map(|x| x.1).sum();
        assert!(total <= 1.0 + 1e-9);
    }

    #[test]
    fn learns_with_feature_dropout() {
        let cfg = Config {
            dropout: 0.5,
            ..Config::default()
        };
        let m = TraitModel::train_with(&ex(EN), &[], Lang::En, &cfg).unwrap();
        assert_eq!(top(&m, "I would like to order a pizza").0, "order");
        assert_eq!(top(&m, "where's my pizza? is it on the way").0, "track");
        assert_eq!(top(&m, "cancel the order please").0, "cancel");
        // The option changes training (not a no-op), and stays deterministic.
        let plain = TraitModel::train(&ex(EN), &[], Lang::En).unwrap();
        let again = TraitModel::train_with(&ex(EN), &[], Lang::En, &cfg).unwrap();
        let json = |m: &TraitModel| serde_json::to_string(m).unwrap();
        assert_ne!(json(&m), json(&plain));
        assert_eq!(json(&m), json(&again));
    }

    #[test]
    fn learns_indonesian_intents() {
        let m = TraitModel::train(&ex(ID), &[], Lang::Id).unwrap();
        assert_eq!(top(&m, "saya mau pesan tiket").0, "pesan");
        assert_eq!(top(&m, "tolong dibatalkan tiketnya").0, "batal");
        assert_eq!(top(&m, "berapa harganya ke Bandung").0, "harga");
    }

    #[test]
    fn counter_examples_score_low() {
        let m = TraitModel::train(&ex(EN), &[], Lang::En).unwrap();
        let p = m.predict("tell me a joke about the weather");
        assert!(p[0].1 < 0.5, "{p:?}");
        let order = m.predict("I want to order a pizza");
        assert!(p[0].1 < order[0].1);
    }

    #[test]
    fn deterministic_and_serialises() {
        let a = TraitModel::train(&ex(EN), &[], Lang::En).unwrap();
        let b = TraitModel::train(&ex(EN), &[], Lang::En).unwrap();
        let (ja, jb) = (
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap(),
        );
        assert_eq!(ja, jb);
        let c: TraitModel = serde_json::from_str(&ja).unwrap();
        for s in ["order a pizza", "where is it", "xyz"] {
            assert_eq!(a.predict(s), c.predict(s));
        }
    }

    #[test]
    fn declared_labels_come_first_and_are_kept() {
        let labels = vec!["unused".to_string(), "cancel".to_string()];
        let m = TraitModel::train(&ex(EN), &labels, Lang::En).unwrap();
        assert_eq!(m.labels(), ["unused", "cancel", "order", "track"]);
        let p = m.predict("cancel my order");
        assert_eq!(p[0].0, "cancel");
        assert!(p.iter().find(|x| x.0 == "unused").unwrap().1 < 0.1);
    }

    #[test]
    fn errors_on_nothing_to_learn() {
        let e = TraitModel::train(&[], &[], Lang::En).unwrap_err();
        assert!(e.contains("without training sentences"), "{e}");
        let e = TraitModel::train(&ex(&[("hello", None)]), &[], Lang::En).unwrap_err();
        assert!(e.contains("counter-examples only"), "{e}");
    }

    #[test]
    fn debug_lists_features_and_scores() {
        let m = TraitModel::train(&ex(EN), &[], Lang::En).unwrap();
        let d = m.debug("Cancel my orders");
        assert_eq!(d["top"], "cancel");
        assert_eq!(d["tokens"], json!(["cancel", "my", "orders"]));
        assert_eq!(d["stems"], json!(["cancel", "my", "order"]));
        assert_eq!(d["scores"].as_array().unwrap().len(), 4);
        let feats = d["features"].as_array().unwrap();
        assert!(
            feats
                .iter()
                .any(|f| f["feature"] == "stem:cancel" && f["contribution"].as_f64().unwrap() > 0.0)
        );
    }
}
