//! JavaScript for bots, on boa: methods (§11) and expressions outside the fast subset.
//!
//! One [`JsRuntime`] serves one step. Its boa `Context` is created lazily, on the first call
//! that needs JavaScript, so steps of bots without JS never pay for it (~0.7 ms in wasm).
//! Nothing of a runtime survives its step: no conversation can see another's JS globals.

use boa_engine::context::time::JsInstant;
use boa_engine::context::{Clock, HostHooks};
use boa_engine::error::EngineError;
use boa_engine::{Context, JsError, JsObject, JsValue, Script, Source};
use runtime_core::host::{HostError, JsCall, JsOutcome};
use runtime_core::model::Method;
use runtime_core::{JsCode, JsProblem, JsSite};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::rc::Rc;

/// boa's own recursion limit: deep recursion becomes an uncatchable error, not a stack overflow.
const RECURSION_LIMIT: usize = 400;

const PRELUDE: &str = r#"
var __botbox_logs = [];
var console = {
  log: function () { __botbox_logs.push(Array.prototype.map.call(arguments, function (a) {
    return typeof a === 'string' ? a : JSON.stringify(a); }).join(' ')); }
};
console.info = console.log; console.warn = console.log; console.error = console.log;
"#;

pub struct JsRuntime {
    ctx: Option<Context>,
    /// Compiled functions by cache key (expression source + parameters, or method).
    functions: HashMap<String, JsObject>,
    clock: Rc<HostClock>,
}

/// The engine's clock for JavaScript: `Date.now()` and `new Date()` read the same time as
/// `context.$now`, schedules and `invalidate` (the host's, which tests set), and local dates
/// are in the project's timezone, as the engine's are.
pub struct HostClock {
    now_ms: Box<dyn Fn() -> i64>,
    /// The project's UTC offset in seconds.
    offset_s: i32,
}

impl HostClock {
    /// `now_ms` gives the host's time (Unix ms); `timezone` is the bot's (hours from UTC).
    pub fn new(now_ms: impl Fn() -> i64 + 'static, timezone: f64) -> HostClock {
        HostClock {
            now_ms: Box::new(now_ms),
            offset_s: (timezone * 3600.0).round() as i32,
        }
    }
}

impl Clock for HostClock {
    fn now(&self) -> JsInstant {
        let ms = (self.now_ms)().max(0) as u64;
        JsInstant::new(ms / 1000, ((ms % 1000) * 1_000_000) as u32)
    }
    fn system_time_millis(&self) -> i64 {
        (self.now_ms)()
    }
}

impl HostHooks for HostClock {
    fn local_timezone_offset_seconds(&self, _unix_time_seconds: i64) -> i32 {
        self.offset_s
    }
}

impl JsRuntime {
    pub fn new(clock: HostClock) -> JsRuntime {
        JsRuntime {
            ctx: None,
            functions: HashMap::new(),
            clock: Rc::new(clock),
        }
    }

    /// Whether a boa context was created (JavaScript ran in this step).
    pub fn used(&self) -> bool {
        self.ctx.is_some()
    }

    fn ctx(&mut self) -> &mut Context {
        let clock = self.clock.clone();
        self.ctx.get_or_insert_with(|| {
            let mut ctx = Context::builder()
                .clock(clock.clone())
                .host_hooks(clock)
                .build()
                .expect("a context builds");
            ctx.runtime_limits_mut()
                .set_recursion_limit(RECURSION_LIMIT);
            ctx.eval(Source::from_bytes(PRELUDE))
                .expect("prelude evaluates");
            ctx
        })
    }

    /// Lines written with `console.log` since the last call.
    pub fn take_logs(&mut self) -> Vec<String> {
        let Some(ctx) = self.ctx.as_mut() else {
            return vec![];
        };
        match ctx.eval(Source::from_bytes("__botbox_logs.splice(0)")) {
            Ok(v) => match v.to_json(ctx) {
                Ok(Some(Json::Array(a))) => a
                    .into_iter()
                    .filter_map(|l| l.as_str().map(str::to_string))
                    .collect(),
                _ => vec![],
            },
            Err(_) => vec![],
        }
    }

