//! Validation and compilation of a bot document into a [`CompiledBot`].
//!
//! All problems are collected in one pass, each with its path and, for YAML, its position.
//! Structural problems are errors and reject the bot; the rest are warnings returned with it.

use crate::expr::{CompiledExpr, ExprKind, RegexLit};
use crate::interp;
use crate::model::*;
use crate::source::{MAX_DOC_DEPTH, Positions, Problem, Severity, parse_document};
use crate::value::nested_deeper_than;
use serde_json::{Map, Value as Json};
use std::borrow::Cow;
use std::collections::HashMap;

/// Problems kept of each severity; the rest are counted in a last "… and N more" line.
/// Default 100. A huge bad bot (say 20,000 transitions to unknown states) would otherwise
/// produce an error of megabytes, and its "did you mean" hints, computed only for problems
/// that are kept, would cost a scan of every name per problem: quadratic time.
pub const MAX_PROBLEMS: usize = 100;

/// Parts a mapping target may have (`context.a.b` has three, nested mapping objects add
/// theirs). Default 32. A target creates one object per part in the session, so a key like
/// `context.a.a.a…` could otherwise nest the session beyond what the engine may walk.
pub const MAX_TARGET_PARTS: usize = 32;

/// Bytes of JSON (roughly) that uses of named actions and NLUs may copy. Default 32 MiB.
/// Each use gets its own copy of the definition's options (merged with its own) and parses
/// its conditions again, so a 1 MiB action used by 100,000 states of a 1 MiB bot would
/// otherwise cost 100 GiB. Each definition is measured once.
pub const MAX_COPIED_BYTES: usize = 32 << 20;

/// Names, keys and expressions quoted in problems are cut to about this many bytes.
const MAX_QUOTED: usize = 80;

/// A bot that passed validation, with its warnings.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub bot: CompiledBot,
    pub warnings: Vec<Problem>,
    /// Every piece of JavaScript in the bot, with where it is written: the host has the
    /// sandbox guest parse them (runtime-core has no JavaScript parser) so that a syntax
    /// error is a validation error, not a failure at run time.
    pub js_sites: Vec<JsSite>,
}

/// A piece of JavaScript and where it is written.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JsSite {
    /// Path of the string holding the code (`methods.lookup(ctx)`,
    /// `flows.order.states.ask.transitions.done.condition`).
    pub path: String,
    pub code: JsCode,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsCode {
    /// A method, compiled as the guest compiles it.
    Method(Method),
    /// An expression outside the fast subset.
    Expr(String),
}

/// A syntax error in a [`JsSite`]: `line` and `column` (1-based) count in the site's own
/// code, as written in the bot.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JsProblem {
    /// Index of the site in the list checked.
    pub site: usize,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl JsProblem {
    /// The validation error: the site's path, the message and where in the code.
    pub fn to_problem(&self, site: &JsSite) -> Problem {
        let what = match site.code {
            JsCode::Method(_) => "method",
            JsCode::Expr(_) => "expression",
        };
        Problem {
            severity: Severity::Error,
            path: site.path.clone(),
            message: format!(
                "JavaScript syntax error at line {}, column {} of the {what}: {}",
                self.line, self.column, self.message
            ),
            line: None,
            column: None,
        }
    }
}

/// Problems that reject a bot (errors first, then the warnings found alongside).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", .problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct Rejected {
    pub problems: Vec<Problem>,
}

impl Rejected {
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }
}

/// Reads, validates and compiles YAML or JSON bot text.
pub fn compile_source(text: &str) -> Result<Compiled, Rejected> {
    let (doc, pos) = parse_document(text).map_err(|p| Rejected { problems: vec![p] })?;
    compile_with_positions(&doc, Some(&pos))
}

/// Validates and compiles a bot document already parsed to JSON.
pub fn compile(doc: &Json) -> Result<Compiled, Rejected> {
    compile_with_positions(doc, None)
}

pub fn compile_with_positions(doc: &Json, pos: Option<&Positions>) -> Result<Compiled, Rejected> {
    let mut c = Lower {
        problems: Vec::new(),
        kept: [0, 0],
        omitted: [0, 0],
        pos,
        methods: Vec::new(),
        method_index: HashMap::new(),
        copied: 0,
        sizes: HashMap::new(),
        regexes: HashMap::new(),
        js_sites: Vec::new(),
    };
    // Everything below walks the document recursively: its depth is checked first, without
    // recursion (a document parsed from text is already within it; one built otherwise may
    // not be).
    if let Some(path) = nested_deeper_than(doc, MAX_DOC_DEPTH) {
        c.error(&path, crate::source::too_deep_message());
        return Err(Rejected {
            problems: c.problems,
        });
    }
    let bot = c.bot(doc);
    let [omitted_errors, omitted_warnings] = c.omitted;
    let mut problems = c.problems;
    problems.sort_by_key(|p| p.severity != Severity::Error);
    let rejected = bot.is_none() || problems.iter().any(|p| p.severity == Severity::Error);
    // Errors first: a rejected bot lists at most MAX_PROBLEMS problems in all.
    let shown = if rejected {
        MAX_PROBLEMS
    } else {
        problems.len()
    };
    let cut = problems.len().saturating_sub(shown);
    problems.truncate(shown);
    let more = omitted_errors + omitted_warnings + cut;
    if more > 0 {
        problems.push(Problem {
            severity: if omitted_errors > 0 {
                Severity::Error
            } else {
                Severity::Warning
            },
            path: String::new(),
            message: format!("… and {more} more problems"),
            line: None,
            column: None,
        });
    }
    match bot {
        Some(bot) if !rejected => Ok(Compiled {
            bot,
            warnings: problems,
            js_sites: c.js_sites,
        }),
        _ => Err(Rejected { problems }),
    }
}

const BOT_KEYS: &[&str] = &[
    "schema",
    "id",
    "name",
    "version",
    "desc",
    "lang",
    "timezone",
    "flows",
    "nlus",
    "methods",
    "config",
    "maxRecursion",
    "revision",
    "tag",
    "changelog",
    "projectId",
];
const FLOW_KEYS: &[&str] = &[
    "intents",
    "states",
    "actions",
    "methods",
    "nlus",
    "fallback",
    "priority",
    "volatile",
    "expire",
    "active",
    "stateMapper",
    "stateActions",
    "invalidate",
];
const INTENT_KEYS: &[&str] = &[
    "type",
    "condition",
    "classifier",
    "attributes",
    "initial",
    "fallback",
    "priority",
];
const CLASSIFIER_KEYS: &[&str] = &[
    "nlu",
    "match",
    "hint",
    "options",
    "process",
    "dict",
    "expression",
];
const ATTRIBUTE_KEYS: &[&str] = &["nlu", "path", "hint", "options", "process", "dict"];
const STATE_KEYS: &[&str] = &[
    "initial",
    "end",
    "action",
    "actions",
    "transitions",
    "float",
    "transit",
    "exit",
    "enter",
];
const TRANSITION_KEYS: &[&str] = &["condition", "fallback", "priority", "mapping"];
const STATE_ACTION_KEYS: &[&str] = &["name", "condition", "options", "method"];
const ACTION_KEYS: &[&str] = &[
    "type",
    "options",
    "condition",
    "method",
    "command",
    "payload",
];
const NLU_KEYS: &[&str] = &["type", "options", "method", "process"];
const KNOWN_NLU_TYPES: &[&str] = &[
    "keyword",
    "regex",
    "nl",
    "method",
    "witIntent",
    "witEntity",
    "verstandClassifier",
    "verstandTagger",
    "verstandRetrieval",
];

