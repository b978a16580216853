//! Cases and tasks: a deployed bot as a processing layer.
//!
//! - this file: the Case document (typed input and output fields, artifacts, review,
//!   time-out), its checks, and the pure steps of a task: validating inputs, the message
//!   the bot receives, reading outputs and artifacts from the bot's session after its step,
//!   merging a reviewer's edited outputs, the task state machine.
//! - `worker.rs`: `Tasks`, the worker that leases pending tasks, runs the bound bot in the
//!   sandbox and records the outcome; review decisions.
//! - `subscriptions.rs`: the checks on a callback endpoint or inbound hook a workspace
//!   registers.
//! - `webhooks.rs`: Standard Webhooks 1.0.0 (signing, verification), secrets derived from
//!   the server key, the callback sender with its retry schedule, artifact URL signatures.
//!
//! **The contract with the bot** (also in docs/agent-api.md): the worker sends the bot a data
//! message whose payload is `{type: "task", taskId, caseId, inputs}`, on a conversation of
//! the task's own. The bot does its work with the ordinary language and ends its flow (an
//! `end: true` state). After the step, the task's outputs are read from the session: each
//! output field's `from` expression over `data` (the bot's session data), `responses` (the
//! step's responses) and `inputs`, by default `data.outputs.<field>`; each artifact's
//! `from` gives its content (a string, JSON, or `{content, encoding: "base64"}`). A flow
//! still open after the step (the bot waits for more input), a step error, outputs that do
//! not match their fields, or the Case's time-out fail the task with a clear `error`.
//! A reviewer's `changes` sends the bot a data message `{type: "review", decision:
//! "changes", comment, taskId, caseId, outputs}` (its `content` is the comment) on the same
//! conversation, and the outputs are read again.

pub mod subscriptions;
pub mod webhooks;
pub mod worker;

use runtime_core::expr::{Env, ExprKind};
use runtime_core::value::V;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json, json};

/// Identifier prefixes.
pub const CASE_PREFIX: &str = "case_";
pub const TASK_PREFIX: &str = "task_";
pub const ARTIFACT_PREFIX: &str = "art_";
pub const ENDPOINT_PREFIX: &str = "ep_";
pub const HOOK_PREFIX: &str = "hook_";

/// Fields per list (inputs, outputs, artifacts) at most.
pub const MAX_FIELDS: usize = 50;
/// One artifact's bytes at most (1 MiB).
pub const MAX_ARTIFACT: usize = 1 << 20;
/// A task's inputs, as JSON, at most (256 KiB): they ride in the bot's message.
pub const MAX_INPUTS: usize = 256 << 10;
/// The Case's time-out bounds and default, in seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 60;
pub const MAX_TIMEOUT_S: u64 = 3600;

/// A field's type; values are checked against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    String,
    Number,
    Integer,
    Boolean,
    Object,
    Array,
}

impl FieldType {
    pub fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Integer => "integer",
            FieldType::Boolean => "boolean",
            FieldType::Object => "object",
            FieldType::Array => "array",
        }
    }

    pub fn accepts(self, v: &Json) -> bool {
        match self {
            FieldType::String => v.is_string(),
            FieldType::Number => v.is_number(),
            FieldType::Integer => v.as_f64().is_some_and(|f| f.fract() == 0.0),
            FieldType::Boolean => v.is_boolean(),
            FieldType::Object => v.is_object(),
            FieldType::Array => v.is_array(),
        }
    }
}

fn yes() -> bool {
    true
}

/// An input or output field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Field {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldType,
    #[serde(default = "yes")]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Outputs only: where the value is read (an expression over `data`, `responses`,
    /// `inputs`; default `data.outputs.<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// An artifact the bot produces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactSpec {
    pub name: String,
    /// Where its content is read (default `data.artifacts.<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub media_type: String,
    #[serde(default)]
    pub required: bool,
}

/// The Case document (what is stored as `cases.spec`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaseSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub inputs: Vec<Field>,
    #[serde(default)]
    pub outputs: Vec<Field>,
    #[serde(default)]
    pub artifacts: Vec<ArtifactSpec>,
    /// A person approves the result before the task is done.
    #[serde(default)]
    pub review: bool,
    /// The bot's run on a task (each run: the first, and one per requested change) fails
    /// the task past this many seconds (default 60, at most 3600).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_S
}

