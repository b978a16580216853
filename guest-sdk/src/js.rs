//! JavaScript for bots, on boa: methods and expressions outside the fast subset.
//!
//! One [`JsRuntime`] lives as long as its guest instance, which serves one bot revision. Its
//! boa `Context` is built and locked down when a bot with JavaScript loads
//! ([`JsRuntime::prepare`], ~25 M fuel), or else by the first step that needs it; bots
//! without JavaScript never pay for it. Steps reuse the context, so the guarantee that no
//! step sees what another step did in JavaScript rests on `LOCKDOWN` and
//! [`JsRuntime::finish_step`]:
//!
//! - every built-in object (reachable from the global object or from a sample of syntax such
//!   as generators and iterators) is frozen before any bot code runs, and the global object's
//!   own properties are made read-only and non-configurable;
//! - each step calls fresh functions: the context caches a *factory* per method or expression
//!   and calls it once per step, so closure state (a method's top-level `var`s, properties put
//!   on `arguments.callee`) starts anew each step;
//! - at the end of every step the globals the step added are deleted, pending promise jobs
//!   are dropped (none ever runs), and if the global object cannot be restored (a global
//!   defined non-configurable, its prototype changed, extensions prevented) the context is
//!   thrown away and the next step builds a new one.

use crate::js_json::{from_js, from_js_keys, to_js};
use boa_engine::context::time::JsInstant;
use boa_engine::context::{Clock, HostHooks};
use boa_engine::error::EngineError;
use boa_engine::job::IdleJobExecutor;
use boa_engine::object::{FunctionObjectBuilder, IntegrityLevel};
use boa_engine::property::{PropertyDescriptor, PropertyKey};
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsValue, NativeFunction, Script, Source,
    js_string,
};
use runtime_core::host::{HostError, JsCall, JsOutcome, ReadKey};
use runtime_core::model::Method;
use runtime_core::{JsCode, JsProblem, JsSite};
use serde_json::Value as Json;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// boa's own recursion limit: deep recursion becomes an uncatchable error, not a stack overflow.
const RECURSION_LIMIT: usize = 400;

/// Factories kept per context at most; beyond it the cache starts again (expressions are keyed
/// by their scope's names, which a bot's data can vary).
const MAX_FACTORIES: usize = 4096;

/// Run once per context, before any bot code: defines `console` and tames the assignments that
/// freezing would break; returns the function that drains the console's lines and the object
/// whose `logged` says there are lines to drain (both reachable from nowhere else), and
/// objects of built-in kinds that no global names (generators, iterators,
/// `arguments`), from which [`lock_down`] reaches the intrinsics behind them. The walk and the
/// freezing are in Rust: in JavaScript they cost over 50 M fuel.
///
/// Taming: assigning `o.toString = f` (or `E.prototype.name = 'E'`) on an object that inherits
/// a frozen data property fails, so the few properties programs commonly shadow that way become
/// accessors whose setter defines the property on the receiver instead; on the built-in
/// itself the setter throws.
const LOCKDOWN: &str = r#"(function (global) {
  'use strict';
  var getDesc = Object.getOwnPropertyDescriptor, defProp = Object.defineProperty;
  var logs = [], state = { logged: false };
  var log = function () {
    var parts = [];
    for (var i = 0; i < arguments.length; i++) {
      var a = arguments[i];
      parts.push(typeof a === 'string' ? a : JSON.stringify(a));
    }
    logs.push(parts.join(' '));
    state.logged = true;
  };
  defProp(global, 'console', { value: { log: log, info: log, warn: log, error: log, debug: log },
    writable: true, enumerable: false, configurable: true });

  function tame(obj, key) {
    var d = getDesc(obj, key);
    if (!d || !('value' in d) || !d.writable) return;
    var value = d.value;
    defProp(obj, key, {
      get: function () { return value; },
      set: function (v) {
        if (this === obj) throw new TypeError('cannot assign ' + String(key) + ' of a built-in');
        defProp(this, key, { value: v, writable: true, enumerable: true, configurable: true });
      },
      enumerable: d.enumerable, configurable: false
    });
  }
  ['constructor', 'toString', 'toLocaleString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf',
   'propertyIsEnumerable'].forEach(function (k) { tame(Object.prototype, k); });
  ['constructor', 'toString'].forEach(function (k) { tame(Function.prototype, k); });
  [Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError, AggregateError]
    .forEach(function (E) {
      ['constructor', 'name', 'message', 'toString'].forEach(function (k) { tame(E.prototype, k); });
    });

  var samples = [];
  [
    function () { return function* () {}; },
    function () { return (function* () {})(); },
    function () { return async function () {}; },
    function () { return async function* () {}; },
    function () { return (async function* () {})(); },
    function () { return [][Symbol.iterator](); },
    function () { return new Map()[Symbol.iterator](); },
    function () { return new Set()[Symbol.iterator](); },
    function () { return ''[Symbol.iterator](); },
    function () { return /a/g[Symbol.matchAll]('a'); },
    function () { return [].values().map(function (x) { return x; }); },
    function () { return Iterator.from({ next: function () { return { done: true }; } }); },
    function () { return (function () { 'use strict'; return arguments; })(); },
    function () { return (function () { return arguments; })(); }
  ].forEach(function (s) { try { samples.push(s()); } catch (e) {} });
  return [function () { state.logged = false; return logs.splice(0); }, samples, state];
})(this)"#;

