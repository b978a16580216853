//! The sandbox and the revisions steps run: the sandbox created once (in the background
//! at start, or by the first step), its readiness, and the lane a step runs on; revisions loaded by project and
//! revision through the revision cache (a compiled bot stored in another format is
//! recompiled from its source; CMS pages and the deployment's NLU pin attached); and which
//! revision an environment or a deployment version runs.

use super::*;

/// Runs a sandbox future (a step, a JavaScript check) on `lane`. On the main lane it runs
/// where it is awaited, with no hand-off to another thread (`botbox_sandbox::here`; a step
/// that burns its fuel moves to the burn threads). On the background lane it runs on that
/// lane's step threads (`SCHED_IDLE`, no express slot), so that a tenant over its share
/// takes only the CPU nobody else wants.
pub(super) async fn on_lane<F>(lane: botbox_lanes::Lane, work: F) -> Result<F::Output, LiveError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match lane {
        botbox_lanes::Lane::Main => Ok(botbox_sandbox::here(work).await),
        botbox_lanes::Lane::Background => botbox_sandbox::spawn(lane, work)
            .await
            .map_err(|e| LiveError::Internal(anyhow!("step task: {e}"))),
    }
}

impl Live {
    /// The sandbox, created on first use (compiling the guest once per cache folder) unless
    /// [`Live::warm_sandbox`] created it already.
    pub async fn sandbox(&self) -> anyhow::Result<Arc<Sandbox>> {
        if let Some(s) = self.sandbox.get() {
            // Every step comes here: no lock once the sandbox exists.
            return Ok(s.clone());
        }
        self.sandbox
            .get_or_try_init(|| async {
                // One attempt at a time (the cell's own lock): "starting" while it runs.
                use std::sync::atomic::Ordering::Relaxed;
                self.sandbox_failed.store(false, Relaxed);
                let cfg = self.cfg.sandbox.clone();
                let made = tokio::task::spawn_blocking(move || Sandbox::new(cfg).map(Arc::new))
                    .await
                    .context("starting the sandbox")
                    .and_then(|r| r);
                self.sandbox_failed.store(made.is_err(), Relaxed);
                made
            })
            .await
            .cloned()
    }

