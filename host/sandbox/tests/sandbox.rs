//! The sandbox: the same answers as the native engine, and every limit contained.

use botbox_lanes::Lane;
use botbox_sandbox::effects::{EffectFuture, Effects, NlRequest};
use botbox_sandbox::limits::Limits;
use botbox_sandbox::testing::SandboxStepper;
use botbox_sandbox::{
    Revision, Sandbox, SandboxConfig, SandboxError, TenantSteps, block_on, spawn,
};
use botbox_testkit::{Reply, StubEffects, example, example_dirs};
use guest_sdk::native::NativeStepper;
use runtime_core::host::{HttpRequest, HttpResponse};
use runtime_core::testing::{StepInput, Stepped, Stepper, fresh_session, parse_suite, run_case};
use runtime_core::{ConverseResult, Message, Session, StepError, compile_source};
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, mpsc};

/// The tenant of the tests that do not compare tenants.
const TENANT: &str = "tests";

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("guest-cache")
}

fn config(limits: Limits) -> SandboxConfig {
    SandboxConfig {
        limits,
        slots: 16,
        warm_per_revision: 2,
        cache_dir: cache_dir(),
        ..SandboxConfig::default()
    }
}

fn sandbox_with(limits: Limits) -> Sandbox {
    Sandbox::new(config(limits)).expect("sandbox")
}

/// One shared sandbox with default limits (engine creation is not free).
fn sandbox() -> &'static Sandbox {
    static S: OnceLock<Sandbox> = OnceLock::new();
    S.get_or_init(|| sandbox_with(Limits::default()))
}

/// Runs native and sandbox side by side and records any difference.
struct Differential<'a> {
    sandbox: SandboxStepper<'a>,
    diffs: Vec<String>,
}

impl Stepper for Differential<'_> {
    fn step(&mut self, input: StepInput<'_>) -> Stepped {
        let msg = input.msg.clone();
        let mut env2 = input.env.clone();
        let sandbox_input = StepInput {
            msg: msg.clone(),
            env: &mut env2,
            ..input
        };
        let native = NativeStepper.step(input);
        let sandboxed = self.sandbox.step(sandbox_input);
        let show = |r: &Stepped| match r {
            Ok(r) => serde_json::to_string(r).unwrap(),
            Err(e) => format!("error: {e}"),
        };
        if show(&native) != show(&sandboxed) {
            self.diffs.push(format!(
                "message {}:\n  native:  {}\n  sandbox: {}",
                serde_json::to_string(&msg).unwrap(),
                show(&native),
                show(&sandboxed)
            ));
        }
        native
    }
}

#[test]
fn every_example_gives_identical_results_native_and_sandboxed() {
    let dirs: Vec<_> = example_dirs()
        .into_iter()
        // Bots with an NL Studio model need it trained: the it suite's nlu tests run them.
        .filter(|p| !p.join("nlu.yml").exists())
        .collect();
    let mut diffs = vec![];
    let mut failures = vec![];
    let mut steps = 0;
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let bot = example(&name);
        let mut diff = Differential {
            sandbox: SandboxStepper {
                sandbox: sandbox(),
                revision: Revision::new(&name, &bot),
            },
            diffs: vec![],
        };
        for t in std::fs::read_dir(dir.join("tests")).unwrap() {
            let suite = parse_suite(&std::fs::read_to_string(t.unwrap().path()).unwrap()).unwrap();
            for case in &suite.tests {
                steps += case.steps.len();
                let report = run_case(&bot, case, &mut diff);
                failures.extend(
                    report
                        .failures
                        .into_iter()
                        .map(|f| format!("{name}/{}: {f}", case.name)),
                );
            }
        }
        diffs.extend(diff.diffs.into_iter().map(|d| format!("{name}: {d}")));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    assert!(steps >= 75, "ran only {steps} steps");
}

const ABUSE: &str = r#"
name: abuse
config:
  maxRecursion: 10
methods:
  spin(): "while (true) {}"
  deep(n): "function deep(n) { return deep(n + 1) + 1; }"
  bomb(): "var a = []; while (true) { a.push('x'.repeat(1 << 20) + a.length); }"
  huge(): "return 'x'.repeat(100 * 1024 * 1024).length;"
  chatty(): "for (var i = 0; i < 250; i++) console.log('line ' + i); return 'done';"
  setGlobal(message): "globalThis.secret = message.content; return 'set';"
  readGlobal(): "return typeof secret === 'undefined' ? 'clean' : 'leaked ' + secret;"
  nest(): "return eval('('.repeat(10000) + '1' + ')'.repeat(10000));"
  escape(): |
    var seen = [typeof require, typeof process, typeof fetch, typeof Deno, typeof XMLHttpRequest, typeof WebAssembly];
    return seen.join(',');
