//! The training line format of NL Studio, and training files.
//!
//! ```text
//! Saya mau pesan pizza #intent:order
//! Tiket ke (@destination Malang) atas nama (@ner:person Budi) #intent:order
//! Pizza (@item-1 bbq) jumlahnya (@item-1.qty dua) ya #intent:order
//! terima kasih
//! ```
//!
//! - `#entity:label` tags at the end of the line label the whole sentence (trait). They become
//!   entries with `value` = the label, `start` 0 and `end` = the input's length.
//! - `(@entity text)` marks a span; `(@entity:label text)` adds a label; `(@entity-<id> text)`
//!   names the span; `(@entity-<id>.sub text)` is a span of entity `sub` that belongs to it.
//! - A line without tags is a negative example.
//!
//! Offsets are characters of the sentence without its markup, end exclusive. Errors name the
//! line (1-based) and what is wrong; [`parse_file`] reports every bad line, not only the first.

use super::{BelongsTo, TrainingData, TrainingEntity};

/// A line that could not be parsed: its 1-based number and why.
#[derive(Clone, Debug, PartialEq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Entity names: letters, digits and `_`, 1 to 20 characters (the CLI's rule).
pub fn valid_entity_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= 20
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn valid_label(label: &str) -> bool {
    !label.is_empty()
        && label.chars().count() <= 100
        && label
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Parses one line (without its line break). `Ok(None)` for a blank line.
pub fn parse_line(line: &str) -> Result<Option<TrainingData>, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    let (body, traits) = split_trait_tags(line)?;
    let mut input = String::new();
    let mut input_chars = 0usize;
    let mut entities = Vec::new();
    let mut rest = body.as_str();
    while let Some(open) = rest.find("(@") {
        let before = &rest[..open];
        input.push_str(before);
        input_chars += before.chars().count();
        let after = &rest[open + 2..];
        let close = after
            .find(')')
            .ok_or_else(|| format!("a span opened with \"(@\" is not closed with ')': {rest:?}"))?;
        let span = parse_span(&after[..close])?;
        let start = input_chars;
        input.push_str(span.text);
        input_chars += span.text.chars().count();
        entities.push(TrainingEntity {
            id: span.id,
            entity: span.entity,
            label: span.label,
            start,
            end: input_chars,
            value: span.text.to_string(),
            belongs_to: span.belongs_to,
        });
        rest = &after[close + 1..];
    }
    input.push_str(rest);
    if input.trim().is_empty() {
        return Err("the sentence is empty once its tags are removed".into());
    }
    check_parents_marked(&entities)?;
    let len = input.chars().count();
    for (entity, label) in traits {
        entities.push(TrainingEntity {
            id: None,
            entity,
            value: label.clone(),
            label: Some(label),
            start: 0,
            end: len,
            belongs_to: None,
        });
    }
    Ok(Some(TrainingData { input, entities }))
}

/// Splits the trailing `#entity:label` tags (separated by whitespace) off a line: the
/// sentence's words joined by single spaces, and the (entity, label) tags in their order.
fn split_trait_tags(line: &str) -> Result<(String, Vec<(String, String)>), String> {
    let mut words: Vec<&str> = line.split_whitespace().collect();
    let mut traits = Vec::new();
    while let Some(w) = words.last() {
        let Some(tag) = w.strip_prefix('#') else {
            break;
        };
        let Some((entity, label)) = tag.split_once(':') else {
            return Err(format!(
                "trait tag {w:?} needs an entity and a label: #entity:label"
            ));
        };
        if !valid_entity_name(entity) {
            return Err(format!(
                "trait tag {w:?}: the entity name must be 1 to 20 letters, digits or '_'"
            ));
        }
        if !valid_label(label) {
            return Err(format!(
                "trait tag {w:?}: the label must be 1 to 100 letters, digits, '_', '-' or '.'"
            ));
        }
        traits.push((entity.to_string(), label.to_string()));
        words.pop();
    }
    traits.reverse();
    Ok((words.join(" "), traits))
}

/// A parsed `(@head text)` span: the entity, its id or parent, its label, and its text.
struct SpanMark<'a> {
    entity: String,
    id: Option<String>,
    label: Option<String>,
    belongs_to: Option<BelongsTo>,
    text: &'a str,
}