/// A problem with a request or document: a JSON pointer and what is wrong there.
pub type FieldProblem = (String, String);

fn good_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A Case's name: 1–64 characters of letters, digits, `_`, `-`, `.`.
pub fn check_case_name(n: &str) -> Result<(), String> {
    if n.is_empty()
        || n.len() > 64
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(format!(
            "name \"{n}\": use 1 to 64 letters, digits, '_', '-' or '.'"
        ));
    }
    Ok(())
}

/// An expression of an output mapping: parsed by the bot language's evaluator, JavaScript
/// refused (mappings run on the host, outside the sandbox).
fn mapping_expr(src: &str) -> Result<runtime_core::expr::Expr, String> {
    match runtime_core::expr::CompiledExpr::new(src).kind {
        ExprKind::Fast(e) => Ok(e),
        ExprKind::Js => Err(format!(
            "\"{src}\" needs JavaScript; a mapping may use the expression subset only (paths, operators, literals)"
        )),
        ExprKind::Invalid(m) => Err(format!("\"{src}\" does not parse: {m}")),
    }
}

impl CaseSpec {
    /// Reads and checks a Case document (without its `name` and environment, which the API
    /// resolves). Every problem is listed with its pointer.
    pub fn from_json(doc: &Json) -> Result<CaseSpec, Vec<FieldProblem>> {
        let spec = Self::deserialize_with_pointer(doc)?;
        let mut problems = Vec::new();
        spec.check_names(&mut problems);
        spec.check_inputs_have_no_from(&mut problems);
        spec.check_output_mappings(&mut problems);
        spec.check_artifact_specs(&mut problems);
        spec.check_timeout(&mut problems);
        if problems.is_empty() {
            Ok(spec)
        } else {
            Err(problems)
        }
    }

    /// The document as a `CaseSpec`, a type error given with the pointer where it is.
    fn deserialize_with_pointer(doc: &Json) -> Result<CaseSpec, Vec<FieldProblem>> {
        serde_path_to_error::deserialize(doc).map_err(|e| {
            let path = e.path().to_string();
            let pointer = if path == "." {
                String::new()
            } else {
                format!(
                    "/{}",
                    path.replace(['[', '.'], "/")
                        .replace(']', "")
                        .trim_start_matches('/')
                )
            };
            vec![(pointer, e.inner().to_string())]
        })
    }

