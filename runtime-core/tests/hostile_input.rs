//! Hostile bots: inputs of any size or shape are refused with a problem that
//! names the limit and the place, or accepted; they never overflow a stack or take
//! quadratic time.
//!
//! Each hostile input is compiled (and whatever is accepted is evaluated, stored and
//! dropped) on a thread with a small stack: an unbounded recursion would abort the test
//! process, so a passing test proves the bound.

use proptest::prelude::*;
use runtime_core::expr::{CompiledExpr, Env, Expr, ExprKind, MAX_DEPTH, MAX_EXPR_LEN, eval, parse};
use runtime_core::host::{Host, HostError, HttpRequest, HttpResponse, JsCall, JsOutcome};
use runtime_core::source::{MAX_DOC_DEPTH, MAX_DOC_VALUES, Severity, parse_document};
use runtime_core::testing::{fresh_session, parse_suite};
use runtime_core::value::{MAX_VALUE_DEPTH, V};
use runtime_core::{CompiledBot, Message, Rejected, compile, compile_source, converse};
use serde_json::{Value as Json, json};

/// 512 KiB: a quarter of a tokio worker's stack. The deepest accepted expression needs about
/// 260 KiB to parse in this (opt-level 1) build, a fraction of that optimised; the inputs
/// below would need hundreds of MiB if any walk followed them.
const SMALL_STACK: usize = 512 * 1024;

/// Runs `f` on a thread with a small stack. A panic fails the test; an overflow aborts it.
fn small<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(SMALL_STACK)
            .spawn_scoped(s, f)
            .unwrap()
            .join()
            .unwrap_or_else(|_| panic!("panicked on the small stack"))
    })
}

fn deep_message() -> String {
    format!("expression nested more than {MAX_DEPTH} levels deep")
}

fn doc_deep_message() -> String {
    format!("nested more than {MAX_DOC_DEPTH} levels deep")
}

/// The reason an expression is invalid, or what it became.
fn kind_of(src: &str) -> Result<(), String> {
    match CompiledExpr::new(src).kind {
        ExprKind::Invalid(m) => Err(m),
        _ => Ok(()),
    }
}

/// Variables for evaluation: `a` is 1, `o` is `{a: 1, b: [1]}`, `s` is "x".
struct Vars(Json);

impl Env for Vars {
    fn var<'a>(&'a self, name: &str) -> Option<V<'a>> {
        match name {
            "a" | "b" => Some(V::Num(1.0)),
            "s" => Some(V::Str("x".into())),
            "o" | "context" => Some(V::Ref(&self.0)),
            _ => None,
        }
    }
}

fn vars() -> Vars {
    Vars(json!({"a": 1, "b": [1], "f": 2}))
}

/// The wrappers that make a tree one level taller, as (before, after) around an operand,
/// and the levels of parser recursion each costs (a parenthesis inside another construct
/// is a level of its own).
const WRAPS: &[(&str, &str, u32)] = &[
    ("", "+a", 1),
    ("", "-a", 1),
    ("", "*a", 1),
    ("", "/a", 1),
    ("", "%a", 1),
    ("", "==a", 1),
    ("", "!=a", 1),
    ("", "===a", 1),
    ("", "!==a", 1),
    ("", "<a", 1),
    ("", ">a", 1),
    ("", "<=a", 1),
    ("", ">=a", 1),
    ("", "&&a", 1),
    ("", "||a", 1),
    ("", "??a", 1),
    ("", " in o", 1),
    ("", ".b", 1),
    ("", "?.b", 1),
    ("", "[0]", 1),
    ("", "?.[0]", 1),
    ("", ".toString()", 1),
    ("a+(", ")", 2),
    ("a?b:", "", 1),
    ("!", "", 1),
    ("-(", ")", 2),
    ("typeof ", "", 1),
    ("[", "]", 1),
    ("{a:", "}", 1),
    ("String(", ")", 1),
];

/// `x` wrapped `n` times by `w`. Prefix-only and suffix-only wrappers give left- and
/// right-deep chains without parentheses (`a+a+…`, `!!!…`, `a.b.b…`).
fn wrapped(w: (&str, &str), n: usize, x: &str) -> String {
    format!("{}{x}{}", w.0.repeat(n), w.1.repeat(n))
}

