//! Fuzzing the bot pipeline: generated bot documents — valid-looking ones built
//! from the language's own keys and expression pieces, and arbitrary YAML text — go through
//! parse, validate and compile; what compiles is serialised, read back and run for a few
//! messages. No input may panic, and a compiled bot survives its round trip unchanged.
//!
//! `cargo test -p runtime-core --test fuzz_compile` runs a bounded number of cases (seconds);
//! `BOTBOX_FUZZ_CASES=50000 cargo test --release -p runtime-core --test fuzz_compile` runs a
//! long campaign (docs/performance.md has the figures).

use proptest::prelude::*;
use runtime_core::session::{Message, Session};
use runtime_core::testing::OfflineHost;
use serde_json::{Map, Value as Json, json};

fn cases() -> u32 {
    std::env::var("BOTBOX_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// Expression text built from the subset's pieces, often valid, sometimes not.
fn expression() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("content".to_string()),
        Just("intent".to_string()),
        Just("context.n".to_string()),
        Just("data.x".to_string()),
        Just("payload.type".to_string()),
        Just("attributes.a".to_string()),
        Just("'hi'".to_string()),
        Just("/h(i|ello)/i".to_string()),
        Just("(() => 1)()".to_string()),
        Just("`t${1}`".to_string()),
        Just("result.items[0]".to_string()),
        any::<i32>().prop_map(|n| n.to_string()),
        "[a-z]{1,6}".prop_map(|s| s),
    ];
    atom.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(
                    &[
                        "+", "-", "*", "/", "%", "==", "===", "!=", "<", ">=", "&&", "||", "??",
                        " in "
                    ][..]
                ),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("!({a})")),
            inner.clone().prop_map(|a| format!("{a}.length")),
            inner.clone().prop_map(|a| format!("{a}.toLowerCase()")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| format!("{a} ? {b} : {c}")),
            inner.clone().prop_map(|a| format!("[{a}, 1]")),
            inner.clone().prop_map(|a| format!("{{k: {a}}}")),
            inner.clone().prop_map(|a| format!("$({a})")),
            inner.prop_map(|a| format!("({a}")),
        ]
    })
}

fn text_value() -> impl Strategy<Value = Json> {
    prop_oneof![
        expression().prop_map(|e| json!(format!("say $({e})"))),
        "[a-z $()\\[\\]]{0,20}".prop_map(Json::String),
        Just(json!("$[items.0]")),
        prop::collection::vec(expression().prop_map(|e| json!(format!("v $({e})"))), 1..3)
            .prop_map(Json::Array),
    ]
}

fn action() -> impl Strategy<Value = Json> {
    prop_oneof![
        text_value().prop_map(|t| json!({"name": "text", "options": {"text": t}})),
        (expression(), text_value())
            .prop_map(|(c, t)| json!({"name": "text", "condition": c, "options": {"text": t}})),
        Just(json!({"name": "command", "options": {"command": "again"}})),
        Just(
            json!({"name": "template", "options": {"type": "button", "items": {"title": "t", "text": "x", "actions": [{"type": "postback", "label": "a", "payload": {"k": "v"}}]}}})
        ),
        Just(json!({"name": "nonexistent"})),
        Just(
            json!({"name": "api", "options": {"method": "GET", "uri": "https://x.test/$(content)"}})
        ),
        Just(json!({"type": "method", "method": "missing"})),
        Just(json!(null)),
        Just(json!(42)),
    ]
}

fn bot() -> impl Strategy<Value = Json> {
    let state = (
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(action(), 0..3),
        prop::collection::vec(("[a-c]", expression()), 0..3),
        proptest::option::of(prop::collection::vec(
            ("(context|data)\\.[a-z]", expression()),
            0..2,
        )),
    )
        .prop_map(|(initial, end, actions, transitions, mapping)| {
            let mut t = Map::new();
            for (to, cond) in transitions {
                t.insert(to, json!(cond));
            }
            let mut s =
                json!({"initial": initial, "end": end, "action": actions, "transitions": t});
            if let Some(m) = mapping {
                let m: Map<String, Json> =
                    m.into_iter().map(|(k, v)| (k, Json::String(v))).collect();
                s["float"] = json!({"fallback": true, "mapping": m});
            }
            s
        });
    let intent = (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(expression()),
    )
        .prop_map(|(initial, fallback, condition)| {
            let mut i = json!({"initial": initial, "fallback": fallback});
            if let Some(c) = condition {
                i["condition"] = json!(c);
            }
            i
        });
    let flow = (
        any::<bool>(),
        prop::collection::btree_map("[a-c]", state, 1..4),
        prop::collection::btree_map("[i-k]", intent, 0..3),
    )
        .prop_map(|(fallback, states, intents)| {
            json!({"fallback": fallback, "states": states, "intents": intents})
        });
    (
        prop::collection::btree_map("[f-h]", flow, 1..3),
        proptest::option::of(any::<u8>()),
    )
        .prop_map(|(flows, max_rec)| {
            let mut b = json!({"name": "fuzz", "flows": flows,
                "nlus": {"kw": {"type": "keyword", "options": {"keywords": {"a": ["hi"]}}}}});
            if let Some(m) = max_rec {
                b["config"] = json!({"maxRecursion": m});
            }
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_bots_compile_round_trip_and_run(doc in bot(), msgs in prop::collection::vec("hi|again|[a-z]{0,5}", 1..4)) {
        let Ok(compiled) = runtime_core::compile(&doc) else { return Ok(()) };
        let text = serde_json::to_string(&compiled.bot).unwrap();
        let back: runtime_core::CompiledBot = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), text);
        let mut session = Session::new("s");
        let mut host = OfflineHost::default();
        for m in msgs {
            if let Ok(r) = runtime_core::converse(&back, &session, Message::text(&m), &mut host) {
                session = r.session;
            }
        }
    }

    #[test]
    fn arbitrary_yaml_text_never_panics(text in "[a-z:\\-\\[\\]{}\"' \n$()&*!|>#0-9.]{0,300}") {
        let _ = runtime_core::compile_source(&text);
    }

    #[test]
    fn expressions_parse_or_fail_cleanly(e in expression(), junk in "[\\x00-\\x7f]{0,40}") {
        let _ = runtime_core::expr::parse(&e);
        let _ = runtime_core::expr::parse(&junk);
        let _ = runtime_core::expr::parse(&format!("{e}{junk}"));
    }
}

/// The generator must reach the engine: a fair share of its bots compile (a generator whose
/// bots all fail validation would make the round-trip-and-run property vacuous).
#[test]
fn generated_bots_often_compile() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = bot();
    let mut compiled = 0;
    for _ in 0..200 {
        let doc = strategy.new_tree(&mut runner).unwrap().current();
        if runtime_core::compile(&doc).is_ok() {
            compiled += 1;
        }
    }
    assert!(
        compiled >= 20,
        "only {compiled} of 200 generated bots compile"
    );
}
