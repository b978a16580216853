//! `$(...)` interpolation and `$[...]` template references in action options (§9.3, §9.4).

use crate::expr::CompiledExpr;
use crate::model::{Opt, Part};
use crate::value::V;
use serde_json::{Map, Value as Json};

/// Deep merge of `over` into `base`: objects merge key by key; arrays and scalars replace.
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
pub fn split_interpolations(s: &str) -> Option<Vec<(bool, String)>> {
    if !s.contains("$(") {
        return None;
    }
    let mut parts = vec![];
    let mut lit = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() && b[i + 1] == b'(' {
            if let Some(end) = matching_paren(s, i + 1) {
                if !lit.is_empty() {
                    parts.push((false, std::mem::take(&mut lit)));
                }
                parts.push((true, s[i + 2..end].trim().to_string()));
                i = end + 1;
                continue;
            }
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

/// Index of the `)` closing the `(` at `open`, skipping quoted strings.
fn matching_paren(s: &str, open: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut depth = 0;
    let mut quote: Option<u8> = None;
    let mut i = open;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
        } else {
            match c {
                b'\'' | b'"' | b'`' => quote = Some(c),
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    None
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

/// Compiles every string of an options tree (keys excluded).
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
            if !contains_interpolation(v) {
                return Opt::Lit(v.clone());
            }
            Opt::Arr(
                items
                    .iter()
                    .map(|it| compile_options(it, expr, path))
                    .collect(),
            )
        }
        Json::Object(m) => {
            if !contains_interpolation(v) {
                return Opt::Lit(v.clone());
            }
            Opt::Obj(
                m.iter()
                    .map(|(k, it)| (k.clone(), compile_options(it, expr, path)))
                    .collect(),
            )
        }
        other => Opt::Lit(other.clone()),
    }
}

fn contains_interpolation(v: &Json) -> bool {
    match v {
        Json::String(s) => s.contains("$("),
        Json::Array(a) => a.iter().any(contains_interpolation),
        Json::Object(m) => m.values().any(contains_interpolation),
        _ => false,
    }
}

/// Renders compiled options. `eval` gives the value of an expression (`None` = undefined or
/// an error at that site); it returns `Err` only for failures that abort the step.
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

/// Resolves `$[key.path]` references against `base`. A template that is exactly one reference
/// yields the referenced value itself (so a list can serve as variants).
pub fn resolve_refs(template: &Json, base: &Json) -> Json {
    match template {
        Json::String(s) => {
            let trimmed = s.trim();
            if trimmed.starts_with("$[")
                && trimmed.ends_with(']')
                && trimmed[2..].find(']') == Some(trimmed.len() - 3)
            {
                return get_path(base, &trimmed[2..trimmed.len() - 1])
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
    fn merge_is_deep_for_objects_only() {
        let mut a = json!({"x": {"y": 1, "z": [1]}, "k": 1});
        deep_merge(&mut a, &json!({"x": {"z": [2]}, "n": 3}));
        assert_eq!(a, json!({"x": {"y": 1, "z": [2]}, "k": 1, "n": 3}));
    }
}