/// Why an NLU of an external type cannot run: the services behind these types (Kata's
/// Verstand models, Wit.ai) are not part of botbox and are deprecated on Kata itself.
fn external_nlu_warning(name: &str, ty: &str) -> String {
    let service = if ty.starts_with("wit") {
        "Wit.ai"
    } else {
        "Kata's hosted Verstand models"
    };
    format!(
        "NLU \"{}\" has the deprecated type {ty}, which needs {service}: botbox does not provide that service, so this NLU cannot run and its output is always null (classifiers using it never match, attributes from it are null); use an nl NLU (NL Studio), keyword, regex or method NLU instead",
        short(name)
    )
}

/// The account of an `nluId` (`<account>:<nlu name>`), if it has that form.
pub fn nl_owner(nlu_id: &str) -> Option<&str> {
    let (owner, name) = nlu_id.split_once(':')?;
    (!owner.trim().is_empty() && !name.trim().is_empty()).then_some(owner.trim())
}

/// The `nl` NLUs of a bot document with an `nluId`: `(path of the nluId, NLU name, nluId)`.
/// Whether each can run depends on accounts and visibility, which the host knows: it checks
/// them at push time and warns with [`nl_unavailable_warning`].
pub fn nl_references(doc: &Json) -> Vec<(String, String, String)> {
    let mut out = vec![];
    let mut collect = |nlus: Option<&Json>, path: &str| {
        let Some(Json::Object(nm)) = nlus else { return };
        for (n, v) in nm {
            if v.get("type").and_then(Json::as_str) != Some("nl") {
                continue;
            }
            if let Some(id) = v.pointer("/options/nluId").and_then(Json::as_str) {
                out.push((
                    format!("{path}.{n}.options.nluId"),
                    n.clone(),
                    id.to_string(),
                ));
            }
        }
    };
    collect(doc.get("nlus"), "nlus");
    if let Some(Json::Object(flows)) = doc.get("flows") {
        for (f, fv) in flows {
            collect(fv.get("nlus"), &format!("flows.{f}.nlus"));
        }
    }
    out
}

/// The warning for an `nl` NLU whose model the bot may not use: `why` is the host's reason.
pub fn nl_unavailable_warning(path: &str, name: &str, nlu_id: &str, why: &str) -> Problem {
    Problem {
        severity: Severity::Warning,
        path: path.to_string(),
        message: format!(
            "NLU \"{}\" points to \"{}\": {}; until that changes this NLU's output is null (classifiers using it never match)",
            short(name),
            short(nlu_id),
            why
        ),
        line: None,
        column: None,
    }
}

/// Every `cms.<page>.<form>.<element>` the bot document's text names (in `$(…)`, conditions
/// or methods), each once per place, with the place (`flows.main.states.greet.action[0].options.text`):
/// the host warns at push about those the CMS's latest revision lacks. The walk follows the
/// document, whose depth the reader bounds.
pub fn cms_references(doc: &Json) -> Vec<(String, [String; 3])> {
    static RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?:^|[^A-Za-z0-9_$.])cms\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)",
        )
        .expect("a valid pattern")
    });
    fn walk(v: &Json, path: &str, out: &mut Vec<(String, [String; 3])>) {
        match v {
            Json::String(text) => {
                for c in RE.captures_iter(text) {
                    let r = [1, 2, 3].map(|i| c[i].to_owned());
                    if !out.iter().any(|(p, seen)| p == path && *seen == r) {
                        out.push((path.to_owned(), r));
                    }
                }
            }
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}[{i}]"), out);
                }
            }
            Json::Object(map) => {
                for (k, item) in map {
                    let here = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(item, &here, out);
                }
            }
            _ => {}
        }
    }
    let mut out = vec![];
    walk(doc, "", &mut out);
    out
}

/// The warning for a `cms.<page>.<form>.<element>` that the CMS revision `revision` (the
/// project's latest; `None`: the project has none) lacks.
pub fn cms_missing_warning(path: &str, reference: &[String; 3], revision: Option<&str>) -> Problem {
    let name = format!("cms.{}", reference.join("."));
    let message = match revision {
        Some(rev) => format!(
            "{} is not in the project's latest CMS revision ({}); until it is published it reads as empty",
            short(&name),
            &rev[..rev.len().min(12)]
        ),
        None => format!(
            "{} names CMS content, and the project has no CMS revision; until one is published it reads as empty",
            short(&name)
        ),
    };
    Problem {
        severity: Severity::Warning,
        path: path.to_string(),
        message,
        line: None,
        column: None,
    }
}

struct Lower<'p> {
    /// At most MAX_PROBLEMS of each severity.
    problems: Vec<Problem>,
    /// Problems kept and not kept: errors, warnings.
    kept: [usize; 2],
    omitted: [usize; 2],
    pos: Option<&'p Positions>,
    methods: Vec<Method>,
    /// (flow, name) → the first method so declared (flow `None`: bot level).
    method_index: HashMap<(Option<String>, String), usize>,
    /// Bytes copied into uses of named actions and NLUs (MAX_COPIED_BYTES).
    copied: usize,
    /// Size of each definition copied, by address (measured once).
    sizes: HashMap<*const Json, usize>,
    /// Patterns already checked, by (source, flags): NLU uses share their definition's.
    regexes: HashMap<(String, String), Result<RegexLit, String>>,
    /// The JavaScript found, for the host's syntax check ([`Compiled::js_sites`]).
    js_sites: Vec<JsSite>,
}

/// The states of a flow, in order and by name (for transitions).
struct StateNames<'a, 'd> {
    list: &'a [&'d String],
    index: &'a HashMap<&'d str, usize>,
}

/// Name scope while compiling one flow.
struct Scope<'d> {
    flow: Option<&'d str>,
    flow_nlus: Option<&'d Map<String, Json>>,
    bot_nlus: Option<&'d Map<String, Json>>,
    flow_actions: Option<&'d Map<String, Json>>,
}

fn path_join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A name, key or expression as a problem quotes it: cut when long (a key or an expression
/// can be hundreds of KiB, and problems are shown to people).
fn short(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_QUOTED {
        return Cow::Borrowed(s);
    }
    let mut cut = MAX_QUOTED - 20;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes)", &s[..cut], s.len()))
}

/// A path as a problem keeps it: cut when long (keys can be long).
fn short_path(path: &str) -> String {
    if path.len() <= 4 * MAX_QUOTED {
        return path.to_string();
    }
    let mut cut = 4 * MAX_QUOTED;
    while !path.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &path[..cut])
}