    /// Performs one JS call for the engine.
    pub fn call(&mut self, call: JsCall<'_>) -> Result<JsOutcome, HostError> {
        match call {
            JsCall::Expr { src, scope } => {
                let names: Vec<&str> = scope
                    .as_object()
                    .map(|m| {
                        m.keys()
                            .map(String::as_str)
                            .filter(|k| is_identifier(k))
                            .collect()
                    })
                    .unwrap_or_default();
                let key = format!("expr\u{0}{}\u{0}{src}", names.join(","));
                let f = match self.functions.get(&key) {
                    Some(f) => f.clone(),
                    None => {
                        let f = self.compile_fn(&expr_form(src, &names).src)?;
                        self.functions.insert(key, f.clone());
                        f
                    }
                };
                let args: Vec<Json> = names.iter().map(|n| scope[*n].clone()).collect();
                self.invoke(&f, &args)
            }
            JsCall::Method { method, args } => {
                let key = format!(
                    "method\u{0}{}\u{0}{}\u{0}{}",
                    method.flow.as_deref().unwrap_or(""),
                    method.name,
                    args.len()
                );
                let f = match self.functions.get(&key) {
                    Some(f) => f.clone(),
                    None => {
                        let f = self.compile_method(method, args.len())?;
                        self.functions.insert(key, f.clone());
                        f
                    }
                };
                self.invoke(&f, args)
            }
        }
    }

    fn compile_fn(&mut self, code: &str) -> Result<JsObject, HostError> {
        let ctx = self.ctx();
        let v = ctx
            .eval(Source::from_bytes(code))
            .map_err(|e| to_host_error(e, ctx))?;
        v.as_callable()
            .ok_or_else(|| HostError::Failed("not a function".into()))
    }

    /// Method compilation order of §11.1: the first form that compiles.
    fn compile_method(&mut self, m: &Method, arity: usize) -> Result<JsObject, HostError> {
        let forms = method_forms(m, arity);
        let mut last = None;
        for f in &forms {
            match self.compile_fn(&f.src) {
                Ok(f) => return Ok(f),
                Err(HostError::Abort(e)) => return Err(HostError::Abort(e)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| HostError::Failed("no method form".into())))
    }

    fn invoke(&mut self, f: &JsObject, args: &[Json]) -> Result<JsOutcome, HostError> {
        let ctx = self.ctx();
        let mut js_args = Vec::with_capacity(args.len());
        for a in args {
            js_args.push(JsValue::from_json(a, ctx).map_err(|e| to_host_error(e, ctx))?);
        }
        let ret = f
            .call(&JsValue::undefined(), &js_args, ctx)
            .map_err(|e| to_host_error(e, ctx))?;
        let value = ret.to_json(ctx).map_err(|e| to_host_error(e, ctx))?;
        let args_after = js_args
            .iter()
            .map(|a| a.to_json(ctx).ok().flatten().unwrap_or(Json::Null))
            .collect();
        Ok(JsOutcome {
            value,
            args: args_after,
        })
    }
}

/// A method or expression wrapped to compile, with where its own code starts in the
/// wrapper: the lines before it, and the characters before it on its first line.
struct Wrapped {
    src: String,
    lines_before: usize,
    columns_before: usize,
}

/// An expression as a function of its variables.
fn expr_form(src: &str, names: &[&str]) -> Wrapped {
    let head = format!("(function({}) {{ return (", names.join(", "));
    Wrapped {
        columns_before: head.chars().count(),
        src: format!("{head}{src}\n); }})"),
        lines_before: 0,
    }
}

/// The forms a method is compiled in, tried in this order (§11.1).
fn method_forms(m: &Method, arity: usize) -> Vec<Wrapped> {
    let params = m
        .params
        .clone()
        .unwrap_or_else(|| conventional_params(arity))
        .join(", ");
    let code = &m.code;
    let on_next_line = |src: String| Wrapped {
        src,
        lines_before: 1,
        columns_before: 0,
    };
    if let Some(entry) = &m.entry {
        return vec![on_next_line(format!(
            "(function () {{ var module = {{ exports: {{}} }}; var exports = module.exports;\n{code}\n; return ({entry}); }})()"
        ))];
    }
    if declares_function(code, &m.name) {
        return vec![on_next_line(format!(
            "(function () {{\n{code}\n; return {}; }})()",
            m.name
        ))];
    }
    let head = format!("(function ({params}) {{ return (");
    vec![
        Wrapped {
            columns_before: head.chars().count(),
            src: format!("{head}{code}\n); }})"),
            lines_before: 0,
        },
        on_next_line(format!("(function ({params}) {{\n{code}\n}})")),
    ]
}

/// Parses every site as it would be compiled, without running anything; returns the syntax
/// errors with their line and column in the site's own code. A method is in error when
/// none of its forms parses (the error of its last form, the function body, is given).
pub fn check_sites(sites: &[JsSite]) -> Vec<JsProblem> {
    let mut ctx = Context::default();
    ctx.runtime_limits_mut()
        .set_recursion_limit(RECURSION_LIMIT);
    let mut problems = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        let (forms, code) = match &site.code {
            JsCode::Method(m) => (method_forms(m, 6), m.code.as_str()),
            JsCode::Expr(src) => (vec![expr_form(src, &[])], src.as_str()),
        };
        let mut error = None;
        for f in &forms {
            match Script::parse(Source::from_bytes(&f.src), None, &mut ctx) {
                Ok(_) => {
                    error = None;
                    break;
                }
                Err(e) => error = Some((e, f)),
            }
        }
        if let Some((e, f)) = error {
            let message = match e.try_native(&mut ctx) {
                Ok(n) => n.message().to_string(),
                Err(_) => e.to_string(),
            };
            let (message, line, column) = site_position(&message, f, code);
            problems.push(JsProblem {
                site: i,
                line,
                column,
                message,
            });
        }
    }
    problems
}

