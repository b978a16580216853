//! Chat runs: the run task (one bot step per cycle in the sandbox, its api calls streamed as
//! they happen), the in-memory chunk log with its readers, cancel and steer, the stored log,
//! and the sweep of runs whose process died.

use super::stream;
use crate::live::{Live, LiveError};
use botbox_sandbox::effects::{EffectFuture, Effects, HttpCall, HttpResult, Layer};
use botbox_sandbox::{Revision, SessionJson};
use botbox_store::{AgentRunRow, Db, EnvironmentRow, StepWrite, now_ms};
use runtime_core::session::{Message, Session, StepReport};
use serde_json::{Value as Json, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tracing::Instrument as _;

/// How long a run's row claims its process is alive; a run in flight past it (its process
/// died) is ended as failed by the sweep.
pub const RUN_LEASE_MS: i64 = 10 * 60 * 1000;
/// Steers delivered to one run at most (each is one more step); later ones wait for the
/// next turn as `expired`.
pub const MAX_STEERS_PER_RUN: usize = 8;
/// The error text of a run whose process stopped.
pub const ORPHAN_ERROR: &str =
    "The server stopped while this run was in progress; send the message again.";

/// The runs this process is running, by id.
pub struct Agents {
    pub db: Db,
    pub live: Arc<Live>,
    runs: Mutex<HashMap<String, Arc<RunHandle>>>,
}

/// What a run's task and its readers share.
pub struct RunHandle {
    pub id: String,
    pub conversation_id: String,
    pub message_id: String,
    state: Mutex<RunState>,
    /// The number of chunks in the log (readers wait on it).
    len: watch::Sender<usize>,
    cancel: watch::Sender<bool>,
    /// Set once the run's end is stored.
    stored: watch::Sender<bool>,
    steers: Mutex<VecDeque<(String, Message)>>,
}

struct RunState {
    chunks: Vec<Arc<str>>,
    /// Chunks already stored.
    flushed: usize,
    /// No more chunks are accepted.
    ended: bool,
    /// The terminal chunks, until stored.
    tail: Vec<Arc<str>>,
    /// The log is complete and readers see it whole.
    done: bool,
    /// Tool calls started and not finished (closed with an error on cancel).
    open_tools: Vec<String>,
    next_tool: usize,
}

/// What a run needs to know of its agent.
#[derive(Clone)]
pub struct RunTarget {
    pub env: EnvironmentRow,
    pub tenant: String,
}

impl RunHandle {
    fn new(id: &str, conversation_id: &str, message_id: &str, first: Arc<str>) -> RunHandle {
        RunHandle {
            id: id.into(),
            conversation_id: conversation_id.into(),
            message_id: message_id.into(),
            state: Mutex::new(RunState {
                chunks: vec![first],
                flushed: 1,
                ended: false,
                tail: Vec::new(),
                done: false,
                open_tools: Vec::new(),
                next_tool: 0,
            }),
            len: watch::channel(1).0,
            cancel: watch::channel(false).0,
            stored: watch::channel(false).0,
            steers: Mutex::new(VecDeque::new()),
        }
    }

    /// Appends chunks unless the run has ended.
    fn emit(&self, chunks: impl IntoIterator<Item = Json>) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.ended {
            return false;
        }
        for c in chunks {
            st.chunks.push(c.to_string().into());
        }
        self.len.send_replace(st.chunks.len());
        true
    }

    /// Closes the run to new chunks and prepares its terminal chunks and `[DONE]` (open
    /// tool calls closed first); readers see them only once [`RunHandle::publish_end`] runs,
    /// after they are stored, so a reader that saw `[DONE]` finds the run ended in storage.
    fn end(&self, tail: Vec<Json>) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.ended {
            return false;
        }
        let open: Vec<String> = std::mem::take(&mut st.open_tools);
        for id in open {
            st.tail
                .push(stream::tool_error(&id, "cancelled").to_string().into());
        }
        for c in tail {
            st.tail.push(c.to_string().into());
        }
        st.tail.push(stream::DONE.into());
        st.ended = true;
        true
    }

    fn publish_end(&self) {
        let mut st = self.state.lock().unwrap();
        let tail = std::mem::take(&mut st.tail);
        st.chunks.extend(tail);
        st.done = true;
        self.len.send_replace(st.chunks.len());
    }

    pub fn cancel(&self) {
        self.cancel.send_replace(true);
    }

    /// Waits until the run's end is stored.
    pub async fn wait_stored(&self) {
        let mut rx = self.stored.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    async fn wait_cancel(&self) {
        let mut rx = self.cancel.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    pub fn steer(&self, id: String, message: Message) {
        self.steers.lock().unwrap().push_back((id, message));
    }

    /// Chunks from index `from` (0-based), and whether the log is complete.
    pub fn chunks_from(&self, from: usize) -> (Vec<Arc<str>>, bool) {
        let st = self.state.lock().unwrap();
        (st.chunks.get(from..).unwrap_or_default().to_vec(), st.done)
    }

    /// Every chunk of the run, the prepared tail included (readers may not see it yet).
    fn all_chunks(&self) -> Vec<Arc<str>> {
        let st = self.state.lock().unwrap();
        st.chunks.iter().chain(&st.tail).cloned().collect()
    }

    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.len.subscribe()
    }

    fn unflushed(&self) -> (usize, Vec<String>, bool) {
        let st = self.state.lock().unwrap();
        (
            st.flushed,
            st.chunks[st.flushed.min(st.chunks.len())..]
                .iter()
                .chain(&st.tail)
                .map(|c| c.to_string())
                .collect(),
            st.ended,
        )
    }

    fn mark_flushed(&self, n: usize) {
        let mut st = self.state.lock().unwrap();
        st.flushed = st.flushed.max(n);
    }

    fn tool_started(&self, tool: &str, input: Json) -> Option<String> {
        let mut st = self.state.lock().unwrap();
        if st.ended {
            return None;
        }
        let id = format!("call_{}", st.next_tool);
        st.next_tool += 1;
        st.open_tools.push(id.clone());
        st.chunks
            .push(stream::tool_input(&id, tool, input).to_string().into());
        self.len.send_replace(st.chunks.len());
        Some(id)
    }

    fn tool_finished(&self, id: &str, result: Result<Json, String>) {
        let mut st = self.state.lock().unwrap();
        if st.ended {
            return;
        }
        st.open_tools.retain(|t| t != id);
        let c = match result {
            Ok(v) => stream::tool_output(id, v),
            Err(e) => stream::tool_error(id, &e),
        };
        st.chunks.push(c.to_string().into());
        self.len.send_replace(st.chunks.len());
    }
}

