//! The conversation engine: one step = one inbound message.
//!
//! Sans-I/O: it works on a copy of the session and calls [`Host`] for every effect. A failed
//! step returns an error and the caller's session is untouched.

pub(crate) mod actions;
mod nlu;
pub mod vars;

use crate::host::{Host, HostError, JsCall, ReadKey};
use crate::model::{CompiledBot, Flow, Mapping, MethodRef};
use crate::session::{ConverseResult, HistoryEntry, Message, Meta, Response, ScheduleOp, Session};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use vars::{Abort, EMPTY, MetaCtx, Vars, all_hold, eval_json, site_error};

/// Why a step failed. The session is left as it was.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    #[error("Max Recursion of {0} is reached")]
    MaxRecursion(u32),
    /// A sandbox limit or trap, naming the limit and the site.
    #[error("{0}")]
    Aborted(String),
    #[error("invalid message: {0}")]
    InvalidMessage(String),
}

impl From<Abort> for StepError {
    fn from(a: Abort) -> Self {
        StepError::Aborted(a.0)
    }
}

/// Runs one conversation step.
pub fn converse(
    bot: &CompiledBot,
    session: &Session,
    message: Message,
    host: &mut dyn Host,
) -> Result<ConverseResult, StepError> {
    converse_owned(bot, session.clone(), message, host)
}

/// [`converse`] for a caller that no longer needs the session it passes (the sandbox guest,
/// which has just parsed it): saves a deep copy of it.
pub fn converse_owned(
    bot: &CompiledBot,
    session: Session,
    message: Message,
    host: &mut dyn Host,
) -> Result<ConverseResult, StepError> {
    let started = host.now_ms();
    let mut step = Step {
        bot,
        host,
        now: started,
        moves: 0,
        seen: vec![],
        out: vec![],
        errors: vec![],
        schedules: vec![],
        nlu_cache: NluCache::new(),
        ids: None,
    };
    let mut s = session;
    if !s.data.is_object() {
        s.data = Json::Object(Map::new());
    }
    let mut msg = message;
    if msg.id.is_empty() {
        msg.id = step.uuid();
    }
    step.expire_flows(&mut s);
    step.cycle(&mut s, msg, None)?;
    // A closed current flow hands over to the top of the stack, which is told by `reenter`.
    while s.current.is_none() {
        let Some(top) = s.history.pop() else { break };
        let Some(fi) = bot.flow_index(&top.flow) else {
            continue;
        };
        s.current = Some(top.flow.clone());
        let mut reenter = step.reenter_message();
        reenter.metadata = step.seen.first().and_then(|m| m.metadata.clone());
        step.cycle(&mut s, reenter, Some(fi))?;
    }
    let now = step.now;
    s.timestamp = now;
    s.updated_at = now;
    if s.created_at == 0 {
        s.created_at = now;
    }
    if s.session_start == 0 {
        s.session_start = now;
    }
    let duration = step.host.now_ms() - started;
    Ok(ConverseResult {
        messages: step.seen,
        responses: step.out,
        session: s,
        duration: duration.max(0),
        errors: step.errors,
        schedules: step.schedules,
    })
}

/// The 8-4-4-4-12 lower-case hex text of a 128-bit value given as its two halves (u128
/// shifts are library calls in wasm).
fn uuid_text(hi: u64, lo: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 36];
    let mut digit = 0;
    for (i, o) in out.iter_mut().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            *o = b'-';
        } else {
            let half = if digit < 16 { hi } else { lo };
            *o = HEX[((half >> (60 - 4 * (digit % 16))) & 0xf) as usize];
            digit += 1;
        }
    }
    // Only ASCII hex digits and dashes were written.
    String::from_utf8(out.to_vec()).expect("ascii")
}

/// SplitMix64: the next output and state.
fn splitmix64(state: u64) -> (u64, u64) {
    let state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31), state)
}