/// boa's "… at line L, col C" (in the wrapper) as the message without it and the line and
/// column in the site's code (clamped to the code: an error found at the wrapper's end,
/// such as a missing `}`, is at the code's end).
fn site_position(message: &str, f: &Wrapped, code: &str) -> (String, usize, usize) {
    let found = message.rfind(" at line ").and_then(|at| {
        let (l, c) = message[at + 9..].split_once(", col ")?;
        let c: String = c.chars().take_while(char::is_ascii_digit).collect();
        Some((
            at,
            l.trim().parse::<usize>().ok()?,
            c.parse::<usize>().ok()?,
        ))
    });
    let Some((at, line, col)) = found else {
        return (message.to_string(), 1, 1);
    };
    let text = message[..at].to_string();
    let lines: Vec<&str> = code.split('\n').collect();
    let end = (
        lines.len(),
        lines.last().map_or(0, |l| l.chars().count()) + 1,
    );
    let (line, col) = match line.checked_sub(f.lines_before) {
        None | Some(0) => (1, 1),
        Some(1) => (1, col.saturating_sub(f.columns_before).max(1)),
        Some(l) if l > lines.len() => end,
        Some(l) => (l, col),
    };
    (text, line, col)
}

/// Parameters of a method whose key has no parentheses, by call site arity (§11.3).
fn conventional_params(arity: usize) -> Vec<String> {
    let names: &[&str] = match arity {
        1 => &["ctx"],
        3 => &["message", "options", "config"],
        5 => &["message", "context", "data", "options", "config"],
        _ => &["message", "context", "data", "options", "config", "result"],
    };
    names.iter().map(|s| s.to_string()).collect()
}

