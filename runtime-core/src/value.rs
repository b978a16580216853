//! JavaScript value semantics over JSON data.
//!
//! Bot data (context, payload, config, ...) is JSON. Expressions see it through [`V`], which
//! borrows from the JSON where it can and adds what JSON lacks (`undefined`, NaN, regexes), and
//! implements the conversions of ECMAScript (ToBoolean, ToNumber, ToString, ToPrimitive) and its
//! equality and ordering rules.

use serde_json::{Map, Value as Json};
use std::borrow::Cow;
use std::cmp::Ordering;

use crate::regex::RegexLit;

/// A JavaScript value as the fast evaluator sees it.
#[derive(Debug, Clone)]
pub enum V<'a> {
    Undef,
    Null,
    Bool(bool),
    Num(f64),
    Str(Cow<'a, str>),
    /// An array or object borrowed from bot data (identity = address).
    Ref(&'a Json),
    /// An array or object built by the expression.
    Own(Json),
    Regex(&'a RegexLit),
}

impl<'a> V<'a> {
    /// Views a JSON value; arrays and objects stay borrowed.
    pub fn from_json(j: &'a Json) -> V<'a> {
        match j {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(*b),
            Json::Number(n) => V::Num(n.as_f64().unwrap_or(f64::NAN)),
            Json::String(s) => V::Str(Cow::Borrowed(s)),
            _ => V::Ref(j),
        }
    }

    /// Takes ownership of a JSON value.
    pub fn from_owned(j: Json) -> V<'a> {
        match j {
            Json::Null => V::Null,
            Json::Bool(b) => V::Bool(b),
            Json::Number(n) => V::Num(n.as_f64().unwrap_or(f64::NAN)),
            Json::String(s) => V::Str(Cow::Owned(s)),
            other => V::Own(other),
        }
    }

    /// The array or object behind this value, if it is one.
    pub fn as_json_obj(&self) -> Option<&Json> {
        match self {
            V::Ref(j) => Some(j),
            V::Own(j) => Some(j),
            _ => None,
        }
    }

    /// Converts to JSON as `JSON.stringify` would: `undefined` gives `None`, NaN and
    /// infinities become null, integral numbers are written without a fraction.
    pub fn to_json(&self) -> Option<Json> {
        Some(match self {
            V::Undef => return None,
            V::Null => Json::Null,
            V::Bool(b) => Json::Bool(*b),
            V::Num(n) => num_to_json(*n),
            V::Str(s) => Json::String(s.to_string()),
            V::Ref(j) => (*j).clone(),
            V::Own(j) => j.clone(),
            V::Regex(_) => Json::Object(Map::new()),
        })
    }

    pub fn into_json(self) -> Option<Json> {
        match self {
            V::Own(j) => Some(j),
            V::Str(Cow::Owned(s)) => Some(Json::String(s)),
            other => other.to_json(),
        }
    }

    pub fn type_of(&self) -> &'static str {
        match self {
            V::Undef => "undefined",
            V::Bool(_) => "boolean",
            V::Num(_) => "number",
            V::Str(_) => "string",
            V::Null | V::Ref(_) | V::Own(_) | V::Regex(_) => "object",
        }
    }

    pub fn is_nullish(&self) -> bool {
        matches!(self, V::Undef | V::Null)
    }

    /// ECMAScript ToBoolean.
    pub fn truthy(&self) -> bool {
        match self {
            V::Undef | V::Null => false,
            V::Bool(b) => *b,
            V::Num(n) => *n != 0.0 && !n.is_nan(),
            V::Str(s) => !s.is_empty(),
            V::Ref(_) | V::Own(_) | V::Regex(_) => true,
        }
    }

    /// ECMAScript ToPrimitive (hint default/number; arrays and plain objects use toString).
    pub fn to_primitive(&self) -> V<'static> {
        match self {
            V::Ref(_) | V::Own(_) | V::Regex(_) => V::Str(Cow::Owned(self.to_js_string())),
            V::Undef => V::Undef,
            V::Null => V::Null,
            V::Bool(b) => V::Bool(*b),
            V::Num(n) => V::Num(*n),
            V::Str(s) => V::Str(Cow::Owned(s.to_string())),
        }
    }

    /// ECMAScript ToNumber.
    pub fn to_number(&self) -> f64 {
        match self {
            V::Undef => f64::NAN,
            V::Null => 0.0,
            V::Bool(b) => f64::from(u8::from(*b)),
            V::Num(n) => *n,
            V::Str(s) => string_to_number(s),
            V::Ref(_) | V::Own(_) | V::Regex(_) => self.to_primitive().to_number(),
        }
    }

    /// ECMAScript ToString.
    pub fn to_js_string(&self) -> String {
        match self {
            V::Undef => "undefined".into(),
            V::Null => "null".into(),
            V::Bool(b) => b.to_string(),
            V::Num(n) => number_to_string(*n),
            V::Str(s) => s.to_string(),
            V::Ref(j) => json_to_js_string(j),
            V::Own(j) => json_to_js_string(j),
            V::Regex(r) => format!("/{}/{}", r.source, r.flags),
        }
    }

    /// The text `$(...)` interpolation puts in a longer string: strings as they are, numbers
    /// and booleans in their JS form, arrays and objects as JSON, null and undefined as "".
    pub fn to_interpolated(&self) -> String {
        match self {
            V::Undef | V::Null => String::new(),
            V::Ref(_) | V::Own(_) => self.to_json().map(|j| j.to_string()).unwrap_or_default(),
            _ => self.to_js_string(),
        }
    }
}

