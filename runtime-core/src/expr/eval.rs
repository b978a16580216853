//! The fast evaluator: JavaScript semantics for the subset, without a JS engine.

use super::methods::{call_global, call_method, call_static};
use super::{BinOp, Expr, LogicOp, UnOp};
use crate::value::{V, add, compare, loose_eq, strict_eq};
use serde_json::{Map, Value as Json};
use std::borrow::Cow;
use std::cmp::Ordering;

/// Where an expression finds its variables.
pub trait Env {
    /// A bound variable (`content`, `context`, `payload`, ...); `None` if unbound.
    fn var<'a>(&'a self, name: &str) -> Option<V<'a>>;
    /// Meta context names read as `context.<name>` (`$init`, `$flow`, `$to`, ...).
    fn context_meta<'a>(&'a self, _name: &str) -> Option<V<'a>> {
        None
    }
}

/// Why evaluation did not produce a value.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalError {
    /// What JavaScript would throw (TypeError, ReferenceError, ...).
    Throw(String),
    /// The subset cannot evaluate this with JS semantics; use the JS engine.
    NeedsJs(String),
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvalError::Throw(m) => f.write_str(m),
            EvalError::NeedsJs(m) => write!(f, "needs the JavaScript engine: {m}"),
        }
    }
}

type R<'a> = Result<V<'a>, EvalError>;

pub(crate) fn throw<T>(msg: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError::Throw(msg.into()))
}

const GLOBAL_OBJECTS: &[&str] = &[
    "Math", "JSON", "Object", "Array", "Number", "String", "Date",
];

/// Evaluates a parsed expression against an environment.
///
/// Recursive, one level per level of the tree, which the parser bounds ([`super::MAX_DEPTH`]).
/// Each kind of node has its own function, out of line, so that the frames of the recursion
/// stay small.
pub fn eval<'a>(e: &'a Expr, env: &'a dyn Env) -> R<'a> {
    match e {
        Expr::Undefined => Ok(V::Undef),
        Expr::Null => Ok(V::Null),
        Expr::Bool(b) => Ok(V::Bool(*b)),
        Expr::Num(n) => Ok(V::Num(*n)),
        Expr::Str(s) => Ok(V::Str(Cow::Borrowed(s))),
        Expr::Regex(r) => Ok(V::Regex(r)),
        Expr::Ident(name) => lookup(name, env),
        Expr::Member(obj, name, optional) => member(obj, name, *optional, env),
        Expr::Index(obj, idx, optional) => index(obj, idx, *optional, env),
        Expr::Method(obj, name, args, optional) => method(obj, name, args, *optional, env),
        Expr::Call(name, args) => call(name, args, env),
        Expr::Unary(op, x) => unary(*op, x, env),
        Expr::Logic(op, a, b) => logic(*op, a, b, env),
        Expr::Cond(c, a, b) => {
            if eval(c, env)?.truthy() {
                eval(a, env)
            } else {
                eval(b, env)
            }
        }
        Expr::Bin(op, a, b) => bin(*op, a, b, env),
        Expr::Array(items) => array(items, env),
        Expr::Object(props) => object(props, env),
    }
}

#[inline(never)]
fn member<'a>(obj: &'a Expr, name: &str, optional: bool, env: &'a dyn Env) -> R<'a> {
    if let Expr::Ident(v) = obj
        && v == "context"
    {
        return context_member(name, env);
    }
    let o = eval(obj, env)?;
    if optional && o.is_nullish() {
        return Ok(V::Undef);
    }
    get_prop(o, name)
}

#[inline(never)]
fn index<'a>(obj: &'a Expr, idx: &'a Expr, optional: bool, env: &'a dyn Env) -> R<'a> {
    let o = eval(obj, env)?;
    if optional && o.is_nullish() {
        return Ok(V::Undef);
    }
    let key = eval(idx, env)?;
    let key = match key {
        V::Num(n) if n >= 0.0 && n.fract() == 0.0 => {
            return get_index(o, n as usize, &key);
        }
        other => other.to_primitive().to_js_string(),
    };
    if let Expr::Ident(v) = obj
        && v == "context"
    {
        return context_member(&key, env);
    }
    get_prop(o, &key)
}

#[inline(never)]
fn method<'a>(
    obj: &'a Expr,
    name: &str,
    args: &'a [Expr],
    optional: bool,
    env: &'a dyn Env,
) -> R<'a> {
    if let Expr::Ident(ns) = obj
        && GLOBAL_OBJECTS.contains(&ns.as_str())
        && env.var(ns).is_none()
    {
        let args = eval_args(args, env)?;
        return call_static(ns, name, args);
    }
    let recv = eval(obj, env)?;
    if recv.is_nullish() {
        if optional {
            return Ok(V::Undef);
        }
        return throw(format!(
            "Cannot read properties of {} (reading '{name}')",
            recv.to_js_string()
        ));
    }
    let args = eval_args(args, env)?;
    call_method(recv, name, args)
}

