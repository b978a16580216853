//! The NLU service: resolves an `nluId` for a caller (visibility), loads trained models
//! (cached, bounded in bytes), predicts, and runs trainings in the background.
//!
//! Settings (with `botbox serve` flags):
//! - `cache_bytes` (`--nlu-cache-mb`, default 256 MB): the loaded models kept, weighed by their
//!   stored size. A model bigger than the whole cache is loaded for each call (slow, not
//!   wrong). A tenant can fill the cache with its own models; eviction is LFU-ish (moka), so
//!   another tenant's hot model stays.
//! - `training_slots` (`--nlu-training-slots`, default 1): trainings running at once. Training is
//!   CPU work on a blocking thread; more slots than a core or two take CPU from bot steps.
//!   Trainings beyond it wait (their NLU shows `training` meanwhile).
//! - [`MAX_TRAINING_ROWS`]: sentences per NLU; [`MAX_PREDICT_CHARS`]: text per prediction.

use crate::error::ServiceError;
use botbox_nlu::model::{EntitySpec, MODEL_FORMAT, NluModel};
use botbox_nlu::{Lang, TrainingData, TrainingEntity};
use botbox_sandbox::NlScope;
use botbox_store::{Db, NluRow};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Training sentences an NLU may hold (training 15,000 sentences takes seconds, not minutes).
pub const MAX_TRAINING_ROWS: usize = 20_000;
/// Characters of one text to predict; longer texts are cut (a chat message is far shorter).
pub const MAX_PREDICT_CHARS: usize = 2_000;

#[derive(Debug, Clone)]
pub struct NluConfig {
    pub cache_bytes: u64,
    pub training_slots: usize,
}

impl Default for NluConfig {
    fn default() -> Self {
        NluConfig {
            cache_bytes: 256 << 20,
            training_slots: 1,
        }
    }
}

pub struct NluService {
    db: Db,
    models: moka::sync::Cache<(String, String), Arc<NluModel>>,
    training: Arc<tokio::sync::Semaphore>,
    drain: crate::drain::Drain,
    /// NLUs whose content changed while they trained: trained again when that training ends.
    again: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// How a training ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Trained {
    /// The new model is in use; its NLU revision.
    Done {
        revision: String,
    },
    Failed(String),
}

impl NluService {
    pub fn new(db: Db, cfg: NluConfig, drain: crate::drain::Drain) -> Arc<NluService> {
        Arc::new(NluService {
            db,
            drain,
            models: moka::sync::Cache::builder()
                .max_capacity(cfg.cache_bytes)
                .weigher(|_, m: &Arc<NluModel>| u32::try_from(m.weight()).unwrap_or(u32::MAX))
                .build(),
            training: Arc::new(tokio::sync::Semaphore::new(cfg.training_slots.max(1))),
            again: Default::default(),
        })
    }

    /// The NLU that `nlu_id` (`<account>:<name>`) names, if a bot running for `scope` may use
    /// it: its owner's own NLUs, and anyone's public ones. The error does not tell a private
    /// NLU from a missing one.
    pub async fn resolve(&self, scope: &NlScope, nlu_id: &str) -> Result<NluRow, String> {
        let unavailable = || {
            format!(
                "NLU {nlu_id:?} is not available to this bot: it does not exist or is private to its owner"
            )
        };
        let Some((account, name)) = nlu_id.split_once(':') else {
            return Err(format!(
                "nluId {nlu_id:?} must be <account>:<nlu name> (a user's or team's name, a colon, the NLU's name)"
            ));
        };
        let owner = match self.db.user_by_name(account).await.map_err(db_err)? {
            Some(u) => u.id,
            None => match self.db.team_by_name(account).await.map_err(db_err)? {
                Some(t) => t.id,
                None => return Err(unavailable()),
            },
        };
        let nlu = self
            .db
            .owner_nlu(&owner, name)
            .await
            .map_err(db_err)?
            .ok_or_else(unavailable)?;
        if nlu.visibility != "public" && nlu.owner_id != *scope.owner {
            return Err(unavailable());
        }
        Ok(nlu)
    }

