//! Engine rules that the example bots do not pin down on their own.

use runtime_core::host::{Host, HostError, HttpRequest, HttpResponse, JsCall, JsOutcome};
use runtime_core::session::ScheduleOp;
use runtime_core::testing::fresh_session;
use runtime_core::{
    CompiledBot, ConverseResult, Message, Session, StepError, compile_source, converse,
};
use serde_json::{Value as Json, json};

/// A host without JavaScript or network: a settable clock and counting randomness.
struct Plain {
    now: i64,
    rng: u64,
    moves_cap: Option<u32>,
}

impl Host for Plain {
    fn now_ms(&mut self) -> i64 {
        self.now
    }
    fn random_u64(&mut self) -> u64 {
        self.rng += 1;
        self.rng
    }
    fn http(&mut self, _: &HttpRequest) -> Result<HttpResponse, HostError> {
        Err(HostError::Failed("no network".into()))
    }
    fn nl_predict(&mut self, _: &str, _: &str, _: &Json) -> Result<Json, HostError> {
        Ok(json!({"intent": [{"type": "trait", "score": 0.9, "value": "yes", "label": "yes"}]}))
    }
    fn js(&mut self, _: JsCall<'_>) -> Result<JsOutcome, HostError> {
        Err(HostError::Failed("no JavaScript here".into()))
    }
    fn state_moved(&mut self, moves: u32) -> Result<(), HostError> {
        match self.moves_cap {
            Some(cap) if moves > cap => {
                Err(HostError::Abort(format!("host counted {moves} moves")))
            }
            _ => Ok(()),
        }
    }
}

fn bot(src: &str) -> CompiledBot {
    compile_source(src).unwrap_or_else(|e| panic!("{e}")).bot
}

fn host() -> Plain {
    Plain {
        now: 1_000_000,
        rng: 0,
        moves_cap: None,
    }
}

fn say(b: &CompiledBot, s: &Session, h: &mut Plain, text: &str) -> ConverseResult {
    converse(b, s, Message::text(text), h).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn texts(r: &ConverseResult) -> Vec<String> {
    r.responses
        .iter()
        .filter_map(|x| x.content.clone())
        .collect()
}

const CHAIN: &str = include_str!("../../examples/chain/bot.yml");

#[test]
fn max_recursion_fails_the_step_and_raising_it_fixes_it() {
    let b = bot(CHAIN);
    let mut h = host();
    let s = fresh_session();
    assert_eq!(
        converse(&b, &s, Message::text("five"), &mut h).unwrap_err(),
        StepError::MaxRecursion(3)
    );
    let raised = bot(&CHAIN.replace("name: chain", "name: chain\nconfig: {maxRecursion: 10}"));
    let r = say(&raised, &s, &mut h, "five");
    assert_eq!(texts(&r), vec!["Reached the end."]);
    let custom = bot(&CHAIN.replace("name: chain", "name: chain\nconfig: {maxRecursion: 4}"));
    assert_eq!(
        converse(&custom, &s, Message::text("five"), &mut h)
            .unwrap_err()
            .to_string(),
        "Max Recursion of 4 is reached"
    );
}

#[test]
fn the_host_can_abort_on_its_own_move_count() {
    let b = bot(&CHAIN.replace("name: chain", "name: chain\nconfig: {maxRecursion: 10}"));
    let mut h = Plain {
        moves_cap: Some(2),
        ..host()
    };
    let err = converse(&b, &fresh_session(), Message::text("five"), &mut h).unwrap_err();
    assert_eq!(err, StepError::Aborted("host counted 3 moves".into()));
}

const QUIZ: &str = include_str!("../../examples/quiz/bot.yml");

#[test]
fn a_volatile_flow_is_closed_not_stacked() {
    let b = bot(&QUIZ.replace(
        "  quiz:\n    intents:",
        "  quiz:\n    volatile: true\n    intents:",
    ));
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "quiz");
    let r2 = say(&b, &r1.session, &mut h, "help");
    assert_eq!(texts(&r2), vec!["Help text"]);
    assert!(r2.session.history.is_empty());
    assert!(r2.session.contexes.get("quiz").is_none());
    let r3 = say(&b, &r2.session, &mut h, "4");
    assert!(
        r3.responses.is_empty(),
        "the quiz is gone: {:?}",
        texts(&r3)
    );
}

#[test]
fn a_stacked_flow_resumes_with_a_reenter_message() {
    let b = bot(QUIZ);
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "quiz");
    let r2 = say(&b, &r1.session, &mut h, "help");
    let kinds: Vec<(String, Option<String>)> = r2
        .messages
        .iter()
        .map(|m| (m.content.clone().unwrap_or_default(), m.intent.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("help".into(), Some("help".into())),
            ("reenter".into(), Some("reenter".into()))
        ]
    );
    assert_eq!(r2.responses[1].ref_id, r2.messages[1].id);
}

#[test]
fn expired_flows_close_before_selection() {
    let b = bot(&QUIZ.replace(
        "  quiz:\n    intents:",
        "  quiz:\n    expire: 60000\n    intents:",
    ));
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "quiz");
    h.now += 30_000;
    let r2 = say(&b, &r1.session, &mut h, "4");
    assert_eq!(texts(&r2), vec!["Correct!"]);
    let r1 = say(&b, &fresh_session(), &mut h, "quiz");
    h.now += 60_001;
    let r3 = say(&b, &r1.session, &mut h, "4");
    assert!(r3.responses.is_empty());
    assert_eq!(r3.session.current, None);
}

