//! Classifiers and attributes. Keyword and regex NLUs run here; `nl` predictions
//! and `method` NLUs go through the host.

use super::{Step, StepError};
use crate::expr::RegexLit;
use crate::expr::{CompiledExpr, Env, EvalError, ExprKind, eval};
use crate::host::{HostError, JsCall};
use crate::interp::get_path;
use crate::model::{Intent, KeywordNlu, NluKind, NluUse, RegexIndex, RegexNlu};
use crate::session::{Message, Session};
use crate::value::{V, loose_eq};
use serde_json::{Map, Value as Json};

impl Step<'_, '_> {
    /// Whether any classifier of the intent matches.
    pub(super) fn classify(
        &mut self,
        s: &Session,
        msg: &Message,
        intent: &Intent,
    ) -> Result<bool, StepError> {
        if msg.content.is_none() {
            return Ok(false);
        }
        for c in &intent.classifiers {
            let Some(mut out) = self.run_nlu(s, msg, &c.nlu)? else {
                continue;
            };
            for p in &c.process {
                out = match self.call_method(p, vec![out], &[], &[])? {
                    Some(o) => o.value.unwrap_or(Json::Null),
                    None => Json::Null,
                };
            }
            if let Some(d) = &c.dict {
                out = regroup(out, d);
            }
            let hit = if let Some(e) = &c.expression {
                let scope = nl_expression_scope(&out);
                eval_nl_expression(self, e, &scope)?
            } else if let Some(m) = &c.matches {
                output_matches(&out, m)
            } else {
                V::from_json(&out).truthy() && !is_empty_container(&out)
            };
            if hit {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Attributes of the selected intent.
    pub(super) fn attributes(
        &mut self,
        s: &Session,
        msg: &Message,
        fi: usize,
        ii: usize,
    ) -> Result<Json, StepError> {
        let bot = self.bot;
        let intent = &bot.flows[fi].intents[ii];
        let mut out = Map::new();
        for a in &intent.attributes {
            let mut v = if msg.content.is_some() {
                self.run_nlu(s, msg, &a.nlu)?.unwrap_or(Json::Null)
            } else {
                Json::Null
            };
            if let Some(p) = &a.path {
                v = get_path(&v, p).cloned().unwrap_or(Json::Null);
            }
            for p in &a.process {
                v = match self.call_method(p, vec![v], &[], &[])? {
                    Some(o) => o.value.unwrap_or(Json::Null),
                    None => Json::Null,
                };
            }
            if let Some(d) = &a.dict {
                v = normalise(v, d);
            }
            out.insert(a.name.clone(), v);
        }
        Ok(Json::Object(out))
    }

    /// Runs an NLU on the message (cached per message and use key), applying the NLU's own
    /// `process` methods. `None` = no output.
    fn run_nlu(
        &mut self,
        s: &Session,
        msg: &Message,
        nlu: &NluUse,
    ) -> Result<Option<Json>, StepError> {
        let key = format!("{}\u{0}{}", msg.id, nlu.cache_key);
        if let Some(v) = self.nlu_cache.get(&key) {
            return Ok(Some(v.clone()));
        }
        let content = msg.content.as_deref().unwrap_or("");
        let text = match &nlu.hint {
            Some(h) => format!("{h} {content}"),
            None => content.to_string(),
        };
        let mut out = match &nlu.kind {
            NluKind::Keyword(k) => keyword(k, &text),
            NluKind::Regex(r) => regex_output(r, &text),
            NluKind::Nl => {
                let id = nlu
                    .options
                    .get("nluId")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string();
                match self.host.nl_predict(&id, &text, &nlu.options) {
                    Ok(raw) => nl_output(&raw, &nlu.options),
                    Err(HostError::Failed(e)) => {
                        self.user_error(format!("NLU {} failed: {e}", nlu.name));
                        Json::Null
                    }
                    Err(HostError::Abort(e)) => {
                        return Err(StepError::Aborted(format!("NLU {}: {e}", nlu.name)));
                    }
                }
            }
            NluKind::Method(mr) => {
                let method_params = mr
                    .index
                    .and_then(|i| self.bot.methods[i].params.as_ref().map(Vec::len));
                let message = serde_json::to_value(msg).unwrap_or(Json::Null);
                let args = if method_params == Some(5) {
                    vec![
                        message,
                        s.current
                            .as_deref()
                            .and_then(|c| s.context_of(c))
                            .cloned()
                            .unwrap_or(Json::Object(Map::new())),
                        s.data.clone(),
                        nlu.options.clone(),
                        self.bot.config.clone(),
                    ]
                } else {
                    vec![message, nlu.options.clone(), self.bot.config.clone()]
                };
                self.call_method(mr, args, &[], &[])?
                    .and_then(|o| o.value)
                    .unwrap_or(Json::Null)
            }
            NluKind::External(t) => {
                self.user_error(format!("NLU {} of type {t} needs an external service that botbox does not provide; its output is null", nlu.name));
                Json::Null
            }
            NluKind::Unknown(n) => {
                self.user_error(format!("unknown NLU \"{n}\""));
                Json::Null
            }
        };
        for p in &nlu.process {
            out = match self.call_method(p, vec![out], &[], &[])? {
                Some(o) => o.value.unwrap_or(Json::Null),
                None => Json::Null,
            };
        }
        self.nlu_cache.insert(key, out.clone());
        Ok(Some(out))
    }
}

/// The variables of an nl classifier expression are the entities themselves.
struct ObjEnv<'a>(&'a Json);

impl Env for ObjEnv<'_> {
    fn var<'a>(&'a self, name: &str) -> Option<V<'a>> {
        self.0.get(name).map(V::from_json)
    }
}