/// Parses the inside of a span, `head text` with head `entity[:label]`,
/// `entity-id[:label]` or `entity-id.sub[:label]`.
fn parse_span(inner: &str) -> Result<SpanMark<'_>, String> {
    if inner.contains("(@") {
        return Err(format!("spans cannot nest: \"(@{inner})\""));
    }
    let (head, text) = inner
        .split_once(char::is_whitespace)
        .ok_or_else(|| format!("span \"(@{inner})\" has no text: write (@entity text)"))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("span \"(@{inner})\" has no text"));
    }
    let (name_part, label) = match head.split_once(':') {
        Some((n, l)) => {
            if !valid_label(l) {
                return Err(format!(
                    "span \"(@{inner})\": the label must be 1 to 100 letters, digits, '_', '-' or '.'"
                ));
            }
            (n, Some(l.to_string()))
        }
        None => (head, None),
    };
    let (entity, id, belongs_to) = span_names(name_part);
    check_span_names(inner, &entity, id.as_deref(), belongs_to.as_ref())?;
    Ok(SpanMark {
        entity,
        id,
        label,
        belongs_to,
        text,
    })
}

/// The entity, span id and parent of a span's name: `entity`, `entity-id` or
/// `entity-id.sub` (a span of `sub` that belongs to span `id` of `entity`).
fn span_names(name_part: &str) -> (String, Option<String>, Option<BelongsTo>) {
    match name_part.split_once('-') {
        None => (name_part.to_string(), None, None),
        Some((parent, id_sub)) => match id_sub.split_once('.') {
            None => (parent.to_string(), Some(id_sub.to_string()), None),
            Some((id, sub)) => (
                sub.to_string(),
                None,
                Some(BelongsTo {
                    entity: parent.to_string(),
                    id: id.to_string(),
                }),
            ),
        },
    }
}

/// Checks the entity names and the span id of a span (`inner` is its text, for messages).
fn check_span_names(
    inner: &str,
    entity: &str,
    id: Option<&str>,
    belongs_to: Option<&BelongsTo>,
) -> Result<(), String> {
    for n in std::iter::once(entity).chain(belongs_to.map(|b| b.entity.as_str())) {
        if !valid_entity_name(n) {
            return Err(format!(
                "span \"(@{inner})\": entity name {n:?} must be 1 to 20 letters, digits or '_'"
            ));
        }
    }
    if let Some(id) = id.or(belongs_to.map(|b| b.id.as_str()))
        && (id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        return Err(format!(
            "span \"(@{inner})\": the span id {id:?} must be letters, digits or '_'"
        ));
    }
    Ok(())
}

/// Every span a sub-span belongs to (`entity-id`) must be marked in the line.
fn check_parents_marked(entities: &[TrainingEntity]) -> Result<(), String> {
    for b in entities.iter().filter_map(|e| e.belongs_to.as_ref()) {
        if !entities
            .iter()
            .any(|e| e.entity == b.entity && e.id.as_deref() == Some(b.id.as_str()))
        {
            return Err(format!(
                "span of {}-{} is referred to but not marked in the line: add (@{}-{} text)",
                b.entity, b.id, b.entity, b.id
            ));
        }
    }
    Ok(())
}

/// What a training file gave: the rows it accepted and the lines it refused.
#[derive(Debug, Default)]
pub struct Parsed {
    pub rows: Vec<TrainingData>,
    /// The 1-based line (or item) number of each row.
    pub lines: Vec<usize>,
    pub errors: Vec<LineError>,
}

/// Parses training text in the line format: every line, every error.
pub fn parse_text(text: &str) -> Parsed {
    let mut out = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(Some(row)) => {
                out.rows.push(row);
                out.lines.push(i + 1);
            }
            Ok(None) => {}
            Err(message) => out.errors.push(LineError {
                line: i + 1,
                message,
            }),
        }
    }
    out
}

/// Parses a training file: JSON (an array of TrainingData, or `{data: [...]}`; strings in the
/// array are lines), YAML of the same shapes, or the line format. `name` (the uploaded file's
/// name, if any) picks the format by extension; otherwise the content decides.
pub fn parse_file(name: Option<&str>, text: &str) -> Parsed {
    let ext = name
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase());
    let trimmed = text.trim_start();
    let structured = match ext.as_deref() {
        Some("json") => {
            Some(serde_json::from_str::<serde_json::Value>(text).map_err(|e| e.to_string()))
        }
        Some("yaml") | Some("yml") => {
            Some(serde_yaml::from_str::<serde_json::Value>(text).map_err(|e| e.to_string()))
        }
        Some("txt") => None,
        _ if trimmed.starts_with('[') || trimmed.starts_with('{') => {
            Some(serde_json::from_str::<serde_json::Value>(text).map_err(|e| e.to_string()))
        }
        _ => None,
    };
    match structured {
        None => parse_text(text),
        Some(Err(e)) => Parsed {
            rows: vec![],
            lines: vec![],
            errors: vec![LineError {
                line: 1,
                message: format!(
                    "the file is not valid {}: {e}",
                    ext.as_deref().unwrap_or("JSON")
                ),
            }],
        },
        Some(Ok(v)) => parse_structured(v),
    }
}