/// The most times `w` may wrap `a`: the tree's height (one per wrap, plus `a`) and the
/// parser's recursion (the outer expression, plus the wrap's cost) both within MAX_DEPTH.
fn most_wraps(cost: u32) -> usize {
    ((MAX_DEPTH - 1) / cost) as usize
}

/// A bot whose first intent's condition is `cond`.
fn condition_bot(cond: &str) -> Json {
    json!({"flows": {"f": {
        "intents": {"i": {"initial": true, "condition": cond}},
        "states": {"s": {"initial": true}}
    }}})
}

fn assert_refused_for_depth(r: &Rejected, path: &str) {
    let e = r.errors().next().unwrap_or_else(|| panic!("no error: {r}"));
    assert_eq!(e.path, path, "{e}");
    assert!(e.message.contains(&deep_message()), "{e}");
    assert!(e.message.len() < 300, "{e}");
}

#[test]
fn the_reported_attack_and_its_kin_200000_levels_are_refused_for_their_depth() {
    let n = 200_000;
    let shapes = [
        // The reported attack: a left-deep chain of 200,000 terms (400 KB).
        vec!["1"; n].join("+"),
        vec!["a"; n].join("||"),
        vec!["a"; n].join("**"),
        vec!["a"; n].join("="),
        format!("a{}", ".b".repeat(n)),
        format!("a{}", "[0]".repeat(n)),
        format!("f{}", "()".repeat(n)),
        format!("f{}", "?.()".repeat(n)),
        format!("a{}", ".new()".repeat(n)),
        format!("{}1", "!".repeat(n)),
        format!("{}1", "-".repeat(n)),
        format!("{}1{}", "(".repeat(n), ")".repeat(n)),
        format!("{}1{}", "[".repeat(n), "]".repeat(n)),
        format!("{}1{}", "{a:".repeat(n), "}".repeat(n)),
        format!("{}1", "a?b:".repeat(n)),
        format!("{}1", "x=>".repeat(n)),
    ];
    for cond in shapes {
        let bot = condition_bot(&cond);
        let r = small(|| compile(&bot).map(|_| ()).unwrap_err());
        assert_refused_for_depth(&r, "flows.f.intents.i.condition");
    }
    // In YAML, with the line.
    let cond = vec!["1"; n].join("+");
    let yaml = format!(
        "flows:\n  f:\n    intents:\n      i: {{initial: true}}\n    states:\n      s:\n        initial: true\n        transitions:\n          s: \"{cond}\"\n"
    );
    let r = small(move || compile_source(&yaml).map(|_| ()).unwrap_err());
    assert_refused_for_depth(&r, "flows.f.states.s.transitions.s");
    assert_eq!(r.problems[0].line, Some(9), "{r}");
}

#[test]
fn a_long_shallow_expression_is_refused_for_its_length() {
    let cond = format!("[{}]", vec!["1"; 40_000].join(","));
    let r = small(|| compile(&condition_bot(&cond)).map(|_| ()).unwrap_err());
    let e = r.errors().next().unwrap();
    assert_eq!(e.path, "flows.f.intents.i.condition");
    assert!(
        e.message
            .contains(&format!("expression longer than {MAX_EXPR_LEN} bytes")),
        "{e}"
    );
    // Other syntax errors stay warnings.
    let c = compile(&condition_bot("a ==")).unwrap();
    assert!(
        c.warnings[0]
            .message
            .contains("unexpected end of expression"),
        "{:?}",
        c.warnings
    );
}

