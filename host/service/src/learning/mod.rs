//! Learning from production: the misunderstood inbox (what channel users said that their
//! bot fell back on, grouped, to label into an NLU or dismiss) and replays (an environment's
//! recorded conversations run again on another bot revision, to see what it would have
//! answered before it ships).
//!
//! The live path records what both need with each channel user's incoming line
//! ([`record`]): the step's clock, seed and api answers, whether it started a session, and
//! the message's inbox group when it fell back. Nothing here runs on the message path but
//! [`record::Recorder`] and [`miss_key`].

pub mod inbox;
pub mod record;
pub mod replay;

use runtime_core::session::Message;
use sha2::{Digest, Sha256};

/// A text as the inbox groups it: lower case, runs of white space as one space, without
/// punctuation or spaces at either end ("Hi  there!" and "hi there" are one group).
pub fn normalize(text: &str) -> String {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    words
        .join(" ")
        .trim_matches(|c: char| c.is_whitespace() || is_end_punctuation(c))
        .to_owned()
}

fn is_end_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || matches!(c, '…' | '¿' | '¡' | '。' | '、' | '！' | '？')
}

/// The inbox group of a message that fell back: a hash of its normalised text (hex), or
/// `None` when it has no text to learn from (a command, a postback, only punctuation).
pub fn miss_key(message: &Message) -> Option<String> {
    if message.msg_type != runtime_core::model::MsgType::Text {
        return None;
    }
    let text = normalize(message.content.as_deref()?);
    if text.is_empty() {
        return None;
    }
    Some(hex::encode(&Sha256::digest(text.as_bytes())[..8]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_that_differ_only_in_case_spaces_and_end_punctuation_share_a_group() {
        assert_eq!(normalize("  Hi   there!! "), "hi there");
        assert_eq!(normalize("¿Qué tal?"), "qué tal");
        assert_eq!(normalize("what's up?"), "what's up");
        let m = |t: &str| Message::text(t);
        assert_eq!(miss_key(&m("Hi there!")), miss_key(&m("hi  THERE")));
        assert_ne!(miss_key(&m("hi there")), miss_key(&m("hi here")));
        assert_eq!(miss_key(&m("?!")), None);
    }
}
