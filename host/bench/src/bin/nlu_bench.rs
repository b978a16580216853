//! NLU benchmark: `cargo build --release -p botbox -p botbox-bench`, then from the repo root
//! `target/release/nlu-bench [CORPUS_DIR] [--cv [--nested]] [--clinc FILE]
//! [--clinc-oos FILE [--test]]`.
//!
//! 1. **Intent F1** on the three corpora of Braun et al. 2017 ("Evaluating Natural Language
//!    Understanding Services for Conversational Question Answering Systems", SIGdial 2017):
//!    ChatbotCorpus.json, AskUbuntuCorpus.json, WebApplicationsCorpus.json, read from
//!    CORPUS_DIR (default `../shared/nlu-bench/braun2017`; the corpora are CC BY-SA and not
//!    part of this repository). One trait model per corpus is trained on the `training: true`
//!    sentences and tested on the others.
//!
//!    Scoring follows the paper: every intent, "None" included, is an ordinary label; true
//!    positives, false positives and false negatives are summed over all test sentences
//!    (micro-averaging) per corpus and over the three corpora together ("overall"), and
//!    F1 = 2PR / (P + R). A sentence whose top intent is wrong counts one false positive
//!    (the predicted intent) and one false negative (the expected one); a sentence with no
//!    prediction counts one false negative. As this classifier always predicts an intent,
//!    P = R = F1 = accuracy. Published overall intent F1 (the paper's Table 5 and the NLP.js
//!    benchmark on the same data): NLP.js 0.93, Watson 0.92, LUIS 0.91, Rasa 0.88,
//!    Dialogflow 0.87.
//! 2. **Entity F1** on the Chatbot corpus with the phrase tagger (`nlu::tagger::Tagger`):
//!    entity spans (token indexes in the corpus) are converted to character spans, tag =
//!    entity type; a prediction is right only with the exact span and type; micro P/R/F1.
//! 3. **Calibration** of the intent scores on the test sentences: mean top score against
//!    accuracy, and the expected calibration error (10 bins).
//! 4. **Speed and size** on a deterministic synthetic trait set (150 labels, label-specific
//!    words plus shared filler): predict p50/p99, training time for 1,000 and 15,000
//!    sentences, stored size (serde_json bytes) per 1,000 training sentences.
//!
//! With `--cv`, first prints 5-fold cross-validation accuracy on the TRAINING sentences only
//! of each corpus for the candidate settings; the defaults in `nlu::classify::Config` were
//! chosen from that table (test sentences are never used for choosing). With `--nested` as
//! well, then scores by nested CV the alternative of choosing a setting per training set.
//!
//! The intent figures are the API's: the test split's model is trained as a user of the NLU
//! API trains one (a trait entity, the sentences in the line format, `NluModel::train`) and
//! predicted by `NluModel::predict`, so a sentence may get no intent (counter-example class
//! or a score under `MIN_TRAIT_SCORE`): one false negative.
//!
//! With `--clinc-oos FILE` (CLINC150's `data_full.json`), prints in-scope accuracy and
//! out-of-scope recall through the same path on its validation split (`--test`: its test
//! split, for the published figure only); `NLU_CLINC_CV=1` prints the reject-threshold
//! cross-validation on its training sentences, `NLU_CLINC_ROWS=1` trait settings on the
//! validation split.
//!
//! With `--clinc FILE` (CLINC150's `data_small.json`, not part of this repository), prints
//! instead the feature rows' top-1 on CLINC150's validation sentences (150 intents, trained
//! on 10 and 50 sentences per intent): many labels on real sentences.
//!
//! Environment: `NLU_ROWS=default,idf,…` keeps only those rows of the CV table (faster);
//! `NLU_CV_REPEATS` sets its number of repeats (10).
//! `NLU_MASK` is an experiment in entity abstraction (off: CV does not favour it, see
//! docs/nl-studio.md, "Options that stay off"): the intent model trains on sentences whose
//! labelled entity spans are replaced by a placeholder of their type (`replace`) or keep
//! their words and get the placeholder added (`add`); at prediction a phrase tagger trained
//! on the same training sentences finds the spans (`gold` uses the corpus's own spans
//! instead: an upper bound). It applies to the CV table and the test scores alike.

use botbox_nlu::Lang;
use botbox_nlu::classify::{Config, Example, TraitModel};
use botbox_nlu::lines::parse_text;
use botbox_nlu::model::{EntitySpec, NluModel};
use botbox_nlu::tagger::{Span, Tagger};
use serde_json::Value;
use std::time::Instant;

struct Sentence {
    text: String,
    intent: String,
    /// (char start, char end exclusive, entity type)
    entities: Vec<(usize, usize, String)>,
    training: bool,
}

const CORPORA: [&str; 3] = ["ChatbotCorpus", "AskUbuntuCorpus", "WebApplicationsCorpus"];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `--clinc-oos FILE` and `--clinc FILE` are modes of their own: they read only that file.
    if let Some(i) = args.iter().position(|a| a == "--clinc-oos") {
        let path = args
            .get(i + 1)
            .ok_or_else(|| anyhow::anyhow!("--clinc-oos needs the path of data_full.json"))?;
        return clinc_oos(path, args.iter().any(|a| a == "--test"));
    }
    if let Some(i) = args.iter().position(|a| a == "--clinc") {
        let path = args
            .get(i + 1)
            .ok_or_else(|| anyhow::anyhow!("--clinc needs the path of data_small.json"))?;
        return clinc(path);
    }
    let cv = args.iter().any(|a| a == "--cv");
    let nested = args.iter().any(|a| a == "--nested");
    let dir = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| "../shared/nlu-bench/braun2017".into());
    let corpora = load_corpora(&dir)?;
    if cv {
        cross_validate(&corpora, nested);
    }
    intent_scores(&corpora);
    println!();
    entity_scores(&corpora[0].1);
    println!();
    speed();
    Ok(())
}