/// The live effects of a run: each api call streamed as a dynamic tool call while the host
/// performs it, and aborted at once when the run is cancelled.
struct RunEffects {
    inner: Arc<dyn Effects>,
    run: Arc<RunHandle>,
    /// The tool call of the JavaScript method running now.
    js_call: Mutex<Option<String>>,
}

impl Layer for RunEffects {
    fn inner(&self) -> &dyn Effects {
        &*self.inner
    }
    fn on_http<'a>(&'a self, call: HttpCall<'a>) -> EffectFuture<'a, HttpResult> {
        let HttpCall { req, limits } = call;
        Box::pin(async move {
            if self.run.cancelled() {
                return Err("the run was cancelled".into());
            }
            // Headers may carry the tenant's secrets: the stream shows method and URL.
            let call = self
                .run
                .tool_started("api", json!({"method": req.method, "url": req.url}));
            let result = tokio::select! {
                r = self.inner.http(req, limits) => r,
                _ = self.run.wait_cancel() => Err("the run was cancelled".to_owned()),
            };
            if let Some(id) = call {
                self.run
                    .tool_finished(&id, crate::effects::shown_answer(&result));
            }
            result
        })
    }
    /// A bot method as a tool call: its name as `toolName`; the host sees neither its
    /// arguments nor its result (they stay inside the sandbox), so input and output are
    /// empty objects.
    fn on_js_method(&self, name: Option<&str>) {
        let mut call = self.js_call.lock().unwrap();
        match name {
            Some(name) => {
                if let Some(prev) = call.take() {
                    self.run.tool_finished(&prev, Ok(json!({})));
                }
                *call = self.run.tool_started(name, json!({}));
            }
            None => {
                if let Some(id) = call.take() {
                    self.run.tool_finished(&id, Ok(json!({})));
                }
            }
        }
    }
}

/// The session key of an agent conversation, next to channel users' keys.
pub fn session_key(env_id: &str, conversation_id: &str) -> String {
    format!("{env_id}:agent:{conversation_id}")
}

/// What a new run is.
pub struct NewRun {
    pub run_id: String,
    pub conversation_id: String,
    pub key_id: String,
    pub target: RunTarget,
    pub message: Message,
}

impl Agents {
    pub fn new(db: Db, live: Arc<Live>) -> Arc<Agents> {
        Arc::new(Agents {
            db,
            live,
            runs: Mutex::new(HashMap::new()),
        })
    }

