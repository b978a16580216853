//! The stored form of an [`Expr`]: its nodes in postfix order, one flat list.
//!
//! A derived (nested) form would serialise and deserialise by recursion, one level per node of
//! the tree, and nest two to three JSON levels per node: `1+1+…` with 60 terms would already
//! exceed the 128 levels serde_json reads back, so the host could not load the bot it had
//! just stored. The flat form is written and read with explicit stacks, nests four levels
//! whatever the tree, and the reader refuses a tree taller than [`MAX_DEPTH`] like the parser.
//!
//! Bots stored before the flat form (the derived, nested one) still load.

use super::parse::{MAX_DEPTH, height};
use super::{BinOp, Expr, LogicOp, RegexLit, UnOp};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};
use std::fmt;
use std::sync::Arc;

/// One node as written: its own data and how many children it takes from the stack.
#[derive(serde::Serialize)]
enum OpOut<'a> {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    /// NaN and the infinities, which JSON numbers cannot hold (`1e999` parses to Infinity).
    Special(&'a str),
    Str(&'a str),
    Regex(&'a RegexLit),
    Ident(&'a str),
    Member(&'a str, bool),
    Index(bool),
    /// Name, number of arguments (after the receiver), optional.
    Method(&'a str, usize, bool),
    Call(&'a str, usize),
    Unary(UnOp),
    Bin(BinOp),
    Logic(LogicOp),
    Cond,
    Array(usize),
    Object(Vec<&'a str>),
}

/// [`OpOut`] as read back.
#[derive(Deserialize)]
enum OpIn {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    Special(String),
    Str(String),
    Regex(Arc<RegexLit>),
    Ident(String),
    Member(String, bool),
    Index(bool),
    Method(String, usize, bool),
    Call(String, usize),
    Unary(UnOp),
    Bin(BinOp),
    Logic(LogicOp),
    Cond,
    Array(usize),
    Object(Vec<String>),
}

fn op_of(e: &Expr) -> OpOut<'_> {
    match e {
        Expr::Undefined => OpOut::Undefined,
        Expr::Null => OpOut::Null,
        Expr::Bool(b) => OpOut::Bool(*b),
        Expr::Num(n) if n.is_nan() => OpOut::Special("NaN"),
        Expr::Num(n) if n.is_infinite() => {
            OpOut::Special(if *n > 0.0 { "Infinity" } else { "-Infinity" })
        }
        Expr::Num(n) => OpOut::Num(*n),
        Expr::Str(s) => OpOut::Str(s),
        Expr::Regex(r) => OpOut::Regex(r),
        Expr::Ident(n) => OpOut::Ident(n),
        Expr::Member(_, name, opt) => OpOut::Member(name, *opt),
        Expr::Index(_, _, opt) => OpOut::Index(*opt),
        Expr::Method(_, name, args, opt) => OpOut::Method(name, args.len(), *opt),
        Expr::Call(name, args) => OpOut::Call(name, args.len()),
        Expr::Unary(op, _) => OpOut::Unary(*op),
        Expr::Bin(op, _, _) => OpOut::Bin(*op),
        Expr::Logic(op, _, _) => OpOut::Logic(*op),
        Expr::Cond(..) => OpOut::Cond,
        Expr::Array(items) => OpOut::Array(items.len()),
        Expr::Object(props) => OpOut::Object(props.iter().map(|(k, _)| k.as_str()).collect()),
    }
}

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        // Postfix order without recursion: a node is written after its children, which are
        // pushed in reverse so that they come out in order.
        enum Visit<'a> {
            Enter(&'a Expr),
            Leave(&'a Expr),
        }
        let mut ops = Vec::new();
        let mut stack = vec![Visit::Enter(self)];
        while let Some(v) = stack.pop() {
            let e = match v {
                Visit::Leave(e) => {
                    ops.push(op_of(e));
                    continue;
                }
                Visit::Enter(e) => e,
            };
            stack.push(Visit::Leave(e));
            match e {
                Expr::Member(o, ..) | Expr::Unary(_, o) => stack.push(Visit::Enter(o)),
                Expr::Index(o, i, _) => {
                    stack.push(Visit::Enter(i));
                    stack.push(Visit::Enter(o));
                }
                Expr::Method(o, _, args, _) => {
                    stack.extend(args.iter().rev().map(Visit::Enter));
                    stack.push(Visit::Enter(o));
                }
                Expr::Call(_, args) | Expr::Array(args) => {
                    stack.extend(args.iter().rev().map(Visit::Enter))
                }
                Expr::Bin(_, a, b) | Expr::Logic(_, a, b) => {
                    stack.push(Visit::Enter(b));
                    stack.push(Visit::Enter(a));
                }
                Expr::Cond(c, a, b) => {
                    stack.push(Visit::Enter(b));
                    stack.push(Visit::Enter(a));
                    stack.push(Visit::Enter(c));
                }
                Expr::Object(props) => {
                    stack.extend(props.iter().rev().map(|(_, v)| Visit::Enter(v)))
                }
                Expr::Undefined
                | Expr::Null
                | Expr::Bool(_)
                | Expr::Num(_)
                | Expr::Str(_)
                | Expr::Regex(_)
                | Expr::Ident(_) => {}
            }
        }
        ser.collect_seq(ops)
    }
}

/// Builds the node of `op` over the last children on `stack`.
fn build(op: OpIn, stack: &mut Vec<(Expr, u32)>) -> Result<(Expr, u32), String> {
    fn take(stack: &mut Vec<(Expr, u32)>, n: usize) -> Result<(Vec<Expr>, u32), String> {
        if n > stack.len() {
            return Err("malformed stored expression: a node lacks operands".into());
        }
        let mut h = 0;
        let kids = stack
            .drain(stack.len() - n..)
            .map(|(e, eh)| {
                h = h.max(eh);
                e
            })
            .collect();
        Ok((kids, h))
    }
    let leaf = |e| Ok((e, 1));
    let (e, h) = match op {
        OpIn::Undefined => return leaf(Expr::Undefined),
        OpIn::Null => return leaf(Expr::Null),
        OpIn::Bool(b) => return leaf(Expr::Bool(b)),
        OpIn::Num(n) => return leaf(Expr::Num(n)),
        OpIn::Special(s) => {
            return leaf(Expr::Num(match s.as_str() {
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                _ => f64::NAN,
            }));
        }
        OpIn::Str(s) => return leaf(Expr::Str(s)),
        OpIn::Regex(r) => return leaf(Expr::Regex(r)),
        OpIn::Ident(n) => return leaf(Expr::Ident(n)),
        OpIn::Member(name, opt) => {
            let (mut k, h) = take(stack, 1)?;
            (Expr::Member(Box::new(k.remove(0)), name, opt), h)
        }
        OpIn::Index(opt) => {
            let (k, h) = take(stack, 2)?;
            let [o, i]: [Expr; 2] = k.try_into().expect("two operands");
            (Expr::Index(Box::new(o), Box::new(i), opt), h)
        }
        OpIn::Method(name, n, opt) => {
            let (mut k, h) = take(stack, n.saturating_add(1))?;
            let recv = k.remove(0);
            (Expr::Method(Box::new(recv), name, k, opt), h)
        }
        OpIn::Call(name, n) => {
            let (k, h) = take(stack, n)?;
            (Expr::Call(name, k), h)
        }
        OpIn::Unary(op) => {
            let (mut k, h) = take(stack, 1)?;
            (Expr::Unary(op, Box::new(k.remove(0))), h)
        }
        OpIn::Bin(op) => {
            let (k, h) = take(stack, 2)?;
            let [a, b]: [Expr; 2] = k.try_into().expect("two operands");
            (Expr::Bin(op, Box::new(a), Box::new(b)), h)
        }
        OpIn::Logic(op) => {
            let (k, h) = take(stack, 2)?;
            let [a, b]: [Expr; 2] = k.try_into().expect("two operands");
            (Expr::Logic(op, Box::new(a), Box::new(b)), h)
        }
        OpIn::Cond => {
            let (k, h) = take(stack, 3)?;
            let [c, a, b]: [Expr; 3] = k.try_into().expect("three operands");
            (Expr::Cond(Box::new(c), Box::new(a), Box::new(b)), h)
        }
        OpIn::Array(n) => {
            let (k, h) = take(stack, n)?;
            (Expr::Array(k), h)
        }
        OpIn::Object(keys) => {
            let (k, h) = take(stack, keys.len())?;
            (Expr::Object(keys.into_iter().zip(k).collect()), h)
        }
    };
    let h = height(h, 0).map_err(|_| too_tall())?;
    Ok((e, h))
}

fn too_tall() -> String {
    format!("stored expression nested more than {MAX_DEPTH} levels deep")
}

impl<'de> Deserialize<'de> for Expr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Expr, D::Error> {
        d.deserialize_any(ExprVisitor)
    }
}

struct ExprVisitor;

impl<'de> Visitor<'de> for ExprVisitor {
    type Value = Expr;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an expression (a list of nodes in postfix order)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Expr, A::Error> {
        let mut stack: Vec<(Expr, u32)> = Vec::new();
        while let Some(op) = seq.next_element::<OpIn>()? {
            let node = build(op, &mut stack).map_err(de::Error::custom)?;
            stack.push(node);
        }
        match (stack.pop(), stack.is_empty()) {
            (Some((e, _)), true) => Ok(e),
            _ => Err(de::Error::custom(
                "malformed stored expression: it must have exactly one root",
            )),
        }
    }

    // The nested form of bots stored before the flat one: `"Null"` or `{"Bin": [...]}`.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Expr, E> {
        let legacy = Legacy::deserialize(de::value::StrDeserializer::<E>::new(v))?;
        from_legacy(legacy).map(|(e, _)| e).map_err(E::custom)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Expr, A::Error> {
        let legacy = Legacy::deserialize(de::value::MapAccessDeserializer::new(map))?;
        from_legacy(legacy)
            .map(|(e, _)| e)
            .map_err(de::Error::custom)
    }
}

/// The nested form, as `#[derive(Deserialize)]` on [`Expr`] read it. Its depth is bounded by
/// the reader's own recursion limit (128 for serde_json), which it reaches before
/// [`MAX_DEPTH`].
#[derive(Deserialize)]
enum Legacy {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Regex(Arc<RegexLit>),
    Ident(String),
    Member(Box<Legacy>, String, bool),
    Index(Box<Legacy>, Box<Legacy>, bool),
    Method(Box<Legacy>, String, Vec<Legacy>, bool),
    Call(String, Vec<Legacy>),
    Unary(UnOp, Box<Legacy>),
    Bin(BinOp, Box<Legacy>, Box<Legacy>),
    Logic(LogicOp, Box<Legacy>, Box<Legacy>),
    Cond(Box<Legacy>, Box<Legacy>, Box<Legacy>),
    Array(Vec<Legacy>),
    Object(Vec<(String, Legacy)>),
}

fn from_legacy(l: Legacy) -> Result<(Expr, u32), String> {
    fn all(items: Vec<Legacy>) -> Result<(Vec<Expr>, u32), String> {
        let mut h = 0;
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            let (e, eh) = from_legacy(it)?;
            h = h.max(eh);
            out.push(e);
        }
        Ok((out, h))
    }
    let one = |b: Box<Legacy>| from_legacy(*b);
    let (e, h) = match l {
        Legacy::Undefined => return Ok((Expr::Undefined, 1)),
        Legacy::Null => return Ok((Expr::Null, 1)),
        Legacy::Bool(b) => return Ok((Expr::Bool(b), 1)),
        Legacy::Num(n) => return Ok((Expr::Num(n), 1)),
        Legacy::Str(s) => return Ok((Expr::Str(s), 1)),
        Legacy::Regex(r) => return Ok((Expr::Regex(r), 1)),
        Legacy::Ident(n) => return Ok((Expr::Ident(n), 1)),
        Legacy::Member(o, name, opt) => {
            let (o, h) = one(o)?;
            (Expr::Member(Box::new(o), name, opt), h)
        }
        Legacy::Index(o, i, opt) => {
            let ((o, oh), (i, ih)) = (one(o)?, one(i)?);
            (Expr::Index(Box::new(o), Box::new(i), opt), oh.max(ih))
        }
        Legacy::Method(o, name, args, opt) => {
            let ((o, oh), (args, ah)) = (one(o)?, all(args)?);
            (Expr::Method(Box::new(o), name, args, opt), oh.max(ah))
        }
        Legacy::Call(name, args) => {
            let (args, h) = all(args)?;
            (Expr::Call(name, args), h)
        }
        Legacy::Unary(op, x) => {
            let (x, h) = one(x)?;
            (Expr::Unary(op, Box::new(x)), h)
        }
        Legacy::Bin(op, a, b) => {
            let ((a, ah), (b, bh)) = (one(a)?, one(b)?);
            (Expr::Bin(op, Box::new(a), Box::new(b)), ah.max(bh))
        }
        Legacy::Logic(op, a, b) => {
            let ((a, ah), (b, bh)) = (one(a)?, one(b)?);
            (Expr::Logic(op, Box::new(a), Box::new(b)), ah.max(bh))
        }
        Legacy::Cond(c, a, b) => {
            let ((c, ch), (a, ah), (b, bh)) = (one(c)?, one(a)?, one(b)?);
            let e = Expr::Cond(Box::new(c), Box::new(a), Box::new(b));
            (e, ch.max(ah).max(bh))
        }
        Legacy::Array(items) => {
            let (items, h) = all(items)?;
            (Expr::Array(items), h)
        }
        Legacy::Object(props) => {
            let (keys, vals): (Vec<String>, Vec<Legacy>) = props.into_iter().unzip();
            let (vals, h) = all(vals)?;
            (Expr::Object(keys.into_iter().zip(vals).collect()), h)
        }
    };
    Ok((e, height(h, 0).map_err(|_| too_tall())?))
}