/// Reads the three corpora from `dir`.
fn load_corpora(dir: &str) -> anyhow::Result<Vec<(&'static str, Vec<Sentence>)>> {
    let mut corpora = Vec::new();
    for name in CORPORA {
        let path = format!("{dir}/{name}.json");
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("{path}: {e}"))?,
        )?;
        corpora.push((name, load(&v)?));
    }
    Ok(corpora)
}

/// Intent P/R/F1 per corpus and overall (micro), then the calibration of the top scores.
fn intent_scores(corpora: &[(&str, Vec<Sentence>)]) {
    println!(
        "== Intent classification (Braun et al. 2017; train on training:true, test on the rest)"
    );
    println!(
        "{:<24} {:>6} {:>6} {:>5} {:>5} {:>5} {:>6} {:>6} {:>6} {:>7}",
        "corpus", "train", "test", "tp", "fp", "fn", "P", "R", "F1", "bytes"
    );
    let (mut tp_all, mut fp_all, mut fn_all) = (0, 0, 0);
    let mut calib: Vec<(f64, bool)> = Vec::new();
    for (name, sents) in corpora {
        let (tp, fp, fneg) = intent_row(name, sents, &mut calib);
        tp_all += tp;
        fp_all += fp;
        fn_all += fneg;
    }
    println!(
        "{:<24} {:>6} {:>6} {}",
        "overall (micro)",
        "",
        "",
        prf(tp_all, fp_all, fn_all)
    );
    let acc = calib.iter().filter(|x| x.1).count() as f64 / calib.len() as f64;
    let conf = calib.iter().map(|x| x.0).sum::<f64>() / calib.len() as f64;
    println!(
        "calibration on the {} test sentences: mean top score {:.3}, accuracy {:.3}, ECE(10 bins) {:.3}",
        calib.len(),
        conf,
        acc,
        ece(&calib)
    );
}

/// One corpus's intent row: trains on its training sentences, scores the others, prints the
/// row; returns (tp, fp, fn) and adds each prediction's (score, right) to `calib`.
fn intent_row(
    name: &str,
    sents: &[Sentence],
    calib: &mut Vec<(f64, bool)>,
) -> (usize, usize, usize) {
    let train: Vec<&Sentence> = sents.iter().filter(|s| s.training).collect();
    let test: Vec<&Sentence> = sents.iter().filter(|s| !s.training).collect();
    // What a user of the API does: one trait entity, the training sentences in the line
    // format, a prediction per test sentence (NluModel, as the server trains and serves).
    let (model, bytes) = if mask_mode().is_empty() {
        let m = train_as_the_api_does(&train);
        let bytes = serde_json::to_vec(&m).unwrap().len();
        (Either::Api(m), bytes)
    } else {
        let m = train_intents(&train, &Config::default());
        let bytes = serde_json::to_vec(&m.model).unwrap().len();
        (Either::Bench(m), bytes)
    };
    let (mut tp, mut fp, mut fneg) = (0, 0, 0);
    for s in &test {
        let top = match &model {
            // Line-format labels back to the corpus's names (`Make_Update`).
            Either::Api(m) => predict_as_the_api_does(m, &s.text)
                .map(|(label, score)| (label.replace('_', " "), score)),
            Either::Bench(m) => m.predict(s).first().cloned(),
        };
        match top {
            Some((label, score)) => {
                let ok = label == s.intent;
                calib.push((score, ok));
                if ok {
                    tp += 1;
                } else {
                    fp += 1;
                    fneg += 1;
                }
            }
            None => fneg += 1,
        }
    }
    println!(
        "{:<24} {:>6} {:>6} {} {:>7}",
        name,
        train.len(),
        test.len(),
        prf(tp, fp, fneg),
        bytes
    );
    (tp, fp, fneg)
}

/// Entity P/R/F1 of the phrase tagger on the Chatbot corpus (exact span and type, micro).
fn entity_scores(sents: &[Sentence]) {
    println!("== Entities, Chatbot corpus (tagger; exact span and type, micro)");
    let tagger = train_tagger(sents.iter().filter(|s| s.training));
    let (mut tp, mut fp, mut fneg) = (0, 0, 0);
    for s in sents.iter().filter(|s| !s.training) {
        let pred: Vec<(usize, usize, String)> = tagger
            .predict(&s.text)
            .into_iter()
            .map(|t| (t.span.char_start, t.span.char_end, t.span.tag))
            .collect();
        let hits = pred.iter().filter(|p| s.entities.contains(p)).count();
        tp += hits;
        fp += pred.len() - hits;
        fneg += s.entities.len() - hits;
    }
    println!(
        "{:<24} {:>5} {:>5} {:>5} {:>6} {:>6} {:>6}",
        "", "tp", "fp", "fn", "P", "R", "F1"
    );
    println!("{:<24} {}", "ChatbotCorpus", prf(tp, fp, fneg));
}

fn prf(tp: usize, fp: usize, fneg: usize) -> String {
    let p = if tp + fp > 0 {
        tp as f64 / (tp + fp) as f64
    } else {
        0.0
    };
    let r = if tp + fneg > 0 {
        tp as f64 / (tp + fneg) as f64
    } else {
        0.0
    };
    let f = if p + r > 0.0 {
        2.0 * p * r / (p + r)
    } else {
        0.0
    };
    format!("{tp:>5} {fp:>5} {fneg:>5} {p:>6.3} {r:>6.3} {f:>6.3}")
}

/// Expected calibration error over 10 equal-width score bins.
fn ece(v: &[(f64, bool)]) -> f64 {
    let mut bins = [(0.0f64, 0.0f64, 0usize); 10];
    for &(s, ok) in v {
        let b = ((s * 10.0) as usize).min(9);
        bins[b].0 += s;
        bins[b].1 += ok as u8 as f64;
        bins[b].2 += 1;
    }
    bins.iter()
        .filter(|b| b.2 > 0)
        .map(|b| (b.0 - b.1).abs() / v.len() as f64)
        .sum()
}

