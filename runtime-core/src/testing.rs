//! Conversation tests: a readable YAML format of input messages and expected responses,
//! run against any step function (native engine, sandbox, or a server).
//!
//! ```yaml
//! tests:
//!   - name: orders a pizza
//!     metadata: {channelType: line}          # metadata of every message (default generic)
//!     http:                                   # stubbed api responses
//!       - {method: GET, url: "https://api.example.com/w?city=Jakarta", status: 200, body: {temp: 30}}
//!     steps:
//!       - send: I want pizza                  # text; or {type: data, payload: {...}}
//!         expect:                              # every response, in order
//!           - text: Which pizza?
//!           - oneOf: [Hi, Hello]               # a text among variants
//!           - template: carousel               # template_type, with optional `items` subset
//!         flow: order                          # current flow afterwards (null: none)
//!         state: ask
//!         context: {pizza: pepperoni}          # subset of the current flow's context
//!         data: {token: abc}                   # subset of session data
//!         schedules:                            # the step's schedule operations, in order
//!           - {command: add, id: r1, every: 60000}   # each a subset of the operation
//!       - send: {command: loop}
//!         error: Max Recursion of 3 is reached # the step fails, the session is unchanged
//!       - clear: true                          # resets the session (console clear())
//!       - advance: 60000                       # moves the clock (ms)
//! ```

use crate::engine::StepError;
use crate::host::{Host, HostError, HttpRequest, HttpResponse, JsCall, JsOutcome};
use crate::model::{CompiledBot, MsgType};
use crate::session::{ConverseResult, Message, Response, Session};
use serde::Deserialize;
use serde_json::{Map, Value as Json};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    #[serde(default)]
    pub name: Option<String>,
    /// Bot file, relative to the test file (default `../bot.yml`).
    #[serde(default)]
    pub bot: Option<String>,
    pub tests: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    #[serde(default)]
    pub metadata: Option<Json>,
    #[serde(default)]
    pub http: Vec<Mock>,
    /// Start time, epoch ms (default 2024-01-01T00:00:00Z).
    #[serde(default)]
    pub now: Option<i64>,
    /// CMS content of this test, as bots read it (`{page: {form: {element: {value}}}}`),
    /// over the bot's own (a local run's `cms.yml`).
    #[serde(default)]
    pub cms: Option<Json>,
    pub steps: Vec<TestStep>,
}

/// A stubbed HTTP answer; `headers` (if given) must be present in the request.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mock {
    #[serde(default)]
    pub method: Option<String>,
    pub url: String,
    #[serde(default)]
    pub headers: Option<Map<String, Json>>,
    #[serde(default = "ok")]
    pub status: u16,
    #[serde(default)]
    pub body: Option<Json>,
    /// Simulates a time-out: the call fails as if the server never answered.
    #[serde(default)]
    pub timeout: bool,
}

fn ok() -> u16 {
    200
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TestStep {
    #[serde(default)]
    pub send: Option<Json>,
    #[serde(default)]
    pub expect: Option<Vec<Json>>,
    #[serde(default, deserialize_with = "nullable")]
    pub flow: Option<Option<String>>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub context: Option<Json>,
    #[serde(default)]
    pub data: Option<Json>,
    #[serde(default)]
    pub error: Option<String>,
    /// The step's schedule operations, in order, each a subset of the operation.
    #[serde(default)]
    pub schedules: Option<Vec<Json>>,
    #[serde(default)]
    pub clear: bool,
    #[serde(default)]
    pub advance: Option<i64>,
}

fn nullable<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::<String>::deserialize(d)?))
}

/// Clock, randomness and HTTP stubs of a test case, for whichever host runs the step.
#[derive(Debug, Clone)]
pub struct TestEnv {
    pub now: i64,
    pub mocks: Vec<Mock>,
    pub rng: u64,
    /// Requests seen, for assertions.
    pub requests: Vec<HttpRequest>,
}