    /// A run this process is running.
    pub fn running(&self, id: &str) -> Option<Arc<RunHandle>> {
        self.runs.lock().unwrap().get(id).cloned()
    }

    /// Stores a queued run with its `start` chunk and starts its task; `Err(active run id)`
    /// when the conversation already has a run queued or in progress.
    pub async fn start(
        self: &Arc<Self>,
        r: NewRun,
    ) -> Result<Result<Arc<RunHandle>, String>, LiveError> {
        let message_id = super::new_prefixed("msg_");
        let first: Arc<str> = stream::start(&message_id, &r.run_id, &r.conversation_id)
            .to_string()
            .into();
        let row = AgentRunRow {
            id: r.run_id.clone(),
            conversation_id: r.conversation_id.clone(),
            environment_id: r.target.env.id.clone(),
            key_id: r.key_id.clone(),
            status: "queued".into(),
            error: None,
            created_at: now_ms(),
            started_at: None,
            ended_at: None,
        };
        if let Err(active) = self
            .db
            .insert_agent_run(&row, &first, now_ms() + RUN_LEASE_MS)
            .await?
        {
            return Ok(Err(active));
        }
        let handle = Arc::new(RunHandle::new(
            &r.run_id,
            &r.conversation_id,
            &message_id,
            first,
        ));
        self.runs
            .lock()
            .unwrap()
            .insert(r.run_id.clone(), handle.clone());
        let me = self.clone();
        let h = handle.clone();
        let span = tracing::info_span!("agent_run", run = %r.run_id, tenant = %r.target.tenant,
            environment = %r.target.env.id, revision = tracing::field::Empty);
        let busy = self.live.drain.busy(crate::drain::Work::AgentRuns);
        tokio::spawn(
            async move {
                let _busy = busy;
                me.run(h.clone(), r.target, r.message).await;
                // Readers that hold the handle finish from memory; new ones read the store.
                me.runs.lock().unwrap().remove(&h.id);
            }
            .instrument(span),
        );
        Ok(Ok(handle))
    }

    /// The run task: cycles until done, failed or cancelled; the log stored at each cycle's
    /// end and with the outcome.
    async fn run(&self, h: Arc<RunHandle>, target: RunTarget, message: Message) {
        let outcome = self.cycles(&h, &target, message).await;
        let (status, error, tail) = match outcome {
            Ok(()) => (
                "completed",
                None,
                vec![stream::finish(&h.id, &h.conversation_id, "completed")],
            ),
            Err(Ended::Cancelled) => (
                "cancelled",
                None,
                vec![stream::finish_step(), stream::abort()],
            ),
            Err(Ended::Failed(e)) => (
                "failed",
                Some(e.clone()),
                vec![
                    stream::finish_step(),
                    stream::error(&e),
                    stream::finish(&h.id, &h.conversation_id, "failed"),
                ],
            ),
        };
        h.end(tail);
        if let Err(e) = self.flush(&h, Some((status, error.as_deref()))).await {
            tracing::error!(run = %h.id, error = %e, "storing the run's end");
        }
        // The assistant's message joins the history (a cancelled run's partial one too)
        // before anyone learns that the run ended: a client that saw `finish`, or a
        // receiver of `run.completed`, reads a history that already holds the answer.
        let msg = stream::assistant_message(&h.message_id, &h.all_chunks(), status);
        if let Err(e) = self
            .db
            .append_agent_messages(
                &h.conversation_id,
                &[(
                    h.message_id.clone(),
                    "assistant".into(),
                    msg.to_string(),
                    Some(h.id.clone()),
                )],
            )
            .await
        {
            tracing::error!(run = %h.id, error = %e, "storing the assistant message");
        }
        // The workspace's callbacks (run.completed, run.failed).
        if status != "cancelled" {
            let ev = crate::cases::webhooks::event(
                &format!("run.{status}"),
                json!({"runId": h.id, "conversationId": h.conversation_id,
                    "agentId": target.env.id, "status": status}),
            );
            if let Err(e) = self.db.enqueue_webhook_events(&target.tenant, &[ev]).await {
                tracing::warn!(run = %h.id, error = %e, "storing the run's callback event");
            }
        }
        h.publish_end();
        h.stored.send_replace(true);
        tracing::info!(run = %h.id, status, "run ended");
    }

    async fn flush(
        &self,
        h: &RunHandle,
        end: Option<(&str, Option<&str>)>,
    ) -> botbox_store::DbResult<()> {
        let (flushed, chunks, _) = h.unflushed();
        self.db
            .append_agent_chunks(&h.id, flushed as i64 + 1, &chunks, end)
            .await?;
        h.mark_flushed(flushed + chunks.len());
        Ok(())
    }