    /// The model a caller uses: pinned for the NLUs of the caller's own project when its
    /// deployment pins an NLU revision, else the newest. An NLU never trained, or whose model
    /// learnt no sentences (a new project's initial revision), predicts with a model of its
    /// entities alone (dictionaries and rules) as they are now.
    pub async fn model(&self, nlu: &NluRow, pin: Option<&str>) -> Result<Arc<NluModel>, String> {
        let revision = self
            .db
            .nlu_model_revision(&nlu.id, pin)
            .await
            .map_err(db_err)?
            .filter(|(_, sentences)| *sentences > 0)
            .map(|(r, _)| r);
        let Some(revision) = revision else {
            let key = (nlu.id.clone(), format!("untrained@{}", nlu.updated_at));
            if let Some(m) = self.models.get(&key) {
                return Ok(m);
            }
            let entities = entities_of(nlu)?;
            let lang = Lang::parse(&nlu.lang);
            let m = tokio::task::spawn_blocking(move || NluModel::train(lang, &entities, &[]))
                .await
                .map_err(|e| e.to_string())??;
            let m = Arc::new(m);
            self.models.insert(key, m.clone());
            return Ok(m);
        };
        let key = (nlu.id.clone(), revision.clone());
        if let Some(m) = self.models.get(&key) {
            return Ok(m);
        }
        let row = self
            .db
            .nlu_model(&nlu.id, &revision)
            .await
            .map_err(db_err)?
            .ok_or_else(|| format!("NLU {} revision {revision} has no model", nlu.name))?;
        if row.format != i64::from(MODEL_FORMAT) {
            return Err(format!(
                "NLU {} revision {revision} was trained by another botbox version (model format {}, this one reads {MODEL_FORMAT}): retrain it",
                nlu.name, row.format
            ));
        }
        let m = tokio::task::spawn_blocking(move || {
            serde_json::from_str::<NluModel>(&row.model).map(|mut m| {
                m.stored_bytes = row.model.len();
                m
            })
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("NLU {} revision {revision}: stored model: {e}", nlu.name))?;
        let m = Arc::new(m);
        self.models.insert(key, m.clone());
        Ok(m)
    }

    /// A bot's `type: nl` call: the raw prediction for `text` as JSON.
    pub async fn predict_for_bot(
        &self,
        scope: &NlScope,
        nlu_id: &str,
        text: &str,
    ) -> Result<Json, String> {
        let nlu = self.resolve(scope, nlu_id).await?;
        let pin = scope
            .pin
            .as_deref()
            .filter(|_| nlu.project_id == *scope.project);
        let model = self.model(&nlu, pin).await?;
        let text = cut(text);
        Ok(serde_json::to_value(model.predict(text)).expect("predictions serialise"))
    }

    /// Starts a training of `nlu` on its stored sentences, unless one runs: `Err` says so.
    /// The returned receiver tells how it ended (the caller may wait for it a little, so that
    /// small trainings answer synchronously).
    pub async fn start_training(
        self: &Arc<Self>,
        nlu: NluRow,
    ) -> Result<tokio::sync::oneshot::Receiver<Trained>, String> {
        if !self.db.begin_training(&nlu.id).await.map_err(db_err)? {
            return Err(format!(
                "NLU {} is already training; train again when it has finished (see training.status on GET …/nlus/{})",
                nlu.name, nlu.name
            ));
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let this = self.clone();
        let busy = self.drain.busy(crate::drain::Work::Trainings);
        tokio::spawn(async move {
            let _busy = busy;
            let mut tx = Some(tx);
            let mut nlu = nlu;
            loop {
                let ended = this.train_and_record(&nlu).await;
                if let Some(tx) = tx.take() {
                    let _ = tx.send(ended);
                }
                if !this.again.lock().expect("not poisoned").remove(&nlu.id) {
                    break;
                }
                // Trained again on what changed meanwhile, unless another training has
                // started since (it reads the latest content).
                match this.db.nlu_by_id(&nlu.id).await {
                    Ok(Some(row)) => nlu = row,
                    _ => break,
                }
                if !this.db.begin_training(&nlu.id).await.unwrap_or(false) {
                    break;
                }
            }
        });
        Ok(rx)
    }

    /// Starts a training of `nlu` (`Some`, as [`Self::start_training`]), or, when one runs,
    /// has the NLU trained again as soon as it ends (`None`): for a change of what it learns
    /// from that must not wait for a person to train.
    pub async fn train_soon(
        self: &Arc<Self>,
        nlu: NluRow,
    ) -> Option<tokio::sync::oneshot::Receiver<Trained>> {
        // Marked before the start: a running training that ends in between sees the mark.
        let id = nlu.id.clone();
        self.again.lock().expect("not poisoned").insert(id.clone());
        let rx = self.start_training(nlu).await.ok()?;
        self.again.lock().expect("not poisoned").remove(&id);
        Some(rx)
    }

    /// One training, its outcome counted and a failure recorded on the NLU.
    async fn train_and_record(&self, nlu: &NluRow) -> Trained {
        let out = self.train(nlu).await;
        let outcome = if out.is_ok() { "done" } else { "failed" };
        metrics::counter!("botbox_nlu_trainings_total", "outcome" => outcome).increment(1);
        match out {
            Ok(revision) => Trained::Done { revision },
            Err(e) => {
                tracing::info!(nlu = %nlu.id, error = %e, "NLU training failed");
                if let Err(db) = self.db.fail_training(&nlu.id, &e).await {
                    tracing::error!(nlu = %nlu.id, error = %db, "recording a failed training");
                }
                Trained::Failed(e)
            }
        }
    }

    async fn train(&self, nlu: &NluRow) -> Result<String, String> {
        let span = tracing::info_span!("nlu_train", tenant = %nlu.owner_id, nlu = %nlu.id);
        let _slot = self.training.acquire().await.map_err(|e| e.to_string())?;
        let rows = self.db.all_training_rows(&nlu.id).await.map_err(db_err)?;
        let mut entities = entities_of(nlu)?;
        let faq = self.faq_of(nlu).await?;
        let lang = Lang::parse(&nlu.lang);
        let started = std::time::Instant::now();
        let trained = tokio::task::spawn_blocking(move || -> Result<(String, usize), String> {
            let mut data: Vec<TrainingData> = rows
                .iter()
                .map(|r| {
                    Ok(TrainingData {
                        input: r.input.clone(),
                        entities: serde_json::from_str(&r.entities)
                            .map_err(|e| format!("stored training row {}: {e}", r.id))?,
                    })
                })
                .collect::<Result<_, String>>()?;
            if let Some((spec, questions)) = faq {
                entities.insert(FAQ_ENTITY.into(), spec);
                data.extend(questions);
            }
            let model = NluModel::train(lang, &entities, &data)?;
            let json = serde_json::to_string(&model).map_err(|e| e.to_string())?;
            Ok((json, data.len()))
        })
        .await
        .map_err(|e| format!("training stopped: {e}"))??;
        let (json, sentences) = trained;
        let revision = hex::encode(
            &Sha256::digest(format!(
                "{}\n{}\n{}",
                nlu.id,
                botbox_store::new_id(),
                json.len()
            ))[..20],
        );
        self.db
            .finish_training(
                nlu,
                &revision,
                i64::from(MODEL_FORMAT),
                sentences as i64,
                &json,
            )
            .await
            .map_err(db_err)?;
        span.in_scope(|| {
            tracing::info!(revision = %revision, sentences, bytes = json.len(),
                ms = started.elapsed().as_millis() as u64, "NLU trained")
        });
        Ok(revision)
    }
}

impl NluService {
    /// The FAQ tables of the latest CMS revision of the NLU's project, as training input.
    async fn faq_of(
        &self,
        nlu: &NluRow,
    ) -> Result<Option<(EntitySpec, Vec<TrainingData>)>, String> {
        let Some(project) = self.db.project(&nlu.project_id).await.map_err(db_err)? else {
            return Ok(None);
        };
        let Some(rev) = project.cms_latest_revision else {
            return Ok(None);
        };
        let row = self
            .db
            .cms_revision(&project.id, &rev)
            .await
            .map_err(db_err)?;
        Ok(row.and_then(|r| faq_training(&r.document)))
    }
}

/// Why a training that would pass [`MAX_TRAINING_ROWS`] is refused.
pub fn too_many_rows(nlu: &str, total: usize) -> String {
    format!("NLU {nlu} would hold {total} training sentences; at most {MAX_TRAINING_ROWS}")
}

/// The entity map stored on an NLU row.
pub fn entities_of(
    nlu: &NluRow,
) -> Result<BTreeMap<String, botbox_nlu::model::EntitySpec>, String> {
    serde_json::from_str(&nlu.entities)
        .map_err(|e| format!("NLU {}: stored entities: {e}", nlu.name))
}

/// At most [`MAX_PREDICT_CHARS`] characters of `text`.
pub fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_PREDICT_CHARS) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

fn db_err(e: botbox_store::DbError) -> String {
    tracing::error!(error = %e, "NLU storage");
    "the NLU store failed; try again".into()
}

/// Whether `lang` reads as a language code (`en`, `id`, `pt-BR`).
pub fn is_lang_code(lang: &str) -> bool {
    !lang.is_empty()
        && lang.len() <= 16
        && lang.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// A project NLU's language (`options.nluLang`) must read as a language code.
pub fn check_nlu_lang(lang: &str) -> Result<(), ServiceError> {
    if is_lang_code(lang) {
        return Ok(());
    }
    Err(ServiceError::Invalid(format!(
        "options.nluLang: a language code such as en or id (got {lang:?})"
    )))
}

impl NluService {
    /// Creates an NLU of a project with its initial revision (a model of no sentences), as a
    /// project made with `options.nlu` has one: clients such as kata-cli read the newest NLU
    /// revision of a project to deploy it.
    pub async fn create_for_project(
        self: &Arc<Self>,
        project_id: &str,
        owner_id: &str,
        name: &str,
        lang: &str,
        visibility: &str,
    ) -> Result<NluRow, ServiceError> {
        check_nlu_lang(lang)?;
        let nlu = self
            .db
            .insert_nlu(project_id, owner_id, name, lang, visibility)
            .await
            .map_err(|e| match e {
                botbox_store::DbError::Conflict => ServiceError::Conflict(format!(
                    "an NLU named {name} already exists for this owner (bots address NLUs as <account>:<name>)"
                )),
                e => ServiceError::Internal(e.into()),
            })?;
        let trained = self
            .start_training(nlu.clone())
            .await
            .map_err(|e| ServiceError::Internal(anyhow::anyhow!(e)))?;
        match trained.await {
            Ok(Trained::Done { .. }) => Ok(nlu),
            Ok(Trained::Failed(e)) => Err(ServiceError::Internal(anyhow::anyhow!(
                "the initial revision of NLU {name}: {e}"
            ))),
            Err(e) => Err(ServiceError::Internal(e.into())),
        }
    }
}

/// The trait entity every NLU of a project learns the project's FAQ tables as: each question
/// of the latest CMS revision is a sentence labelled with its FAQ's label
/// (`#faq:<label>`), so `faq` predicts which FAQ a message asks. The name is reserved in
/// project NLUs.
pub const FAQ_ENTITY: &str = "faq";

/// The `faq` trait and its sentences for a stored CMS document: `None` when it has no FAQ
/// tables. Training adds them to the NLU's own entities and sentences.
pub fn faq_training(document: &str) -> Option<(EntitySpec, Vec<TrainingData>)> {
    let doc: Json = serde_json::from_str(document).ok()?;
    let faqs = doc.get("faqs")?.as_object().filter(|f| !f.is_empty())?;
    let mut rows = Vec::new();
    for (label, faq) in faqs {
        for q in faq["questions"].as_array().into_iter().flatten() {
            let Some(input) = q.as_str() else { continue };
            rows.push(TrainingData {
                input: input.to_string(),
                entities: vec![TrainingEntity {
                    id: None,
                    entity: FAQ_ENTITY.into(),
                    label: Some(label.clone()),
                    start: 0,
                    end: input.chars().count(),
                    value: label.clone(),
                    belongs_to: None,
                }],
            });
        }
    }
    let spec = EntitySpec {
        kind: "trait".into(),
        profile: "faq".into(),
        root: None,
        rel_profile: None,
        labels: Some(faqs.keys().cloned().collect()),
        belongs_to: None,
        dictionary: None,
        resolver: None,
        inherit: None,
        name: None,
    };
    Some((spec, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use botbox_store::NewProject;

    /// A change that arrives while the NLU trains (`train_soon` finds it busy) is not lost:
    /// when the running training ends, the NLU trains once more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_during_a_training_trains_again_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::connect(&botbox_store::sqlite_url(dir.path()))
            .await
            .unwrap();
        let project = db
            .insert_project(&NewProject {
                owner_id: "u1".into(),
                name: "p".into(),
                label: None,
                description: None,
                options: "{}".into(),
            })
            .await
            .unwrap();
        let nlu = db
            .insert_nlu(&project.id, "u1", "p", "en", "private")
            .await
            .unwrap();
        let drain = crate::drain::Drain::default();
        let svc = NluService::new(db.clone(), NluConfig::default(), drain.clone());
        // The only training slot is taken: the first training waits for it, marked running.
        let slot = svc.training.clone().acquire_owned().await.unwrap();
        let first = svc.start_training(nlu.clone()).await.unwrap();
        assert!(
            svc.train_soon(nlu.clone()).await.is_none(),
            "it was training"
        );
        drop(slot);
        assert!(matches!(first.await.unwrap(), Trained::Done { .. }));
        // Every training begun has ended once the drain finishes.
        drain.start();
        drain.finished().await;
        assert_eq!(db.nlu_revisions(&project.id).await.unwrap().len(), 2);
        assert!(svc.again.lock().unwrap().is_empty());
        // Free again: `train_soon` trains at once.
        let rx = svc.train_soon(nlu).await.expect("not training");
        assert!(matches!(rx.await.unwrap(), Trained::Done { .. }));
    }
}
