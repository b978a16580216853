//! The compiled bot: every short form of the language resolved, expressions parsed, names
//! resolved to indexes. This is the unit the host caches per revision; it serialises with
//! serde so a stored revision never needs recompiling.

use crate::expr::{CompiledExpr, RegexLit};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The version of the compiled form ([`CompiledBot::format`]). Bump it with every change to
/// the model below: a host that finds a stored compiled bot of another format recompiles it
/// from the revision's stored source instead of loading it.
///
/// - 0: compiled bots stored before formats were numbered (no `format` field).
/// - 1: the same model, with `format`.
/// - 2: `reenter` is an action type (`ActionKind::Reenter`; before, a state action named
///   `reenter` was stored as an unknown action).
/// - 3: `uses_js`.
pub const COMPILED_FORMAT: u32 = 3;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompiledBot {
    /// [`COMPILED_FORMAT`] when compiled; 0 when absent (stored before formats).
    #[serde(default)]
    pub format: u32,
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
    /// Whether the bot has JavaScript (methods, or expressions outside the fast subset). The
    /// guest builds and locks down its JavaScript context when it loads such a bot, under the
    /// load's budget instead of the first step's (~25 M fuel). Text templated at run time
    /// can still need JavaScript in a bot without it; the first such step builds the context.
    #[serde(default)]
    pub uses_js: bool,
    /// The CMS content the bot reads as `cms` (`$(cms.<page>.<form>.<element>.value)`): the
    /// pages of the CMS revision its deployment runs, set by the host when it loads the bot
    /// for that deployment. `null` (read as `{}`) in the stored form and without a CMS.
    #[serde(default, skip_serializing_if = "Json::is_null")]
    pub cms: Json,
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
    /// `reenter` as a state action: re-ask. After the state's actions, the internal `reenter`
    /// command goes to this flow (as when a stacked flow resumes), so its reenter intent and
    /// the state's transitions run the question again without user input.
    Reenter,
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
            "reenter" => ActionKind::Reenter,
            _ => return None,
        })
    }
}

/// Action options with their `$(...)` interpolations parsed.
///
/// As deep as the options it mirrors (at most [`crate::source::MAX_DOC_DEPTH`]). Stored
/// flat, like [`crate::expr::Expr`] (`stored_opt` below): a derived form nests three JSON
/// levels per level of options, and serde_json reads back only 128.
#[derive(Debug, Clone, PartialEq)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

mod stored_opt {
    //! The stored form of an [`Opt`]: its nodes in postfix order, written and read without
    //! recursion. Bots stored with the derived (nested) form still load.

    use super::{Opt, Part};
    use crate::expr::CompiledExpr;
    use crate::source::MAX_DOC_DEPTH;
    use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde::ser::Serializer;
    use serde::{Deserialize, Serialize};
    use serde_json::Value as Json;
    use std::fmt;

