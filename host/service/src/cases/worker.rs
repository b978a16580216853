//! `Tasks`: creating tasks, the worker that runs them, review decisions, and the task's
//! JSON. No HTTP here: `api/cases.rs` maps [`CaseError`] to problem+json (`/v1`) or to the
//! project API's errors.
//!
//! **Leases.** A worker takes a task with a conditional update (`pending`, or
//! `in_progress` whose lease passed) and renews its lease (30 s) while the bot runs; its
//! outcome is written only while the task is still its own. A process that dies mid-task
//! leaves a lease that passes: another worker (a replica, or this server after a restart;
//! on SQLite a restart releases every lease at once) takes the task over and runs it again
//! from the session stored before that run. After `max_attempts` such take-overs the task
//! fails (`worker-lost`). The bot's outcome and the task's transition are one update (the
//! session is stored in the task row), so a step is never half-recorded.

use super::webhooks::{Callbacks, ServerKey, event};
use super::{CaseSpec, Decision, FieldProblem, status};
use crate::agent::Problem;
use crate::live::{Live, LiveError};
use base64::Engine;
use botbox_sandbox::{Revision, SessionJson};
use botbox_store::{
    CaseRow, Db, DbError, EnvironmentRow, NewArtifact, TaskReviewRow, TaskRow, TaskWrite, now_ms,
};
use runtime_core::session::{Message, Session, StepReport};
use serde_json::{Map, Value as Json, json};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

/// The worker's settings (defaults in brackets).
#[derive(Debug, Clone)]
pub struct TaskConfig {
    /// A running task's lease [30 s]; renewed every third of it. A dead worker's task is
    /// taken over once it passes.
    pub lease: Duration,
    /// Tasks this process runs at once [2 per core]. Each holds a sandbox step (which the
    /// sandbox's per-tenant caps and fair CPU slots govern like any other step).
    pub slots: usize,
    /// How often pending tasks are looked for [250 ms]; a new task wakes the worker at once.
    pub poll: Duration,
    /// Take-overs of one run before the task fails (3).
    pub max_attempts: i64,
    /// Lifetime of an artifact URL [15 min].
    pub artifact_url_ttl: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        TaskConfig {
            lease: Duration::from_secs(30),
            slots: cores * 2,
            poll: Duration::from_millis(250),
            max_attempts: 3,
            artifact_url_ttl: Duration::from_secs(15 * 60),
        }
    }
}

/// Why a task operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("invalid")]
    Invalid(Vec<FieldProblem>),
    #[error("{0}")]
    NotFound(String),
    /// The task state machine does not allow the change from the task's current status.
    #[error("{detail}")]
    InvalidTransition { current: String, detail: String },
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<DbError> for CaseError {
    fn from(e: DbError) -> Self {
        CaseError::Internal(e.into())
    }
}

/// Tasks: creation, the worker, reviews.
pub struct Tasks {
    pub db: Db,
    live: Arc<Live>,
    pub callbacks: Arc<Callbacks>,
    pub key: ServerKey,
    pub cfg: TaskConfig,
    worker: String,
    wake: tokio::sync::Notify,
    slots: Arc<tokio::sync::Semaphore>,
}

fn parse_map(s: Option<&str>) -> Map<String, Json> {
    s.and_then(|s| serde_json::from_str::<Json>(s).ok())
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
}

fn error_json(code: &str, message: &str) -> String {
    json!({"code": code, "message": message}).to_string()
}

/// Refuses a decision on a task that is not in review.
fn ensure_in_review(task: &TaskRow) -> Result<(), CaseError> {
    if task.status != status::REVIEW {
        return Err(CaseError::InvalidTransition {
            current: task.status.clone(),
            detail: format!(
                "the task is {}, not in review: a decision applies only to a task in review",
                task.status
            ),
        });
    }
    Ok(())
}

/// The reviewer's comment, trimmed (none if blank); "changes" needs one.
fn review_comment(decision: Decision, comment: Option<&str>) -> Result<Option<&str>, CaseError> {
    let comment = comment.map(str::trim).filter(|c| !c.is_empty());
    if decision == Decision::Changes && comment.is_none() {
        return Err(CaseError::Invalid(vec![(
            "/comment".into(),
            "\"changes\" needs a comment: it is what the bot is told to change".into(),
        )]));
    }
    Ok(comment)
}

