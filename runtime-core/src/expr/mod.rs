//! Expressions: conditions, mapping values and `$(...)` contents.
//!
//! Every expression is parsed once, when the bot is compiled, into a [`CompiledExpr`]. Most bot
//! expressions fall in a JavaScript subset that [`eval`] evaluates directly with JavaScript
//! semantics; the rest are marked [`ExprKind::Js`] and go to the JS engine through the host.

mod eval;
mod methods;
mod parse;
mod stored;

pub use eval::{Env, EvalError, eval};
pub use parse::{MAX_DEPTH, MAX_EXPR_LEN, ParseError, is_limit, parse};

pub use crate::regex::RegexLit;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Parsed expression of the subset.
///
/// Never taller than [`MAX_DEPTH`] (the parser and the deserialiser check it), so the derived
/// walks (clone, drop, comparison, debug) and [`eval`] recurse at most that deep. It is stored
/// flat, as its nodes in postfix order (see `stored.rs`): serde walks it without recursion,
/// and the stored bot stays within the nesting that serde_json reads back.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Regex(Arc<RegexLit>),
    Ident(String),
    /// `obj.name` / `obj?.name`
    Member(Box<Expr>, String, bool),
    /// `obj[idx]` / `obj?.[idx]`
    Index(Box<Expr>, Box<Expr>, bool),
    /// `obj.name(args)` / `obj?.name(args)`
    Method(Box<Expr>, String, Vec<Expr>, bool),
    /// `name(args)` for the global functions of the subset.
    Call(String, Vec<Expr>),
    Unary(UnOp, Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Logic(LogicOp, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Array(Vec<Expr>),
    Object(Vec<(String, Expr)>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UnOp {
    Not,
    Neg,
    Plus,
    TypeOf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinOp {
    Eq,
    Ne,
    StrictEq,
    StrictNe,
    Lt,
    Gt,
    Le,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    In,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogicOp {
    And,
    Or,
    Nullish,
}

/// An expression as stored in a compiled bot: its source and how it is evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompiledExpr {
    pub src: String,
    pub kind: ExprKind,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ExprKind {
    /// Evaluated by the fast evaluator.
    Fast(Expr),
    /// Outside the subset: evaluated by the JS engine.
    Js,
    /// A syntax error found when the bot was compiled; evaluating it is a user error.
    Invalid(String),
}

impl CompiledExpr {
    pub fn new(src: &str) -> CompiledExpr {
        let kind = match parse(src) {
            Ok(e) => ExprKind::Fast(e),
            Err(ParseError::NeedsJs(_)) => ExprKind::Js,
            Err(ParseError::Syntax(msg, at)) => {
                ExprKind::Invalid(format!("{msg} at column {}", char_column(src, at)))
            }
        };
        CompiledExpr {
            src: src.to_string(),
            kind,
        }
    }

    /// Whether the expression was refused for a limit ([`MAX_DEPTH`], [`MAX_EXPR_LEN`]).
    pub fn over_limit(&self) -> bool {
        matches!(&self.kind, ExprKind::Invalid(m) if is_limit(m))
    }

    /// An expression that always yields this literal (non-string YAML scalars in mappings).
    pub fn literal(v: &serde_json::Value) -> CompiledExpr {
        let e = match v {
            serde_json::Value::Null => Expr::Null,
            serde_json::Value::Bool(b) => Expr::Bool(*b),
            serde_json::Value::Number(n) => Expr::Num(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Expr::Str(s.clone()),
            other => {
                return CompiledExpr {
                    src: other.to_string(),
                    kind: ExprKind::Js,
                };
            }
        };
        CompiledExpr {
            src: v.to_string(),
            kind: ExprKind::Fast(e),
        }
    }
}

fn char_column(src: &str, byte: usize) -> usize {
    src[..byte.min(src.len())].chars().count() + 1
}