    /// The run's steps: the conversation's lock taken (unless the run is cancelled while
    /// it waits), then one step per cycle, on the first message and then on each steer.
    async fn cycles(
        &self,
        h: &Arc<RunHandle>,
        target: &RunTarget,
        first: Message,
    ) -> Result<(), Ended> {
        let key = session_key(&target.env.id, &h.conversation_id);
        let lock = self.live.lock_for(&key);
        let _turn = tokio::select! {
            t = lock.lock() => t,
            _ = h.wait_cancel() => return Err(Ended::Cancelled),
        };
        let rev = self.start_running(h, target).await?;
        let effects: Arc<dyn Effects> = Arc::new(RunEffects {
            inner: self.live.effects(),
            run: h.clone(),
            js_call: Mutex::new(None),
        });
        let mut message = first;
        let mut next_text = 0;
        let mut delivered = 0;
        loop {
            h.emit([stream::start_step()]);
            let (session, version) = self.conversation_session(&key, h, target).await?;
            let (report, new_session) = self
                .step_unless_cancelled(h, target, &rev, session, &message, &effects)
                .await?;
            if h.cancelled() {
                return Err(Ended::Cancelled);
            }
            self.live
                .check_responses(report.responses.len())
                .map_err(|e| Ended::Failed(e.to_string()))?;
            self.commit_cycle(&key, h, target, &report, &new_session, version)
                .await?;
            self.emit_cycle(h, &report, &mut next_text).await?;
            // The step boundary: a steer that arrived during the step runs now.
            match self.take_steer(h, &mut delivered).await? {
                Some(m) => message = m,
                None => return Ok(()),
            }
        }
    }

    /// Marks the run started (stored and streamed) and finds the revision it runs on.
    async fn start_running(
        &self,
        h: &RunHandle,
        target: &RunTarget,
    ) -> Result<Arc<Revision>, Ended> {
        self.db
            .start_agent_run(&h.id, now_ms() + RUN_LEASE_MS)
            .await
            .map_err(internal)?;
        // The run left the queue (it waited for the conversation's earlier run, if any).
        h.emit([stream::run_status("in_progress")]);
        let rev = self
            .live
            .environment_revision(&target.env)
            .await
            .map_err(|e| Ended::Failed(e.to_string()))?;
        tracing::Span::current().record("revision", &*rev.id);
        Ok(rev)
    }

    /// The conversation's stored session with its version, or a new one.
    async fn conversation_session(
        &self,
        key: &str,
        h: &RunHandle,
        target: &RunTarget,
    ) -> Result<(SessionJson, Option<i64>), Ended> {
        let stored = self.db.session(key).await.map_err(internal)?;
        Ok(match stored {
            Some(r) => (SessionJson::new(r.body), Some(r.version)),
            None => {
                let mut s = Session::new(key);
                s.channel_id = Some("agent".into());
                s.environment_id = Some(target.env.id.clone());
                s.deployment_id = Some(target.env.project_id.clone());
                s.user_id = Some(h.conversation_id.clone());
                let json = serde_json::to_string(&s).map_err(internal)?;
                (SessionJson::new(json), None)
            }
        })
    }

    /// One step in the sandbox, unless the run is cancelled first; a failed step is
    /// recorded among the bot's errors.
    async fn step_unless_cancelled(
        &self,
        h: &RunHandle,
        target: &RunTarget,
        rev: &Arc<Revision>,
        session: SessionJson,
        message: &Message,
        effects: &Arc<dyn Effects>,
    ) -> Result<(StepReport, SessionJson), Ended> {
        let step = self.live.run_step_json_with(
            &target.tenant,
            rev.clone(),
            session,
            message.clone(),
            effects.clone(),
        );
        // Cancel wins over a step in flight: its api call is aborted by the effects and
        // its outcome is never stored, so the session stays as it was.
        tokio::select! {
            r = step => match r {
                Ok(r) => Ok(r),
                Err(LiveError::Step(e)) => {
                    self.live
                        .record_errors(
                            &target.env.project_id,
                            &target.env.id,
                            ("agent", Some(&h.conversation_id)),
                            Err(&e),
                        )
                        .await;
                    Err(Ended::Failed(e))
                }
                Err(LiveError::NotDeployed(e) | LiveError::Busy(e)) => Err(Ended::Failed(e)),
                Err(LiveError::Internal(e)) => Err(internal(e)),
            },
            _ = h.wait_cancel() => Err(Ended::Cancelled),
        }
    }

