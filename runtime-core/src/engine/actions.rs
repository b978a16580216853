//! Running a state's actions.

use super::vars::{MetaCtx, Vars, all_hold, eval_json};
use super::{Step, StepError};
use crate::host::{HostError, HttpRequest};
use crate::interp::{compile_text, get_path, render, resolve_refs};
use crate::model::{ActionKind, ActionUse, Flow, MsgType, State};
use crate::session::{Message, Response, ScheduleOp, Session};
use serde_json::{Map, Value as Json};

/// Api responses bigger than this give a null result.
const MAX_API_BODY: usize = 1 << 20;
/// Dynamic carousels and lists are cut to this many items.
const MAX_ITEMS: usize = 10;

impl Step<'_, '_> {
    /// Runs the state's actions in order; returns the commands they emitted, each with
    /// whether it is a `reenter` action's message (delivered to this flow only).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_actions(
        &mut self,
        s: &mut Session,
        flow: &Flow,
        state: &State,
        msg: &Message,
        intent: Option<&str>,
        attrs: &Json,
        meta: &MetaCtx,
    ) -> Result<Vec<(Message, bool)>, StepError> {
        let mut commands: Vec<(Message, bool)> = vec![];
        let mut result = Json::Null;
        for action in &state.actions {
            // Conditions, options and a text template see the same variables (the last api
            // result included).
            let vars = Vars::in_flow(
                s,
                &flow.name,
                self.bot,
                msg,
                intent,
                attrs,
                Some(&result),
                meta,
            );
            let Some(options) = self.action_options(action, &vars)? else {
                continue;
            };
            let respond = |step: &mut Self,
                           msg_type: MsgType,
                           content: Option<String>,
                           payload: Option<Json>| {
                let id = step.uuid();
                step.out.push(Response {
                    id,
                    msg_type,
                    content,
                    payload,
                    action: action.name.clone(),
                    ref_id: msg.id.clone(),
                    flow: flow.name.clone(),
                    intent: intent.map(str::to_string),
                });
            };
            match &action.kind {
                ActionKind::Text => {
                    if let Some(text) = self.text_of(&options, &vars)? {
                        respond(self, MsgType::Text, Some(text), None);
                    }
                }
                ActionKind::Template | ActionKind::Image => {
                    if let Some(payload) = data_payload(&action.kind, &options) {
                        respond(self, MsgType::Data, None, Some(payload));
                    }
                }
                ActionKind::Command => {
                    if let Some(cmd) = self.command_message(&options, &action.name) {
                        commands.push((cmd, false));
                    }
                }
                // Revisions stored before `reenter` was an action type hold it as unknown.
                ActionKind::Reenter => commands.push((self.reenter_message(), true)),
                ActionKind::Unknown(t) if t == "reenter" => {
                    commands.push((self.reenter_message(), true))
                }
                ActionKind::Api => {
                    result = self.api(&options, &action.name)?;
                }
                ActionKind::Method => self.method_action(
                    s,
                    flow,
                    msg,
                    intent,
                    action,
                    &options,
                    &mut result,
                    &mut commands,
                )?,
                ActionKind::Schedule => self.schedule(&options, &action.name),
                ActionKind::Unknown(t) => {
                    self.user_error(format!("action \"{t}\" is neither an action of flow {} nor an action type; skipped", flow.name));
                }
            }
        }
        Ok(commands)
    }

    /// The action's rendered options, or `None` when its conditions do not all hold.
    fn action_options(
        &mut self,
        action: &ActionUse,
        vars: &Vars,
    ) -> Result<Option<Json>, StepError> {
        if !all_hold(self.host, &mut self.errors, &action.conditions, vars)? {
            return Ok(None);
        }
        let (host, errors) = (&mut *self.host, &mut self.errors);
        Ok(Some(render(&action.options, &mut |e| {
            eval_json(host, errors, e, vars)
        })?))
    }

    /// A command action's message (`options.command` with `options.payload`), or `None`
    /// (and a user error) when it names no command.
    fn command_message(&mut self, options: &Json, name: &str) -> Option<Message> {
        let content = match options.get("command") {
            Some(Json::String(c)) => c.clone(),
            _ => {
                self.user_error(format!("command action {name} has no options.command"));
                return None;
            }
        };
        let payload = match options.get("payload") {
            Some(p @ Json::Object(_)) => p.clone(),
            _ => Json::Object(Map::new()),
        };
        let mut cmd = Message::command(&content, payload);
        cmd.id = self.uuid();
        Some(cmd)
    }

    /// A method action: calls the method with the message, the flow's context, the data, the
    /// options, the bot's config and the last api result, then applies what it returned.
    #[allow(clippy::too_many_arguments)]
    fn method_action(
        &mut self,
        s: &mut Session,
        flow: &Flow,
        msg: &Message,
        intent: Option<&str>,
        action: &ActionUse,
        options: &Json,
        result: &mut Json,
        commands: &mut Vec<(Message, bool)>,
    ) -> Result<(), StepError> {
        let Some(mr) = &action.method else {
            self.user_error(format!("method action {} names no method", action.name));
            return Ok(());
        };
        let message = serde_json::to_value(msg).unwrap_or(Json::Null);
        let ctx = s
            .context_of(&flow.name)
            .cloned()
            .unwrap_or_else(|| Json::Object(Map::new()));
        let args = vec![
            message,
            ctx,
            s.data.clone(),
            options.clone(),
            self.bot.config.clone(),
            result.clone(),
        ];
        // Context and data changed in place are kept.
        let Some(out) = self.call_method(mr, args, &[1, 2], &[])? else {
            return Ok(());
        };
        self.method_return(s, flow, msg, intent, out, result, commands, &action.name);
        Ok(())
    }

    /// The text of a text action: a string, a random variant of a list, or a template.
    fn text_of(&mut self, options: &Json, vars: &Vars) -> Result<Option<String>, StepError> {
        let chosen = if let Some(template) = options.get("template") {
            let data = options.get("data").unwrap_or(&Json::Null);
            let base = match options
                .get("path")
                .and_then(Json::as_str)
                .filter(|p| !p.is_empty())
            {
                Some(p) => get_path(data, p).cloned().unwrap_or(Json::Null),
                None => data.clone(),
            };
            let resolved = resolve_refs(template, &base);
            let picked = self.pick(resolved);
            // The template text may itself hold `$(...)`.
            let Json::String(t) = picked else {
                return Ok(Some(as_text(&picked)));
            };
            let opt = compile_text(&t, &mut crate::expr::CompiledExpr::new);
            let (host, errors) = (&mut *self.host, &mut self.errors);
            render(&opt, &mut |e| eval_json(host, errors, e, vars))?
        } else {
            match options.get("text") {
                None => {
                    self.user_error("text action without options.text".into());
                    return Ok(None);
                }
                Some(t) => self.pick(t.clone()),
            }
        };
        Ok(Some(as_text(&chosen)))
    }

    /// A list picks one element uniformly at random (text variants).
    fn pick(&mut self, v: Json) -> Json {
        match v {
            Json::Array(mut items) if !items.is_empty() => {
                let i = (self.host.random_u64() % items.len() as u64) as usize;
                items.swap_remove(i)
            }
            Json::Array(_) => Json::String(String::new()),
            other => other,
        }
    }

    /// An api action: `result` is the body only for status 200 with a JSON body.
    fn api(&mut self, options: &Json, name: &str) -> Result<Json, StepError> {
        let method = options
            .get("method")
            .and_then(Json::as_str)
            .unwrap_or("GET")
            .to_uppercase();
        let Some(mut url) = options
            .get("uri")
            .or_else(|| options.get("url"))
            .and_then(Json::as_str)
            .map(str::to_string)
        else {
            self.user_error(format!("api action {name} has no options.uri"));
            return Ok(Json::Null);
        };
        if let Some(Json::Object(q)) = options.get("query") {
            let mut sep = if url.contains('?') { '&' } else { '?' };
            for (k, v) in q {
                let v = crate::value::V::from_json(v).to_interpolated();
                url.push(sep);
                url.push_str(&url_encode(k));
                url.push('=');
                url.push_str(&url_encode(&v));
                sep = '&';
            }
        }
        let mut headers: Vec<(String, String)> = match options.get("headers") {
            Some(Json::Object(h)) => h
                .iter()
                .map(|(k, v)| (k.clone(), crate::value::V::from_json(v).to_interpolated()))
                .collect(),
            _ => vec![],
        };
        let body = match options.get("body") {
            None | Some(Json::Null) => None,
            Some(Json::String(b)) => Some(b.clone()),
            Some(other) => {
                if !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("content-type".into(), "application/json".into()));
                }
                Some(other.to_string())
            }
        };
        let req = HttpRequest {
            method,
            url,
            headers,
            body,
        };
        let resp = match self.host.http(&req) {
            Ok(r) => r,
            // The bot goes on with a null result; the author sees why in the step's errors.
            Err(HostError::Failed(e)) => {
                self.user_error(format!("api action {name}: {e}"));
                return Ok(Json::Null);
            }
            Err(HostError::Abort(e)) => {
                return Err(StepError::Aborted(format!("api action {name}: {e}")));
            }
        };
        if resp.status != 200 {
            self.user_error(format!(
                "api action {name}: {} answered HTTP {} (the result is null)",
                req.url.split(['?', '#']).next().unwrap_or_default(),
                resp.status
            ));
            return Ok(Json::Null);
        }
        if resp.body.len() > MAX_API_BODY {
            self.user_error(format!(
                "api action {name}: the answer of {} bytes is over {MAX_API_BODY} (the result is null)",
                resp.body.len()
            ));
            return Ok(Json::Null);
        }
        let parsed = match serde_json::from_str::<Json>(&resp.body) {
            Ok(p) => p,
            Err(e) => {
                self.user_error(format!(
                    "api action {name}: the answer is not JSON ({e}; the result is null)"
                ));
                return Ok(Json::Null);
            }
        };
        Ok(match options.get("resultPath").and_then(Json::as_str) {
            Some(p) => get_path(&parsed, p).cloned().unwrap_or(Json::Null),
            None => parsed,
        })
    }

    /// The return value of an action method.
    #[allow(clippy::too_many_arguments)]
    fn method_return(
        &mut self,
        s: &mut Session,
        flow: &Flow,
        msg: &Message,
        intent: Option<&str>,
        out: crate::host::JsOutcome,
        result: &mut Json,
        commands: &mut Vec<(Message, bool)>,
        action: &str,
    ) {
        // In-place changes to the context and data arguments are kept.
        if let Some(ctx @ Json::Object(_)) = out.args.get(1) {
            s.contexes.insert(flow.name.clone(), ctx.clone());
        }
        if let Some(d @ Json::Object(_)) = out.args.get(2) {
            s.data = d.clone();
        }
        let mut emit = |step: &mut Self, m: &Json| {
            let msg_type = match m.get("type").and_then(Json::as_str) {
                Some("command") => {
                    let mut cmd = Message::command(
                        m.get("content").and_then(Json::as_str).unwrap_or(""),
                        m.get("payload")
                            .cloned()
                            .unwrap_or(Json::Object(Map::new())),
                    );
                    cmd.id = step.uuid();
                    commands.push((cmd, false));
                    return;
                }
                Some("data") => MsgType::Data,
                _ => MsgType::Text,
            };
            let id = step.uuid();
            step.out.push(Response {
                id,
                msg_type,
                content: m.get("content").and_then(Json::as_str).map(str::to_string),
                payload: m.get("payload").cloned(),
                action: action.to_string(),
                ref_id: msg.id.clone(),
                flow: flow.name.clone(),
                intent: intent.map(str::to_string),
            });
        };
        match out.value {
            None | Some(Json::Null) => {}
            Some(Json::String(t)) => emit(self, &serde_json::json!({"type": "text", "content": t})),
            Some(Json::Array(list)) => {
                for m in &list {
                    emit(self, m);
                }
            }
            Some(o @ Json::Object(_)) if o.get("type").is_some() => emit(self, &o),
            Some(Json::Object(o)) => {
                if let Some(c @ Json::Object(_)) = o.get("context") {
                    s.contexes.insert(flow.name.clone(), c.clone());
                }
                if let Some(d @ Json::Object(_)) = o.get("data") {
                    s.data = d.clone();
                }
                if let Some(r) = o.get("result") {
                    *result = r.clone();
                }
                if let Some(Json::Array(list)) = o.get("responses") {
                    for m in list {
                        emit(self, m);
                    }
                }
            }
            Some(other) => *result = other,
        }
    }

    /// A schedule action becomes an operation for the host.
    fn schedule(&mut self, options: &Json, name: &str) {
        let Some(id) = options
            .get("id")
            .map(|v| crate::value::V::from_json(v).to_interpolated())
            .filter(|s| !s.is_empty())
        else {
            self.user_error(format!("schedule action {name} has no options.id"));
            return;
        };
        match options
            .get("command")
            .and_then(Json::as_str)
            .unwrap_or("add")
        {
            "remove" => self.schedules.push(ScheduleOp::Remove { id }),
            "add" => {
                let tz_ms = (self.bot.timezone * 3_600_000.0) as i64;
                let time = |k: &str| {
                    options
                        .get(k)
                        .and_then(Json::as_str)
                        .and_then(parse_local_time)
                        .map(|t| t - tz_ms)
                };
                let start = time("start").filter(|t| *t > self.now).unwrap_or(self.now);
                let every = match schedule_period(options) {
                    Ok(every) => every,
                    Err(e) => {
                        self.user_error(format!("schedule action {name}: {e}"));
                        return;
                    }
                };
                let message = options.get("message").cloned().unwrap_or(Json::Null);
                if Message::from_json(&message).is_err() {
                    self.user_error(format!(
                        "schedule action {name}: options.message is not a message"
                    ));
                    return;
                }
                self.schedules.push(ScheduleOp::Add {
                    id,
                    message,
                    start,
                    end: time("end"),
                    every,
                });
            }
            other => self.user_error(format!(
                "schedule action {name}: unknown command \"{other}\" (add or remove)"
            )),
        }
    }
}

