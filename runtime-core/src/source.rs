//! Reading bot documents (YAML or JSON) into JSON, remembering where each key was written so
//! that problems can name a line and column.

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::fmt;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Line and column (1-based) of each path in a YAML document (`flows.order.states.ask`,
/// list items as `action[0]`).
#[derive(Debug, Default, Clone)]
pub struct Positions {
    map: PositionMap,
    /// Where each string value's text starts, for places inside it (JavaScript).
    values: HashMap<String, ValueAt>,
}

type PositionMap = HashMap<String, (usize, usize)>;

/// Where a scalar value's own text starts.
#[derive(Debug, Clone, Copy)]
struct ValueAt {
    line: usize,
    column: usize,
    /// A block scalar (`|`, `>`): its text starts on the next line, at its indentation.
    block: bool,
    /// A quoted scalar: its text starts one column after the quote.
    quoted: bool,
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

    /// The position in the file of `line`:`column` (1-based) of the string value at `path`
    /// (a method's code): exact for block scalars and one-line values; else the value's
    /// start. `None` when the value was not recorded.
    pub fn inside(&self, path: &str, line: usize, column: usize) -> Option<(usize, usize)> {
        let v = self.values.get(path)?;
        Some(if v.block {
            (v.line + line - 1, v.column + column - 1)
        } else if line == 1 {
            (v.line, v.column + usize::from(v.quoted) + column - 1)
        } else {
            (v.line, v.column)
        })
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

/// How deeply a bot document may nest (the root object is level 1). Default 64; real bots
/// stay under 15. Validation, compilation and the stored bot walk documents recursively, and
/// the host reads the stored bot back with serde_json, which stops at 128 levels: a
/// malicious document nested 100,000 levels (`[[[[…`) would otherwise overflow the stack.
pub const MAX_DOC_DEPTH: usize = 64;

/// How many values (scalars, lists and objects) a document may hold once YAML aliases are
/// expanded. Default 2,000,000, what a 4 MiB document of short values holds; checked while
/// reading, at no cost. An alias repeats its anchor's whole value each time it is used, so
/// a few KiB of YAML could otherwise expand to gigabytes.
pub const MAX_DOC_VALUES: usize = 2_000_000;

/// The problem for a document nested deeper than [`MAX_DOC_DEPTH`].
pub fn too_deep_message() -> String {
    format!("nested more than {MAX_DOC_DEPTH} levels deep")
}

/// Parses a bot document. JSON is tried when the text starts with `{`, YAML otherwise.
///
/// Both are read within [`MAX_DOC_DEPTH`] and [`MAX_DOC_VALUES`]; a document beyond them is
/// refused while it is read, with the path and line where the limit was crossed.
pub fn parse_document(text: &str) -> Result<(Json, Positions), Problem> {
    if text.trim_start().starts_with('{') {
        let mut budget = Budget::default();
        let mut de = serde_json::Deserializer::from_str(text);
        let read = Doc::root(&mut budget)
            .deserialize(&mut de)
            .and_then(|j| de.end().map(|_| j));
        return read
            .map(|j| (j, Positions::default()))
            .map_err(|e| match budget.exceeded.take() {
                Some((path, message)) => Problem {
                    severity: Severity::Error,
                    path,
                    message,
                    line: Some(e.line()),
                    column: Some(e.column()),
                },
                None => Problem {
                    severity: Severity::Error,
                    path: String::new(),
                    message: format!("invalid JSON: {e}"),
                    line: Some(e.line()),
                    column: Some(e.column()),
                },
            });
    }
    let (json, map, mut values) = read_yaml(text)?;
    // A block scalar's text starts on the first line after its indicator (`|`, `>-`, …),
    // at that line's indentation; the scanner marks it there or on the indicator's line.
    let lines: Vec<&str> = text.lines().collect();
    let indicator = |l: &str| {
        let t = l.trim_end();
        ["|", ">", "|-", ">-", "|+", ">+"]
            .iter()
            .any(|i| t.ends_with(i))
    };
    for v in values.values_mut().filter(|v| v.block) {
        if let Some((i, l)) = lines
            .iter()
            .enumerate()
            .skip(v.line.saturating_sub(1))
            .find(|(_, l)| !l.trim().is_empty() && !indicator(l))
        {
            v.line = i + 1;
            v.column = l.len() - l.trim_start().len() + 1;
        }
    }
    Ok((json, Positions { map, values }))
}

/// Reads YAML text (one document) to JSON within the limits of [`parse_document`]. Also for
/// other YAML read from tenants (conversation tests), so that it is bounded the same way.
pub fn read_yaml_bounded(text: &str) -> Result<Json, String> {
    read_yaml(text)
        .map(|(j, _, _)| j)
        .map_err(|p| p.to_string())
}

/// Reads YAML in two passes. yaml-rust2's events first, without recursion: they give the
/// positions, and the nesting is checked there, because libyaml (under serde_yaml) spends
/// time proportional to the depth on every token of a flow collection: `[[[[…` 100,000
/// deep takes it a minute. serde_yaml then builds the value (its scalars are the ones bots
/// were written for) within the depth and value budget.
fn read_yaml(text: &str) -> Result<(Json, PositionMap, HashMap<String, ValueAt>), Problem> {
    let problem =
        |path: String, message: String, line: Option<usize>, column: Option<usize>| Problem {
            severity: Severity::Error,
            path,
            message,
            line,
            column,
        };
    let mut rec = Recorder {
        room: text.len().saturating_mul(POSITION_BYTES_PER_BYTE) + (64 << 10),
        ..Recorder::default()
    };
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0;
    let complete = loop {
        match parser.next_token() {
            Ok((Event::StreamEnd | Event::DocumentEnd, _)) => break true,
            Ok((ev, mark)) => {
                if matches!(ev, Event::MappingStart(..) | Event::SequenceStart(..)) {
                    depth += 1;
                    if depth > MAX_DOC_DEPTH {
                        rec.value_path();
                        let at = (Some(mark.line()), Some(mark.col() + 1));
                        return Err(problem(rec.trail(), too_deep_message(), at.0, at.1));
                    }
                }
                if matches!(ev, Event::MappingEnd | Event::SequenceEnd) {
                    depth -= 1;
                }
                rec.on_event(ev, mark);
            }
            // The scanner's own bound: 255 nested flow collections (it reads ahead of
            // the events, so this can come first).
            Err(e) if e.info() == "recursion limit exceeded" => {
                // The events lag behind: the text up to here (255 flow levels at most)
                // names the place, read as below.
                let m = e.marker();
                let cut = text
                    .char_indices()
                    .nth(m.index())
                    .map_or(text.len(), |(i, _)| i);
                return Err(match serde_yaml_read(&text[..cut]) {
                    Err(p) if p.message == too_deep_message() => p,
                    _ => problem(
                        rec.trail(),
                        too_deep_message(),
                        Some(m.line()),
                        Some(m.col() + 1),
                    ),
                });
            }
            // Not YAML to yaml-rust2: serde_yaml has the last word (and the better message).
            Err(_) => break false,
        }
    };
    if !complete {
        // Depth unknown: bound what libyaml will meet by counting every bracket (an upper
        // bound on flow nesting; brackets inside strings only make it larger).
        if let Some(line) = brackets_deeper_than(text, 255) {
            return Err(problem(String::new(), too_deep_message(), Some(line), None));
        }
    }
    Ok((serde_yaml_read(text)?, rec.map, rec.values))
}

/// serde_yaml's value of `text`, within the depth and value budget.
fn serde_yaml_read(text: &str) -> Result<Json, Problem> {
    let mut budget = Budget::default();
    Doc::root(&mut budget)
        .deserialize(serde_yaml::Deserializer::from_str(text))
        .map_err(|e| {
            let loc = e.location();
            let (line, column) = (
                loc.as_ref().map(|l| l.line()),
                loc.as_ref().map(|l| l.column()),
            );
            let (path, message) = budget
                .exceeded
                .take()
                .unwrap_or_else(|| (String::new(), format!("invalid YAML: {e}")));
            Problem {
                severity: Severity::Error,
                path,
                message,
                line,
                column,
            }
        })
}

/// The line where `[` and `{` outnumber `]` and `}` by more than `max`, if they do.
fn brackets_deeper_than(text: &str, max: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut line = 1;
    for b in text.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return Some(line);
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'\n' => line += 1,
            _ => {}
        }
    }
    None
}

/// What has been read so far: values counted, the path of the open lists and objects, and
/// the limit crossed (path, message), if any.
#[derive(Default)]
struct Budget {
    values: usize,
    path: Vec<OwnedSeg>,
    exceeded: Option<(String, String)>,
}

impl Budget {
    fn count<E: serde::de::Error>(&mut self) -> Result<(), E> {
        self.values += 1;
        if self.values > MAX_DOC_VALUES {
            return Err(self.exceed(
                None,
                format!("the document holds more than {MAX_DOC_VALUES} values (YAML aliases count once per use)"),
            ));
        }
        Ok(())
    }

    fn exceed<E: serde::de::Error>(&mut self, last: Option<Seg>, message: String) -> E {
        let mut path = String::new();
        for seg in self.path.iter().map(Seg::borrowed).chain(last) {
            seg.write(&mut path);
        }
        let e = E::custom(&message);
        self.exceeded = Some((path, message));
        e
    }
}

/// Where a value sits in its parent: how its path is written.
#[derive(Clone, Copy)]
enum Seg<'k> {
    Root,
    Index(usize),
    Key(&'k str),
}

/// [`Seg`] kept for an open list or object.
enum OwnedSeg {
    Index(usize),
    Key(String),
}

impl Seg<'_> {
    fn owned(self) -> Option<OwnedSeg> {
        match self {
            Seg::Root => None,
            Seg::Index(i) => Some(OwnedSeg::Index(i)),
            Seg::Key(k) => Some(OwnedSeg::Key(k.to_string())),
        }
    }

    fn borrowed(o: &OwnedSeg) -> Seg<'_> {
        match o {
            OwnedSeg::Index(i) => Seg::Index(*i),
            OwnedSeg::Key(k) => Seg::Key(k),
        }
    }

    /// Appends to a path written like compile's: `a.b[2].c`.
    fn write(self, path: &mut String) {
        match self {
            Seg::Root => {}
            Seg::Index(i) => path.push_str(&format!("[{i}]")),
            Seg::Key(k) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
        }
    }
}