/// `NLU_MASK` (see the module docs): "", "replace", "add" or "gold".
fn mask_mode() -> &'static str {
    static MODE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MODE.get_or_init(|| std::env::var("NLU_MASK").unwrap_or_default())
}

/// A phrase tagger trained on the labelled entity spans of `sentences`.
fn train_tagger<'a>(sentences: impl IntoIterator<Item = &'a Sentence>) -> Tagger {
    let data: Vec<(&str, Vec<Span>)> = sentences
        .into_iter()
        .map(|s| {
            let spans = s
                .entities
                .iter()
                .map(|(a, b, t)| Span {
                    char_start: *a,
                    char_end: *b,
                    tag: t.clone(),
                })
                .collect();
            (s.text.as_str(), spans)
        })
        .collect();
    Tagger::train(&data, Lang::En)
}

/// `text` with each span replaced by (or, in "add" mode, followed at the end by) a
/// placeholder word of its type.
fn masked(text: &str, spans: &[(usize, usize, String)]) -> String {
    let mode = mask_mode();
    if mode.is_empty() || spans.is_empty() {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut sp = spans.to_vec();
    sp.sort();
    let mut out = String::new();
    let mut at = 0;
    let mut tail = String::new();
    for (a, b, t) in sp {
        if a < at {
            continue;
        }
        let ph = format!(" zz{}zz ", t.to_lowercase());
        out.extend(&chars[at..a]);
        if mode == "add" {
            out.extend(&chars[a..b]);
            tail.push_str(&ph);
        } else {
            out.push_str(&ph);
        }
        at = b;
    }
    out.extend(&chars[at..]);
    out.push_str(&tail);
    out
}

/// A trained intent model and, when masking, the tagger that finds the spans to mask.
struct Intents {
    model: TraitModel,
    tagger: Option<Tagger>,
}

impl Intents {
    fn predict(&self, s: &Sentence) -> Vec<(String, f64)> {
        let text = match (&self.tagger, mask_mode()) {
            (_, "") => s.text.clone(),
            (_, m) if m.starts_with("gold") => masked(&s.text, &s.entities),
            (Some(t), _) => {
                let spans: Vec<(usize, usize, String)> = t
                    .predict(&s.text)
                    .into_iter()
                    .map(|t| (t.span.char_start, t.span.char_end, t.span.tag))
                    .collect();
                masked(&s.text, &spans)
            }
            (None, _) => s.text.clone(),
        };
        self.model.predict(&text)
    }
}

fn train_intents(train: &[&Sentence], cfg: &Config) -> Intents {
    let texts: Vec<String> = train.iter().map(|s| masked(&s.text, &s.entities)).collect();
    let ex: Vec<Example> = train
        .iter()
        .zip(&texts)
        .map(|(s, t)| Example {
            text: t,
            label: Some(&s.intent),
        })
        .collect();
    let model = TraitModel::train_with(&ex, &[], Lang::En, cfg).expect("training");
    let tagger = (!mask_mode().is_empty()).then(|| train_tagger(train.iter().copied()));
    Intents { model, tagger }
}

/// The intent model of the test split: the API's (`NluModel`, trained from lines) or, with
/// `NLU_MASK`, the bench's own masked `TraitModel`.
enum Either {
    Api(NluModel),
    Bench(Intents),
}

/// A corpus intent as a line-format label (`Make Update` → `Make_Update`).
fn label_of(intent: &str) -> String {
    intent.replace(' ', "_")
}

/// Trains as a user of the NLU API does: an NLU with one trait entity `intent` declaring
/// the corpus's intents, the training sentences in the line format (`text #intent:Label`),
/// parsed by `lines::parse_text` and trained by `NluModel::train`, the server's own code.
fn train_as_the_api_does(train: &[&Sentence]) -> NluModel {
    let mut labels: Vec<String> = Vec::new();
    for s in train {
        let l = label_of(&s.intent);
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    let entities: std::collections::BTreeMap<String, EntitySpec> = serde_json::from_value(
        serde_json::json!({"intent": {"type": "trait", "profile": "intent", "labels": labels}}),
    )
    .expect("entity spec");
    let text: String = train
        .iter()
        .map(|s| {
            format!(
                "{} #intent:{}
",
                s.text,
                label_of(&s.intent)
            )
        })
        .collect();
    let parsed = parse_text(&text);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    NluModel::train(Lang::En, &entities, &parsed.rows).expect("training")
}

/// The `intent` prediction as the API answers it (its label and score), or `None` when the
/// model predicts no intent.
fn predict_as_the_api_does(m: &NluModel, text: &str) -> Option<(String, f64)> {
    let p = m.predict(text).remove("intent")?.into_iter().next()?;
    Some((p.value, p.score))
}

/// Reads one corpus; entity token spans become character spans.
fn load(v: &Value) -> anyhow::Result<Vec<Sentence>> {
    let mut out = Vec::new();
    for s in v["sentences"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("no sentences"))?
    {
        let text = s["text"].as_str().unwrap_or_default().to_string();
        let mut entities = Vec::new();
        for e in s["entities"].as_array().into_iter().flatten() {
            let etext = e["text"].as_str().unwrap_or_default();
            let start = e["start"].as_u64().unwrap_or(0) as usize;
            if let Some((a, b)) = char_span(&text, etext, start) {
                entities.push((a, b, e["entity"].as_str().unwrap_or_default().to_string()));
            } else {
                eprintln!("warning: entity {etext:?} not found in {text:?}");
            }
        }
        out.push(Sentence {
            text,
            intent: s["intent"].as_str().unwrap_or_default().to_string(),
            entities,
            training: s["training"].as_bool().unwrap_or(false),
        });
    }
    Ok(out)
}

/// The character span of `needle` in `text`: the corpus gives token indexes of its own
/// tokeniser (words and punctuation split, `u-bahn` is 3 tokens), so the occurrence whose
/// count of preceding such tokens is closest to `token_start` is taken.
fn char_span(text: &str, needle: &str, token_start: usize) -> Option<(usize, usize)> {
    let lower = text.to_lowercase();
    let nl = needle.to_lowercase();
    if nl.is_empty() || lower.len() != text.len() {
        return None;
    }
    let tokens_before = |byte: usize| -> usize {
        let mut n = 0;
        let mut in_word = false;
        for c in lower[..byte].chars() {
            if c.is_alphanumeric() {
                if !in_word {
                    n += 1;
                }
                in_word = true;
            } else {
                in_word = false;
                if !c.is_whitespace() {
                    n += 1;
                }
            }
        }
        n
    };
    lower
        .match_indices(&nl)
        .map(|(b, _)| (b, tokens_before(b).abs_diff(token_start)))
        .min_by_key(|x| x.1)
        .map(|(b, _)| {
            let a = lower[..b].chars().count();
            (a, a + nl.chars().count())
        })
}

/// Fold of each of `n` sentences for repeat `seed`: its position in a seeded shuffle, mod `k`.
fn folds(n: usize, k: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = Rng(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order.into_iter().map(|o| o % k).collect()
}

/// How many of `sentences` get their own intent as `model`'s top prediction.
fn right_on<'a>(model: &Intents, sentences: impl IntoIterator<Item = &'a Sentence>) -> usize {
    sentences
        .into_iter()
        .filter(|s| model.predict(s).first().is_some_and(|p| p.0 == s.intent))
        .count()
}

/// Sentences of `train` predicted right in `repeats` runs of `k`-fold cross-validation
/// (repeat `r` shuffles with seed `seed + r`).
fn cv_right(train: &[&Sentence], cfg: &Config, k: usize, repeats: usize, seed: u64) -> usize {
    let mut ok = 0;
    for r in 0..repeats {
        let fold_of = folds(train.len(), k, seed + r as u64);
        for f in 0..k {
            let fit: Vec<&Sentence> = (0..train.len())
                .filter(|&i| fold_of[i] != f)
                .map(|i| train[i])
                .collect();
            if fit.is_empty() {
                continue;
            }
            let model = train_intents(&fit, cfg);
            ok += right_on(
                &model,
                (0..train.len())
                    .filter(|&i| fold_of[i] == f)
                    .map(|i| train[i]),
            );
        }
    }
    ok
}

/// Nested cross-validation of choosing a setting per training set: in each outer
/// fold, the setting with the best inner CV accuracy on the outer fold's training part is
/// trained and scored on the held-out part, against the default on the same folds. Only the
/// TRAINING sentences are used.
fn nested_cv(corpora: &[(&str, Vec<Sentence>)], candidates: &[(&str, Config)]) {
    let (k, repeats) = (5, 4);
    println!(
        "== Nested {k}-fold CV ({repeats} repeats): the default against a setting chosen per training set by inner 5-fold CV"
    );
    println!("{:<22} {:>8} {:>8}  picks", "corpus", "default", "chosen");
    let (mut d_all, mut c_all, mut n_all) = (0, 0, 0);
    for (name, sents) in corpora {
        let train: Vec<&Sentence> = sents.iter().filter(|s| s.training).collect();
        let (mut d_ok, mut c_ok) = (0, 0);
        let mut picks = vec![0usize; candidates.len()];
        for r in 0..repeats {
            let fold_of = folds(train.len(), k, 0x0123_4567 + r as u64);
            for f in 0..k {
                let fit: Vec<&Sentence> = (0..train.len())
                    .filter(|&i| fold_of[i] != f)
                    .map(|i| train[i])
                    .collect();
                let held: Vec<&Sentence> = (0..train.len())
                    .filter(|&i| fold_of[i] == f)
                    .map(|i| train[i])
                    .collect();
                let mut best = (0, 0);
                for (c, (_, cfg)) in candidates.iter().enumerate() {
                    let ok = cv_right(&fit, cfg, 5, 2, 0x77 + (r * k + f) as u64 * 10);
                    if ok > best.1 {
                        best = (c, ok);
                    }
                }
                picks[best.0] += 1;
                let right =
                    |cfg: &Config| right_on(&train_intents(&fit, cfg), held.iter().copied());
                d_ok += right(&candidates[0].1);
                c_ok += right(&candidates[best.0].1);
            }
        }
        let n = repeats * train.len();
        let picks: Vec<String> = candidates
            .iter()
            .zip(&picks)
            .filter(|(_, p)| **p > 0)
            .map(|((name, _), p)| format!("{name} {p}"))
            .collect();
        println!(
            "{:<22} {:>8.3} {:>8.3}  {}",
            name,
            d_ok as f64 / n as f64,
            c_ok as f64 / n as f64,
            picks.join(", ")
        );
        (d_all, c_all, n_all) = (d_all + d_ok, c_all + c_ok, n_all + n);
    }
    println!(
        "{:<22} {:>8.3} {:>8.3}",
        "pooled",
        d_all as f64 / n_all as f64,
        c_all as f64 / n_all as f64
    );
    println!();
}

/// The candidate settings of the CV table (without calibration, which CV does not score),
/// filtered by `NLU_ROWS`.
fn candidates() -> Vec<(&'static str, Config)> {
    let base = Config {
        calibrate: false,
        ..Config::default()
    };
    let with = |f: &dyn Fn(&mut Config)| {
        let mut c = base.clone();
        f(&mut c);
        c
    };
    // Each row changes one thing from the defaults (or from the settings before them, for
    // the rows that show how the defaults were reached).
    let candidates: Vec<(&'static str, Config)> = vec![
        ("default", base.clone()),
        ("label names", with(&|c| c.label_names = true)),
        ("one-vs-rest", with(&|c| c.ovr = true)),
        ("dropout 0.2", with(&|c| c.dropout = 0.2)),
        ("dropout 0.4", with(&|c| c.dropout = 0.4)),
        ("dropout 0.6", with(&|c| c.dropout = 0.6)),
        ("not balanced", with(&|c| c.balanced = false)),
        (
            "not balanced, no pruning",
            with(&|c| {
                c.balanced = false;
                c.prune = 0.0;
            }),
        ),
        (
            "words only",
            with(&|c| {
                c.features.stems = false;
                c.features.bigrams = false;
                c.features.char_max = 0;
            }),
        ),
        ("no char n-grams", with(&|c| c.features.char_max = 0)),
        ("no words", with(&|c| c.features.words = false)),
        ("no stems", with(&|c| c.features.stems = false)),
        ("no bigrams", with(&|c| c.features.bigrams = false)),
        (
            "chars only",
            with(&|c| {
                c.features.words = false;
                c.features.stems = false;
                c.features.bigrams = false;
            }),
        ),
        ("chars 3-5", with(&|c| c.features.char_min = 3)),
        ("chars 2-4", with(&|c| c.features.char_max = 4)),
        (
            "chars 1-6",
            with(&|c| {
                c.features.char_min = 1;
                c.features.char_max = 6;
            }),
        ),
        (
            "char weight 1 (until 11-26)",
            with(&|c| c.features.char_weight = 1.0),
        ),
        ("char weight 1.5", with(&|c| c.features.char_weight = 1.5)),
        ("char weight 3", with(&|c| c.features.char_weight = 3.0)),
        ("idf", with(&|c| c.features.idf = true)),
        ("l2 1e-5", with(&|c| c.l2 = 1e-5)),
        ("l2 1e-3", with(&|c| c.l2 = 1e-3)),
        ("rate 0.05", with(&|c| c.rate = 0.05)),
        ("rate 0.5", with(&|c| c.rate = 0.5)),
        ("max epochs 10", with(&|c| c.max_epochs = 10)),
        ("updates 20k (until 11-26)", with(&|c| c.updates = 20_000)),
        ("updates 5k", with(&|c| c.updates = 5_000)),
        (
            "max epochs 100",
            with(&|c| {
                c.max_epochs = 100;
                c.updates = 100_000;
            }),
        ),
        ("prune 0.01", with(&|c| c.prune = 0.01)),
        ("prune 0.05", with(&|c| c.prune = 0.05)),
        ("prune 0.2", with(&|c| c.prune = 0.2)),
        ("min_grad 0.01", with(&|c| c.min_grad = 0.01)),
        ("min_grad 0.1", with(&|c| c.min_grad = 0.1)),
        ("ensemble of 3", with(&|c| c.ensemble = 3)),
        ("ensemble of 5", with(&|c| c.ensemble = 5)),
    ];
    let only = std::env::var("NLU_ROWS").unwrap_or_default();
    candidates
        .into_iter()
        .filter(|c| only.is_empty() || only.split(',').any(|o| c.0 == o))
        .collect()
}

/// The rows of the many-label tables: which features are extracted, and how many updates
/// training makes.
fn is_feature_row(name: &str) -> bool {
    name == "default"
        || name.starts_with("no ")
        || name.starts_with("char")
        || name.contains("only")
        || name.starts_with("updates")
}

/// Many labels on real sentences: CLINC150 (Larson et al. 2019, "An Evaluation Dataset for
/// Intent Classification and Out-of-Scope Prediction", CC BY 3.0; its `data_small.json`,
/// 150 intents with 50 training and 20 validation sentences each, not part of this
/// repository). Each feature row is trained on the first 10 and on all 50 training
/// sentences of every intent (the out-of-scope training sentences as counter-examples) and
/// scored top-1 on the 3,000 in-scope VALIDATION sentences; its test split is never read.
fn clinc(path: &str) -> anyhow::Result<()> {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{path}: {e}"))?,
    )?;
    let pairs = |key: &str| -> Vec<(String, Option<String>)> {
        v[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let text = p[0].as_str().unwrap_or_default().to_string();
                let label = (key == "train" || key == "val")
                    .then(|| p[1].as_str().unwrap_or_default().to_string());
                (text, label)
            })
            .collect()
    };
    let (train, val, oos) = (pairs("train"), pairs("val"), pairs("oos_train"));
    let first = |n: usize| -> Vec<(String, Option<String>)> {
        let mut seen = std::collections::HashMap::<&str, usize>::new();
        let mut out: Vec<_> = train
            .iter()
            .filter(|(_, l)| {
                let c = seen.entry(l.as_deref().unwrap_or_default()).or_default();
                *c += 1;
                *c <= n
            })
            .cloned()
            .collect();
        out.extend(oos.iter().cloned());
        out
    };
    let (small, full) = (first(10), first(50));
    feature_rows(
        "CLINC150 (150 intents; top-1 on the 3,000 validation sentences)",
        ["10/intent", "50/intent"],
        [&small, &full],
        &val,
    );
    Ok(())
}

