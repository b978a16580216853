//! Built-in functions and methods of the subset: the common string, array and number methods,
//! `parseInt` and friends, `Math`, `JSON`, `Object.keys`. Anything else asks for the JS engine.

use super::eval::{EvalError, throw};
use crate::value::{V, number_to_string, strict_eq, to_integer};
use serde_json::Value as Json;
use std::borrow::Cow;

type R<'a> = Result<V<'a>, EvalError>;

fn arg<'a, 'b>(args: &'b [V<'a>], i: usize) -> &'b V<'a> {
    const UNDEF: V<'static> = V::Undef;
    args.get(i).unwrap_or(&UNDEF)
}

fn s<'a>(x: String) -> V<'a> {
    V::Str(Cow::Owned(x))
}

fn needs(what: String) -> EvalError {
    EvalError::NeedsJs(what)
}

/// Global functions: `parseInt(x)`, `String(x)`, ...
pub fn call_global<'a>(name: &str, args: Vec<V<'a>>) -> R<'a> {
    let a0 = arg(&args, 0);
    Ok(match name {
        "parseInt" => V::Num(parse_int(&a0.to_js_string(), arg(&args, 1))),
        "parseFloat" => V::Num(parse_float(&a0.to_js_string())),
        "Number" => V::Num(if args.is_empty() { 0.0 } else { a0.to_number() }),
        "String" => s(if args.is_empty() {
            String::new()
        } else {
            a0.to_js_string()
        }),
        "Boolean" => V::Bool(a0.truthy()),
        "isNaN" => V::Bool(a0.to_number().is_nan()),
        "isFinite" => V::Bool(a0.to_number().is_finite()),
        "encodeURIComponent" => s(encode_uri(&a0.to_js_string(), "-_.!~*'()")),
        "encodeURI" => s(encode_uri(&a0.to_js_string(), "-_.!~*'();/?:@&=+$,#")),
        _ => return Err(needs(format!("function {name}"))),
    })
}

/// `Math.floor(x)`, `JSON.stringify(x)`, `Object.keys(x)`, `Array.isArray(x)`, ...
pub fn call_static<'a>(ns: &str, name: &str, args: Vec<V<'a>>) -> R<'a> {
    let a0 = arg(&args, 0);
    let num = |i: usize| arg(&args, i).to_number();
    Ok(match (ns, name) {
        ("Math", "floor") => V::Num(num(0).floor()),
        ("Math", "ceil") => V::Num(num(0).ceil()),
        ("Math", "round") => V::Num(js_round(num(0))),
        ("Math", "abs") => V::Num(num(0).abs()),
        ("Math", "trunc") => V::Num(num(0).trunc()),
        ("Math", "sign") => {
            let n = num(0);
            V::Num(if n.is_nan() || n == 0.0 {
                n
            } else {
                n.signum()
            })
        }
        ("Math", "sqrt") => V::Num(num(0).sqrt()),
        ("Math", "pow") => V::Num(js_pow(num(0), num(1))),
        ("Math", "max") | ("Math", "min") => {
            let is_max = name == "max";
            let mut acc = if is_max {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
            for a in &args {
                let n = a.to_number();
                if n.is_nan() {
                    return Ok(V::Num(f64::NAN));
                }
                if (is_max && n > acc) || (!is_max && n < acc) {
                    acc = n;
                }
            }
            V::Num(acc)
        }
        ("JSON", "stringify") if args.len() == 1 => match a0 {
            V::Undef => V::Undef,
            other => s(other.to_json().map(|j| j.to_string()).unwrap_or_default()),
        },
        ("JSON", "parse") if args.len() == 1 => {
            match serde_json::from_str::<Json>(&a0.to_js_string()) {
                Ok(j) => V::from_owned(j),
                Err(e) => return throw(format!("SyntaxError: {e}")),
            }
        }
        ("Object", "keys") | ("Object", "values") => {
            let Some(j) = a0.as_json_obj() else {
                if a0.is_nullish() {
                    return throw("Cannot convert undefined or null to object");
                }
                return Err(needs(format!("Object.{name} of a primitive")));
            };
            let keys = name == "keys";
            let out: Vec<Json> = match j {
                Json::Object(m) => m
                    .iter()
                    .map(|(k, v)| {
                        if keys {
                            Json::String(k.clone())
                        } else {
                            v.clone()
                        }
                    })
                    .collect(),
                Json::Array(a) => a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        if keys {
                            Json::String(i.to_string())
                        } else {
                            v.clone()
                        }
                    })
                    .collect(),
                _ => vec![],
            };
            V::Own(Json::Array(out))
        }
        ("Array", "isArray") => V::Bool(matches!(a0.as_json_obj(), Some(Json::Array(_)))),
        ("Number", "isInteger") => {
            V::Bool(matches!(a0, V::Num(n) if n.is_finite() && n.fract() == 0.0))
        }
        ("Number", "isFinite") => V::Bool(matches!(a0, V::Num(n) if n.is_finite())),
        ("Number", "isNaN") => V::Bool(matches!(a0, V::Num(n) if n.is_nan())),
        ("Number", "parseFloat") => V::Num(parse_float(&a0.to_js_string())),
        ("Number", "parseInt") => V::Num(parse_int(&a0.to_js_string(), arg(&args, 1))),
        _ => return Err(needs(format!("{ns}.{name}"))),
    })
}

