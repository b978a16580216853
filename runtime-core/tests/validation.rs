//! Validation reports every problem at once, with paths and YAML positions.

use runtime_core::compile_source;
use runtime_core::source::Severity;

const BAD: &str = r#"name: bad
flows:
  order:
    intents:
      go: {initial: true, condition: "content == 'go'"}
    states:
      showPizza:
        initial: true
        transtions:
          confirm: "true"
        transitions:
          confrim: "intent == 'go'"
      confirm:
        end: true
        action: sayIt
  second:
    states:
      a: {initial: true}
      b: {initial: true}
  third:
    intents:
      x:
        priority: high
        condition: "content == 'x')"
"#;

#[test]
fn every_problem_is_reported_with_path_and_line() {
    let err = compile_source(BAD).unwrap_err();
    let text = err.to_string();
    let errors: Vec<String> = err.errors().map(|p| p.to_string()).collect();
    assert!(
        errors.contains(&"flows.order.states.showPizza.transitions.confrim: unknown target state \"confrim\" (did you mean \"confirm\"?) (line 12, column 11)".to_string()),
        "{text}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("flows.second.intents: a flow needs \"intents\"")),
        "{text}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("flows.second.states: several initial states (a, b)")),
        "{text}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e
                .starts_with("flows.third.intents.x.priority: expected a number, found a string")),
        "{text}"
    );
    // Warnings come along with the errors.
    let warnings: Vec<String> = err
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Warning)
        .map(|p| p.to_string())
        .collect();
    assert!(warnings.iter().any(|w| w.starts_with("flows.order.states.showPizza.transtions: unknown key \"transtions\" (did you mean \"transitions\"?)") && w.contains("line 9")), "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("flows.order.states.confirm.action: unknown action \"sayIt\"")),
        "{warnings:?}"
    );
    assert!(warnings.iter().any(|w| w.contains("flows.third.intents.x.condition: expression \"content == 'x')\" does not parse: unexpected ')' at column 15")), "{warnings:?}");
    assert_eq!(err.errors().count(), 4, "{text}");
}

#[test]
fn warnings_do_not_reject() {
    let src = "name: w\nflows:\n  f:\n    intents:\n      i: {initial: true, classifier: {nlu: nope}}\n    states:\n      s: {initial: true, action: unknownThing}\n";
    let ok = compile_source(src).unwrap();
    let w: Vec<String> = ok.warnings.iter().map(|p| p.to_string()).collect();
    assert!(
        w.iter().any(|x| x.contains("unknown NLU \"nope\"")),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|x| x.contains("unknown action \"unknownThing\"")),
        "{w:?}"
    );
}

#[test]
fn missing_flows_and_missing_initial_state() {
    let err = compile_source("name: x\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "flows: missing \"flows\": a bot needs at least one flow"
    );
    let err =
        compile_source("flows:\n  f:\n    intents: {}\n    states:\n      a: {}\n").unwrap_err();
    assert!(
        err.to_string().contains("flows.f.states: no initial state"),
        "{err}"
    );
}

#[test]
fn float_targets_and_json_input() {
    let json = r#"{"flows": {"f": {"intents": {}, "states": {"a": {"initial": true, "transitions": {"zz": {"condition": "true"}}}}}}}"#;
    let err = compile_source(json).unwrap_err();
    assert_eq!(
        err.to_string(),
        "flows.f.states.a.transitions.zz: unknown target state \"zz\""
    );
}

#[test]
fn yaml_syntax_error_names_the_line() {
    let err = compile_source("flows:\n  f: [\n").unwrap_err();
    assert!(err.to_string().contains("line"), "{err}");
}

#[test]
fn short_forms_are_accepted() {
    let src = r#"
name: forms
maxRecursion: 7
methods:
  cube(x): x*x*x
  fromFile(x): {code: "module.exports = function (x) { return x; }", entry: module.exports}
flows:
  f:
    intents:
      a: {initial: true, condition: ["content == 'a'", "type == 'text'"], classifier: [keyword, {nlu: regex}]}
    states:
      s:
        initial: true
        actions: [text, {name: text, options: {text: hi}}]
        transitions: {t: "intent == 'a'"}
      t:
        end: true
        action: {name: command, options: {command: x}}
    actions:
      direct: {type: command, command: go, payload: {a: 1}}
"#;
    let c = compile_source(src).unwrap();
    assert_eq!(c.bot.max_recursion, 7);
    assert_eq!(c.bot.methods.len(), 2);
    let f = &c.bot.flows[0];
    assert_eq!(f.intents[0].conditions.len(), 2);
    assert_eq!(f.intents[0].classifiers.len(), 2);
    assert_eq!(f.states[0].actions.len(), 2);
    // The compiled bot round-trips through serde (stored per revision).
    let stored = serde_json::to_string(&c.bot).unwrap();
    let back: runtime_core::CompiledBot = serde_json::from_str(&stored).unwrap();
    assert_eq!(back.flows[0].states.len(), 2);
}
