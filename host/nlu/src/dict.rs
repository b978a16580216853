//! Dictionary entities (`type: dict`): an entity's `dictionary` maps each
//! canonical key to its surface forms (synonyms); the key itself is a surface form too. A text
//! is searched for every surface form at once.
//!
//! Matching:
//! - case-insensitive (per-character Unicode lower-casing), on whole words: a form that begins
//!   (ends) with a letter or digit only matches where the text has no letter or digit just
//!   before (after) it, so `baju` does not match inside `bajuku`;
//! - multi-word forms match across any run of whitespace (`new  york` matches `New York`);
//! - leftmost-longest and non-overlapping: of the valid matches, the leftmost wins, then the
//!   longest (`jakarta selatan` over `jakarta`);
//! - typo tolerance for words the exact search left uncovered: a word of at least 5 characters
//!   matches a single-word form of at least 5 characters within edit distance 1 (2 when both
//!   have at least 8 characters), counting a swap of neighbours as one edit. Words with digits
//!   are matched exactly only. Exact hits score 1.0, fuzzy ones `1 - distance / length` (e.g.
//!   0.8 for one typo in a five-letter word);
//! - with the `klitika` profile ([`DictMatcher::with_profile`]), an Indonesian clitic suffix
//!   (`-ku -mu -nya -lah -kah -pun -tah` and possessive+particle pairs such as `-nyalah`) may
//!   follow a form: `bajunya` yields `baju` (the hit spans the form, not the suffix).
//!
//! Offsets are characters of the original text (end exclusive) and `value` is the text as
//! written, whitespace included.
//!
//! Cost: building the automaton is linear in the total size of the forms and happens once per
//! matcher, lazily (it is not serialised: a deserialised matcher rebuilds it on first use).
//! An exact search is linear in the text plus the number of candidate matches. The typo search
//! compares each uncovered word of five or more letters with the single-word forms within two
//! characters of its length (a bounded edit distance, O(len²) each, usually cut short), so it
//! is O(words × forms of similar length): fine for dictionaries of tens of thousands of forms,
//! not for millions.
//!
//! Limits: no stemming (only the clitics above), no typo tolerance on multi-word forms or on
//! words shorter than five characters; a surface form shared by two keys belongs to the key
//! that sorts first (or to the key it is equal to).

use super::Lang;
use super::text;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

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

/// Words of at least this many characters get one typo.
const FUZZY_MIN_1: usize = 5;
/// Words of at least this many characters get two typos.
const FUZZY_MIN_2: usize = 8;

/// Indonesian clitic suffixes accepted after a form by the `klitika` profile.
const CLITICS: &[&str] = &["ku", "mu", "nya", "lah", "kah", "pun", "tah"];
const POSSESSIVES: &[&str] = &["ku", "mu", "nya"];
const PARTICLES: &[&str] = &["lah", "kah", "pun", "tah"];

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DictMatcher {
    lang: Lang,
    /// Key → surface forms, as declared.
    dictionary: BTreeMap<String, Vec<String>>,
    /// Accept Indonesian clitic suffixes after a form (profile `klitika`).
    #[serde(default)]
    clitics: bool,
    #[serde(skip)]
    built: OnceLock<Built>,
}

/// The search structures, derived from the dictionary.
#[derive(Clone, Debug)]
struct Built {
    /// Over the folded (lower-cased, whitespace-collapsed) forms; `None` for an empty dictionary.
    automaton: Option<AhoCorasick>,
    /// Per automaton pattern: (key index, first char is a word char, last char is a word char).
    patterns: Vec<(usize, bool, bool)>,
    keys: Vec<String>,
    /// Single-word forms eligible for typo tolerance: (folded chars, key index), by length.
    fuzzy: Vec<(Vec<char>, usize)>,
}

impl DictMatcher {
    /// A matcher of the `default` profile.
    pub fn new(dictionary: &BTreeMap<String, Vec<String>>, lang: Lang) -> DictMatcher {
        DictMatcher {
            lang,
            dictionary: dictionary.clone(),
            clitics: false,
            built: OnceLock::new(),
        }
    }