flows:
  f:
    intents:
      any: {initial: true, type: text}
    states:
      s:
        initial: true
        transitions:
          spin: "content == 'spin'"
          loopCond: "content == 'loopcond' && (() => { while (true) {} })()"
          deep: "content == 'deep'"
          bomb: "content == 'bomb'"
          huge: "content == 'huge'"
          chatty: "content == 'chatty'"
          setG: "content.startsWith('set ')"
          readG: "content == 'read'"
          escape: "content == 'escape'"
          nest: "content == 'nest'"
          api: "content.startsWith('api ')"
      spin: {end: true, action: {name: method, method: spin}}
      loopCond: {end: true, action: {name: text, options: {text: unreachable}}}
      deep: {end: true, action: {name: method, method: deep}}
      bomb: {end: true, action: {name: method, method: bomb}}
      huge: {end: true, action: {name: method, method: huge}}
      chatty: {end: true, action: {name: method, method: chatty}}
      setG: {end: true, action: {name: method, method: setGlobal}}
      readG: {end: true, action: {name: method, method: readGlobal}}
      escape: {end: true, action: {name: method, method: escape}}
      nest: {end: true, action: {name: method, method: nest}}
      api:
        end: true
        action:
          - {name: api, options: {uri: "$(content.slice(4))"}}
          - {name: text, options: {text: "result=$(result)"}}
"#;

fn abuse_revision() -> Revision {
    Revision::new("abuse", &compile_source(ABUSE).unwrap().bot)
}

/// The outside world of a step that makes no api call.
fn offline() -> Arc<dyn Effects> {
    Arc::new(StubEffects::offline())
}

fn say(
    sb: &Sandbox,
    rev: &Revision,
    session: &Session,
    text: &str,
) -> Result<ConverseResult, SandboxError> {
    block_on(sb.step(TENANT, rev, session, &Message::text(text), offline())).map(|o| o.result)
}

fn aborted(sb: &Sandbox, rev: &Revision, text: &str) -> String {
    match say(sb, rev, &fresh_session(), text) {
        Err(SandboxError::Step(StepError::Aborted(m))) => m,
        other => panic!("{text}: expected an aborted step, got {other:?}"),
    }
}

fn texts(r: &ConverseResult) -> Vec<String> {
    r.responses
        .iter()
        .filter_map(|x| x.content.clone())
        .collect()
}

/// Another bot in the same process still answers.
fn hello_still_answers(sb: &Sandbox) {
    let rev = Revision::new("hello", &example("hello"));
    let r = say(sb, &rev, &fresh_session(), "hi").expect("hello answers");
    assert_eq!(texts(&r), vec!["hi!"]);
}

#[test]
fn an_endless_loop_in_a_method_hits_the_fuel_budget() {
    let sb = sandbox();
    let m = aborted(sb, &abuse_revision(), "spin");
    assert_eq!(
        m,
        format!(
            "method spin exceeded its fuel budget of {}",
            sb.limits().fuel
        )
    );
    hello_still_answers(sb);
}

#[test]
fn an_endless_loop_in_a_condition_hits_the_fuel_budget() {
    let sb = sandbox();
    let m = aborted(sb, &abuse_revision(), "loopcond");
    assert_eq!(
        m,
        format!(
            "expression \"content == 'loopcond' && (() => {{ while (true) {{}} }})()\" exceeded its fuel budget of {}",
            sb.limits().fuel
        )
    );
    hello_still_answers(sb);
}

#[test]
fn deep_recursion_is_stopped() {
    let sb = sandbox();
    let m = aborted(sb, &abuse_revision(), "deep");
    assert!(m.starts_with("method deep "), "{m}");
    assert!(m.contains("limit") || m.contains("stack"), "{m}");
    hello_still_answers(sb);
}

#[test]
fn a_memory_bomb_and_a_100_mb_string_hit_the_memory_cap() {
    let sb = sandbox_with(Limits {
        fuel: 20_000_000_000,
        ..Limits::default()
    });
    let rev = abuse_revision();
    assert_eq!(
        aborted(&sb, &rev, "bomb"),
        "method bomb exceeded its memory cap of 32 MiB"
    );
    assert_eq!(
        aborted(&sb, &rev, "huge"),
        "method huge exceeded its memory cap of 32 MiB"
    );
    hello_still_answers(&sb);
}

#[test]
fn more_host_calls_than_allowed_abort_the_step() {
    let sb = sandbox();
    let m = aborted(sb, &abuse_revision(), "chatty");
    assert_eq!(
        m,
        format!(
            "the step exceeded its cap of {} host calls",
            sb.limits().max_host_calls
        )
    );
    hello_still_answers(sb);
}

#[test]
fn javascript_sees_no_file_network_or_process_apis() {
    let r = say(sandbox(), &abuse_revision(), &fresh_session(), "escape").unwrap();
    assert_eq!(
        texts(&r),
        vec!["undefined,undefined,undefined,undefined,undefined,undefined"]
    );
}