#[test]
fn every_operator_chained_past_the_limit_is_refused_by_height() {
    for &(before, after, cost) in WRAPS {
        let w = (before, after);
        for n in [most_wraps(cost) + 1, 5_000] {
            let src = wrapped(w, n, "a");
            let got = small(|| kind_of(&src));
            match got {
                Err(m) => assert!(m.contains(&deep_message()), "{w:?} x{n}: {m}"),
                Ok(()) => panic!("{w:?} x{n} accepted"),
            }
        }
    }
    // JavaScript outside the subset is measured as far as the subset's grammar goes, and
    // still goes to the JS engine when within the limit.
    for op in ["**", "<<", "&", "=", "=>", "?.()"] {
        let join = |n: usize| match op {
            "?.()" => format!("f{}", op.repeat(n)),
            _ => vec!["a"; n + 1].join(op),
        };
        let deep = join(most_wraps(1) + 1);
        assert!(
            small(|| kind_of(&deep))
                .unwrap_err()
                .contains(&deep_message()),
            "{op}"
        );
        let fine = join(50);
        assert_eq!(
            small(|| CompiledExpr::new(&fine)).kind,
            ExprKind::Js,
            "{op}"
        );
    }
}

#[test]
fn an_expression_at_the_limit_evaluates_is_stored_and_dropped_on_a_small_stack() {
    for &(before, after, cost) in WRAPS {
        let w = (before, after);
        let src = wrapped(w, most_wraps(cost), "a");
        small(|| {
            let e = CompiledExpr::new(&src);
            let ExprKind::Fast(ast) = &e.kind else {
                panic!("{w:?}: {:?}", e.kind)
            };
            let env = vars();
            // Any value or a JS exception; never an overflow.
            let _ = eval(ast, &env).map(|v| v.to_json());
            let stored = serde_json::to_string(&e).unwrap();
            let back: CompiledExpr =
                serde_json::from_str(&stored).unwrap_or_else(|err| panic!("{w:?}: {err}"));
            assert_eq!(back, e, "{w:?}");
            let copy = back.clone();
            drop(back);
            drop(copy);
        });
    }
}

#[test]
fn a_stored_expression_taller_than_the_limit_does_not_load() {
    // `a` then 200 times `+a`, in the stored (postfix) form.
    let mut ops = vec![json!({"Ident": "a"})];
    for _ in 0..MAX_DEPTH {
        ops.push(json!({"Ident": "a"}));
        ops.push(json!({"Bin": "Add"}));
    }
    let err = small(move || serde_json::from_value::<Expr>(Json::Array(ops)).unwrap_err());
    assert!(
        err.to_string()
            .contains(&format!("nested more than {MAX_DEPTH} levels")),
        "{err}"
    );
    // Malformed lists are errors too, not panics.
    for bad in [
        json!([]),
        json!([{"Bin": "Add"}]),
        json!([{"Num": 1}, {"Num": 1}]),
    ] {
        assert!(serde_json::from_value::<Expr>(bad).is_err());
    }
    // The nested form of bots stored before still loads.
    let old = json!({"Bin": ["Add", {"Ident": "a"}, {"Unary": ["Neg", {"Num": 2.0}]}]});
    assert_eq!(
        serde_json::from_value::<Expr>(old).unwrap(),
        parse("a + -2").unwrap()
    );
    assert_eq!(
        serde_json::from_value::<Expr>(json!("Null")).unwrap(),
        Expr::Null
    );
    // Infinity has no JSON number: it is stored by name.
    let inf = CompiledExpr::new("1e999");
    let back: CompiledExpr = serde_json::from_str(&serde_json::to_string(&inf).unwrap()).unwrap();
    assert_eq!(back, inf);
}

#[test]
fn wide_expressions_are_fine() {
    let items = vec!["a"; 20_000].join(",");
    for src in [
        format!("[{items}]"),
        format!("String({items})"),
        format!("o.b.concat({items})"),
        format!(
            "{{{}}}",
            (0..5_000)
                .map(|i| format!("k{i}: a"))
                .collect::<Vec<_>>()
                .join(",")
        ),
        "(".repeat(MAX_DEPTH as usize - 1) + "a" + &")".repeat(MAX_DEPTH as usize - 1),
    ] {
        small(|| {
            let e = CompiledExpr::new(&src);
            let ExprKind::Fast(ast) = &e.kind else {
                panic!("{}: {:?}", &src[..20], e.kind)
            };
            let _ = eval(ast, &vars());
            let back: CompiledExpr =
                serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
            assert_eq!(back, e);
        });
    }
    // Ten thousand parentheses: the recursion of the parser is bounded as well.
    let parens = "(".repeat(10_000) + "1" + &")".repeat(10_000);
    assert!(
        small(|| kind_of(&parens))
            .unwrap_err()
            .contains(&deep_message())
    );
}