pub(crate) struct Step<'b, 'h> {
    pub bot: &'b CompiledBot,
    pub host: &'h mut dyn Host,
    pub now: i64,
    pub moves: u32,
    pub seen: Vec<Message>,
    pub out: Vec<Response>,
    pub errors: Vec<String>,
    pub schedules: Vec<ScheduleOp>,
    pub nlu_cache: NluCache,
    /// Generator of this step's ids, seeded from the host's randomness at the first id.
    pub ids: Option<u64>,
}

/// What intent selection decided for one message.
pub(crate) struct Selected {
    flow: usize,
    intent: usize,
    attributes: Json,
}

impl Step<'_, '_> {
    /// A random (version 4) UUID, written out directly: `format!` with five hex fields would be
    /// a visible share of a step in the sandbox. One host call seeds the step's ids; each id is
    /// then two SplitMix64 outputs (ids need to be unique, not secret).
    pub fn uuid(&mut self) -> String {
        let state = match self.ids {
            Some(s) => s,
            None => self.host.random_u64(),
        };
        let (a, state) = splitmix64(state);
        let (b, state) = splitmix64(state);
        self.ids = Some(state);
        let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
        let a = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
        uuid_text(a, b)
    }

    /// The internal `reenter` command (Kata's docs/kata-ml/flow.md "Flow Switching");
    /// `payload: null` there, absent here so it survives a JSON round trip.
    pub fn reenter_message(&mut self) -> Message {
        let mut reenter = Message::command("reenter", Json::Null);
        reenter.payload = None;
        reenter.id = self.uuid();
        reenter
    }

    pub fn user_error(&mut self, msg: String) {
        site_error(self.host, &mut self.errors, msg);
    }

    fn meta_base(&self, s: &Session, flow: &Flow) -> MetaCtx {
        MetaCtx {
            flow: flow.name.clone(),
            state: s.state_of(&flow.name).unwrap_or("").to_string(),
            last_flow: s.meta.as_ref().and_then(|m| m.last_flow.clone()),
            last_state: s.meta.as_ref().and_then(|m| m.last_state.clone()),
            now: self.now,
            timestamp: s.timestamp,
            session_id: s.id.clone(),
            channel_id: s.channel_id.clone(),
            deployment_id: s.deployment_id.clone(),
            data_key: s.data_key.clone(),
            user_id: s.user_id.clone(),
            ..Default::default()
        }
    }

    /// Drops expired, inactive and invalidated flows and context entries.
    fn expire_flows(&mut self, s: &mut Session) {
        let now = self.now;
        let mut open: Vec<(String, i64)> = s
            .history
            .iter()
            .map(|h| (h.flow.clone(), h.timestamp))
            .collect();
        if let Some(c) = &s.current {
            open.push((c.clone(), s.timestamp));
        }
        // The stack can hold every flow of the bot: flows are looked up by name, and the
        // closed ones leave the stack in one pass, not one search and one pass each.
        let by_name: HashMap<&str, &Flow> = if open.len() > 8 {
            self.bot
                .flows
                .iter()
                .map(|f| (f.name.as_str(), f))
                .rev()
                .collect()
        } else {
            HashMap::new()
        };
        let mut closed = std::collections::HashSet::new();
        for (name, last) in open {
            let flow = if by_name.is_empty() {
                self.bot.flows.iter().find(|f| f.name == name)
            } else {
                by_name.get(name.as_str()).copied()
            };
            let close = match flow {
                None => true,
                Some(f) => !f.active || f.expire.is_some_and(|e| (now - last) as f64 > e),
            };
            if close {
                if s.current.as_deref() == Some(name.as_str()) {
                    s.current = None;
                }
                s.states.remove(&name);
                s.contexes.remove(&name);
                closed.insert(name);
            }
        }
        if !closed.is_empty() {
            s.history.retain(|h| !closed.contains(&h.flow));
        }
        if s.current.is_none()
            && let Some(top) = s.history.pop()
        {
            s.current = Some(top.flow);
        }
        for f in &self.bot.flows {
            let flow_invalid = f.invalidate.is_some_and(|t| t <= now as f64);
            if let Some(Json::Object(ctx)) = s.contexes.get_mut(&f.name) {
                let whole = flow_invalid
                    || ctx
                        .get("invalidate")
                        .and_then(Json::as_f64)
                        .is_some_and(|t| t <= now as f64);
                if whole {
                    ctx.clear();
                } else {
                    ctx.retain(|_, v| {
                        !v.get("invalidate")
                            .and_then(Json::as_f64)
                            .is_some_and(|t| t <= now as f64)
                    });
                }
            }
        }
    }