#[inline(never)]
fn call<'a>(name: &str, args: &'a [Expr], env: &'a dyn Env) -> R<'a> {
    if env.var(name).is_some() {
        return throw(format!("{name} is not a function"));
    }
    let args = eval_args(args, env)?;
    call_global(name, args)
}

#[inline(never)]
fn unary<'a>(op: UnOp, x: &'a Expr, env: &'a dyn Env) -> R<'a> {
    if op == UnOp::TypeOf {
        // `typeof undeclared` is "undefined", not a ReferenceError.
        if let Expr::Ident(name) = x
            && env.var(name).is_none()
            && global_value(name).is_none()
        {
            return Ok(V::Str(Cow::Borrowed(
                if GLOBAL_OBJECTS.contains(&name.as_str()) {
                    "object"
                } else if is_global_function(name) {
                    "function"
                } else {
                    "undefined"
                },
            )));
        }
        let v = eval(x, env)?;
        return Ok(V::Str(Cow::Borrowed(v.type_of())));
    }
    let v = eval(x, env)?;
    Ok(match op {
        UnOp::Not => V::Bool(!v.truthy()),
        UnOp::Neg => V::Num(-v.to_number()),
        UnOp::Plus => V::Num(v.to_number()),
        UnOp::TypeOf => unreachable!(),
    })
}

#[inline(never)]
fn logic<'a>(op: LogicOp, a: &'a Expr, b: &'a Expr, env: &'a dyn Env) -> R<'a> {
    let x = eval(a, env)?;
    let take_left = match op {
        LogicOp::And => !x.truthy(),
        LogicOp::Or => x.truthy(),
        LogicOp::Nullish => !x.is_nullish(),
    };
    if take_left { Ok(x) } else { eval(b, env) }
}

#[inline(never)]
fn bin<'a>(op: BinOp, a: &'a Expr, b: &'a Expr, env: &'a dyn Env) -> R<'a> {
    let x = eval(a, env)?;
    let y = eval(b, env)?;
    binary(op, &x, &y)
}

#[inline(never)]
fn array<'a>(items: &'a [Expr], env: &'a dyn Env) -> R<'a> {
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        out.push(eval(it, env)?.into_json().unwrap_or(Json::Null));
    }
    Ok(V::Own(Json::Array(out)))
}

#[inline(never)]
fn object<'a>(props: &'a [(String, Expr)], env: &'a dyn Env) -> R<'a> {
    let mut out = Map::new();
    for (k, it) in props {
        if let Some(j) = eval(it, env)?.into_json() {
            out.insert(k.clone(), j);
        }
    }
    Ok(V::Own(Json::Object(out)))
}

fn eval_args<'a>(args: &'a [Expr], env: &'a dyn Env) -> Result<Vec<V<'a>>, EvalError> {
    args.iter().map(|a| eval(a, env)).collect()
}

fn is_global_function(name: &str) -> bool {
    matches!(
        name,
        "parseInt"
            | "parseFloat"
            | "Number"
            | "String"
            | "Boolean"
            | "isNaN"
            | "isFinite"
            | "encodeURIComponent"
            | "decodeURIComponent"
            | "encodeURI"
            | "Array"
            | "Object"
    )
}

fn global_value(name: &str) -> Option<V<'static>> {
    match name {
        "NaN" => Some(V::Num(f64::NAN)),
        "Infinity" => Some(V::Num(f64::INFINITY)),
        _ => None,
    }
}

fn lookup<'a>(name: &str, env: &'a dyn Env) -> R<'a> {
    if let Some(v) = env.var(name) {
        return Ok(v);
    }
    if let Some(v) = global_value(name) {
        return Ok(v);
    }
    if is_global_function(name) || GLOBAL_OBJECTS.contains(&name) {
        return Err(EvalError::NeedsJs(format!("{name} used as a value")));
    }
    throw(format!("{name} is not defined"))
}

/// `context.<name>`: meta names (`$flow`, ...) first, the plain aliases only when the
/// context has no such key.
fn context_member<'a>(name: &str, env: &'a dyn Env) -> R<'a> {
    if name.starts_with('$')
        && let Some(v) = env.context_meta(name)
    {
        return Ok(v);
    }
    let ctx = env.var("context").unwrap_or(V::Undef);
    if ctx.is_nullish() {
        return throw(format!(
            "Cannot read properties of {} (reading '{name}')",
            ctx.to_js_string()
        ));
    }
    let v = get_prop(ctx, name)?;
    if matches!(v, V::Undef)
        && matches!(name, "start" | "to" | "from" | "end")
        && let Some(m) = env.context_meta(&format!("${name}"))
    {
        return Ok(m);
    }
    Ok(v)
}

