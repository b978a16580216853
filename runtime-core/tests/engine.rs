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

// ---------------------------------------------------------------------------------------------
// Real Kata bots run unmodified.

/// The fallback flow of the official samples: one state that is both initial and end, with an
/// action and a fallback self-transition; and a small one-shot flow opened by a command.
const ONE_SHOT: &str = r#"
name: one-shot
flows:
  fallback:
    fallback: true
    intents:
      fallbackIntent:
        fallback: true
    states:
      init:
        initial: true
        end: true
        transitions:
          init:
            fallback: true
        action:
          name: sorry
    actions:
      sorry:
        type: text
        options:
          text: "Sorry I don't understand."
  order:
    intents:
      order:
        initial: true
        type: text
        condition: "content == 'order'"
      size:
        type: text
    states:
      init:
        initial: true
        transitions:
          ask:
            fallback: true
      ask:
        transitions:
          done:
            fallback: true
        action: askSize
      done:
        end: true
        action:
          - name: text
            options:
              text: "Saving."
          - name: command
            options:
              command: saveData
    actions:
      askSize:
        type: text
        options:
          text: "Which size?"
  saveData:
    intents:
      saveData:
        initial: true
        type: command
        condition: "content == 'saveData'"
    states:
      toDelivery:
        initial: true
        end: true
        transitions:
          toDelivery:
            fallback: true
        action:
          name: saved
    actions:
      saved:
        type: text
        options:
          text: "Data have been saved."
"#;

#[test]
fn an_initial_end_state_takes_its_transition_runs_its_actions_and_ends_the_flow() {
    let b = bot(ONE_SHOT);
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "blah");
    assert_eq!(texts(&r1), vec!["Sorry I don't understand."]);
    assert_eq!(r1.session.current, None, "the fallback flow closed");
    assert!(r1.session.states.is_empty());
    let meta = r1.session.meta.clone().unwrap();
    assert_eq!(
        (
            meta.last_flow.as_deref(),
            meta.last_state.as_deref(),
            meta.end
        ),
        (Some("fallback"), Some("init"), true)
    );
    // The fallback flow does not swallow later messages: another flow's initial intent opens.
    let r2 = say(&b, &r1.session, &mut h, "blah again");
    assert_eq!(texts(&r2), vec!["Sorry I don't understand."]);
    let r3 = say(&b, &r2.session, &mut h, "order");
    assert_eq!(texts(&r3), vec!["Which size?"]);
    assert_eq!(r3.session.current.as_deref(), Some("order"));
    // A command opens the one-shot flow, which answers and closes in the same step.
    let r4 = say(&b, &r3.session, &mut h, "large");
    assert_eq!(texts(&r4), vec!["Saving.", "Data have been saved."]);
    assert_eq!(r4.session.current, None);
    assert!(r4.session.history.is_empty());
}

#[test]
fn an_initial_end_state_without_a_chosen_transition_closes_without_actions() {
    let b = bot(&ONE_SHOT.replace(
        "        transitions:\n          init:\n            fallback: true\n",
        "",
    ));
    let mut h = host();
    let r = say(&b, &fresh_session(), &mut h, "blah");
    assert!(r.responses.is_empty(), "{:?}", texts(&r));
    assert_eq!(
        r.session.current, None,
        "a flow never stays open at an end state"
    );
    assert!(r.session.states.is_empty() && r.session.contexes.is_empty());
    let r = say(&b, &r.session, &mut h, "order");
    assert_eq!(texts(&r), vec!["Which size?"]);
}

/// The buttonbot shape: a wrong answer's state lists `reenter` as an action, so the question
/// is asked again without user input.
const TRIVIA: &str = r#"
name: trivia
flows:
  trivia:
    intents:
      start:
        initial: true
        type: text
        condition: "content == 'quiz'"
      right:
        type: data
        condition: "payload.answer == 'b'"
      answer:
        type: data
      reenter:
        type: command
        condition: "content == 'reenter'"
    states:
      init:
        initial: true
        transitions:
          ask:
            condition: "intent == 'start'"
      ask:
        action: question
        transitions:
          right:
            condition: "intent == 'right'"
          wrong:
            fallback: true
            mapping:
              context.tries: "(context.tries || 0) + 1"
      right:
        end: true
        action:
          - name: text
            options:
              text: "Right after $(context.tries || 0) wrong."
      wrong:
        action:
          - name: text
            options:
              text: "Not that one."
          - name: reenter
        transitions:
          ask:
            fallback: true
    actions:
      question:
        type: text
        options:
          text: "Which is b?"