fn json_to_js_string(j: &Json) -> String {
    match j {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => number_to_string(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => s.clone(),
        Json::Array(a) => {
            let parts: Vec<String> = a
                .iter()
                .map(|e| match e {
                    Json::Null => String::new(),
                    other => json_to_js_string(other),
                })
                .collect();
            parts.join(",")
        }
        Json::Object(_) => "[object Object]".into(),
    }
}

/// How deeply nested a value an expression may give to the engine (the outermost array or
/// object is level 1). Default 64; bots never come close. Each evaluation can wrap a value
/// one level deeper (`context.a: "[context.a]"`), so without a bound a bot could grow its
/// session on every step until a recursive walk (clone, drop, serialisation) overflows the
/// stack, or until serde_json, which reads 128 levels, can no longer load the session.
/// Checking costs one walk of the value, which the engine has just copied anyway.
pub const MAX_VALUE_DEPTH: usize = 64;

/// The path (`a.b[2].c`) of the first array or object of `v` nested more than `max` levels
/// deep (`v` itself, when an array or object, is level 1); `None` if there is none. Walks
/// with an explicit stack: `v` may be deeper than any recursion could follow.
pub fn nested_deeper_than(v: &Json, max: usize) -> Option<String> {
    enum Children<'a> {
        Arr(std::iter::Enumerate<std::slice::Iter<'a, Json>>),
        Obj(serde_json::map::Iter<'a>),
    }
    enum Seg<'a> {
        Root,
        Index(usize),
        Key(&'a str),
    }
    fn children(v: &Json) -> Option<Children<'_>> {
        match v {
            Json::Array(a) => Some(Children::Arr(a.iter().enumerate())),
            Json::Object(m) => Some(Children::Obj(m.iter())),
            _ => None,
        }
    }
    fn path<'a>(segs: impl Iterator<Item = &'a Seg<'a>>) -> String {
        let mut out = String::new();
        for s in segs {
            match s {
                Seg::Root => {}
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
            }
        }
        out
    }
    let root = children(v)?;
    if max == 0 {
        return Some(String::new());
    }
    let mut stack = vec![(Seg::Root, root)];
    while let Some((_, it)) = stack.last_mut() {
        let next = match it {
            Children::Arr(i) => i.next().map(|(i, c)| (Seg::Index(i), c)),
            Children::Obj(m) => m.next().map(|(k, c)| (Seg::Key(k.as_str()), c)),
        };
        let Some((seg, child)) = next else {
            stack.pop();
            continue;
        };
        if let Some(grand) = children(child) {
            if stack.len() >= max {
                return Some(path(stack.iter().map(|(s, _)| s).chain([&seg])));
            }
            stack.push((seg, grand));
        }
    }
    None
}

/// Number → JSON number, as `JSON.stringify` writes it.
pub fn num_to_json(n: f64) -> Json {
    if !n.is_finite() {
        return Json::Null;
    }
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 {
        // -0 is written as 0 by JSON.stringify.
        return Json::from(n as i64);
    }
    serde_json::Number::from_f64(n)
        .map(Json::Number)
        .unwrap_or(Json::Null)
}

/// ECMAScript Number::toString(10).
pub fn number_to_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n == 0.0 {
        return "0".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let mut buf = ryu_js::Buffer::new();
    buf.format(n).to_string()
}

/// ECMAScript StringToNumber (decimal, 0x/0o/0b, Infinity, surrounding whitespace).
pub fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_whitespace);
    if t.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            if digits.is_empty() {
                return f64::NAN;
            }
            return u128::from_str_radix(digits, radix)
                .map(|v| v as f64)
                .unwrap_or(f64::NAN);
        }
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    // Rust accepts "inf", "nan", "1e5", "1.", ".5"; JS accepts the numeric forms only.
    let ok = t
        .bytes()
        .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
        && t.bytes().any(|b| b.is_ascii_digit());
    if !ok {
        return f64::NAN;
    }
    t.parse::<f64>().unwrap_or(f64::NAN)
}