/// Reads one value into JSON (as serde_json's own `Value` does), counting values and
/// nesting against the budget. Lists and objects are read by the reader's loops, one
/// level of recursion per level of nesting, which the depth check bounds.
struct Doc<'b, 'k> {
    budget: &'b mut Budget,
    depth: usize,
    seg: Seg<'k>,
}

impl<'b> Doc<'b, 'static> {
    fn root(budget: &'b mut Budget) -> Self {
        Doc {
            budget,
            depth: 0,
            seg: Seg::Root,
        }
    }
}

impl Doc<'_, '_> {
    /// Enters a list or object: checks the depth and notes the path.
    fn open<E: serde::de::Error>(&mut self) -> Result<(), E> {
        self.budget.count()?;
        if self.depth + 1 > MAX_DOC_DEPTH {
            return Err(self.budget.exceed(Some(self.seg), too_deep_message()));
        }
        if let Some(seg) = self.seg.owned() {
            self.budget.path.push(seg);
        }
        Ok(())
    }

    fn close(&mut self) {
        if !matches!(self.seg, Seg::Root) {
            self.budget.path.pop();
        }
    }
}

impl<'de> DeserializeSeed<'de> for Doc<'_, '_> {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Doc<'_, '_> {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Json, E> {
        self.budget.count()?;
        Ok(Json::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Json, E> {
        self.budget.count()?;
        Ok(Json::Number(v.into()))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Json, E> {
        self.budget.count()?;
        Ok(Json::Number(v.into()))
    }

    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Json, E> {
        self.budget.count()?;
        serde_json::Number::deserialize(serde::de::value::I128Deserializer::<E>::new(v))
            .map(Json::Number)
    }

    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Json, E> {
        self.budget.count()?;
        serde_json::Number::deserialize(serde::de::value::U128Deserializer::<E>::new(v))
            .map(Json::Number)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Json, E> {
        self.budget.count()?;
        Ok(serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Json, E> {
        self.budget.count()?;
        Ok(Json::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Json, E> {
        self.budget.count()?;
        Ok(Json::String(v))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Json, E> {
        self.budget.count()?;
        Ok(Json::Null)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Json, E> {
        self.budget.count()?;
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Json, A::Error> {
        self.open()?;
        let mut out = Vec::new();
        loop {
            let item = Doc {
                budget: &mut *self.budget,
                depth: self.depth + 1,
                seg: Seg::Index(out.len()),
            };
            match seq.next_element_seed(item)? {
                Some(v) => out.push(v),
                None => break,
            }
        }
        self.close();
        Ok(Json::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Json, A::Error> {
        self.open()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = Doc {
                budget: &mut *self.budget,
                depth: self.depth + 1,
                seg: Seg::Key(&key),
            };
            let v = map.next_value_seed(value)?;
            out.insert(key, v);
        }
        self.close();
        Ok(Json::Object(out))
    }
}

/// Paths of positions are kept up to this many bytes per byte of text (real bots use two to
/// five). A document with a long key above many values would otherwise make the map
/// quadratic in its size; past the budget, problems lose their line, nothing else.
const POSITION_BYTES_PER_BYTE: usize = 16;

/// The longest path whose position is kept, in bytes; deeper paths use their ancestors'.
const MAX_POSITION_PATH: usize = 2048;

enum Frame {
    /// `path` is `None` past the position budget (and for all that is below).
    Map {
        path: Option<String>,
        key: Option<String>,
        /// The key whose value is being read.
        reading: Option<String>,
    },
    Seq {
        path: Option<String>,
        index: usize,
    },
}

#[derive(Default)]
struct Recorder {
    stack: Vec<Frame>,
    map: PositionMap,
    values: HashMap<String, ValueAt>,
    /// Bytes of paths that may still be recorded.
    room: usize,
}

impl Recorder {
    /// The path of the value about to be read (`None` when not recorded), and advances the
    /// parent.
    fn value_path(&mut self) -> Option<String> {
        let room = self.room;
        let p = match self.stack.last_mut()? {
            Frame::Map { path, key, reading } => {
                let k = key.take()?;
                let p = path.as_deref().and_then(|p| join_within(p, &k, room));
                *reading = Some(k);
                p?
            }
            Frame::Seq { path, index } => {
                let i = *index;
                *index += 1;
                let path = path.as_deref()?;
                if path.len() + 24 > room.min(MAX_POSITION_PATH) {
                    return None;
                }
                format!("{path}[{i}]")
            }
        };
        self.room -= p.len();
        Some(p)
    }

    /// The whole path of the value being read, whatever the budget (for a problem).
    fn trail(&self) -> String {
        let mut out = String::new();
        for f in &self.stack {
            match f {
                Frame::Map {
                    reading: Some(k), ..
                } => Seg::Key(k).write(&mut out),
                Frame::Seq { index, .. } if *index > 0 => Seg::Index(index - 1).write(&mut out),
                _ => {}
            }
        }
        out
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `path.key` if it fits the room left and [`MAX_POSITION_PATH`].
fn join_within(path: &str, key: &str, room: usize) -> Option<String> {
    if path.len() + 1 + key.len() > room.min(MAX_POSITION_PATH) {
        return None;
    }
    Some(join(path, key))
}

impl MarkedEventReceiver for Recorder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = (mark.line(), mark.col() + 1);
        match ev {
            Event::Scalar(text, style, ..) => {
                if let Some(Frame::Map { path, key, .. }) = self.stack.last_mut()
                    && key.is_none()
                {
                    if let Some(p) = path
                        .as_deref()
                        .and_then(|p| join_within(p, &text, self.room))
                    {
                        self.room -= p.len();
                        self.map.insert(p, pos);
                    }
                    *key = Some(text);
                    return;
                }
                if let Some(p) = self.value_path() {
                    use yaml_rust2::scanner::TScalarStyle as S;
                    if text.contains('\n')
                        || matches!(style, S::Literal | S::Folded)
                        || text.len() > 8
                    {
                        self.values.insert(
                            p.clone(),
                            ValueAt {
                                line: pos.0,
                                column: pos.1,
                                block: matches!(style, S::Literal | S::Folded),
                                quoted: matches!(style, S::SingleQuoted | S::DoubleQuoted),
                            },
                        );
                    }
                    self.map.entry(p).or_insert(pos);
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let path = if self.stack.is_empty() {
                    Some(String::new())
                } else {
                    let p = self.value_path();
                    if let Some(p) = &p {
                        self.map.entry(p.clone()).or_insert(pos);
                    }
                    p
                };
                self.stack.push(if matches!(ev, Event::MappingStart(..)) {
                    Frame::Map {
                        path,
                        key: None,
                        reading: None,
                    }
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
    fn places_inside_string_values() {
        let src = "methods:\n  lookup(ctx): |\n    var a = 1;\n      var b = {x: 1;\n  one: \"return   x;\"\n  plain: return   y;\n";
        let (_, pos) = parse_document(src).unwrap();
        // Line 2, column 14 of the block: the file's line 4 (the block starts on line 3 at
        // column 5).
        assert_eq!(pos.inside("methods.lookup(ctx)", 2, 14), Some((4, 18)));
        assert_eq!(pos.inside("methods.lookup(ctx)", 1, 1), Some((3, 5)));
        // One-line values: after the quote, or where the plain text starts.
        assert_eq!(pos.inside("methods.one", 1, 10), Some((5, 18)));
        assert_eq!(pos.inside("methods.plain", 1, 10), Some((6, 19)));
    }

    #[test]
    fn yaml_syntax_errors_carry_a_line() {
        let err = parse_document("name: x\nflows: [\n").unwrap_err();
        assert!(err.message.starts_with("invalid YAML"), "{err}");
        assert!(err.line.is_some());
    }
}