"#;

#[test]
fn a_reenter_state_action_asks_the_question_again_without_user_input() {
    let b = bot(TRIVIA);
    let compiled = compile_source(TRIVIA).unwrap();
    assert!(
        compiled.warnings.is_empty(),
        "reenter is a known action: {:?}",
        compiled.warnings
    );
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "quiz");
    assert_eq!(texts(&r1), vec!["Which is b?"]);
    let r2 = converse(
        &b,
        &r1.session,
        Message::data(json!({"answer": "a"})),
        &mut h,
    )
    .unwrap();
    assert_eq!(texts(&r2), vec!["Not that one.", "Which is b?"]);
    assert!(r2.errors.is_empty(), "{:?}", r2.errors);
    assert_eq!(r2.session.state_of("trivia"), Some("ask"));
    let reenter = &r2.messages[1];
    assert_eq!(
        (reenter.content.as_deref(), reenter.intent.as_deref()),
        (Some("reenter"), Some("reenter"))
    );
    let r3 = converse(
        &b,
        &r2.session,
        Message::data(json!({"answer": "b"})),
        &mut h,
    )
    .unwrap();
    assert_eq!(texts(&r3), vec!["Right after 1 wrong."]);
    assert_eq!(r3.session.current, None);
}

#[test]
fn a_reenter_action_goes_only_to_its_own_flow() {
    // Without a reenter intent nothing catches it: no other flow, no fallback flow, no error.
    let src = TRIVIA.replace(
        "      reenter:\n        type: command\n        condition: \"content == 'reenter'\"\n",
        "",
    ) + "  other:\n    fallback: true\n    intents:\n      any:\n        fallback: true\n    states:\n      s:\n        initial: true\n        end: true\n        transitions:\n          s:\n            fallback: true\n        action:\n          - name: text\n            options:\n              text: fallback\n";
    let b = bot(&src);
    let mut h = host();
    let r1 = say(&b, &fresh_session(), &mut h, "quiz");
    let r2 = converse(
        &b,
        &r1.session,
        Message::data(json!({"answer": "a"})),
        &mut h,
    )
    .unwrap();
    assert_eq!(texts(&r2), vec!["Not that one."]);
    assert_eq!(r2.session.state_of("trivia"), Some("wrong"));
    assert!(r2.errors.is_empty(), "{:?}", r2.errors);
}