fn eval_nl_expression(step: &mut Step, e: &CompiledExpr, scope: &Json) -> Result<bool, StepError> {
    if let ExprKind::Fast(ast) = &e.kind {
        match eval(ast, &ObjEnv(scope)) {
            Ok(v) => return Ok(v.truthy()),
            Err(EvalError::Throw(_)) => return Ok(false),
            Err(EvalError::NeedsJs(_)) => {}
        }
    }
    match step.host.js(JsCall::Expr { src: &e.src, scope }) {
        Ok(o) => Ok(o.value.is_some_and(|v| V::from_json(&v).truthy())),
        Err(HostError::Failed(_)) => Ok(false),
        Err(HostError::Abort(m)) => {
            Err(StepError::Aborted(format!("expression \"{}\": {m}", e.src)))
        }
    }
}

/// Variables of a classifier `expression` over nl output: each entity bound to its top
/// prediction's label (or value), `<entity>Array` to the list. Exposed as `attributes` and
/// also reachable by bare name through the JS engine.
fn nl_expression_scope(out: &Json) -> Json {
    let mut m = Map::new();
    if let Json::Object(o) = out {
        for (k, v) in o {
            if let Json::Array(list) = v {
                let top = list.first().map(|p| {
                    p.get("label")
                        .or_else(|| p.get("value"))
                        .cloned()
                        .unwrap_or_else(|| p.clone())
                });
                m.insert(k.clone(), top.unwrap_or(Json::Null));
                m.insert(format!("{k}Array"), v.clone());
            } else {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    Json::Object(m)
}

fn is_empty_container(v: &Json) -> bool {
    match v {
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// `match` test: loose equality with a string, inclusion in a list, a top-level value
/// of an object; on nl output, a prediction's label or value.
fn output_matches(out: &Json, wanted: &[Json]) -> bool {
    let eq = |a: &Json| {
        wanted
            .iter()
            .any(|w| loose_eq(&V::from_json(a), &V::from_json(w)))
    };
    match out {
        Json::Array(items) => items
            .iter()
            .any(|i| eq(i) || i.get("label").is_some_and(eq) || i.get("value").is_some_and(eq)),
        Json::Object(o) => o.values().any(|v| match v {
            Json::Array(items) => items
                .iter()
                .any(|i| eq(i) || i.get("label").is_some_and(eq) || i.get("value").is_some_and(eq)),
            other => eq(other),
        }),
        Json::Null => false,
        other => eq(other),
    }
}

/// `dict` on classifiers: renames labels (`{food: [food_a, food_b], test: testing}`).
fn regroup(out: Json, dict: &Json) -> Json {
    let Json::Object(d) = dict else { return out };
    let rename = |v: &Json| -> Option<Json> {
        let s = v.as_str()?;
        d.iter()
            .find(|(_, alts)| match alts {
                Json::Array(a) => a.iter().any(|x| x.as_str() == Some(s)),
                Json::String(x) => x == s,
                _ => false,
            })
            .map(|(k, _)| Json::String(k.clone()))
    };
    match out {
        Json::String(_) => rename(&out).unwrap_or(out),
        Json::Array(items) => {
            Json::Array(items.into_iter().map(|i| rename(&i).unwrap_or(i)).collect())
        }
        other => other,
    }
}

/// `dict` on attributes: case-insensitive value lookup, `default` when nothing matches.
fn normalise(v: Json, dict: &Json) -> Json {
    let Json::Object(d) = dict else { return v };
    let Some(s) = v.as_str().map(str::to_lowercase) else {
        // Nothing recognised: the default, if any.
        return if v.is_null() {
            d.get("default").cloned().unwrap_or(v)
        } else {
            v
        };
    };
    for (k, alts) in d {
        if k == "default" {
            continue;
        }
        let hit = match alts {
            Json::Array(a) => a
                .iter()
                .any(|x| x.as_str().is_some_and(|x| x.to_lowercase() == s)),
            Json::String(x) => x.to_lowercase() == s,
            _ => false,
        };
        if hit {
            return Json::String(k.clone());
        }
    }
    d.get("default").cloned().unwrap_or(v)
}

/// Keyword NLU: longest whole-word phrase wins, then key order.
pub fn keyword(k: &KeywordNlu, text: &str) -> Json {
    let norm = |s: &str| {
        let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if k.case_sensitive {
            collapsed
        } else {
            collapsed.to_lowercase()
        }
    };
    let msg = norm(text);
    let mut best: Option<(usize, &str)> = None;
    for (key, phrases) in &k.keywords {
        for p in phrases {
            let p = norm(p);
            if p.is_empty() {
                continue;
            }
            let hit = if k.exact {
                msg == p
            } else {
                contains_words(&msg, &p)
            };
            if hit && best.is_none_or(|(len, _)| p.chars().count() > len) {
                best = Some((p.chars().count(), key));
            }
        }
    }
    match best {
        Some((_, key)) => Json::String(key.to_string()),
        None => k.default.clone().unwrap_or(Json::Null),
    }
}

fn contains_words(hay: &str, needle: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        let start = from + i;
        let end = start + needle.len();
        let before_ok = hay[..start].chars().next_back().is_none_or(|c| !is_word(c));
        let after_ok = hay[end..].chars().next().is_none_or(|c| !is_word(c));
        if before_ok && after_ok {
            return true;
        }
        from = start + hay[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Regex NLU.
pub fn regex_output(r: &RegexNlu, text: &str) -> Json {
    let caps = |re: &RegexLit| re.regex().and_then(|x| x.captures(text).ok().flatten());
    match r {
        RegexNlu::Single { re, index } => {
            let Some(c) = caps(re) else { return Json::Null };
            let group = |i: usize| c.get(i).map(|m| Json::String(m.as_str().to_string()));
            match index {
                RegexIndex::Whole => group(0).unwrap_or(Json::Null),
                RegexIndex::Group(i) => group(*i).unwrap_or(Json::Null),
                RegexIndex::Groups(gs) => {
                    let m: Map<String, Json> = gs
                        .iter()
                        .filter_map(|(k, i)| group(*i).map(|v| (k.clone(), v)))
                        .collect();
                    if m.is_empty() {
                        Json::Null
                    } else {
                        Json::Object(m)
                    }
                }
            }
        }
        RegexNlu::Named(list) => {
            let mut m = Map::new();
            for (k, re) in list {
                if let Some(c) = caps(re) {
                    let g = if c.len() > 1 { c.get(1) } else { c.get(0) };
                    if let Some(g) = g {
                        m.insert(k.clone(), Json::String(g.as_str().to_string()));
                    }
                }
            }
            if m.is_empty() {
                Json::Null
            } else {
                Json::Object(m)
            }
        }
    }
}

/// Applies the `nl` output options (threshold, output raw/value/phrase, flatten) to a raw
/// prediction `{entity: [{type, score, value, label?}]}`.
pub fn nl_output(raw: &Json, options: &Json) -> Json {
    let threshold = options
        .get("threshold")
        .and_then(Json::as_f64)
        .unwrap_or(0.0);
    let output = options
        .get("output")
        .and_then(Json::as_str)
        .unwrap_or("raw");
    let flatten = options
        .get("flatten")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let Json::Object(entities) = raw else {
        return Json::Null;
    };
    let mut out = Map::new();
    for (name, preds) in entities {
        let Json::Array(preds) = preds else { continue };
        let kept: Vec<Json> = preds
            .iter()
            .filter(|p| p.get("score").and_then(Json::as_f64).unwrap_or(1.0) >= threshold)
            .cloned()
            .collect();
        if kept.is_empty() {
            continue;
        }
        match output {
            "phrase" => {
                if options
                    .get("entity")
                    .and_then(Json::as_str)
                    .is_some_and(|e| e != name)
                {
                    continue;
                }
                for p in &kept {
                    if let (Some(l), Some(v)) =
                        (p.get("label").and_then(Json::as_str), p.get("value"))
                    {
                        out.entry(l.to_string()).or_insert_with(|| v.clone());
                    }
                }
            }
            "value" => {
                let values: Vec<Json> = kept
                    .iter()
                    .map(|p| p.get("value").cloned().unwrap_or(Json::Null))
                    .collect();
                if flatten {
                    out.insert(format!("{name}Array"), Json::Array(values.clone()));
                    out.insert(name.clone(), values[0].clone());
                } else {
                    out.insert(name.clone(), Json::Array(values));
                }
            }
            _ => {
                if flatten {
                    out.insert(format!("{name}Array"), Json::Array(kept.clone()));
                    out.insert(name.clone(), kept[0].clone());
                } else {
                    out.insert(name.clone(), Json::Array(kept));
                }
            }
        }
    }
    if out.is_empty() {
        Json::Null
    } else {
        Json::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kw(exact: bool, case: bool) -> KeywordNlu {
        KeywordNlu {
            keywords: vec![
                (
                    "pizzaOrder".into(),
                    vec!["order".into(), "i want pizza".into()],
                ),
                ("thin".into(), vec!["thin crust".into()]),
                ("greet".into(), vec!["hi".into()]),
            ],
            case_sensitive: case,
            exact,
            default: Some(json!("other")),
        }
    }

    #[test]
    fn keyword_matches_whole_words_longest_first() {
        let k = kw(false, false);
        assert_eq!(keyword(&k, "I   want PIZZA please"), json!("pizzaOrder"));
        assert_eq!(keyword(&k, "order a thin crust"), json!("thin"));
        assert_eq!(
            keyword(&k, "this is nothing"),
            json!("other"),
            "'hi' inside 'this' is not a word"
        );
        assert_eq!(keyword(&kw(true, false), "order now"), json!("other"));
        assert_eq!(keyword(&kw(true, false), " Order "), json!("pizzaOrder"));
        assert_eq!(keyword(&kw(false, true), "ORDER"), json!("other"));
    }

    #[test]
    fn regex_outputs() {
        let re = |s: &str| RegexLit::new(s, "").unwrap();
        let single = RegexNlu::Single {
            re: re("[1-9]"),
            index: RegexIndex::Whole,
        };
        assert_eq!(regex_output(&single, "I want 2"), json!("2"));
        assert_eq!(regex_output(&single, "none"), Json::Null);
        let groups = RegexNlu::Single {
            re: re("(\\w+) is (\\w+)"),
            index: RegexIndex::Groups(vec![("who".into(), 1), ("name".into(), 2)]),
        };
        assert_eq!(
            regex_output(&groups, "he is Bob"),
            json!({"who": "he", "name": "Bob"})
        );
        let named = RegexNlu::Named(vec![
            ("num".into(), re("n(\\d+)")),
            ("mail".into(), re("\\S+@\\S+")),
        ]);
        assert_eq!(
            regex_output(&named, "n42 a@b.c"),
            json!({"num": "42", "mail": "a@b.c"})
        );
    }

    #[test]
    fn nl_output_options() {
        let raw = json!({"intent": [{"type": "trait", "score": 0.9, "value": "mainMenu", "label": "mainMenu"}, {"type": "trait", "score": 0.3, "value": "x"}]});
        assert_eq!(
            nl_output(&raw, &json!({"output": "value", "threshold": 0.5})),
            json!({"intent": ["mainMenu"]})
        );
        assert_eq!(
            nl_output(&raw, &json!({"output": "value", "flatten": true})),
            json!({"intentArray": ["mainMenu", "x"], "intent": "mainMenu"})
        );
        let flat_raw = nl_output(
            &raw,
            &json!({"output": "raw", "flatten": true, "threshold": 0.5}),
        );
        assert_eq!(flat_raw["intent"]["value"], json!("mainMenu"));
        assert_eq!(flat_raw["intentArray"].as_array().unwrap().len(), 1);
        assert_eq!(nl_output(&raw, &json!({"threshold": 0.95})), Json::Null);
    }

    #[test]
    fn dicts() {
        assert_eq!(
            regroup(
                json!("food_b"),
                &json!({"food": ["food_a", "food_b"], "test": "testing"})
            ),
            json!("food")
        );
        let d = json!({"jakarta": ["jkt", "jekardah"], "default": "invalid"});
        assert_eq!(normalise(json!("JKT"), &d), json!("jakarta"));
        assert_eq!(normalise(json!("bandung"), &d), json!("invalid"));
    }

    #[test]
    fn match_is_loose() {
        assert!(output_matches(&json!(1), &[json!("1")]));
        assert!(output_matches(&json!(["a", "b"]), &[json!("b")]));
        assert!(output_matches(&json!({"k": "v"}), &[json!("v")]));
        assert!(!output_matches(&Json::Null, &[json!("null")]));
    }
}