    #[derive(Serialize)]
    enum OpOut<'a> {
        Lit(&'a Json),
        Text(&'a [Part]),
        Whole(&'a CompiledExpr),
        /// Number of items, taken from the stack.
        Arr(usize),
        /// Keys, one item each taken from the stack.
        Obj(Vec<&'a str>),
    }

    #[derive(Deserialize)]
    enum OpIn {
        Lit(Json),
        Text(Vec<Part>),
        Whole(CompiledExpr),
        Arr(usize),
        Obj(Vec<String>),
    }

    impl Serialize for Opt {
        fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
            enum Visit<'a> {
                Enter(&'a Opt),
                Leave(&'a Opt),
            }
            let mut ops = Vec::new();
            let mut stack = vec![Visit::Enter(self)];
            while let Some(v) = stack.pop() {
                match v {
                    Visit::Enter(o @ Opt::Arr(items)) => {
                        stack.push(Visit::Leave(o));
                        stack.extend(items.iter().rev().map(Visit::Enter));
                    }
                    Visit::Enter(o @ Opt::Obj(props)) => {
                        stack.push(Visit::Leave(o));
                        stack.extend(props.iter().rev().map(|(_, it)| Visit::Enter(it)));
                    }
                    Visit::Enter(o) | Visit::Leave(o) => ops.push(match o {
                        Opt::Lit(j) => OpOut::Lit(j),
                        Opt::Text(parts) => OpOut::Text(parts),
                        Opt::Whole(e) => OpOut::Whole(e),
                        Opt::Arr(items) => OpOut::Arr(items.len()),
                        Opt::Obj(props) => {
                            OpOut::Obj(props.iter().map(|(k, _)| k.as_str()).collect())
                        }
                    }),
                }
            }
            ser.collect_seq(ops)
        }
    }

    impl<'de> Deserialize<'de> for Opt {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Opt, D::Error> {
            d.deserialize_any(OptVisitor)
        }
    }

    struct OptVisitor;

    fn malformed<E: de::Error>() -> E {
        E::custom("malformed stored options")
    }

    impl<'de> Visitor<'de> for OptVisitor {
        type Value = Opt;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("action options (a list of nodes in postfix order)")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Opt, A::Error> {
            // Each entry: the node and its height, bounded like the options it came from.
            let mut stack: Vec<(Opt, usize)> = Vec::new();
            while let Some(op) = seq.next_element::<OpIn>()? {
                let take = |stack: &mut Vec<(Opt, usize)>, n: usize| {
                    if n > stack.len() {
                        return Err(malformed::<A::Error>());
                    }
                    let mut h = 0;
                    let items: Vec<Opt> = stack
                        .drain(stack.len() - n..)
                        .map(|(o, oh)| {
                            h = h.max(oh);
                            o
                        })
                        .collect();
                    if h + 1 > MAX_DOC_DEPTH {
                        return Err(de::Error::custom(format!(
                            "stored options nested more than {MAX_DOC_DEPTH} levels deep"
                        )));
                    }
                    Ok((items, h + 1))
                };
                let node = match op {
                    OpIn::Lit(j) => (Opt::Lit(j), 1),
                    OpIn::Text(parts) => (Opt::Text(parts), 1),
                    OpIn::Whole(e) => (Opt::Whole(e), 1),
                    OpIn::Arr(n) => {
                        let (items, h) = take(&mut stack, n)?;
                        (Opt::Arr(items), h)
                    }
                    OpIn::Obj(keys) => {
                        let (items, h) = take(&mut stack, keys.len())?;
                        (Opt::Obj(keys.into_iter().zip(items).collect()), h)
                    }
                };
                stack.push(node);
            }
            match (stack.pop(), stack.is_empty()) {
                (Some((o, _)), true) => Ok(o),
                _ => Err(malformed()),
            }
        }

        // The nested form of bots stored before the flat one: `{"Lit": …}`, `{"Arr": […]}`.
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Opt, A::Error> {
            Legacy::deserialize(de::value::MapAccessDeserializer::new(map)).map(Legacy::into_opt)
        }
    }

    /// The derived form; its depth is bounded by the reader's recursion limit.
    #[derive(Deserialize)]
    enum Legacy {
        Lit(Json),
        Text(Vec<Part>),
        Whole(CompiledExpr),
        Arr(Vec<Legacy>),
        Obj(Vec<(String, Legacy)>),
    }

    impl Legacy {
        fn into_opt(self) -> Opt {
            match self {
                Legacy::Lit(j) => Opt::Lit(j),
                Legacy::Text(p) => Opt::Text(p),
                Legacy::Whole(e) => Opt::Whole(e),
                Legacy::Arr(items) => Opt::Arr(items.into_iter().map(Legacy::into_opt).collect()),
                Legacy::Obj(props) => Opt::Obj(
                    props
                        .into_iter()
                        .map(|(k, it)| (k, it.into_opt()))
                        .collect(),
                ),
            }
        }
    }
}

/// A CMS document (`{pages, faqs}`, as published or as `cms.yml`) as bots read it (`cms`):
/// its pages by name, and its FAQ tables under `faq`.
pub fn cms_view(mut doc: Json) -> Json {
    if !doc.is_object() {
        doc = Json::Object(serde_json::Map::new());
    }
    let faqs = doc["faqs"].take();
    let mut pages = doc["pages"].take();
    if !pages.is_object() {
        pages = Json::Object(serde_json::Map::new());
    }
    if let Some(p) = pages.as_object_mut() {
        p.insert(
            "faq".into(),
            if faqs.is_null() {
                Json::Object(serde_json::Map::new())
            } else {
                faqs
            },
        );
    }
    pages
}