    /// Creates the sandbox in the background, so that messages need not wait for it (those
    /// that arrive before it is up do wait). With a cold cache that compiles the guest:
    /// seconds of both cores, more in a debug build. `GET /ready` says when it is done. A
    /// failed attempt is tried again after 1 s, then after twice as long each time, up to a
    /// minute between attempts (a failure after compiling, such as a full disk, costs a
    /// compilation per attempt), so a passing fault does not leave the process unready.
    pub fn warm_sandbox(self: &Arc<Self>) {
        let live = self.clone();
        tokio::spawn(async move {
            let mut pause = Duration::from_secs(1);
            while let Err(e) = live.sandbox().await {
                tracing::error!(error = %format!("{e:#}"), retry_in_s = pause.as_secs(), "the sandbox could not be started");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(60));
            }
        });
    }

    /// The sandbox's instances, once it exists (metrics).
    pub fn sandbox_stats(&self) -> Option<botbox_sandbox::SandboxStats> {
        self.sandbox.get().map(|s| s.stats())
    }

    /// Whether the sandbox is ready (`GET /ready`).
    pub fn sandbox_readiness(&self) -> Readiness {
        if self.sandbox.initialized() {
            return Readiness::Ready;
        }
        if self
            .sandbox_failed
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            Readiness::Failed
        } else {
            Readiness::Starting
        }
    }

    /// A stored revision of a project with the CMS revision it reads (`cms`), ready to run
    /// (cached: revisions are immutable). The cache is keyed by project and revisions, like
    /// the tables: a revision id given with another tenant's project never matches, warm
    /// cache or not. With a CMS revision the sandbox's revision id is `<bot>~<cms>`, so warm
    /// instances of one bot with different content are never mixed.
    pub async fn revision(
        &self,
        project_id: &str,
        revision_id: &str,
        cms: Option<&str>,
    ) -> Result<Arc<Revision>, LiveError> {
        let cms = cms.filter(|c| !c.is_empty());
        let cache_key = match cms {
            Some(c) => format!("{project_id}/{revision_id}~{c}"),
            None => format!("{project_id}/{revision_id}"),
        };
        if let Some((r, _)) = self.revisions.get(&cache_key) {
            return Ok(r);
        }
        let row = self
            .db
            .revision(project_id, revision_id)
            .await?
            .ok_or_else(|| {
                LiveError::NotDeployed(format!("bot revision {revision_id} does not exist"))
            })?;
        let (mut bot, compiled_len) = self.load_compiled(&row).await?;
        if let Some(c) = cms {
            bot.cms = self.cms_pages(project_id, c).await?;
        }
        let owner = self
            .db
            .project(project_id)
            .await?
            .map(|p| p.owner_id)
            .unwrap_or_default();
        let sandbox_id = match cms {
            Some(c) => format!("{revision_id}~{c}"),
            None => revision_id.to_owned(),
        };
        let mut rev = Revision::new(&sandbox_id, &bot).with_nl(botbox_sandbox::NlScope {
            owner: owner.into(),
            project: project_id.into(),
            pin: None,
        });
        if self.cfg.sandbox.limits != Default::default() {
            rev = rev.with_limits(self.cfg.sandbox.limits.clone());
        }
        let rev = Arc::new(rev);
        self.revisions
            .insert(cache_key, (rev.clone(), compiled_len));
        Ok(rev)
    }

    /// A project's CMS revision as bots read it (`cms`): its pages, and its FAQ tables under
    /// `faq` (`cms.faq.<label>.answers`).
    async fn cms_pages(&self, project_id: &str, cms: &str) -> Result<serde_json::Value, LiveError> {
        let row = self
            .db
            .cms_revision(project_id, cms)
            .await?
            .ok_or_else(|| LiveError::NotDeployed(format!("CMS revision {cms} does not exist")))?;
        crate::cms::bot_view(&row.document)
            .map_err(|e| LiveError::NotDeployed(format!("CMS revision {cms}: {e}")))
    }

    /// A stored revision's compiled bot. One stored in another format (by an older or newer
    /// botbox; see [`runtime_core::model::COMPILED_FORMAT`]) is recompiled from the
    /// revision's stored source, off the async workers, and the new form is stored, so an
    /// upgrade never breaks a deployed revision.
    async fn load_compiled(
        &self,
        row: &botbox_store::RevisionRow,
    ) -> Result<(runtime_core::CompiledBot, usize), LiveError> {
        #[derive(serde::Deserialize)]
        struct Format {
            #[serde(default)]
            format: u32,
        }
        if row.compiled.is_empty() {
            return Err(LiveError::NotDeployed(format!(
                "bot revision {} is the project's initial empty revision; push a bot first",
                row.id
            )));
        }
        let format = serde_json::from_str::<Format>(&row.compiled).map(|f| f.format);
        if let Ok(runtime_core::model::COMPILED_FORMAT) = format {
            let bot = serde_json::from_str(&row.compiled).context("stored compiled bot")?;
            return Ok((bot, row.compiled.len()));
        }
        tracing::info!(project = %row.project_id, revision = %row.id, stored_format = ?format.ok(),
            format = runtime_core::model::COMPILED_FORMAT, "recompiling a revision stored in another format");
        let source = row.source.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            let doc: Json = serde_json::from_str(&source).map_err(|e| e.to_string())?;
            runtime_core::compile(&doc).map(|c| c.bot).map_err(|r| {
                r.problems
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            })
        })
        .await
        .context("recompiling")?;
        let bot = compiled.map_err(|e| {
            LiveError::NotDeployed(format!(
                "bot revision {} was stored by another botbox version and no longer compiles: {e}",
                row.id
            ))
        })?;
        let json = serde_json::to_string(&bot).context("compiled bot")?;
        self.db
            .store_recompiled(&row.project_id, &row.id, &json)
            .await?;
        Ok((bot, json.len()))
    }

    /// The revision an environment runs now: environment → deployment version → revision.
    /// Read for every message, so moving the environment takes effect at the next one.
    pub async fn environment_revision(
        &self,
        env: &EnvironmentRow,
    ) -> Result<Arc<Revision>, LiveError> {
        self.version_revision(&env.project_id, &env.deployment_version, &env.name)
            .await
    }

    /// The revision deployment `version` of a project runs (for environment `env_name`, in
    /// errors): its bot revision with its CMS revision and NLU pin.
    pub async fn version_revision(
        &self,
        project_id: &str,
        version: &str,
        env_name: &str,
    ) -> Result<Arc<Revision>, LiveError> {
        let d = self
            .db
            .deployment(project_id, version)
            .await?
            .ok_or_else(|| {
                LiveError::NotDeployed(format!(
                    "environment {env_name} points at deployment version {version}, which does not exist"
                ))
            })?;
        let rev = self
            .revision(project_id, &d.bot_revision, d.cms_revision.as_deref())
            .await?;
        // The deployment's NLU revision pins the project's own NL models (a clone of a few
        // Arcs, per message, for deployments that pin).
        Ok(match d.nlu_revision {
            Some(pin) if !pin.is_empty() => {
                let mut r = (*rev).clone();
                r.nl.pin = Some(pin.into());
                Arc::new(r)
            }
            _ => rev,
        })
    }
}