/// The longest period a repeating schedule may have: 100 years, in milliseconds. Bounds
/// `freqInterval` so that the host's `next fire = start + k × period` stays far from `i64`'s
/// limits.
pub const MAX_SCHEDULE_PERIOD_MS: i64 = 100 * 365 * 86_400_000;

/// A schedule action's period in milliseconds (`freqType` × `freqInterval`); `None` when it
/// does not repeat (no or unknown `freqType`). An interval that is not a whole number ≥ 1 is
/// 1; one that makes the period longer than [`MAX_SCHEDULE_PERIOD_MS`] is an error.
pub fn schedule_period(options: &Json) -> Result<Option<i64>, String> {
    let unit: i64 = match options.get("freqType").and_then(Json::as_str).unwrap_or("") {
        "second" => 1_000,
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        "week" => 604_800_000,
        "month" => 30 * 86_400_000,
        "year" => 365 * 86_400_000,
        _ => return Ok(None),
    };
    let interval = options
        .get("freqInterval")
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.trim().parse().ok()))
        .unwrap_or(1)
        .max(1);
    match unit.checked_mul(interval) {
        Some(p) if p <= MAX_SCHEDULE_PERIOD_MS => Ok(Some(p)),
        _ => Err(format!(
            "freqInterval {interval} makes a period longer than 100 years; use a shorter one"
        )),
    }
}

