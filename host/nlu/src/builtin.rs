//! Rule-based phrase profiles: `number`, `email`, `phone`, `url`,
//! `currency`, `time` and `units`, for English and Indonesian text. Both languages' words are
//! recognised whatever the NLU's `lang` (people mix them); `lang` decides what is ambiguous:
//! `1.500` is 1500 in `id` and 1.5 in `en` (and other languages), `0812…` is an Indonesian
//! number in `id`.
//!
//! What each profile finds and resolves to:
//! - `number`: digits with `.`/`,` grouping in both conventions and decimals (`1.250.000`,
//!   `1,250,000.50`, `2,5`), an optional leading minus, number words (en `one`…`nineteen`, tens,
//!   `hundred`, `thousand`, `million`, `billion`, `a hundred`, `one hundred and five`; id
//!   `nol`…`sembilan`, `sepuluh`, `sebelas`, `… belas`, `… puluh`, `seratus`/`… ratus`,
//!   `seribu`/`… ribu`, `sejuta`/`… juta`, `miliar`, `setengah`), digits with scale words or
//!   their short forms (`3 juta`, `2.5 million`, `50rb`, `10k`, `2jt`). Digits inside a
//!   phone number, email, URL, `15:30` time or `17/08/2024` date are left out. Resolved: the
//!   value.
//! - `email`: `local@domain.tld`. Resolved: the address lower-cased.
//! - `phone`: `+62 812-3456-7890`, `0812 3456 7890`, `(021) 555-1234`, `628123456789`,
//!   `+1 (555) 123-4567`: 8 to 15 digits, starting with `+`, `0` or `62`, single spaces,
//!   dashes, dots or parentheses between digit groups. Resolved: `+` and the digits; a local
//!   number (leading `0`) becomes `+62…` when `lang` is `id` or when it is a `08…` mobile
//!   number, and stays as written (digits only) otherwise.
//! - `url`: `http(s)://…`, `www.…`, bare domains ending in a known top-level domain
//!   (`kata.ai`, `tokopedia.co.id/path`), trailing punctuation left out. Resolved: the URL,
//!   with `http://` added when it has no scheme.
//! - `currency`: an amount with a currency before (`Rp 50.000`, `Rp50rb`, `IDR 50k`, `$5.99`,
//!   `US$ 10`, `USD 10`, `€5`, `£3`, `SGD 20`, `RM 15`) or after (`10 dollars`, `5 dolar`,
//!   `50.000 rupiah`, `20 euro`), or Indonesian money slang without one (`50rb`, `50 ribu`,
//!   `2 jt`, `1,5 juta`, and `50k` in `id`), which means rupiah. Resolved:
//!   `{amount, currency}` with an ISO code. Rupiah amounts read `.` as grouping; other
//!   currencies follow the English convention.
//! - `time`: clock times (`15:30`, `3pm`, `3:30 p.m.`, `7 o'clock`, `jam 3 sore`,
//!   `pukul 10.30 pagi`, `jam setengah tujuh malam` = 18:30, `jam 3 lewat 15`,
//!   `jam 4 kurang seperempat` = 3:45, `noon`, `midnight`,
//!   `tengah malam`) resolve to `{hour, minute}` (24-hour); relative days (`today`,
//!   `tonight`, `tomorrow`, `yesterday`, `the day after tomorrow`, `hari ini`, `besok`,
//!   `lusa`, `kemarin`, `nanti malam`) to `{dayOffset}`; a day next to a clock time
//!   (`besok jam 3 sore`, `tomorrow at 3pm`, `3pm tomorrow`, and with a part of the day
//!   between them: `besok sore jam 3`, `tomorrow evening at 7`) is one span with all three
//!   keys.
//! - `units`: a number (digits or words) followed by a unit of measure: `kg g mg km m cm mm
//!   l ml` and their names (`kilo`, `gram`, `liter`, `meter`, …). Resolved: `{value, unit}`
//!   with the unit symbol.
//!
//! Offsets are characters of the text (end exclusive); hits of one profile never overlap
//! (the leftmost, then the longest wins).
//!
//! Cost: one pass of a few regular expressions (compiled once per process) and a linear
//! tokenisation; everything is linear in the text.
//!
//! Limits: no dates, durations or ranges; `50 ribu orang` is rupiah to the `currency` profile;
//! of two phone numbers separated only by a space, only the first is found;
//! fractions other than `setengah` and ordinals are not numbers.

use super::Lang;
use regex::Regex;
use serde_json::{Value, json};
use std::sync::LazyLock;

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
pub fn find(profile: &str, text: &str, lang: Lang) -> Option<Vec<BuiltinHit>> {
    let raw = match profile {
        "number" => numbers(text, lang),
        "email" => emails(text),
        "phone" => phones(text, lang),
        "url" => urls(text),
        "currency" => currencies(text, lang),
        "time" => times(text),
        "units" => units(text, lang),
        _ => return None,
    };
    Some(finish(text, raw))
}

/// A hit in byte offsets, before the overlap selection.
struct Raw {
    start: usize,
    end: usize,
    resolved: Value,
}

fn raw(start: usize, end: usize, resolved: Value) -> Raw {
    Raw {
        start,
        end,
        resolved,
    }
}

/// Leftmost-longest non-overlapping selection, byte offsets to characters.
fn finish(text: &str, mut raw: Vec<Raw>) -> Vec<BuiltinHit> {
    raw.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    starts.push(text.len());
    let to_char = |b: usize| starts.binary_search(&b).unwrap_or_else(|i| i);
    let mut out: Vec<BuiltinHit> = Vec::new();
    let mut last_end = 0;
    for r in raw {
        if r.start < last_end || r.start >= r.end {
            continue;
        }
        last_end = r.end;
        out.push(BuiltinHit {
            value: text[r.start..r.end].to_string(),
            char_start: to_char(r.start),
            char_end: to_char(r.end),
            resolved: r.resolved,
        });
    }
    out
}

/// The character before byte `at`, if any.
fn char_before(text: &str, at: usize) -> Option<char> {
    text[..at].chars().next_back()
}

/// The character at byte `at`, if any.
fn char_at(text: &str, at: usize) -> Option<char> {
    text[at..].chars().next()
}

fn is_word_char(c: Option<char>) -> bool {
    c.is_some_and(char::is_alphanumeric)
}

