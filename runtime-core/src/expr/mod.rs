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

use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};

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

/// A regular expression literal or NLU pattern, in ECMAScript syntax.
///
/// Translated to `fancy_regex` syntax (which adds look-around and back-references to the
/// `regex` crate) with JS's ASCII meaning of `\d`, `\w` and `\b`. Compiled lazily after
/// deserialisation.
#[derive(Debug, Serialize, Deserialize)]
pub struct RegexLit {
    pub source: String,
    pub flags: String,
    #[serde(skip)]
    compiled: OnceLock<Option<fancy_regex::Regex>>,
}

impl Clone for RegexLit {
    fn clone(&self) -> Self {
        RegexLit {
            source: self.source.clone(),
            flags: self.flags.clone(),
            compiled: OnceLock::new(),
        }
    }
}

impl PartialEq for RegexLit {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.flags == other.flags
    }
}

impl RegexLit {
    /// Checks and compiles a pattern; the error says why it cannot be used.
    pub fn new(source: &str, flags: &str) -> Result<RegexLit, String> {
        if let Some(f) = flags.chars().find(|c| !"gimsuy".contains(*c)) {
            return Err(format!("unknown flag '{f}'"));
        }
        if flags.contains('y') {
            return Err("sticky flag is not supported".into());
        }
        let re = compile_js_regex(source, flags)?;
        let lit = RegexLit {
            source: source.into(),
            flags: flags.into(),
            compiled: OnceLock::new(),
        };
        let _ = lit.compiled.set(Some(re));
        Ok(lit)
    }

    /// A copy that keeps the compiled pattern (a plain clone compiles it again on first use).
    pub fn share(&self) -> RegexLit {
        let copy = self.clone();
        if let Some(re) = self.compiled.get() {
            let _ = copy.compiled.set(re.clone());
        }
        copy
    }

    pub fn global(&self) -> bool {
        self.flags.contains('g')
    }

    /// The compiled pattern (`None` only if a stored pattern no longer compiles).
    pub fn regex(&self) -> Option<&fancy_regex::Regex> {
        self.compiled
            .get_or_init(|| compile_js_regex(&self.source, &self.flags).ok())
            .as_ref()
    }
}

/// Translates an ECMAScript pattern to fancy_regex syntax.
fn compile_js_regex(source: &str, flags: &str) -> Result<fancy_regex::Regex, String> {
    let mut out = String::with_capacity(source.len() + 8);
    let mut prefix = String::new();
    if flags.contains('i') {
        prefix.push('i');
    }
    if flags.contains('m') {
        prefix.push('m');
    }
    if flags.contains('s') {
        prefix.push('s');
    }
    if !prefix.is_empty() {
        out.push_str(&format!("(?{prefix})"));
    }
    let mut chars = source.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
                Some('D') => out.push_str(if in_class { "\\D" } else { "[^0-9]" }),
                Some('w') => out.push_str(if in_class {
                    "0-9A-Za-z_"
                } else {
                    "[0-9A-Za-z_]"
                }),
                Some('W') => out.push_str(if in_class { "\\W" } else { "[^0-9A-Za-z_]" }),
                Some('/') => out.push('/'),
                Some('-') => out.push_str("\\-"),
                Some('u') if chars.peek() == Some(&'{') => out.push_str("\\x"),
                Some('u') => {
                    let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                    out.push_str(&format!("\\x{{{hex}}}"));
                }
                Some('c') => return Err("control escapes are not supported".into()),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => return Err("pattern ends with a backslash".into()),
            },
            '[' if !in_class => {
                // JS `[]` matches nothing and `[^]` anything; the regex crate has neither.
                let mut look = chars.clone();
                if look.peek() == Some(&']') {
                    chars.next();
                    out.push_str("[^\\s\\S]");
                } else if look.next() == Some('^') && look.peek() == Some(&']') {
                    chars.next();
                    chars.next();
                    out.push_str("[\\s\\S]");
                } else {
                    in_class = true;
                    out.push('[');
                    if chars.peek() == Some(&'^') {
                        chars.next();
                        out.push('^');
                    }
                }
            }
            '[' => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '$' if !in_class && !flags.contains('m') => out.push_str("\\z"),
            '^' if !in_class && !flags.contains('m') => out.push_str("\\A"),
            '(' if chars.peek() == Some(&'?') => {
                // Named groups `(?<name>` are written `(?P<name>` in fancy_regex.
                out.push('(');
                chars.next();
                out.push('?');
                if chars.peek() == Some(&'<') {
                    let mut look = chars.clone();
                    look.next();
                    if !matches!(look.peek(), Some('=') | Some('!')) {
                        out.push('P');
                    }
                }
            }
            '&' | '~' | '|' if in_class => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    fancy_regex::Regex::new(&out).map_err(|e| e.to_string())
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