const MEMO: &str = r#"
name: memo
flows:
  memo:
    intents:
      set: {initial: true, condition: "content.startsWith('set ')"}
      get: {condition: "content == 'get'"}
    states:
      idle:
        initial: true
        float:
          condition: "intent == 'set'"
          mapping:
            context.otp: "({code: content.slice(4), invalidate: context.$now + 1000})"
            context.keep: "'yes'"
        transitions:
          show: "intent == 'get'"
        action: {name: text, options: {text: "stored"}}
      show:
        action: {name: text, options: {text: "otp=$(context.otp.code) keep=$(context.keep)"}}
        transitions:
          show: "intent == 'get'"
"#;

#[test]
fn invalidate_removes_context_entries_at_their_time() {
    let b = bot(MEMO);
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "set 42");
    let r2 = say(&b, &r1.session, &mut h, "get");
    assert_eq!(texts(&r2), vec!["otp=42 keep=yes"]);
    h.now += 1001;
    let r3 = say(&b, &r2.session, &mut h, "get");
    assert_eq!(texts(&r3), vec!["otp= keep=yes"]);
}

#[test]
fn a_failed_step_leaves_the_session_as_it_was() {
    let b = bot(CHAIN);
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "nothing matches");
    let before = r1.session.clone();
    assert!(converse(&b, &before, Message::text("start"), &mut h).is_err());
    assert_eq!(before, r1.session);
}

#[test]
fn transition_priority_beats_declaration_order_and_floats_come_after_own() {
    let b = bot(r#"
name: prio
flows:
  f:
    intents:
      any: {initial: true, fallback: true}
      x: {initial: true, condition: "content == 'x'"}
    states:
      s:
        initial: true
        transitions:
          low: "true"
          high: {condition: "true", priority: 5}
      low: {end: true, action: {name: text, options: {text: low}}}
      high: {end: true, action: {name: text, options: {text: high}}}
      floaty:
        end: true
        float: {condition: "true", priority: 5}
        action: {name: text, options: {text: float}}
"#);
    let mut h = host();
    assert_eq!(texts(&say(&b, &fresh_session(), &mut h, "x")), vec!["high"]);
}

#[test]
fn schedules_become_host_operations() {
    let b = bot(r#"
name: sched
timezone: 7
flows:
  f:
    intents:
      a: {initial: true, condition: "content == 'remind'"}
      r: {initial: true, condition: "content == 'stop'"}
    states:
      s:
        initial: true
        transitions: {add: "intent == 'a'", rm: "intent == 'r'"}
      add:
        end: true
        action:
          - name: schedule
            options: {id: r1, command: add, message: {type: command, content: tick}, start: "2030-01-01 07:00:00", end: "2030-01-01 07:05:00", freqType: minute, freqInterval: 1}
      rm:
        end: true
        action: {name: schedule, options: {id: r1, command: remove}}
"#);
    let mut h = host();
    let r = say(&b, &fresh_session(), &mut h, "remind");
    assert!(r.responses.is_empty());
    // 07:00 at UTC+7 is 00:00 UTC.
    assert_eq!(
        r.schedules,
        vec![ScheduleOp::Add {
            id: "r1".into(),
            message: json!({"type": "command", "content": "tick"}),
            start: 1_893_456_000_000,
            end: Some(1_893_456_300_000),
            every: Some(60_000)
        }]
    );
    assert_eq!(
        say(&b, &fresh_session(), &mut h, "stop").schedules,
        vec![ScheduleOp::Remove { id: "r1".into() }]
    );
}

#[test]
fn unknown_actions_and_throwing_conditions_are_user_errors_not_failures() {
    let b = bot(r#"
name: errs
flows:
  f:
    intents:
      a: {initial: true, condition: "content == 'go'"}
    states:
      s:
        initial: true
        transitions: {t: "intent == 'a'"}
      t:
        end: true
        action:
          - nonsense
          - {name: text, condition: "context.missing.deeper", options: {text: never}}
          - {name: text, options: {text: "still here"}}
"#);
    let mut h = host();
    let r = say(&b, &fresh_session(), &mut h, "go");
    assert_eq!(texts(&r), vec!["still here"]);
    assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
    assert!(
        r.errors[1].contains("Cannot read properties of undefined (reading 'deeper')"),
        "{:?}",
        r.errors
    );
}

#[test]
fn nl_classifier_with_threshold_and_match() {
    let b = bot(r#"
name: nl
nlus:
  model: {type: nl, options: {nluId: "me:model", output: value, threshold: 0.5}}
flows:
  f:
    intents:
      yes: {initial: true, classifier: {nlu: model, match: "yes"}, attributes: {answer: {nlu: model, path: "intent.0"}}}
    states:
      s:
        initial: true
        transitions: {t: {condition: "intent == 'yes'", mapping: {context.a: attributes.answer}}}
      t:
        end: true
        action: {name: text, options: {text: "answer=$(context.a)"}}
"#);
    let mut h = host();
    assert_eq!(
        texts(&say(&b, &fresh_session(), &mut h, "sure")),
        vec!["answer=yes"]
    );
}

#[test]
fn no_matching_flow_changes_only_the_timestamp() {
    let b = bot(QUIZ);
    let mut h = host();
    let s = fresh_session();
    let r = say(&b, &s, &mut h, "unrelated");
    assert!(r.responses.is_empty());
    let mut after = r.session.clone();
    after.timestamp = s.timestamp;
    after.updated_at = s.updated_at;
    after.created_at = s.created_at;
    after.session_start = s.session_start;
    assert_eq!(after, s);
}