/// A number as JSON: an integer when it is one.
fn num_json(v: f64) -> Value {
    let r = v.round();
    if (v - r).abs() < 1e-9 && r.abs() < 9e15 {
        json!(r as i64)
    } else {
        json!(v)
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers

/// How a lone `.` or `,` followed by three digits reads: grouping (`id` for `.`, `en` for `,`)
/// or decimal.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Conv {
    /// `1.500` = 1500, `1,5` = 1.5.
    Id,
    /// `1,500` = 1500, `1.5` = 1.5.
    En,
}

fn conv_of(lang: Lang) -> Conv {
    match lang {
        Lang::Id => Conv::Id,
        _ => Conv::En,
    }
}

/// Reads a digit string with `.`/`,` separators: grouping in threes and at most one decimal
/// mark. `None` when the separators make no number (`1.2.3`, `12,34,567`).
fn parse_digits(s: &str, conv: Conv) -> Option<f64> {
    let seps: Vec<char> = s.chars().filter(|c| matches!(c, '.' | ',')).collect();
    if seps.is_empty() {
        return s.parse().ok();
    }
    let last = *seps.last().unwrap();
    let mixed = seps.iter().any(|&c| c != last);
    let (group, decimal): (Option<char>, Option<char>) = if mixed {
        if seps.iter().filter(|&&c| c == last).count() != 1 {
            return None;
        }
        (Some(if last == '.' { ',' } else { '.' }), Some(last))
    } else if seps.len() > 1 {
        (Some(last), None)
    } else {
        let (a, b) = s.split_once(last).unwrap();
        if b.len() == 3 && a.len() <= 3 && !a.starts_with('0') {
            match (conv, last) {
                (Conv::Id, '.') | (Conv::En, ',') => (Some(last), None),
                _ => (None, Some(last)),
            }
        } else {
            (None, Some(last))
        }
    };
    let (int_part, frac) = match decimal {
        Some(d) => {
            let k = s.rfind(d).unwrap();
            (&s[..k], Some(&s[k + 1..]))
        }
        None => (s, None),
    };
    let mut digits = String::new();
    match group {
        Some(g) => {
            let parts: Vec<&str> = int_part.split(g).collect();
            if parts[0].is_empty()
                || parts[0].len() > 3
                || (parts.len() > 1 && parts[0].starts_with('0'))
                || parts[1..].iter().any(|p| p.len() != 3)
            {
                return None;
            }
            digits.extend(parts);
        }
        None => digits.push_str(int_part),
    }
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if let Some(f) = frac {
        digits.push('.');
        digits.push_str(f);
    }
    digits.parse().ok()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum LexKind {
    Digits,
    Word,
}

/// A run of ASCII digits (with inner `.`/`,` between digits) or of letters; byte offsets.
#[derive(Debug)]
struct Lex {
    kind: LexKind,
    start: usize,
    end: usize,
    low: String,
}

fn lex(text: &str) -> Vec<Lex> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let byte_at = |i: usize| chars.get(i).map_or(text.len(), |x| x.0);
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (b, c) = chars[i];
        let kind = if c.is_ascii_digit() {
            i += 1;
            while i < chars.len() {
                let c = chars[i].1;
                if c.is_ascii_digit() {
                    i += 1;
                } else if matches!(c, '.' | ',')
                    && chars.get(i + 1).is_some_and(|x| x.1.is_ascii_digit())
                {
                    i += 2;
                } else {
                    break;
                }
            }
            LexKind::Digits
        } else if c.is_alphabetic() {
            while i < chars.len() && chars[i].1.is_alphabetic() {
                i += 1;
            }
            LexKind::Word
        } else {
            i += 1;
            continue;
        };
        let end = byte_at(i);
        out.push(Lex {
            kind,
            start: b,
            end,
            low: text[b..end].to_lowercase(),
        });
    }
    out
}

/// Whether two neighbouring tokens may belong to one phrase: separated by spaces or tabs,
/// glued digits-then-letters (`50rb`), or a hyphen between words (`twenty-one`).
fn joinable(text: &str, a: &Lex, b: &Lex) -> bool {
    let gap = &text[a.end..b.start];
    if gap.is_empty() {
        return a.kind == LexKind::Digits && b.kind == LexKind::Word;
    }
    if gap == "-" {
        return a.kind == LexKind::Word && b.kind == LexKind::Word;
    }
    gap.chars().all(|c| c == ' ' || c == '\t' || c == '\u{a0}')
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Wk {
    /// 0–19 (en), 0–11 (id).
    Unit(f64),
    /// en twenty … ninety.
    Tens(f64),
    Belas,
    Puluh,
    Hundred,
    /// `seratus`.
    SeHundred,
    Scale(f64),
    /// `seribu`, `sejuta`, `semiliar`.
    SeScale(f64),
    /// `k` glued to digits.
    K,
    /// `setengah`.
    Half,
    And,
    A,
}

fn word_kind(w: &str) -> Option<Wk> {
    use Wk::*;
    Some(match w {
        "zero" | "nol" => Unit(0.0),
        "one" | "satu" => Unit(1.0),
        "two" | "dua" => Unit(2.0),
        "three" | "tiga" => Unit(3.0),
        "four" | "empat" => Unit(4.0),
        "five" | "lima" => Unit(5.0),
        "six" | "enam" => Unit(6.0),
        "seven" | "tujuh" => Unit(7.0),
        "eight" | "delapan" => Unit(8.0),
        "nine" | "sembilan" => Unit(9.0),
        "ten" | "sepuluh" => Unit(10.0),
        "eleven" | "sebelas" => Unit(11.0),
        "twelve" => Unit(12.0),
        "thirteen" => Unit(13.0),
        "fourteen" => Unit(14.0),
        "fifteen" => Unit(15.0),
        "sixteen" => Unit(16.0),
        "seventeen" => Unit(17.0),
        "eighteen" => Unit(18.0),
        "nineteen" => Unit(19.0),
        "twenty" => Tens(20.0),
        "thirty" => Tens(30.0),
        "forty" => Tens(40.0),
        "fifty" => Tens(50.0),
        "sixty" => Tens(60.0),
        "seventy" => Tens(70.0),
        "eighty" => Tens(80.0),
        "ninety" => Tens(90.0),
        "belas" => Belas,
        "puluh" => Puluh,
        "hundred" | "ratus" => Hundred,
        "seratus" => SeHundred,
        "thousand" | "ribu" | "rb" | "rebu" => Scale(1e3),
        "million" | "juta" | "jt" => Scale(1e6),
        "billion" | "miliar" | "milyar" => Scale(1e9),
        "trillion" | "triliun" => Scale(1e12),
        "seribu" => SeScale(1e3),
        "sejuta" => SeScale(1e6),
        "semiliar" | "semilyar" => SeScale(1e9),
        "k" => K,
        "setengah" => Half,
        "and" => And,
        "a" => A,
        _ => return None,
    })
}

/// A number phrase over tokens `start_tok..end_tok`.
#[derive(Clone, Debug)]
struct NumPhrase {
    start_tok: usize,
    end_tok: usize,
    value: f64,
    /// The last scale word (`ribu`, `rb`, `k`, `million`, …), lower-cased.
    scale: Option<String>,
}

/// The longest number phrase starting at token `i`.
fn parse_number(text: &str, toks: &[Lex], i: usize, conv: Conv) -> Option<NumPhrase> {
    if is_word_char(char_before(text, toks[i].start)) && !glued_currency(toks, i) {
        return None;
    }
    let mut acc = NumReader {
        total: 0.0,
        group: 0.0,
        pending: None,
        last_scale: f64::INFINITY,
        scale_word: None,
    };
    let mut best: Option<NumPhrase> = None;
    let mut j = i;
    while j < toks.len() {
        if j > i && !joinable(text, &toks[j - 1], &toks[j]) {
            break;
        }
        let took = match toks[j].kind {
            LexKind::Digits => acc.digits(toks, i, j, conv),
            LexKind::Word => acc.word(toks, i, j),
        };
        let Some(counts) = took else {
            break;
        };
        j += 1;
        if counts {
            best = Some(NumPhrase {
                start_tok: i,
                end_tok: j,
                value: acc.total + acc.group + acc.pending.unwrap_or(0.0),
                scale: acc.scale_word.clone(),
            });
        }
    }
    best
}

/// Whether token `i` is digits glued after a currency code (`Rp50.000`, `USD10`): the only
/// number that may start inside a word.
fn glued_currency(toks: &[Lex], i: usize) -> bool {
    i > 0
        && toks[i].kind == LexKind::Digits
        && toks[i - 1].end == toks[i].start
        && toks[i - 1].kind == LexKind::Word
        && currency_code(&toks[i - 1].low).is_some()
}

/// The value of a number phrase read so far: `total` of the finished scale groups, the
/// current `group` below a scale, and a `pending` unit not yet placed.
struct NumReader {
    total: f64,
    group: f64,
    pending: Option<f64>,
    /// The last scale met: later scales must be smaller.
    last_scale: f64,
    /// The last scale word, lower-cased.
    scale_word: Option<String>,
}

impl NumReader {
    /// Reads digits at token `j` of a phrase starting at `i`. `None` when they end the
    /// phrase, else whether the phrase may end after them.
    fn digits(&mut self, toks: &[Lex], i: usize, j: usize, conv: Conv) -> Option<bool> {
        let tok = &toks[j];
        if j == i {
            self.pending = Some(parse_digits(&tok.low, conv)?);
            return Some(true);
        }
        // `2 juta 500 ribu`: digits after a scale count once a smaller scale (or `ratus`)
        // follows.
        let after_scale = self.pending.is_none()
            && self.group == 0.0
            && toks[j - 1].kind == LexKind::Word
            && matches!(
                word_kind(&toks[j - 1].low),
                Some(Wk::Scale(_) | Wk::SeScale(_))
            );
        if !after_scale {
            return None;
        }
        self.pending = Some(parse_digits(&tok.low, conv)?);
        Some(false)
    }

    /// Reads the number word at token `j` of a phrase starting at `i`. `None` when it ends
    /// the phrase, else whether the phrase may end after it.
    fn word(&mut self, toks: &[Lex], i: usize, j: usize) -> Option<bool> {
        let tok = &toks[j];
        let mut k = word_kind(&tok.low)?;
        if k == Wk::K {
            // Only glued to digits: `50k`.
            if j == i || toks[j - 1].kind != LexKind::Digits || toks[j - 1].end != tok.start {
                return None;
            }
            k = Wk::Scale(1e3);
        }
        match k {
            Wk::Scale(s) | Wk::SeScale(s) => self.scale(k, s, &tok.low).then_some(true),
            Wk::Half => {
                match self.pending {
                    Some(p) if p.fract() == 0.0 => self.pending = Some(p + 0.5),
                    None if j == i => self.pending = Some(0.5),
                    _ => return None,
                }
                Some(true)
            }
            Wk::And => {
                if self.pending.is_some() || (self.group == 0.0 && self.total == 0.0) {
                    return None;
                }
                Some(false)
            }
            Wk::A => {
                let next_is_multiplier = toks.get(j + 1).is_some_and(|n| {
                    matches!(word_kind(&n.low), Some(Wk::Hundred) | Some(Wk::Scale(_)))
                });
                if j != i || !next_is_multiplier {
                    return None;
                }
                self.pending = Some(1.0);
                Some(false)
            }
            Wk::K => unreachable!(),
            Wk::Unit(_) | Wk::Tens(_) | Wk::Belas | Wk::Puluh | Wk::Hundred | Wk::SeHundred => {
                self.below_scale(k).then_some(true)
            }
        }
    }

    /// Adds a word below the scales (units, tens, `belas`, `puluh`, hundreds); false when
    /// it cannot follow what was read.
    fn below_scale(&mut self, k: Wk) -> bool {
        let digit = |p: f64| (1.0..=9.0).contains(&p) && p.fract() == 0.0;
        match (k, self.pending) {
            (Wk::Unit(v), None) => self.pending = Some(v),
            (Wk::Tens(v), None) if self.group % 100.0 == 0.0 => self.group += v,
            (Wk::Belas, Some(p)) if digit(p) => self.pending = Some(p + 10.0),
            (Wk::Puluh, Some(p)) if digit(p) && self.group % 100.0 == 0.0 => {
                self.group += p * 10.0;
                self.pending = None;
            }
            (Wk::Hundred, Some(p)) if p > 0.0 && self.group == 0.0 && p < 100.0 => {
                self.group = p * 100.0;
                self.pending = None;
            }
            (Wk::SeHundred, None) if self.group == 0.0 => self.group = 100.0,
            _ => return false,
        }
        true
    }

    /// Adds a scale word (`ribu`, `juta`, `k`, …; `seribu`, `sejuta` carry their own one);
    /// false when there is nothing to scale or the scale is not smaller than the last.
    fn scale(&mut self, k: Wk, s: f64, word: &str) -> bool {
        if let Wk::SeScale(_) = k {
            if self.pending.is_some() || self.group != 0.0 || s >= self.last_scale {
                return false;
            }
            self.total += s;
        } else {
            let x = self.group + self.pending.unwrap_or(0.0);
            if x == 0.0 || s >= self.last_scale {
                return false;
            }
            self.total += x * s;
            self.group = 0.0;
            self.pending = None;
        }
        self.last_scale = s;
        self.scale_word = Some(word.to_string());
        true
    }
}

/// Every number phrase of the text, left to right, non-overlapping.
fn number_phrases(text: &str, toks: &[Lex], conv: Conv) -> Vec<NumPhrase> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match parse_number(text, toks, i, conv) {
            Some(p) => {
                i = p.end_tok;
                out.push(p);
            }
            None => i += 1,
        }
    }
    out
}