/// CLINC150 full with its out-of-scope sentences, through the API's path: one trait entity of
/// 150 labels, the 15,000 training sentences tagged and the 100 out-of-scope training
/// sentences untagged (counter-examples), `NluModel::train`; scored on the validation split
/// (3,000 in-scope, 100 out-of-scope sentences) or, with `--test`, the test split (4,500 and
/// 1,000; for the published figure only, never for choosing). In-scope accuracy: the top
/// intent is the right one; out-of-scope recall: no intent predicted.
fn clinc_oos(path: &str, test: bool) -> anyhow::Result<()> {
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{path}: {e}"))?,
    )?;
    let pairs = |key: &str| -> Vec<(String, String)> {
        v[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p[0].as_str().unwrap_or_default().to_string(),
                    p[1].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let (split, in_key, oos_key) = if test {
        ("test", "test", "oos_test")
    } else {
        ("validation", "val", "oos_val")
    };
    let train = pairs("train");
    let mut labels: Vec<String> = Vec::new();
    for (_, l) in &train {
        if !labels.contains(l) {
            labels.push(l.clone());
        }
    }
    let entities: std::collections::BTreeMap<String, EntitySpec> = serde_json::from_value(
        serde_json::json!({"intent": {"type": "trait", "profile": "intent", "labels": labels}}),
    )?;
    // As a JSON upload (a few sentences end in a `#` word, which the line format reads as
    // a tag): a sentence with its trait label, and the out-of-scope ones without.
    let mut rows: Vec<Value> = train
        .iter()
        .map(|(t, l)| {
            let n = t.chars().count();
            serde_json::json!({"input": t, "entities": [
                {"entity": "intent", "label": l, "value": l, "start": 0, "end": n}]})
        })
        .collect();
    for (t, _) in pairs("oos_train") {
        rows.push(serde_json::json!({"input": t, "entities": []}));
    }
    let parsed = botbox_nlu::lines::parse_file(Some("train.json"), &serde_json::to_string(&rows)?);
    anyhow::ensure!(parsed.errors.is_empty(), "{:?}", &parsed.errors[..1]);
    if std::env::var_os("NLU_CLINC_CV").is_some() {
        reject_cv(&train, &pairs("oos_train"));
        return Ok(());
    }
    if std::env::var_os("NLU_CLINC_ROWS").is_some() {
        clinc_rows(&parsed.rows, &pairs(in_key), &pairs(oos_key));
    }
    let started = Instant::now();
    let model = NluModel::train(Lang::En, &entities, &parsed.rows).map_err(anyhow::Error::msg)?;
    let trained = started.elapsed();
    let predict = |t: &str| predict_as_the_api_does(&model, t).map(|p| p.0);
    let inscope = pairs(in_key);
    let right = inscope
        .iter()
        .filter(|(t, l)| predict(t).as_deref() == Some(l.as_str()))
        .count();
    let oos = pairs(oos_key);
    let rejected = oos.iter().filter(|(t, _)| predict(t).is_none()).count();
    println!("== CLINC150 full, out-of-scope included, through the API's path ({split} split)");
    println!(
        "trained on {} sentences in {:.1} s; in-scope accuracy {:.1} % ({right}/{}), out-of-scope recall {:.1} % ({rejected}/{})",
        parsed.rows.len(),
        trained.as_secs_f64(),
        100.0 * right as f64 / inscope.len() as f64,
        inscope.len(),
        100.0 * rejected as f64 / oos.len() as f64,
        oos.len()
    );
    Ok(())
}

/// A trait model's answer before any reject threshold: its best label and score, or no
/// label (with the best score) when the counter-example class is likelier.
fn decide(m: &TraitModel, text: &str) -> (Option<String>, f64) {
    let p = m.predict(text);
    let none = (1.0 - p.iter().map(|s| s.1).sum::<f64>()).max(0.0);
    match p.first() {
        Some((l, s)) if *s > none => (Some(l.clone()), *s),
        Some((_, s)) => (None, *s),
        None => (None, 0.0),
    }
}

/// `NLU_CLINC_CV=1`: a reject threshold on the top score chosen on CLINC150's TRAINING
/// sentences alone: 5 folds, each holding out 30 whole intents (their sentences play the
/// out-of-scope ones) and every 5th sentence of the other intents (in-scope); trained on
/// the rest plus the out-of-scope training sentences (untagged). Prints, per threshold, the
/// in-scope accuracy and out-of-scope recall over the folds.
fn reject_cv(train: &[(String, String)], oos_train: &[(String, String)]) {
    let mut intents: Vec<&str> = Vec::new();
    for (_, l) in train {
        if !intents.contains(&l.as_str()) {
            intents.push(l);
        }
    }
    // A fixed interleaving, so that each fold holds intents of every domain.
    let taus = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6];
    let (mut ins_ok, mut ins_n) = (vec![0usize; taus.len()], 0usize);
    let (mut oos_ok, mut oos_n) = (vec![0usize; taus.len()], 0usize);
    for fold in 0..5 {
        let out_of_scope = |l: &str| intents.iter().position(|i| *i == l).unwrap() % 5 == fold;
        let mut ex: Vec<Example> = Vec::new();
        let (mut ins, mut oos): (Vec<(&str, &str)>, Vec<&str>) = (Vec::new(), Vec::new());
        for (i, (t, l)) in train.iter().enumerate() {
            if out_of_scope(l) {
                if i % 5 == 0 {
                    oos.push(t);
                }
            } else if i % 5 == 0 {
                ins.push((t, l));
            } else {
                ex.push(Example {
                    text: t,
                    label: Some(l),
                });
            }
        }
        for (t, _) in oos_train {
            ex.push(Example {
                text: t,
                label: None,
            });
        }
        let m = TraitModel::train_with(&ex, &[], Lang::En, &Config::default()).expect("training");
        let top = |t: &str| decide(&m, t);
        for (t, l) in &ins {
            let (p, s) = top(t);
            for (k, tau) in taus.iter().enumerate() {
                ins_ok[k] += (p.as_deref() == Some(*l) && s >= *tau) as usize;
            }
        }
        for t in &oos {
            let (p, s) = top(t);
            for (k, tau) in taus.iter().enumerate() {
                oos_ok[k] += (p.is_none() || s < *tau) as usize;
            }
        }
        ins_n += ins.len();
        oos_n += oos.len();
    }
    println!(
        "== Reject threshold by 5-fold CV on CLINC150's training sentences (30 intents held out per fold)"
    );
    for (k, tau) in taus.iter().enumerate() {
        println!(
            "reject < {tau:.1}: in-scope {:>5.1} %  out-of-scope recall {:>5.1} %",
            100.0 * ins_ok[k] as f64 / ins_n as f64,
            100.0 * oos_ok[k] as f64 / oos_n as f64
        );
    }
}