    /// Stores the step's session (read at `version`) with its bot errors; the run fails
    /// if the conversation changed meanwhile.
    async fn commit_cycle(
        &self,
        key: &str,
        h: &RunHandle,
        target: &RunTarget,
        report: &StepReport,
        new_session: &SessionJson,
        version: Option<i64>,
    ) -> Result<(), Ended> {
        let w = StepWrite {
            session_id: key.to_owned(),
            environment_id: target.env.id.clone(),
            channel_id: "agent".into(),
            user_id: h.conversation_id.clone(),
            body: new_session.json.clone(),
            read_version: version,
            background: botbox_lanes::in_background(),
            errors: report
                .errors
                .iter()
                .take(crate::live::ERRORS_PER_STEP)
                .map(|e| {
                    crate::live::new_bot_error(
                        &target.env.project_id,
                        &target.env.id,
                        ("agent", Some(&h.conversation_id)),
                        "bot",
                        e,
                    )
                })
                .collect(),
            ..StepWrite::default()
        };
        match self.db.commit_step(w).await.map_err(internal)? {
            Some(_) => Ok(()),
            None => Err(Ended::Failed(
                "the conversation changed during the run; send the message again".into(),
            )),
        }
    }

    /// Streams the step's responses and bot errors and ends the step in the log, then
    /// stores the log.
    async fn emit_cycle(
        &self,
        h: &RunHandle,
        report: &StepReport,
        next_text: &mut usize,
    ) -> Result<(), Ended> {
        let mut chunks = stream::responses(&report.responses, next_text);
        chunks.extend(
            report
                .errors
                .iter()
                .take(crate::live::ERRORS_PER_STEP)
                .map(|e| stream::bot_error(e)),
        );
        chunks.push(stream::finish_step());
        h.emit(chunks);
        self.flush(h, None).await.map_err(internal)
    }

    /// The next steer's message, marked delivered, while the run may take one more
    /// (`delivered`: those taken so far); `None` ends the run.
    async fn take_steer(
        &self,
        h: &RunHandle,
        delivered: &mut usize,
    ) -> Result<Option<Message>, Ended> {
        let steer = h.steers.lock().unwrap().pop_front();
        match steer {
            Some((id, m)) if *delivered < MAX_STEERS_PER_RUN => {
                *delivered += 1;
                self.db
                    .set_agent_steer(&id, "delivered")
                    .await
                    .map_err(internal)?;
                h.emit([stream::steer_delivered(&id)]);
                Ok(Some(m))
            }
            _ => Ok(None),
        }
    }

    /// Ends the runs whose process died: on SQLite (one process per database) every run in
    /// flight at start-up, elsewhere those whose lease has passed. Their stored log gets
    /// the failed tail, so a reader's stream ends.
    pub async fn sweep(&self, at_startup: bool) -> botbox_store::DbResult<usize> {
        let all = at_startup && self.db.backend == botbox_store::Backend::Sqlite;
        let ids = self.db.orphaned_agent_runs(all).await?;
        let mut n = 0;
        for id in ids {
            if self.running(&id).is_some() {
                continue;
            }
            let Some(run) = self.db.agent_run(&id).await? else {
                continue;
            };
            let last = self
                .db
                .agent_chunks(&id, 0)
                .await?
                .last()
                .map_or(0, |(s, _)| *s);
            let tail: Vec<String> = [
                stream::error(ORPHAN_ERROR),
                stream::finish(&id, &run.conversation_id, "failed"),
            ]
            .iter()
            .map(Json::to_string)
            .chain([stream::DONE.to_owned()])
            .collect();
            self.db
                .append_agent_chunks(&id, last + 1, &tail, Some(("failed", Some(ORPHAN_ERROR))))
                .await?;
            tracing::warn!(run = %id, "run in flight when its process stopped: ended as failed");
            n += 1;
        }
        Ok(n)
    }

    /// Sweeps every minute (the start-up sweep is [`Agents::sweep`] before serving).
    pub fn spawn_sweeper(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                if let Err(e) = me.sweep(false).await {
                    tracing::warn!(error = %e, "sweeping orphaned runs");
                }
            }
        });
    }
}

enum Ended {
    Cancelled,
    Failed(String),
}

fn internal(e: impl std::fmt::Display) -> Ended {
    tracing::error!(error = %e, "run failed on an internal error");
    Ended::Failed("The run failed on an internal error.".into())
}
