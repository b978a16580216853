//! The fast evaluator against JavaScript: hand-written cases for every operator, and a
//! property test that compares it with boa on generated expressions and values.

use boa_engine::{Context, Source};
use proptest::prelude::*;
use runtime_core::expr::{CompiledExpr, Env, EvalError, ExprKind, eval, parse};
use runtime_core::value::V;
use serde_json::{Value as Json, json};

struct Obj(Json);

impl Env for Obj {
    fn var<'a>(&'a self, name: &str) -> Option<V<'a>> {
        self.0.get(name).map(V::from_json)
    }
}

/// `typeof:JSON` of our result, or `throw`/`js` when it did not produce one.
fn ours(src: &str, scope: &Json) -> String {
    let e = match parse(src) {
        Ok(e) => e,
        Err(runtime_core::expr::ParseError::NeedsJs(_)) => return "js".into(),
        Err(err) => panic!("{src}: {err:?}"),
    };
    let env = Obj(scope.clone());
    match eval(&e, &env) {
        Ok(v) => show(&v),
        Err(EvalError::Throw(_)) => "throw".into(),
        Err(EvalError::NeedsJs(_)) => "js".into(),
    }
}

fn show(v: &V) -> String {
    match v {
        V::Num(n) => format!("number:{}", runtime_core::value::number_to_string(*n)),
        V::Undef => "undefined:".into(),
        other => format!("{}:{}", other.type_of(), other.to_json().unwrap()),
    }
}

/// The same through boa, with the scope's keys bound as function parameters.
fn boa(ctx: &mut Context, src: &str, scope: &Json) -> String {
    let keys: Vec<&String> = scope.as_object().unwrap().keys().collect();
    let params = keys
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let args = keys
        .iter()
        .map(|k| scope[k.as_str()].to_string())
        .collect::<Vec<_>>()
        .join(",");
    let code = format!(
        "(function({params}){{ try {{ var r = ({src}); }} catch (e) {{ return 'throw'; }} \
         if (typeof r === 'number') return 'number:' + String(r); \
         if (r === undefined) return 'undefined:'; return typeof r + ':' + JSON.stringify(r); }})({args})"
    );
    let v = ctx
        .eval(Source::from_bytes(&code))
        .unwrap_or_else(|e| panic!("{code}: {e}"));
    v.as_string().unwrap().to_std_string_escaped()
}

fn scope() -> Json {
    json!({
        "content": "Hello World", "n": 5, "s": "5", "z": 0, "e": "", "t": true, "f": false, "nul": null,
        "arr": [1, "2", null], "obj": {"a": 1, "b": {"c": "x"}}, "empty": {}, "list": [],
        "context": {"count": 2, "name": "ann"}, "payload": {"type": "pizza", "qty": "3"}
    })
}