impl TestEnv {
    pub fn new(case: &Case) -> TestEnv {
        TestEnv {
            now: case.now.unwrap_or(1_704_067_200_000),
            mocks: case.http.clone(),
            rng: 0x9e37_79b9_7f4a_7c15,
            requests: vec![],
        }
    }

    /// splitmix64: deterministic test randomness.
    pub fn random_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Answers from the stubs; an unmatched request fails with how to stub it.
    pub fn http(&mut self, req: &HttpRequest) -> Result<HttpResponse, HostError> {
        self.requests.push(req.clone());
        let hit = self.mocks.iter().find(|m| {
            m.url == req.url
                && m.method
                    .as_deref()
                    .is_none_or(|x| x.eq_ignore_ascii_case(&req.method))
                && m.headers.as_ref().is_none_or(|h| {
                    h.iter().all(|(k, v)| {
                        req.headers.iter().any(|(rk, rv)| {
                            rk.eq_ignore_ascii_case(k) && Some(rv.as_str()) == v.as_str()
                        })
                    })
                })
        });
        match hit {
            Some(m) if m.timeout => Err(HostError::Failed("timed out after 5 s".into())),
            Some(m) => Ok(HttpResponse {
                status: m.status,
                body: match &m.body {
                    Some(Json::String(s)) => s.clone(),
                    Some(j) => j.to_string(),
                    None => String::new(),
                },
            }),
            // Nothing answered: a failed call (as a network error would be), saying how to
            // stub it, rather than an answer the server never gave.
            None => Err(HostError::Failed(format!(
                "no stub for {} {} in this test: add `- {{method: {}, url: \"{}\", status: 200, body: {{…}}}}` under the test's `http:`",
                req.method, req.url, req.method, req.url
            ))),
        }
    }
}

/// A host for benchmarks and tools: a fixed clock, deterministic randomness, no network, no
/// NL models and no JavaScript.
#[derive(Debug, Clone)]
pub struct OfflineHost {
    pub now: i64,
    rng: u64,
}

impl Default for OfflineHost {
    fn default() -> Self {
        OfflineHost {
            now: 1_700_000_000_000,
            rng: 1,
        }
    }
}

impl Host for OfflineHost {
    fn now_ms(&mut self) -> i64 {
        self.now
    }
    fn random_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.rng
    }
    fn http(&mut self, _: &HttpRequest) -> Result<HttpResponse, HostError> {
        Err(HostError::Failed("offline".into()))
    }
    fn nl_predict(&mut self, _: &str, _: &str, _: &Json) -> Result<Json, HostError> {
        Ok(Json::Null)
    }
    fn js(&mut self, _: JsCall<'_>) -> Result<JsOutcome, HostError> {
        Err(HostError::Failed("no JavaScript in an offline host".into()))
    }
}

/// What one step of a test runs on: the bot, the session before the step, the message, and
/// the test's environment (clock, randomness, HTTP stubs), which the step moves on.
pub struct StepInput<'a> {
    pub bot: &'a CompiledBot,
    pub session: &'a Session,
    pub msg: Message,
    pub env: &'a mut TestEnv,
}

/// A test step's outcome.
pub type Stepped = Result<ConverseResult, StepError>;

