//! `$(...)` interpolation and `$[...]` template references in action options.

use crate::expr::CompiledExpr;
use crate::model::{Opt, Part};
use crate::value::V;
use serde_json::{Map, Value as Json};

/// Deep merge of `over` into `base`: objects merge key by key; arrays and scalars replace.
/// Recursive: both come from a bot document, nested at most `MAX_DOC_DEPTH` deep.
pub fn deep_merge(base: &mut Json, over: &Json) {
    match (base, over) {
        (Json::Object(b), Json::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => deep_merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Splits a string into literal text and `$(...)` expressions. `None` if it has none.
///
/// A `$(` without its `)` is literal text. Linear in the length of `s`: the closing
/// parenthesis of every `(` is found in one pass (`closing_parens`), where scanning from
/// each `$(` would be quadratic on a string of many unclosed ones (`$($($(…`).
pub fn split_interpolations(s: &str) -> Option<Vec<(bool, String)>> {
    if !s.contains("$(") {
        return None;
    }
    let close = closing_parens(s.as_bytes());
    let mut parts = vec![];
    let mut lit = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$'
            && i + 1 < b.len()
            && b[i + 1] == b'('
            && let Some(end) = close(i + 1)
        {
            if !lit.is_empty() {
                parts.push((false, std::mem::take(&mut lit)));
            }
            parts.push((true, s[i + 2..end].trim().to_string()));
            i = end + 1;
            continue;
        }
        let ch = s[i..].chars().next().unwrap();
        lit.push(ch);
        i += ch.len_utf8();
    }
    if !lit.is_empty() {
        parts.push((false, lit));
    }
    Some(parts)
}

/// For the `(` at any index `open`, the index of the `)` that closes it, skipping quoted
/// strings (`'`, `"`, `` ` ``, with `\` escapes inside them); `None` if it is never closed.
///
/// One pass from the right. `next[i]`: where a scan that starts at `i` outside quotes, at
/// depth 0, first meets an unmatched `)`. A `(` at `i` is closed at `r = next[i + 1]` and the
/// scan goes on at `next[r + 1]`; a quote at `i` continues in that quote, whose scan (inside
/// quotes it only looks for its end) needs only the next two positions.
fn closing_parens(b: &[u8]) -> impl Fn(usize) -> Option<usize> {
    const NONE: u32 = u32::MAX;
    const QUOTES: [u8; 3] = [b'\'', b'"', b'`'];
    let n = b.len();
    let mut next = vec![NONE; n + 2];
    // In-quote scans at i + 1 and i + 2, one per quote character.
    let mut q1 = [NONE; 3];
    let mut q2 = [NONE; 3];
    for i in (0..n).rev() {
        let c = b[i];
        let mut q0 = [NONE; 3];
        for (k, q) in QUOTES.iter().enumerate() {
            q0[k] = if c == b'\\' {
                q2[k]
            } else if c == *q {
                next[i + 1]
            } else {
                q1[k]
            };
        }
        next[i] = match c {
            b'(' => match next[i + 1] {
                NONE => NONE,
                r => next[r as usize + 1],
            },
            b')' => i as u32,
            _ => match QUOTES.iter().position(|q| *q == c) {
                Some(k) => q1[k],
                None => next[i + 1],
            },
        };
        q2 = q1;
        q1 = q0;
    }
    move |open| match next.get(open + 1) {
        Some(&r) if r != NONE => Some(r as usize),
        _ => None,
    }
}

/// Parses the interpolations of a string once (at compile time, or at run time for text
/// templates whose text is only known then).
pub fn compile_text(s: &str, expr: &mut dyn FnMut(&str) -> CompiledExpr) -> Opt {
    match split_interpolations(s) {
        None => Opt::Lit(Json::String(s.to_string())),
        Some(parts) => {
            if parts.len() == 1 && parts[0].0 {
                return Opt::Whole(expr(&parts[0].1));
            }
            Opt::Text(
                parts
                    .into_iter()
                    .map(|(is_expr, t)| {
                        if is_expr {
                            Part::Expr(expr(&t))
                        } else {
                            Part::Lit(t)
                        }
                    })
                    .collect(),
            )
        }
    }
}

/// Compiles every string of an options tree (keys excluded). Subtrees without an
/// interpolation stay literal JSON. Recursive: options come from a bot document, nested at
/// most `MAX_DOC_DEPTH` deep; each value is visited once.
pub fn compile_options(
    v: &Json,
    expr: &mut dyn FnMut(&str, &str) -> CompiledExpr,
    path: &str,
) -> Opt {
    match v {
        Json::String(s) => {
            let p = format!("{path}.options");
            compile_text(s, &mut |src| expr(src, &p))
        }
        Json::Array(items) => {
            let items: Vec<Opt> = items
                .iter()
                .map(|it| compile_options(it, expr, path))
                .collect();
            if items.iter().all(|o| matches!(o, Opt::Lit(_))) {
                return Opt::Lit(Json::Array(items.into_iter().map(lit).collect()));
            }
            Opt::Arr(items)
        }
        Json::Object(m) => {
            let props: Vec<(String, Opt)> = m
                .iter()
                .map(|(k, it)| (k.clone(), compile_options(it, expr, path)))
                .collect();
            if props.iter().all(|(_, o)| matches!(o, Opt::Lit(_))) {
                return Opt::Lit(Json::Object(
                    props.into_iter().map(|(k, o)| (k, lit(o))).collect(),
                ));
            }
            Opt::Obj(props)
        }
        other => Opt::Lit(other.clone()),
    }
}

/// The JSON of an [`Opt::Lit`].
fn lit(o: Opt) -> Json {
    match o {
        Opt::Lit(j) => j,
        _ => unreachable!("checked to be literal"),
    }
}

/// Renders compiled options (recursive, as deep as the options). `eval` gives the value of an
/// expression (`None` = undefined or an error at that site); it returns `Err` only for
/// failures that abort the step.
pub fn render<E>(
    opt: &Opt,
    eval: &mut dyn FnMut(&CompiledExpr) -> Result<Option<Json>, E>,
) -> Result<Json, E> {
    Ok(match opt {
        Opt::Lit(j) => j.clone(),
        Opt::Whole(e) => eval(e)?.unwrap_or(Json::Null),
        Opt::Text(parts) => {
            let mut out = String::new();
            for p in parts {
                match p {
                    Part::Lit(s) => out.push_str(s),
                    Part::Expr(e) => {
                        if let Some(j) = eval(e)? {
                            out.push_str(&V::from_json(&j).to_interpolated());
                        }
                    }
                }
            }
            Json::String(out)
        }
        Opt::Arr(items) => Json::Array(
            items
                .iter()
                .map(|it| render(it, eval))
                .collect::<Result<_, _>>()?,
        ),
        Opt::Obj(props) => {
            let mut m = Map::new();
            for (k, it) in props {
                m.insert(k.clone(), render(it, eval)?);
            }
            Json::Object(m)
        }
    })
}

/// The value at a dotted path (`a.b[0].c` or `a.b.0.c`) inside `base`.
pub fn get_path<'a>(base: &'a Json, path: &str) -> Option<&'a Json> {
    let mut cur = base;
    for seg in path.split(['.', '[', ']']).filter(|s| !s.is_empty()) {
        cur = match cur {
            Json::Object(m) => m.get(seg)?,
            Json::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Resolves `$[key.path]` references against `base`. A template that is exactly one reference,
/// with nothing around it (not even spaces), yields the referenced value itself (so a list can
/// serve as variants); any other string is text and keeps its spaces. Recursive over the
/// template: rendered options, as deep as the options plus a value an expression gave
/// (`MAX_VALUE_DEPTH`).
pub fn resolve_refs(template: &Json, base: &Json) -> Json {
    match template {
        Json::String(s) => {
            if s.starts_with("$[") && s.ends_with(']') && s[2..].find(']') == Some(s.len() - 3) {
                return get_path(base, s[2..s.len() - 1].trim())
                    .cloned()
                    .unwrap_or(Json::String(String::new()));
            }
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(i) = rest.find("$[") {
                out.push_str(&rest[..i]);
                match rest[i + 2..].find(']') {
                    Some(j) => {
                        let key = &rest[i + 2..i + 2 + j];
                        if let Some(v) = get_path(base, key.trim()) {
                            out.push_str(&V::from_json(v).to_interpolated());
                        }
                        rest = &rest[i + 2 + j + 1..];
                    }
                    None => {
                        out.push_str(&rest[i..]);
                        rest = "";
                    }
                }
            }
            out.push_str(rest);
            Json::String(out)
        }
        Json::Array(a) => Json::Array(a.iter().map(|t| resolve_refs(t, base)).collect()),
        Json::Object(m) => Json::Object(
            m.iter()
                .map(|(k, t)| (k.clone(), resolve_refs(t, base)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splits_nested_parentheses_and_quotes() {
        let parts = split_interpolations("a $(f(x)) b $(')') c").unwrap();
        assert_eq!(
            parts,
            vec![
                (false, "a ".into()),
                (true, "f(x)".into()),
                (false, " b ".into()),
                (true, "')'".into()),
                (false, " c".into())
            ]
        );
        assert!(split_interpolations("no dollars").is_none());
    }

    #[test]
    fn whole_interpolation_keeps_type() {
        let opt = compile_text("$(result)", &mut |s| CompiledExpr::new(s));
        assert!(matches!(opt, Opt::Whole(_)));
        let v = render::<()>(&opt, &mut |_| Ok(Some(json!({"a": 1})))).unwrap();
        assert_eq!(v, json!({"a": 1}));
    }

    #[test]
    fn missing_values_interpolate_as_empty() {
        let opt = compile_text("x=$(a)$(b)!", &mut |s| CompiledExpr::new(s));
        let v = render::<()>(&opt, &mut |e| {
            Ok(if e.src == "a" { Some(json!(2)) } else { None })
        })
        .unwrap();
        assert_eq!(v, json!("x=2!"));
    }

    #[test]
    fn template_refs() {
        let base = json!({"t": {"hi": "Hello", "list": ["a", "b"]}});
        assert_eq!(
            resolve_refs(&json!("$[t.hi], you"), &base),
            json!("Hello, you")
        );
        assert_eq!(resolve_refs(&json!("$[t.list]"), &base), json!(["a", "b"]));
        assert_eq!(resolve_refs(&json!("[$[t.none]]"), &base), json!("[]"));
    }

    #[test]
    fn only_an_exact_reference_keeps_its_type() {
        let base = json!({"d": "Deskripsi satu", "n": 3, "list": ["a"]});
        assert_eq!(
            resolve_refs(&json!("$[d] "), &base),
            json!("Deskripsi satu ")
        );
        assert_eq!(
            resolve_refs(&json!("  $[d]"), &base),
            json!("  Deskripsi satu")
        );
        assert_eq!(resolve_refs(&json!("$[n]"), &base), json!(3));
        assert_eq!(resolve_refs(&json!("$[n] "), &base), json!("3 "));
        assert_eq!(resolve_refs(&json!(" $[list]"), &base), json!(" [\"a\"]"));
        let opt = compile_text("$(x) ", &mut |s| CompiledExpr::new(s));
        assert!(
            matches!(opt, Opt::Text(_)),
            "a trailing space makes it text"
        );
        let v = render::<()>(&opt, &mut |_| Ok(Some(json!(7)))).unwrap();
        assert_eq!(v, json!("7 "));
    }

    #[test]
    fn merge_is_deep_for_objects_only() {
        let mut a = json!({"x": {"y": 1, "z": [1]}, "k": 1});
        deep_merge(&mut a, &json!({"x": {"z": [2]}, "n": 3}));
        assert_eq!(a, json!({"x": {"y": 1, "z": [2]}, "k": 1, "n": 3}));
    }
}