/// The task's `review` with this decision: who decided what, when, and why.
fn review_json(
    task: &TaskRow,
    decision: Decision,
    comment: Option<&str>,
    decided_by: &str,
    now: i64,
) -> Json {
    let mut review = task
        .review
        .as_deref()
        .and_then(|r| serde_json::from_str::<Json>(r).ok())
        .unwrap_or_else(|| json!({}));
    review["decidedAt"] = json!(crate::agent::iso_ms(now));
    review["decidedBy"] = json!(decided_by);
    review["decision"] = json!(decision.name());
    review["comment"] = json!(comment);
    review
}

/// What a decision writes to the task, and the callback events it raises: approve stores
/// the outputs, reject the error, changes the message that sends the bot the comment with
/// the current outputs.
fn decision_write(
    task: &TaskRow,
    decision: Decision,
    comment: Option<&str>,
    (current, outputs): (Map<String, Json>, Map<String, Json>),
    review: &Json,
) -> (TaskWrite, Vec<botbox_store::Event>) {
    let data = |st: &str| json!({"taskId": task.id, "caseId": task.case_id, "status": st});
    match decision {
        Decision::Approve => (
            TaskWrite {
                outputs: Some(Json::Object(outputs).to_string()),
                review: Some(review.to_string()),
                ..Default::default()
            },
            vec![event("task.completed", data(status::DONE))],
        ),
        Decision::Reject => (
            TaskWrite {
                outputs: task.outputs.clone(),
                review: Some(review.to_string()),
                error: Some(error_json(
                    "rejected",
                    comment.unwrap_or("The reviewer rejected the result."),
                )),
                ..Default::default()
            },
            vec![event("task.failed", data(status::FAILED))],
        ),
        Decision::Changes => (
            TaskWrite {
                outputs: task.outputs.clone(),
                review: Some(review.to_string()),
                next_message: Some(
                    super::changes_message(
                        &task.id,
                        &task.case_id,
                        comment.unwrap_or_default(),
                        &Json::Object(current),
                    )
                    .to_string(),
                ),
                ..Default::default()
            },
            vec![],
        ),
    }
}

/// A stage of a task's run: its value, the end the run already reached (`Ok(Err(end))`),
/// or an internal error.
type Stage<T> = anyhow::Result<Result<T, RunEnd>>;

/// The message the bot gets and the session it runs on: the task's own, or a new one on
/// its first run.
fn step_input(t: &TaskRow, env: &EnvironmentRow) -> anyhow::Result<(Message, String)> {
    let message: Message = serde_json::from_str(
        t.next_message
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("a running task without its message"))?,
    )?;
    let session = match &t.session {
        Some(s) => s.clone(),
        None => {
            let mut s = Session::new(&format!("task:{}", t.id));
            s.channel_id = Some("task".into());
            s.environment_id = Some(env.id.clone());
            s.deployment_id = Some(env.project_id.clone());
            s.user_id = Some(t.id.clone());
            serde_json::to_string(&s)?
        }
    };
    Ok((message, session))
}

/// The task's failure when the bot's flow still waits after its step (`s`: the session).
fn flow_not_ended(s: &Json) -> Option<RunEnd> {
    let flow = s["current"].as_str()?;
    let state = s["states"][flow].as_str().unwrap_or("?");
    Some(RunEnd::Failed {
        code: "flow-not-ended",
        message: format!(
            "the bot's flow \"{flow}\" did not end within its step: it waits in state \"{state}\"; a Case's bot must reach an end state"
        ),
    })
}

/// The artifacts read from the bot as rows to store, each with a new id.
fn new_artifacts(artifacts: Vec<(String, String, Vec<u8>)>) -> Vec<NewArtifact> {
    artifacts
        .into_iter()
        .map(|(name, media_type, bytes)| NewArtifact {
            id: crate::agent::new_prefixed(super::ARTIFACT_PREFIX),
            name,
            media_type,
            size: bytes.len() as i64,
            content_b64: base64::engine::general_purpose::STANDARD.encode(bytes),
        })
        .collect()
}

/// How a run ended.
enum RunEnd {
    /// The flow ended: the outputs, artifacts and the new session.
    Finished {
        outputs: Map<String, Json>,
        artifacts: Vec<NewArtifact>,
        session: String,
    },
    Failed {
        code: &'static str,
        message: String,
    },
    /// The lease was lost (another worker has the task): write nothing.
    Lost,
    /// The tenant has too many steps in flight: try again shortly.
    Busy,
}