fn js_round(n: f64) -> f64 {
    if !n.is_finite() { n } else { (n + 0.5).floor() }
}

fn js_pow(b: f64, e: f64) -> f64 {
    if e.is_nan() || (b.abs() == 1.0 && e.is_infinite()) {
        f64::NAN
    } else {
        b.powf(e)
    }
}

/// `parseInt(string, radix)`
pub fn parse_int(text: &str, radix: &V) -> f64 {
    let t = text.trim_start_matches(crate::value::is_js_whitespace);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let mut r = crate::value::to_integer(radix) as i64;
    let mut t = t;
    if r == 0 {
        r = 10;
        if t.starts_with("0x") || t.starts_with("0X") {
            r = 16;
            t = &t[2..];
        }
    } else if r == 16 && (t.starts_with("0x") || t.starts_with("0X")) {
        t = &t[2..];
    }
    if !(2..=36).contains(&r) {
        return f64::NAN;
    }
    let digits: Vec<u32> = t.chars().map_while(|c| c.to_digit(r as u32)).collect();
    if digits.is_empty() {
        return f64::NAN;
    }
    let v = digits
        .iter()
        .fold(0f64, |acc, d| acc * r as f64 + *d as f64);
    if neg { -v } else { v }
}

/// `parseFloat(string)`: the longest numeric prefix.
pub fn parse_float(text: &str) -> f64 {
    let t = text.trim_start_matches(crate::value::is_js_whitespace);
    for inf in ["Infinity", "+Infinity", "-Infinity"] {
        if t.starts_with(inf) {
            return if inf.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            };
        }
    }
    let b = t.as_bytes();
    let mut end = 0;
    let mut best = None;
    if end < b.len() && (b[end] == b'+' || b[end] == b'-') {
        end += 1;
    }
    let mut seen_dot = false;
    let mut seen_digit = false;
    while end < b.len() {
        match b[end] {
            b'0'..=b'9' => {
                seen_digit = true;
                end += 1;
                best = Some(end);
            }
            b'.' if !seen_dot => {
                seen_dot = true;
                end += 1;
            }
            b'e' | b'E' if seen_digit => {
                let mut k = end + 1;
                if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
                    k += 1;
                }
                let start = k;
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                if k > start {
                    best = Some(k);
                }
                break;
            }
            _ => break,
        }
    }
    match best {
        Some(e) => t[..e].parse::<f64>().unwrap_or(f64::NAN),
        None => f64::NAN,
    }
}