#[test]
fn a_js_global_written_in_one_conversation_is_invisible_to_the_next() {
    let sb = sandbox_with(Limits::default());
    let rev = abuse_revision();
    assert_eq!(
        texts(&say(&sb, &rev, &fresh_session(), "set s3cret").unwrap()),
        vec!["set"]
    );
    // The same warm instance serves the next step.
    let out = block_on(sb.step(
        TENANT,
        &rev,
        &fresh_session(),
        &Message::text("read"),
        offline(),
    ))
    .unwrap();
    assert!(out.warm, "the instance was reused");
    assert_eq!(texts(&out.result), vec!["clean"]);
}

/// A bot whose JavaScript tries to leave something behind for the next step: `attack NAME`
/// runs one attack and then the checks, `probe` runs the checks alone.
const MUTATOR: &str = r#"
name: mutator
methods:
  js(message): |
    function check() {
      // Only syntax here: the attacks may have replaced any built-in this would call.
      var bad = '';
      function t(name, ok) {
        try { if (!ok()) bad += '; ' + name; } catch (e) { bad += '; ' + name + ' threw ' + e; }
      }
      t('Object.prototype', function () { return ({}).polluted === undefined; });
      t('Array.prototype.push', function () { var a = []; return a.push(7) === 1 && a[0] === 7; });
      t('JSON.parse', function () { return JSON.parse('{"a":1}').a === 1; });
      t('Math.random', function () { var r = Math.random(); return r !== 0.5 && r >= 0 && r < 1; });
      t('a global', function () { return typeof secret === 'undefined'; });
      t('an implicit global', function () { return typeof leaky === 'undefined'; });
      t('the global prototype', function () { return typeof inherited === 'undefined'; });
      t('an extensible global', function () { return Object.isExtensible(globalThis); });
      t('String.prototype.trim', function () { return ' a '.trim() === 'a'; });
      t('Function.prototype.call', function () { return Math.max.call(null, 1, 2) === 2; });
      t('generators', function () { return (function* () { yield 1; })().next().value === 1; });
      t('array iterators', function () { var n = 0; for (var x of [1, 2]) n += x; return n === 3; });
      t('Error.prototype', function () { return String(new Error('m')) === 'Error: m'; });
      t('RegExp.prototype.exec', function () { return 'ab'.replace(/b/, 'c') === 'ac'; });
      t('the JSON global', function () { return typeof JSON.stringify === 'function'; });
      t('console', function () { return console.log !== undefined && console.log.evil === undefined; });
      t('every global and its properties', function () {
        var keys = Reflect.ownKeys(globalThis);
        for (var i = 0; i < keys.length; i++) {
          var v = globalThis[keys[i]];
          if (v === 'evil') return false;
          if ((typeof v === 'object' && v !== null) || typeof v === 'function') {
            var inner = Reflect.ownKeys(v);
            for (var j = 0; j < inner.length; j++) {
              var d = Object.getOwnPropertyDescriptor(v, inner[j]);
              if (d && d.value === 'evil') return false;
            }
          }
        }
        return true;
      });
      return bad === '' ? 'clean' : bad;
    }
    var attacks = {
      prototype: function () { Object.prototype.polluted = 'leak'; },
      defineOnPrototype: function () { Object.defineProperty(Object.prototype, 'polluted', {value: 'leak'}); },
      push: function () { Array.prototype.push = function () { return 'hijacked'; }; },
      parse: function () { JSON.parse = function () { return {a: 'evil'}; }; },
      random: function () { Math.random = function () { return 0.5; }; },
      getter: function () {
        Object.defineProperty(globalThis, 'secret', {get: function () { return 'leak'; }, configurable: true});
      },
      fixedGetter: function () {
        Object.defineProperty(globalThis, 'secret', {get: function () { return 'leak'; }});
      },
      implicit: function () { leaky = 'leak'; },
      indirectEval: function () { (0, eval)('var leaky = 1'); },
      globalPrototype: function () { Object.setPrototypeOf(globalThis, {inherited: 'leak'}); },
      preventExtensions: function () { Object.preventExtensions(globalThis); },
      trim: function () { String.prototype.trim = function () { return 'evil'; }; },
      call: function () { Function.prototype.call = function () { return 'evil'; }; },
      generator: function () {
        Object.getPrototypeOf(function* () {}).prototype.next = function () { return {value: 'evil'}; };
      },
      iterator: function () {
        Object.getPrototypeOf([][Symbol.iterator]()).next = function () { return {done: true}; };
      },
      errorToString: function () { Error.prototype.toString = function () { return 'evil'; }; },
      exec: function () { RegExp.prototype.exec = function () { return null; }; },
      replaceJSON: function () { JSON = {}; },
      deleteJSON: function () { delete globalThis.JSON; },
      console: function () { console.log.evil = 1; console.log = undefined; },
      promise: function () { Promise.resolve().then(function () { leaky = 'late'; }); },
      everything: function () {
        var keys = Reflect.ownKeys(globalThis);
        for (var i = 0; i < keys.length; i++) {
          var v = globalThis[keys[i]];
          if ((typeof v === 'object' && v !== null) || typeof v === 'function') {
            var inner = Reflect.ownKeys(v);
            for (var j = 0; j < inner.length; j++) { try { v[inner[j]] = 'evil'; } catch (e) {} }
          }
        }
        for (var k = 0; k < keys.length; k++) { try { globalThis[keys[k]] = 'evil'; } catch (e) {} }
      }
    };
    var name = message.content.split(' ')[1];
    if (name) {
      if (!attacks[name]) return 'no attack ' + name;
      try { attacks[name](); } catch (e) {}
    }
    return check();
  counter(): "var n = 0; function counter() { n += 1; return 'n=' + n; }"
  callee(): "arguments.callee.n = (arguments.callee.n || 0) + 1; return 'n=' + arguments.callee.n;"
  compat(): |
    var out = [];
    for (i = 0; i < 2; i++) {}
    out.push(i);
    var o = {};
    o.toString = function () { return 'custom'; };
    out.push(String(o));
    function E(m) { this.message = m; }
    E.prototype = Object.create(Error.prototype);
    E.prototype.name = 'E';
    E.prototype.constructor = E;
    out.push(String(new E('x')));
    class F extends Error { constructor(m) { super(m); this.name = 'F'; } }
    out.push(String(new F('y')));
    return out.join(',');