/// A random mix of wrappers, some deep, some not.
fn mixed() -> impl Strategy<Value = (String, usize)> {
    prop::collection::vec((0..WRAPS.len(), 1usize..60), 1..40).prop_map(|runs| {
        let mut src = "a".to_string();
        let mut levels = 0;
        for (w, n) in runs {
            src = wrapped((WRAPS[w].0, WRAPS[w].1), n, &format!("({src})"));
            levels += n;
        }
        (src, levels)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn mixed_nesting_is_refused_or_evaluated((src, levels) in mixed()) {
        let outcome = small(|| {
            let e = CompiledExpr::new(&src);
            match &e.kind {
                ExprKind::Fast(ast) => {
                    let _ = eval(ast, &vars());
                    let back: CompiledExpr =
                        serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
                    assert_eq!(&back, &e);
                    Ok(())
                }
                ExprKind::Invalid(m) => Err(m.clone()),
                ExprKind::Js => Ok(()),
            }
        });
        match outcome {
            Ok(()) => prop_assert!(levels < MAX_DEPTH as usize, "{} levels accepted", levels),
            Err(m) => prop_assert!(m.contains(&deep_message()), "{}", m),
        }
    }
}

/// A bot whose value at `place` (dotted, list items as `[i]`) is `value`, as JSON.
fn bot_with(place: &str, value: Json) -> Json {
    let mut bot = json!({
        "name": "hostile",
        "config": {},
        "methods": {"m": "return 1;"},
        "nlus": {"n": {"type": "keyword", "options": {"keywords": {"k": ["k"]}}}},
        "flows": {"f": {
            "intents": {"i": {"initial": true, "condition": "true",
                "classifier": [{"nlu": "n"}],
                "attributes": {"x": {"nlu": "n"}}}},
            "states": {
                "s": {"initial": true, "action": [{"name": "a", "options": {}}],
                      "transitions": {"s": {"condition": "true", "mapping": {}}},
                      "enter": {}, "float": {"condition": "false"}},
            },
            "actions": {"a": {"type": "text", "options": {"text": "hi"}}},
            "nlus": {"n": {"type": "keyword", "options": {"keywords": {"k": "k"}}}},
            "stateActions": {"s": []},
        }}
    });
    let mut at = &mut bot;
    let segs: Vec<&str> = place.split('.').collect();
    for (i, seg) in segs.iter().enumerate() {
        let (key, index) = match seg.split_once('[') {
            Some((k, rest)) => (
                k,
                Some(rest.trim_end_matches(']').parse::<usize>().unwrap()),
            ),
            None => (*seg, None),
        };
        let last = i + 1 == segs.len() && index.is_none();
        if last {
            at[key] = value;
            return bot;
        }
        at = &mut at[key];
        if let Some(n) = index {
            if i + 1 == segs.len() {
                at[n] = value;
                return bot;
            }
            at = &mut at[n];
        }
    }
    unreachable!()
}

/// Places where a bot accepts a value.
const PLACES: &[&str] = &[
    "config.deep",
    "methods.m",
    "nlus.n.options",
    "flows.f.intents.i.condition",
    "flows.f.intents.i.classifier",
    "flows.f.intents.i.classifier[0].options",
    "flows.f.intents.i.attributes.x.options",
    "flows.f.intents.i.attributes.x.dict",
    "flows.f.states.s.action",
    "flows.f.states.s.action[0].options",
    "flows.f.states.s.transitions.s.mapping",
    "flows.f.states.s.transitions.s.condition",
    "flows.f.states.s.enter",
    "flows.f.states.s.float",
    "flows.f.states.s.unknownKey",
    "flows.f.actions.a.options",
    "flows.f.actions.a.payload",
    "flows.f.nlus.n.options",
    "flows.f.stateActions.s",
];

/// JSON text of a value nested `n` deep: lists, or objects with key `a`.
fn deep_text(n: usize, objects: bool) -> String {
    if objects {
        "{\"a\":".repeat(n) + "1" + &"}".repeat(n)
    } else {
        "[".repeat(n) + "1" + &"]".repeat(n)
    }
}

fn assert_too_deep(r: &Rejected, place: &str, yaml: bool) {
    let p = &r.problems[0];
    assert_eq!(r.problems.len(), 1, "{r}");
    assert_eq!(p.severity, Severity::Error);
    assert_eq!(p.message, doc_deep_message(), "{place}: {p}");
    assert!(p.path.starts_with(place), "{place}: {p}");
    if yaml {
        assert!(p.line.is_some(), "{place}: {p}");
    }
}

#[test]
fn documents_nested_100000_deep_anywhere_are_refused_with_the_place() {
    for place in PLACES {
        for objects in [false, true] {
            let json = serde_json::to_string(&bot_with(place, json!("@DEEP@"))).unwrap();
            let json = json.replace("\"@DEEP@\"", &deep_text(100_000, objects));
            // The same text read as YAML (flow style), one line further down.
            let yaml = format!("# yaml\n{json}");
            for (text, is_yaml) in [(json, false), (yaml, true)] {
                let r = small(move || compile_source(&text).map(|_| ()).unwrap_err());
                assert_too_deep(&r, place, is_yaml);
            }
        }
    }
}

#[test]
fn block_yaml_nested_deep_is_refused_with_its_line() {
    let mut yaml = String::from("name: x\nconfig:\n");
    for i in 0..300 {
        yaml.push_str(&"  ".repeat(i + 1));
        yaml.push_str("a:\n");
    }
    let r = small(move || compile_source(&yaml).map(|_| ()).unwrap_err());
    assert_too_deep(&r, "config.a.a", true);
    // Level 65 is the 64th `a` under config: its line is 65 (line 2 is `config:`).
    assert_eq!(r.problems[0].line, Some(66), "{r}");
}

/// Builds a value nested `n` deep without recursion.
fn deep_value(n: usize) -> Json {
    let mut v = json!(1);
    for _ in 0..n {
        // Not `json!([v])`: it would copy `v` through serde, recursively.
        v = Json::Array(vec![v]);
    }
    v
}

/// Drops a deep value without recursion (serde_json's own drop recurses).
fn dismantle(v: Json) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Json::Array(a) => stack.extend(a),
            Json::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[test]
fn a_document_built_in_memory_100000_deep_is_refused_before_any_walk() {
    for place in PLACES {
        let mut bot = bot_with(place, json!(null));
        // Grafted on without recursion: `bot_with` would clone it.
        let mut at = &mut bot;
        for seg in place.split('.') {
            at = match seg.split_once('[') {
                Some((k, i)) => &mut at[k][i.trim_end_matches(']').parse::<usize>().unwrap()],
                None => &mut at[seg],
            };
        }
        *at = deep_value(100_000);
        let r = small(|| compile(&bot).map(|_| ()).unwrap_err());
        assert_too_deep(&r, place, false);
        dismantle(bot);
    }
}

#[test]
fn a_document_at_the_depth_limit_compiles_and_its_stored_form_loads() {
    // Options nested to the limit, an interpolation at the bottom, an expression as tall
    // as allowed: the stored bot stays within serde_json's 128 levels.
    let place = "flows.f.actions.a.options";
    let depth_of_place = 5; // root, flows, f, actions, a: options is level 6
    let n = MAX_DOC_DEPTH - depth_of_place;
    let tall = wrapped(("", "+content"), most_wraps(1), "content");
    let text = format!("$({tall})");
    let mut inner = json!({"text": text});
    for _ in 1..n {
        inner = json!({"x": inner});
    }
    let bot = bot_with(place, inner);
    small(|| {
        let c = compile(&bot).unwrap_or_else(|e| panic!("{e}"));
        let stored = serde_json::to_string(&c.bot).unwrap();
        let back: CompiledBot = serde_json::from_str(&stored).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), stored);
        // And it runs: the options are rendered, the expression evaluated.
        let r = converse(&back, &fresh_session(), Message::text("hi"), &mut Plain).unwrap();
        let _ = serde_json::to_string(&r.session).unwrap();
    });
    // One level more is refused.
    let mut inner = json!({"text": "hi"});
    for _ in 0..n {
        inner = json!({"x": inner});
    }
    let r = small(|| compile(&bot_with(place, inner)).map(|_| ()).unwrap_err());
    assert_too_deep(&r, place, false);
}