/// `NLU_CLINC_ROWS=1`: trait-model settings on CLINC150's validation split, each scored as
/// the API decides (an intent when its score beats the counter-example class's), then with
/// a reject threshold on the top score.
fn clinc_rows(
    rows: &[botbox_nlu::TrainingData],
    inscope: &[(String, String)],
    oos: &[(String, String)],
) {
    let label = |r: &botbox_nlu::TrainingData| r.entities.first().and_then(|e| e.label.clone());
    let labels: Vec<Option<String>> = rows.iter().map(label).collect();
    let ex: Vec<Example> = rows
        .iter()
        .zip(&labels)
        .map(|(r, l)| Example {
            text: &r.input,
            label: l.as_deref(),
        })
        .collect();
    let only: Option<String> = std::env::var("NLU_CLINC_ROWS").ok().filter(|v| v != "1");
    for (name, cfg) in clinc_row_configs() {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|x| x == name))
        {
            continue;
        }
        let started = Instant::now();
        let m = TraitModel::train_with(&ex, &[], Lang::En, &cfg).expect("training");
        let took = started.elapsed().as_secs_f64();
        clinc_row(name, took, &m, inscope, oos);
    }
}

/// The settings `clinc_rows` tries: the defaults, then one change from them per row.
fn clinc_row_configs() -> Vec<(&'static str, Config)> {
    let base = Config::default();
    let with = |f: &dyn Fn(&mut Config)| {
        let mut c = base.clone();
        f(&mut c);
        c
    };
    vec![
        ("default", base.clone()),
        ("min 8 epochs", with(&|c| c.min_epochs = 8)),
        ("min 12 epochs", with(&|c| c.min_epochs = 12)),
        ("not balanced", with(&|c| c.balanced = false)),
        ("ensemble 3", with(&|c| c.ensemble = 3)),
        ("l2 3e-5", with(&|c| c.l2 = 3e-5)),
        (
            "chars 1-6",
            with(&|c| {
                c.features.char_min = 1;
                c.features.char_max = 6;
            }),
        ),
        ("char weight 1", with(&|c| c.features.char_weight = 1.0)),
        ("min_grad 0.01", with(&|c| c.min_grad = 0.01)),
        ("prune 0.05", with(&|c| c.prune = 0.05)),
        ("prune 0.02", with(&|c| c.prune = 0.02)),
        ("no pruning", with(&|c| c.prune = 0.0)),
    ]
}

