//! Lexer and Pratt parser for the JavaScript expression subset.
//!
//! The parser distinguishes three outcomes: an expression of the subset, an expression that is
//! valid-looking JavaScript outside the subset (it needs the JS engine), and a syntax error with
//! its position.

use super::{BinOp, Expr, LogicOp, RegexLit, UnOp};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Punct(&'static str),
    Regex(String, String),
    /// Valid JavaScript that the subset does not cover (template literal, `=>`, ...).
    Foreign(&'static str),
    Eof,
}

/// Why an expression is not in the fast subset.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    /// JavaScript outside the subset: evaluate with the JS engine.
    NeedsJs(String),
    /// Not JavaScript at all: message and character offset.
    Syntax(String, usize),
}

const PUNCTS: &[&str] = &[
    "===", "!==", "**=", "...", "<<=", ">>=", ">>>", "??=", "&&=", "||=", "==", "!=", "<=", ">=",
    "&&", "||", "??", "?.", "=>", "++", "--", "+=", "-=", "*=", "/=", "%=", "**", "<<", ">>", "&=",
    "|=", "^=", "(", ")", "[", "]", "{", "}", ".", ",", ":", "?", "!", "<", ">", "+", "-", "*",
    "/", "%", "=", "&", "|", "^", "~", ";",
];

/// Tokens of JavaScript that the subset does not evaluate.
const FOREIGN_PUNCTS: &[&str] = &[
    "**=", "...", "<<=", ">>=", ">>>", "??=", "&&=", "||=", "=>", "++", "--", "+=", "-=", "*=",
    "/=", "%=", "**", "<<", ">>", "&=", "|=", "^=", "=", "&", "|", "^", "~", ";", ",",
];

const FOREIGN_WORDS: &[&str] = &[
    "function",
    "new",
    "this",
    "void",
    "delete",
    "instanceof",
    "class",
    "let",
    "var",
    "const",
    "return",
    "if",
    "for",
    "while",
    "do",
    "switch",
    "throw",
    "try",
    "async",
    "await",
    "yield",
    "super",
    "import",
    "export",
];

struct Lexer<'s> {
    src: &'s str,
    pos: usize,
    /// Whether a `/` here starts a regex literal (an operand is expected).
    regex_ok: bool,
}

