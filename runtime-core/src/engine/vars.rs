//! The variables an expression sees at each site and evaluation with the JS fallback.

use crate::CompiledBot;
use crate::expr::{CompiledExpr, Env, EvalError, ExprKind, eval};
use crate::host::{Host, HostError, JsCall};
use crate::session::{Message, Session};
use crate::value::{MAX_VALUE_DEPTH, V, nested_deeper_than};
use serde_json::{Map, Value as Json};
use std::borrow::Cow;
use std::sync::LazyLock;

pub static EMPTY: LazyLock<Json> = LazyLock::new(|| Json::Object(Map::new()));

/// Meta context names: readable as `context.$name`, never stored.
#[derive(Debug, Clone, Default)]
pub struct MetaCtx {
    pub init: bool,
    pub flow: String,
    pub state: String,
    pub last_flow: Option<String>,
    pub last_state: Option<String>,
    pub now: i64,
    pub timestamp: i64,
    pub session_id: String,
    pub channel_id: Option<String>,
    pub deployment_id: Option<String>,
    pub data_key: Option<String>,
    pub user_id: Option<String>,
    pub start: Option<bool>,
    pub to: Option<String>,
    pub from: Option<String>,
    pub end: Option<bool>,
}

impl MetaCtx {
    fn get(&self, name: &str) -> Option<V<'_>> {
        fn s(x: &str) -> V<'_> {
            V::Str(Cow::Borrowed(x))
        }
        fn opt(x: &Option<String>) -> V<'_> {
            match x {
                Some(v) => V::Str(Cow::Borrowed(v.as_str())),
                None => V::Null,
            }
        }
        Some(match name {
            "$init" => V::Bool(self.init),
            "$flow" => s(&self.flow),
            "$state" => s(&self.state),
            "$lastFlow" => opt(&self.last_flow),
            "$lastState" => opt(&self.last_state),
            "$now" => V::Num(self.now as f64),
            "$timestamp" => V::Num(self.timestamp as f64),
            "$sessionId" => s(&self.session_id),
            "$channelId" => opt(&self.channel_id),
            "$deploymentId" => opt(&self.deployment_id),
            "$dataKey" => opt(&self.data_key),
            "$userId" => opt(&self.user_id),
            "$start" => V::Bool(self.start?),
            "$to" => V::Str(Cow::Borrowed(self.to.as_deref()?)),
            "$from" => V::Str(Cow::Borrowed(self.from.as_deref()?)),
            "$end" => V::Bool(self.end?),
            _ => return None,
        })
    }

    /// The meta names as JSON keys, for the JS engine's `context`.
    fn add_to(&self, ctx: &mut Map<String, Json>) {
        for name in [
            "$init",
            "$flow",
            "$state",
            "$lastFlow",
            "$lastState",
            "$now",
            "$timestamp",
            "$sessionId",
            "$channelId",
            "$deploymentId",
            "$dataKey",
            "$userId",
            "$start",
            "$to",
            "$from",
            "$end",
        ] {
            if let Some(j) = self.get(name).and_then(|v| v.to_json()) {
                ctx.insert(name.to_string(), j);
            }
        }
        for plain in ["start", "to", "from", "end"] {
            if !ctx.contains_key(plain)
                && let Some(j) = self.get(&format!("${plain}")).and_then(|v| v.to_json())
            {
                ctx.insert(plain.to_string(), j);
            }
        }
    }
}

/// The bound variables of one evaluation site.
pub struct Vars<'a> {
    pub msg: &'a Message,
    pub intent: Option<&'a str>,
    pub attributes: &'a Json,
    pub context: &'a Json,
    pub data: &'a Json,
    pub config: &'a Json,
    /// The CMS pages of the deployment (`{}` without a CMS).
    pub cms: &'a Json,
    /// `Some` only at action sites.
    pub result: Option<&'a Json>,
    pub meta: &'a MetaCtx,
}

static EMPTY_STR: &str = "";