flows:
  f:
    intents:
      any: {initial: true, type: text}
    states:
      s:
        initial: true
        transitions:
          js: "content.startsWith('attack') || content == 'probe'"
          counter: "content == 'counter'"
          callee: "content == 'callee'"
          compat: "content == 'compat'"
      js: {end: true, action: {name: method, method: js}}
      counter: {end: true, action: {name: method, method: counter}}
      callee: {end: true, action: {name: method, method: callee}}
      compat: {end: true, action: {name: method, method: compat}}
"#;

/// One sandbox whose revision keeps one warm instance, so consecutive steps share it; fuel
/// for the checks that read every property of every global.
fn one_warm_instance() -> Sandbox {
    Sandbox::new(SandboxConfig {
        warm_per_revision: 1,
        ..config(Limits {
            fuel: 2_000_000_000,
            ..Limits::default()
        })
    })
    .expect("sandbox")
}

fn warm_say(sb: &Sandbox, rev: &Revision, text: &str) -> (String, bool) {
    let out = block_on(sb.step(
        TENANT,
        rev,
        &fresh_session(),
        &Message::text(text),
        offline(),
    ))
    .unwrap_or_else(|e| panic!("{text}: {e}"));
    (texts(&out.result).join(" | "), out.warm)
}

#[test]
fn nothing_a_step_does_to_javascript_built_ins_or_globals_reaches_the_next_step() {
    let sb = one_warm_instance();
    let rev = Revision::new("mutator", &compile_source(MUTATOR).unwrap().bot);
    assert_eq!(warm_say(&sb, &rev, "probe").0, "clean");
    let attacks = [
        "prototype",
        "defineOnPrototype",
        "push",
        "parse",
        "random",
        "getter",
        "fixedGetter",
        "implicit",
        "indirectEval",
        "globalPrototype",
        "preventExtensions",
        "trim",
        "call",
        "generator",
        "iterator",
        "errorToString",
        "exec",
        "replaceJSON",
        "deleteJSON",
        "console",
        "promise",
        "everything",
    ];
    let mut leaks = vec![];
    for attack in attacks {
        let (during, _) = warm_say(&sb, &rev, &format!("attack {attack}"));
        assert!(!during.starts_with("no attack"), "{during}");
        let (after, warm) = warm_say(&sb, &rev, "probe");
        assert!(warm, "after {attack}: the probe ran on the warm instance");
        if after != "clean" {
            leaks.push(format!("{attack} (during: {during}) left: {after}"));
        }
    }
    assert!(leaks.is_empty(), "{leaks:#?}");
}

#[test]
fn a_methods_own_state_starts_anew_each_step() {
    let sb = one_warm_instance();
    let rev = Revision::new("mutator", &compile_source(MUTATOR).unwrap().bot);
    warm_say(&sb, &rev, "compat");
    for method in ["counter", "callee"] {
        for _ in 0..2 {
            assert_eq!(warm_say(&sb, &rev, method), ("n=1".to_string(), true));
        }
    }
}

#[test]
fn ordinary_javascript_still_works_with_built_ins_frozen() {
    let sb = one_warm_instance();
    let rev = Revision::new("mutator", &compile_source(MUTATOR).unwrap().bot);
    // Twice: the implicit global `i` of the first step is gone, and the second can make it again.
    for _ in 0..2 {
        assert_eq!(warm_say(&sb, &rev, "compat").0, "2,custom,E: x,F: y");
    }
}