/// Prints one setting's in-scope accuracy and out-of-scope recall at each reject threshold.
fn clinc_row(
    name: &str,
    took: f64,
    m: &TraitModel,
    inscope: &[(String, String)],
    oos: &[(String, String)],
) {
    let top = |t: &str| decide(m, t);
    let ins: Vec<(Option<String>, f64, bool)> = inscope
        .iter()
        .map(|(t, l)| {
            let (p, s) = top(t);
            let ok = p.as_deref() == Some(l.as_str());
            (p, s, ok)
        })
        .collect();
    let out: Vec<(Option<String>, f64)> = oos.iter().map(|(t, _)| top(t)).collect();
    for tau in [0.0, 0.1, 0.2, 0.3, 0.4] {
        let acc = ins
            .iter()
            .filter(|(p, s, ok)| *ok && p.is_some() && *s >= tau)
            .count();
        let rej = out.iter().filter(|(p, s)| p.is_none() || *s < tau).count();
        println!(
            "{name:<20} train {took:>5.1} s  reject < {tau:.1}: in-scope {:>5.1} %  out-of-scope recall {:>5.1} %",
            100.0 * acc as f64 / ins.len() as f64,
            100.0 * rej as f64 / out.len() as f64
        );
    }
}

/// Prints each feature row's top-1 on `test` when trained (with calibration) on each of
/// `train`.
fn feature_rows(
    title: &str,
    cols: [&str; 2],
    train: [&[(String, Option<String>)]; 2],
    test: &[(String, Option<String>)],
) {
    println!("== Feature settings on {title}");
    println!("{:<32} {:>10} {:>10}", "setting", cols[0], cols[1]);
    for (name, cfg) in candidates().into_iter().filter(|(n, _)| is_feature_row(n)) {
        let cfg = Config {
            calibrate: true,
            ..cfg
        };
        let score = |data| top1(&train_synth(data, &cfg).0, test);
        println!(
            "{:<32} {:>10.3} {:>10.3}",
            name,
            score(train[0]),
            score(train[1])
        );
    }
    println!();
}