pub struct JsRuntime {
    js: Option<Js>,
    /// Functions made for this step, by cache key (see [`JsRuntime::call`]).
    step_functions: HashMap<String, Fun>,
    clock: Rc<HostClock>,
}

/// A locked-down context and what the runtime keeps of it between steps.
struct Js {
    ctx: Context,
    /// The function [`LOCKDOWN`] returned: drains `console` lines.
    take_logs: JsObject,
    /// `logged`: whether there are lines to drain (read without calling into JavaScript).
    log_state: JsObject,
    /// The global object's own properties after lockdown (all non-configurable).
    globals: HashSet<PropertyKey>,
    /// The global object's prototype after lockdown.
    global_proto: Option<JsObject>,
    /// Factories of compiled functions by cache key: `(function () { return <form>; })`.
    factories: HashMap<String, Fun>,
    /// Whether JavaScript ran since the last [`JsRuntime::finish_step`].
    dirty: bool,
}
/// The engine's clock and randomness for JavaScript: `Date.now()` and `new Date()` read the
/// same time as `context.$now`, schedules and `invalidate` (the host's, which tests set),
/// local dates are in the project's timezone, as the engine's are, and `Math.random()` draws
/// from a seed the host gives at its first use in a step, so that a step given the same
/// seed draws the same numbers (replays depend on it).
pub struct HostClock {
    now_ms: Box<dyn Fn() -> i64>,
    /// The project's UTC offset in seconds.
    offset_s: i32,
    /// Gives the step's seed for `Math.random`.
    seed: Box<dyn Fn() -> u64>,
    /// `Math.random`'s SplitMix64 state in this step (`None` until its first use).
    random: Cell<Option<u64>>,
}

impl HostClock {
    /// `now_ms` gives the host's time (Unix ms); `timezone` is the bot's (hours from UTC).
    /// `Math.random` is seeded with 0 until [`HostClock::with_random`] says otherwise.
    pub fn new(now_ms: impl Fn() -> i64 + 'static, timezone: f64) -> HostClock {
        HostClock {
            now_ms: Box::new(now_ms),
            offset_s: (timezone * 3600.0).round() as i32,
            seed: Box::new(|| 0),
            random: Cell::new(None),
        }
    }

    /// `Math.random` seeded in each step by `seed` (called at its first use in the step).
    pub fn with_random(mut self, seed: impl Fn() -> u64 + 'static) -> HostClock {
        self.seed = Box::new(seed);
        self
    }