#[test]
fn the_host_enforces_max_recursion_whatever_the_guest_believes() {
    let mut lying = example("chain");
    lying.max_recursion = 100;
    let rev = Revision::with_host_max_recursion("chain-lying", &lying, 3);
    match say(sandbox(), &rev, &fresh_session(), "five") {
        Err(SandboxError::Step(e)) => assert_eq!(e.to_string(), "Max Recursion of 3 is reached"),
        other => panic!("{other:?}"),
    }
    hello_still_answers(sandbox());
}

#[test]
fn a_failed_step_leaves_the_session_and_the_next_step_works() {
    let sb = sandbox();
    let rev = Revision::new("pizza", &example("pizza"));
    let r1 = say(sb, &rev, &fresh_session(), "I want pizza").unwrap();
    let before = r1.session.clone();
    let abuse = abuse_revision();
    assert!(say(sb, &abuse, &before, "spin").is_err());
    let r2 = block_on(sb.step(
        TENANT,
        &rev,
        &before,
        &Message::data(json!({"type": "pizza", "pizza": "veggie"})),
        offline(),
    ))
    .unwrap();
    assert_eq!(texts(&r2.result), vec!["How many? (1-9)"]);
}

/// The api time-out is the sandbox's own: a call its effects never answer is cut at 5 s.
#[test]
fn an_api_server_that_never_answers_is_cut_at_five_seconds() {
    let sb = sandbox();
    let hangs: Arc<dyn Effects> = Arc::new(StubEffects::answering(|_| Reply::Hang));
    let started = Instant::now();
    let r = block_on(sb.step(
        TENANT,
        &abuse_revision(),
        &fresh_session(),
        &Message::text("api http://api.example/slow"),
        hangs,
    ))
    .unwrap()
    .result;
    let took = started.elapsed();
    assert_eq!(texts(&r), vec!["result="]);
    assert!(
        took >= Duration::from_millis(4900) && took < Duration::from_secs(8),
        "took {took:?}"
    );
}

/// An api action's answer reaches the bot, and a refused call leaves its result empty.
#[test]
fn an_api_answer_reaches_the_bot_and_a_refusal_leaves_it_empty() {
    let answers: Arc<dyn Effects> = Arc::new(StubEffects::answering(|req| {
        if req.url == "http://api.example/x" {
            Reply::Answer(HttpResponse {
                status: 200,
                body: r#"{"a":1}"#.into(),
            })
        } else {
            Reply::Fail("address refused".into())
        }
    }));
    let say_with = |text: &str| {
        let out = block_on(sandbox().step(
            TENANT,
            &abuse_revision(),
            &fresh_session(),
            &Message::text(text),
            answers.clone(),
        ));
        texts(&out.unwrap().result)
    };
    assert_eq!(
        say_with("api http://api.example/x"),
        vec![r#"result={"a":1}"#]
    );
    assert_eq!(say_with("api http://10.0.0.1/x"), vec!["result="]);
}

#[test]
fn a_long_computation_hits_the_wall_clock_deadline() {
    let sb = sandbox_with(Limits {
        fuel: u64::MAX / 4,
        deadline: Duration::from_millis(300),
        ..Limits::default()
    });
    let m = aborted(&sb, &abuse_revision(), "spin");
    assert!(
        m.starts_with("method spin exceeded its deadline of 300 ms"),
        "{m}"
    );
    hello_still_answers(&sb);
}

#[test]
fn ten_thousand_nested_parentheses_overflow_the_guest_stack_only() {
    let sb = sandbox();
    let m = aborted(sb, &abuse_revision(), "nest");
    assert!(m.starts_with("method nest "), "{m}");
    assert!(m.contains("stack") || m.contains("limit"), "{m}");
    hello_still_answers(sb);
}

#[test]
fn a_full_pool_means_waiting_not_failing() {
    // Two live instances at most, eight conversations on eight revisions at once.
    let sb = Arc::new(
        Sandbox::new(SandboxConfig {
            slots: 2,
            warm_per_revision: 1,
            ..config(Limits::default())
        })
        .unwrap(),
    );
    let bot = example("hello");
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let sb = sb.clone();
            let rev = Revision::new(&format!("hello-{i}"), &bot);
            std::thread::spawn(move || {
                texts(&say(&sb, &rev, &fresh_session(), "hi").expect("no instantiation error"))
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), vec!["hi!"]);
    }
}

#[test]
fn limits_are_per_tenant() {
    let bot = compile_source(ABUSE).unwrap().bot;
    let sb = sandbox();
    // A tenant with a tiny budget cannot even start the JS engine; the default tenant can.
    let small = Revision::new("abuse-small", &bot).with_limits(Limits {
        fuel: 1_000_000,
        ..sb.limits().clone()
    });
    // (Every step of this bot runs JavaScript: its `loopcond` condition is outside the subset.)
    let m = aborted(sb, &small, "escape");
    assert!(m.ends_with("exceeded its fuel budget of 1000000"), "{m}");
    let normal = Revision::new("abuse-normal", &bot);
    assert!(say(sb, &normal, &fresh_session(), "escape").is_ok());
    let few_calls = Revision::new("abuse-calls", &bot).with_limits(Limits {
        max_host_calls: 3,
        ..sb.limits().clone()
    });
    assert_eq!(
        aborted(sb, &few_calls, "chatty"),
        "the step exceeded its cap of 3 host calls"
    );
}