fn encode_uri(text: &str, keep: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || keep.contains(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

/// Relative index → absolute, as `slice` and friends clamp it.
fn rel_index(v: &V, len: usize, default: usize) -> usize {
    if matches!(v, V::Undef) {
        return default;
    }
    let n = to_integer(v);
    if n < 0.0 {
        (len as f64 + n).max(0.0) as usize
    } else {
        (n as usize).min(len)
    }
}

fn utf16(sv: &str) -> Vec<u16> {
    sv.encode_utf16().collect()
}

fn from16(u: &[u16]) -> String {
    String::from_utf16_lossy(u)
}

fn find16(hay: &[u16], needle: &[u16], from: usize) -> Option<usize> {
    if needle.is_empty() {
        return Some(from.min(hay.len()));
    }
    (from..=hay.len().saturating_sub(needle.len())).find(|&i| hay[i..].starts_with(needle))
}

/// Methods called on a value: `content.toLowerCase()`, `list.includes(x)`, `re.test(s)`, ...
pub fn call_method<'a>(recv: V<'a>, name: &str, args: Vec<V<'a>>) -> R<'a> {
    match &recv {
        V::Str(sv) => string_method(sv, name, &args),
        V::Regex(re) => match name {
            "test" => {
                let text = arg(&args, 0).to_js_string();
                let r = re.regex().ok_or_else(|| needs("regex".into()))?;
                if re.global() {
                    return Err(needs("test of a global regex".into()));
                }
                Ok(V::Bool(
                    r.is_match(&text)
                        .map_err(|e| EvalError::Throw(e.to_string()))?,
                ))
            }
            _ => Err(needs(format!("RegExp.{name}"))),
        },
        V::Num(n) => match name {
            "toString" if args.is_empty() => Ok(s(number_to_string(*n))),
            "toFixed" => {
                let digits = to_integer(arg(&args, 0));
                if !(0.0..=100.0).contains(&digits) {
                    return throw("toFixed() digits argument must be between 0 and 100");
                }
                if !n.is_finite() || n.abs() >= 1e21 {
                    return Ok(s(number_to_string(*n)));
                }
                Ok(s(to_fixed(*n, digits as usize)))
            }
            _ => Err(needs(format!("Number.{name}"))),
        },
        V::Bool(b) if name == "toString" => Ok(s(b.to_string())),
        V::Ref(Json::Array(a)) => array_method(a, name, &args),
        V::Own(Json::Array(a)) => array_method(a, name, &args).map(|v| match v {
            V::Ref(j) => V::Own(j.clone()),
            V::Str(Cow::Borrowed(x)) => V::Str(Cow::Owned(x.to_string())),
            other => other.into_static(),
        }),
        V::Ref(Json::Object(m)) | V::Own(Json::Object(m)) if name == "hasOwnProperty" => {
            Ok(V::Bool(m.contains_key(&arg(&args, 0).to_js_string())))
        }
        _ => Err(needs(format!("method {name} on {}", recv.type_of()))),
    }
}

impl V<'_> {
    fn into_static(self) -> V<'static> {
        match self {
            V::Undef => V::Undef,
            V::Null => V::Null,
            V::Bool(b) => V::Bool(b),
            V::Num(n) => V::Num(n),
            V::Str(x) => V::Str(Cow::Owned(x.into_owned())),
            V::Ref(j) => V::Own(j.clone()),
            V::Own(j) => V::Own(j),
            V::Regex(r) => V::Own(serde_json::json!({"source": r.source})),
        }
    }
}

fn array_method<'a>(a: &'a [Json], name: &str, args: &[V]) -> R<'a> {
    let a0 = arg(args, 0);
    Ok(match name {
        "includes" => V::Bool(a.iter().any(|e| {
            let ev = V::from_json(e);
            strict_eq(&ev, a0)
                || matches!((&ev, a0), (V::Num(x), V::Num(y)) if x.is_nan() && y.is_nan())
        })),
        "indexOf" => V::Num(
            a.iter()
                .position(|e| strict_eq(&V::from_json(e), a0))
                .map(|i| i as f64)
                .unwrap_or(-1.0),
        ),
        "join" => {
            let sep = if matches!(a0, V::Undef) {
                ",".to_string()
            } else {
                a0.to_js_string()
            };
            let parts: Vec<String> = a
                .iter()
                .map(|e| {
                    if e.is_null() {
                        String::new()
                    } else {
                        V::from_json(e).to_js_string()
                    }
                })
                .collect();
            s(parts.join(&sep))
        }
        "slice" => {
            let start = rel_index(a0, a.len(), 0);
            let end = rel_index(arg(args, 1), a.len(), a.len());
            V::Own(Json::Array(if start < end {
                a[start..end].to_vec()
            } else {
                vec![]
            }))
        }
        "concat" => {
            let mut out = a.to_vec();
            for x in args {
                match x.as_json_obj() {
                    Some(Json::Array(more)) => out.extend(more.iter().cloned()),
                    _ => out.push(x.to_json().unwrap_or(Json::Null)),
                }
            }
            V::Own(Json::Array(out))
        }
        "at" => {
            let n = to_integer(a0);
            let i = if n < 0.0 { a.len() as f64 + n } else { n };
            if i < 0.0 || i >= a.len() as f64 {
                V::Undef
            } else {
                V::from_json(&a[i as usize])
            }
        }
        "toString" => s(V::Own(Json::Array(a.to_vec())).to_js_string()),
        _ => return Err(needs(format!("Array.{name}"))),
    })
}

