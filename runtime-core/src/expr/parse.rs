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
    /// The first construct met outside the subset: the expression needs the JS engine, but
    /// parsing goes on to measure it.
    js: Option<String>,
}

/// How deep an expression may nest, both as recursion of the parser and as the height of
/// the tree it builds (`1+1+…` is flat text but a tree as tall as it has terms). Default 200;
/// bots never come close. Every walk of an [`Expr`] (evaluation, clone, drop, comparison)
/// recurses once per level, so this bounds their stack use; a malicious bot could otherwise
/// send a 200,000-term sum that overflows the stack of the thread that compiles, stores or
/// evaluates it.
pub const MAX_DEPTH: u32 = 200;

/// The longest expression accepted, in bytes of source. Default 64 KiB (real conditions are
/// well under 1 KiB). Parsing is linear; this bounds the memory of one expression's tree
/// (tens of bytes per byte of source) and of its stored form. Checked after the depth, so
/// that a deep expression is refused for its depth whatever its length.
pub const MAX_EXPR_LEN: usize = 64 * 1024;

const TOO_DEEP: &str = "expression nested more than";
const TOO_LONG: &str = "expression longer than";

/// The error for a tree or recursion deeper than [`MAX_DEPTH`].
fn too_deep(at: usize) -> ParseError {
    ParseError::Syntax(format!("{TOO_DEEP} {MAX_DEPTH} levels deep"), at)
}

/// Whether a syntax error's message is one of the limits (depth, length): the compiler
/// rejects a bot for those, where other syntax errors are warnings.
pub fn is_limit(message: &str) -> bool {
    message.starts_with(TOO_DEEP) || message.starts_with(TOO_LONG)
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
///
/// JavaScript outside the subset is measured too, as far as the subset's grammar can follow
/// it (operators, calls and member chains, `--`): parsing goes on past the first such
/// construct, so that `f()()()…` or `a ** a ** …` is refused for its depth like `1+1+…`,
/// rather than handed whole to the JS engine.
pub fn parse(src: &str) -> Result<Expr, ParseError> {
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
        js: None,
    };
    if p.tok == Tok::Eof {
        return Err(ParseError::Syntax("empty expression".into(), 0));
    }
    let parsed = p.expr(0).and_then(|(e, _)| match &p.tok {
        Tok::Eof => Ok(e),
        t => Err(p.unexpected(t.clone())),
    });
    let parsed = match (parsed, p.js.take()) {
        (Err(ParseError::Syntax(m, at)), _) if is_limit(&m) => Err(ParseError::Syntax(m, at)),
        // The first construct outside the subset decides, as if parsing had stopped there.
        (_, Some(why)) => Err(ParseError::NeedsJs(why)),
        (other, None) => other,
    };
    if src.len() > MAX_EXPR_LEN && !matches!(&parsed, Err(ParseError::Syntax(..))) {
        let mut cut = MAX_EXPR_LEN;
        while !src.is_char_boundary(cut) {
            cut -= 1;
        }
        return Err(ParseError::Syntax(
            format!("{TOO_LONG} {MAX_EXPR_LEN} bytes"),
            cut,
        ));
    }
    parsed
}