fn as_text(v: &Json) -> String {
    crate::value::V::from_json(v).to_interpolated()
}

/// The payload of a template action (of its `type`) or of an image action (its options are
/// the template's `items`, unless they hold `items` themselves); `None` for an empty list.
fn data_payload(kind: &ActionKind, options: &Json) -> Option<Json> {
    if !matches!(kind, ActionKind::Image) {
        return template_payload(
            options,
            options.get("type").and_then(Json::as_str).unwrap_or(""),
        );
    }
    let mut opts = options.clone();
    if opts.get("items").is_none() {
        opts = Json::Object(Map::from_iter([("items".to_string(), options.clone())]));
    }
    template_payload(&opts, "image")
}

/// `{type: template, template_type, items}`; `None` for an empty list.
fn template_payload(options: &Json, template_type: &str) -> Option<Json> {
    let items = if let (Some(data), Some(t)) = (options.get("data"), options.get("template")) {
        let list = data.as_array()?;
        Json::Array(
            list.iter()
                .take(MAX_ITEMS)
                .map(|el| resolve_refs(t, el))
                .collect(),
        )
    } else {
        match options.get("items").cloned().unwrap_or(Json::Null) {
            Json::Array(a) => Json::Array(a.into_iter().take(MAX_ITEMS).collect()),
            other => other,
        }
    };
    if items.as_array().is_some_and(Vec::is_empty) || items.is_null() {
        return None;
    }
    let mut p = Map::new();
    p.insert("type".into(), Json::String("template".into()));
    p.insert("template_type".into(), Json::String(template_type.into()));
    p.insert("items".into(), items);
    Some(Json::Object(p))
}

fn url_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `YYYY-MM-DD HH:mm:ss` as epoch milliseconds of that wall time in UTC.
pub fn parse_local_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once([' ', 'T']).unwrap_or((s, "00:00:00"));
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || t.is_empty() {
        return None;
    }
    let (y, m, day) = (d[0], d[1], d[2]);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = t[0] * 3600 + t.get(1).unwrap_or(&0) * 60 + t.get(2).unwrap_or(&0);
    Some((days * 86_400 + secs) * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time() {
        assert_eq!(parse_local_time("1970-01-01 00:00:00"), Some(0));
        assert_eq!(
            parse_local_time("2024-08-02 00:00:00"),
            Some(1_722_556_800_000)
        );
        assert_eq!(parse_local_time("nope"), None);
    }
}