    /// A matcher of a dict profile: `klitika` also accepts Indonesian clitic suffixes after a
    /// form; any other profile behaves as `default`.
    pub fn with_profile(
        dictionary: &BTreeMap<String, Vec<String>>,
        lang: Lang,
        profile: &str,
    ) -> DictMatcher {
        let mut m = DictMatcher::new(dictionary, lang);
        m.clitics = profile == "klitika";
        m
    }

    pub fn lang(&self) -> Lang {
        self.lang
    }

    fn built(&self) -> &Built {
        self.built.get_or_init(|| build(&self.dictionary))
    }

    /// Every hit in `text`, in text order, non-overlapping.
    pub fn find(&self, text: &str) -> Vec<DictHit> {
        let b = self.built();
        let folded = Folded::new(text);
        // The original text's characters and their byte offsets (plus the end).
        let chars: Vec<char> = text.chars().collect();
        let mut char_bytes: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        char_bytes.push(text.len());
        let is_word = |i: usize| chars.get(i).is_some_and(|c| c.is_alphanumeric());

        // (char start, char end, key index, score)
        let mut found: Vec<(usize, usize, usize, f64)> = Vec::new();
        if let Some(ac) = &b.automaton {
            for m in ac.find_overlapping_iter(folded.text.as_str()) {
                let (key, word_start, word_end) = b.patterns[m.pattern().as_usize()];
                let cs = folded.char_at_byte(m.start());
                let ce = folded.char_at_byte(m.end());
                let start = folded.orig[cs];
                let end = folded.orig[ce - 1] + 1;
                if word_start && start > 0 && is_word(start - 1) {
                    continue;
                }
                if word_end && is_word(end) && !(self.clitics && clitic_follows(&chars, end)) {
                    continue;
                }
                found.push((start, end, key, 1.0));
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut hits: Vec<(usize, usize, usize, f64)> = Vec::new();
        for f in found {
            if hits.last().is_none_or(|h| f.0 >= h.1) {
                hits.push(f);
            }
        }

        if !b.fuzzy.is_empty() {
            let mut fuzzy_hits = Vec::new();
            for tok in text::tokenize(text) {
                let (s, e) = (tok.char_start, tok.char_end);
                if !tok.is_word()
                    || e - s < FUZZY_MIN_1
                    || tok.norm.chars().any(|c| c.is_numeric())
                    || hits.iter().any(|h| h.0 < e && s < h.1)
                {
                    continue;
                }
                let word: Vec<char> = tok.norm.chars().collect();
                if let Some((key, score)) = best_fuzzy(&word, &b.fuzzy) {
                    fuzzy_hits.push((s, e, key, score));
                }
            }
            if !fuzzy_hits.is_empty() {
                hits.extend(fuzzy_hits);
                hits.sort_by_key(|h| h.0);
            }
        }

        hits.into_iter()
            .map(|(s, e, key, score)| DictHit {
                key: b.keys[key].clone(),
                value: text[char_bytes[s]..char_bytes[e]].to_string(),
                char_start: s,
                char_end: e,
                score,
            })
            .collect()
    }
}

fn build(dictionary: &BTreeMap<String, Vec<String>>) -> Built {
    let keys: Vec<String> = dictionary.keys().cloned().collect();
    // Folded form → key index. A form equal to a key belongs to that key; otherwise the
    // first key (in sorted order) that lists it.
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for (ki, key) in keys.iter().enumerate() {
        let f = fold_form(key);
        if f.is_empty() {
            continue;
        }
        if owner.insert(f.clone(), ki).is_none() {
            order.push(f);
        }
    }
    for (ki, forms) in dictionary.values().enumerate() {
        for form in forms {
            let f = fold_form(form);
            if !f.is_empty() && !owner.contains_key(&f) {
                owner.insert(f.clone(), ki);
                order.push(f);
            }
        }
    }
    let mut patterns = Vec::with_capacity(order.len());
    let mut fuzzy = Vec::new();
    for f in &order {
        let key = owner[f];
        let first = f.chars().next().is_some_and(char::is_alphanumeric);
        let last = f.chars().last().is_some_and(char::is_alphanumeric);
        patterns.push((key, first, last));
        let cs: Vec<char> = f.chars().collect();
        if cs.len() >= FUZZY_MIN_1
            && cs
                .iter()
                .all(|c| c.is_alphabetic() || matches!(c, '\'' | '-'))
        {
            fuzzy.push((cs, key));
        }
    }
    // By length (stable: ties keep the dictionary order), so a word only meets the forms
    // of similar length.
    fuzzy.sort_by_key(|f| f.0.len());
    let automaton = if order.is_empty() {
        None
    } else {
        Some(
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .build(&order)
                .expect("dictionary automaton"),
        )
    };
    Built {
        automaton,
        patterns,
        keys,
        fuzzy,
    }
}

/// Lower-cases one character to one character (the first of its lower-case mapping), so that
/// folded and original texts align character by character.
fn fold_char(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// A surface form as searched: trimmed, folded, whitespace runs collapsed to one space.
fn fold_form(form: &str) -> String {
    Folded::new(form.trim()).text
}

/// A text folded for search, with the map back to the original characters.
struct Folded {
    text: String,
    /// Byte offset in `text` of each folded character.
    starts: Vec<usize>,
    /// Original character index of each folded character.
    orig: Vec<usize>,
}

impl Folded {
    fn new(text: &str) -> Folded {
        let mut f = Folded {
            text: String::with_capacity(text.len()),
            starts: Vec::new(),
            orig: Vec::new(),
        };
        let mut in_space = false;
        for (ci, c) in text.chars().enumerate() {
            let c = if c.is_whitespace() {
                if in_space {
                    continue;
                }
                in_space = true;
                ' '
            } else {
                in_space = false;
                fold_char(c)
            };
            f.starts.push(f.text.len());
            f.orig.push(ci);
            f.text.push(c);
        }
        f
    }

    /// The folded character index at a byte offset (a character boundary, or the end).
    fn char_at_byte(&self, byte: usize) -> usize {
        match self.starts.binary_search(&byte) {
            Ok(i) => i,
            Err(i) => i,
        }
    }
}

/// Whether the word characters from `at` to the end of the word are a clitic suffix.
fn clitic_follows(chars: &[char], at: usize) -> bool {
    let rest: String = chars[at..]
        .iter()
        .take_while(|c| c.is_alphanumeric())
        .map(|&c| fold_char(c))
        .collect();
    CLITICS.contains(&rest.as_str())
        || POSSESSIVES
            .iter()
            .any(|p| rest.strip_prefix(p).is_some_and(|r| PARTICLES.contains(&r)))
}

/// The closest single-word form to `word` within its typo allowance: (key index, score).
fn best_fuzzy(word: &[char], forms: &[(Vec<char>, usize)]) -> Option<(usize, f64)> {
    let mut best: Option<(usize, usize, usize)> = None; // (distance, form len, key)
    let from = forms.partition_point(|f| f.0.len() + 2 < word.len());
    for (form, key) in &forms[from..] {
        if form.len() > word.len() + 2 {
            break;
        }
        let shortest = word.len().min(form.len());
        let allowed = if shortest >= FUZZY_MIN_2 {
            2
        } else if shortest >= FUZZY_MIN_1 {
            1
        } else {
            0
        };
        if allowed == 0 || word.len().abs_diff(form.len()) > allowed {
            continue;
        }
        let limit = best.map_or(allowed, |b| b.0.min(allowed));
        if let Some(d) = bounded_distance(word, form, limit)
            && d > 0
            && best.is_none_or(|b| d < b.0)
        {
            best = Some((d, form.len(), *key));
        }
    }
    best.map(|(d, len, key)| (key, 1.0 - d as f64 / len.max(word.len()) as f64))
}

/// Optimal string alignment distance (insertions, deletions, substitutions and swaps of
/// neighbours) between `a` and `b`, or `None` when it exceeds `limit`.
fn bounded_distance(a: &[char], b: &[char], limit: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    let n = b.len();
    let mut prev2: Vec<usize> = vec![0; n + 1];
    let mut prev: Vec<usize> = (0..=n).collect();
    let mut cur: Vec<usize> = vec![0; n + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        let mut row_min = cur[0];
        for j in 1..=n {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(prev2[j - 2] + 1);
            }
            cur[j] = v;
            row_min = row_min.min(v);
        }
        if row_min > limit {
            return None;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    let d = prev[n];
    (d <= limit).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(entries: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    fn shop() -> DictMatcher {
        DictMatcher::new(
            &dict(&[
                ("baju", &["baju", "pakaian", "kemeja"]),
                ("celana", &["celana", "jeans"]),
                ("jakarta", &["jakarta", "jkt", "DKI Jakarta"]),
                ("jaksel", &["jakarta selatan"]),
                ("sepatu", &["sneakers", "sepatu olahraga"]),
            ]),
            Lang::Id,
        )
    }

    fn keys(hits: &[DictHit]) -> Vec<(&str, &str, usize, usize)> {
        hits.iter()
            .map(|h| (h.key.as_str(), h.value.as_str(), h.char_start, h.char_end))
            .collect()
    }

    #[test]
    fn matches_keys_and_synonyms_case_insensitively() {
        let m = shop();
        let hits = m.find("Mau beli BAJU dan Jeans");
        assert_eq!(
            keys(&hits),
            [("baju", "BAJU", 9, 13), ("celana", "Jeans", 18, 23)]
        );
        assert!(hits.iter().all(|h| h.score == 1.0));
        // The key itself is a surface form even when the list omits it.
        let hits = shop().find("ada Sepatu?");
        assert_eq!(keys(&hits), [("sepatu", "Sepatu", 4, 10)]);
    }

    #[test]
    fn whole_words_only() {
        let m = shop();
        assert!(m.find("bajuku bagus").is_empty());
        assert!(m.find("kebaju").is_empty());
        assert!(m.find("jkt48").is_empty());
        assert_eq!(keys(&m.find("baju, celana.")).len(), 2);
        assert_eq!(keys(&m.find("(baju)")), [("baju", "baju", 1, 5)]);
    }

    #[test]
    fn klitika_profile_accepts_clitic_suffixes() {
        let d = dict(&[("baju", &["pakaian"])]);
        let m = DictMatcher::with_profile(&d, Lang::Id, "klitika");
        assert_eq!(keys(&m.find("bajuku bagus")), [("baju", "baju", 0, 4)]);
        assert_eq!(keys(&m.find("pakaiannyalah")), [("baju", "pakaian", 0, 7)]);
        assert!(m.find("bajukan").is_empty());
        let plain = DictMatcher::with_profile(&d, Lang::Id, "default");
        assert!(plain.find("bajuku").is_empty());
    }

    #[test]
    fn longest_match_wins_and_multi_word_spans_whitespace() {
        let m = shop();
        assert_eq!(
            keys(&m.find("kirim ke Jakarta  Selatan ya")),
            [("jaksel", "Jakarta  Selatan", 9, 25)]
        );
        assert_eq!(
            keys(&m.find("kirim ke jakarta utara")),
            [("jakarta", "jakarta", 9, 16)]
        );
        assert_eq!(
            keys(&m.find("dki\tjakarta")),
            [("jakarta", "dki\tjakarta", 0, 11)]
        );
        // A longer form that fails the word boundary does not hide a shorter valid one.
        let m = DictMatcher::new(&dict(&[("ny", &["new york"]), ("york", &[])]), Lang::En);
        assert_eq!(keys(&m.find("anew york")), [("york", "york", 5, 9)]);
        assert_eq!(keys(&m.find("New York!")), [("ny", "New York", 0, 8)]);
    }

    #[test]
    fn offsets_are_characters_in_multibyte_text() {
        let m = DictMatcher::new(&dict(&[("café", &["kafé", "kopi"])]), Lang::Id);
        let hits = m.find("Ké KAFÉ 😀 kopi");
        assert_eq!(
            keys(&hits),
            [("café", "KAFÉ", 3, 7), ("café", "kopi", 10, 14)]
        );
    }

    #[test]
    fn tolerates_typos_in_longer_words() {
        let m = DictMatcher::new(
            &dict(&[
                ("kemeja", &[]),
                ("celana", &[]),
                ("baju", &[]),
                ("bandung", &[]),
                ("yogyakarta", &[]),
            ]),
            Lang::Id,
        );
        // One substitution, one swap, one deletion on words of 5+ letters.
        let h = m.find("kemaja");
        assert_eq!(keys(&h), [("kemeja", "kemaja", 0, 6)]);
        assert!(h[0].score < 1.0 && h[0].score > 0.5);
        assert_eq!(keys(&m.find("clana")), [("celana", "clana", 0, 5)]);
        assert_eq!(keys(&m.find("bnadung")), [("bandung", "bnadung", 0, 7)]);
        // Two typos only for 8+ letters.
        assert_eq!(
            keys(&m.find("yogakartta")),
            [("yogyakarta", "yogakartta", 0, 10)]
        );
        assert!(m.find("bnadugg").is_empty());
        // Short words: exact only.
        assert!(m.find("baja").is_empty());
        // Exact beats fuzzy and scores 1.0.
        assert_eq!(m.find("bandung")[0].score, 1.0);
    }

    #[test]
    fn survives_serde_round_trip_and_empty_dictionaries() {
        let m = shop();
        let json = serde_json::to_string(&m).unwrap();
        let back: DictMatcher = serde_json::from_str(&json).unwrap();
        assert_eq!(back.find("beli kemeja"), m.find("beli kemeja"));
        assert_eq!(back.find("beli kemeja").len(), 1);
        let empty = DictMatcher::new(&BTreeMap::new(), Lang::En);
        assert!(empty.find("anything at all").is_empty());
        let blank = DictMatcher::new(&dict(&[("x", &["", "  "])]), Lang::En);
        assert_eq!(keys(&blank.find("x y")), [("x", "x", 0, 1)]);
    }

    mod fuzz {
        use super::super::*;
        use super::dict;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

            #[test]
            fn hits_are_valid_character_spans(
                words in prop::collection::vec(
                    prop_oneof![
                        Just("İstanbul"), Just("istanbul"), Just("kafé"), Just("KAFE"),
                        Just("new"), Just("york"), Just("straße"), Just("😀"), Just("bandnug"),
                        Just("jakarta"), Just("selatan"), Just("x"), Just("-"), Just(","),
                    ],
                    0..12,
                ),
                seps in prop::collection::vec(prop_oneof![Just(""), Just(" "), Just("  "), Just("\t")], 12),
            ) {
                let text: String = words
                    .iter()
                    .zip(&seps)
                    .map(|(w, s)| format!("{w}{s}"))
                    .collect();
                let m = DictMatcher::new(
                    &dict(&[
                        ("istanbul", &["İstanbul"]),
                        ("cafe", &["kafé", "café"]),
                        ("ny", &["new york", "New  York"]),
                        ("jaksel", &["jakarta selatan"]),
                        ("bandung", &[]),
                        ("strasse", &["straße"]),
                    ]),
                    Lang::Id,
                );
                let chars: Vec<char> = text.chars().collect();
                let mut last = 0;
                for h in m.find(&text) {
                    prop_assert!(h.char_start >= last && h.char_start < h.char_end);
                    prop_assert!(h.char_end <= chars.len());
                    let slice: String = chars[h.char_start..h.char_end].iter().collect();
                    prop_assert_eq!(&slice, &h.value);
                    prop_assert!(h.score > 0.0 && h.score <= 1.0);
                    last = h.char_end;
                }
            }
        }
    }
}