impl Tasks {
    pub fn new(
        db: Db,
        live: Arc<Live>,
        callbacks: Arc<Callbacks>,
        key: ServerKey,
        cfg: TaskConfig,
    ) -> Arc<Tasks> {
        Arc::new(Tasks {
            db,
            live,
            callbacks,
            key,
            slots: Arc::new(tokio::sync::Semaphore::new(cfg.slots.max(1))),
            cfg,
            worker: format!("worker_{}", &botbox_store::new_id()[..12]),
            wake: tokio::sync::Notify::new(),
        })
    }

    /// Creates a pending task on `case` (inputs checked); with `receipt` (an inbound hook
    /// and a `webhook-id`), `Ok(Err(task id))` when that id was already received.
    pub async fn create(
        &self,
        case: &CaseRow,
        inputs: &Json,
        created_by: &str,
        receipt: Option<(&str, &str)>,
    ) -> Result<Result<TaskRow, String>, CaseError> {
        let spec: CaseSpec = serde_json::from_str(&case.spec)
            .map_err(|e| CaseError::Internal(anyhow::anyhow!("stored case spec: {e}")))?;
        let inputs = Json::Object(spec.check_inputs(inputs).map_err(CaseError::Invalid)?);
        let text = inputs.to_string();
        if text.len() > super::MAX_INPUTS {
            return Err(CaseError::Invalid(vec![(
                "/inputs".into(),
                format!(
                    "{} bytes of inputs; at most {}",
                    text.len(),
                    super::MAX_INPUTS
                ),
            )]));
        }
        let id = crate::agent::new_prefixed(super::TASK_PREFIX);
        let now = now_ms();
        let t = TaskRow {
            id: id.clone(),
            case_id: case.id.clone(),
            workspace_id: case.workspace_id.clone(),
            status: status::PENDING.into(),
            next_message: Some(super::task_message(&id, &case.id, &inputs).to_string()),
            inputs: text,
            outputs: None,
            error: None,
            review: None,
            session: None,
            attempts: 0,
            lease_until: 0,
            worker: None,
            created_by: created_by.to_owned(),
            created_at: now,
            updated_at: now,
        };
        match self.db.insert_task(&t, receipt).await? {
            Ok(()) => {
                self.wake.notify_one();
                Ok(Ok(t))
            }
            Err(existing) => Ok(Err(existing)),
        }
    }

    /// A reviewer's decision on a task in `review`: approve (with optional
    /// edited outputs) → done, reject → failed, changes (a comment, sent to the bot) → the
    /// bot runs again. Anything else → `InvalidTransition`.
    pub async fn review(
        &self,
        task: &TaskRow,
        decision: Decision,
        comment: Option<&str>,
        edits: Option<&Json>,
        decided_by: &str,
    ) -> Result<(), CaseError> {
        ensure_in_review(task)?;
        let (current, outputs) = self.reviewed_outputs(task, decision, edits).await?;
        let comment = review_comment(decision, comment)?;
        let now = now_ms();
        let review = review_json(task, decision, comment, decided_by, now);
        let record = TaskReviewRow {
            id: botbox_store::new_id(),
            task_id: task.id.clone(),
            decision: decision.name().into(),
            comment: comment.map(str::to_owned),
            outputs: (decision == Decision::Approve && edits.is_some())
                .then(|| Json::Object(outputs.clone()).to_string()),
            decided_by: decided_by.to_owned(),
            decided_at: now,
        };
        let (w, events) = decision_write(task, decision, comment, (current, outputs), &review);
        // Lease 0 on "changes": any worker takes the task at once.
        let moved = self
            .db
            .transition_task(
                &task.id,
                status::REVIEW,
                None,
                decision.target(),
                &w,
                0,
                Some(&record),
                &[],
                &events,
            )
            .await?;
        if !moved {
            return Err(self.moved_on(task).await);
        }
        if decision == Decision::Changes {
            self.wake.notify_one();
        }
        if !events.is_empty() {
            self.callbacks.wake();
        }
        Ok(())
    }