fn parse_structured(v: serde_json::Value) -> Parsed {
    let not_training_data = || Parsed {
        errors: vec![LineError {
            line: 1,
            message: "expected an array of training data or {\"data\": [...]}".into(),
        }],
        ..Parsed::default()
    };
    let items = match v {
        serde_json::Value::Array(a) => a,
        serde_json::Value::Object(mut o) => match o.remove("data") {
            Some(serde_json::Value::Array(a)) => a,
            _ => return not_training_data(),
        },
        _ => return not_training_data(),
    };
    let mut out = Parsed::default();
    for (i, item) in items.into_iter().enumerate() {
        let n = i + 1;
        let row = match item {
            serde_json::Value::String(s) => parse_line(&s),
            other => serde_json::from_value::<TrainingData>(other)
                .map_err(|e| format!("item {n}: {e}"))
                .and_then(|d| check_row(&d).map(|()| Some(d))),
        };
        match row {
            Ok(Some(r)) => {
                out.rows.push(r);
                out.lines.push(n);
            }
            Ok(None) => {}
            Err(message) => out.errors.push(LineError { line: n, message }),
        }
    }
    out
}

/// Checks a TrainingData given as JSON: names, offsets inside the input and matching values.
pub fn check_row(d: &TrainingData) -> Result<(), String> {
    if d.input.trim().is_empty() {
        return Err("input is empty".into());
    }
    let len = d.input.chars().count();
    for (i, e) in d.entities.iter().enumerate() {
        if !valid_entity_name(&e.entity) {
            return Err(format!(
                "entities[{i}].entity {:?} must be 1 to 20 letters, digits or '_'",
                e.entity
            ));
        }
        if e.start >= e.end || e.end > len {
            return Err(format!(
                "entities[{i}] ({}): start {} and end {} must satisfy start < end <= {len} (the input's length in characters)",
                e.entity, e.start, e.end
            ));
        }
    }
    Ok(())
}