/// String methods of the subset: case, trimming, searching, parts, padding, splitting,
/// replacing and matching.
fn string_method<'a>(sv: &str, name: &str, args: &[V]) -> R<'a> {
    let a0 = arg(args, 0);
    let a1 = arg(args, 1);
    Ok(match name {
        "toLowerCase" | "toLocaleLowerCase" => s(sv.to_lowercase()),
        "toUpperCase" | "toLocaleUpperCase" => s(sv.to_uppercase()),
        "trim" => s(sv.trim_matches(crate::value::is_js_whitespace).to_string()),
        "trimStart" => s(sv
            .trim_start_matches(crate::value::is_js_whitespace)
            .to_string()),
        "trimEnd" => s(sv
            .trim_end_matches(crate::value::is_js_whitespace)
            .to_string()),
        "toString" | "valueOf" => s(sv.to_string()),
        "includes" | "startsWith" | "endsWith" | "indexOf" | "lastIndexOf" => {
            return string_find(sv, name, a0, a1);
        }
        "slice" | "substring" | "substr" | "charAt" | "charCodeAt" => string_part(sv, name, a0, a1),
        "concat" => {
            let mut out = sv.to_string();
            for x in args {
                out.push_str(&x.to_js_string());
            }
            s(out)
        }
        "repeat" => {
            let n = to_integer(a0);
            if !(0.0..=1e6).contains(&n) {
                return throw("Invalid count value");
            }
            s(sv.repeat(n as usize))
        }
        "padStart" | "padEnd" => string_pad(sv, name == "padStart", a0, a1),
        "split" => return string_split(sv, a0, a1),
        "replace" | "replaceAll" => return string_replace(sv, name == "replaceAll", a0, a1),
        "match" => return string_match(sv, a0),
        "search" => return string_search(sv, a0),
        "localeCompare" => {
            let o = a0.to_js_string();
            V::Num(match sv.cmp(o.as_str()) {
                std::cmp::Ordering::Less => -1.0,
                std::cmp::Ordering::Equal => 0.0,
                std::cmp::Ordering::Greater => 1.0,
            })
        }
        _ => return Err(needs(format!("String.{name}"))),
    })
}

/// `includes`, `startsWith`, `endsWith`, `indexOf`, `lastIndexOf`: where a substring is,
/// in UTF-16 units as JS counts them.
fn string_find<'a>(sv: &str, name: &str, a0: &V, a1: &V) -> R<'a> {
    if matches!(a0, V::Regex(_)) {
        return throw(format!(
            "First argument to String.prototype.{name} must not be a regular expression"
        ));
    }
    let hay = utf16(sv);
    let needle = utf16(&a0.to_js_string());
    Ok(match name {
        "includes" => {
            V::Bool(find16(&hay, &needle, rel_index(a1, hay.len(), 0).min(hay.len())).is_some())
        }
        "startsWith" => {
            let p = rel_index(a1, hay.len(), 0);
            V::Bool(hay[p..].starts_with(&needle))
        }
        "endsWith" => {
            let e = rel_index(a1, hay.len(), hay.len());
            V::Bool(hay[..e].ends_with(&needle))
        }
        "indexOf" => {
            let from = if matches!(a1, V::Undef) {
                0
            } else {
                (to_integer(a1).max(0.0) as usize).min(hay.len())
            };
            V::Num(
                find16(&hay, &needle, from)
                    .map(|i| i as f64)
                    .unwrap_or(-1.0),
            )
        }
        _ => {
            if !matches!(a1, V::Undef) {
                return Err(needs("lastIndexOf with a position".into()));
            }
            let pos = (0..=hay.len().saturating_sub(needle.len()))
                .rev()
                .find(|&i| hay.len() >= needle.len() && hay[i..].starts_with(&needle));
            V::Num(pos.map(|i| i as f64).unwrap_or(-1.0))
        }
    })
}