    /// The task's current outputs and those the decision leaves: a reviewer's edits merged
    /// (approve only, and only while the task's Case exists), else the current ones.
    async fn reviewed_outputs(
        &self,
        task: &TaskRow,
        decision: Decision,
        edits: Option<&Json>,
    ) -> Result<(Map<String, Json>, Map<String, Json>), CaseError> {
        let case = self.db.case_by_id(&task.case_id).await?;
        let spec: Option<CaseSpec> = case
            .as_ref()
            .and_then(|c| serde_json::from_str(&c.spec).ok());
        let current = parse_map(task.outputs.as_deref());
        let outputs = match (decision, edits) {
            (Decision::Approve, Some(e)) => {
                let spec = spec.as_ref().ok_or_else(|| {
                    CaseError::Conflict(
                        "the task's Case was deleted: outputs cannot be edited".into(),
                    )
                })?;
                spec.merge_outputs(&current, e)
                    .map_err(CaseError::Invalid)?
            }
            (_, Some(_)) => {
                return Err(CaseError::Invalid(vec![(
                    "/outputs".into(),
                    "edited outputs come only with decision \"approve\"".into(),
                )]));
            }
            _ => current.clone(),
        };
        Ok((current, outputs))
    }

    /// Why a decision was not stored: the task left `review` meanwhile (its status now).
    async fn moved_on(&self, task: &TaskRow) -> CaseError {
        let now_status = match self.db.task_in(&task.workspace_id, &task.id).await {
            Ok(t) => t.map_or_else(|| "gone".to_owned(), |t| t.status),
            Err(e) => return e.into(),
        };
        CaseError::InvalidTransition {
            current: now_status.clone(),
            detail: format!("the task moved on to {now_status} meanwhile"),
        }
    }

    /// The task as the API shows it, artifacts with fresh signed URLs.
    pub async fn view(&self, t: &TaskRow, base: &str) -> Result<Json, CaseError> {
        let mut v = json!({
            "id": t.id,
            "caseId": t.case_id,
            "status": t.status,
            "inputs": serde_json::from_str::<Json>(&t.inputs).unwrap_or(Json::Null),
            "createdAt": crate::agent::iso_ms(t.created_at),
            "updatedAt": crate::agent::iso_ms(t.updated_at),
        });
        if let Some(o) = &t.outputs {
            v["outputs"] = serde_json::from_str(o).unwrap_or(Json::Null);
        }
        if let Some(e) = &t.error {
            v["error"] = serde_json::from_str(e).unwrap_or(Json::Null);
        }
        if let Some(r) = &t.review {
            v["review"] = serde_json::from_str(r).unwrap_or(Json::Null);
            let history: Vec<Json> = self
                .db
                .task_reviews(&t.id)
                .await?
                .into_iter()
                .map(|r| {
                    json!({"decision": r.decision, "comment": r.comment, "decidedBy": r.decided_by,
                        "decidedAt": crate::agent::iso_ms(r.decided_at),
                        "outputs": r.outputs.and_then(|o| serde_json::from_str::<Json>(&o).ok())})
                })
                .collect();
            v["reviews"] = json!(history);
        }
        if t.status == status::REVIEW || t.status == status::DONE {
            v["artifacts"] = json!(self.artifacts(&t.id, base).await?);
        }
        Ok(v)
    }

    /// A task's artifacts, each with a URL signed for `artifact_url_ttl`.
    pub async fn artifacts(&self, task: &str, base: &str) -> Result<Vec<Json>, CaseError> {
        let expires = now_ms() / 1000 + self.cfg.artifact_url_ttl.as_secs() as i64;
        Ok(self
            .db
            .task_artifacts(task)
            .await?
            .into_iter()
            .map(|a| {
                let sig = self.key.artifact_signature(&a.id, expires);
                json!({"id": a.id, "name": a.name, "mediaType": a.media_type, "size": a.size,
                    "url": format!("{}/v1/artifacts/{}?expires={expires}&signature={sig}",
                        base.trim_end_matches('/'), a.id)})
            })
            .collect())
    }

    // ---- the worker