/// Property read `o.name` with JS semantics.
pub(crate) fn get_prop<'a>(o: V<'a>, name: &str) -> R<'a> {
    match o {
        V::Undef | V::Null => throw(format!(
            "Cannot read properties of {} (reading '{name}')",
            o.to_js_string()
        )),
        V::Ref(j) => Ok(json_prop_ref(j, name)),
        V::Own(j) => Ok(json_prop_owned(j, name)),
        V::Str(s) => Ok(match name {
            "length" => V::Num(s.encode_utf16().count() as f64),
            _ => match name.parse::<usize>() {
                Ok(i) => string_index(&s, i),
                Err(_) => V::Undef,
            },
        }),
        V::Regex(r) => Ok(match name {
            "source" => V::Str(Cow::Borrowed(&r.source)),
            "flags" => V::Str(Cow::Borrowed(&r.flags)),
            "global" => V::Bool(r.global()),
            "ignoreCase" => V::Bool(r.flags.contains('i')),
            "multiline" => V::Bool(r.flags.contains('m')),
            _ => V::Undef,
        }),
        V::Num(_) | V::Bool(_) => Ok(V::Undef),
    }
}

fn get_index<'a>(o: V<'a>, i: usize, key: &V) -> R<'a> {
    match o {
        V::Ref(Json::Array(a)) => Ok(a.get(i).map(V::from_json).unwrap_or(V::Undef)),
        V::Own(Json::Array(mut a)) => Ok(if i < a.len() {
            V::from_owned(a.swap_remove(i))
        } else {
            V::Undef
        }),
        V::Str(ref s) => Ok(string_index(s, i)),
        other => get_prop(other, &key.to_js_string()),
    }
}

fn string_index<'a>(s: &str, i: usize) -> V<'a> {
    let units: Vec<u16> = s.encode_utf16().collect();
    match units.get(i) {
        Some(u) => V::Str(Cow::Owned(String::from_utf16_lossy(&[*u]))),
        None => V::Undef,
    }
}

fn json_prop_ref<'a>(j: &'a Json, name: &str) -> V<'a> {
    match j {
        Json::Object(m) => m.get(name).map(V::from_json).unwrap_or(V::Undef),
        Json::Array(a) => match name {
            "length" => V::Num(a.len() as f64),
            _ => match name.parse::<usize>() {
                Ok(i) => a.get(i).map(V::from_json).unwrap_or(V::Undef),
                Err(_) => V::Undef,
            },
        },
        _ => V::from_json(j),
    }
}

fn json_prop_owned<'a>(j: Json, name: &str) -> V<'a> {
    match j {
        Json::Object(mut m) => m.swap_remove(name).map(V::from_owned).unwrap_or(V::Undef),
        Json::Array(mut a) => match name {
            "length" => V::Num(a.len() as f64),
            _ => match name.parse::<usize>() {
                Ok(i) if i < a.len() => V::from_owned(a.swap_remove(i)),
                _ => V::Undef,
            },
        },
        other => V::from_owned(other),
    }
}

fn binary<'a>(op: BinOp, x: &V, y: &V) -> R<'a> {
    Ok(match op {
        BinOp::Eq => V::Bool(loose_eq(x, y)),
        BinOp::Ne => V::Bool(!loose_eq(x, y)),
        BinOp::StrictEq => V::Bool(strict_eq(x, y)),
        BinOp::StrictNe => V::Bool(!strict_eq(x, y)),
        BinOp::Lt => V::Bool(compare(x, y) == Some(Ordering::Less)),
        BinOp::Gt => V::Bool(compare(x, y) == Some(Ordering::Greater)),
        BinOp::Le => V::Bool(matches!(
            compare(x, y),
            Some(Ordering::Less | Ordering::Equal)
        )),
        BinOp::Ge => V::Bool(matches!(
            compare(x, y),
            Some(Ordering::Greater | Ordering::Equal)
        )),
        BinOp::Add => add(x, y),
        BinOp::Sub => V::Num(x.to_number() - y.to_number()),
        BinOp::Mul => V::Num(x.to_number() * y.to_number()),
        BinOp::Div => V::Num(x.to_number() / y.to_number()),
        BinOp::Rem => V::Num(x.to_number() % y.to_number()),
        BinOp::In => {
            let key = x.to_primitive().to_js_string();
            match y {
                V::Ref(j) => V::Bool(has_key(j, &key)),
                V::Own(j) => V::Bool(has_key(j, &key)),
                V::Regex(_) => V::Bool(matches!(
                    key.as_str(),
                    "source" | "flags" | "global" | "lastIndex"
                )),
                other => {
                    return throw(format!(
                        "Cannot use 'in' operator to search for '{key}' in {}",
                        other.to_js_string()
                    ));
                }
            }
        }
    })
}

fn has_key(j: &Json, key: &str) -> bool {
    match j {
        Json::Object(m) => m.contains_key(key),
        Json::Array(a) => key == "length" || key.parse::<usize>().is_ok_and(|i| i < a.len()),
        _ => false,
    }
}