/// Dates written with digits (`17/08/2024`, `2024-08-17`): not numbers.
static DIGIT_DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d{1,4}([/\-])\d{1,2}([/\-])\d{1,4}\b").unwrap());

fn numbers(text: &str, lang: Lang) -> Vec<Raw> {
    // Digits that belong to a phone number, an email, a URL, a `15:30` time or a date are
    // not numbers of their own.
    let mut taken: Vec<(usize, usize)> = phones(text, lang)
        .into_iter()
        .chain(emails(text))
        .chain(urls(text))
        .map(|r| (r.start, r.end))
        .collect();
    taken.extend(
        TIME_COLON
            .find_iter(text)
            .chain(DIGIT_DATE.find_iter(text))
            .map(|m| (m.start(), m.end())),
    );
    let toks = lex(text);
    number_phrases(text, &toks, conv_of(lang))
        .into_iter()
        .filter_map(|p| {
            let mut start = toks[p.start_tok].start;
            let end = toks[p.end_tok - 1].end;
            if taken.iter().any(|&(a, b)| a < end && start < b) {
                return None;
            }
            let mut value = p.value;
            // A leading minus at the start of the text or after a space.
            if toks[p.start_tok].kind == LexKind::Digits
                && char_before(text, start) == Some('-')
                && char_before(text, start - 1).is_none_or(|c| c.is_whitespace() || c == '(')
            {
                start -= 1;
                value = -value;
            }
            Some(raw(start, end, num_json(value)))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Units

fn unit_symbol(w: &str) -> Option<&'static str> {
    Some(match w {
        "kg" | "kgs" | "kilo" | "kilos" | "kilogram" | "kilograms" | "kilogramme" => "kg",
        "g" | "gr" | "gram" | "grams" | "gramme" => "g",
        "mg" | "milligram" | "milligrams" | "miligram" => "mg",
        "km" | "kilometer" | "kilometers" | "kilometre" | "kilometres" => "km",
        "m" | "meter" | "meters" | "metre" | "metres" => "m",
        "cm" | "centimeter" | "centimeters" | "centimetre" | "centimetres" | "sentimeter" => "cm",
        "mm" | "millimeter" | "millimeters" | "millimetre" | "millimetres" | "milimeter" => "mm",
        "l" | "liter" | "liters" | "litre" | "litres" => "l",
        "ml" | "milliliter" | "milliliters" | "millilitre" | "millilitres" | "mililiter" => "ml",
        _ => return None,
    })
}

fn units(text: &str, lang: Lang) -> Vec<Raw> {
    let toks = lex(text);
    number_phrases(text, &toks, conv_of(lang))
        .into_iter()
        .filter_map(|p| {
            let last = &toks[p.end_tok - 1];
            let next = toks.get(p.end_tok)?;
            if next.kind != LexKind::Word || !joinable(text, last, next) {
                return None;
            }
            let unit = unit_symbol(&next.low)?;
            Some(raw(
                toks[p.start_tok].start,
                next.end,
                json!({"value": num_json(p.value), "unit": unit}),
            ))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Currency

/// A currency written before the amount, at the end of the text before it.
static CURRENCY_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:\b(rp\.?|idr|usd|sgd|eur|gbp|myr|rm|jpy|aud)|(us\$|s\$|a\$|\$|€|£|¥))\s?$")
        .unwrap()
});

fn currency_code(marker: &str) -> Option<&'static str> {
    Some(match marker.trim_end_matches('.').to_lowercase().as_str() {
        "rp" | "idr" | "rupiah" => "IDR",
        "usd" | "us$" | "$" | "dollar" | "dollars" | "dolar" | "bucks" => "USD",
        "sgd" | "s$" => "SGD",
        "eur" | "€" | "euro" | "euros" => "EUR",
        "gbp" | "£" | "pound" | "pounds" => "GBP",
        "myr" | "rm" | "ringgit" => "MYR",
        "jpy" | "¥" | "yen" => "JPY",
        "aud" | "a$" => "AUD",
        _ => return None,
    })
}

fn currencies(text: &str, lang: Lang) -> Vec<Raw> {
    let toks = lex(text);
    let mut out = Vec::new();
    for p in number_phrases(text, &toks, conv_of(lang)) {
        let first = &toks[p.start_tok];
        let last = &toks[p.end_tok - 1];
        let mut start = first.start;
        let mut end = last.end;
        // Before: look at a short window ending at the amount.
        let mut window_start = start.saturating_sub(8);
        while !text.is_char_boundary(window_start) {
            window_start -= 1;
        }
        let before = CURRENCY_BEFORE
            .captures(&text[window_start..start])
            .and_then(|c| {
                let m = c.get(1).or_else(|| c.get(2))?;
                let at = window_start + m.start();
                // The window may have cut a word: `\b` is checked against the whole text.
                if c.get(1).is_some() && is_word_char(char_before(text, at)) {
                    return None;
                }
                Some((at, currency_code(m.as_str())?))
            });
        let after = toks.get(p.end_tok).and_then(|n| {
            (n.kind == LexKind::Word && joinable(text, last, n))
                .then(|| currency_code(&n.low).map(|c| (n.end, c)))
                .flatten()
        });
        let slang = p.scale.as_deref().and_then(|s| match s {
            "rb" | "rebu" | "ribu" | "jt" | "juta" | "seribu" | "sejuta" => Some("IDR"),
            "k" if lang == Lang::Id => Some("IDR"),
            _ => None,
        });
        let code = if let Some((s, code)) = before {
            start = s;
            if let Some((e, c2)) = after
                && c2 == code
            {
                end = e;
            }
            code
        } else if let Some((e, code)) = after {
            end = e;
            code
        } else if let Some(code) = slang {
            code
        } else {
            continue;
        };
        let conv = if code == "IDR" { Conv::Id } else { Conv::En };
        let amount = if conv == conv_of(lang) {
            p.value
        } else {
            match parse_number(text, &toks, p.start_tok, conv) {
                Some(q) if q.end_tok == p.end_tok => q.value,
                _ => p.value,
            }
        };
        out.push(raw(
            start,
            end,
            json!({"amount": num_json(amount), "currency": code}),
        ));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Email, phone, url

static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)[a-z0-9_][a-z0-9._%+\-]*@[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*\.[a-z]{2,}",
    )
    .unwrap()
});

