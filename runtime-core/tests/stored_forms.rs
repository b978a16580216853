//! The stored forms' versions (compiled bots, sessions) and the bounds that keep stored
//! schedules' arithmetic safe.

use runtime_core::model::COMPILED_FORMAT;
use runtime_core::session::{SESSION_FORMAT, ScheduleOp};
use runtime_core::testing::{OfflineHost, fresh_session};
use runtime_core::{Message, Session, compile_source, converse};
use serde_json::json;

#[test]
fn a_compiled_bot_carries_its_format() {
    let c = compile_source(&SCHEDULER.replace("INTERVAL", "1")).unwrap();
    assert_eq!(c.bot.format, COMPILED_FORMAT);
    let json = serde_json::to_value(&c.bot).unwrap();
    assert_eq!(json["format"], json!(COMPILED_FORMAT));
}

#[test]
fn a_session_without_a_format_is_read_as_format_0_and_upgraded() {
    let old = json!({"id": "k", "current": "order", "states": {"order": "ask"},
        "data": {"name": "Ann"}, "somethingElse": 1});
    let s: Session = serde_json::from_value(old).unwrap();
    assert_eq!(s.format, SESSION_FORMAT);
    assert_eq!(s.current.as_deref(), Some("order"));
    assert_eq!(s.data["name"], "Ann");
    assert_eq!(s.extra["somethingElse"], 1);
    // Written back in the current format.
    assert_eq!(
        serde_json::to_value(&s).unwrap()["format"],
        json!(SESSION_FORMAT)
    );
}

#[test]
fn a_session_of_a_newer_format_is_refused_by_name() {
    let newer = json!({"format": SESSION_FORMAT + 1, "id": "k"});
    let e = serde_json::from_value::<Session>(newer)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("format {}", SESSION_FORMAT + 1)) && e.contains("newer botbox"),
        "{e}"
    );
}

const SCHEDULER: &str = r#"
name: sched
flows:
  f:
    intents:
      a: {initial: true, condition: "content == 'go'"}
    states:
      s:
        initial: true
        transitions: {add: "intent == 'a'"}
      add:
        end: true
        action:
          - name: schedule
            options: {id: r1, message: {type: command, content: tick}, freqType: year, freqInterval: INTERVAL}
"#;

#[test]
fn a_schedule_period_past_100_years_is_a_validation_error() {
    let err = compile_source(&SCHEDULER.replace("INTERVAL", "9999999999999"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("options.freqInterval") && err.contains("longer than 100 years"),
        "{err}"
    );
    // 100 years is accepted.
    compile_source(&SCHEDULER.replace("INTERVAL", "100")).unwrap();
}

#[test]
fn a_schedule_period_computed_past_the_bound_is_skipped_at_run_time() {
    // The interval comes from the session's data, so validation cannot see it.
    let bot = compile_source(&SCHEDULER.replace("INTERVAL", "\"$(data.n)\""))
        .unwrap()
        .bot;
    let mut s = fresh_session();
    s.data = json!({"n": "9223372036854775807"});
    let r = converse(&bot, &s, Message::text("go"), &mut OfflineHost::default()).unwrap();
    assert!(r.schedules.is_empty(), "{:?}", r.schedules);
    s.data = json!({"n": "2"});
    let r = converse(&bot, &s, Message::text("go"), &mut OfflineHost::default()).unwrap();
    assert!(matches!(
        r.schedules.as_slice(),
        [ScheduleOp::Add { every: Some(p), .. }] if *p == 2 * 365 * 86_400_000
    ));
}