    /// The next `Math.random()`: SplitMix64, 53 bits into `[0, 1)`.
    fn math_random(&self) -> f64 {
        let state = self
            .random
            .get()
            .unwrap_or_else(|| (self.seed)())
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.random.set(Some(state));
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
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
            js: None,
            step_functions: HashMap::new(),
            clock: Rc::new(clock),
        }
    }

    /// Builds and locks down the context now rather than in the first step that needs it.
    pub fn prepare(&mut self) {
        self.js().dirty = false;
    }

    /// The context, built and locked down on first use.
    fn js(&mut self) -> &mut Js {
        let clock = self.clock.clone();
        let clock_for_random = self.clock.clone();
        let js = self.js.get_or_insert_with(|| {
            let mut ctx = Context::builder()
                .clock(clock.clone())
                .host_hooks(clock)
                .job_executor(Rc::new(IdleJobExecutor))
                .build()
                .expect("a context builds");
            ctx.runtime_limits_mut()
                .set_recursion_limit(RECURSION_LIMIT);
            seeded_math_random(&mut ctx, clock_for_random).expect("Math.random is replaced");
            let (take_logs, log_state, globals) = lock_down(&mut ctx).expect("the lockdown runs");
            let global_proto = ctx.global_object().prototype();
            Js {
                ctx,
                take_logs,
                log_state,
                globals,
                global_proto,
                factories: HashMap::new(),
                dirty: false,
            }
        });
        js.dirty = true;
        js
    }

    /// Ends a step: returns the lines written with `console.log` during it and puts the
    /// context back as the lockdown left it (or drops it when that cannot be done). Call after
    /// every step, failed ones included.
    pub fn finish_step(&mut self) -> Vec<String> {
        self.step_functions.clear();
        self.clock.random.set(None);
        let Some(js) = self.js.as_mut().filter(|js| js.dirty) else {
            return vec![];
        };
        js.dirty = false;
        let ctx = &mut js.ctx;
        let logged = js
            .log_state
            .get(js_string!("logged"), ctx)
            .is_ok_and(|v| v.to_boolean());
        let logs = match logged {
            false => vec![],
            true => match js
                .take_logs
                .call(&JsValue::undefined(), &[], ctx)
                .and_then(|v| from_js(&v, ctx))
            {
                Ok(Some(Json::Array(a))) => a
                    .into_iter()
                    .filter_map(|l| l.as_str().map(str::to_string))
                    .collect(),
                _ => vec![],
            },
        };
        ctx.clear_kept_objects();
        if !restore_globals(js) {
            self.js = None;
        }
        logs
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
                let f = self.function(key, || vec![expr_form(src, &names)])?;
                let args: Vec<Json> = names.iter().map(|n| scope[*n].clone()).collect();
                self.invoke(&f.f, &args, &[], &[])
                    .map_err(|e| locate(e, f.at, src, "expression"))
            }
            JsCall::Method {
                method,
                args,
                read_back,
                read_keys,
            } => {
                let key = format!(
                    "method\u{0}{}\u{0}{}\u{0}{}",
                    method.flow.as_deref().unwrap_or(""),
                    method.name,
                    args.len()
                );
                let f = self.function(key, || method_forms(method, args.len()))?;
                self.invoke(&f.f, args, read_back, read_keys)
                    .map_err(|e| locate(e, f.at, &method.code, "method"))
            }
        }
    }

    /// This step's function under `key`: made once per step by the context's factory, which
    /// is compiled from the first of `forms` that compiles on first use.
    fn function(
        &mut self,
        key: String,
        forms: impl FnOnce() -> Vec<Wrapped>,
    ) -> Result<Fun, HostError> {
        if let Some(f) = self.step_functions.get(&key) {
            return Ok(f.clone());
        }
        let js = self.js();
        let factory = match js.factories.get(&key) {
            Some(f) => f.clone(),
            None => {
                let f = compile_factory(&mut js.ctx, &forms())?;
                if js.factories.len() >= MAX_FACTORIES {
                    js.factories.clear();
                }
                js.factories.insert(key.clone(), f.clone());
                f
            }
        };
        let ctx = &mut js.ctx;
        let f = factory
            .f
            .call(&JsValue::undefined(), &[], ctx)
            .map_err(|e| to_host_error(e, ctx))?
            .as_callable()
            .ok_or_else(|| HostError::Failed("not a function".into()))?;
        let f = Fun { f, at: factory.at };
        self.step_functions.insert(key, f.clone());
        Ok(f)
    }

    /// Calls `f`; the arguments of `read_back` are converted back after the call (only their
    /// `read_keys` when not empty), the others come back as null (methods only: an
    /// expression's are never read).
    fn invoke(
        &mut self,
        f: &JsObject,
        args: &[Json],
        read_back: &[usize],
        read_keys: &[ReadKey],
    ) -> Result<JsOutcome, HostError> {
        let ctx = &mut self.js().ctx;
        let mut js_args = Vec::with_capacity(args.len());
        for a in args {
            js_args.push(to_js(a, ctx));
        }
        let ret = f
            .call(&JsValue::undefined(), &js_args, ctx)
            .map_err(|e| to_host_error(e, ctx))?;
        let value = from_js(&ret, ctx).map_err(|e| to_host_error(e, ctx))?;
        let args_after = if read_back.is_empty() {
            vec![]
        } else {
            js_args
                .iter()
                .enumerate()
                .map(|(i, a)| match read_back.contains(&i) {
                    true => from_js_keys(a, read_keys, ctx)
                        .ok()
                        .flatten()
                        .unwrap_or(Json::Null),
                    false => Json::Null,
                })
                .collect()
        };
        Ok(JsOutcome {
            value,
            args: args_after,
        })
    }
}