/// Runs one step of a test: the native engine, the sandbox, or a remote server.
pub trait Stepper {
    fn step(&mut self, input: StepInput<'_>) -> Stepped;
}

#[derive(Debug, Clone, PartialEq)]
pub struct CaseReport {
    pub name: String,
    pub failures: Vec<String>,
}

/// `over` written over `base`: objects key by key, anything else replaced.
fn merge_json(base: &mut Json, over: &Json) {
    match (base, over) {
        (Json::Object(b), Json::Object(o)) => {
            for (k, v) in o {
                merge_json(b.entry(k.clone()).or_insert(Json::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// Parses a test file.
pub fn parse_suite(text: &str) -> Result<Suite, String> {
    // Read once within the document limits (depth, values after aliases), then typed: the
    // typed reader alone would expand aliases without bound.
    crate::source::read_yaml_bounded(text)?;
    serde_yaml::from_str(text).map_err(|e| match e.location() {
        Some(l) => format!("line {}, column {}: {e}", l.line(), l.column()),
        None => e.to_string(),
    })
}

/// The console's fresh session.
pub fn fresh_session() -> Session {
    let mut s = Session::new("test~from~console");
    s.channel_id = Some("console-channel".into());
    s.environment_id = Some("console-environment".into());
    s.deployment_id = Some("console-deployment".into());
    s
}

/// Turns a `send` value into a message: a string is text; `{command: c, payload}` a command;
/// otherwise the message object itself.
pub fn message_of(send: &Json, metadata: &Json) -> Result<Message, String> {
    let mut m = match send {
        Json::String(t) => Message::text(t),
        Json::Object(o) if o.contains_key("command") && !o.contains_key("type") => {
            Message::command(
                o["command"].as_str().unwrap_or(""),
                o.get("payload")
                    .cloned()
                    .unwrap_or(Json::Object(Map::new())),
            )
        }
        other => Message::from_json(other)?,
    };
    if m.metadata.is_none() {
        m.metadata = Some(metadata.clone());
    }
    Ok(m)
}

/// Runs one case: its steps in order, each checked against what it expects; the report lists
/// every failure.
pub fn run_case(bot: &CompiledBot, case: &Case, stepper: &mut dyn Stepper) -> CaseReport {
    let with_cms;
    let bot = match &case.cms {
        Some(c) => {
            let mut b = bot.clone();
            merge_json(&mut b.cms, c);
            with_cms = b;
            &with_cms
        }
        None => bot,
    };
    let mut failures = vec![];
    let mut env = TestEnv::new(case);
    let mut session = fresh_session();
    let metadata = case
        .metadata
        .clone()
        .unwrap_or_else(|| serde_json::json!({"channelType": "generic"}));
    for (i, st) in case.steps.iter().enumerate() {
        let n = i + 1;
        if let Some(ms) = st.advance {
            env.now += ms;
        }
        if st.clear {
            session = fresh_session();
        }
        let Some(send) = &st.send else { continue };
        let label = format!("step {n} (send {})", compact(send));
        let msg = match message_of(send, &metadata) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{label}: {e}"));
                break;
            }
        };
        let input = StepInput {
            bot,
            session: &session,
            msg,
            env: &mut env,
        };
        match stepper.step(input) {
            Err(e) => match &st.error {
                Some(want) if *want == e.to_string() => {}
                Some(want) => failures.push(format!(
                    "{label}: expected error \"{want}\", got error \"{e}\""
                )),
                None => {
                    failures.push(format!("{label}: step failed: {e}"));
                    break;
                }
            },
            Ok(r) => {
                if let Some(want) = &st.error {
                    failures.push(format!(
                        "{label}: expected error \"{want}\", but the step succeeded with {}",
                        show_responses(&r.responses)
                    ));
                } else {
                    check_step(st, &label, &r, &mut failures);
                }
                session = r.session;
            }
        }
    }
    CaseReport {
        name: case.name.clone(),
        failures,
    }
}

/// Checks a step that ran against what it expects (responses, flow, state, context, data,
/// schedules); when one fails, the bot's errors of the step are listed after it.
fn check_step(st: &TestStep, label: &str, r: &ConverseResult, failures: &mut Vec<String>) {
    let failed_before = failures.len();
    if let Some(expect) = &st.expect
        && let Err(e) = check_responses(expect, &r.responses)
    {
        failures.push(format!("{label}: {e}"));
    }
    let s = &r.session;
    if let Some(want) = &st.flow
        && s.current != *want
    {
        failures.push(format!(
            "{label}: expected current flow {:?}, got {:?}",
            want, s.current
        ));
    }
    if let Some(want) = &st.state {
        let got = s.current.as_deref().and_then(|f| s.state_of(f));
        if got != Some(want.as_str()) {
            failures.push(format!("{label}: expected state {want:?}, got {got:?}"));
        }
    }
    if let Some(want) = &st.context {
        let empty = Json::Object(Map::new());
        let got = s
            .current
            .as_deref()
            .and_then(|f| s.context_of(f))
            .unwrap_or(&empty);
        if let Err(e) = subset(want, got, "context") {
            failures.push(format!("{label}: {e}"));
        }
    }
    if let Some(want) = &st.data
        && let Err(e) = subset(want, &s.data, "data")
    {
        failures.push(format!("{label}: {e}"));
    }
    if let Some(want) = &st.schedules {
        let got = serde_json::to_value(&r.schedules).unwrap_or(Json::Null);
        if let Err(e) = subset(&Json::Array(want.clone()), &got, "schedules") {
            failures.push(format!("{label}: {e}"));
        }
    }
    // What went wrong inside the step (a method that threw, an api call refused or answered
    // with an error) is the likeliest cause of a failed expectation.
    if failures.len() > failed_before {
        for e in &r.errors {
            failures.push(format!("{label}: the bot's error: {e}"));
        }
    }
}

fn compact(v: &Json) -> String {
    match v {
        Json::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn show_response(r: &Response) -> String {
    match r.msg_type {
        MsgType::Text => format!("text {:?}", r.content.as_deref().unwrap_or("")),
        _ => format!(
            "data {}",
            r.payload.as_ref().map(Json::to_string).unwrap_or_default()
        ),
    }
}

fn show_responses(rs: &[Response]) -> String {
    if rs.is_empty() {
        return "no responses".into();
    }
    rs.iter().map(show_response).collect::<Vec<_>>().join(", ")
}

/// Checks responses against expectations, in order; the error is a readable diff.
pub fn check_responses(expect: &[Json], got: &[Response]) -> Result<(), String> {
    let mut problems = vec![];
    for (i, want) in expect.iter().enumerate() {
        let Some(r) = got.get(i) else {
            problems.push(format!(
                "  response {}: expected {}, got nothing",
                i + 1,
                compact(want)
            ));
            continue;
        };
        if let Err(e) = check_response(want, r) {
            problems.push(format!("  response {}: {e}", i + 1));
        }
    }
    if got.len() > expect.len() {
        for (i, r) in got.iter().enumerate().skip(expect.len()) {
            problems.push(format!(
                "  response {}: unexpected {}",
                i + 1,
                show_response(r)
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "responses differ\n{}\n  all responses: {}",
            problems.join("\n"),
            show_responses(got)
        ))
    }
}

fn check_response(want: &Json, r: &Response) -> Result<(), String> {
    let text = r.content.as_deref().unwrap_or("");
    let is_text = r.msg_type == MsgType::Text;
    match want {
        Json::String(t) => {
            if is_text && text == t {
                Ok(())
            } else {
                Err(format!("expected text {t:?}, got {}", show_response(r)))
            }
        }
        Json::Object(o) => {
            if let Some(t) = o.get("text") {
                let t = t.as_str().unwrap_or("");
                if !(is_text && text == t) {
                    return Err(format!("expected text {t:?}, got {}", show_response(r)));
                }
            }
            if let Some(Json::Array(options)) = o.get("oneOf")
                && !(is_text && options.iter().any(|x| x.as_str() == Some(text)))
            {
                return Err(format!(
                    "expected one of {}, got {}",
                    Json::Array(options.clone()),
                    show_response(r)
                ));
            }
            if let Some(Json::String(prefix)) = o.get("startsWith")
                && !(is_text && text.starts_with(prefix.as_str()))
            {
                return Err(format!(
                    "expected text starting with {prefix:?}, got {}",
                    show_response(r)
                ));
            }
            if let Some(tt) = o.get("template") {
                let got = r.payload.as_ref().and_then(|p| p.get("template_type"));
                if got != Some(tt) {
                    return Err(format!("expected template {tt}, got {}", show_response(r)));
                }
                if let Some(items) = o.get("items") {
                    let got_items = r
                        .payload
                        .as_ref()
                        .and_then(|p| p.get("items"))
                        .cloned()
                        .unwrap_or(Json::Null);
                    subset(items, &got_items, "items")?;
                }
            }
            if let Some(p) = o.get("data") {
                subset(p, r.payload.as_ref().unwrap_or(&Json::Null), "payload")?;
            }
            if let Some(Json::String(a)) = o.get("action")
                && &r.action != a
            {
                return Err(format!("expected action {a:?}, got {:?}", r.action));
            }
            Ok(())
        }
        other => Err(format!("unsupported expectation {other}")),
    }
}

/// `want` is contained in `got`: objects key by key, lists element by element (same length).
/// A `null` expectation accepts a missing value.
pub fn subset(want: &Json, got: &Json, path: &str) -> Result<(), String> {
    match (want, got) {
        (Json::Object(w), Json::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => subset(wv, gv, &p)?,
                    None if wv.is_null() => {}
                    None => return Err(format!("{p}: expected {wv}, missing")),
                }
            }
            Ok(())
        }
        (Json::Array(w), Json::Array(g)) => {
            if w.len() != g.len() {
                return Err(format!(
                    "{path}: expected {} items, got {}: {got}",
                    w.len(),
                    g.len()
                ));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                subset(wv, gv, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        (Json::Number(a), Json::Number(b)) if a.as_f64() == b.as_f64() => Ok(()),
        (w, g) if w == g => Ok(()),
        (w, g) => Err(format!("{path}: expected {w}, got {g}")),
    }
}

#[cfg(test)]
mod tests {

    /// A request no stub answers fails with the request and how to stub it: nothing
    /// answered, so no status is made up.
    #[test]
    fn an_unstubbed_request_says_how_to_stub_it() {
        let mut env = TestEnv {
            now: 0,
            mocks: vec![],
            rng: 1,
            requests: vec![],
        };
        let req = HttpRequest {
            method: "GET".into(),
            url: "https://api.test/users/1".into(),
            headers: vec![],
            body: None,
        };
        let e = env.http(&req).unwrap_err().to_string();
        assert!(
            e.starts_with("no stub for GET https://api.test/users/1 in this test: add `- {method: GET, url: \"https://api.test/users/1\", status: 200"),
            "{e}"
        );
        assert_eq!(env.requests.len(), 1);
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn subset_reports_the_path() {
        assert!(
            subset(
                &json!({"a": {"b": 1}}),
                &json!({"a": {"b": 1, "c": 2}, "d": 3}),
                "ctx"
            )
            .is_ok()
        );
        assert_eq!(
            subset(&json!({"a": {"b": 2}}), &json!({"a": {"b": 1}}), "ctx").unwrap_err(),
            "ctx.a.b: expected 2, got 1"
        );
        assert!(subset(&json!({"x": null}), &json!({}), "ctx").is_ok());
    }

    #[test]
    fn send_forms() {
        let md = json!({"channelType": "generic"});
        assert_eq!(
            message_of(&json!("hi"), &md).unwrap().msg_type,
            MsgType::Text
        );
        let c = message_of(&json!({"command": "go", "payload": {"a": 1}}), &md).unwrap();
        assert_eq!(
            (c.msg_type, c.content.as_deref()),
            (MsgType::Command, Some("go"))
        );
        let d = message_of(&json!({"payload": "type=follow&x=1"}), &md).unwrap();
        assert_eq!(d.payload, Some(json!({"type": "follow", "x": "1"})));
    }
}