fn emails(text: &str) -> Vec<Raw> {
    EMAIL
        .find_iter(text)
        .filter(|m| {
            let before = char_before(text, m.start());
            !is_word_char(before)
                && !matches!(before, Some('.' | '_' | '%' | '+' | '-' | '@'))
                && !is_word_char(char_at(text, m.end()))
                && char_at(text, m.end()) != Some('@')
        })
        .map(|m| raw(m.start(), m.end(), json!(m.as_str().to_lowercase())))
        .collect()
}

static PHONE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\+?\(?\+?\d[\d \-.()]{5,24}\d").unwrap());
static DATE_LIKE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\d{1,4}([\-./])\d{1,2}([\-./])\d{1,4}$").unwrap());

fn phones(text: &str, lang: Lang) -> Vec<Raw> {
    let mut out = Vec::new();
    for m in PHONE.find_iter(text) {
        let before = char_before(text, m.start());
        if is_word_char(before) || matches!(before, Some('+' | '.' | ',' | '-' | '/')) {
            continue;
        }
        // On failure, retry without the last space-separated group: `0812 3456 7890 2024`.
        let mut end = m.end();
        loop {
            if let Some(r) = phone(text, m.start(), end, lang) {
                out.push(raw(m.start(), end, json!(r)));
                break;
            }
            let s = &text[m.start()..end];
            let Some(cut) = s.rfind(' ') else { break };
            let kept = s[..cut].trim_end_matches(|c: char| !c.is_ascii_digit());
            if kept.len() < 8 {
                break;
            }
            end = m.start() + kept.len();
        }
    }
    out
}

/// The resolved phone number when `text[start..end]` is one.
fn phone(text: &str, start: usize, end: usize, lang: Lang) -> Option<String> {
    let s = &text[start..end];
    let after = char_at(text, end);
    if is_word_char(after)
        || (matches!(after, Some('.' | ',' | '-' | ':'))
            && text[end + 1..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit()))
    {
        return None;
    }
    if DATE_LIKE.is_match(s) {
        return None;
    }
    // Between digit groups: one space, dash or dot, possibly next to a parenthesis.
    let seps_ok = s
        .split(|c: char| c.is_ascii_digit() || c == '+')
        .all(|sep| {
            sep.chars().filter(|c| matches!(c, ' ' | '-' | '.')).count() <= 1
                && sep.chars().filter(|c| matches!(c, '(' | ')')).count() <= 1
        });
    let opens = s.matches('(').count();
    let parens_ok = opens == s.matches(')').count()
        && opens <= 1
        && s.find('(')
            .is_none_or(|o| s.find(')').is_some_and(|c| c > o + 1));
    if !seps_ok || !parens_ok {
        return None;
    }
    let plus = s.trim_start_matches('(').starts_with('+');
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !(8..=15).contains(&digits.len()) {
        return None;
    }
    if plus {
        return Some(format!("+{digits}"));
    }
    if let Some(rest) = digits.strip_prefix("62") {
        return (!rest.starts_with('0') && digits.len() >= 10).then(|| format!("+{digits}"));
    }
    let rest = digits.strip_prefix('0')?;
    if let Some(intl) = rest.strip_prefix('0') {
        // `00` is the international prefix.
        return (!intl.starts_with('0')).then(|| format!("+{intl}"));
    }
    if lang == Lang::Id || (rest.starts_with('8') && (10..=13).contains(&digits.len())) {
        Some(format!("+62{rest}"))
    } else {
        Some(digits)
    }
}

/// Top-level domains a bare domain may end with.
const TLDS: &str = "com|net|org|info|biz|io|ai|app|dev|co|id|me|tv|xyz|edu|gov|mil|uk|us|sg|my|au|jp|cn|in|de|fr|nl|ru|br|ca|eu|asia|online|site|store|tech|shop|link|ly|gl|gg|cc|news|blog|cloud|web|ac|go|or|sch";

static URL_SCHEME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)\bhttps?://[^\s<>"'`]+"#).unwrap());
static URL_WWW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)\bwww\.[a-z0-9\-]+(?:\.[a-z0-9\-]+)+(?::\d{2,5})?(?:[/?#][^\s<>"'`]*)?"#)
        .unwrap()
});
static URL_BARE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"(?i)\b(?:[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?\.)+(?:{TLDS})(?::\d{{2,5}})?(?:[/?#][^\s<>"'`]*)?"#
    ))
    .unwrap()
});

/// Leaves trailing punctuation (and an unbalanced closing parenthesis) out of a URL.
fn trim_url(s: &str) -> &str {
    let mut s = s;
    loop {
        let Some(c) = s.chars().next_back() else {
            return s;
        };
        let trim = match c {
            '.' | ',' | ';' | ':' | '!' | '?' | '\'' | '"' | ']' | '}' => true,
            ')' => s.matches('(').count() < s.matches(')').count(),
            _ => false,
        };
        if !trim {
            return s;
        }
        s = &s[..s.len() - c.len_utf8()];
    }
}