pub fn is_js_whitespace(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

fn same_object(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Ref(x), V::Ref(y)) => std::ptr::eq(*x, *y),
        (V::Regex(x), V::Regex(y)) => std::ptr::eq(*x, *y),
        _ => false,
    }
}

fn is_object(v: &V) -> bool {
    matches!(v, V::Ref(_) | V::Own(_) | V::Regex(_))
}

/// `===`
pub fn strict_eq(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Undef, V::Undef) | (V::Null, V::Null) => true,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Num(x), V::Num(y)) => x == y,
        (V::Str(x), V::Str(y)) => x == y,
        _ if is_object(a) && is_object(b) => same_object(a, b),
        _ => false,
    }
}

/// `==` (IsLooselyEqual).
pub fn loose_eq(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Undef | V::Null, V::Undef | V::Null) => true,
        (V::Undef | V::Null, _) | (_, V::Undef | V::Null) => false,
        (V::Num(x), V::Str(_)) => *x == b.to_number(),
        (V::Str(_), V::Num(y)) => a.to_number() == *y,
        (V::Bool(_), _) => loose_eq(&V::Num(a.to_number()), b),
        (_, V::Bool(_)) => loose_eq(a, &V::Num(b.to_number())),
        _ if is_object(a) && is_object(b) => same_object(a, b),
        _ if is_object(a) => loose_eq(&a.to_primitive(), b),
        _ if is_object(b) => loose_eq(a, &b.to_primitive()),
        _ => strict_eq(a, b),
    }
}

/// Abstract relational comparison; `None` when a NaN is involved.
pub fn compare(a: &V, b: &V) -> Option<Ordering> {
    let pa = a.to_primitive();
    let pb = b.to_primitive();
    if let (V::Str(x), V::Str(y)) = (&pa, &pb) {
        return Some(x.encode_utf16().cmp(y.encode_utf16()));
    }
    let (x, y) = (pa.to_number(), pb.to_number());
    x.partial_cmp(&y)
}

/// `+`
pub fn add<'a>(a: &V, b: &V) -> V<'a> {
    let pa = a.to_primitive();
    let pb = b.to_primitive();
    if matches!(pa, V::Str(_)) || matches!(pb, V::Str(_)) {
        let mut s = pa.to_js_string();
        s.push_str(&pb.to_js_string());
        V::Str(Cow::Owned(s))
    } else {
        V::Num(pa.to_number() + pb.to_number())
    }
}

/// ToInt32-free integer conversion used by string methods (ToIntegerOrInfinity).
pub fn to_integer(v: &V) -> f64 {
    let n = v.to_number();
    if n.is_nan() { 0.0 } else { n.trunc() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> V<'static> {
        V::Str(Cow::Owned(x.into()))
    }

    #[test]
    fn number_formatting_follows_js() {
        assert_eq!(number_to_string(1.0), "1");
        assert_eq!(number_to_string(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(number_to_string(1e21), "1e+21");
        assert_eq!(number_to_string(-0.0), "0");
        assert_eq!(number_to_string(f64::NAN), "NaN");
    }

    #[test]
    fn string_to_number_follows_js() {
        assert_eq!(string_to_number(" 42 "), 42.0);
        assert_eq!(string_to_number(""), 0.0);
        assert_eq!(string_to_number("0x1f"), 31.0);
        assert!(string_to_number("12px").is_nan());
        assert!(string_to_number("inf").is_nan());
        assert_eq!(string_to_number("-Infinity"), f64::NEG_INFINITY);
    }

    #[test]
    fn loose_equality_coerces_like_js() {
        assert!(loose_eq(&V::Num(1.0), &s("1")));
        assert!(loose_eq(&V::Bool(true), &s("1")));
        assert!(loose_eq(&V::Null, &V::Undef));
        assert!(!loose_eq(&V::Null, &V::Num(0.0)));
        assert!(loose_eq(&V::Own(serde_json::json!([5])), &V::Num(5.0)));
        assert!(!loose_eq(&V::Num(f64::NAN), &V::Num(f64::NAN)));
        assert!(!strict_eq(&V::Num(1.0), &s("1")));
    }

    #[test]
    fn addition_concatenates_when_a_side_is_a_string() {
        assert_eq!(add(&V::Num(1.0), &s("2")).to_js_string(), "12");
        assert_eq!(add(&V::Num(1.0), &V::Bool(true)).to_js_string(), "2");
        assert_eq!(add(&V::Null, &V::Num(1.0)).to_js_string(), "1");
        assert_eq!(
            add(&V::Own(serde_json::json!([1, 2])), &V::Num(3.0)).to_js_string(),
            "1,23"
        );
    }
}