#[test]
fn without_address_space_for_the_pool_it_falls_back_to_on_demand_allocation() {
    // Millions of slots cannot be reserved: the probe fails and on-demand allocation is used.
    let sb = Sandbox::new(SandboxConfig {
        slots: 50_000_000,
        warm_per_revision: 1,
        ..config(Limits::default())
    })
    .unwrap();
    assert!(!sb.pooling());
    hello_still_answers(&sb);
}

/// The live path (`step_json`): a conversation's session stays in the warm instance between
/// its steps and only its tag crosses; two conversations interleaved on one instance each
/// continue their own session; and the sessions are the native engine's.
#[test]
fn kept_sessions_continue_their_own_conversations() {
    use botbox_sandbox::SessionJson;
    let sb = sandbox_with(Limits::default());
    let bot = example("pizza");
    let rev = Revision::new("pizza-kept", &bot);
    let fresh = || SessionJson::new(serde_json::to_string(&fresh_session()).unwrap());
    let step = |s: &SessionJson, m: Message| {
        block_on(sb.step_json(TENANT, &rev, s, &m, offline())).unwrap()
    };
    let contexts = |s: &SessionJson| {
        let s: Session = serde_json::from_str(&s.json).unwrap();
        (s.current, s.states, s.contexes)
    };
    let (a, b) = (fresh(), fresh());
    let a = step(&a, Message::text("I want pizza"));
    let b = step(&b, Message::text("I want pizza"));
    assert!(a.session.tag != 0 && b.session.tag != 0 && a.session.tag != b.session.tag);
    let a2 = step(
        &a.session,
        Message::data(json!({"type": "pizza", "pizza": "pepperoni"})),
    );
    let b2 = step(
        &b.session,
        Message::data(json!({"type": "pizza", "pizza": "hawaii"})),
    );
    let a3 = step(&a2.session, Message::text("2"));
    let b3 = step(&b2.session, Message::text("3"));

    // The same conversations natively.
    let mut host = runtime_core::testing::OfflineHost::default();
    let mut native = |pizza: &str, qty: &str| {
        let mut s = fresh_session();
        for m in [
            Message::text("I want pizza"),
            Message::data(json!({"type": "pizza", "pizza": pizza})),
            Message::text(qty),
        ] {
            s = runtime_core::converse(&bot, &s, m, &mut host)
                .unwrap()
                .session;
        }
        (s.current, s.states, s.contexes)
    };
    assert_eq!(contexts(&a3.session), native("pepperoni", "2"));
    assert_eq!(contexts(&b3.session), native("hawaii", "3"));
    assert_eq!(a3.report.responses.len(), b3.report.responses.len());

    // A kept session serves one step: its old tag is sent as JSON, with the same result.
    let again = step(&a2.session, Message::text("2"));
    assert_eq!(contexts(&again.session), contexts(&a3.session));
    // A tag no instance holds is only a hint.
    let unknown = SessionJson {
        json: a2.session.json.clone(),
        tag: u64::MAX,
    };
    assert_eq!(
        contexts(&step(&unknown, Message::text("2")).session),
        contexts(&a3.session)
    );
}

/// A session too big to keep is not kept (tag 0), and a step that fails on a kept session
/// leaves the caller's JSON of it good for the next step.
#[test]
fn big_sessions_are_not_kept_and_failed_steps_fall_back_to_json() {
    use botbox_sandbox::SessionJson;
    let sb = sandbox_with(Limits::default());
    let rev = abuse_revision();
    let mut big = fresh_session();
    big.data = json!({"blob": "x".repeat(200 * 1024)});
    let out = block_on(sb.step_json(
        TENANT,
        &rev,
        &SessionJson::new(serde_json::to_string(&big).unwrap()),
        &Message::text("read"),
        offline(),
    ))
    .unwrap();
    assert_eq!(out.session.tag, 0, "a 200 KB session is not kept");
    let s: Session = serde_json::from_str(&out.session.json).unwrap();
    assert_eq!(s.data["blob"].as_str().unwrap().len(), 200 * 1024);

    let small = block_on(sb.step_json(
        TENANT,
        &rev,
        &SessionJson::new(serde_json::to_string(&fresh_session()).unwrap()),
        &Message::text("read"),
        offline(),
    ))
    .unwrap();
    assert_ne!(small.session.tag, 0);
    // The step fails (fuel) on the kept session; the instance is discarded.
    let err = block_on(sb.step_json(
        TENANT,
        &rev,
        &small.session,
        &Message::text("spin"),
        offline(),
    ))
    .unwrap_err();
    assert!(err.to_string().contains("fuel"), "{err}");
    let next = block_on(sb.step_json(
        TENANT,
        &rev,
        &small.session,
        &Message::text("read"),
        offline(),
    ))
    .unwrap();
    assert_eq!(next.report.responses[0].content.as_deref(), Some("clean"));
}