#[test]
fn yaml_aliases_cannot_expand_past_the_value_limit() {
    // 100,000 values anchored, used 30 times: 3,000,000 values from 200 KB.
    let list = vec!["1"; 100_000].join(",");
    let uses = vec!["*a"; 30].join(", ");
    let yaml = format!("name: x\nconfig:\n  big: &a [{list}]\n  again: [{uses}]\nflows: {{}}\n");
    let y = yaml.clone();
    let p = small(move || parse_document(&y).unwrap_err());
    assert!(
        p.message
            .contains(&format!("more than {MAX_DOC_VALUES} values")),
        "{p}"
    );
    assert!(p.path.starts_with("config.again"), "{p}");
    // Conversation tests are read within the same limits.
    let suite = format!("tests: []\nx:\n  big: &a [{list}]\n  again: [{uses}]\n");
    let e = small(move || parse_suite(&suite).unwrap_err());
    assert!(
        e.contains(&format!("more than {MAX_DOC_VALUES} values")),
        "{e}"
    );
}

#[test]
fn interpolations_of_any_shape_compile_in_linear_time() {
    let cases = [
        // 200,000 unclosed `$(`: each would scan to the end.
        "$(".repeat(200_000),
        // Unclosed, alternating quotes.
        "$('".repeat(100_000),
        // 20,000 small interpolations.
        "$(a) ".repeat(20_000),
        // One interpolation as long as the limit allows, and one longer.
        format!("$({})", vec!["a"; 20_000].join("+")),
        format!("$({})", vec!["a"; 40_000].join("+")),
        // Deep inside one interpolation.
        format!("$({}a{})", "(".repeat(50_000), ")".repeat(50_000)),
        format!("x $({}a) y", "!".repeat(10_000)),
    ];
    for text in cases {
        let bot = bot_with("flows.f.actions.a.options", json!({"text": text}));
        small(|| match compile(&bot) {
            Ok(c) => {
                for w in &c.warnings {
                    assert!(w.message.contains("does not parse"), "{w}");
                    assert!(w.path.starts_with("flows.f.states.s.action[0]"), "{w}");
                }
                let stored = serde_json::to_string(&c.bot).unwrap();
                let _: CompiledBot = serde_json::from_str(&stored).unwrap();
            }
            Err(r) => {
                let e = r.errors().next().unwrap();
                assert!(
                    e.message.contains(&deep_message()) || e.message.contains("longer than"),
                    "{e}"
                );
                assert!(e.path.starts_with("flows.f.states.s.action[0]"), "{e}");
            }
        });
    }
    let parts = runtime_core::interp::split_interpolations(&"$(".repeat(200_000)).unwrap();
    assert_eq!(parts, vec![(false, "$(".repeat(200_000))]);
    let parts = runtime_core::interp::split_interpolations("$( $(a) $('$(b)') $(\"(\")").unwrap();
    assert_eq!(
        parts,
        vec![
            (false, "$( ".into()),
            (true, "a".into()),
            (false, " ".into()),
            (true, "'$(b)'".into()),
            (false, " ".into()),
            (true, "\"(\"".into()),
        ]
    );
}