    /// One pass of the pipeline over one message; recurses on emitted commands.
    fn cycle(
        &mut self,
        s: &mut Session,
        mut msg: Message,
        only: Option<usize>,
    ) -> Result<(), StepError> {
        let seen_at = self.seen.len();
        self.seen.push(msg.clone());
        let Some(sel) = self.select(s, &msg, only)? else {
            return Ok(());
        };
        let bot = self.bot;
        let flow = &bot.flows[sel.flow];
        let intent_name = Some(flow.intents[sel.intent].name.clone());
        msg.intent = intent_name.clone();
        msg.attributes = Some(sel.attributes.clone());
        self.seen[seen_at] = msg.clone();
        if flow.states.is_empty() {
            return Ok(());
        }
        let fresh = self.open_flow(s, sel.flow);
        let mut meta = self.meta_base(s, flow);
        meta.init = fresh;
        let Some(target) = self.choose_state(
            s,
            flow,
            &msg,
            intent_name.as_deref(),
            &sel.attributes,
            &mut meta,
        )?
        else {
            // A flow never stays open at an end state: a state that is both initial
            // and end, from which no transition was chosen, closes the flow without actions.
            let at = s
                .state_of(&flow.name)
                .and_then(|n| flow.state_index(n))
                .or(flow.initial);
            if at.is_some_and(|i| flow.states[i].end) {
                close_flow(s, &flow.name);
            }
            return Ok(());
        };
        self.moves += 1;
        if self.moves > bot.max_recursion {
            return Err(StepError::MaxRecursion(bot.max_recursion));
        }
        self.host
            .state_moved(self.moves)
            .map_err(|e| StepError::Aborted(e.to_string()))?;
        let state = &flow.states[target];
        s.states
            .insert(flow.name.clone(), Json::String(state.name.clone()));
        meta.state = state.name.clone();
        let commands = self.run_actions(
            s,
            flow,
            state,
            &msg,
            intent_name.as_deref(),
            &sel.attributes,
            &meta,
        )?;
        s.meta = Some(Meta {
            last_flow: Some(flow.name.clone()),
            last_state: Some(state.name.clone()),
            end: state.end,
        });
        if state.end {
            close_flow(s, &flow.name);
        }
        for (mut cmd, reenter) in commands {
            cmd.metadata = msg.metadata.clone();
            if reenter {
                // A `reenter` state action re-asks: the internal reenter message goes to this
                // flow only, and only while it is still the current flow (an end state
                // closed it, or an earlier command opened another flow: then the stack's
                // own reenter takes over when that flow closes).
                if s.current.as_deref() == Some(flow.name.as_str()) {
                    self.cycle(s, cmd, Some(sel.flow))?;
                }
            } else {
                self.cycle(s, cmd, None)?;
            }
        }
        Ok(())
    }

    /// Makes `fi` the current flow. Returns whether it started fresh.
    fn open_flow(&mut self, s: &mut Session, fi: usize) -> bool {
        let bot = self.bot;
        let name = &bot.flows[fi].name;
        if s.current.as_deref() == Some(name.as_str()) && s.states.contains_key(name) {
            return false;
        }
        if let Some(prev) = s.current.take()
            && prev != *name
        {
            let volatile = bot
                .flows
                .iter()
                .find(|f| f.name == prev)
                .is_none_or(|f| f.volatile);
            if volatile {
                close_flow(s, &prev);
            } else {
                s.history.retain(|h| h.flow != prev);
                s.history.push(HistoryEntry {
                    flow: prev,
                    timestamp: self.now,
                });
            }
        }
        s.current = Some(name.clone());
        // A stacked flow leaves the stack and continues from its saved state.
        if let Some(pos) = s.history.iter().position(|h| &h.flow == name) {
            s.history.remove(pos);
        }
        if s.states.contains_key(name) {
            return false;
        }
        let flow = &bot.flows[fi];
        let init = flow
            .initial
            .map(|i| flow.states[i].name.clone())
            .unwrap_or_default();
        s.states.insert(name.clone(), Json::String(init));
        s.contexes.insert(name.clone(), Json::Object(Map::new()));
        true
    }