/// Replaces `Math.random` (boa's draws from the process's generator) with the clock's
/// seeded one, before the lockdown freezes `Math`.
fn seeded_math_random(ctx: &mut Context, clock: Rc<HostClock>) -> JsResult<()> {
    // SAFETY: the closure holds an `Rc` of plain Rust data, no garbage-collected value, so
    // the collector need not trace it.
    let random = unsafe {
        NativeFunction::from_closure(move |_, _, _| Ok(JsValue::from(clock.math_random())))
    };
    let f = FunctionObjectBuilder::new(ctx.realm(), random)
        .name(js_string!("random"))
        .length(0)
        .build();
    let math = ctx
        .global_object()
        .get(js_string!("Math"), ctx)?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("no Math"))?;
    math.define_property_or_throw(
        js_string!("random"),
        PropertyDescriptor::builder()
            .value(f)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        ctx,
    )?;
    Ok(())
}

/// Freezes every object reachable from the global object and from [`LOCKDOWN`]'s samples
/// (through properties, accessors and prototypes), then makes the global object's own
/// properties read-only and non-configurable. Returns the console's drain, its state, and
/// the global object's keys (which no step can delete from now on).
fn lock_down(ctx: &mut Context) -> JsResult<(JsObject, JsObject, HashSet<PropertyKey>)> {
    let out = ctx.eval(Source::from_bytes(LOCKDOWN))?;
    let item = |i: u32, ctx: &mut Context| -> JsResult<JsValue> {
        out.as_object()
            .ok_or_else(|| JsNativeError::typ().with_message("lockdown result"))?
            .get(i, ctx)
    };
    let take_logs = item(0, ctx)?
        .as_callable()
        .ok_or_else(|| JsNativeError::typ().with_message("lockdown result"))?;
    let samples = item(1, ctx)?;
    let log_state = item(2, ctx)?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("lockdown result"))?;
    let global = ctx.global_object();
    let mut todo: Vec<JsObject> = vec![];
    let samples = samples.as_object().expect("an array");
    for i in 0..samples.get(js_string!("length"), ctx)?.to_u32(ctx)? {
        todo.extend(samples.get(i, ctx)?.as_object());
    }
    let own =
        |o: &JsObject, ctx: &mut Context| -> JsResult<Vec<(PropertyKey, PropertyDescriptor)>> {
            let keys = o.own_property_keys(ctx)?;
            let b = o.borrow();
            Ok(keys
                .into_iter()
                .filter_map(|k| b.properties().get(&k).map(|d| (k, d)))
                .collect())
        };
    let reachable = |d: &PropertyDescriptor| -> Vec<JsObject> {
        [d.value(), d.get(), d.set()]
            .into_iter()
            .flatten()
            .filter_map(JsValue::as_object)
            .collect()
    };
    let globals = own(&global, ctx)?;
    for (_, d) in &globals {
        todo.extend(reachable(d));
    }
    todo.extend(global.prototype());
    let mut seen: HashSet<JsObject> = HashSet::new();
    while let Some(o) = todo.pop() {
        if o == global || !seen.insert(o.clone()) {
            continue;
        }
        todo.extend(o.prototype());
        for (_, d) in own(&o, ctx)? {
            todo.extend(reachable(&d));
        }
        o.set_integrity_level(IntegrityLevel::Frozen, ctx)?;
    }
    // Non-configurable but writable globals too (a value can still be made read-only).
    let mut keys = HashSet::with_capacity(globals.len());
    for (k, d) in globals {
        if d.configurable() == Some(true) || d.writable() == Some(true) {
            let locked = PropertyDescriptor::builder()
                .configurable(false)
                .maybe_writable(d.writable().map(|_| false));
            global.define_property_or_throw(k.clone(), locked, ctx)?;
        }
        keys.insert(k);
    }
    Ok((take_logs, log_state, keys))
}