#[test]
fn operators_follow_javascript() {
    let mut ctx = Context::default();
    let sc = scope();
    let cases = [
        "n == s",
        "n === s",
        "n != '5'",
        "n !== 5",
        "z == e",
        "z == f",
        "nul == undefined",
        "nul == 0",
        "nul === null",
        "arr == '1,2,'",
        "obj == '[object Object]'",
        "t == 1",
        "t == '1'",
        "e == f",
        "list == ''",
        "list == 0",
        "n < 10",
        "s < '10'",
        "'b' > 'a'",
        "nul >= 0",
        "undefined < 1",
        "arr < 2",
        "n && s",
        "z && s",
        "e || 'default'",
        "nul ?? 'x'",
        "z ?? 'x'",
        "!e",
        "!!obj",
        "!list",
        "n + s",
        "n + 1",
        "t + 1",
        "nul + 1",
        "e + nul",
        "arr + obj",
        "n - s",
        "s * '2'",
        "n / z",
        "-n % 3",
        "n % 0",
        "typeof n",
        "typeof s",
        "typeof nul",
        "typeof obj",
        "typeof arr",
        "typeof undefinedName",
        "typeof content.x",
        "'a' in obj",
        "'z' in obj",
        "0 in arr",
        "'length' in arr",
        "n > 3 ? 'big' : 'small'",
        "t ? f ? 1 : 2 : 3",
        "obj.b.c",
        "obj['b']['c']",
        "arr[1]",
        "arr.length",
        "content.length",
        "content[0]",
        "obj.zz",
        "obj?.zz?.yy",
        "context.count + 1",
        "(context.count || 0) + 1",
        "payload.type == 'pizza' && payload.qty > 2",
        "content.toLowerCase()",
        "content.toUpperCase()",
        "content.includes('World')",
        "content.startsWith('Hell')",
        "content.endsWith('d')",
        "content.indexOf('o')",
        "content.lastIndexOf('o')",
        "content.slice(-5)",
        "content.slice(1, 3)",
        "content.substring(3, 1)",
        "content.substr(2, 3)",
        "content.split(' ')",
        "content.split('')",
        "content.replace('l', 'L')",
        "content.replace(/l/g, 'L')",
        "content.replace(/(W)orld/, '$1-$&')",
        "content.trim()",
        "'  x '.trim()",
        "content.charAt(4)",
        "content.padStart(13, '*')",
        "content.repeat(2)",
        "content.match(/o/g)",
        "content.match(/(H)(e)/)",
        "content.search(/W/)",
        "arr.includes('2')",
        "arr.includes(2)",
        "arr.indexOf(1)",
        "arr.join('-')",
        "arr.slice(1)",
        "[1, 2].concat([3], 4)",
        "parseInt('42px')",
        "parseInt('0x1f')",
        "parseInt('z', 36)",
        "parseFloat('3.14abc')",
        "parseFloat('.5e1')",
        "Number('')",
        "Number(' 12 ')",
        "Number('12px')",
        "String(nul)",
        "String(arr)",
        "Boolean('')",
        "Boolean(obj)",
        "isNaN('x')",
        "Math.max(1, n, 3)",
        "Math.min()",
        "Math.round(2.5)",
        "Math.round(-2.5)",
        "Math.floor(-1.5)",
        "Math.abs(-3)",
        "JSON.stringify(obj)",
        "JSON.parse('{\"a\":[1]}')",
        "Object.keys(obj)",
        "Array.isArray(arr)",
        "/^hel/i.test(content)",
        "/\\d+/.test(s)",
        "/\\bWorld\\b/.test(content)",
        "(1.005).toFixed(2)",
        "(2.5).toFixed(0)",
        "n.toFixed(1)",
        "0.1 + 0.2",
        "1e21 + 1",
        "1 / 3",
        "-0 + ''",
        "[n, s, {k: nul}]",
        "{a: n, 'b c': [1]}",
        "obj.b.c.d.e",
        "nul.x",
        "missingVar",
        "'x' in s",
    ];
    let mut diffs = vec![];
    for src in cases {
        let a = ours(src, &sc);
        if a == "js" {
            diffs.push(format!("{src}: not evaluated by the subset"));
            continue;
        }
        let b = boa(&mut ctx, src, &sc);
        if a != b {
            diffs.push(format!("{src}: ours {a}, JavaScript {b}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn outside_the_subset_goes_to_javascript_and_nonsense_is_a_syntax_error() {
    for src in [
        "x => x",
        "a = 1",
        "`t${a}`",
        "new Date()",
        "[1].map(function (x) { return x; })",
        "a++",
        "a, b",
    ] {
        assert_eq!(CompiledExpr::new(src).kind, ExprKind::Js, "{src}");
    }
    for (src, msg) in [
        ("a ==", "unexpected end of expression at column 5"),
        ("(a", "unexpected end of expression at column 3"),
        ("a b", "unexpected identifier 'b' at column 3"),
        ("'open", "unterminated string literal at column 1"),
    ] {
        assert_eq!(
            CompiledExpr::new(src).kind,
            ExprKind::Invalid(msg.into()),
            "{src}"
        );
    }
}

#[test]
fn context_meta_names() {
    struct WithMeta(Json);
    impl Env for WithMeta {
        fn var<'a>(&'a self, name: &str) -> Option<V<'a>> {
            self.0.get(name).map(V::from_json)
        }
        fn context_meta<'a>(&'a self, name: &str) -> Option<V<'a>> {
            match name {
                "$to" => Some(V::Str("next".into())),
                "$flow" => Some(V::Str("f".into())),
                _ => None,
            }
        }
    }
    let env = WithMeta(json!({"context": {"to": "mine"}}));
    let get = |src: &str| eval(&parse(src).unwrap(), &env).unwrap().to_js_string();
    assert_eq!(get("context.$to"), "next");
    assert_eq!(
        get("context.to"),
        "mine",
        "the user's own key wins over the plain alias"
    );
    assert_eq!(get("context.$flow + '/' + context.from"), "f/undefined");
}

fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        (-20i32..20).prop_map(|n| n.to_string()),
        Just("1.5".to_string()),
        Just("'5'".to_string()),
        Just("''".to_string()),
        Just("'abc'".to_string()),
        Just("'10'".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("null".to_string()),
        Just("undefined".to_string()),
        Just("n".to_string()),
        Just("s".to_string()),
        Just("e".to_string()),
        Just("nul".to_string()),
        Just("arr".to_string()),
        Just("obj.a".to_string()),
        Just("obj.zz".to_string()),
        Just("context.count".to_string()),
        Just("payload.qty".to_string()),
        Just("content".to_string()),
        Just("list".to_string()),
    ]
}

fn expr() -> impl Strategy<Value = String> {
    leaf().prop_recursive(4, 24, 3, |inner| {
        let ops = prop_oneof![
            Just("=="),
            Just("!="),
            Just("==="),
            Just("!=="),
            Just("<"),
            Just("<="),
            Just(">"),
            Just(">="),
            Just("+"),
            Just("-"),
            Just("*"),
            Just("/"),
            Just("%"),
            Just("&&"),
            Just("||"),
            Just("??"),
        ];
        prop_oneof![
            (inner.clone(), ops, inner.clone()).prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            inner.clone().prop_map(|a| format!("!{a}")),
            inner.clone().prop_map(|a| format!("(- {a})")),
            inner.clone().prop_map(|a| format!("(typeof {a})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("({c} ? {a} : {b})")),
            inner.clone().prop_map(|a| format!("String({a})")),
            inner.clone().prop_map(|a| format!("Number({a})")),
            inner.clone().prop_map(|a| format!("parseInt({a})")),
            inner.prop_map(|a| format!("String({a}).length")),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]
    #[test]
    fn the_subset_agrees_with_boa(src in expr()) {
        thread_local!(static CTX: std::cell::RefCell<Context> = std::cell::RefCell::new(Context::default()));
        let sc = scope();
        let a = ours(&src, &sc);
        prop_assume!(a != "js");
        let b = CTX.with(|c| boa(&mut c.borrow_mut(), &src, &sc));
        prop_assert_eq!(a, b, "expression: {}", src);
    }
}

#[test]
fn hostile_nesting_is_a_syntax_error_not_a_stack_overflow() {
    let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(
        matches!(CompiledExpr::new(&deep).kind, ExprKind::Invalid(m) if m.contains("nested more than 200 levels"))
    );
    let nots = format!("{}true", "!".repeat(10_000));
    assert!(matches!(
        CompiledExpr::new(&nots).kind,
        ExprKind::Invalid(_)
    ));
    let fine = format!("{}1{}", "(".repeat(50), ")".repeat(50));
    assert!(matches!(CompiledExpr::new(&fine).kind, ExprKind::Fast(_)));
}