impl Env for Vars<'_> {
    fn var<'a>(&'a self, name: &str) -> Option<V<'a>> {
        Some(match name {
            "type" => V::Str(Cow::Borrowed(match self.msg.msg_type {
                crate::model::MsgType::Text => "text",
                crate::model::MsgType::Data => "data",
                crate::model::MsgType::Command => "command",
            })),
            "content" => V::Str(Cow::Borrowed(
                self.msg.content.as_deref().unwrap_or(EMPTY_STR),
            )),
            "payload" => match &self.msg.payload {
                Some(p @ Json::Object(_)) => V::Ref(p),
                Some(Json::Null) | None => V::Ref(&EMPTY),
                Some(p) => V::from_json(p),
            },
            "metadata" => V::Ref(
                self.msg
                    .metadata
                    .as_ref()
                    .filter(|m| m.is_object())
                    .unwrap_or(&EMPTY),
            ),
            "intent" => match self.intent {
                Some(i) => V::Str(Cow::Borrowed(i)),
                None => V::Null,
            },
            "attributes" => V::Ref(self.attributes),
            "context" => V::Ref(self.context),
            "data" => V::Ref(self.data),
            "config" => V::Ref(self.config),
            "cms" => V::Ref(self.cms),
            "result" => match self.result {
                Some(r) => V::from_json(r),
                None => return None,
            },
            _ => return None,
        })
    }

    fn context_meta<'a>(&'a self, name: &str) -> Option<V<'a>> {
        self.meta.get(name)
    }
}

impl<'a> Vars<'a> {
    /// The variables of a site inside `flow`: its saved context (or `{}`), the session data,
    /// the bot's config and CMS pages.
    #[allow(clippy::too_many_arguments)]
    pub fn in_flow(
        s: &'a Session,
        flow: &str,
        bot: &'a CompiledBot,
        msg: &'a Message,
        intent: Option<&'a str>,
        attributes: &'a Json,
        result: Option<&'a Json>,
        meta: &'a MetaCtx,
    ) -> Vars<'a> {
        Vars {
            msg,
            intent,
            attributes,
            context: s.context_of(flow).unwrap_or(&EMPTY),
            data: &s.data,
            config: &bot.config,
            cms: if bot.cms.is_object() {
                &bot.cms
            } else {
                &EMPTY
            },
            result,
            meta,
        }
    }

    /// All variables as one JSON object, for the JS engine.
    pub fn scope_json(&self) -> Json {
        let mut m = Map::new();
        for name in [
            "type",
            "content",
            "payload",
            "metadata",
            "intent",
            "attributes",
            "data",
            "config",
            "cms",
        ] {
            // A bot without CMS content pays nothing for it in JavaScript's scope.
            if name == "cms" && self.cms.as_object().is_some_and(Map::is_empty) {
                continue;
            }
            if let Some(j) = self.var(name).and_then(|v| v.to_json()) {
                m.insert(name.into(), j);
            }
        }
        let mut ctx = self.context.as_object().cloned().unwrap_or_default();
        self.meta.add_to(&mut ctx);
        m.insert("context".into(), Json::Object(ctx));
        if let Some(r) = self.result {
            m.insert("result".into(), r.clone());
        }
        Json::Object(m)
    }
}

/// A failure that aborts the step.
#[derive(Debug, Clone, PartialEq)]
pub struct Abort(pub String);

/// Evaluates an expression. `Ok(None)`: undefined, or a JS exception at this site (logged).
///
/// A value nested deeper than [`MAX_VALUE_DEPTH`] is an error at the site: every value the
/// engine stores or sends comes through here, so sessions and responses stay within it.
pub fn eval_json(
    host: &mut dyn Host,
    errors: &mut Vec<String>,
    e: &CompiledExpr,
    vars: &Vars,
) -> Result<Option<Json>, Abort> {
    let v = match &e.kind {
        // A path into the CMS that is not there: said as such, not as a property of undefined.
        ExprKind::Fast(ast) if names_cms_content(&e.src) => match eval(ast, vars) {
            Err(EvalError::NeedsJs(_)) => eval_js(host, errors, e, vars)?,
            Ok(v) if !matches!(v, V::Undef) => v.into_json(),
            Ok(_) | Err(EvalError::Throw(_)) => {
                site_error(
                    host,
                    errors,
                    format!(
                        "{} is not in the CMS content this bot runs with (a deployment's CMS revision; cms.yml in a local test); it reads as empty",
                        e.src.trim()
                    ),
                );
                None
            }
        },
        _ => eval_json_unchecked(host, errors, e, vars)?,
    };
    if let Some(j) = &v
        && nested_deeper_than(j, MAX_VALUE_DEPTH).is_some()
    {
        site_error(
            host,
            errors,
            format!(
                "expression \"{}\" failed: its value is nested more than {MAX_VALUE_DEPTH} levels deep",
                e.src
            ),
        );
        return Ok(None);
    }
    Ok(v)
}