/// JSON text of a bot with one flow whose states, intents and actions are given.
fn wide_bot(flows: usize, states: usize, intents: usize, actions: usize) -> String {
    let mut out = String::from("{\"name\": \"wide\", \"flows\": {");
    for f in 0..flows {
        if f > 0 {
            out.push(',');
        }
        out.push_str(&format!("\"f{f}\": {{\"intents\": {{"));
        for i in 0..intents.max(1) {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "\"i{i}\": {{\"initial\": {}, \"condition\": \"content == 'i{i}'\"}}",
                i == 0
            ));
        }
        out.push_str("}, \"states\": {");
        for s in 0..states.max(1) {
            if s > 0 {
                out.push(',');
            }
            let next = (s + 1) % states.max(1);
            out.push_str(&format!(
                "\"s{s}\": {{\"initial\": {}, \"action\": [{}], \"transitions\": {{\"s{next}\": \"content == 'go'\"}}}}",
                s == 0,
                if s == 0 {
                    (0..actions).map(|a| format!("\"a{a}\"")).collect::<Vec<_>>().join(",")
                } else {
                    String::new()
                }
            ));
        }
        out.push_str("}, \"actions\": {");
        for a in 0..actions {
            if a > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "\"a{a}\": {{\"type\": \"text\", \"options\": {{\"text\": \"$(content) {a}\"}}}}"
            ));
        }
        out.push_str("}}");
    }
    out.push_str("}}");
    out
}