    /// Checks each list's length and its names: well formed and listed once.
    fn check_names(&self, problems: &mut Vec<FieldProblem>) {
        let lists: [(&str, Vec<&str>); 3] = [
            (
                "inputs",
                self.inputs.iter().map(|f| f.name.as_str()).collect(),
            ),
            (
                "outputs",
                self.outputs.iter().map(|f| f.name.as_str()).collect(),
            ),
            (
                "artifacts",
                self.artifacts.iter().map(|a| a.name.as_str()).collect(),
            ),
        ];
        for (list, names) in &lists {
            if names.len() > MAX_FIELDS {
                problems.push((
                    format!("/{list}"),
                    format!("at most {MAX_FIELDS} {list}, not {}", names.len()),
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for (i, n) in names.iter().enumerate() {
                if !good_name(n) {
                    problems.push((
                        format!("/{list}/{i}/name"),
                        format!("\"{n}\" is not a field name (letters, digits and _, not starting with a digit; 64 at most)"),
                    ));
                } else if !seen.insert(*n) {
                    problems.push((
                        format!("/{list}/{i}/name"),
                        format!("\"{n}\" is listed twice"),
                    ));
                }
            }
        }
    }

    /// Refuses a `from` on an input: only outputs and artifacts are read from the bot.
    fn check_inputs_have_no_from(&self, problems: &mut Vec<FieldProblem>) {
        for (i, f) in self.inputs.iter().enumerate() {
            if f.from.is_some() {
                problems.push((
                    format!("/inputs/{i}/from"),
                    "an input has no `from` (only outputs and artifacts are read from the bot)"
                        .into(),
                ));
            }
        }
    }

    /// Checks that each output's `from` is a mapping expression.
    fn check_output_mappings(&self, problems: &mut Vec<FieldProblem>) {
        for (i, f) in self.outputs.iter().enumerate() {
            if let Some(src) = &f.from
                && let Err(e) = mapping_expr(src)
            {
                problems.push((format!("/outputs/{i}/from"), e));
            }
        }
    }

    /// Checks each artifact's `from` (a mapping expression) and its media type.
    fn check_artifact_specs(&self, problems: &mut Vec<FieldProblem>) {
        for (i, a) in self.artifacts.iter().enumerate() {
            if let Some(src) = &a.from
                && let Err(e) = mapping_expr(src)
            {
                problems.push((format!("/artifacts/{i}/from"), e));
            }
            let mt = &a.media_type;
            let ok = mt.len() <= 100
                && mt.split_once('/').is_some_and(|(t, s)| {
                    !t.is_empty()
                        && !s.is_empty()
                        && mt
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"/+-.;= _".contains(&b))
                });
            if !ok {
                problems.push((
                    format!("/artifacts/{i}/mediaType"),
                    format!("\"{mt}\" is not a media type (type/subtype)"),
                ));
            }
        }
    }

    /// Checks the time-out's bounds.
    fn check_timeout(&self, problems: &mut Vec<FieldProblem>) {
        if !(1..=MAX_TIMEOUT_S).contains(&self.timeout_seconds) {
            problems.push((
                "/timeoutSeconds".into(),
                format!("must be 1 to {MAX_TIMEOUT_S}, not {}", self.timeout_seconds),
            ));
        }
    }

    /// Checks a task's inputs: unknown fields, missing required ones and wrong types, each
    /// with its pointer (`/inputs/<name>`).
    pub fn check_inputs(&self, inputs: &Json) -> Result<Map<String, Json>, Vec<FieldProblem>> {
        let Some(obj) = inputs.as_object() else {
            return Err(vec![(
                "/inputs".into(),
                "must be an object of input field values".into(),
            )]);
        };
        let mut problems = Vec::new();
        for (k, v) in obj {
            match self.inputs.iter().find(|f| &f.name == k) {
                None => problems.push((
                    format!("/inputs/{}", pointer_escape(k)),
                    format!(
                        "unknown input field \"{k}\"; this Case's inputs are: {}",
                        names(&self.inputs)
                    ),
                )),
                Some(f) if !v.is_null() && !f.kind.accepts(v) => problems.push((
                    format!("/inputs/{k}"),
                    format!("must be of type {}", f.kind.name()),
                )),
                Some(_) => {}
            }
        }
        for f in &self.inputs {
            if f.required && obj.get(&f.name).is_none_or(Json::is_null) {
                problems.push((
                    format!("/inputs/{}", f.name),
                    format!("the required input \"{}\" is missing", f.name),
                ));
            }
        }
        if problems.is_empty() {
            Ok(obj.clone())
        } else {
            Err(problems)
        }
    }

    /// Reads the outputs from the bot's session data and the step's responses; an error
    /// names the field and what was found.
    pub fn read_outputs(
        &self,
        data: &Json,
        responses: &Json,
        inputs: &Json,
    ) -> Result<Map<String, Json>, String> {
        let env = MapEnv {
            data,
            responses,
            inputs,
        };
        let mut out = Map::new();
        for f in &self.outputs {
            let src = f
                .from
                .clone()
                .unwrap_or_else(|| format!("data.outputs.{}", f.name));
            // The default path reads as undefined when `data.outputs` itself is missing.
            let v = match eval_mapping(&src, &env) {
                Err(_) if f.from.is_none() => None,
                r => r.map_err(|e| format!("output \"{}\" ({src}): {e}", f.name))?,
            };
            match v {
                None | Some(Json::Null) if f.required => {
                    return Err(format!(
                        "output \"{}\" is required, but {src} is {} after the bot's step",
                        f.name,
                        if v.is_none() { "undefined" } else { "null" }
                    ));
                }
                None | Some(Json::Null) => {}
                Some(v) if !f.kind.accepts(&v) => {
                    return Err(format!(
                        "output \"{}\" must be of type {}, but {src} is {}",
                        f.name,
                        f.kind.name(),
                        shorten(&v)
                    ));
                }
                Some(v) => {
                    out.insert(f.name.clone(), v);
                }
            }
        }
        Ok(out)
    }

    /// Reads the artifacts: `(name, media type, bytes)` each.
    pub fn read_artifacts(
        &self,
        data: &Json,
        responses: &Json,
        inputs: &Json,
    ) -> Result<Vec<(String, String, Vec<u8>)>, String> {
        use base64::Engine;
        let env = MapEnv {
            data,
            responses,
            inputs,
        };
        let mut out = Vec::new();
        for a in &self.artifacts {
            let src = a
                .from
                .clone()
                .unwrap_or_else(|| format!("data.artifacts.{}", a.name));
            let v = match eval_mapping(&src, &env) {
                Err(_) if a.from.is_none() => None,
                r => r.map_err(|e| format!("artifact \"{}\" ({src}): {e}", a.name))?,
            };
            let (bytes, media_type) = match v {
                None | Some(Json::Null) if a.required => {
                    return Err(format!(
                        "artifact \"{}\" is required, but {src} is empty after the bot's step",
                        a.name
                    ));
                }
                None | Some(Json::Null) => continue,
                Some(Json::String(s)) => (s.into_bytes(), a.media_type.clone()),
                Some(Json::Object(o)) if o.get("content").is_some_and(Json::is_string) => {
                    let content = o["content"].as_str().unwrap_or_default();
                    let bytes = match o.get("encoding").and_then(Json::as_str) {
                        Some("base64") => base64::engine::general_purpose::STANDARD
                            .decode(content)
                            .map_err(|e| {
                                format!("artifact \"{}\": content is not base64: {e}", a.name)
                            })?,
                        None | Some("utf-8") => content.as_bytes().to_vec(),
                        Some(other) => {
                            return Err(format!(
                                "artifact \"{}\": unknown encoding \"{other}\" (base64 or utf-8)",
                                a.name
                            ));
                        }
                    };
                    let mt = o
                        .get("mediaType")
                        .and_then(Json::as_str)
                        .unwrap_or(&a.media_type)
                        .to_owned();
                    (bytes, mt)
                }
                Some(other) => (other.to_string().into_bytes(), a.media_type.clone()),
            };
            if bytes.len() > MAX_ARTIFACT {
                return Err(format!(
                    "artifact \"{}\" has {} bytes; at most {MAX_ARTIFACT}",
                    a.name,
                    bytes.len()
                ));
            }
            out.push((a.name.clone(), media_type, bytes));
        }
        Ok(out)
    }

    /// A reviewer's edited outputs over the bot's: each edit must be a declared output of
    /// its type; a required output cannot be removed (set to null).
    pub fn merge_outputs(
        &self,
        current: &Map<String, Json>,
        edits: &Json,
    ) -> Result<Map<String, Json>, Vec<FieldProblem>> {
        let Some(obj) = edits.as_object() else {
            return Err(vec![(
                "/outputs".into(),
                "must be an object of output field values".into(),
            )]);
        };
        let mut out = current.clone();
        let mut problems = Vec::new();
        for (k, v) in obj {
            match self.outputs.iter().find(|f| &f.name == k) {
                None => problems.push((
                    format!("/outputs/{}", pointer_escape(k)),
                    format!(
                        "unknown output field \"{k}\"; this Case's outputs are: {}",
                        names(&self.outputs)
                    ),
                )),
                Some(f) if v.is_null() && f.required => problems.push((
                    format!("/outputs/{k}"),
                    format!("the output \"{k}\" is required"),
                )),
                Some(_) if v.is_null() => {
                    out.remove(k);
                }
                Some(f) if !f.kind.accepts(v) => problems.push((
                    format!("/outputs/{k}"),
                    format!("must be of type {}", f.kind.name()),
                )),
                Some(_) => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(problems)
        }
    }
}

fn names(fields: &[Field]) -> String {
    if fields.is_empty() {
        return "none".into();
    }
    fields
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn pointer_escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn shorten(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}…", &s[..s.floor_char_boundary(60)])
    } else {
        s
    }
}

/// The variables of a mapping.
struct MapEnv<'a> {
    data: &'a Json,
    responses: &'a Json,
    inputs: &'a Json,
}

impl Env for MapEnv<'_> {
    fn var<'a>(&'a self, name: &str) -> Option<V<'a>> {
        match name {
            "data" => Some(V::from_json(self.data)),
            "responses" => Some(V::from_json(self.responses)),
            "inputs" => Some(V::from_json(self.inputs)),
            _ => None,
        }
    }
}