/// Whether an expression is a path into the CMS (`cms.home.greeting.text.value`,
/// `cms.faq[label].answers`): content people publish, whose absence the bot's author should
/// hear of rather than meet as an empty reply.
fn names_cms_content(src: &str) -> bool {
    let src = src.trim();
    (src.starts_with("cms.") || src.starts_with("cms["))
        && src
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '\'' | '"'))
}

fn eval_json_unchecked(
    host: &mut dyn Host,
    errors: &mut Vec<String>,
    e: &CompiledExpr,
    vars: &Vars,
) -> Result<Option<Json>, Abort> {
    match &e.kind {
        ExprKind::Fast(ast) => match eval(ast, vars) {
            Ok(v) => Ok(v.into_json()),
            Err(EvalError::Throw(msg)) => {
                site_error(
                    host,
                    errors,
                    format!("expression \"{}\" failed: {msg}", e.src),
                );
                Ok(None)
            }
            Err(EvalError::NeedsJs(_)) => eval_js(host, errors, e, vars),
        },
        ExprKind::Js => eval_js(host, errors, e, vars),
        ExprKind::Invalid(msg) => {
            site_error(
                host,
                errors,
                format!("expression \"{}\" does not parse: {msg}", e.src),
            );
            Ok(None)
        }
    }
}

/// Evaluates a condition to a boolean (JS truthiness); an error at the site is false.
pub fn eval_truthy(
    host: &mut dyn Host,
    errors: &mut Vec<String>,
    e: &CompiledExpr,
    vars: &Vars,
) -> Result<bool, Abort> {
    if let ExprKind::Fast(ast) = &e.kind {
        match eval(ast, vars) {
            Ok(v) => return Ok(v.truthy()),
            Err(EvalError::Throw(msg)) => {
                site_error(
                    host,
                    errors,
                    format!("condition \"{}\" failed: {msg}", e.src),
                );
                return Ok(false);
            }
            Err(EvalError::NeedsJs(_)) => {}
        }
    }
    Ok(eval_json(host, errors, e, vars)?.is_some_and(|j| V::from_json(&j).truthy()))
}

/// All conditions hold (an empty list holds).
pub fn all_hold(
    host: &mut dyn Host,
    errors: &mut Vec<String>,
    conds: &[CompiledExpr],
    vars: &Vars,
) -> Result<bool, Abort> {
    for c in conds {
        if !eval_truthy(host, errors, c, vars)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn eval_js(
    host: &mut dyn Host,
    errors: &mut Vec<String>,
    e: &CompiledExpr,
    vars: &Vars,
) -> Result<Option<Json>, Abort> {
    let scope = vars.scope_json();
    match host.js(JsCall::Expr {
        src: &e.src,
        scope: &scope,
    }) {
        Ok(out) => Ok(out.value),
        Err(HostError::Failed(msg)) => {
            site_error(
                host,
                errors,
                format!("expression \"{}\" failed: {msg}", e.src),
            );
            Ok(None)
        }
        Err(HostError::Abort(msg)) => Err(Abort(format!("expression \"{}\": {msg}", e.src))),
    }
}

/// Records a user error (Kata's group 1000): logged, the step goes on.
pub fn site_error(host: &mut dyn Host, errors: &mut Vec<String>, msg: String) {
    host.log(crate::host::LogLevel::UserError, &msg);
    errors.push(msg);
}