/// 5-fold CV accuracy on the training sentences of each corpus, per candidate setting.
fn cross_validate(corpora: &[(&str, Vec<Sentence>)], nested: bool) {
    let candidates = candidates();
    let repeats = std::env::var("NLU_CV_REPEATS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let k = 5;
    println!(
        "== {k}-fold cross-validation accuracy on the TRAINING sentences only \
         ({repeats} repeats with different fold assignments)"
    );
    println!(
        "{:<26} {:>8} {:>10} {:>8} {:>8}",
        "setting", "Chatbot", "AskUbuntu", "WebApps", "pooled"
    );
    for (name, cfg) in &candidates {
        let mut cells = Vec::new();
        let (mut right, mut total) = (0, 0);
        for (_, sents) in corpora {
            let train: Vec<&Sentence> = sents.iter().filter(|s| s.training).collect();
            let ok = cv_right(&train, cfg, k, repeats, 0x9e37_79b9);
            cells.push(ok as f64 / (repeats * train.len()) as f64);
            right += ok;
            total += repeats * train.len();
        }
        println!(
            "{:<26} {:>8.3} {:>10.3} {:>8.3} {:>8.3}",
            name,
            cells[0],
            cells[1],
            cells[2],
            right as f64 / total as f64
        );
    }
    println!();
    if nested {
        let pick = |names: &[&str]| -> Vec<(&str, Config)> {
            names
                .iter()
                .filter_map(|n| candidates.iter().find(|c| c.0 == *n).cloned())
                .collect()
        };
        nested_cv(
            corpora,
            &pick(&[
                "default",
                "char weight 1 (until 11-26)",
                "no char n-grams",
                "idf",
                "chars 3-5",
                "not balanced",
                "words only",
            ]),
        );
    }

    // The feature rows on the synthetic 150-label set: many labels told apart by their own
    // (pseudo-)words.
    let synth = Synth::new(150);
    let test = synth.data(1000, 7);
    let small = synth.data(1000, 1042);
    let large = synth.data(3000, 3042);
    feature_rows(
        "the synthetic 150-label set (held-out top-1)",
        ["1,000", "3,000"],
        [&small, &large],
        &test,
    );

    // Size against accuracy on the synthetic 150-label set (held-out sentences of the same
    // generator, never the benchmark corpora).
    println!("== Sparsity settings on the synthetic 150-label set (3,000 training sentences)");
    println!(
        "{:<26} {:>10} {:>14} {:>8}",
        "setting", "train s", "bytes per 1k", "top-1"
    );
    for (min_grad, prune) in [
        (0.01, 0.1),
        (0.01, 0.2),
        (0.03, 0.1),
        (0.03, 0.2),
        (0.1, 0.1),
    ] {
        let cfg = Config {
            min_grad,
            prune,
            ..Config::default()
        };
        let (model, secs) = train_synth(&large, &cfg);
        let bytes = serde_json::to_vec(&model).unwrap().len();
        println!(
            "{:<26} {:>10.2} {:>14.0} {:>8.3}",
            format!("min_grad {min_grad}, prune {prune}"),
            secs,
            bytes as f64 * 1000.0 / large.len() as f64,
            top1(&model, &test)
        );
    }
    println!();
}

fn top1(model: &TraitModel, test: &[(String, Option<String>)]) -> f64 {
    let labelled: Vec<_> = test
        .iter()
        .filter_map(|(t, l)| Some((t, l.as_ref()?)))
        .collect();
    let right = labelled
        .iter()
        .filter(|(t, l)| model.predict(t)[0].0 == **l)
        .count();
    right as f64 / labelled.len() as f64
}

// ---- speed -------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A pronounceable pseudo-word.
fn word(rng: &mut Rng) -> String {
    const ON: &[&str] = &[
        "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr",
    ];
    const NU: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou"];
    (0..2 + rng.below(2))
        .map(|_| format!("{}{}", ON[rng.below(ON.len())], NU[rng.below(NU.len())]))
        .collect()
}

/// Deterministic synthetic trait data: `labels` labels, `per_label` sentences each made of 2–3
/// of the label's 8 keywords among 3–6 words of a shared 300-word filler, plus 10 %
/// counter-examples of filler only.
struct Synth {
    keywords: Vec<Vec<String>>,
    filler: Vec<String>,
}

impl Synth {
    fn new(labels: usize) -> Synth {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        Synth {
            keywords: (0..labels)
                .map(|_| (0..8).map(|_| word(&mut rng)).collect())
                .collect(),
            filler: (0..300).map(|_| word(&mut rng)).collect(),
        }
    }

    fn sentence(&self, rng: &mut Rng, label: Option<usize>) -> String {
        let mut w: Vec<&str> = (0..3 + rng.below(4))
            .map(|_| self.filler[rng.below(300)].as_str())
            .collect();
        if let Some(l) = label {
            for _ in 0..2 + rng.below(2) {
                let pos = rng.below(w.len() + 1);
                w.insert(pos, &self.keywords[l][rng.below(8)]);
            }
        }
        w.join(" ")
    }

    fn data(&self, n: usize, seed: u64) -> Vec<(String, Option<String>)> {
        let mut rng = Rng(seed);
        let labels = self.keywords.len();
        (0..n)
            .map(|i| {
                let label = if i % 10 == 9 { None } else { Some(i % labels) };
                (
                    self.sentence(&mut rng, label),
                    label.map(|l| format!("label_{l}")),
                )
            })
            .collect()
    }
}

fn train_synth(data: &[(String, Option<String>)], cfg: &Config) -> (TraitModel, f64) {
    let ex: Vec<Example> = data
        .iter()
        .map(|(t, l)| Example {
            text: t,
            label: l.as_deref(),
        })
        .collect();
    let t0 = Instant::now();
    let m = TraitModel::train_with(&ex, &[], Lang::En, cfg).expect("training");
    (m, t0.elapsed().as_secs_f64())
}

fn speed() {
    println!("== Speed and size (synthetic 150-label trait set, release build, this machine)");
    let synth = Synth::new(150);
    for n in [1_000, 3_000, 15_000] {
        let data = synth.data(n, 42 + n as u64);
        let (model, secs) = train_synth(&data, &Config::default());
        let bytes = serde_json::to_vec(&model).unwrap().len();
        let test = synth.data(1000, 7);
        let mut times = Vec::with_capacity(test.len());
        let (mut right, mut labelled) = (0, 0);
        for (t, l) in &test {
            let t0 = Instant::now();
            let p = model.predict(t);
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            if let Some(l) = l {
                labelled += 1;
                right += (p[0].0 == *l) as usize;
            }
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{n:>6} sentences: train {secs:>6.2} s | predict p50 {:.3} ms p99 {:.3} ms | \
             model {bytes} bytes = {:.0} bytes per 1,000 sentences | held-out top-1 {:.3}",
            times[times.len() / 2],
            times[times.len() * 99 / 100],
            bytes as f64 * 1000.0 / n as f64,
            right as f64 / labelled as f64
        );
    }
}