    /// Intent selection: current flow first, then initial intents of other flows,
    /// then the fallback flow.
    fn select(
        &mut self,
        s: &Session,
        msg: &Message,
        only: Option<usize>,
    ) -> Result<Option<Selected>, StepError> {
        let bot = self.bot;
        if let Some(fi) = only {
            return self.select_in(s, msg, fi);
        }
        let current = s
            .current
            .as_deref()
            .and_then(|c| bot.flow_index(c))
            .filter(|&fi| bot.flows[fi].active);
        if let Some(fi) = current
            && let Some(sel) = self.select_in(s, msg, fi)?
        {
            return Ok(Some(sel));
        }
        let mut best: Option<(usize, usize)> = None;
        for (fi, flow) in bot.flows.iter().enumerate() {
            if Some(fi) == current || !flow.active {
                continue;
            }
            if let Some(ii) = self.match_intents(s, msg, fi, true)? {
                let better = match best {
                    None => true,
                    Some((bf, bi)) => {
                        let (p, bp) = (
                            flow.intents[ii].priority,
                            bot.flows[bf].intents[bi].priority,
                        );
                        p > bp || (p == bp && flow.priority > bot.flows[bf].priority)
                    }
                };
                if better {
                    best = Some((fi, ii));
                }
            }
        }
        if let Some((fi, ii)) = best {
            return self.selected(s, msg, fi, ii).map(Some);
        }
        // The fallback flow is selected as if it were current: all its intents (not only
        // initial ones), then its fallback intent. So a fallback flow whose only intent is
        // `type: text` catches unmatched text (community bots rely on it).
        if let Some(fi) = bot.fallback_flow
            && Some(fi) != current
            && bot.flows[fi].active
        {
            return self.select_in(s, msg, fi);
        }
        Ok(None)
    }

    /// Selection inside one flow, all intents, then its fallback intent.
    fn select_in(
        &mut self,
        s: &Session,
        msg: &Message,
        fi: usize,
    ) -> Result<Option<Selected>, StepError> {
        let ii = match self.match_intents(s, msg, fi, false)? {
            Some(ii) => Some(ii),
            None => self.fallback_intent(s, msg, fi)?,
        };
        match ii {
            Some(ii) => self.selected(s, msg, fi, ii).map(Some),
            None => Ok(None),
        }
    }

    /// The selection of intent `ii` of flow `fi`, with its attributes.
    fn selected(
        &mut self,
        s: &Session,
        msg: &Message,
        fi: usize,
        ii: usize,
    ) -> Result<Selected, StepError> {
        let attributes = self.attributes(s, msg, fi, ii)?;
        Ok(Selected {
            flow: fi,
            intent: ii,
            attributes,
        })
    }

    /// The first steps of intent selection: the best non-fallback intent.
    fn match_intents(
        &mut self,
        s: &Session,
        msg: &Message,
        fi: usize,
        initial_only: bool,
    ) -> Result<Option<usize>, StepError> {
        let bot = self.bot;
        let flow = &bot.flows[fi];
        let meta = self.meta_base(s, flow);
        let mut best: Option<usize> = None;
        for (ii, intent) in flow.intents.iter().enumerate() {
            if intent.fallback || (initial_only && !intent.initial) {
                continue;
            }
            if intent.msg_type.is_some_and(|t| t != msg.msg_type) {
                continue;
            }
            if best.is_some_and(|b| flow.intents[b].priority >= intent.priority) {
                continue;
            }
            let vars = Vars::in_flow(s, &flow.name, bot, msg, None, &EMPTY, None, &meta);
            if !all_hold(self.host, &mut self.errors, &intent.conditions, &vars)? {
                continue;
            }
            if !intent.classifiers.is_empty() && !self.classify(s, msg, intent)? {
                continue;
            }
            best = Some(ii);
        }
        Ok(best)
    }