impl<'s> Lexer<'s> {
    fn next(&mut self) -> Result<(Tok, usize), ParseError> {
        let bytes = self.src.as_bytes();
        while self.pos < bytes.len() {
            let c = self.src[self.pos..].chars().next().unwrap();
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else if self.src[self.pos..].starts_with("//")
                || self.src[self.pos..].starts_with("/*")
            {
                return Err(ParseError::NeedsJs("comment".into()));
            } else {
                break;
            }
        }
        let start = self.pos;
        if self.pos >= bytes.len() {
            return Ok((Tok::Eof, start));
        }
        let rest = &self.src[self.pos..];
        let c = rest.chars().next().unwrap();
        let tok = if c.is_ascii_digit()
            || (c == '.' && rest[1..].starts_with(|d: char| d.is_ascii_digit()))
        {
            self.number()?
        } else if c == '"' || c == '\'' {
            self.string(c)?
        } else if c == '`' {
            return Err(ParseError::NeedsJs("template literal".into()));
        } else if c == '_' || c == '$' || c.is_alphabetic() {
            let len = rest
                .char_indices()
                .find(|(_, ch)| !(ch.is_alphanumeric() || *ch == '_' || *ch == '$'))
                .map(|(i, _)| i)
                .unwrap_or(rest.len());
            self.pos += len;
            let word = &rest[..len];
            if FOREIGN_WORDS.contains(&word) {
                Tok::Foreign(FOREIGN_WORDS.iter().find(|w| **w == word).unwrap())
            } else {
                Tok::Ident(word.to_string())
            }
        } else if c == '/' && self.regex_ok {
            self.regex()?
        } else if let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) {
            // `?.` followed by a digit is `?` then a number (`a ?.5 : 1`).
            if *p == "?." && rest[2..].starts_with(|d: char| d.is_ascii_digit()) {
                self.pos += 1;
                Tok::Punct("?")
            } else {
                self.pos += p.len();
                if FOREIGN_PUNCTS.contains(p) {
                    Tok::Foreign(p)
                } else {
                    Tok::Punct(p)
                }
            }
        } else {
            return Err(ParseError::Syntax(
                format!("unexpected character '{c}'"),
                start,
            ));
        };
        self.regex_ok = !matches!(
            tok,
            Tok::Num(_)
                | Tok::Str(_)
                | Tok::Ident(_)
                | Tok::Regex(..)
                | Tok::Punct(")" | "]" | "}")
        );
        Ok((tok, start))
    }

    fn number(&mut self) -> Result<Tok, ParseError> {
        let rest = &self.src[self.pos..];
        let b = rest.as_bytes();
        if b.len() > 1 && b[0] == b'0' && matches!(b[1], b'x' | b'X' | b'o' | b'O' | b'b' | b'B') {
            let radix = match b[1] {
                b'x' | b'X' => 16,
                b'o' | b'O' => 8,
                _ => 2,
            };
            let len = 2 + rest[2..].chars().take_while(|c| c.is_digit(radix)).count();
            self.pos += len;
            let v = u128::from_str_radix(&rest[2..len], radix)
                .map_err(|_| ParseError::Syntax("invalid number".into(), self.pos - len))?;
            return Ok(Tok::Num(v as f64));
        }
        let mut len = 0;
        let mut seen_dot = false;
        let mut seen_e = false;
        while len < b.len() {
            let ch = b[len];
            if ch.is_ascii_digit() {
                len += 1;
            } else if ch == b'.' && !seen_dot && !seen_e {
                seen_dot = true;
                len += 1;
            } else if (ch == b'e' || ch == b'E') && !seen_e {
                seen_e = true;
                len += 1;
                if len < b.len() && (b[len] == b'+' || b[len] == b'-') {
                    len += 1;
                }
            } else if ch == b'_' {
                return Err(ParseError::NeedsJs("numeric separator".into()));
            } else {
                break;
            }
        }
        if len < b.len() && (b[len] == b'n') {
            return Err(ParseError::NeedsJs("BigInt literal".into()));
        }
        if len < b.len() && (b[len].is_ascii_alphabetic() || b[len] == b'$' || b[len] == b'_') {
            return Err(ParseError::Syntax(
                "identifier starts immediately after numeric literal".into(),
                self.pos + len,
            ));
        }
        let text = &rest[..len];
        self.pos += len;
        text.parse::<f64>()
            .map(Tok::Num)
            .map_err(|_| ParseError::Syntax(format!("invalid number '{text}'"), self.pos - len))
    }

    fn string(&mut self, quote: char) -> Result<Tok, ParseError> {
        let start = self.pos;
        let mut out = String::new();
        let mut chars = self.src[self.pos + 1..].char_indices();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                self.pos = start + 1 + i + 1;
                return Ok(Tok::Str(out));
            }
            if c == '\n' {
                break;
            }
            if c == '\\' {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    '0' => out.push('\0'),
                    '\n' => {}
                    'x' | 'u' => return Err(ParseError::NeedsJs("escape sequence".into())),
                    other => out.push(other),
                }
            } else {
                out.push(c);
            }
        }
        Err(ParseError::Syntax(
            "unterminated string literal".into(),
            start,
        ))
    }

    fn regex(&mut self) -> Result<Tok, ParseError> {
        let start = self.pos;
        let mut in_class = false;
        let mut escaped = false;
        let body_start = self.pos + 1;
        for (i, c) in self.src[body_start..].char_indices() {
            if c == '\n' {
                break;
            }
            if escaped {
                escaped = false;
                continue;
            }
            match c {
                '\\' => escaped = true,
                '[' => in_class = true,
                ']' => in_class = false,
                '/' if !in_class => {
                    let body = self.src[body_start..body_start + i].to_string();
                    let after = body_start + i + 1;
                    let flen = self.src[after..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphabetic())
                        .count();
                    let flags = self.src[after..after + flen].to_string();
                    self.pos = after + flen;
                    return Ok(Tok::Regex(body, flags));
                }
                _ => {}
            }
        }
        Err(ParseError::Syntax(
            "unterminated regular expression".into(),
            start,
        ))
    }
}

struct Parser<'s> {
    lex: Lexer<'s>,
    tok: Tok,
    at: usize,
    /// Recursion depth of the parser (parentheses count here, not in the tree's height).
    depth: u32,
}

