//! Reading bot documents (YAML or JSON) into JSON, remembering where each key was written so
//! that problems can name a line and column.

use serde_json::Value as Json;
use std::collections::HashMap;
use std::fmt;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Line and column (1-based) of each path in a YAML document (`flows.order.states.ask`,
/// list items as `action[0]`).
#[derive(Debug, Default, Clone)]
pub struct Positions {
    map: HashMap<String, (usize, usize)>,
}

impl Positions {
    /// The position of `path`, or of its nearest written ancestor.
    pub fn find(&self, path: &str) -> Option<(usize, usize)> {
        let mut p = path;
        loop {
            if let Some(pos) = self.map.get(p) {
                return Some(*pos);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

/// A problem found in a bot document.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Problem {
    pub severity: Severity,
    /// Dotted path of the offending value (`flows.order.states.ask.transitions.done`).
    pub path: String,
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)?;
        } else {
            write!(f, "{}: {}", self.path, self.message)?;
        }
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, " (line {l}, column {c})")?;
        }
        Ok(())
    }
}

/// Parses a bot document. JSON is tried when the text starts with `{`, YAML otherwise.
pub fn parse_document(text: &str) -> Result<(Json, Positions), Problem> {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text)
            .map(|j| (j, Positions::default()))
            .map_err(|e| Problem {
                severity: Severity::Error,
                path: String::new(),
                message: format!("invalid JSON: {e}"),
                line: Some(e.line()),
                column: Some(e.column()),
            });
    }
    let json: Json = serde_yaml::from_str(text).map_err(|e| {
        let loc = e.location();
        Problem {
            severity: Severity::Error,
            path: String::new(),
            message: format!("invalid YAML: {e}"),
            line: loc.as_ref().map(|l| l.line()),
            column: loc.as_ref().map(|l| l.column()),
        }
    })?;
    let mut rec = Recorder::default();
    let mut parser = Parser::new_from_str(text);
    // serde_yaml accepted the text; a failure here only loses positions.
    let _ = parser.load(&mut rec, false);
    Ok((json, Positions { map: rec.map }))
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, index: usize },
}

#[derive(Default)]
struct Recorder {
    stack: Vec<Frame>,
    map: HashMap<String, (usize, usize)>,
}

impl Recorder {
    /// The path of the value about to be read, and advances the parent.
    fn value_path(&mut self) -> Option<String> {
        match self.stack.last_mut()? {
            Frame::Map { path, key } => {
                let k = key.take()?;
                Some(join(path, &k))
            }
            Frame::Seq { path, index } => {
                let p = format!("{path}[{index}]");
                *index += 1;
                Some(p)
            }
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl MarkedEventReceiver for Recorder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = (mark.line(), mark.col() + 1);
        match ev {
            Event::Scalar(text, ..) => {
                if let Some(Frame::Map { path, key }) = self.stack.last_mut() {
                    if key.is_none() {
                        let p = join(path, &text);
                        self.map.insert(p, pos);
                        *key = Some(text);
                        return;
                    }
                }
                if let Some(p) = self.value_path() {
                    self.map.entry(p).or_insert(pos);
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path = if self.stack.is_empty() {
                    String::new()
                } else {
                    let p = self.value_path().unwrap_or_default();
                    self.map.entry(p.clone()).or_insert(pos);
                    p
                };
                self.stack.push(if matches!(ev, Event::MappingStart(..)) {
                    Frame::Map { path, key: None }
                } else {
                    Frame::Seq { path, index: 0 }
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            Event::Alias(_) => {
                self.value_path();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_of_nested_keys_and_list_items() {
        let src = "name: x\nflows:\n  order:\n    states:\n      ask:\n        action:\n          - a\n          - name: b\n";
        let (_, pos) = parse_document(src).unwrap();
        assert_eq!(pos.find("flows.order.states.ask"), Some((5, 7)));
        assert_eq!(
            pos.find("flows.order.states.ask.action[1].name"),
            Some((8, 13))
        );
        assert_eq!(
            pos.find("flows.order.states.ask.action[1].name.deeper"),
            Some((8, 13))
        );
    }

    #[test]
    fn yaml_syntax_errors_carry_a_line() {
        let err = parse_document("name: x\nflows: [\n").unwrap_err();
        assert!(err.message.starts_with("invalid YAML"), "{err}");
        assert!(err.line.is_some());
    }
}