fn declares_function(code: &str, name: &str) -> bool {
    let pat = format!("function {name}");
    code.match_indices(&pat).any(|(i, _)| {
        let rest = code[i + pat.len()..].trim_start();
        rest.starts_with('(')
    })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// boa's runtime limits (recursion, loop iterations) abort the step; everything else is a JS
/// exception at the call site.
fn to_host_error(e: JsError, ctx: &mut Context) -> HostError {
    if let Some(engine) = e.as_engine() {
        return HostError::Abort(match engine {
            EngineError::RuntimeLimit(l) => format!("exceeded a JavaScript runtime limit: {l}"),
            other => format!("stopped the JavaScript engine: {other}"),
        });
    }
    let msg = match e.try_native(ctx) {
        Ok(n) => n.to_string(),
        Err(_) => e.to_string(),
    };
    HostError::Failed(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn method(name: &str, params: Option<&[&str]>, code: &str, entry: Option<&str>) -> Method {
        Method {
            name: name.into(),
            params: params.map(|p| p.iter().map(|s| s.to_string()).collect()),
            code: code.into(),
            entry: entry.map(str::to_string),
            flow: None,
        }
    }

    #[test]
    fn syntax_errors_are_found_without_running_and_placed_in_the_sites_code() {
        let body = "var a = 1;\nvar b = {x: 1;\nreturn a;";
        let sites = vec![
            JsSite {
                path: "methods.ok(ctx)".into(),
                code: JsCode::Method(method("ok", Some(&["ctx"]), "return ctx + 1;", None)),
            },
            JsSite {
                path: "methods.broken(ctx)".into(),
                code: JsCode::Method(method("broken", Some(&["ctx"]), body, None)),
            },
            JsSite {
                path: "methods.open".into(),
                code: JsCode::Method(method("open", None, "if (x) {\n  y();", None)),
            },
            JsSite {
                path: "x.condition".into(),
                code: JsCode::Expr("`${a}` +".into()),
            },
            JsSite {
                path: "y.condition".into(),
                code: JsCode::Expr("while (true) {}".into()),
            },
        ];
        let p = check_sites(&sites);
        let at: Vec<(usize, usize, usize)> = p.iter().map(|p| (p.site, p.line, p.column)).collect();
        // The object literal's `;` on line 2, column 14; the missing `}` at the code's end;
        // the expression's missing operand and a statement where an expression goes.
        assert_eq!(at[0], (1, 2, 14), "{p:?}");
        assert_eq!(at[1].0, 2);
        assert_eq!((at[1].1, at[1].2), (2, 7), "{p:?}");
        assert_eq!(at[2].0, 3);
        assert_eq!(at[3].0, 4);
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(!p[0].message.contains(" at line "), "{}", p[0].message);
    }

    fn call(rt: &mut JsRuntime, m: &Method, args: &[Json]) -> Result<JsOutcome, HostError> {
        rt.call(JsCall::Method { method: m, args })
    }

    #[test]
    fn method_forms() {
        let mut rt = JsRuntime::new(HostClock::new(|| 0, 0.0));
        assert_eq!(
            call(
                &mut rt,
                &method("square", Some(&["x"]), "return x*x;", None),
                &[json!(3)]
            )
            .unwrap()
            .value,
            Some(json!(9))
        );
        assert_eq!(
            call(
                &mut rt,
                &method("cube", Some(&["x"]), "x*x*x", None),
                &[json!(2)]
            )
            .unwrap()
            .value,
            Some(json!(8))
        );
        let f = method(
            "fromFile",
            Some(&["x"]),
            "function fromFile(x) { return x + 1; } module.exports = fromFile;",
            Some("module.exports"),
        );
        assert_eq!(
            call(&mut rt, &f, &[json!(1)]).unwrap().value,
            Some(json!(2))
        );
        let named = method(
            "add",
            Some(&["a", "b"]),
            "function add(a, b) { return a + b; }",
            None,
        );
        assert_eq!(
            call(&mut rt, &named, &[json!(1), json!(2)]).unwrap().value,
            Some(json!(3))
        );
        let arrow = method("arrow", Some(&["x"]), "(() => x * 10)()", None);
        assert_eq!(
            call(&mut rt, &arrow, &[json!(4)]).unwrap().value,
            Some(json!(40))
        );
    }

    #[test]
    fn in_place_changes_are_returned() {
        let mut rt = JsRuntime::new(HostClock::new(|| 0, 0.0));
        let m = method("touch", Some(&["ctx"]), "ctx.context.n = 1;", None);
        let out = call(&mut rt, &m, &[json!({"context": {}})]).unwrap();
        assert_eq!(out.value, None);
        assert_eq!(out.args[0], json!({"context": {"n": 1}}));
    }

    #[test]
    fn exceptions_are_site_errors_and_recursion_aborts() {
        let mut rt = JsRuntime::new(HostClock::new(|| 0, 0.0));
        let m = method("boom", Some(&[]), "throw new Error('nope')", None);
        assert!(
            matches!(call(&mut rt, &m, &[]), Err(HostError::Failed(msg)) if msg.contains("nope"))
        );
        let deep = method(
            "deep",
            Some(&["n"]),
            "function deep(n) { return deep(n + 1); }",
            None,
        );
        assert!(matches!(
            call(&mut rt, &deep, &[json!(0)]),
            Err(HostError::Abort(_))
        ));
    }

    #[test]
    fn expressions_with_scope_and_console() {
        let mut rt = JsRuntime::new(HostClock::new(|| 0, 0.0));
        let scope = json!({"content": "a b", "context": {"n": 2}});
        let out = rt
            .call(JsCall::Expr {
                src: "[1,2,3].map(x => x * context.n).join(content.split(' ')[0])",
                scope: &scope,
            })
            .unwrap();
        assert_eq!(out.value, Some(json!("2a4a6")));
        let m = method(
            "log",
            Some(&[]),
            "console.log('hi', {a: 1}); return 1",
            None,
        );
        call(&mut rt, &m, &[]).unwrap();
        assert_eq!(rt.take_logs(), vec!["hi {\"a\":1}".to_string()]);
    }
}
