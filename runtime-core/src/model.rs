//! The compiled bot: every short form of the language resolved, expressions parsed, names
//! resolved to indexes. This is the unit the host caches per revision; it serialises with
//! serde so a stored revision never needs recompiling.

use crate::expr::{CompiledExpr, RegexLit};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompiledBot {
    pub name: String,
    pub version: Option<String>,
    pub lang: Option<String>,
    /// Hours from UTC, for schedule times.
    pub timezone: f64,
    pub flows: Vec<Flow>,
    /// Every method of the bot: bot-level and flow-local ones.
    pub methods: Vec<Method>,
    pub config: Json,
    pub max_recursion: u32,
    /// The first declared flow with `fallback: true`.
    pub fallback_flow: Option<usize>,
}

impl CompiledBot {
    pub fn flow_index(&self, name: &str) -> Option<usize> {
        self.flows.iter().position(|f| f.name == name)
    }

    /// `config.defaultErrorMessage`, sent to channel users when a step fails.
    pub fn default_error_message(&self) -> Option<&str> {
        self.config
            .get("defaultErrorMessage")
            .and_then(Json::as_str)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flow {
    pub name: String,
    pub intents: Vec<Intent>,
    pub states: Vec<State>,
    pub initial: Option<usize>,
    /// Float transitions of the flow in declaration order: (target state, transition).
    pub floats: Vec<Transition>,
    pub fallback: bool,
    pub priority: f64,
    pub volatile: bool,
    pub expire: Option<f64>,
    pub active: bool,
    pub state_mapper: Option<MethodRef>,
    pub invalidate: Option<f64>,
}

impl Flow {
    pub fn state_index(&self, name: &str) -> Option<usize> {
        self.states.iter().position(|s| s.name == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MsgType {
    Text,
    Data,
    Command,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Intent {
    pub name: String,
    pub msg_type: Option<MsgType>,
    pub conditions: Vec<CompiledExpr>,
    /// Any one must match (OR).
    pub classifiers: Vec<Classifier>,
    pub initial: bool,
    pub priority: f64,
    pub fallback: bool,
    pub attributes: Vec<Attribute>,
}

/// One use of an NLU (by a classifier or an attribute), with merged options.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NluUse {
    pub name: String,
    pub kind: NluKind,
    pub options: Json,
    pub hint: Option<String>,
    /// The NLU's own `process` methods.
    pub process: Vec<MethodRef>,
    /// Outputs are shared per message among uses with the same key (NLU, options, hint).
    pub cache_key: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NluKind {
    Keyword(KeywordNlu),
    Regex(RegexNlu),
    /// NL Studio model, predicted by the host.
    Nl,
    Method(MethodRef),
    /// A known external NLU (wit, verstand): outputs null.
    External(String),
    Unknown(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeywordNlu {
    /// Key → phrases, in declaration order.
    pub keywords: Vec<(String, Vec<String>)>,
    pub case_sensitive: bool,
    pub exact: bool,
    pub default: Option<Json>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RegexNlu {
    Single {
        re: RegexLit,
        index: RegexIndex,
    },
    /// `regex: {name: pattern}`: key → group 1 if any, else the whole match.
    Named(Vec<(String, RegexLit)>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RegexIndex {
    Whole,
    Group(usize),
    Groups(Vec<(String, usize)>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Classifier {
    pub nlu: NluUse,
    pub process: Vec<MethodRef>,
    pub matches: Option<Vec<Json>>,
    pub dict: Option<Json>,
    pub expression: Option<CompiledExpr>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attribute {
    pub name: String,
    pub nlu: NluUse,
    pub path: Option<String>,
    pub process: Vec<MethodRef>,
    pub dict: Option<Json>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub name: String,
    pub initial: bool,
    pub end: bool,
    pub actions: Vec<ActionUse>,
    pub transit: Option<Mapping>,
    pub enter: Option<Mapping>,
    pub exit: Option<Mapping>,
    pub transitions: Vec<Transition>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Transition {
    pub target: usize,
    pub conditions: Vec<CompiledExpr>,
    pub fallback: bool,
    pub priority: f64,
    pub mapping: Option<Mapping>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Mapping {
    /// `fn(ctx)` returning ctx.
    Method(MethodRef),
    /// Target path (starting at `context` or `data`) → value, in declaration order.
    Assign(Vec<(Vec<String>, CompiledExpr)>),
}

/// An action as a state runs it: the StateAction merged with the named Action.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActionUse {
    /// The action's name (or its type when named by type); responses carry it.
    pub name: String,
    pub kind: ActionKind,
    /// StateAction conditions, then Action conditions; all must hold.
    pub conditions: Vec<CompiledExpr>,
    pub options: Opt,
    pub method: Option<MethodRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActionKind {
    Text,
    Template,
    /// `type: image` shorthand for a template of type image.
    Image,
    Command,
    Api,
    Method,
    Schedule,
    /// Neither a defined action nor a known type: skipped with a user error at run time.
    Unknown(String),
}

impl ActionKind {
    pub fn from_type(t: &str) -> Option<ActionKind> {
        Some(match t {
            "text" => ActionKind::Text,
            "template" => ActionKind::Template,
            "image" => ActionKind::Image,
            "command" => ActionKind::Command,
            "api" => ActionKind::Api,
            "method" => ActionKind::Method,
            "schedule" => ActionKind::Schedule,
            _ => return None,
        })
    }
}

/// Action options with their `$(...)` interpolations parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Opt {
    Lit(Json),
    /// A string with interpolations.
    Text(Vec<Part>),
    /// A string that is exactly one `$(...)`: keeps the value's JSON type.
    Whole(CompiledExpr),
    Arr(Vec<Opt>),
    Obj(Vec<(String, Opt)>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Part {
    Lit(String),
    Expr(CompiledExpr),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Method {
    /// Name before the parenthesis of the signature.
    pub name: String,
    /// Parameter names from the signature; `None` when the key has no parentheses.
    pub params: Option<Vec<String>>,
    pub code: String,
    pub entry: Option<String>,
    /// Flow that declared it (`None` = bot level).
    pub flow: Option<String>,
}

/// A method named somewhere in the bot, resolved flow first, then bot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MethodRef {
    pub name: String,
    pub index: Option<usize>,
}