    fn fallback_intent(
        &mut self,
        s: &Session,
        msg: &Message,
        fi: usize,
    ) -> Result<Option<usize>, StepError> {
        let bot = self.bot;
        let flow = &bot.flows[fi];
        let Some((ii, intent)) = flow.intents.iter().enumerate().find(|(_, i)| i.fallback) else {
            return Ok(None);
        };
        if intent.msg_type.is_some_and(|t| t != msg.msg_type) {
            return Ok(None);
        }
        let meta = self.meta_base(s, flow);
        let vars = Vars::in_flow(s, &flow.name, bot, msg, None, &EMPTY, None, &meta);
        Ok(all_hold(self.host, &mut self.errors, &intent.conditions, &vars)?.then_some(ii))
    }

    /// State mapping: returns the target state, or `None` when the flow stays.
    fn choose_state(
        &mut self,
        s: &mut Session,
        flow: &Flow,
        msg: &Message,
        intent: Option<&str>,
        attrs: &Json,
        meta: &mut MetaCtx,
    ) -> Result<Option<usize>, StepError> {
        let from_name = s.state_of(&flow.name).map(str::to_string);
        let from = from_name
            .as_deref()
            .and_then(|n| flow.state_index(n))
            .or(flow.initial)
            .unwrap_or(0);
        meta.state = flow.states[from].name.clone();
        meta.start = Some(Some(from) == flow.initial);
        if let Some(mapper) = &flow.state_mapper
            && let Some(target) = self.state_mapper(s, flow, mapper, msg, intent, attrs, meta)?
        {
            self.enter(s, flow, from, target, msg, intent, attrs, meta)?;
            return Ok(Some(target));
        }
        let state = &flow.states[from];
        if let Some(m) = &state.transit {
            self.apply_mapping(s, flow, m, msg, intent, attrs, meta)?;
        }
        let Some(t) = self.choose_transition(s, flow, from, msg, intent, attrs, meta)? else {
            return Ok(None);
        };
        let tr = if t.0 {
            &flow.floats[t.1]
        } else {
            &flow.states[from].transitions[t.1]
        };
        let target = tr.target;
        meta.to = Some(flow.states[target].name.clone());
        meta.end = Some(flow.states[target].end);
        if let Some(m) = &tr.mapping {
            self.apply_mapping(s, flow, m, msg, intent, attrs, meta)?;
        }
        if let Some(m) = &flow.states[from].exit {
            self.apply_mapping(s, flow, m, msg, intent, attrs, meta)?;
        }
        self.enter(s, flow, from, target, msg, intent, attrs, meta)?;
        Ok(Some(target))
    }

    #[allow(clippy::too_many_arguments)]
    fn enter(
        &mut self,
        s: &mut Session,
        flow: &Flow,
        from: usize,
        target: usize,
        msg: &Message,
        intent: Option<&str>,
        attrs: &Json,
        meta: &mut MetaCtx,
    ) -> Result<(), StepError> {
        meta.from = Some(flow.states[from].name.clone());
        meta.to = Some(flow.states[target].name.clone());
        meta.end = Some(flow.states[target].end);
        if let Some(m) = &flow.states[target].enter {
            self.apply_mapping(s, flow, m, msg, intent, attrs, meta)?;
        }
        Ok(())
    }