#[test]
fn wide_bots_compile() {
    for (flows, states, intents, actions) in [
        (100_000, 1, 1, 0),
        (1, 100_000, 1, 0),
        (1, 1, 100_000, 0),
        (1, 1, 1, 100_000),
    ] {
        let text = wide_bot(flows, states, intents, actions);
        let c = small(move || compile_source(&text).unwrap_or_else(|e| panic!("{e}")));
        assert!(c.warnings.is_empty(), "{:?}", &c.warnings[..1]);
        let b = &c.bot;
        assert_eq!(b.flows.len(), flows);
        assert_eq!(b.flows[0].states.len(), states);
        assert_eq!(b.flows[0].intents.len(), intents);
        assert_eq!(b.flows[0].states[0].actions.len(), actions);
    }
    // A huge string and a huge key are values like any other; problems quote them cut.
    let big = "x".repeat(4 << 20);
    let bot = bot_with("flows.f.states.s.action[0].options", json!({"text": big}));
    small(|| compile(&bot).unwrap());
    let mut bot = bot_with("flows.f.states.s.transitions", json!({}));
    bot["flows"]["f"]["states"]["s"]["transitions"][&big] = json!("true");
    let r = small(|| compile(&bot).map(|_| ()).unwrap_err());
    let text = r.to_string();
    assert!(text.len() < 2_000, "{}", text.len());
    assert!(text.contains("unknown target state \"xxxx"), "{text}");
}

#[test]
fn long_keys_above_many_values_keep_positions_linear() {
    // Every path below the key repeats it: 20,000 paths of 100 KB would be 2 GB.
    let key = "k".repeat(100_000);
    let items = "      - 1\n".repeat(20_000);
    // (An explicit key: YAML limits implicit ones to 1024 characters.)
    let yaml = format!(
        "name: x\nconfig:\n  ? {key}\n  :\n{items}flows:\n  f:\n    intents: {{i: {{initial: true}}}}\n    states: {{s: {{initial: true}}}}\n"
    );
    small(move || compile_source(&yaml).unwrap_or_else(|e| panic!("{e}")));
}

#[test]
fn many_unknown_targets_give_a_bounded_report_and_hints_still_help() {
    // 20,000 states, each with a transition to a state that does not exist.
    let mut states = serde_json::Map::new();
    for i in 0..20_000 {
        states.insert(
            format!("state{i}"),
            json!({"initial": i == 0, "transitions": {format!("nowhere{i}"): "true"}}),
        );
    }
    let bot = json!({"flows": {"f": {"intents": {"i": {"initial": true}}, "states": states}}});
    let r = small(|| compile(&bot).map(|_| ()).unwrap_err());
    assert_eq!(r.problems.len(), runtime_core::compile::MAX_PROBLEMS + 1);
    let last = r.problems.last().unwrap();
    assert_eq!(last.message, "… and 19900 more problems");
    assert_eq!(last.severity, Severity::Error);
    assert!(
        r.problems[0].to_string().starts_with(
            "flows.f.states.state0.transitions.nowhere0: unknown target state \"nowhere0\""
        ),
        "{}",
        r.problems[0]
    );
    // 20,000 unknown keys: warnings are bounded the same way, and do not reject.
    let mut intent = serde_json::Map::new();
    intent.insert("initial".into(), json!(true));
    for i in 0..20_000 {
        intent.insert(format!("conditon{i}"), json!("true"));
    }
    let bot =
        json!({"flows": {"f": {"intents": {"i": intent}, "states": {"s": {"initial": true}}}}});
    let c = small(|| compile(&bot).unwrap());
    assert_eq!(c.warnings.len(), runtime_core::compile::MAX_PROBLEMS + 1);
    assert_eq!(
        c.warnings.last().unwrap().message,
        "… and 19900 more problems"
    );
    // A small bot still gets its hint.
    let small_bot = json!({"flows": {"f": {"intents": {"i": {"initial": true}},
        "states": {"ask": {"initial": true, "transitions": {"confrim": "true"}}, "confirm": {}}}}});
    let r = compile(&small_bot).map(|_| ()).unwrap_err();
    assert!(r.to_string().contains("(did you mean \"confirm\"?)"), "{r}");
}