#[test]
fn a_fallback_flow_whose_only_intent_is_text_catches_unmatched_text() {
    // A community bot's fallback flow: one `type: text` intent, no `fallback: true`.
    let b = bot(r#"
name: text-fallback
flows:
  greet:
    intents:
      hi:
        initial: true
        condition: "content == 'hi'"
    states:
      s:
        initial: true
        end: true
        transitions:
          s:
            fallback: true
        action:
          - name: text
            options:
              text: "Hello!"
  fallback:
    fallback: true
    intents:
      anyText:
        type: text
    states:
      init:
        initial: true
        transit:
          context.said: content
        transitions:
          sorry:
            condition: "intent == 'anyText'"
            fallback: true
      sorry:
        end: true
        action:
          - name: text
            options:
              text: "I noted: $(context.said)"
"#);
    let mut h = host();
    let r = say(&b, &fresh_session(), &mut h, "what is this");
    assert_eq!(texts(&r), vec!["I noted: what is this"]);
    assert_eq!(r.session.current, None);
    let r = say(&b, &r.session, &mut h, "hi");
    assert_eq!(
        texts(&r),
        vec!["Hello!"],
        "other flows' initial intents come first"
    );
    // Its intent takes text only: a data message matches nothing.
    let r = converse(&b, &r.session, Message::data(json!({"x": 1})), &mut h).unwrap();
    assert!(r.responses.is_empty());
}

#[test]
fn only_a_template_that_is_exactly_one_reference_keeps_its_type() {
    let b = bot(r#"
name: spaces
flows:
  menu:
    intents:
      show:
        initial: true
        condition: "content == 'menu'"
    states:
      s:
        initial: true
        end: true
        transitions:
          s:
            fallback: true
        action:
          - name: text
            options:
              data: {greet: "Halo", n: 3}
              template: "$[greet] "
          - name: template
            options:
              type: carousel
              data:
                - {title: "Satu", description: "Deskripsi satu", price: 10}
              template:
                title: "$[title]"
                text: "$[description] "
                price: "$[price]"
                label: " $[price]"
                actions: []
"#);
    let mut h = host();
    let r = say(&b, &fresh_session(), &mut h, "menu");
    assert_eq!(r.responses[0].content.as_deref(), Some("Halo "));
    let card = &r.responses[1].payload.as_ref().unwrap()["items"][0];
    assert_eq!(card["text"], "Deskripsi satu ");
    assert_eq!(card["price"], 10, "an exact reference keeps its JSON type");
    assert_eq!(card["label"], " 10");
    assert_eq!(card["title"], "Satu");
}

#[test]
fn nlus_that_cannot_run_are_named_in_warnings() {
    let c = compile_source(
        r#"
name: nlus
nlus:
  qisg:
    type: verstandClassifier
    options: {model: m1}
  ner:
    type: verstandTagger
  shop:
    type: nl
    options: {nluId: "alice:shop"}
  broken:
    type: nl
    options: {output: value}
flows:
  f:
    intents:
      q:
        initial: true
        classifier: {nlu: qisg, match: question}
      w:
        classifier: {nlu: witIntent}
    states:
      s:
        initial: true
        transitions:
          s:
            fallback: true
"#,
    )
    .unwrap();
    let w: Vec<String> = c.warnings.iter().map(|p| p.to_string()).collect();
    let has = |path: &str, words: &[&str]| {
        w.iter()
            .any(|x| x.starts_with(path) && words.iter().all(|wd| x.contains(wd)))
    };
    assert!(
        has(
            "nlus.qisg.type",
            &["\"qisg\"", "verstandClassifier", "cannot run"]
        ),
        "{w:#?}"
    );
    assert!(
        has("nlus.ner.type", &["\"ner\"", "verstandTagger"]),
        "{w:#?}"
    );
    assert!(
        has("nlus.broken.options.nluId", &["\"broken\"", "nluId"]),
        "{w:#?}"
    );
    assert!(
        has("flows.f.intents.w.classifier", &["witIntent", "Wit.ai"]),
        "{w:#?}"
    );
    assert!(!w.iter().any(|x| x.starts_with("nlus.shop")), "{w:#?}");
    // Each definition is named once, not at every use.
    assert_eq!(w.iter().filter(|x| x.contains("\"qisg\"")).count(), 1);
    // Whether an nluId can run depends on accounts, which the host checks at push time.
    let doc: Json = serde_yaml_doc(
        "nlus: {shop: {type: nl, options: {nluId: 'alice:shop'}}, kw: {type: keyword}}\nflows: {f: {nlus: {own: {type: nl, options: {nluId: 'bob:x'}}}}}",
    );
    let refs = runtime_core::compile::nl_references(&doc);
    assert_eq!(
        refs,
        [
            (
                "nlus.shop.options.nluId".to_string(),
                "shop".to_string(),
                "alice:shop".to_string()
            ),
            (
                "flows.f.nlus.own.options.nluId".to_string(),
                "own".to_string(),
                "bob:x".to_string()
            ),
        ]
    );
    let w =
        runtime_core::compile::nl_unavailable_warning("p", "shop", "alice:shop", "it is private");
    assert!(
        w.message.contains("\"alice:shop\": it is private"),
        "{}",
        w.message
    );
}

fn serde_yaml_doc(src: &str) -> Json {
    runtime_core::source::parse_document(src).unwrap().0
}

/// Rules of the Kata docs' concept pages that no example bot pins down (KATA_RULES.md).
#[test]
fn classifier_lists_inactive_flows_and_meta_context() {
    let src = r#"
name: rules
nlus:
  colors: {type: keyword, options: {keywords: {color: [red, blue]}}}
  shapes: {type: regex, options: {regex: "square|circle"}}
flows:
  pick:
    intents:
      thing:
        initial: true
        type: text
        classifier:
          - {nlu: colors, match: color}
          - {nlu: shapes}
    states:
      init:
        initial: true
        transitions:
          said:
            fallback: true
      said:
        end: true
        action:
          - name: text
            options:
              text: "$(content) init=$(context.$init) flow=$(context.$flow) state=$(context.$state) user=$(context.$userId) key=$(context.$dataKey)"
  off:
    active: false
    intents:
      any:
        initial: true
        type: text
    states:
      s:
        initial: true
        end: true
        transitions:
          s:
            fallback: true
        action:
          - name: text
            options:
              text: never
"#;
    let b = bot(src);
    let mut h = host();
    let mut s = fresh_session();
    s.user_id = Some("u-1".into());
    s.data_key = Some("shared".into());
    // Either classifier of the list matches (OR).
    let r = say(&b, &s, &mut h, "red");
    assert_eq!(
        texts(&r),
        vec!["red init=true flow=pick state=said user=u-1 key=shared"]
    );
    let r = say(&b, &s, &mut h, "a circle");
    assert_eq!(texts(&r).len(), 1);
    // Neither: the inactive flow, whose intent takes any text, is never selected.
    let r = say(&b, &s, &mut h, "green");
    assert!(r.responses.is_empty(), "{:?}", texts(&r));
}

/// `$(cms.…)` reads the CMS pages the host set on the bot, in options and in expressions;
/// a path the CMS lacks reads as empty, like any missing variable, and is a step error;
/// without a CMS, `cms` is an empty object.
#[test]
fn cms_values_are_read_where_variables_are() {
    let src = "
name: cms
flows:
  main:
    fallback: true
    intents:
      any: {fallback: true}
    states:
      init:
        initial: true
        transitions:
          greet: {fallback: true}
      greet:
        end: true
        action:
          - name: text
            options: {text: 'says $(cms.home.greeting.text.value)'}
          - name: text
            condition: 'cms.home.greeting.open.value == true'
            options: {text: 'open'}
          - name: text
            options: {text: 'missing [$(cms.home.nope.text.value)]'}
";
    let mut b = bot(src);
    let s = fresh_session();
    let mut h = host();
    assert_eq!(texts(&say(&b, &s, &mut h, "hi")), ["says ", "missing []"]);
    b.cms = json!({"home": {"greeting": {
        "text": {"type": "text", "value": "Welcome!"},
        "open": {"type": "toggle", "value": true}
    }}});
    let r = say(&b, &s, &mut h, "hi");
    assert_eq!(texts(&r), ["says Welcome!", "open", "missing []"]);
    // The missing path is a step error for the author; the paths present are not.
    assert_eq!(
        r.errors,
        [
            "cms.home.nope.text.value is not in the CMS content this bot runs with (a deployment's CMS revision; cms.yml in a local test); it reads as empty"
        ]
    );
    // Not part of the stored form: the host sets it per deployment.
    let stored = serde_json::to_value(bot(src)).unwrap();
    assert!(stored.get("cms").is_none());
}

/// The CMS content a bot names, each at its place: in options, conditions and methods, once
/// per place; `context.cms.a.b.c` and `xcms.a.b.c` are not the CMS.
#[test]
fn cms_references_are_found_at_their_places() {
    let doc = json!({
        "flows": {"main": {"states": {"s": {"action": [
            {"name": "text", "options": {"text": "$(cms.home.greeting.text.value) and $(cms.home.greeting.text.value)"}},
            {"name": "text", "condition": "cms.shop.hours.open.value == true", "options": {"text": "x"}},
            {"name": "text", "options": {"text": "$(context.cms.a.b.c) $(xcms.a.b.c)"}}
        ]}}}},
        "methods": {"m(ctx)": "return cms.faq.page.answer.value;"}
    });
    let refs = runtime_core::compile::cms_references(&doc);
    let found: Vec<(String, String)> = refs.iter().map(|(p, r)| (p.clone(), r.join("."))).collect();
    assert_eq!(
        found,
        [
            (
                "flows.main.states.s.action[0].options.text".into(),
                "home.greeting.text".into()
            ),
            (
                "flows.main.states.s.action[1].condition".into(),
                "shop.hours.open".into()
            ),
            ("methods.m(ctx)".into(), "faq.page.answer".into()),
        ]
    );
}

/// A whole `$(…)` that names a list of texts is a list of text variants: an FAQ's answers
/// (`cms.faq.<label>.answers`) reply with one of them.
#[test]
fn an_faq_answers_with_one_of_its_answers() {
    let src = "
name: faq
flows:
  main:
    fallback: true
    intents:
      any: {fallback: true}
    states:
      init:
        initial: true
        transitions:
          answer: {fallback: true}
      answer:
        end: true
        action:
          name: text
          options: {text: '$(cms.faq.hours.answers)'}
";
    let mut b = bot(src);
    b.cms = json!({"faq": {"hours": {"questions": ["when are you open"], "answers": ["9 to 5", "nine to five"]}}});
    let s = fresh_session();
    let mut h = host();
    let mut seen = std::collections::BTreeSet::new();
    for start in 0..8 {
        // Each step draws other random numbers too: vary where the draws start.
        h.rng = start;
        let t = texts(&say(&b, &s, &mut h, "when do you open?"));
        assert_eq!(t.len(), 1);
        seen.insert(t[0].clone());
    }
    let both: std::collections::BTreeSet<String> =
        ["9 to 5".to_string(), "nine to five".to_string()].into();
    assert_eq!(seen, both);
}