/// `slice`, `substring`, `substr`, `charAt`, `charCodeAt`: a part of the string by UTF-16
/// positions.
fn string_part<'a>(sv: &str, name: &str, a0: &V, a1: &V) -> V<'a> {
    let h = utf16(sv);
    match name {
        "slice" => {
            let start = rel_index(a0, h.len(), 0);
            let end = rel_index(a1, h.len(), h.len());
            s(if start < end {
                from16(&h[start..end])
            } else {
                String::new()
            })
        }
        "substring" => {
            let clamp = |v: &V, d: usize| {
                if matches!(v, V::Undef) {
                    d
                } else {
                    (to_integer(v).max(0.0) as usize).min(h.len())
                }
            };
            let (x, y) = (clamp(a0, 0), clamp(a1, h.len()));
            let (lo, hi) = if x < y { (x, y) } else { (y, x) };
            s(from16(&h[lo..hi]))
        }
        "substr" => {
            let start = rel_index(a0, h.len(), 0);
            let len = if matches!(a1, V::Undef) {
                h.len()
            } else {
                to_integer(a1).max(0.0) as usize
            };
            let end = start.saturating_add(len).min(h.len());
            s(from16(&h[start..end.max(start)]))
        }
        "charAt" => {
            let i = to_integer(a0);
            s(if i >= 0.0 && (i as usize) < h.len() {
                from16(&h[i as usize..i as usize + 1])
            } else {
                String::new()
            })
        }
        _ => {
            let i = to_integer(a0);
            V::Num(if i >= 0.0 && (i as usize) < h.len() {
                h[i as usize] as f64
            } else {
                f64::NAN
            })
        }
    }
}

/// `padStart` / `padEnd`: the string filled up to a length with a repeated fill.
fn string_pad<'a>(sv: &str, at_start: bool, a0: &V, a1: &V) -> V<'a> {
    let h = utf16(sv);
    let target = to_integer(a0).max(0.0) as usize;
    let fill = if matches!(a1, V::Undef) {
        vec![b' ' as u16]
    } else {
        utf16(&a1.to_js_string())
    };
    if target <= h.len() || fill.is_empty() {
        return s(sv.to_string());
    }
    let pad: Vec<u16> = fill
        .iter()
        .cycle()
        .take(target - h.len())
        .copied()
        .collect();
    s(if at_start {
        from16(&[pad, h].concat())
    } else {
        from16(&[h, pad].concat())
    })
}

/// `split` by a string (or into UTF-16 units by the empty string).
fn string_split<'a>(sv: &str, a0: &V, a1: &V) -> R<'a> {
    if matches!(a0, V::Regex(_)) || !matches!(a1, V::Undef) {
        return Err(needs("split by regex or with a limit".into()));
    }
    if matches!(a0, V::Undef) {
        return Ok(V::Own(Json::Array(vec![Json::String(sv.to_string())])));
    }
    let sep = a0.to_js_string();
    let parts: Vec<Json> = if sep.is_empty() {
        utf16(sv)
            .iter()
            .map(|c| Json::String(from16(&[*c])))
            .collect()
    } else {
        sv.split(sep.as_str())
            .map(|p| Json::String(p.to_string()))
            .collect()
    };
    Ok(V::Own(Json::Array(parts)))
}

/// `replace` / `replaceAll` by a regex or a plain string, with a string replacement.
fn string_replace<'a>(sv: &str, all: bool, a0: &V, a1: &V) -> R<'a> {
    let repl = match a1 {
        V::Str(r) => r.to_string(),
        V::Undef | V::Null | V::Num(_) | V::Bool(_) => a1.to_js_string(),
        _ => return Err(needs("replace with a function".into())),
    };
    match a0 {
        V::Regex(re) => {
            if all && !re.global() {
                return throw("replaceAll must be called with a global RegExp");
            }
            let r = re.regex().ok_or_else(|| needs("regex".into()))?;
            regex_replace(sv, r, &repl, re.global())
        }
        _ => {
            let pat = a0.to_js_string();
            if repl.contains('$') {
                return Err(needs("replacement pattern with $".into()));
            }
            Ok(s(if all {
                if pat.is_empty() {
                    return Err(needs("replaceAll of an empty string".into()));
                }
                sv.replace(&pat, &repl)
            } else {
                sv.replacen(&pat, &repl, 1)
            }))
        }
    }
}