/// Effects whose api calls wait until the test lets them through: each call reports its URL
/// on a channel, then waits for a permit of its URL's gate. A call no one lets through never
/// answers; dropping it (cancellation) is counted.
struct Gated {
    entered: mpsc::UnboundedSender<String>,
    gates: Mutex<HashMap<String, Arc<Semaphore>>>,
    cancelled: AtomicUsize,
}

impl Gated {
    fn new() -> (Arc<Gated>, mpsc::UnboundedReceiver<String>) {
        let (entered, rx) = mpsc::unbounded_channel();
        let fx = Gated {
            entered,
            gates: Mutex::new(HashMap::new()),
            cancelled: AtomicUsize::new(0),
        };
        (Arc::new(fx), rx)
    }

    fn gate(&self, url: &str) -> Arc<Semaphore> {
        let mut gates = self.gates.lock().unwrap();
        gates
            .entry(url.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(0)))
            .clone()
    }

    /// Lets one call to `url` through.
    fn open(&self, url: &str) {
        self.gate(url).add_permits(1);
    }
}

/// Counts a call dropped before it answered.
struct Cancelled<'a>(&'a AtomicUsize, bool);

impl Drop for Cancelled<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Effects for Gated {
    fn now_ms(&self) -> i64 {
        1_700_000_000_000
    }
    fn random_u64(&self) -> u64 {
        4
    }
    fn http<'a>(
        &'a self,
        req: &'a HttpRequest,
        _: &'a Limits,
    ) -> EffectFuture<'a, Result<HttpResponse, String>> {
        Box::pin(async move {
            let gate = self.gate(&req.url);
            let mut guard = Cancelled(&self.cancelled, false);
            let _ = self.entered.send(req.url.clone());
            let _permit = gate.acquire().await.unwrap();
            guard.1 = true;
            Ok(HttpResponse {
                status: 200,
                body: json!({"url": req.url}).to_string(),
            })
        })
    }
    fn nl_predict<'a>(&'a self, _: NlRequest<'a>) -> EffectFuture<'a, Result<Json, String>> {
        Box::pin(std::future::ready(Err("no NL here".into())))
    }
}

/// One step of a fresh conversation, as a future the step threads can run.
fn step(
    sb: &Arc<Sandbox>,
    tenant: &'static str,
    rev: &Revision,
    text: &str,
    fx: &Arc<Gated>,
) -> impl Future<Output = Result<ConverseResult, SandboxError>> + Send + 'static {
    let (sb, rev, fx) = (sb.clone(), rev.clone(), fx.clone());
    let message = Message::text(text);
    async move {
        sb.step(tenant, &rev, &fresh_session(), &message, fx)
            .await
            .map(|o| o.result)
    }
}

/// Fails, instead of hanging, when what a test waits for never comes.
async fn watchdog<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .unwrap_or_else(|_| panic!("{what} never happened"))
}

fn lenient() -> Limits {
    Limits::default()
}

fn hello_revision() -> Revision {
    Revision::new("hello", &example("hello"))
}