#[test]
fn a_large_named_action_used_everywhere_is_refused_not_copied() {
    // A 1 MiB action used by 100,000 states would copy 100 GiB.
    let big = "x".repeat(1 << 20);
    let mut states = serde_json::Map::new();
    for i in 0..100_000 {
        states.insert(format!("s{i}"), json!({"initial": i == 0, "action": "big"}));
    }
    let bot = json!({"flows": {"f": {
        "intents": {"i": {"initial": true}},
        "states": states,
        "actions": {"big": {"type": "text", "options": {"text": big}}},
    }}});
    let r = small(|| compile(&bot).map(|_| ()).unwrap_err());
    let e = r.errors().next().unwrap();
    assert!(e.message.contains("copy more than 32 MiB"), "{e}");
    assert!(e.path.starts_with("flows.f.states.s3"), "{e}");
}

#[test]
fn mapping_targets_are_bounded() {
    let key = format!("context{}", ".a".repeat(100_000));
    let bot = bot_with("flows.f.states.s.enter", json!({ key: "1" }));
    let r = small(|| compile(&bot).map(|_| ()).unwrap_err());
    let e = r.errors().next().unwrap();
    assert!(
        e.message.contains("mapping target has more than 32 parts"),
        "{e}"
    );
    assert!(
        e.path.starts_with("flows.f.states.s.enter.context.a.a"),
        "{e}"
    );
}

struct Plain;

impl Host for Plain {
    fn now_ms(&mut self) -> i64 {
        1_000_000
    }
    fn random_u64(&mut self) -> u64 {
        4
    }
    fn http(&mut self, _: &HttpRequest) -> Result<HttpResponse, HostError> {
        Err(HostError::Failed("no network".into()))
    }
    fn nl_predict(&mut self, _: &str, _: &str, _: &Json) -> Result<Json, HostError> {
        Ok(Json::Null)
    }
    fn js(&mut self, _: JsCall<'_>) -> Result<JsOutcome, HostError> {
        Err(HostError::Failed("no JavaScript here".into()))
    }
}

#[test]
fn values_an_expression_builds_cannot_grow_a_session_without_bound() {
    // Each step wraps the context one level deeper, 50 levels at a time.
    let wrap = wrapped(("[", "]"), 50, "context.v");
    let src = format!(
        "flows:\n  f:\n    intents:\n      i: {{initial: true}}\n    states:\n      s:\n        initial: true\n        enter: {{context.v: \"{wrap}\"}}\n        transitions: {{s: \"true\"}}\n        action: {{name: text, options: {{text: \"$(context.v)\"}}}}\n"
    );
    let bot = compile_source(&src).unwrap_or_else(|e| panic!("{e}")).bot;
    small(|| {
        let mut session = fresh_session();
        let mut errors = vec![];
        for _ in 0..20 {
            let r = converse(&bot, &session, Message::text("hi"), &mut Plain).unwrap();
            errors.extend(r.errors);
            session = r.session;
        }
        assert!(
            errors
                .iter()
                .any(|e| e.contains(&format!("nested more than {MAX_VALUE_DEPTH} levels deep"))),
            "{errors:?}"
        );
        // The session stays readable by serde_json (128 levels).
        let text = serde_json::to_string(&session).unwrap();
        let _: runtime_core::Session = serde_json::from_str(&text).unwrap();
    });
}