/// Roughly the bytes of `v` as JSON text, without recursion.
fn json_size(v: &Json) -> usize {
    let mut size = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        size += match v {
            Json::String(s) => s.len() + 2,
            Json::Array(a) => {
                stack.extend(a);
                2 + a.len()
            }
            Json::Object(m) => {
                stack.extend(m.values());
                2 + m.keys().map(|k| k.len() + 4).sum::<usize>()
            }
            _ => 8,
        };
    }
    size
}

fn describe(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "an object",
    }
}

impl<'p> Lower<'p> {
    fn report(&mut self, severity: Severity, path: &str, message: String) {
        if !self.keeps(severity) {
            self.omitted[(severity == Severity::Warning) as usize] += 1;
            return;
        }
        let (line, column) = match self.pos.and_then(|p| p.find(path)) {
            Some((l, c)) => (Some(l), Some(c)),
            None => (None, None),
        };
        self.kept[(severity == Severity::Warning) as usize] += 1;
        self.problems.push(Problem {
            severity,
            path: short_path(path),
            message,
            line,
            column,
        });
    }

    /// Whether a problem of this severity would still be kept: hints and long messages are
    /// worked out only then.
    fn keeps(&self, severity: Severity) -> bool {
        self.kept[(severity == Severity::Warning) as usize] < MAX_PROBLEMS
    }

    fn error(&mut self, path: &str, message: impl Into<String>) {
        self.report(Severity::Error, path, message.into());
    }

    fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.report(Severity::Warning, path, message.into());
    }

    fn object<'d>(&mut self, v: &'d Json, path: &str) -> Option<&'d Map<String, Json>> {
        match v {
            Json::Object(m) => Some(m),
            other => {
                self.error(
                    path,
                    format!("expected an object, found {}", describe(other)),
                );
                None
            }
        }
    }

    fn opt_object<'d>(
        &mut self,
        m: &'d Map<String, Json>,
        key: &str,
        path: &str,
    ) -> Option<&'d Map<String, Json>> {
        match m.get(key) {
            None | Some(Json::Null) => None,
            Some(v) => self.object(v, &path_join(path, key)),
        }
    }

    fn unknown_keys(&mut self, m: &Map<String, Json>, path: &str, known: &[&str]) {
        for k in m.keys() {
            if !known.contains(&k.as_str()) {
                if !self.keeps(Severity::Warning) {
                    self.omitted[1] += 1;
                    continue;
                }
                let hint = known
                    .iter()
                    .find(|c| similar(c, k))
                    .map(|c| format!(" (did you mean \"{c}\"?)"))
                    .unwrap_or_default();
                self.warn(
                    &path_join(path, k),
                    format!(
                        "unknown key \"{}\"{hint}; it is kept but has no effect",
                        short(k)
                    ),
                );
            }
        }
    }

    fn bool_field(&mut self, m: &Map<String, Json>, key: &str, path: &str) -> bool {
        match m.get(key) {
            None | Some(Json::Null) => false,
            Some(Json::Bool(b)) => *b,
            Some(other) => {
                self.error(
                    &path_join(path, key),
                    format!("expected a boolean, found {}", describe(other)),
                );
                false
            }
        }
    }

    fn num_field(&mut self, m: &Map<String, Json>, key: &str, path: &str) -> Option<f64> {
        match m.get(key) {
            None | Some(Json::Null) => None,
            Some(Json::Number(n)) => n.as_f64(),
            Some(Json::String(s)) if s.trim().parse::<f64>().is_ok() => s.trim().parse().ok(),
            Some(other) => {
                self.error(
                    &path_join(path, key),
                    format!("expected a number, found {}", describe(other)),
                );
                None
            }
        }
    }

    fn str_field(&mut self, m: &Map<String, Json>, key: &str, path: &str) -> Option<String> {
        match m.get(key) {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Number(n)) => Some(n.to_string()),
            Some(other) => {
                self.error(
                    &path_join(path, key),
                    format!("expected a string, found {}", describe(other)),
                );
                None
            }
        }
    }

    /// An expression, with a warning when it does not parse, and an error when it is over a
    /// limit (too deep or too long: nothing could evaluate it).
    fn expr(&mut self, src: &str, path: &str) -> CompiledExpr {
        let e = CompiledExpr::new(src);
        if e.kind == ExprKind::Js {
            self.js_sites.push(JsSite {
                path: path.to_string(),
                code: JsCode::Expr(src.to_string()),
            });
        }
        if let ExprKind::Invalid(msg) = &e.kind {
            let message = format!("expression \"{}\" does not parse: {msg}", short(src));
            if e.over_limit() {
                self.error(path, message);
            } else {
                self.warn(path, message);
            }
        }
        e
    }

    /// `condition`: a string or a list of strings (all must hold).
    fn conditions(&mut self, m: &Map<String, Json>, path: &str) -> Vec<CompiledExpr> {
        let p = path_join(path, "condition");
        match m.get("condition") {
            None | Some(Json::Null) => vec![],
            Some(Json::String(s)) => vec![self.expr(s, &p)],
            Some(Json::Bool(b)) => vec![CompiledExpr::literal(&Json::Bool(*b))],
            Some(Json::Array(items)) => {
                let mut out = vec![];
                for (i, it) in items.iter().enumerate() {
                    let ip = format!("{p}[{i}]");
                    match it {
                        Json::String(s) => out.push(self.expr(s, &ip)),
                        Json::Bool(b) => out.push(CompiledExpr::literal(&Json::Bool(*b))),
                        other => self.error(
                            &ip,
                            format!("expected a string condition, found {}", describe(other)),
                        ),
                    }
                }
                out
            }
            Some(other) => {
                self.error(
                    &p,
                    format!(
                        "expected a string or a list of strings, found {}",
                        describe(other)
                    ),
                );
                vec![]
            }
        }
    }

    /// The whole bot: its settings, its bot-level NLUs and methods, then its flows.
    fn bot(&mut self, doc: &Json) -> Option<CompiledBot> {
        let root = self.object(doc, "")?;
        self.unknown_keys(root, "", BOT_KEYS);
        self.check_schema(root);
        let name = self.str_field(root, "name", "").unwrap_or_default();
        let version = self.str_field(root, "version", "");
        let lang = self.str_field(root, "lang", "");
        let timezone = self.num_field(root, "timezone", "").unwrap_or(0.0);
        let config = self.bot_config(root);
        let max_recursion = self.max_recursion(root, &config);
        let bot_nlus = self.opt_object(root, "nlus", "");
        if let Some(nm) = bot_nlus {
            self.check_nlus(nm, "nlus");
        }
        if let Some(ms) = self.opt_object(root, "methods", "") {
            self.methods_of(ms, "methods", None);
        }
        let Some(flows_v) = root.get("flows") else {
            self.error("flows", "missing \"flows\": a bot needs at least one flow");
            return None;
        };
        let flows_m = self.object(flows_v, "flows")?;
        if flows_m.is_empty() {
            self.error("flows", "a bot needs at least one flow");
        }
        // Flow-local methods first, so that names resolve with flow scope.
        self.flow_methods(flows_m);
        let flows = self.flows(flows_m, bot_nlus);
        let fallback_flow = flows.iter().position(|f| f.fallback);
        Some(CompiledBot {
            format: crate::model::COMPILED_FORMAT,
            name,
            version,
            lang,
            timezone,
            flows,
            methods: std::mem::take(&mut self.methods),
            config,
            max_recursion,
            fallback_flow,
            uses_js: !self.js_sites.is_empty(),
            cms: Json::Null,
        })
    }

    /// Warns about a `schema` that is not the language's.
    fn check_schema(&mut self, root: &Map<String, Json>) {
        if let Some(Json::String(s)) = root.get("schema")
            && !matches!(
                s.as_str(),
                "kata.ai/schema/kata-ml/1.0" | "kata.ai/schema/kataml/1.0"
            )
        {
            self.warn("schema", format!("unknown schema \"{}\"", short(s)));
        }
    }

    /// The bot's `config` object (empty when absent or not an object).
    fn bot_config(&mut self, root: &Map<String, Json>) -> Json {
        match root.get("config") {
            None | Some(Json::Null) => Json::Object(Map::new()),
            Some(v @ Json::Object(_)) => v.clone(),
            Some(other) => {
                self.error(
                    "config",
                    format!("expected an object, found {}", describe(other)),
                );
                Json::Object(Map::new())
            }
        }
    }

    /// `maxRecursion` from the config or the bot's root: a positive integer, 3 by default.
    fn max_recursion(&mut self, root: &Map<String, Json>, config: &Json) -> u32 {
        match config
            .get("maxRecursion")
            .or_else(|| root.get("maxRecursion"))
        {
            None | Some(Json::Null) => 3,
            Some(Json::Number(n)) if n.as_u64().is_some_and(|v| v >= 1) => {
                n.as_u64().unwrap().min(u32::MAX as u64) as u32
            }
            Some(other) => {
                let p = if config.get("maxRecursion").is_some() {
                    "config.maxRecursion"
                } else {
                    "maxRecursion"
                };
                let other = short(&other.to_string()).into_owned();
                self.error(p, format!("expected a positive integer, found {other}"));
                3
            }
        }
    }

    /// Registers the methods declared inside each flow.
    fn flow_methods(&mut self, flows_m: &Map<String, Json>) {
        for (fname, fv) in flows_m {
            let fp = format!("flows.{fname}");
            if let Json::Object(fm) = fv
                && let Some(ms) = self.opt_object(fm, "methods", &fp)
            {
                self.methods_of(ms, &path_join(&fp, "methods"), Some(fname));
            }
        }
    }

    /// Every flow of the bot that compiles, in the document's order.
    fn flows<'d>(
        &mut self,
        flows_m: &'d Map<String, Json>,
        bot_nlus: Option<&'d Map<String, Json>>,
    ) -> Vec<Flow> {
        let mut flows = vec![];
        for (fname, fv) in flows_m {
            let fp = format!("flows.{fname}");
            let Some(fm) = self.object(fv, &fp) else {
                continue;
            };
            let scope = Scope {
                flow: Some(fname),
                flow_nlus: fm.get("nlus").and_then(Json::as_object),
                bot_nlus,
                flow_actions: fm.get("actions").and_then(Json::as_object),
            };
            if let Some(f) = self.flow(fname, fm, &fp, &scope) {
                flows.push(f);
            }
        }
        flows
    }

    fn methods_of(&mut self, ms: &Map<String, Json>, path: &str, flow: Option<&str>) {
        for (sig, v) in ms {
            let mp = path_join(path, sig);
            let (name, params) = match sig.find('(') {
                Some(i) => {
                    let inner = sig[i + 1..].trim_end().trim_end_matches(')');
                    let params: Vec<String> = inner
                        .split(',')
                        .map(|p| p.trim().to_string())
                        .filter(|p| !p.is_empty())
                        .collect();
                    (sig[..i].trim().to_string(), Some(params))
                }
                None => (sig.trim().to_string(), None),
            };
            let (code, entry, code_path) = match v {
                Json::String(code) => (code.clone(), None, mp.clone()),
                Json::Object(m) => {
                    self.unknown_keys(m, &mp, &["code", "entry"]);
                    let code = self.str_field(m, "code", &mp);
                    if code.is_none() {
                        self.error(&mp, "a method object needs \"code\"");
                    }
                    (
                        code.unwrap_or_default(),
                        self.str_field(m, "entry", &mp),
                        path_join(&mp, "code"),
                    )
                }
                other => {
                    self.error(
                        &mp,
                        format!(
                            "expected method code (a string) or {{code, entry}}, found {}",
                            describe(other)
                        ),
                    );
                    continue;
                }
            };
            self.method_index
                .entry((flow.map(str::to_string), name.clone()))
                .or_insert(self.methods.len());
            let method = Method {
                name,
                params,
                code,
                entry,
                flow: flow.map(str::to_string),
            };
            self.js_sites.push(JsSite {
                path: code_path,
                code: JsCode::Method(method.clone()),
            });
            self.methods.push(method);
        }
    }

    fn method_ref(&mut self, name: &str, scope: &Scope, path: &str) -> MethodRef {
        let base = name.split('(').next().unwrap_or(name).trim();
        // Flow-local first, then bot level; indexed, since a bot may name methods as often
        // as it has states.
        let find = |flow: Option<&str>| {
            self.method_index
                .get(&(flow.map(str::to_string), base.to_string()))
                .copied()
        };
        let index = scope
            .flow
            .and_then(|f| find(Some(f)))
            .or_else(|| find(None));
        if index.is_none() {
            self.warn(path, format!("unknown method \"{}\"", short(base)));
        }
        MethodRef {
            name: base.to_string(),
            index,
        }
    }

    fn method_list(&mut self, v: Option<&Json>, scope: &Scope, path: &str) -> Vec<MethodRef> {
        match v {
            None | Some(Json::Null) => vec![],
            Some(Json::String(s)) => vec![self.method_ref(s, scope, path)],
            Some(Json::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| match it {
                    Json::String(s) => Some(self.method_ref(s, scope, &format!("{path}[{i}]"))),
                    other => {
                        self.error(
                            &format!("{path}[{i}]"),
                            format!("expected a method name, found {}", describe(other)),
                        );
                        None
                    }
                })
                .collect(),
            Some(other) => {
                self.error(
                    path,
                    format!(
                        "expected a method name or a list of them, found {}",
                        describe(other)
                    ),
                );
                vec![]
            }
        }
    }

    /// One flow: its intents, its states (with their `stateActions`), its actions, NLUs and
    /// settings.
    fn flow(
        &mut self,
        name: &str,
        fm: &Map<String, Json>,
        fp: &str,
        scope: &Scope,
    ) -> Option<Flow> {
        self.unknown_keys(fm, fp, FLOW_KEYS);
        let intents = self.flow_intents(fm, fp, scope);
        let (mut states, floats) = self.flow_states(fm, fp, scope);
        let initial = states.iter().position(|s| s.initial);
        self.add_state_actions(fm, fp, scope, &mut states);
        self.check_flow_actions(fm, fp);
        if let Some(nm) = self.opt_object(fm, "nlus", fp) {
            self.check_nlus(nm, &path_join(fp, "nlus"));
        }
        let state_mapper = self
            .str_field(fm, "stateMapper", fp)
            .map(|m| self.method_ref(&m, scope, &path_join(fp, "stateMapper")));
        Some(Flow {
            name: name.to_string(),
            intents,
            initial,
            states,
            floats,
            fallback: self.bool_field(fm, "fallback", fp),
            priority: self.num_field(fm, "priority", fp).unwrap_or(0.0),
            volatile: self.bool_field(fm, "volatile", fp),
            expire: self.num_field(fm, "expire", fp),
            active: !matches!(fm.get("active"), Some(Json::Bool(false))),
            state_mapper,
            invalidate: self.num_field(fm, "invalidate", fp),
        })
    }

    /// The flow's `intents` (required).
    fn flow_intents(&mut self, fm: &Map<String, Json>, fp: &str, scope: &Scope) -> Vec<Intent> {
        let mut intents = vec![];
        match fm.get("intents") {
            None | Some(Json::Null) => {
                self.error(&path_join(fp, "intents"), "a flow needs \"intents\"")
            }
            Some(v) => {
                if let Some(im) = self.object(v, &path_join(fp, "intents")) {
                    for (iname, iv) in im {
                        let ip = format!("{fp}.intents.{iname}");
                        if let Some(i) = self.intent(iname, iv, &ip, scope) {
                            intents.push(i);
                        }
                    }
                }
            }
        }
        intents
    }

    /// The flow's states and its floating transitions; exactly one state must be initial.
    fn flow_states(
        &mut self,
        fm: &Map<String, Json>,
        fp: &str,
        scope: &Scope,
    ) -> (Vec<State>, Vec<Transition>) {
        // Names first, so transitions can resolve targets.
        let states_m = self.opt_object(fm, "states", fp);
        let names: Vec<&String> = states_m.map(|m| m.keys().collect()).unwrap_or_default();
        let index: HashMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let names = StateNames {
            list: &names,
            index: &index,
        };
        let mut states = vec![];
        let mut floats = vec![];
        if let Some(sm) = states_m {
            for (i, (sname, sv)) in sm.iter().enumerate() {
                let sp = format!("{fp}.states.{sname}");
                let Some(so) = self.object(sv, &sp) else {
                    continue;
                };
                if let Some((st, fl)) = self.state(sname, so, &sp, &names, scope, i) {
                    states.push(st);
                    floats.extend(fl);
                }
            }
            self.check_initials(&states, sm.is_empty(), fp);
        }
        (states, floats)
    }

    /// An error unless exactly one of the (declared) states is initial.
    fn check_initials(&mut self, states: &[State], none_declared: bool, fp: &str) {
        let initials: Vec<&str> = states
            .iter()
            .filter(|s| s.initial)
            .map(|s| s.name.as_str())
            .collect();
        if !none_declared && initials.is_empty() {
            self.error(
                &path_join(fp, "states"),
                "no initial state: mark exactly one state with \"initial: true\"",
            );
        } else if initials.len() > 1 {
            let mut listed: Vec<Cow<str>> = initials.iter().take(10).map(|n| short(n)).collect();
            if initials.len() > 10 {
                listed.push(Cow::Owned(format!("… {} in all", initials.len())));
            }
            self.error(
                &path_join(fp, "states"),
                format!(
                    "several initial states ({}): mark exactly one",
                    listed.join(", ")
                ),
            );
        }
    }

    /// Appends the flow's `stateActions` to the states they name.
    fn add_state_actions(
        &mut self,
        fm: &Map<String, Json>,
        fp: &str,
        scope: &Scope,
        states: &mut [State],
    ) {
        let Some(sa) = self.opt_object(fm, "stateActions", fp) else {
            return;
        };
        // The first state of each name, as a search from the front would find it.
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for (i, st) in states.iter().enumerate() {
            by_name.entry(st.name.clone()).or_insert(i);
        }
        for (sname, v) in sa {
            let p = format!("{fp}.stateActions.{sname}");
            let actions = self.state_actions(Some(v), &p, scope);
            match by_name.get(sname) {
                Some(&i) => states[i].actions.extend(actions),
                None => self.error(&p, format!("unknown state \"{}\"", short(sname))),
            }
        }
    }

    /// Checks the keys and the `type` of each action the flow defines (they are compiled
    /// where states use them).
    fn check_flow_actions(&mut self, fm: &Map<String, Json>, fp: &str) {
        let Some(am) = self.opt_object(fm, "actions", fp) else {
            return;
        };
        for (aname, av) in am {
            let ap = format!("{fp}.actions.{aname}");
            if let Some(ao) = self.object(av, &ap) {
                self.unknown_keys(ao, &ap, ACTION_KEYS);
                if ao.get("type").is_none() {
                    self.error(&ap, "an action needs a \"type\"");
                }
            }
        }
    }

    fn check_nlus(&mut self, nm: &Map<String, Json>, path: &str) {
        for (n, v) in nm {
            let p = path_join(path, n);
            if let Some(o) = self.object(v, &p) {
                self.unknown_keys(o, &p, NLU_KEYS);
                match o.get("type") {
                    Some(Json::String(t)) if !KNOWN_NLU_TYPES.contains(&t.as_str()) => self.warn(
                        &path_join(&p, "type"),
                        format!("unknown NLU type \"{}\"", short(t)),
                    ),
                    Some(Json::String(t)) if t == "nl" => {
                        let id = o.get("options").and_then(|x| x.get("nluId"));
                        if id
                            .and_then(Json::as_str)
                            .is_none_or(|i| nl_owner(i).is_none())
                        {
                            self.warn(
                                &path_join(&p, "options.nluId"),
                                format!(
                                    "NLU \"{}\" of type nl needs options.nluId \"<account>:<nlu name>\" naming an NL Studio model; without it the NLU cannot run and its output is null",
                                    short(n)
                                ),
                            );
                        }
                    }
                    Some(Json::String(t))
                        if !matches!(t.as_str(), "keyword" | "regex" | "method") =>
                    {
                        let msg = external_nlu_warning(n, t);
                        self.warn(&path_join(&p, "type"), msg);
                    }
                    Some(Json::String(_)) => {}
                    _ => self.error(&p, "an NLU needs a \"type\""),
                }
            }
        }
    }

    fn intent(&mut self, name: &str, v: &Json, ip: &str, scope: &Scope) -> Option<Intent> {
        let m = self.object(v, ip)?;
        self.unknown_keys(m, ip, INTENT_KEYS);
        let msg_type = match m.get("type") {
            None | Some(Json::Null) => None,
            Some(Json::String(t)) => match t.as_str() {
                "text" => Some(MsgType::Text),
                "data" => Some(MsgType::Data),
                "command" => Some(MsgType::Command),
                other => {
                    self.error(
                        &path_join(ip, "type"),
                        format!(
                            "unknown message type \"{}\" (text, data or command)",
                            short(other)
                        ),
                    );
                    None
                }
            },
            Some(other) => {
                self.error(
                    &path_join(ip, "type"),
                    format!("expected a string, found {}", describe(other)),
                );
                None
            }
        };
        let cp = path_join(ip, "classifier");
        let classifiers = match m.get("classifier") {
            None | Some(Json::Null) => vec![],
            Some(Json::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, c)| self.classifier(c, &format!("{cp}[{i}]"), scope))
                .collect(),
            Some(c) => self.classifier(c, &cp, scope).into_iter().collect(),
        };
        let mut attributes = vec![];
        if let Some(am) = self.opt_object(m, "attributes", ip) {
            for (aname, av) in am {
                let ap = format!("{ip}.attributes.{aname}");
                let (o, nlu_name) = match av {
                    Json::String(s) => (None, s.clone()),
                    Json::Object(o) => {
                        self.unknown_keys(o, &ap, ATTRIBUTE_KEYS);
                        match self.str_field(o, "nlu", &ap) {
                            Some(n) => (Some(o), n),
                            None => {
                                self.error(&ap, "an attribute needs \"nlu\"");
                                continue;
                            }
                        }
                    }
                    other => {
                        self.error(
                            &ap,
                            format!(
                                "expected an NLU name or an attribute object, found {}",
                                describe(other)
                            ),
                        );
                        continue;
                    }
                };
                let empty = Map::new();
                let o = o.unwrap_or(&empty);
                let nlu = self.nlu_use(&nlu_name, o, &ap, scope);
                attributes.push(Attribute {
                    name: aname.clone(),
                    nlu,
                    path: self.str_field(o, "path", &ap),
                    process: self.method_list(o.get("process"), scope, &path_join(&ap, "process")),
                    dict: o.get("dict").cloned(),
                });
            }
        }
        Some(Intent {
            name: name.to_string(),
            msg_type,
            conditions: self.conditions(m, ip),
            classifiers,
            initial: self.bool_field(m, "initial", ip),
            priority: self.num_field(m, "priority", ip).unwrap_or(0.0),
            fallback: self.bool_field(m, "fallback", ip),
            attributes,
        })
    }

    fn classifier(&mut self, v: &Json, cp: &str, scope: &Scope) -> Option<Classifier> {
        let empty = Map::new();
        let (o, nlu_name) = match v {
            Json::String(s) => (&empty, s.clone()),
            Json::Object(o) => {
                self.unknown_keys(o, cp, CLASSIFIER_KEYS);
                match self.str_field(o, "nlu", cp) {
                    Some(n) => (o, n),
                    None => {
                        self.error(cp, "a classifier needs \"nlu\"");
                        return None;
                    }
                }
            }
            other => {
                self.error(
                    cp,
                    format!(
                        "expected an NLU name or a classifier object, found {}",
                        describe(other)
                    ),
                );
                return None;
            }
        };
        let nlu = self.nlu_use(&nlu_name, o, cp, scope);
        let matches = match o.get("match") {
            None | Some(Json::Null) => None,
            Some(Json::Array(a)) => Some(a.clone()),
            Some(x) => Some(vec![x.clone()]),
        };
        let expression = self
            .str_field(o, "expression", cp)
            .map(|e| self.expr(&e, &path_join(cp, "expression")));
        Some(Classifier {
            nlu,
            process: self.method_list(o.get("process"), scope, &path_join(cp, "process")),
            matches,
            dict: o.get("dict").cloned(),
            expression,
        })
    }

    /// Resolves an NLU name (flow, bot, then built-in type) and merges the use's options.
    fn nlu_use(
        &mut self,
        name: &str,
        usage: &Map<String, Json>,
        path: &str,
        scope: &Scope,
    ) -> NluUse {
        let def_json = scope
            .flow_nlus
            .and_then(|m| m.get(name))
            .or_else(|| scope.bot_nlus.and_then(|m| m.get(name)));
        let def = def_json.and_then(Json::as_object);
        if let Some(d) = def_json.filter(|d| d.is_object())
            && !self.copy_allowed(d, path)
        {
            return NluUse {
                name: name.to_string(),
                kind: NluKind::Unknown(name.to_string()),
                options: Json::Null,
                hint: None,
                process: vec![],
                cache_key: String::new(),
            };
        }
        let (ty, mut options, method, process) = match def {
            Some(d) => (
                d.get("type")
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_string(),
                d.get("options")
                    .cloned()
                    .unwrap_or(Json::Object(Map::new())),
                d.get("method").and_then(Json::as_str).map(str::to_string),
                d.get("process").cloned(),
            ),
            None => (name.to_string(), Json::Object(Map::new()), None, None),
        };
        if let Some(over @ Json::Object(_)) = usage.get("options") {
            interp::deep_merge(&mut options, over);
        }
        let hint = usage.get("hint").and_then(Json::as_str).map(str::to_string);
        let np = path_join(path, "nlu");
        let kind = match ty.as_str() {
            "keyword" => NluKind::Keyword(self.keyword_nlu(&options, &np)),
            "regex" => match self.regex_nlu(&options, &np) {
                Some(r) => NluKind::Regex(r),
                None => NluKind::Unknown(name.to_string()),
            },
            "nl" => NluKind::Nl,
            "method" => {
                let m = method.unwrap_or_default();
                NluKind::Method(self.method_ref(&m, scope, &np))
            }
            t if KNOWN_NLU_TYPES.contains(&t) => {
                // A definition is warned about once, where it is defined; a type used by name
                // at each use.
                if def.is_none() {
                    self.warn(&np, external_nlu_warning(name, t));
                }
                NluKind::External(t.to_string())
            }
            _ => {
                self.warn(
                    &np,
                    format!(
                        "unknown NLU \"{}\": not defined in the flow or bot, and not an NLU type",
                        short(name)
                    ),
                );
                NluKind::Unknown(name.to_string())
            }
        };
        let process = self.method_list(process.as_ref(), scope, &np);
        let cache_key = format!("{name}|{options}|{}", hint.as_deref().unwrap_or(""));
        NluUse {
            name: name.to_string(),
            kind,
            options,
            hint,
            process,
            cache_key,
        }
    }

    /// Counts one use's copy of a named action or NLU against MAX_COPIED_BYTES. `false` once
    /// the budget is spent (reported once): the use is then left out.
    fn copy_allowed(&mut self, def: &Json, path: &str) -> bool {
        if self.copied > MAX_COPIED_BYTES {
            return false;
        }
        let size = *self
            .sizes
            .entry(def as *const Json)
            .or_insert_with(|| json_size(def));
        self.copied += size;
        if self.copied > MAX_COPIED_BYTES {
            self.error(
                path,
                format!(
                    "the uses of named actions and NLUs copy more than {} MiB (each use copies its definition): use large ones less often",
                    MAX_COPIED_BYTES >> 20
                ),
            );
            return false;
        }
        true
    }

    fn keyword_nlu(&mut self, options: &Json, path: &str) -> KeywordNlu {
        let mut keywords = vec![];
        match options.get("keywords") {
            Some(Json::Object(m)) => {
                for (k, v) in m {
                    let phrases = match v {
                        Json::String(s) => vec![s.clone()],
                        Json::Array(a) => a
                            .iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect(),
                        _ => {
                            self.warn(
                                path,
                                format!(
                                    "keyword \"{}\": expected a phrase or a list of phrases",
                                    short(k)
                                ),
                            );
                            vec![]
                        }
                    };
                    keywords.push((k.clone(), phrases));
                }
            }
            _ => self.warn(path, "keyword NLU without options.keywords never matches"),
        }
        KeywordNlu {
            keywords,
            case_sensitive: options.get("case").and_then(Json::as_bool).unwrap_or(false),
            exact: options
                .get("exact")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            default: options.get("default").cloned(),
        }
    }

    fn regex_nlu(&mut self, options: &Json, path: &str) -> Option<RegexNlu> {
        let flags = options.get("flags").and_then(Json::as_str).unwrap_or("");
        // Uses of one NLU share its patterns: each distinct one is compiled once.
        let compile = |src: &str, me: &mut Self| {
            let checked = match me
                .regexes
                .entry((src.to_string(), flags.to_string()))
                .or_insert_with(|| RegexLit::new(src, flags))
            {
                Ok(r) => Ok(r.share()),
                Err(e) => Err(e.clone()),
            };
            match checked {
                Ok(r) => Some(r),
                Err(e) => {
                    let src = short(src);
                    me.warn(path, format!("regex \"{src}\" does not compile: {e}"));
                    None
                }
            }
        };
        match options.get("regex") {
            Some(Json::String(src)) => {
                let re = compile(src, self)?;
                let index = match options.get("index") {
                    None | Some(Json::Null) => RegexIndex::Whole,
                    Some(Json::Number(n)) => RegexIndex::Group(n.as_u64().unwrap_or(0) as usize),
                    Some(Json::Object(m)) => RegexIndex::Groups(
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0) as usize))
                            .collect(),
                    ),
                    Some(_) => {
                        self.warn(path, "regex index must be a number or an object of numbers");
                        RegexIndex::Whole
                    }
                };
                Some(RegexNlu::Single { re, index })
            }
            Some(Json::Object(m)) => {
                let mut out = vec![];
                for (k, v) in m {
                    if let Some(src) = v.as_str() {
                        out.push((k.clone(), compile(src, self)?));
                    }
                }
                Some(RegexNlu::Named(out))
            }
            _ => {
                self.warn(path, "regex NLU without options.regex never matches");
                None
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn state(
        &mut self,
        name: &str,
        m: &Map<String, Json>,
        sp: &str,
        names: &StateNames,
        scope: &Scope,
        index: usize,
    ) -> Option<(State, Option<Transition>)> {
        self.unknown_keys(m, sp, STATE_KEYS);
        let end = self.bool_field(m, "end", sp);
        let mut transitions = vec![];
        if let Some(tm) = self.opt_object(m, "transitions", sp) {
            for (target, tv) in tm {
                let tp = format!("{sp}.transitions.{target}");
                let Some(&ti) = names.index.get(target.as_str()) else {
                    // A hint scans every name of the flow: only for problems that are kept,
                    // at most MAX_PROBLEMS scans, so linear in the size of the bot.
                    let hint = if self.keeps(Severity::Error) {
                        names
                            .list
                            .iter()
                            .find(|n| similar(n, target))
                            .map(|n| format!(" (did you mean \"{}\"?)", short(n)))
                            .unwrap_or_default()
                    } else {
                        String::new()
                    };
                    let target = short(target);
                    self.error(&tp, format!("unknown target state \"{target}\"{hint}"));
                    continue;
                };
                if let Some(t) = self.transition(tv, &tp, ti, scope) {
                    transitions.push(t);
                }
            }
        }
        let float = match m.get("float") {
            None | Some(Json::Null) => None,
            Some(v) => self.transition(v, &path_join(sp, "float"), index, scope),
        };
        let action_v = m.get("action").or_else(|| m.get("actions"));
        let key = if m.contains_key("action") {
            "action"
        } else {
            "actions"
        };
        let actions = self.state_actions(action_v, &path_join(sp, key), scope);
        let transit = self.mapping(m.get("transit"), &path_join(sp, "transit"), scope);
        let enter = self.mapping(m.get("enter"), &path_join(sp, "enter"), scope);
        let exit = self.mapping(m.get("exit"), &path_join(sp, "exit"), scope);
        Some((
            State {
                name: name.to_string(),
                initial: self.bool_field(m, "initial", sp),
                end,
                actions,
                transit,
                enter,
                exit,
                transitions,
            },
            float,
        ))
    }

    fn transition(
        &mut self,
        v: &Json,
        tp: &str,
        target: usize,
        scope: &Scope,
    ) -> Option<Transition> {
        match v {
            Json::String(s) => Some(Transition {
                target,
                conditions: vec![self.expr(s, tp)],
                fallback: false,
                priority: 0.0,
                mapping: None,
            }),
            Json::Bool(true) | Json::Null => Some(Transition {
                target,
                conditions: vec![],
                fallback: false,
                priority: 0.0,
                mapping: None,
            }),
            Json::Object(m) => {
                self.unknown_keys(m, tp, TRANSITION_KEYS);
                Some(Transition {
                    target,
                    conditions: self.conditions(m, tp),
                    fallback: self.bool_field(m, "fallback", tp),
                    priority: self.num_field(m, "priority", tp).unwrap_or(0.0),
                    mapping: self.mapping(m.get("mapping"), &path_join(tp, "mapping"), scope),
                })
            }
            other => {
                self.error(
                    tp,
                    format!(
                        "expected a transition object or a condition string, found {}",
                        describe(other)
                    ),
                );
                None
            }
        }
    }

    fn mapping(&mut self, v: Option<&Json>, path: &str, scope: &Scope) -> Option<Mapping> {
        match v? {
            Json::Null => None,
            Json::String(s) => Some(Mapping::Method(self.method_ref(s, scope, path))),
            Json::Object(m) => {
                let mut out = vec![];
                self.flatten_mapping(m, &[], path, &mut out);
                Some(Mapping::Assign(out))
            }
            other => {
                self.error(
                    path,
                    format!(
                        "expected a mapping object or a method name, found {}",
                        describe(other)
                    ),
                );
                None
            }
        }
    }

    fn flatten_mapping(
        &mut self,
        m: &Map<String, Json>,
        prefix: &[String],
        path: &str,
        out: &mut Vec<(Vec<String>, CompiledExpr)>,
    ) {
        for (k, v) in m {
            let kp = path_join(path, k);
            if prefix.len() + k.split('.').count() > MAX_TARGET_PARTS {
                self.error(
                    &kp,
                    format!("mapping target has more than {MAX_TARGET_PARTS} parts"),
                );
                continue;
            }
            let mut target = prefix.to_vec();
            target.extend(k.split('.').map(str::to_string));
            match v {
                Json::Object(inner) => self.flatten_mapping(inner, &target, &kp, out),
                _ => {
                    if !matches!(target.first().map(String::as_str), Some("context" | "data"))
                        || target.len() < 2
                    {
                        let shown = short(&target.join(".")).into_owned();
                        self.warn(&kp, format!("mapping target \"{shown}\" is ignored: targets start with context. or data."));
                        continue;
                    }
                    let e = match v {
                        Json::String(s) if s == "null" => CompiledExpr::literal(&Json::Null),
                        Json::String(s) => self.expr(s, &kp),
                        other => CompiledExpr::literal(other),
                    };
                    out.push((target, e));
                }
            }
        }
    }

    fn state_actions(&mut self, v: Option<&Json>, path: &str, scope: &Scope) -> Vec<ActionUse> {
        match v {
            None | Some(Json::Null) => vec![],
            Some(Json::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| self.state_action(it, &format!("{path}[{i}]"), scope))
                .collect(),
            Some(one) => self.state_action(one, path, scope).into_iter().collect(),
        }
    }

    /// One state action: a name, or `{name, condition, options, method}` that uses an action
    /// of the flow (or an action type) with conditions and options of its own.
    fn state_action(&mut self, v: &Json, path: &str, scope: &Scope) -> Option<ActionUse> {
        let empty = Map::new();
        let (sa, name) = self.state_action_head(v, path)?;
        let sa = sa.unwrap_or(&empty);
        let mut conditions = self.conditions(sa, path);
        let def_json = scope.flow_actions.and_then(|m| m.get(&name));
        let defined = def_json.and_then(Json::as_object);
        if let Some(d) = def_json.filter(|d| d.is_object())
            && !self.copy_allowed(d, path)
        {
            return None;
        }
        let (kind, mut options, method_name) = match defined {
            Some(a) => self.defined_action(a, &name, scope, &mut conditions),
            None => self.action_of_type(&name, path),
        };
        if let Some(over) = sa.get("options") {
            interp::deep_merge(&mut options, over);
        }
        if kind == ActionKind::Schedule
            && let Err(e) = crate::engine::actions::schedule_period(&options)
        {
            self.error(&path_join(path, "options.freqInterval"), e);
        }
        let method_name = sa
            .get("method")
            .and_then(Json::as_str)
            .map(str::to_string)
            .or(method_name);
        let method = self.action_method(&kind, method_name, scope, path);
        let options = interp::compile_options(&options, &mut |src, p| self.expr(src, p), path);
        Some(ActionUse {
            name,
            kind,
            conditions,
            options,
            method,
        })
    }

    /// A state action's own object (`None` when it is written as a bare name) and the name of
    /// the action it uses; `None` (with an error) when it has no name.
    fn state_action_head<'d>(
        &mut self,
        v: &'d Json,
        path: &str,
    ) -> Option<(Option<&'d Map<String, Json>>, String)> {
        match v {
            Json::String(s) => Some((None, s.clone())),
            Json::Object(o) => {
                self.unknown_keys(o, path, STATE_ACTION_KEYS);
                match self.str_field(o, "name", path) {
                    Some(n) => Some((Some(o), n)),
                    None => {
                        self.error(path, "a state action needs \"name\"");
                        None
                    }
                }
            }
            other => {
                self.error(
                    path,
                    format!(
                        "expected an action name or {{name, condition, options}}, found {}",
                        describe(other)
                    ),
                );
                None
            }
        }
    }

    /// The kind, options and method name of an action the flow defines; its conditions are
    /// added to `conditions`.
    fn defined_action(
        &mut self,
        a: &Map<String, Json>,
        name: &str,
        scope: &Scope,
        conditions: &mut Vec<CompiledExpr>,
    ) -> (ActionKind, Json, Option<String>) {
        let ap = format!("flows.{}.actions.{name}", scope.flow.unwrap_or(""));
        conditions.extend(self.conditions(a, &ap));
        let ty = a.get("type").and_then(Json::as_str).unwrap_or("");
        let kind = ActionKind::from_type(ty).unwrap_or_else(|| {
            if !ty.is_empty() {
                self.warn(
                    &path_join(&ap, "type"),
                    format!(
                        "unknown action type \"{}\"; the action is skipped at run time",
                        short(ty)
                    ),
                );
            }
            ActionKind::Unknown(ty.to_string())
        });
        let mut options = a
            .get("options")
            .cloned()
            .unwrap_or(Json::Object(Map::new()));
        // `command`/`payload` written on the action itself; `options` wins.
        for k in ["command", "payload"] {
            if let (Some(v), Json::Object(o)) = (a.get(k), &mut options) {
                o.entry(k.to_string()).or_insert_with(|| v.clone());
            }
        }
        (
            kind,
            options,
            a.get("method").and_then(Json::as_str).map(str::to_string),
        )
    }

    /// The kind of an action named by its type, with empty options; an unknown name warns
    /// and is skipped at run time.
    fn action_of_type(&mut self, name: &str, path: &str) -> (ActionKind, Json, Option<String>) {
        match ActionKind::from_type(name) {
            Some(k) => (k, Json::Object(Map::new()), None),
            None => {
                self.warn(path, format!("unknown action \"{}\": not an action of the flow nor an action type; it is skipped at run time", short(name)));
                (
                    ActionKind::Unknown(name.to_string()),
                    Json::Object(Map::new()),
                    None,
                )
            }
        }
    }

    /// The method a state action calls; a method action without one warns.
    fn action_method(
        &mut self,
        kind: &ActionKind,
        method_name: Option<String>,
        scope: &Scope,
        path: &str,
    ) -> Option<MethodRef> {
        match (kind, method_name) {
            (_, Some(m)) => Some(self.method_ref(&m, scope, &path_join(path, "method"))),
            (ActionKind::Method, None) => {
                self.warn(path, "a method action needs \"method\"");
                None
            }
            _ => None,
        }
    }
}

/// One edit apart (a typo): used for "did you mean" hints.
fn similar(a: &str, b: &str) -> bool {
    if a == b {
        return false;
    }
    // One edit changes the length by one character, four bytes at most: most names are
    // ruled out before anything is allocated.
    if a.len().abs_diff(b.len()) > 4 {
        return false;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    // Transposition of two neighbours.
    if a.len() == b.len() {
        let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        if diff.len() == 1 {
            return true;
        }
        if diff.len() == 2
            && diff[1] == diff[0] + 1
            && a[diff[0]] == b[diff[1]]
            && a[diff[1]] == b[diff[0]]
        {
            return true;
        }
        return false;
    }
    let (short, long) = if a.len() < b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let mut i = 0;
    while i < short.len() && short[i] == long[i] {
        i += 1;
    }
    short[i..] == long[i + 1..]
}