    /// Starts the worker: at start-up on SQLite every running task's lease is released (its
    /// worker was this process's predecessor); then pending tasks are taken as slots free.
    pub async fn spawn(self: &Arc<Self>) -> anyhow::Result<()> {
        if self.db.backend == botbox_store::Backend::Sqlite {
            let n = self.db.release_task_leases().await?;
            if n > 0 {
                tracing::warn!(
                    tasks = n,
                    "tasks running when the last process stopped are taken over"
                );
            }
        }
        let me = self.clone();
        tokio::spawn(async move {
            // Takes no new task once a drain starts; those running finish (or their lease
            // runs out and another worker takes them over).
            while !me.live.drain.draining() {
                let free = me.slots.available_permits();
                if free > 0 {
                    match me
                        .db
                        .claim_tasks(&me.worker, me.cfg.lease.as_millis() as i64, free as i64)
                        .await
                    {
                        Ok(tasks) => {
                            for t in tasks {
                                let permit = me.slots.clone().acquire_owned().await;
                                let me2 = me.clone();
                                let busy = me.live.drain.busy(crate::drain::Work::Tasks);
                                let span = tracing::info_span!("task", task = %t.id, case = %t.case_id,
                                    tenant = %t.workspace_id, attempt = t.attempts);
                                tokio::spawn(
                                    async move {
                                        let _busy = busy;
                                        me2.run(t).await;
                                        drop(permit);
                                        me2.wake.notify_one();
                                    }
                                    .instrument(span),
                                );
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "taking tasks"),
                    }
                }
                tokio::select! {
                    _ = tokio::time::timeout(me.cfg.poll, me.wake.notified()) => {}
                    _ = me.live.drain.started() => {}
                }
            }
        });
        Ok(())
    }

    /// Runs one taken task and records its outcome.
    async fn run(&self, t: TaskRow) {
        let end = if t.attempts > self.cfg.max_attempts {
            RunEnd::Failed {
                code: "worker-lost",
                message: format!(
                    "the server running this task stopped {} times before the bot finished",
                    t.attempts - 1
                ),
            }
        } else {
            match self.run_bot(&t).await {
                Ok(e) => e,
                Err(e) => {
                    tracing::error!(error = %e, "task failed on an internal error");
                    RunEnd::Failed {
                        code: "internal",
                        message: "The task failed on an internal error.".into(),
                    }
                }
            }
        };
        if let Err(e) = self.record(&t, end).await {
            tracing::error!(error = %e, "storing a task's outcome");
        }
    }

    /// Runs the task's bot for one step (its lease renewed meanwhile) and reads the
    /// outcome: outputs and artifacts, or why the task fails.
    async fn run_bot(&self, t: &TaskRow) -> anyhow::Result<RunEnd> {
        let (case, spec, env, rev) = match self.bot_of(t).await? {
            Ok(found) => found,
            Err(end) => return Ok(end),
        };
        tracing::Span::current().record("revision", &*rev.id);
        let (message, session) = step_input(t, &env)?;
        let limit = Duration::from_secs(spec.timeout_seconds);
        let step = tokio::time::timeout(
            limit,
            self.live.run_step_json_with(
                &case.workspace_id,
                rev,
                SessionJson::new(session),
                message,
                self.live.effects(),
            ),
        );
        let Some(outcome) = self.renewing_lease(t, step).await else {
            return Ok(RunEnd::Lost);
        };
        let (report, new_session) = match self.step_result(outcome, &spec, &env).await? {
            Ok(done) => done,
            Err(end) => return Ok(end),
        };
        self.live
            .record_errors(&env.project_id, &env.id, ("task", None), Ok(&report.errors))
            .await;
        self.outcome_of(t, &spec, &report, &new_session).await
    }

    /// The task's Case, its spec, the environment the Case runs on and the revision
    /// deployed there.
    async fn bot_of(
        &self,
        t: &TaskRow,
    ) -> Stage<(CaseRow, CaseSpec, EnvironmentRow, Arc<Revision>)> {
        let Some(case) = self.db.case_by_id(&t.case_id).await? else {
            return Ok(Err(RunEnd::Failed {
                code: "case-deleted",
                message: "the task's Case was deleted".into(),
            }));
        };
        let spec: CaseSpec = serde_json::from_str(&case.spec)?;
        let Some(env) = self
            .db
            .environment(&case.project_id, &case.environment_id)
            .await?
        else {
            return Ok(Err(RunEnd::Failed {
                code: "agent-gone",
                message: "the Case's environment was deleted".into(),
            }));
        };
        let rev = match self.live.environment_revision(&env).await {
            Ok(r) => r,
            Err(e) => {
                return Ok(Err(RunEnd::Failed {
                    code: "not-deployed",
                    message: e.to_string(),
                }));
            }
        };
        Ok(Ok((case, spec, env, rev)))
    }

    /// Runs `work` while renewing the task's lease every third of it; `None` when the
    /// lease was lost to another worker.
    async fn renewing_lease<F: std::future::Future>(
        &self,
        t: &TaskRow,
        work: F,
    ) -> Option<F::Output> {
        tokio::pin!(work);
        // The first tick is at once: the lease taken at the claim is renewed as the step
        // starts (the look-ups before it may have used part of it), then every third of it.
        let mut renew = tokio::time::interval(self.cfg.lease / 3);
        loop {
            tokio::select! {
                r = &mut work => return Some(r),
                _ = renew.tick() => {
                    let until = now_ms() + self.cfg.lease.as_millis() as i64;
                    match self.db.renew_task_lease(&t.id, &self.worker, until).await {
                        Ok(true) => {}
                        Ok(false) => return None,
                        // A database hiccup is not the task's failure: keep running; if
                        // the lease passes meanwhile, the outcome's conditional write
                        // finds it taken and another worker runs the task.
                        Err(e) => tracing::warn!(error = %e, "renewing a task's lease"),
                    }
                }
            }
        }
    }

    /// The step's report and new session, or how its failure ends the task (a step error
    /// is recorded among the bot's errors).
    async fn step_result(
        &self,
        outcome: Result<Result<(StepReport, SessionJson), LiveError>, tokio::time::error::Elapsed>,
        spec: &CaseSpec,
        env: &EnvironmentRow,
    ) -> Stage<(StepReport, SessionJson)> {
        match outcome {
            Err(_) => Ok(Err(RunEnd::Failed {
                code: "timeout",
                message: format!(
                    "the bot did not finish within the Case's {} s",
                    spec.timeout_seconds
                ),
            })),
            Ok(Err(LiveError::Busy(_))) => Ok(Err(RunEnd::Busy)),
            Ok(Err(LiveError::Step(m))) => {
                self.live
                    .record_errors(&env.project_id, &env.id, ("task", None), Err(&m))
                    .await;
                Ok(Err(RunEnd::Failed {
                    code: "step-failed",
                    message: m,
                }))
            }
            Ok(Err(LiveError::NotDeployed(m))) => Ok(Err(RunEnd::Failed {
                code: "step-failed",
                message: m,
            })),
            Ok(Err(LiveError::Internal(e))) => Err(e),
            Ok(Ok(r)) => Ok(Ok(r)),
        }
    }

    /// What the bot's step made of the task: its outputs and artifacts (read as the Case
    /// says, within the storage quota) and the session, or why the task fails.
    async fn outcome_of(
        &self,
        t: &TaskRow,
        spec: &CaseSpec,
        report: &StepReport,
        new_session: &SessionJson,
    ) -> anyhow::Result<RunEnd> {
        let s: Json = serde_json::from_str(&new_session.json)?;
        if let Some(end) = flow_not_ended(&s) {
            return Ok(end);
        }
        let responses = serde_json::to_value(&report.responses)?;
        let inputs: Json = serde_json::from_str(&t.inputs)?;
        let outputs = match spec.read_outputs(&s["data"], &responses, &inputs) {
            Ok(o) => o,
            Err(m) => {
                return Ok(RunEnd::Failed {
                    code: "outputs-invalid",
                    message: m,
                });
            }
        };
        let artifacts = match spec.read_artifacts(&s["data"], &responses, &inputs) {
            Ok(a) => a,
            Err(m) => {
                return Ok(RunEnd::Failed {
                    code: "artifacts-invalid",
                    message: m,
                });
            }
        };
        if !artifacts.is_empty()
            && let Some(end) = self.quota_refusal(t).await?
        {
            return Ok(end);
        }
        // A review pass keeps the session for a later "changes".
        let session = new_session.json.to_string();
        Ok(RunEnd::Finished {
            outputs,
            artifacts: new_artifacts(artifacts),
            session,
        })
    }

    /// The task's failure when its workspace is over the storage quota (artifacts are
    /// refused then).
    async fn quota_refusal(&self, t: &TaskRow) -> anyhow::Result<Option<RunEnd>> {
        if let Some(crate::quota::OverQuota { used, quota }) =
            crate::quota::over(&self.live, &t.workspace_id).await?
        {
            tracing::warn!(
                tenant = %t.workspace_id,
                task = %t.id,
                used,
                quota,
                "storage quota reached: a task's artifacts were refused"
            );
            metrics::counter!("botbox_refusals_total", "reason" => "storage_quota").increment(1);
            return Ok(Some(RunEnd::Failed {
                code: "storage-quota",
                message: format!(
                    "storage quota reached: this workspace stores {used} bytes of its {quota}, \
                     so the task's artifacts were not stored (GET /storage says what)"
                ),
            }));
        }
        Ok(None)
    }

    async fn record(&self, t: &TaskRow, end: RunEnd) -> anyhow::Result<()> {
        let case = self.db.case_by_id(&t.case_id).await?;
        let review = case
            .and_then(|c| serde_json::from_str::<CaseSpec>(&c.spec).ok())
            .is_some_and(|s| s.review);
        let data = |st: &str| json!({"taskId": t.id, "caseId": t.case_id, "status": st});
        let (to, w, artifacts, events) = match end {
            RunEnd::Lost => {
                tracing::warn!(
                    "lost the task's lease to another worker; its outcome is not stored"
                );
                return Ok(());
            }
            RunEnd::Busy => {
                // Let the lease run out shortly: a worker takes the task again. A busy
                // server is not a lost worker, so this take does not count towards
                // `max_attempts`.
                let until = now_ms() + 1000;
                self.db.give_back_task(&t.id, &self.worker, until).await?;
                return Ok(());
            }
            RunEnd::Failed { code, message } => {
                tracing::info!(code, %message, "task failed");
                (
                    status::FAILED,
                    TaskWrite {
                        outputs: t.outputs.clone(),
                        review: t.review.clone(),
                        error: Some(error_json(code, &message)),
                        ..Default::default()
                    },
                    vec![],
                    vec![event("task.failed", data(status::FAILED))],
                )
            }
            RunEnd::Finished {
                outputs,
                artifacts,
                session,
            } => {
                let outputs = Some(Json::Object(outputs).to_string());
                if review {
                    // The decisions of earlier passes are in the task's `reviews`.
                    let r = json!({"requestedAt": crate::agent::iso_ms(now_ms())});
                    (
                        status::REVIEW,
                        TaskWrite {
                            outputs,
                            review: Some(r.to_string()),
                            session: Some(session),
                            ..Default::default()
                        },
                        artifacts,
                        vec![event("task.review_requested", data(status::REVIEW))],
                    )
                } else {
                    (
                        status::DONE,
                        TaskWrite {
                            outputs,
                            review: t.review.clone(),
                            session: Some(session),
                            ..Default::default()
                        },
                        artifacts,
                        vec![event("task.completed", data(status::DONE))],
                    )
                }
            }
        };
        let stored = self
            .db
            .transition_task(
                &t.id,
                status::IN_PROGRESS,
                Some(&self.worker),
                to,
                &w,
                0,
                None,
                &artifacts,
                &events,
            )
            .await?;
        if stored {
            tracing::info!(status = to, "task moved");
            self.callbacks.wake();
        } else {
            tracing::warn!("the task moved on before its outcome was stored");
        }
        Ok(())
    }
}

/// Field problems as problem+json's `errors`: `[{pointer, detail}]`.
fn pointers(p: &[FieldProblem]) -> Json {
    Json::Array(
        p.iter()
            .map(|(ptr, d)| json!({"pointer": ptr, "detail": d}))
            .collect(),
    )
}

/// Field problems in one line: `pointer: detail; …`.
pub fn summary(p: &[FieldProblem]) -> String {
    p.iter()
        .map(|(ptr, d)| {
            if ptr.is_empty() {
                d.clone()
            } else {
                format!("{ptr}: {d}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A Case or task error as the `/v1` problem+json body it answers.
impl From<CaseError> for Problem {
    fn from(e: CaseError) -> Self {
        match e {
            CaseError::Invalid(p) => Problem::invalid(summary(&p)).with("errors", pointers(&p)),
            CaseError::NotFound(m) => Problem::not_found(m),
            CaseError::InvalidTransition { current, detail } => {
                Problem::conflict("invalid-transition", "Invalid transition", detail)
                    .with("currentStatus", json!(current))
            }
            CaseError::Conflict(m) => Problem::conflict("conflict", "Conflict", m),
            CaseError::Internal(e) => Problem::internal(e),
        }
    }
}
