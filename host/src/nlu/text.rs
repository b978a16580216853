//! Tokenisation and normalisation for the NLU models.

use super::Lang;

/// A word (letters/digits run) or a single other non-space character of a text, with its
/// offsets: bytes for slicing, characters for the public API.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// Lower-cased, as written otherwise.
    pub norm: String,
    pub byte_start: usize,
    pub byte_end: usize,
    pub char_start: usize,
    pub char_end: usize,
}

impl Token {
    pub fn is_word(&self) -> bool {
        self.norm.chars().next().is_some_and(char::is_alphanumeric)
    }
}

/// Splits `text` into tokens: runs of alphanumeric characters (with inner apostrophes, dots
/// or hyphens between alphanumerics kept, as in `don't`, `v1.2`, `e-mail`), and each other
/// non-whitespace character on its own.
pub fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (b, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_alphanumeric() {
            i += 1;
            while i < chars.len() {
                let c = chars[i].1;
                if c.is_alphanumeric() {
                    i += 1;
                } else if matches!(c, '\'' | '’' | '.' | '-' | '_')
                    && i + 1 < chars.len()
                    && chars[i + 1].1.is_alphanumeric()
                {
                    i += 2;
                } else {
                    break;
                }
            }
        } else {
            i += 1;
        }
        let byte_end = chars.get(i).map(|x| x.0).unwrap_or(text.len());
        out.push(Token {
            norm: text[b..byte_end].to_lowercase(),
            byte_start: b,
            byte_end,
            char_start: start,
            char_end: i,
        });
    }
    out
}

/// The lower-cased form used for matching and features.
pub fn normalize(word: &str, _lang: Lang) -> String {
    word.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_char_and_byte_offsets() {
        let t = tokenize("Kè Bandung, don't e-mail v1.2!");
        let words: Vec<&str> = t.iter().map(|t| t.norm.as_str()).collect();
        assert_eq!(
            words,
            ["kè", "bandung", ",", "don't", "e-mail", "v1.2", "!"]
        );
        assert_eq!((t[1].char_start, t[1].char_end), (3, 10));
        assert_eq!((t[1].byte_start, t[1].byte_end), (4, 11));
    }
}