/// Compiles the first of `forms` that compiles as a factory: a function returning the form's
/// value. A form that throws while compiling (a module's top level) throws when called.
fn compile_factory(ctx: &mut Context, forms: &[Wrapped]) -> Result<Fun, HostError> {
    let mut last = None;
    for f in forms {
        let src = format!("{FACTORY_HEAD}{}; }})", f.src);
        match ctx.eval(Source::from_bytes(&src)) {
            Ok(v) => {
                let callable = v
                    .as_callable()
                    .ok_or_else(|| HostError::Failed("not a function".into()))?;
                // Where the site's own code starts in the source boa reports positions in.
                let at = match f.lines_before {
                    0 => (0, FACTORY_HEAD.chars().count() + f.columns_before),
                    n => (n, 0),
                };
                return Ok(Fun { f: callable, at });
            }
            Err(e) => match to_host_error(e, ctx) {
                HostError::Abort(e) => return Err(HostError::Abort(e)),
                e => last = Some(e),
            },
        }
    }
    Err(last.unwrap_or_else(|| HostError::Failed("no method form".into())))
}

/// What a compiled factory is wrapped in (on the first line of the source boa reports).
const FACTORY_HEAD: &str = "(function () { return ";

/// A compiled function and where its site's own code starts in the source boa reports
/// positions in: `(lines before, characters before on that line)`.
#[derive(Clone)]
struct Fun {
    f: JsObject,
    at: (usize, usize),
}

/// A JavaScript exception's message with its place in the site's own code: boa's
/// `(unknown at :L:C)` (a position in the wrapper) becomes `(line l, column c of the
/// method)`; reading a property of null or undefined names the property.
fn locate(
    e: HostError,
    (lines_before, cols_before): (usize, usize),
    code: &str,
    what: &str,
) -> HostError {
    let HostError::Failed(msg) = e else { return e };
    const MARK: &str = " (unknown at :";
    let Some(at) = msg.rfind(MARK) else {
        return HostError::Failed(msg);
    };
    let pos = msg[at + MARK.len()..].trim_end_matches(')');
    let Some((l, c)) = pos
        .split_once(':')
        .and_then(|(l, c)| Some((l.parse::<usize>().ok()?, c.parse::<usize>().ok()?)))
    else {
        return HostError::Failed(msg);
    };
    let (line, col) = match l.checked_sub(lines_before) {
        None | Some(0) => return HostError::Failed(msg[..at].to_string()),
        Some(1) if lines_before == 0 => (1, c.saturating_sub(cols_before).max(1)),
        Some(line) => (line, c),
    };
    let mut text = msg[..at].to_string();
    if text.ends_with("cannot convert 'null' or 'undefined' to object") {
        let src_line: Vec<char> = code.lines().nth(line - 1).unwrap_or("").chars().collect();
        let start = col - 1;
        let prop: String = src_line
            .iter()
            .skip(start)
            .take_while(|ch| ch.is_alphanumeric() || **ch == '_' || **ch == '$')
            .collect();
        if !prop.is_empty() && start > 0 && src_line.get(start - 1) == Some(&'.') {
            text = format!("TypeError: cannot read property '{prop}' of null or undefined");
        }
    }
    HostError::Failed(format!("{text} (line {line}, column {col} of the {what})"))
}

