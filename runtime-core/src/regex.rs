//! Regular expressions with JavaScript's meaning: regex literals in expressions and regex NLU
//! patterns, translated to `fancy_regex` syntax.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

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