fn eval_mapping(src: &str, env: &MapEnv<'_>) -> Result<Option<Json>, String> {
    let e = mapping_expr(src)?;
    match runtime_core::expr::eval(&e, env) {
        Ok(v) => Ok(v.into_json()),
        Err(runtime_core::expr::EvalError::Throw(m)) => Err(m),
        Err(runtime_core::expr::EvalError::NeedsJs(m)) => Err(format!(
            "needs JavaScript ({m}); a mapping may use the expression subset only"
        )),
    }
}

/// Task states.
pub mod status {
    pub const PENDING: &str = "pending";
    pub const IN_PROGRESS: &str = "in_progress";
    pub const REVIEW: &str = "review";
    pub const DONE: &str = "done";
    pub const FAILED: &str = "failed";
}

/// A reviewer's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Reject,
    Changes,
}

impl Decision {
    pub fn parse(s: &str) -> Option<Decision> {
        match s {
            "approve" => Some(Decision::Approve),
            "reject" => Some(Decision::Reject),
            "changes" => Some(Decision::Changes),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
            Decision::Changes => "changes",
        }
    }

    /// The state a decision moves a task in review to.
    pub fn target(self) -> &'static str {
        match self {
            Decision::Approve => status::DONE,
            Decision::Reject => status::FAILED,
            Decision::Changes => status::IN_PROGRESS,
        }
    }
}