/// A step waiting on an api call holds no CPU slot, so with a single slot another
/// tenant's step still runs; the waiting step then finishes with its api result.
#[test]
fn a_step_waiting_on_an_api_call_holds_no_cpu_slot() {
    let sb = Arc::new(
        Sandbox::new(SandboxConfig {
            cpu_slots: 1,
            ..config(lenient())
        })
        .unwrap(),
    );
    let (fx, mut entered) = Gated::new();
    block_on(async {
        let a = spawn(
            Lane::Main,
            step(&sb, "a", &abuse_revision(), "api http://a/", &fx),
        );
        assert_eq!(entered.recv().await.unwrap(), "http://a/");
        let b = spawn(Lane::Main, step(&sb, "b", &hello_revision(), "hi", &fx));
        let b = watchdog("B's step while A waits", b).await;
        assert_eq!(texts(&b.unwrap().unwrap()), vec!["hi!"]);
        assert!(!a.is_finished(), "A still waits for its api call");
        fx.open("http://a/");
        let a = a.await.unwrap().unwrap();
        assert_eq!(texts(&a), vec![r#"result={"url":"http://a/"}"#]);
    });
}

/// With a cap of two steps per tenant, a tenant's third step waits until one of
/// its two finishes, while another tenant's step runs meanwhile.
#[test]
fn a_tenant_over_its_step_cap_waits_and_other_tenants_do_not() {
    let sb = Arc::new(
        Sandbox::new(SandboxConfig {
            steps_per_tenant: 2,
            ..config(lenient())
        })
        .unwrap(),
    );
    let (fx, mut entered) = Gated::new();
    let abuse = abuse_revision();
    block_on(async {
        let a1 = spawn(Lane::Main, step(&sb, "a", &abuse, "api http://a1/", &fx));
        let a2 = spawn(Lane::Main, step(&sb, "a", &abuse, "api http://a2/", &fx));
        let mut first = vec![entered.recv().await.unwrap(), entered.recv().await.unwrap()];
        first.sort();
        assert_eq!(first, ["http://a1/", "http://a2/"]);
        let a3 = spawn(Lane::Main, step(&sb, "a", &abuse, "api http://a3/", &fx));
        watchdog("A's third step waiting", async {
            while sb.tenant_steps("a").waiting == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert_eq!(
            sb.tenant_steps("a"),
            TenantSteps {
                in_flight: 2,
                waiting: 1
            }
        );
        let b = spawn(Lane::Main, step(&sb, "b", &hello_revision(), "hi", &fx));
        let b = watchdog("B's step while A is at its cap", b).await;
        assert_eq!(texts(&b.unwrap().unwrap()), vec!["hi!"]);
        // A's third step is still waiting: it has not reached its api call.
        assert!(entered.try_recv().is_err());
        assert_eq!(sb.tenant_steps("a").waiting, 1);
        fx.open("http://a1/");
        assert_eq!(
            texts(&a1.await.unwrap().unwrap()),
            vec![r#"result={"url":"http://a1/"}"#]
        );
        assert_eq!(entered.recv().await.unwrap(), "http://a3/");
        fx.open("http://a2/");
        fx.open("http://a3/");
        assert_eq!(
            texts(&a2.await.unwrap().unwrap()),
            vec![r#"result={"url":"http://a2/"}"#]
        );
        assert_eq!(
            texts(&a3.await.unwrap().unwrap()),
            vec![r#"result={"url":"http://a3/"}"#]
        );
        assert_eq!(sb.tenant_steps("a"), TenantSteps::default());
    });
}

/// An api call, then an endless loop.
const BURNER: &str = r#"
name: burner
methods:
  spin(): "while (true) {}"
flows:
  f:
    intents:
      any: {initial: true, type: text}
    states:
      s:
        initial: true
        transitions:
          burn: "true"
      burn:
        end: true
        action:
          - {name: api, options: {uri: "http://burner/"}}
          - {name: method, method: spin}
"#;

/// A guest burning CPU yields its slot at every fuel yield, so with a single slot
/// another tenant's short step finishes while the burner is still running (it would run
/// until its deadline of a minute).
#[test]
fn a_guest_burning_cpu_yields_its_slot_to_other_tenants() {
    let sb = Arc::new(
        Sandbox::new(SandboxConfig {
            cpu_slots: 1,
            ..config(lenient())
        })
        .unwrap(),
    );
    let burner =
        Revision::new("burner", &compile_source(BURNER).unwrap().bot).with_limits(Limits {
            fuel: u64::MAX / 4,
            deadline: Duration::from_secs(60),
            ..lenient()
        });
    let (fx, mut entered) = Gated::new();
    fx.open("http://burner/");
    block_on(async {
        let a = spawn(Lane::Main, step(&sb, "a", &burner, "go", &fx));
        // Past its api call, A only burns CPU.
        assert_eq!(entered.recv().await.unwrap(), "http://burner/");
        let b = spawn(Lane::Main, step(&sb, "b", &hello_revision(), "hi", &fx));
        let b = watchdog("B's step while A burns", b).await;
        assert_eq!(texts(&b.unwrap().unwrap()), vec!["hi!"]);
        assert!(!a.is_finished(), "B finished while A still burns");
        // Dropping a step mid-guest discards its instance.
        a.abort();
        assert!(a.await.unwrap_err().is_cancelled());
    });
    hello_still_answers(&sb);
}

/// The wall time of a host call counts against the step's deadline. An api call
/// that never answers fails the step at its 300 ms deadline, not at the api time-out (an
/// hour here), and the call is cancelled.
#[test]
fn time_waiting_in_an_api_call_counts_against_the_deadline() {
    let sb = sandbox();
    let rev = abuse_revision().with_limits(Limits {
        deadline: Duration::from_millis(300),
        http_timeout: Duration::from_secs(3600),
        ..sb.limits().clone()
    });
    let (fx, mut entered) = Gated::new();
    let out = block_on(watchdog(
        "the deadline in an api call",
        sb.step(
            TENANT,
            &rev,
            &fresh_session(),
            &Message::text("api http://never/"),
            fx.clone(),
        ),
    ));
    match out {
        Err(SandboxError::Step(StepError::Aborted(m))) => assert!(
            m.starts_with("the step exceeded its deadline of 300 ms (ran "),
            "{m}"
        ),
        other => panic!("expected the deadline, got {other:?}"),
    }
    assert_eq!(entered.try_recv().unwrap(), "http://never/");
    assert_eq!(fx.cancelled.load(Ordering::SeqCst), 1);
    hello_still_answers(sb);
}