/// The labels of `old` carried over to the sentence `input` (an edit that sends only the
/// new text): a label spanning the whole old sentence (a trait) spans the whole new one; a
/// label on words keeps them where they now stand (their first place at or after where they
/// were, else their first place); a label whose words the new text no longer has is an error
/// naming it, so nothing is relabelled silently.
pub fn relabel(old: &TrainingData, input: &str) -> Result<Vec<TrainingEntity>, String> {
    let old_chars: Vec<char> = old.input.chars().collect();
    let new_chars: Vec<char> = input.chars().collect();
    let find = |words: &[char], from: usize| -> Option<usize> {
        let fits = |at: usize| new_chars.get(at..at + words.len()) == Some(words);
        (from..new_chars.len())
            .find(|&at| fits(at))
            .or_else(|| (0..from).find(|&at| fits(at)))
    };
    let mut out = Vec::with_capacity(old.entities.len());
    for (i, e) in old.entities.iter().enumerate() {
        let mut moved = e.clone();
        if e.start == 0 && e.end == old_chars.len() {
            moved.end = new_chars.len();
        } else {
            let words = old_chars.get(e.start..e.end).unwrap_or(&[]);
            let at = find(words, e.start).filter(|_| !words.is_empty()).ok_or_else(|| {
                format!(
                    "entities[{i}] ({} on {:?}): the new input no longer has these words; send entities with the input to label it again",
                    e.entity,
                    words.iter().collect::<String>()
                )
            })?;
            (moved.start, moved.end) = (at, at + words.len());
        }
        out.push(moved);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> TrainingData {
        parse_line(line).unwrap().unwrap()
    }

    #[test]
    fn labels_follow_their_words_into_a_new_input() {
        let old = one("I want a (@size large) pizza #intent:order");
        let moved = relabel(&old, "Please, I want a large pizza now").unwrap();
        let span = |name: &str| {
            let e = moved.iter().find(|e| e.entity == name).unwrap();
            (e.start, e.end)
        };
        assert_eq!(span("size"), (17, 22));
        assert_eq!(span("intent"), (0, 32));
        let err = relabel(&old, "I want a small pizza").unwrap_err();
        assert!(
            err.contains("(size on \"large\"): the new input no longer has these words"),
            "{err}"
        );
    }

    #[test]
    fn trait_tags_span_the_sentence() {
        let d = one("Totalnya berapa ya? #intent:ask #questionType:how_much");
        assert_eq!(d.input, "Totalnya berapa ya?");
        assert_eq!(d.entities.len(), 2);
        assert_eq!(d.entities[0].entity, "intent");
        assert_eq!(d.entities[0].value, "ask");
        assert_eq!(d.entities[0].label.as_deref(), Some("ask"));
        assert_eq!((d.entities[0].start, d.entities[0].end), (0, 19));
        assert_eq!(d.entities[1].entity, "questionType");
    }

    #[test]
    fn spans_labels_ids_and_belongs_to() {
        let d = one("Tiket ke (@destination Malang) atas nama (@ner:person Budi) #intent:order");
        assert_eq!(d.input, "Tiket ke Malang atas nama Budi");
        let dest = &d.entities[0];
        assert_eq!(
            (dest.entity.as_str(), dest.start, dest.end),
            ("destination", 9, 15)
        );
        assert_eq!(&d.input[9..15], "Malang");
        let ner = &d.entities[1];
        assert_eq!(ner.label.as_deref(), Some("person"));
        assert_eq!((ner.start, ner.end, ner.value.as_str()), (26, 30, "Budi"));

        let d = one("Pizza (@item-1 bbq) jumlahnya (@item-1.qty dua) ya #intent:order");
        assert_eq!(d.input, "Pizza bbq jumlahnya dua ya");
        assert_eq!(d.entities[0].id.as_deref(), Some("1"));
        assert_eq!(d.entities[0].entity, "item");
        assert_eq!(d.entities[1].entity, "qty");
        assert_eq!(
            d.entities[1].belongs_to,
            Some(BelongsTo {
                entity: "item".into(),
                id: "1".into()
            })
        );
    }

    #[test]
    fn offsets_are_characters_not_bytes() {
        let d = one("café à (@city Bogotá) svp");
        let e = &d.entities[0];
        let chars: Vec<char> = d.input.chars().collect();
        let got: String = chars[e.start..e.end].iter().collect();
        assert_eq!(got, "Bogotá");
    }

    #[test]
    fn untagged_lines_are_negative_examples_and_blank_lines_are_skipped() {
        assert_eq!(one("terima kasih").entities, vec![]);
        assert_eq!(parse_line("   ").unwrap(), None);
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let p = parse_text(
            "ok #intent:greet\nbad (@city Bandung\n\n#intent\nfine\n(@city) x\n(@a-1.b x) y",
        );
        assert_eq!(p.rows.len(), 2);
        let lines: Vec<usize> = p.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 4, 6, 7]);
        assert!(
            p.errors[0].message.contains("not closed"),
            "{}",
            p.errors[0]
        );
        assert!(
            p.errors[1].message.contains("#entity:label"),
            "{}",
            p.errors[1]
        );
        assert!(p.errors[2].message.contains("no text"), "{}", p.errors[2]);
        assert!(p.errors[3].message.contains("a-1"), "{}", p.errors[3]);
        assert_eq!(p.errors[0].to_string().split(':').next(), Some("line 2"));
    }

    #[test]
    fn json_and_yaml_files() {
        let p = parse_file(
            Some("data.json"),
            r#"[{"input": "hi there", "entities": [{"entity": "intent", "value": "greet", "label": "greet", "start": 0, "end": 8}]},
                "pesan (@item pizza) #intent:order",
                {"input": "x", "entities": [{"entity": "intent", "value": "a", "start": 0, "end": 9}]}]"#,
        );
        assert_eq!(p.rows.len(), 2);
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].line, 3);
        assert!(
            p.errors[0].message.contains("start 0 and end 9"),
            "{}",
            p.errors[0]
        );
        let p = parse_file(Some("d.yml"), "data:\n  - 'halo #intent:greet'\n");
        assert_eq!(p.rows.len(), 1);
        let p = parse_file(Some("d.json"), "{nope");
        assert_eq!(p.errors.len(), 1);
        assert!(
            p.errors[0].message.contains("not valid json"),
            "{}",
            p.errors[0]
        );
    }
}