/// Deletes the globals a step added; false when the global object cannot be put back as the
/// lockdown left it (then the context must not serve another step).
fn restore_globals(js: &mut Js) -> bool {
    let ctx = &mut js.ctx;
    let global = ctx.global_object();
    if global.prototype() != js.global_proto || !global.is_extensible(ctx).unwrap_or(false) {
        return false;
    }
    let Ok(keys) = global.own_property_keys(ctx) else {
        return false;
    };
    // The lockdown's globals cannot be deleted, so the same count means none was added.
    if keys.len() == js.globals.len() {
        return true;
    }
    for k in keys.into_iter().filter(|k| !js.globals.contains(k)) {
        if global.delete_property_or_throw(k, ctx).is_err() {
            return false;
        }
    }
    true
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

/// The forms a method is compiled in, tried in this order.
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

/// Parameters of a method whose key has no parentheses, by call site arity.
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
        rt.call(JsCall::Method {
            method: m,
            args,
            read_back: &[0, 1, 2],
            read_keys: &[],
        })
    }

    #[test]
    fn math_random_draws_from_the_step_seed() {
        let draws = |seed: u64| {
            let seeds = Rc::new(Cell::new(seed));
            let next = seeds.clone();
            let clock = HostClock::new(|| 0, 0.0).with_random(move || {
                next.set(next.get() + 1);
                next.get()
            });
            let mut rt = JsRuntime::new(clock);
            let m = method(
                "r",
                Some(&[]),
                "return [Math.random(), Math.random()];",
                None,
            );
            let mut steps = vec![];
            for _ in 0..2 {
                steps.push(call(&mut rt, &m, &[]).unwrap().value.unwrap());
                rt.finish_step();
            }
            (steps, seeds.get() - seed)
        };
        let (a, seeds_drawn) = draws(7);
        // One seed per step, drawn at the first use; the same seeds give the same numbers.
        assert_eq!(seeds_drawn, 2);
        assert_eq!(a, draws(7).0);
        assert_ne!(a[0], a[1]);
        assert_ne!(a, draws(8).0);
        let x = a[0][0].as_f64().unwrap();
        assert!((0.0..1.0).contains(&x), "{x}");
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

    /// A thrown error and a property read on null are placed at their line and column in
    /// the method's own code (and the property is named), in every form a method compiles
    /// in; an expression's, in the expression.
    #[test]
    fn runtime_errors_are_placed_in_the_sites_own_code() {
        let mut rt = JsRuntime::new(HostClock::new(|| 0, 0.0));
        let failed = |r: Result<JsOutcome, HostError>| match r {
            Err(HostError::Failed(m)) => m,
            other => panic!("{other:?}"),
        };
        let body = method(
            "boom",
            Some(&["ctx"]),
            "var a = 1;\n    throw new Error('kaboom ' + a);",
            None,
        );
        assert_eq!(
            failed(call(&mut rt, &body, &[json!(null)])),
            "Error: kaboom 1 (line 2, column 11 of the method)"
        );
        let null = method(
            "nul",
            Some(&["ctx"]),
            "var o = null;\nreturn o.count;",
            None,
        );
        assert_eq!(
            failed(call(&mut rt, &null, &[json!(null)])),
            "TypeError: cannot read property 'count' of null or undefined (line 2, column 10 of the method)"
        );
        // The expression form (a method that is one expression) starts on the wrapper's line.
        let expr = method("ex", Some(&["ctx"]), "ctx.a.b", None);
        assert_eq!(
            failed(call(&mut rt, &expr, &[json!({})])),
            "TypeError: cannot read property 'b' of null or undefined (line 1, column 7 of the method)"
        );
        let e = rt.call(JsCall::Expr {
            src: "x.y.z",
            scope: &json!({"x": {}}),
        });
        assert_eq!(
            failed(e),
            "TypeError: cannot read property 'z' of null or undefined (line 1, column 5 of the expression)"
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
        assert_eq!(rt.finish_step(), vec!["hi {\"a\":1}".to_string()]);
    }
}