/// How deep an expression may nest, both as recursion of the parser and as the height of
/// the tree it builds (`1+1+…` is flat text but a tree as tall as it has terms). Default 200;
/// bots never come close. Every walk of an [`Expr`] (evaluation, clone, drop, comparison)
/// recurses once per level, so this bounds their stack use; a malicious bot could otherwise
/// send a 200,000-term sum that overflows the stack of the thread that compiles, stores or
/// evaluates it.
pub const MAX_DEPTH: u32 = 200;

/// The longest expression accepted, in bytes of source. Default 64 KiB (real conditions are
/// well under 1 KiB); parsing is linear, so this bounds the time and memory of one
/// expression, and of its stored form, to a few hundred KiB.
pub const MAX_EXPR_LEN: usize = 64 * 1024;

/// The error for a tree or recursion deeper than [`MAX_DEPTH`].
fn too_deep(at: usize) -> ParseError {
    ParseError::Syntax(
        format!("expression nested more than {MAX_DEPTH} levels deep"),
        at,
    )
}

/// The height of a node whose tallest child is `child` high.
pub(crate) fn height(child: u32, at: usize) -> Result<u32, ParseError> {
    let h = child + 1;
    if h > MAX_DEPTH {
        return Err(too_deep(at));
    }
    Ok(h)
}

/// Parses one expression of the subset.
///
/// The tree is never taller than [`MAX_DEPTH`]: the height is checked as each node is built,
/// so a too-tall tree is never constructed (dropping it would itself overflow).
pub fn parse(src: &str) -> Result<Expr, ParseError> {
    if src.len() > MAX_EXPR_LEN {
        let mut cut = MAX_EXPR_LEN;
        while !src.is_char_boundary(cut) {
            cut -= 1;
        }
        return Err(ParseError::Syntax(
            format!("expression longer than {MAX_EXPR_LEN} bytes"),
            cut,
        ));
    }
    let mut lex = Lexer {
        src,
        pos: 0,
        regex_ok: true,
    };
    let (tok, at) = lex.next()?;
    let mut p = Parser {
        lex,
        tok,
        at,
        depth: 0,
    };
    if p.tok == Tok::Eof {
        return Err(ParseError::Syntax("empty expression".into(), 0));
    }
    let (e, _) = p.expr(0)?;
    match &p.tok {
        Tok::Eof => Ok(e),
        t => Err(p.unexpected(t.clone())),
    }
}

fn binding_power(t: &Tok) -> Option<(u8, u8)> {
    let Tok::Punct(p) = t else {
        if let Tok::Ident(w) = t {
            if w == "in" {
                return Some((10, 11));
            }
        }
        return None;
    };
    Some(match *p {
        "??" => (3, 4),
        "||" => (4, 5),
        "&&" => (5, 6),
        "==" | "!=" | "===" | "!==" => (8, 9),
        "<" | ">" | "<=" | ">=" => (10, 11),
        "+" | "-" => (12, 13),
        "*" | "/" | "%" => (14, 15),
        _ => return None,
    })
}