/// `match` with a regex: every match (global), else the first match's groups; null if none.
fn string_match<'a>(sv: &str, a0: &V) -> R<'a> {
    let V::Regex(re) = a0 else {
        return Err(needs("match with a string".into()));
    };
    let r = re.regex().ok_or_else(|| needs("regex".into()))?;
    let err = |e: fancy_regex::Error| EvalError::Throw(e.to_string());
    if re.global() {
        let all: Vec<Json> = r
            .find_iter(sv)
            .map(|m| m.map(|m| Json::String(m.as_str().to_string())).map_err(err))
            .collect::<Result<_, _>>()?;
        return Ok(if all.is_empty() {
            V::Null
        } else {
            V::Own(Json::Array(all))
        });
    }
    Ok(match r.captures(sv).map_err(err)? {
        None => V::Null,
        Some(c) => V::Own(Json::Array(
            c.iter()
                .map(|g| {
                    g.map(|m| Json::String(m.as_str().to_string()))
                        .unwrap_or(Json::Null)
                })
                .collect(),
        )),
    })
}

/// `search` with a regex: the UTF-16 position of the first match, or -1.
fn string_search<'a>(sv: &str, a0: &V) -> R<'a> {
    let V::Regex(re) = a0 else {
        return Err(needs("search with a string".into()));
    };
    let r = re.regex().ok_or_else(|| needs("regex".into()))?;
    Ok(
        match r.find(sv).map_err(|e| EvalError::Throw(e.to_string()))? {
            Some(m) => V::Num(sv[..m.start()].encode_utf16().count() as f64),
            None => V::Num(-1.0),
        },
    )
}

fn regex_replace<'a>(sv: &str, r: &fancy_regex::Regex, repl: &str, global: bool) -> R<'a> {
    let mut out = String::new();
    let mut last = 0;
    let caps_iter = r.captures_iter(sv);
    for caps in caps_iter {
        let caps = caps.map_err(|e| EvalError::Throw(e.to_string()))?;
        let m = caps.get(0).unwrap();
        out.push_str(&sv[last..m.start()]);
        expand_js_replacement(repl, &caps, sv, &mut out);
        last = m.end();
        if !global {
            break;
        }
    }
    out.push_str(&sv[last..]);
    Ok(s(out))
}

/// JS replacement patterns: `$$`, `$&`, `` $` ``, `$'`, `$1`..`$99`.
fn expand_js_replacement(repl: &str, caps: &fancy_regex::Captures, sv: &str, out: &mut String) {
    let m = caps.get(0).unwrap();
    let b = repl.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            match b[i + 1] {
                b'$' => {
                    out.push('$');
                    i += 2;
                    continue;
                }
                b'&' => {
                    out.push_str(m.as_str());
                    i += 2;
                    continue;
                }
                b'`' => {
                    out.push_str(&sv[..m.start()]);
                    i += 2;
                    continue;
                }
                b'\'' => {
                    out.push_str(&sv[m.end()..]);
                    i += 2;
                    continue;
                }
                d if d.is_ascii_digit() => {
                    let mut n = (d - b'0') as usize;
                    let mut len = 2;
                    if i + 2 < b.len() && b[i + 2].is_ascii_digit() {
                        let two = n * 10 + (b[i + 2] - b'0') as usize;
                        if two > 0 && two < caps.len() {
                            n = two;
                            len = 3;
                        }
                    }
                    if n > 0 && n < caps.len() {
                        if let Some(g) = caps.get(n) {
                            out.push_str(g.as_str());
                        }
                        i += len;
                        continue;
                    }
                }
                _ => {}
            }
        }
        let ch = repl[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
}

/// `Number.prototype.toFixed`: like Rust's exact formatting, except that an exact tie rounds
/// away from zero (JS picks the larger n) where Rust rounds to even.
fn to_fixed(n: f64, digits: usize) -> String {
    let scaled = n.abs() * 10f64.powi(digits as i32);
    if scaled.fract() == 0.5 && scaled < 9e15 {
        let mut out = format!(
            "{:.*}",
            digits,
            (scaled.floor() + 1.0) / 10f64.powi(digits as i32)
        );
        if n < 0.0 {
            out.insert(0, '-');
        }
        return out;
    }
    let out = format!("{:.*}", digits, n);
    if out.starts_with('-') && out[1..].bytes().all(|b| b == b'0' || b == b'.') {
        out[1..].to_string()
    } else {
        out
    }
}