/// Whether the task state machine allows `from` → `to`.
pub fn allowed(from: &str, to: &str) -> bool {
    use status::*;
    matches!(
        (from, to),
        (PENDING, IN_PROGRESS)
            | (IN_PROGRESS, REVIEW)
            | (IN_PROGRESS, DONE)
            | (IN_PROGRESS, FAILED)
            | (REVIEW, DONE)
            | (REVIEW, FAILED)
            | (REVIEW, IN_PROGRESS)
    )
}

/// The bot's message for a new task.
pub fn task_message(task_id: &str, case_id: &str, inputs: &Json) -> Json {
    json!({"type": "data", "payload": {"type": "task", "taskId": task_id, "caseId": case_id, "inputs": inputs}})
}

/// The bot's message for a reviewer's requested changes.
pub fn changes_message(task_id: &str, case_id: &str, comment: &str, outputs: &Json) -> Json {
    json!({"type": "data", "content": comment, "payload": {"type": "review", "decision": "changes",
        "comment": comment, "taskId": task_id, "caseId": case_id, "outputs": outputs}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CaseSpec {
        CaseSpec::from_json(&json!({
            "inputs": [
                {"name": "invoice_url", "type": "string"},
                {"name": "copies", "type": "integer", "required": false}
            ],
            "outputs": [
                {"name": "total", "type": "number"},
                {"name": "vendor", "type": "string", "from": "data.vendor.name"},
                {"name": "note", "type": "string", "required": false, "from": "responses[0].content"}
            ],
            "artifacts": [{"name": "summary", "mediaType": "text/plain"}],
            "review": true
        }))
        .unwrap()
    }

    #[test]
    fn a_case_document_is_checked_with_pointers() {
        let s = spec();
        assert!(s.review);
        assert_eq!(s.timeout_seconds, DEFAULT_TIMEOUT_S);
        let bad = CaseSpec::from_json(&json!({
            "inputs": [{"name": "a", "type": "string"}, {"name": "a", "type": "number"}, {"name": "9x", "type": "string"}],
            "outputs": [{"name": "o", "type": "string", "from": "data.x.map(function (v) { return v })"}],
            "artifacts": [{"name": "f", "mediaType": "nonsense"}],
            "timeoutSeconds": 0
        }))
        .unwrap_err();
        let ptrs: Vec<&str> = bad.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            ptrs,
            [
                "/inputs/1/name",
                "/inputs/2/name",
                "/outputs/0/from",
                "/artifacts/0/mediaType",
                "/timeoutSeconds"
            ],
            "{bad:?}"
        );
        let typo =
            CaseSpec::from_json(&json!({"inputs": [{"name": "a", "type": "strng"}]})).unwrap_err();
        assert_eq!(typo[0].0, "/inputs/0/type", "{typo:?}");
        let unknown = CaseSpec::from_json(&json!({"reveiw": true})).unwrap_err();
        assert!(unknown[0].1.contains("reveiw"), "{unknown:?}");
    }

    #[test]
    fn inputs_are_checked_field_by_field() {
        let s = spec();
        assert!(s.check_inputs(&json!({"invoice_url": "https://x"})).is_ok());
        let e = s
            .check_inputs(&json!({"copies": "two", "extra": 1}))
            .unwrap_err();
        let mut ptrs: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
        ptrs.sort();
        assert_eq!(
            ptrs,
            ["/inputs/copies", "/inputs/extra", "/inputs/invoice_url"]
        );
        assert!(
            e.iter()
                .any(|(_, d)| d.contains("unknown input field \"extra\""))
        );
        assert!(s.check_inputs(&json!([1])).is_err());
        assert!(
            s.check_inputs(&json!({"invoice_url": "u", "copies": 2.5}))
                .is_err()
        );
    }

    #[test]
    fn outputs_and_artifacts_are_read_from_the_session() {
        let s = spec();
        let data = json!({"outputs": {"total": 12.5}, "vendor": {"name": "ACME"},
            "artifacts": {"summary": "12.5 from ACME"}});
        let responses = json!([{"type": "text", "content": "done"}]);
        let out = s.read_outputs(&data, &responses, &json!({})).unwrap();
        assert_eq!(
            Json::Object(out),
            json!({"total": 12.5, "vendor": "ACME", "note": "done"})
        );
        let arts = s.read_artifacts(&data, &responses, &json!({})).unwrap();
        assert_eq!(
            arts,
            [(
                "summary".to_string(),
                "text/plain".to_string(),
                b"12.5 from ACME".to_vec()
            )]
        );
        let missing = s
            .read_outputs(&json!({"vendor": {"name": "A"}}), &responses, &json!({}))
            .unwrap_err();
        assert!(
            missing.contains("\"total\" is required") && missing.contains("data.outputs.total"),
            "{missing}"
        );
        let wrong = s
            .read_outputs(
                &json!({"outputs": {"total": "12"}, "vendor": {"name": "A"}}),
                &responses,
                &json!({}),
            )
            .unwrap_err();
        assert!(wrong.contains("must be of type number"), "{wrong}");
        let b64 = CaseSpec::from_json(&json!({"artifacts": [{"name": "pdf", "mediaType": "application/pdf", "from": "data.file"}]}))
            .unwrap()
            .read_artifacts(&json!({"file": {"content": "JVBERg==", "encoding": "base64"}}), &json!([]), &json!({}))
            .unwrap();
        assert_eq!(b64[0].2, b"%PDF");
    }

    #[test]
    fn edited_outputs_are_checked() {
        let s = spec();
        let cur: Map<String, Json> = json!({"total": 1, "vendor": "A"})
            .as_object()
            .unwrap()
            .clone();
        let m = s.merge_outputs(&cur, &json!({"total": 2})).unwrap();
        assert_eq!(m["total"], 2);
        assert_eq!(m["vendor"], "A");
        let e = s
            .merge_outputs(&cur, &json!({"total": "x", "nope": 1, "vendor": null}))
            .unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
    }

    #[test]
    fn the_state_machine_is_the_references() {
        use status::*;
        let all = [PENDING, IN_PROGRESS, REVIEW, DONE, FAILED];
        let mut n = 0;
        for a in all {
            for b in all {
                n += usize::from(allowed(a, b));
            }
        }
        assert_eq!(n, 7);
        assert!(!allowed(DONE, REVIEW));
        assert!(!allowed(PENDING, DONE));
        assert!(allowed(REVIEW, IN_PROGRESS));
        assert_eq!(Decision::parse("changes").unwrap().target(), IN_PROGRESS);
        assert!(Decision::parse("maybe").is_none());
    }
}