fn urls(text: &str) -> Vec<Raw> {
    let emails: Vec<(usize, usize)> = EMAIL
        .find_iter(text)
        .map(|m| (m.start(), m.end()))
        .collect();
    let mut out = Vec::new();
    for (re, bare) in [
        (&*URL_SCHEME, false),
        (&*URL_WWW, false),
        (&*URL_BARE, true),
    ] {
        for m in re.find_iter(text) {
            let before = char_before(text, m.start());
            if is_word_char(before) || matches!(before, Some('@' | '.' | '-' | '_' | '/')) {
                continue;
            }
            let s = trim_url(m.as_str());
            let end = m.start() + s.len();
            if bare {
                let after = char_at(text, end);
                let after2 = after.and_then(|c| char_at(text, end + c.len_utf8()));
                if is_word_char(after)
                    || matches!(after, Some('@' | '-' | '_'))
                    || (after == Some('.') && is_word_char(after2))
                {
                    continue;
                }
                // All-digit domains (`1.5.id`) are not URLs.
                let host = s.split(['/', '?', '#', ':']).next().unwrap_or(s);
                if host
                    .split('.')
                    .rev()
                    .nth(1)
                    .is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()))
                {
                    continue;
                }
            }
            if emails.iter().any(|&(a, b)| a < end && m.start() < b) {
                continue;
            }
            let resolved = if s.to_ascii_lowercase().starts_with("http") && s.contains("://") {
                s.to_string()
            } else {
                format!("http://{s}")
            };
            out.push(raw(m.start(), end, json!(resolved)));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Time

const HOUR_WORDS: &str = "satu|dua\\s+belas|dua|tiga|empat|lima|enam|tujuh|delapan|sembilan|sepuluh|sebelas|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve";

static TIME_COLON: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b([01]?\d|2[0-3]):([0-5]\d)\b").unwrap());
static TIME_AMPM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\b(\d{1,2})(?:[:.]([0-5]\d))?\s?([ap])\.?m\b\.?").unwrap());
static TIME_OCLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b(\d{{1,2}}|{HOUR_WORDS})\s*o['’]?clock\b(?:\s?([ap])\.?m\b\.?)?"
    ))
    .unwrap()
});
static TIME_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?i)\b(?:jam|pukul|pkl\.?)\s*(setengah\s+)?(\d{{1,2}}|{HOUR_WORDS})(?:[:.]([0-5]\d))?\b(?:\s+(lewat|lebih|kurang)\s+(\d{{1,2}}|seperempat)(?:\s+menit)?\b)?(?:\s+(pagi|siang|sore|petang|malam|subuh|dini\s+hari)\b)?"
    ))
    .unwrap()
});
static TIME_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(noon|midday|midnight|tengah\s+hari|tengah\s+malam)\b").unwrap()
});
static DAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(the\s+day\s+after\s+tomorrow|day\s+after\s+tomorrow|the\s+day\s+before\s+yesterday|day\s+before\s+yesterday|today|tonight|tomorrow|yesterday|hari\s+ini|malam\s+ini|nanti\s+malam|besok\s+lusa|kemarin\s+lusa|besok|esok|lusa|kemarin)\b",
    )
    .unwrap()
});
/// What may stand between a day and the clock time after it: `besok pagi jam 9`,
/// `tomorrow evening at 7`.
static DAY_CLOCK_GAP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^\s*,?\s*(?:(pagi|siang|sore|petang|malam|morning|afternoon|evening|night)\s*,?\s*)?(?:at\s+|on\s+|pada\s+)?$",
    )
    .unwrap()
});
/// What may stand between a clock time and the day after it: `3pm tomorrow`.
static CLOCK_DAY_GAP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\s*,?\s*(?:on\s+)?$").unwrap());

fn hour_value(s: &str) -> Option<u32> {
    let s = s.to_lowercase();
    if let Ok(h) = s.parse::<u32>() {
        return Some(h);
    }
    if s.starts_with("dua") && s.ends_with("belas") {
        return Some(12);
    }
    match word_kind(&s) {
        Some(Wk::Unit(v)) if v >= 1.0 => Some(v as u32),
        _ => None,
    }
}

/// 12-hour clock with am/pm → 24-hour; `None` for an hour outside 1–12.
fn ampm(h: u32, marker: &str) -> Option<u32> {
    if !(1..=12).contains(&h) {
        return None;
    }
    Some(match (marker.to_ascii_lowercase().as_str(), h) {
        ("a", 12) => 0,
        ("a", h) => h,
        ("p", 12) => 12,
        (_, h) => h + 12,
    })
}

/// Indonesian part of the day → 24-hour.
fn day_part(h: u32, part: Option<&str>) -> u32 {
    let Some(part) = part else { return h };
    if h > 12 {
        return h;
    }
    match part.to_lowercase().split_whitespace().next().unwrap_or("") {
        "siang" if h < 11 => h + 12,
        "sore" | "petang" | "afternoon" | "evening" if h < 12 => h + 12,
        "malam" | "night" if h == 12 => 0,
        "malam" | "night" if h >= 6 => h + 12,
        _ => h,
    }
}

fn clock(h: u32, m: u32) -> Value {
    json!({"hour": h, "minute": m})
}

/// Clock times: (start, end, hour, minute).
fn clock_times(text: &str) -> Vec<(usize, usize, u32, u32)> {
    let mut out = Vec::new();
    for c in TIME_COLON.captures_iter(text) {
        let m = c.get(0).unwrap();
        if matches!(char_before(text, m.start()), Some(':' | '.'))
            || matches!(char_at(text, m.end()), Some(':'))
        {
            continue;
        }
        let h = c[1].parse().unwrap();
        let min = c[2].parse().unwrap();
        out.push((m.start(), m.end(), h, min));
    }
    for c in TIME_AMPM.captures_iter(text) {
        let m = c.get(0).unwrap();
        if matches!(char_before(text, m.start()), Some(':' | '.' | ',')) {
            continue;
        }
        let Some(h) = ampm(c[1].parse().unwrap(), &c[3]) else {
            continue;
        };
        let min = c.get(2).map_or(0, |x| x.as_str().parse().unwrap());
        out.push((m.start(), m.end(), h, min));
    }
    for c in TIME_OCLOCK.captures_iter(text) {
        let m = c.get(0).unwrap();
        let Some(h) = hour_value(&c[1]) else { continue };
        let h = match c.get(2) {
            Some(p) => match ampm(h, p.as_str()) {
                Some(h) => h,
                None => continue,
            },
            None if (1..=12).contains(&h) => h,
            None => continue,
        };
        out.push((m.start(), m.end(), h, 0));
    }
    for c in TIME_ID.captures_iter(text) {
        let m = c.get(0).unwrap();
        // `3 jam 15 menit` is a duration, not 15:00.
        let preceding = text[..m.start()].trim_end();
        let prev_word = preceding
            .rsplit(|ch: char| !ch.is_alphanumeric())
            .next()
            .unwrap_or("");
        if !prev_word.is_empty()
            && (prev_word.chars().all(|ch| ch.is_ascii_digit())
                || matches!(word_kind(&prev_word.to_lowercase()), Some(Wk::Unit(_))))
        {
            continue;
        }
        let Some(mut h) = hour_value(&c[2]) else {
            continue;
        };
        let mut min = c.get(3).map_or(0, |x| x.as_str().parse().unwrap());
        if h > 23 {
            continue;
        }
        if c.get(1).is_some() {
            // `setengah tujuh` = half past six.
            if min != 0 || h == 0 || h > 12 {
                continue;
            }
            h -= 1;
            min = 30;
        }
        if let (Some(rel), Some(n)) = (c.get(4), c.get(5)) {
            // `jam 3 lewat 15` = 3:15, `jam 4 kurang seperempat` = 3:45.
            let n: u32 = if n.as_str().eq_ignore_ascii_case("seperempat") {
                15
            } else {
                n.as_str().parse().unwrap()
            };
            if min != 0 || n == 0 || n >= 60 {
                continue;
            }
            if rel.as_str().eq_ignore_ascii_case("kurang") {
                h = (h + 23) % 24;
                min = 60 - n;
            } else {
                min = n;
            }
        }
        let h = day_part(h, c.get(6).map(|x| x.as_str()));
        out.push((m.start(), m.end(), h, min));
    }
    for c in TIME_NAMED.captures_iter(text) {
        let m = c.get(0).unwrap();
        let w = c[1].to_lowercase();
        let h = if w == "midnight" || w.ends_with("malam") {
            0
        } else {
            12
        };
        out.push((m.start(), m.end(), h, 0));
    }
    out
}