impl Parser<'_> {
    fn bump(&mut self) -> Result<Tok, ParseError> {
        let (next, at) = self.lex.next()?;
        self.at = at;
        Ok(std::mem::replace(&mut self.tok, next))
    }

    fn unexpected(&self, t: Tok) -> ParseError {
        match t {
            Tok::Foreign(w) => ParseError::NeedsJs(format!("'{w}'")),
            Tok::Eof => ParseError::Syntax("unexpected end of expression".into(), self.at),
            Tok::Punct(p) => ParseError::Syntax(format!("unexpected '{p}'"), self.at),
            Tok::Ident(w) => ParseError::Syntax(format!("unexpected identifier '{w}'"), self.at),
            Tok::Num(_) | Tok::Str(_) | Tok::Regex(..) => {
                ParseError::Syntax("unexpected literal".into(), self.at)
            }
        }
    }

    fn expect(&mut self, p: &'static str) -> Result<(), ParseError> {
        if self.tok == Tok::Punct(p) {
            self.bump()?;
            Ok(())
        } else {
            Err(self.unexpected(self.tok.clone()))
        }
    }

    /// An expression and the height of its tree.
    fn expr(&mut self, min_bp: u8) -> Result<(Expr, u32), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(too_deep(self.at));
        }
        let out = self.expr_inner(min_bp);
        self.depth -= 1;
        out
    }

    fn expr_inner(&mut self, min_bp: u8) -> Result<(Expr, u32), ParseError> {
        let (mut lhs, mut lh) = self.unary()?;
        loop {
            if self.tok == Tok::Punct("?") {
                if min_bp > 2 {
                    break;
                }
                self.bump()?;
                let (then, th) = self.expr(0)?;
                self.expect(":")?;
                let (other, oh) = self.expr(2)?;
                lh = height(lh.max(th).max(oh), self.at)?;
                lhs = Expr::Cond(Box::new(lhs), Box::new(then), Box::new(other));
                continue;
            }
            let Some((l, r)) = binding_power(&self.tok) else {
                break;
            };
            if l < min_bp {
                break;
            }
            let op = self.bump()?;
            let (rhs, rh) = self.expr(r)?;
            // A left-deep chain (`1+1+…`) loops here without recursing: its height is
            // checked all the same.
            lh = height(lh.max(rh), self.at)?;
            let name = match &op {
                Tok::Punct(p) => *p,
                _ => "in",
            };
            lhs = match name {
                "&&" => Expr::Logic(LogicOp::And, Box::new(lhs), Box::new(rhs)),
                "||" => Expr::Logic(LogicOp::Or, Box::new(lhs), Box::new(rhs)),
                "??" => Expr::Logic(LogicOp::Nullish, Box::new(lhs), Box::new(rhs)),
                _ => {
                    let op = match name {
                        "==" => BinOp::Eq,
                        "!=" => BinOp::Ne,
                        "===" => BinOp::StrictEq,
                        "!==" => BinOp::StrictNe,
                        "<" => BinOp::Lt,
                        ">" => BinOp::Gt,
                        "<=" => BinOp::Le,
                        ">=" => BinOp::Ge,
                        "+" => BinOp::Add,
                        "-" => BinOp::Sub,
                        "*" => BinOp::Mul,
                        "/" => BinOp::Div,
                        "%" => BinOp::Rem,
                        _ => BinOp::In,
                    };
                    Expr::Bin(op, Box::new(lhs), Box::new(rhs))
                }
            };
        }
        Ok((lhs, lh))
    }

    fn unary(&mut self) -> Result<(Expr, u32), ParseError> {
        let op = match &self.tok {
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            Tok::Ident(w) if w == "typeof" => Some(UnOp::TypeOf),
            _ => None,
        };
        if let Some(op) = op {
            self.bump()?;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(too_deep(self.at));
            }
            let e = self.unary();
            self.depth -= 1;
            let (e, h) = e?;
            return Ok((Expr::Unary(op, Box::new(e)), height(h, self.at)?));
        }
        let (prim, h) = self.primary()?;
        self.postfix(prim, h)
    }

    /// Member, index and call chains (`a.b.c`, `a[0][0]`, `f()()`) loop here without
    /// recursing; each link adds a level to the tree, checked like any other.
    fn postfix(&mut self, mut e: Expr, mut h: u32) -> Result<(Expr, u32), ParseError> {
        loop {
            match &self.tok {
                Tok::Punct(".") | Tok::Punct("?.") => {
                    let optional = self.tok == Tok::Punct("?.");
                    self.bump()?;
                    match self.bump()? {
                        Tok::Ident(name) => {
                            if self.tok == Tok::Punct("(") {
                                let (args, ah) = self.args()?;
                                h = height(h.max(ah), self.at)?;
                                e = Expr::Method(Box::new(e), name, args, optional);
                            } else {
                                h = height(h, self.at)?;
                                e = Expr::Member(Box::new(e), name, optional);
                            }
                        }
                        Tok::Foreign(w) => {
                            // Keywords are valid property names (`a.new`, `x.delete`).
                            if self.tok == Tok::Punct("(") {
                                return Err(ParseError::NeedsJs(format!("method '{w}'")));
                            }
                            h = height(h, self.at)?;
                            e = Expr::Member(Box::new(e), w.to_string(), optional);
                        }
                        Tok::Punct("[") if optional => {
                            let (idx, ih) = self.expr(0)?;
                            self.expect("]")?;
                            h = height(h.max(ih), self.at)?;
                            e = Expr::Index(Box::new(e), Box::new(idx), true);
                        }
                        Tok::Punct("(") if optional => {
                            return Err(ParseError::NeedsJs("optional call".into()));
                        }
                        t => return Err(self.unexpected(t)),
                    }
                }
                Tok::Punct("[") => {
                    self.bump()?;
                    let (idx, ih) = self.expr(0)?;
                    self.expect("]")?;
                    h = height(h.max(ih), self.at)?;
                    e = Expr::Index(Box::new(e), Box::new(idx), false);
                }
                Tok::Punct("(") => {
                    let (args, ah) = self.args()?;
                    match e {
                        Expr::Ident(name) => {
                            h = height(h.max(ah), self.at)?;
                            e = Expr::Call(name, args)
                        }
                        _ => return Err(ParseError::NeedsJs("call of a computed function".into())),
                    }
                }
                _ => return Ok((e, h)),
            }
        }
    }

    /// Call arguments and the height of the tallest.
    fn args(&mut self) -> Result<(Vec<Expr>, u32), ParseError> {
        self.expect("(")?;
        let mut args = Vec::new();
        let mut h = 0;
        while self.tok != Tok::Punct(")") {
            let (a, ah) = self.expr(0)?;
            args.push(a);
            h = h.max(ah);
            match &self.tok {
                Tok::Foreign(",") => {
                    self.bump()?;
                }
                Tok::Punct(")") => {}
                t => return Err(self.unexpected(t.clone())),
            }
        }
        self.bump()?;
        Ok((args, h))
    }

    /// A primary expression and its height (literals and names are 1 high).
    fn primary(&mut self) -> Result<(Expr, u32), ParseError> {
        let at = self.at;
        let leaf = match self.bump()? {
            Tok::Num(n) => Expr::Num(n),
            Tok::Str(s) => Expr::Str(s),
            Tok::Regex(source, flags) => {
                let lit = RegexLit::new(&source, &flags)
                    .map_err(|e| ParseError::NeedsJs(format!("regular expression: {e}")))?;
                Expr::Regex(Arc::new(lit))
            }
            Tok::Ident(w) => match w.as_str() {
                "true" => Expr::Bool(true),
                "false" => Expr::Bool(false),
                "null" => Expr::Null,
                "undefined" => Expr::Undefined,
                _ => Expr::Ident(w),
            },
            Tok::Punct("(") => {
                if self.tok == Tok::Punct(")") {
                    return Err(ParseError::NeedsJs("arrow function".into()));
                }
                let e = self.expr(0)?;
                match &self.tok {
                    Tok::Punct(")") => {}
                    Tok::Foreign(",") => return Err(ParseError::NeedsJs("comma operator".into())),
                    t => return Err(self.unexpected(t.clone())),
                }
                self.bump()?;
                if self.tok == Tok::Foreign("=>") {
                    return Err(ParseError::NeedsJs("arrow function".into()));
                }
                // Parentheses add no node: the height is the inner expression's.
                return Ok(e);
            }
            Tok::Punct("[") => {
                let mut items = Vec::new();
                let mut h = 0;
                while self.tok != Tok::Punct("]") {
                    let (it, ih) = self.expr(0)?;
                    items.push(it);
                    h = h.max(ih);
                    match &self.tok {
                        Tok::Foreign(",") => {
                            self.bump()?;
                        }
                        Tok::Punct("]") => {}
                        t => return Err(self.unexpected(t.clone())),
                    }
                }
                self.bump()?;
                return Ok((Expr::Array(items), height(h, self.at)?));
            }
            Tok::Punct("{") => {
                let mut props = Vec::new();
                let mut h = 0;
                while self.tok != Tok::Punct("}") {
                    let key = match self.bump()? {
                        Tok::Ident(k) => k,
                        Tok::Str(k) => k,
                        Tok::Num(n) => crate::value::number_to_string(n),
                        Tok::Foreign(w) => w.to_string(),
                        t => return Err(self.unexpected(t)),
                    };
                    if self.tok != Tok::Punct(":") {
                        return Err(ParseError::NeedsJs("object shorthand".into()));
                    }
                    self.bump()?;
                    let (v, vh) = self.expr(0)?;
                    props.push((key, v));
                    h = h.max(vh);
                    match &self.tok {
                        Tok::Foreign(",") => {
                            self.bump()?;
                        }
                        Tok::Punct("}") => {}
                        t => return Err(self.unexpected(t.clone())),
                    }
                }
                self.bump()?;
                return Ok((Expr::Object(props), height(h, self.at)?));
            }
            Tok::Eof => {
                return Err(ParseError::Syntax(
                    "unexpected end of expression".into(),
                    at,
                ));
            }
            t => {
                self.at = at;
                return Err(self.unexpected(t));
            }
        };
        Ok((leaf, 1))
    }
}