    /// Transition choice. Returns (is float, index).
    #[allow(clippy::too_many_arguments)]
    fn choose_transition(
        &mut self,
        s: &Session,
        flow: &Flow,
        from: usize,
        msg: &Message,
        intent: Option<&str>,
        attrs: &Json,
        meta: &MetaCtx,
    ) -> Result<Option<(bool, usize)>, StepError> {
        let state = &flow.states[from];
        let vars = Vars::in_flow(s, &flow.name, self.bot, msg, intent, attrs, None, meta);
        let candidates = state
            .transitions
            .iter()
            .enumerate()
            .map(|(i, t)| (false, i, t))
            .chain(flow.floats.iter().enumerate().map(|(i, t)| (true, i, t)));
        let mut best: Option<(bool, usize, f64)> = None;
        for (is_float, i, t) in candidates.clone() {
            if t.fallback && t.conditions.is_empty() {
                continue;
            }
            if best.is_some_and(|b| b.2 >= t.priority) {
                continue;
            }
            if all_hold(self.host, &mut self.errors, &t.conditions, &vars)? {
                best = Some((is_float, i, t.priority));
            }
        }
        if let Some((f, i, _)) = best {
            return Ok(Some((f, i)));
        }
        Ok(candidates
            .filter(|(_, _, t)| t.fallback)
            .map(|(f, i, _)| (f, i))
            .next())
    }