fn times(text: &str) -> Vec<Raw> {
    // The clock times, overlaps resolved first (`jam 15:30` is one time, not two).
    let clocks: Vec<(usize, usize, u32, u32)> = {
        let mut c = clock_times(text);
        c.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut kept: Vec<(usize, usize, u32, u32)> = Vec::new();
        for x in c {
            if kept.last().is_none_or(|k| x.0 >= k.1) {
                kept.push(x);
            }
        }
        kept
    };
    let days: Vec<(usize, usize, i32)> = DAY
        .captures_iter(text)
        .map(|c| {
            let m = c.get(0).unwrap();
            let w = c[1].to_lowercase();
            let w: Vec<&str> = w.split_whitespace().collect();
            let offset = match w.as_slice() {
                [.., "after", "tomorrow"] | ["besok", "lusa"] | ["lusa"] => 2,
                [.., "before", "yesterday"] | ["kemarin", "lusa"] => -2,
                ["tomorrow"] | ["besok"] | ["esok"] => 1,
                ["yesterday"] | ["kemarin"] => -1,
                _ => 0,
            };
            (m.start(), m.end(), offset)
        })
        .filter(|d| clocks.iter().all(|c| c.1 <= d.0 || d.1 <= c.0))
        .collect();
    let mut out: Vec<Raw> = Vec::new();
    let mut used = vec![false; clocks.len()];
    for &(ds, de, offset) in &days {
        // A clock time right after (`besok jam 3`) or right before (`3pm tomorrow`).
        let mut part: Option<String> = None;
        let next = clocks.iter().position(|c| {
            c.0 >= de
                && DAY_CLOCK_GAP.captures(&text[de..c.0]).is_some_and(|g| {
                    part = g.get(1).map(|p| p.as_str().to_string());
                    true
                })
        });
        let prev = clocks
            .iter()
            .position(|c| c.1 <= ds && CLOCK_DAY_GAP.is_match(&text[c.1..ds]));
        if next.is_none() {
            part = None;
        }
        match next.or(prev).filter(|&k| !used[k]) {
            Some(k) => {
                used[k] = true;
                let (cs, ce, h, m) = clocks[k];
                // The part of the day between them: `besok sore jam 3` is 15:00.
                let h = day_part(h, part.as_deref());
                out.push(raw(
                    ds.min(cs),
                    de.max(ce),
                    json!({"dayOffset": offset, "hour": h, "minute": m}),
                ));
            }
            None => out.push(raw(ds, de, json!({ "dayOffset": offset }))),
        }
    }
    for (k, &(s, e, h, m)) in clocks.iter().enumerate() {
        if !used[k] {
            out.push(raw(s, e, clock(h, m)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (value, resolved) of each hit.
    fn hits(profile: &str, text: &str, lang: Lang) -> Vec<(String, Value)> {
        find(profile, text, lang)
            .unwrap()
            .into_iter()
            .map(|h| {
                let chars: Vec<char> = text.chars().collect();
                assert_eq!(
                    chars[h.char_start..h.char_end].iter().collect::<String>(),
                    h.value,
                    "offsets of {h:?}"
                );
                (h.value, h.resolved)
            })
            .collect()
    }

    fn one(profile: &str, text: &str, lang: Lang) -> (String, Value) {
        let h = hits(profile, text, lang);
        assert_eq!(h.len(), 1, "{profile} in {text:?}: {h:?}");
        h.into_iter().next().unwrap()
    }

    fn none(profile: &str, text: &str, lang: Lang) {
        let h = hits(profile, text, lang);
        assert!(h.is_empty(), "{profile} in {text:?}: {h:?}");
    }

    fn values(profile: &str, text: &str, lang: Lang) -> Vec<Value> {
        hits(profile, text, lang).into_iter().map(|h| h.1).collect()
    }

    #[test]
    fn unknown_profiles_are_none() {
        assert!(find("ner", "x", Lang::En).is_none());
        for p in RULE_PROFILES {
            assert_eq!(find(p, "", Lang::Id), Some(vec![]));
        }
    }

    #[test]
    fn digits_in_both_conventions() {
        use Lang::*;
        assert_eq!(parse_digits("1.250.000", Conv::Id), Some(1_250_000.0));
        assert_eq!(parse_digits("1,250,000.50", Conv::Id), Some(1_250_000.5));
        assert_eq!(parse_digits("1.250.000,50", Conv::En), Some(1_250_000.5));
        assert_eq!(parse_digits("1.500", Conv::Id), Some(1500.0));
        assert_eq!(parse_digits("1.500", Conv::En), Some(1.5));
        assert_eq!(parse_digits("1,500", Conv::En), Some(1500.0));
        assert_eq!(parse_digits("1,500", Conv::Id), Some(1.5));
        assert_eq!(parse_digits("2,5", Conv::En), Some(2.5));
        assert_eq!(parse_digits("0.500", Conv::Id), Some(0.5));
        assert_eq!(parse_digits("1.2.3", Conv::Id), None);
        assert_eq!(parse_digits("12,34,567", Conv::En), None);
        assert_eq!(parse_digits("1,000.000,5", Conv::En), None);
        assert_eq!(values("number", "harganya 1.500 rupiah", Id), [json!(1500)]);
        assert_eq!(values("number", "it costs 1.5 dollars", En), [json!(1.5)]);
        assert_eq!(values("number", "sekitar 2,5 kilo", Id), [json!(2.5)]);
        assert_eq!(
            values("number", "-5 dan 10, lalu 3.25", En),
            [json!(-5), json!(10), json!(3.25)]
        );
        assert_eq!(values("number", "10-20", En), [json!(10), json!(20)]);
        // Digits inside phone numbers, emails, URLs, clock times and dates are not numbers.
        assert_eq!(
            values(
                "number",
                "hubungi 0812-3456-7890 atau cs1@kata.ai, kirim 2 pizza jam 15:30 \
                 tgl 17/08/2024 lihat kata.ai/promo5",
                Id
            ),
            [json!(2)]
        );
    }

    #[test]
    fn number_words_in_english() {
        let en = |t: &str| values("number", t, Lang::En);
        assert_eq!(en("I want three"), [json!(3)]);
        assert_eq!(en("twenty-one pilots"), [json!(21)]);
        assert_eq!(en("one hundred and five"), [json!(105)]);
        assert_eq!(en("a hundred people"), [json!(100)]);
        assert_eq!(en("two thousand five hundred"), [json!(2500)]);
        assert_eq!(en("one million two hundred thousand"), [json!(1_200_000)]);
        assert_eq!(en("2.5 million"), [json!(2_500_000)]);
        assert_eq!(en("ninety nine"), [json!(99)]);
        assert_eq!(en("one two"), [json!(1), json!(2)]);
        assert_eq!(en("10k followers"), [json!(10_000)]);
        let (v, _) = one("number", "about fifteen thousand dollars", Lang::En);
        assert_eq!(v, "fifteen thousand");
    }

    #[test]
    fn number_words_in_indonesian() {
        let id = |t: &str| values("number", t, Lang::Id);
        assert_eq!(id("saya pesan dua"), [json!(2)]);
        assert_eq!(id("tiga belas"), [json!(13)]);
        assert_eq!(id("dua puluh tiga"), [json!(23)]);
        assert_eq!(id("sebelas"), [json!(11)]);
        assert_eq!(id("seratus dua puluh lima"), [json!(125)]);
        assert_eq!(id("dua ratus lima puluh ribu"), [json!(250_000)]);
        assert_eq!(id("seribu lima ratus"), [json!(1500)]);
        assert_eq!(id("sejuta"), [json!(1_000_000)]);
        assert_eq!(id("3 juta"), [json!(3_000_000)]);
        assert_eq!(id("2 juta 500 ribu"), [json!(2_500_000)]);
        assert_eq!(id("setengah"), [json!(0.5)]);
        assert_eq!(id("satu setengah"), [json!(1.5)]);
        assert_eq!(id("dua setengah juta"), [json!(2_500_000)]);
        assert_eq!(id("50rb"), [json!(50_000)]);
        assert_eq!(id("1,5jt"), [json!(1_500_000)]);
    }

    #[test]
    fn numbers_not_found() {
        none("number", "covid19 v1.2 abc", Lang::En);
        none("number", "someone said a lot", Lang::En);
        none("number", "ribu juta belas puluh", Lang::Id);
        none("number", "1.2.3.4", Lang::En);
        none("number", "k m rb", Lang::Id);
    }

    #[test]
    fn number_offsets_are_characters() {
        let h = find("number", "Ké 😀 dua puluh", Lang::Id).unwrap();
        assert_eq!((h[0].char_start, h[0].char_end), (5, 14));
        assert_eq!(h[0].value, "dua puluh");
    }

    #[test]
    fn emails() {
        assert_eq!(
            one("email", "kirim ke Budi.Santoso+cs@Kata.co.id ya", Lang::Id),
            (
                "Budi.Santoso+cs@Kata.co.id".into(),
                json!("budi.santoso+cs@kata.co.id")
            )
        );
        assert_eq!(one("email", "mail me: a_b@x.io.", Lang::En).0, "a_b@x.io");
        none("email", "budi@ or @kata or budi@kata or a@b.c", Lang::En);
        none("email", "email me at budi at gmail dot com", Lang::En);
    }

    #[test]
    fn phones_indonesian_and_international() {
        use Lang::*;
        let ph = |t: &str, l: Lang| one("phone", t, l).1;
        assert_eq!(ph("hubungi 0812-3456-7890 ya", Id), json!("+6281234567890"));
        assert_eq!(ph("hubungi 0812 3456 7890", En), json!("+6281234567890"));
        assert_eq!(ph("no saya +62 812 3456 7890", Id), json!("+6281234567890"));
        assert_eq!(ph("628123456789", Id), json!("+628123456789"));
        assert_eq!(ph("kantor (021) 555-1234", Id), json!("+62215551234"));
        assert_eq!(ph("call +1 (555) 123-4567 now", En), json!("+15551234567"));
        assert_eq!(ph("call +44 20 7946 0958", En), json!("+442079460958"));
        assert_eq!(ph("dial 0044 20 7946 0958", En), json!("+442079460958"));
        assert_eq!(ph("call 020 7946 0958", En), json!("02079460958"));
        let (v, _) = one("phone", "nomor 0812 3456 7890 2024", Id);
        assert_eq!(v, "0812 3456 7890");
        let h = find("phone", "Ké 0812-3456-7890", Id).unwrap();
        assert_eq!((h[0].char_start, h[0].char_end), (3, 17));
    }

    #[test]
    fn phones_not_found() {
        use Lang::*;
        none("phone", "harga Rp 50.000.000", Id);
        none("phone", "tanggal 01-02-2024 atau 2024-01-15", Id);
        none("phone", "kode 0812", Id);
        none("phone", "jam 08:00 sampai 17:00", Id);
        none("phone", "kartu 4111 1111 1111 1111", En);
        none("phone", "0812--3456--7890", Id);
        none("phone", "abc08123456789", Id);
        none("phone", "pi is 3.14159265358", En);
    }

    #[test]
    fn urls() {
        use Lang::*;
        assert_eq!(
            one("url", "buka https://kata.ai/docs?x=1.", En),
            (
                "https://kata.ai/docs?x=1".into(),
                json!("https://kata.ai/docs?x=1")
            )
        );
        assert_eq!(
            one("url", "cek www.tokopedia.com ya", Id).1,
            json!("http://www.tokopedia.com")
        );
        assert_eq!(
            one("url", "web kami: kata.ai, atau", Id),
            ("kata.ai".into(), json!("http://kata.ai"))
        );
        assert_eq!(
            one("url", "(see tokopedia.co.id/promo)", En).0,
            "tokopedia.co.id/promo"
        );
        assert_eq!(one("url", "HTTP://EXAMPLE.COM", En).0, "HTTP://EXAMPLE.COM");
        let h = find("url", "😀 kata.ai", En).unwrap();
        assert_eq!((h[0].char_start, h[0].char_end), (2, 9));
    }

    #[test]
    fn urls_not_found() {
        use Lang::*;
        none("url", "file.txt and index.html", En);
        none("url", "e.g. version 1.2.3 costs 3.50", En);
        none("url", "email budi@kata.ai please", En);
        none("url", "foo.cool and mr.smith", En);
        none("url", "hello.world", En);
    }

    #[test]
    fn currency_with_markers() {
        use Lang::*;
        let cur = |t: &str, l: Lang| one("currency", t, l);
        assert_eq!(
            cur("harganya Rp 50.000 ya", Id),
            (
                "Rp 50.000".into(),
                json!({"amount": 50000, "currency": "IDR"})
            )
        );
        assert_eq!(
            cur("it is Rp50.000", En).1,
            json!({"amount": 50000, "currency": "IDR"})
        );
        assert_eq!(
            cur("Rp. 1.250.000,50", Id).1,
            json!({"amount": 1250000.5, "currency": "IDR"})
        );
        assert_eq!(
            cur("IDR 50k", En),
            (
                "IDR 50k".into(),
                json!({"amount": 50000, "currency": "IDR"})
            )
        );
        assert_eq!(
            cur("only $5.99!", En),
            ("$5.99".into(), json!({"amount": 5.99, "currency": "USD"}))
        );
        assert_eq!(
            cur("cuma $1,500", Id).1,
            json!({"amount": 1500, "currency": "USD"})
        );
        assert_eq!(
            cur("USD 10", En).1,
            json!({"amount": 10, "currency": "USD"})
        );
        assert_eq!(
            cur("pay 10 dollars", En),
            (
                "10 dollars".into(),
                json!({"amount": 10, "currency": "USD"})
            )
        );
        assert_eq!(
            cur("lima dolar saja", Id).1,
            json!({"amount": 5, "currency": "USD"})
        );
        assert_eq!(
            cur("50.000 rupiah", En).1,
            json!({"amount": 50000, "currency": "IDR"})
        );
        assert_eq!(cur("€20", En).1, json!({"amount": 20, "currency": "EUR"}));
        assert_eq!(
            cur("RM 15 sahaja", Id).1,
            json!({"amount": 15, "currency": "MYR"})
        );
    }

    #[test]
    fn currency_slang_means_rupiah() {
        use Lang::*;
        let cur = |t: &str, l: Lang| one("currency", t, l);
        assert_eq!(
            cur("50rb aja", Id),
            ("50rb".into(), json!({"amount": 50000, "currency": "IDR"}))
        );
        assert_eq!(
            cur("50 ribu", Id).1,
            json!({"amount": 50000, "currency": "IDR"})
        );
        assert_eq!(
            cur("budget 1,5 juta", Id).1,
            json!({"amount": 1500000, "currency": "IDR"})
        );
        assert_eq!(
            cur("lima puluh ribu rupiah", Id),
            (
                "lima puluh ribu rupiah".into(),
                json!({"amount": 50000, "currency": "IDR"})
            )
        );
        assert_eq!(
            cur("50k", Id).1,
            json!({"amount": 50000, "currency": "IDR"})
        );
        // In English `50k` alone is not money.
        none("currency", "50k followers", En);
    }

    #[test]
    fn currency_not_found() {
        use Lang::*;
        none("currency", "I have 3 kids and 50.000 problems", En);
        none("currency", "harp 5 strings", En);
        none("currency", "sharp5", En);
        none("currency", "dua orang", Id);
    }

    #[test]
    fn clock_times_english() {
        use Lang::*;
        let t = |s: &str| one("time", s, En);
        assert_eq!(
            t("at 3pm"),
            ("3pm".into(), json!({"hour": 15, "minute": 0}))
        );
        assert_eq!(t("meet 15:30 ok").1, json!({"hour": 15, "minute": 30}));
        assert_eq!(t("3:45 p.m.").1, json!({"hour": 15, "minute": 45}));
        assert_eq!(t("12am").1, json!({"hour": 0, "minute": 0}));
        assert_eq!(t("12 pm").1, json!({"hour": 12, "minute": 0}));
        assert_eq!(t("at 10:30pm").0, "10:30pm");
        assert_eq!(t("seven o'clock").1, json!({"hour": 7, "minute": 0}));
        assert_eq!(t("at noon").1, json!({"hour": 12, "minute": 0}));
        assert_eq!(t("by midnight").1, json!({"hour": 0, "minute": 0}));
    }

    #[test]
    fn clock_times_indonesian() {
        use Lang::*;
        let t = |s: &str| one("time", s, Id);
        assert_eq!(
            t("jam 3 sore ya"),
            ("jam 3 sore".into(), json!({"hour": 15, "minute": 0}))
        );
        assert_eq!(t("pukul 10.30 pagi").1, json!({"hour": 10, "minute": 30}));
        assert_eq!(t("jam 1 siang").1, json!({"hour": 13, "minute": 0}));
        assert_eq!(t("jam 7 malam").1, json!({"hour": 19, "minute": 0}));
        assert_eq!(t("jam 12 malam").1, json!({"hour": 0, "minute": 0}));
        assert_eq!(t("jam tiga sore").1, json!({"hour": 15, "minute": 0}));
        assert_eq!(t("jam dua belas siang").1, json!({"hour": 12, "minute": 0}));
        assert_eq!(
            t("jam setengah tujuh malam").1,
            json!({"hour": 18, "minute": 30})
        );
        assert_eq!(t("jam 15:30").0, "jam 15:30");
        assert_eq!(t("tengah malam").1, json!({"hour": 0, "minute": 0}));
        assert_eq!(
            t("jam 3 lewat 15 menit sore"),
            (
                "jam 3 lewat 15 menit sore".into(),
                json!({"hour": 15, "minute": 15})
            )
        );
        assert_eq!(
            t("jam 4 kurang seperempat").1,
            json!({"hour": 3, "minute": 45})
        );
        assert_eq!(
            t("jam 8 kurang 10 malam").1,
            json!({"hour": 19, "minute": 50})
        );
    }

    #[test]
    fn relative_days_and_combinations() {
        use Lang::*;
        assert_eq!(
            values("time", "today or tomorrow, not yesterday", En),
            [
                json!({"dayOffset": 0}),
                json!({"dayOffset": 1}),
                json!({"dayOffset": -1})
            ]
        );
        assert_eq!(
            values("time", "hari ini, besok atau lusa, bukan kemarin", Id),
            [
                json!({"dayOffset": 0}),
                json!({"dayOffset": 1}),
                json!({"dayOffset": 2}),
                json!({"dayOffset": -1})
            ]
        );
        assert_eq!(
            one("time", "the day after tomorrow", En).1,
            json!({"dayOffset": 2})
        );
        assert_eq!(
            one("time", "besok jam 3 sore", Id),
            (
                "besok jam 3 sore".into(),
                json!({"dayOffset": 1, "hour": 15, "minute": 0})
            )
        );
        assert_eq!(
            one("time", "tomorrow at 3pm", En).1,
            json!({"dayOffset": 1, "hour": 15, "minute": 0})
        );
        assert_eq!(one("time", "3pm tomorrow", En).0, "3pm tomorrow");
        assert_eq!(
            one("time", "besok sore jam 3", Id),
            (
                "besok sore jam 3".into(),
                json!({"dayOffset": 1, "hour": 15, "minute": 0})
            )
        );
        assert_eq!(
            one("time", "tomorrow evening at 7:30", En).1,
            json!({"dayOffset": 1, "hour": 19, "minute": 30})
        );
        assert_eq!(
            values("time", "besok pagi jam 9 atau lusa jam 2 siang", Id),
            [
                json!({"dayOffset": 1, "hour": 9, "minute": 0}),
                json!({"dayOffset": 2, "hour": 14, "minute": 0})
            ]
        );
        // Not merged across other words.
        assert_eq!(values("time", "besok saja, jam 9", Id).len(), 2);
    }

    #[test]
    fn times_not_found() {
        use Lang::*;
        none("time", "jam tangan baru", Id);
        none("time", "butuh 2 jam", Id);
        none("time", "selama 3 jam 15 menit", Id);
        none("time", "3:75 or 25:00 or 1:2", En);
        none("time", "I am 5 amps", En);
        none("time", "13pm", En);
        none("time", "besoknya todays", Id);
        none("time", "ratio 123:45", En);
    }

    #[test]
    fn units_of_measure() {
        use Lang::*;
        let u = |s: &str, l: Lang| one("units", s, l);
        assert_eq!(
            u("beli 5 kg beras", Id),
            ("5 kg".into(), json!({"value": 5, "unit": "kg"}))
        );
        assert_eq!(u("3km lagi", Id).1, json!({"value": 3, "unit": "km"}));
        assert_eq!(u("2 liter air", Id).1, json!({"value": 2, "unit": "l"}));
        assert_eq!(u("500ml", En).1, json!({"value": 500, "unit": "ml"}));
        assert_eq!(u("10 cm", En).1, json!({"value": 10, "unit": "cm"}));
        assert_eq!(u("2,5 kilo", Id).1, json!({"value": 2.5, "unit": "kg"}));
        assert_eq!(
            u("2.5 kilograms", En).1,
            json!({"value": 2.5, "unit": "kg"})
        );
        assert_eq!(u("dua meter", Id).1, json!({"value": 2, "unit": "m"}));
        assert_eq!(u("three grams", En).1, json!({"value": 3, "unit": "g"}));
        assert_eq!(u("100 mg", En).1, json!({"value": 100, "unit": "mg"}));
        assert_eq!(u("8 mm", En).1, json!({"value": 8, "unit": "mm"}));
    }

    #[test]
    fn units_not_found() {
        use Lang::*;
        none("units", "5 minutes", En);
        none("units", "2 jam lagi", Id);
        none("units", "3 mangga", Id);
        none("units", "kg saja", Id);
        none("units", "5kgx and 5 kilowatt", En);
    }

    mod fuzz {
        use super::super::*;
        use proptest::prelude::*;

        /// Texts made of the pieces the rules look at, glued in any order.
        fn piece() -> impl Strategy<Value = String> {
            prop_oneof![
                "[0-9]{1,4}",
                "[0-9]{1,3}([.,][0-9]{1,3}){0,3}",
                "[ .,:;/()+\\-]{1,2}",
                Just("Rp".to_string()),
                Just("$".to_string()),
                Just("€".to_string()),
                Just("jam".to_string()),
                Just("setengah".to_string()),
                Just("dua puluh".to_string()),
                Just("ribu".to_string()),
                Just("k".to_string()),
                Just("pm".to_string()),
                Just("besok".to_string()),
                Just("kg".to_string()),
                Just("www.".to_string()),
                Just("kata.ai".to_string()),
                Just("@".to_string()),
                Just("+62".to_string()),
                "[a-zA-Zé😀İ]{1,6}",
            ]
        }

        fn text() -> impl Strategy<Value = String> {
            prop::collection::vec(piece(), 0..14).prop_map(|v| v.concat())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

            #[test]
            fn hits_are_valid_character_spans(text in text(), id in any::<bool>()) {
                let lang = if id { Lang::Id } else { Lang::En };
                let chars: Vec<char> = text.chars().collect();
                for profile in RULE_PROFILES {
                    let hits = find(profile, &text, lang).unwrap();
                    let mut last = 0;
                    for h in hits {
                        prop_assert!(h.char_start >= last && h.char_start < h.char_end);
                        prop_assert!(h.char_end <= chars.len());
                        let slice: String = chars[h.char_start..h.char_end].iter().collect();
                        prop_assert_eq!(&slice, &h.value);
                        prop_assert!(!h.resolved.is_null());
                        last = h.char_end;
                    }
                }
            }
        }
    }
}