fn binding_power(t: &Tok) -> Option<(u8, u8)> {
    let Tok::Punct(p) = t else {
        if let Tok::Ident(w) = t
            && w == "in"
        {
            return Some((10, 11));
        }
        // Binary operators outside the subset, only to measure the expression (its tree
        // is not kept): assignments and arrows bind loosest, to the right.
        if let Tok::Foreign(f) = t {
            return Some(match *f {
                "**" => (16, 16),
                "<<" | ">>" | ">>>" => (11, 12),
                "&" | "|" | "^" => (7, 8),
                "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "**=" | "<<=" | ">>=" | "&=" | "|="
                | "^=" | "&&=" | "||=" | "??=" | "=>" => (1, 1),
                _ => return None,
            });
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

    // The functions on the recursion paths below are kept out of line and small: a level of
    // nesting costs the sum of their frames, and MAX_DEPTH levels must fit a small stack.
    fn expr_inner(&mut self, min_bp: u8) -> Result<(Expr, u32), ParseError> {
        let first = self.unary()?;
        self.operators(first, min_bp)
    }

    /// The binary and conditional operators after an operand.
    #[inline(never)]
    fn operators(&mut self, first: (Expr, u32), min_bp: u8) -> Result<(Expr, u32), ParseError> {
        let (mut lhs, mut lh) = first;
        loop {
            if self.tok == Tok::Punct("?") {
                if min_bp > 2 {
                    break;
                }
                (lhs, lh) = self.conditional(lhs, lh)?;
                continue;
            }
            let Some((l, r)) = binding_power(&self.tok) else {
                break;
            };
            if l < min_bp {
                break;
            }
            // A left-deep chain (`1+1+…`) loops here without recursing: its height is
            // checked all the same.
            (lhs, lh) = self.binary((lhs, lh), r)?;
        }
        Ok((lhs, lh))
    }

    /// The operator next and its right operand, whose operators bind at least `r`.
    #[inline(never)]
    fn binary(&mut self, (lhs, lh): (Expr, u32), r: u8) -> Result<(Expr, u32), ParseError> {
        // Noted before the next token is read: parsing stopped at the first construct
        // outside the subset would stop at this one.
        if let Tok::Foreign(f) = self.tok {
            self.outside(format!("'{f}'"));
        }
        let op = self.bump()?;
        let (rhs, rh) = self.expr(r)?;
        let h = height(lh.max(rh), self.at)?;
        Ok((binary_node(&op, lhs, rhs), h))
    }

    /// Notes a construct outside the subset; parsing goes on to measure the expression.
    fn outside(&mut self, why: String) {
        self.js.get_or_insert(why);
    }

    /// `cond ? then : other`, with `?` next.
    #[inline(never)]
    fn conditional(&mut self, cond: Expr, ch: u32) -> Result<(Expr, u32), ParseError> {
        self.bump()?;
        let (then, th) = self.expr(0)?;
        self.expect(":")?;
        let (other, oh) = self.expr(2)?;
        let h = height(ch.max(th).max(oh), self.at)?;
        Ok((
            Expr::Cond(Box::new(cond), Box::new(then), Box::new(other)),
            h,
        ))
    }

    fn unary(&mut self) -> Result<(Expr, u32), ParseError> {
        let (op, js) = match self.tok {
            Tok::Punct("!") => (Some(UnOp::Not), false),
            Tok::Punct("-") => (Some(UnOp::Neg), false),
            Tok::Punct("+") => (Some(UnOp::Plus), false),
            Tok::Ident(ref w) if w == "typeof" => (Some(UnOp::TypeOf), false),
            // `--x`, `++x`: JavaScript, measured as one more level (`-----…1` is these).
            Tok::Foreign("--" | "++") => (Some(UnOp::Neg), true),
            _ => (None, false),
        };
        match op {
            Some(op) => self.prefixed(op, js),
            None => self.operand(),
        }
    }

    /// A unary operator's operand (the operator is next; `js`: one outside the subset).
    #[inline(never)]
    fn prefixed(&mut self, op: UnOp, js: bool) -> Result<(Expr, u32), ParseError> {
        let tok = self.bump()?;
        if let (true, Tok::Foreign(f)) = (js, tok) {
            // Noted after the next token is read, as parsing stopped at the first construct
            // outside the subset would read it.
            self.outside(format!("'{f}'"));
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(too_deep(self.at));
        }
        let e = self.unary();
        self.depth -= 1;
        let (e, h) = e?;
        Ok((Expr::Unary(op, Box::new(e)), height(h, self.at)?))
    }

    /// A primary expression and its member, index and call chain (`a.b.c`, `a[0][0]`,
    /// `f(x)`): the chain loops here without recursing; each link adds a level to the
    /// tree, checked like any other. Links update `e` in place, which keeps this frame,
    /// on the path of every nesting, small.
    #[inline(never)]
    fn operand(&mut self) -> Result<(Expr, u32), ParseError> {
        let mut e = self.primary()?;
        loop {
            match &self.tok {
                Tok::Punct(".") | Tok::Punct("?.") => self.dot(&mut e)?,
                Tok::Punct("[") => {
                    self.bump()?;
                    self.index(&mut e, false)?
                }
                Tok::Punct("(") => self.call(&mut e)?,
                _ => return Ok(e),
            }
        }
    }

    /// `.name`, `.name(args)`, `?.name`, `?.[idx]` after `e`.
    #[inline(never)]
    fn dot(&mut self, e: &mut (Expr, u32)) -> Result<(), ParseError> {
        let optional = self.tok == Tok::Punct("?.");
        self.bump()?;
        let name = match self.bump()? {
            Tok::Ident(name) => name,
            Tok::Foreign(w) => {
                // Keywords are valid property names (`a.new`, `x.delete`).
                if self.tok == Tok::Punct("(") {
                    self.outside(format!("method '{w}'"));
                }
                w.to_string()
            }
            Tok::Punct("[") if optional => return self.index(e, true),
            Tok::Punct("(") if optional => {
                // `f?.(x)`: back to the `(` (the lexer is past it), measured as a call.
                self.outside("optional call".into());
                return self.call_args(e);
            }
            t => return Err(self.unexpected(t)),
        };
        let (args, ah) = if self.tok == Tok::Punct("(") {
            let (args, ah) = self.args()?;
            (Some(args), ah)
        } else {
            (None, 0)
        };
        let h = height(e.1.max(ah), self.at)?;
        let obj = Box::new(std::mem::replace(&mut e.0, Expr::Null));
        e.0 = match args {
            Some(args) => Expr::Method(obj, name, args, optional),
            None => Expr::Member(obj, name, optional),
        };
        e.1 = h;
        Ok(())
    }

    /// `[idx]` after `e`, the `[` read.
    #[inline(never)]
    fn index(&mut self, e: &mut (Expr, u32), optional: bool) -> Result<(), ParseError> {
        let (idx, ih) = self.expr(0)?;
        self.expect("]")?;
        e.1 = height(e.1.max(ih), self.at)?;
        let obj = Box::new(std::mem::replace(&mut e.0, Expr::Null));
        e.0 = Expr::Index(obj, Box::new(idx), optional);
        Ok(())
    }

    /// `(args)` after `e`: a call of a global function of the subset.
    #[inline(never)]
    fn call(&mut self, e: &mut (Expr, u32)) -> Result<(), ParseError> {
        self.expect("(")?;
        self.call_args(e)
    }

    /// A call's arguments, the `(` read. A call of anything but a name is JavaScript,
    /// measured as a method call (`f()()`, `a[0]()`).
    fn call_args(&mut self, e: &mut (Expr, u32)) -> Result<(), ParseError> {
        let (args, ah) = self.args_rest()?;
        e.1 = height(e.1.max(ah), self.at)?;
        let old = std::mem::replace(&mut e.0, Expr::Null);
        e.0 = match old {
            Expr::Ident(name) => Expr::Call(name, args),
            other => {
                self.outside("call of a computed function".into());
                Expr::Method(Box::new(other), String::new(), args, false)
            }
        };
        Ok(())
    }

    /// Call arguments and the height of the tallest.
    #[inline(never)]
    fn args(&mut self) -> Result<(Vec<Expr>, u32), ParseError> {
        self.expect("(")?;
        self.args_rest()
    }

    /// Call arguments, the `(` read.
    fn args_rest(&mut self) -> Result<(Vec<Expr>, u32), ParseError> {
        let mut args = Vec::new();
        let mut h = 0;
        while self.tok != Tok::Punct(")") {
            let (a, ah) = self.expr(0)?;
            args.push(a);
            h = h.max(ah);
            self.list_separator(")")?;
        }
        self.bump()?;
        Ok((args, h))
    }

    /// A primary expression and its height (literals and names are 1 high).
    ///
    /// Parentheses, arrays and objects recurse through `expr`; each has its own small
    /// function so that the frames on that path stay small (the stack a nesting level
    /// costs is what [`MAX_DEPTH`] bounds).
    fn primary(&mut self) -> Result<(Expr, u32), ParseError> {
        match &self.tok {
            Tok::Punct("(") => self.paren(),
            Tok::Punct("[") => self.array(),
            Tok::Punct("{") => self.object(),
            _ => self.leaf(),
        }
    }

    #[inline(never)]
    fn paren(&mut self) -> Result<(Expr, u32), ParseError> {
        self.bump()?;
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
        Ok(e)
    }

    #[inline(never)]
    fn array(&mut self) -> Result<(Expr, u32), ParseError> {
        self.bump()?;
        let mut items = Vec::new();
        let mut h = 0;
        while self.tok != Tok::Punct("]") {
            let (it, ih) = self.expr(0)?;
            items.push(it);
            h = h.max(ih);
            self.list_separator("]")?;
        }
        self.bump()?;
        Ok((Expr::Array(items), height(h, self.at)?))
    }

    #[inline(never)]
    fn object(&mut self) -> Result<(Expr, u32), ParseError> {
        self.bump()?;
        let mut props = Vec::new();
        let mut h = 0;
        while self.tok != Tok::Punct("}") {
            let key = self.object_key()?;
            let (v, vh) = self.expr(0)?;
            props.push((key, v));
            h = h.max(vh);
            self.list_separator("}")?;
        }
        self.bump()?;
        Ok((Expr::Object(props), height(h, self.at)?))
    }

    /// A property name and its `:`.
    #[inline(never)]
    fn object_key(&mut self) -> Result<String, ParseError> {
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
        Ok(key)
    }

    /// After an item of a list: `,` (JS outside the subset only as an operator) or the end.
    #[inline(never)]
    fn list_separator(&mut self, end: &'static str) -> Result<(), ParseError> {
        match &self.tok {
            Tok::Foreign(",") => {
                self.bump()?;
            }
            Tok::Punct(p) if *p == end => {}
            t => return Err(self.unexpected(t.clone())),
        }
        Ok(())
    }

    /// Literals, names and what cannot start an expression.
    #[inline(never)]
    fn leaf(&mut self) -> Result<(Expr, u32), ParseError> {
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

/// The node of a binary operator (`&&`, `||` and `??` are [`Expr::Logic`]). Out of line: the
/// parser's recursive frames stay small.
#[inline(never)]
fn binary_node(op: &Tok, lhs: Expr, rhs: Expr) -> Expr {
    let name = match op {
        Tok::Punct(p) => *p,
        _ => "in",
    };
    let (lhs, rhs) = (Box::new(lhs), Box::new(rhs));
    let op = match name {
        "&&" => return Expr::Logic(LogicOp::And, lhs, rhs),
        "||" => return Expr::Logic(LogicOp::Or, lhs, rhs),
        "??" => return Expr::Logic(LogicOp::Nullish, lhs, rhs),
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
    Expr::Bin(op, lhs, rhs)
}