    #[allow(clippy::too_many_arguments)]
    fn state_mapper(
        &mut self,
        s: &mut Session,
        flow: &Flow,
        mapper: &MethodRef,
        msg: &Message,
        intent: Option<&str>,
        attrs: &Json,
        meta: &MetaCtx,
    ) -> Result<Option<usize>, StepError> {
        let mut ctx = self.ctx_object(s, flow, msg, intent, attrs, meta);
        ctx["state"] = Json::String(meta.state.clone());
        let Some(out) = self.call_method(mapper, vec![ctx], &[], &[])? else {
            return Ok(None);
        };
        let (name, obj) = match &out.value {
            Some(Json::String(n)) => (n.clone(), None),
            Some(Json::Object(o)) => match o.get("state").and_then(Json::as_str) {
                Some(n) => (n.to_string(), Some(o.clone())),
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        let Some(target) = flow.state_index(&name) else {
            self.user_error(format!(
                "stateMapper {} returned unknown state \"{name}\"",
                mapper.name
            ));
            return Ok(None);
        };
        if let Some(o) = obj {
            store_ctx(s, &flow.name, &o);
        }
        Ok(Some(target))
    }

    /// `ctx` of mapping methods: `{type, content, payload, metadata, intent, attributes, context, data, config}`.
    fn ctx_object(
        &self,
        s: &Session,
        flow: &Flow,
        msg: &Message,
        intent: Option<&str>,
        attrs: &Json,
        meta: &MetaCtx,
    ) -> Json {
        let vars = Vars::in_flow(s, &flow.name, self.bot, msg, intent, attrs, None, meta);
        vars.scope_json()
    }

    /// Runs a mapping: assignments in order, or a `fn(ctx)` method.
    #[allow(clippy::too_many_arguments)]
    fn apply_mapping(
        &mut self,
        s: &mut Session,
        flow: &Flow,
        m: &Mapping,
        msg: &Message,
        intent: Option<&str>,
        attrs: &Json,
        meta: &MetaCtx,
    ) -> Result<(), StepError> {
        match m {
            Mapping::Assign(items) => {
                for (target, e) in items {
                    if target.get(1).is_some_and(|k| k.starts_with('$')) && target[0] == "context" {
                        continue;
                    }
                    let value = {
                        let vars =
                            Vars::in_flow(s, &flow.name, self.bot, msg, intent, attrs, None, meta);
                        // A throwing expression leaves the key unchanged.
                        let errs_before = self.errors.len();
                        let v = eval_json(self.host, &mut self.errors, e, &vars)?;
                        if self.errors.len() > errs_before {
                            continue;
                        }
                        v
                    };
                    let root = if target[0] == "context" {
                        s.contexes
                            .entry(flow.name.clone())
                            .or_insert_with(|| Json::Object(Map::new()))
                    } else {
                        &mut s.data
                    };
                    set_path(root, &target[1..], value);
                }
            }
            Mapping::Method(mr) => {
                let ctx = self.ctx_object(s, flow, msg, intent, attrs, meta);
                if let Some(out) = self.call_method(mr, vec![ctx], &[0], STORED_CTX_KEYS)? {
                    let ret = match out.value {
                        Some(v @ Json::Object(_)) => v,
                        _ => out.args.into_iter().next().unwrap_or(Json::Null),
                    };
                    if let Json::Object(o) = ret {
                        store_ctx(s, &flow.name, &o);
                    }
                }
            }
        }
        Ok(())
    }

    /// Calls a bot method; `read_back`: the arguments whose state after the call is read
    /// (`read_keys`: only these top-level keys of them, when not empty).
    /// `Ok(None)`: unknown method or a JS exception (logged).
    pub fn call_method(
        &mut self,
        mr: &MethodRef,
        args: Vec<Json>,
        read_back: &[usize],
        read_keys: &[ReadKey],
    ) -> Result<Option<crate::host::JsOutcome>, StepError> {
        let Some(mi) = mr.index else {
            self.user_error(format!("unknown method \"{}\"", mr.name));
            return Ok(None);
        };
        let method = &self.bot.methods[mi];
        match self.host.js(JsCall::Method {
            method,
            args: &args,
            read_back,
            read_keys,
        }) {
            Ok(out) => Ok(Some(out)),
            Err(HostError::Failed(e)) => {
                self.user_error(format!("method {} threw: {e}", mr.name));
                Ok(None)
            }
            Err(HostError::Abort(e)) => Err(StepError::Aborted(format!("method {} {e}", mr.name))),
        }
    }
}

/// The members of a ctx object a mapping method's changes are read from (what
/// [`store_ctx`] stores).
const STORED_CTX_KEYS: &[ReadKey] = &[
    ReadKey {
        name: "context",
        without_meta: true,
    },
    ReadKey {
        name: "data",
        without_meta: false,
    },
];

/// Stores `context` and `data` members of a returned ctx object (meta keys dropped).
fn store_ctx(s: &mut Session, flow: &str, o: &Map<String, Json>) {
    if let Some(Json::Object(c)) = o.get("context") {
        let clean: Map<String, Json> = c
            .iter()
            .filter(|(k, _)| !k.starts_with('$'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        s.contexes.insert(flow.to_string(), Json::Object(clean));
    }
    if let Some(d @ Json::Object(_)) = o.get("data") {
        s.data = d.clone();
    }
}

/// Sets `root.a.b.c`, creating objects on the way; `None` deletes the key.
pub(crate) fn set_path(root: &mut Json, path: &[String], value: Option<Json>) {
    let Some((last, init)) = path.split_last() else {
        return;
    };
    let mut cur = root;
    for seg in init {
        if !cur.is_object() {
            *cur = Json::Object(Map::new());
        }
        cur = cur
            .as_object_mut()
            .unwrap()
            .entry(seg.clone())
            .or_insert_with(|| Json::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Json::Object(Map::new());
    }
    let obj = cur.as_object_mut().unwrap();
    match value {
        Some(v) => {
            obj.insert(last.clone(), v);
        }
        None => {
            obj.shift_remove(last);
        }
    }
}

/// Closes a flow: its state and context are erased, it leaves current and the stack.
pub(crate) fn close_flow(s: &mut Session, name: &str) {
    if s.current.as_deref() == Some(name) {
        s.current = None;
    }
    s.history.retain(|h| h.flow != name);
    s.states.remove(name);
    s.contexes.remove(name);
}

/// Shared per-message NLU output cache key type.
pub(crate) type NluCache = HashMap<String, Json>;

#[cfg(test)]
mod uuid_tests {
    use super::{splitmix64, uuid_text};

    #[test]
    fn ids_from_one_seed_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        let mut state = 7;
        for _ in 0..10_000 {
            let (a, s) = splitmix64(state);
            let (b, s) = splitmix64(s);
            state = s;
            assert!(seen.insert(uuid_text(a, b)));
        }
    }

    #[test]
    fn uuid_text_is_the_8_4_4_4_12_hex_form() {
        assert_eq!(
            uuid_text(0x0123_4567_89ab_4def, 0x8123_4567_89ab_cdef),
            "01234567-89ab-4def-8123-456789abcdef"
        );
        assert_eq!(uuid_text(0, 0), "00000000-0000-0000-0000-000000000000");
        assert_eq!(
            uuid_text(u64::MAX, u64::MAX),
            "ffffffff-ffff-ffff-ffff-ffffffffffff"
        );
    }
}
