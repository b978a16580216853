//! The NLU half of the project API (NL Studio): NLUs of a project, their entities, training data,
//! train/retrain, predict and debug, and `GET /nlus/profiles`. Thin handlers: parsing and
//! checks are in [`botbox_nlu`], models and trainings in [`botbox_service::nlu`].
//!
//! Who may do what: the project's owner (and `*_any_projects` roles) reads and writes (a
//! team's viewers read, training sentences included); any signed-in user may read, predict
//! with and debug a **public** NLU but not read its training sentences (403); anyone else
//! gets 404.

use super::{ApiError, ApiResult, App, Body, Caller, PageOf, Paging};
use axum::Json;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{StatusCode, header};
use botbox_nlu::lines::{self, LineError};
use botbox_nlu::model::{self, EntitySpec, check_entities, check_row_entities};
use botbox_nlu::{TrainingData, TrainingEntity};
use botbox_service::auth::{Action, Resource};
use botbox_service::nlu::{MAX_TRAINING_ROWS, Trained, cut, entities_of, too_many_rows};
use botbox_store::{DbError, NluRow, TrainingRow, TrainingStored};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json_, json};
use std::collections::BTreeMap;
use std::time::Duration;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Sentences one predict call takes (the CLI sends at most 100 lines per file).
pub const MAX_PREDICT_SENTENCES: usize = 100;
/// How long a train request waits for its training before answering `training`: small
/// trainings answer with their result.
pub(crate) const SYNC_WAIT: Duration = Duration::from_secs(10);

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(list_nlus, create_nlu))
        .routes(routes!(get_nlu, put_nlu))
        .routes(routes!(list_training_data))
        .routes(routes!(put_training_data, delete_training_data))
        .routes(routes!(train))
        .routes(routes!(retrain))
        .routes(routes!(predict))
        .routes(routes!(debug))
        .routes(routes!(list_entities, create_entity))
        .routes(routes!(get_entity, put_entity, delete_entity))
        .routes(routes!(profiles))
}

/// An NLU's summary, with the entities, the training status and the latest model.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NluSummary {
    pub name: String,
    pub lang: String,
    pub visibility: String,
    /// How bots address it: `<account>:<name>`.
    pub nlu_id: String,
    #[schema(value_type = Object)]
    pub entities: BTreeMap<String, EntitySpec>,
    pub training: TrainingStatus,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingStatus {
    /// `idle`, `training` or `failed`.
    pub status: String,
    pub error: Option<String>,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// The NLU revision of the newest model, if it was ever trained.
    pub revision: Option<String>,
}

async fn summary(app: &App, nlu: NluRow) -> ApiResult<NluSummary> {
    let account = app.db.account_name(&nlu.owner_id).await?;
    let revision = app
        .db
        .nlu_model_revision(&nlu.id, None)
        .await?
        .map(|(r, _)| r);
    Ok(NluSummary {
        nlu_id: format!("{account}:{}", nlu.name),
        entities: entities_of(&nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?,
        training: TrainingStatus {
            status: nlu.training,
            error: nlu.training_error,
            started_at: nlu.training_started_at,
            finished_at: nlu.training_finished_at,
            revision,
        },
        name: nlu.name,
        lang: nlu.lang,
        visibility: nlu.visibility,
    })
}

/// An NLU's name as a path gives it: `shop`, or `alice:shop` (kata-cli's form, the `nluId`).
pub fn nlu_name(path: &str) -> &str {
    path.split_once(':').map_or(path, |(_, n)| n)
}

/// The NLU `name` of a project, if the caller may read it (`write = false`) or change it.
/// 404 (existence not revealed) when the project is another owner's and the NLU is not
/// public, or when writing to another owner's NLU.
pub(super) async fn nlu_for(
    app: &App,
    caller: &Caller,
    project_id: &str,
    name: &str,
    write: bool,
) -> ApiResult<NluRow> {
    Ok(nlu_and_owner_role(app, caller, project_id, name, write)
        .await?
        .0)
}

/// [`nlu_for`], with whether the caller has a role on the NLU's owner (a stranger reading a
/// public NLU has none).
async fn nlu_and_owner_role(
    app: &App,
    caller: &Caller,
    project_id: &str,
    name: &str,
    write: bool,
) -> ApiResult<(NluRow, bool)> {
    let action = if write { Action::Update } else { Action::Read };
    let missing = || ApiError::not_found(format!("NLU {name} of project {project_id}"));
    let nlu = app
        .db
        .project_nlu(project_id, nlu_name(name))
        .await?
        .ok_or_else(missing)?;
    match caller.role_on(app, &nlu.owner_id).await? {
        Some(role) if botbox_service::auth::allows(role, action, Resource::Projects) => {
            Ok((nlu, true))
        }
        Some(_) if write => Err(ApiError::Forbidden),
        None if !write && nlu.visibility == "public" => Ok((nlu, false)),
        Some(_) if !write && nlu.visibility == "public" => Ok((nlu, true)),
        Some(_) => Err(ApiError::Forbidden),
        None => Err(missing()),
    }
}

#[utoipa::path(get, path = "/projects/{projectId}/nlus", tag = "nlu",
    params(("projectId" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<NluSummary>), (status = 404)))]
async fn list_nlus(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    paging: Paging,
) -> ApiResult<Json<PageOf<NluSummary>>> {
    super::project_for(&app, &caller, &pid, Action::Read, Resource::Projects).await?;
    let page = app
        .db
        .project_nlus(&pid, paging.limit, paging.offset())
        .await?;
    let mut data = Vec::new();
    for n in page.items {
        data.push(summary(&app, n).await?);
    }
    Ok(Json(super::page_of(paging, page.total, data)))
}

/// A new NLU of a project.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewNlu {
    /// 1 to 64 letters, digits, `.`, `_` or `-`; bots address it as `<account>:<name>`.
    pub name: String,
    /// `en` (default) or `id`.
    pub lang: Option<String>,
    /// `private` (default) or `public`.
    pub visibility: Option<String>,
}

/// Creates an NLU in the project, with its initial revision (a model of no sentences), as a
/// project made with `options.nlu` has one.
#[utoipa::path(post, path = "/projects/{projectId}/nlus", tag = "nlu",
    params(("projectId" = String, Path)), request_body = NewNlu,
    responses((status = 200, body = NluSummary), (status = 400), (status = 403), (status = 404), (status = 409)))]
async fn create_nlu(
    State(app): State<App>,
    caller: Caller,
    Path(pid): Path<String>,
    Body(req): Body<NewNlu>,
) -> ApiResult<Json<NluSummary>> {
    let p = super::project_for(&app, &caller, &pid, Action::Update, Resource::Projects).await?;
    super::check_name("name", &req.name)?;
    let visibility = req.visibility.unwrap_or_else(|| "private".into());
    check_visibility(&visibility)?;
    let lang = req.lang.unwrap_or_else(|| "en".into());
    let nlu = app
        .live
        .nlu
        .create_for_project(&pid, &p.owner_id, &req.name, &lang, &visibility)
        .await?;
    Ok(Json(summary(&app, nlu).await?))
}

#[utoipa::path(get, path = "/projects/{projectId}/nlus/{nluName}", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path)),
    responses((status = 200, body = NluSummary), (status = 404)))]
async fn get_nlu(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
) -> ApiResult<Json<NluSummary>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, false).await?;
    Ok(Json(summary(&app, nlu).await?))
}

/// An NLU, every field optional on update. `name` must be the NLU's own
/// (NLUs are not renamed: bots address them by name).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NluUpdate {
    pub name: Option<String>,
    pub lang: Option<String>,
    pub visibility: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub entities: Option<BTreeMap<String, EntitySpec>>,
}

/// Updates lang, visibility and the entity map (replaced as a whole). Entity changes reach
/// predictions at the next training; a deployed bot keeps its pinned model.
#[utoipa::path(put, path = "/projects/{projectId}/nlus/{nluName}", tag = "nlu", request_body = NluUpdate,
    params(("projectId" = String, Path), ("nluName" = String, Path)),
    responses((status = 200, body = NluSummary), (status = 400), (status = 404)))]
async fn put_nlu(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
    Body(req): Body<NluUpdate>,
) -> ApiResult<Json<NluSummary>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    if let Some(n) = req.name.as_deref().filter(|n| *n != nlu.name) {
        return Err(ApiError::bad(format!(
            "name: NLUs are not renamed (bots address them by name); got {n:?} for NLU {}",
            nlu.name
        )));
    }
    let lang = req.lang.unwrap_or(nlu.lang.clone());
    check_lang(&lang)?;
    let visibility = req.visibility.unwrap_or(nlu.visibility.clone());
    check_visibility(&visibility)?;
    let entities = match req.entities {
        Some(e) => {
            check_project_entities(&e).map_err(|m| ApiError::bad(format!("entities: {m}")))?;
            e
        }
        None => entities_of(&nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?,
    };
    app.db
        .update_nlu(
            &nlu.id,
            &lang,
            &visibility,
            &serde_json::to_string(&entities).expect("entities serialise"),
        )
        .await?;
    let nlu = app
        .db
        .nlu_by_id(&nlu.id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("NLU {name} of project {pid}")))?;
    Ok(Json(summary(&app, nlu).await?))
}

pub fn check_lang(lang: &str) -> ApiResult<()> {
    if !botbox_service::nlu::is_lang_code(lang) {
        return Err(ApiError::bad(format!(
            "lang: a language code such as en or id (got {lang:?})"
        )));
    }
    Ok(())
}

fn check_visibility(v: &str) -> ApiResult<()> {
    if !matches!(v, "private" | "public") {
        return Err(ApiError::bad(format!(
            "visibility: private or public (got {v:?})"
        )));
    }
    Ok(())
}

/// A stored training sentence (a TrainingData) with its id and times.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrainingItem {
    pub id: String,
    pub input: String,
    #[schema(value_type = Vec<Object>)]
    pub entities: Vec<TrainingEntity>,
    pub created_at: i64,
    pub updated_at: i64,
}

fn training_item(r: TrainingRow) -> ApiResult<TrainingItem> {
    let mut entities: Vec<TrainingEntity> =
        serde_json::from_str(&r.entities).map_err(|e| ApiError::Internal(e.into()))?;
    // A label stored without an id gets one here.
    botbox_nlu::give_ids(&mut entities);
    Ok(TrainingItem {
        entities,
        id: r.id,
        input: r.input,
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

/// The training sentences, in the order they were added: TrainingData objects with their
/// ids (not bare strings), which the update route needs.
#[utoipa::path(get, path = "/projects/{projectId}/nlus/{nluName}/training_data", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<TrainingItem>), (status = 403), (status = 404)))]
async fn list_training_data(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
    paging: Paging,
) -> ApiResult<Json<PageOf<TrainingItem>>> {
    // The owner's people read the sentences, viewers too; others may predict with a public
    // NLU but not read what it was taught.
    let (nlu, has_role) = nlu_and_owner_role(&app, &caller, &pid, &name, false).await?;
    if !has_role {
        return Err(ApiError::Forbidden);
    }
    let page = app
        .db
        .training_rows(&nlu.id, paging.limit, paging.offset())
        .await?;
    let data = page
        .items
        .into_iter()
        .map(training_item)
        .collect::<ApiResult<_>>()?;
    Ok(Json(super::page_of(paging, page.total, data)))
}

/// Any subset of TrainingData.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainingUpdate {
    pub input: Option<String>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub entities: Option<Vec<TrainingEntity>>,
}

/// Changes one training sentence; answers the fields given plus `created_at`/`updated_at`.
#[utoipa::path(put, path = "/projects/{projectId}/nlus/{nluName}/training_data/{id}", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path), ("id" = String, Path)),
    request_body = TrainingUpdate,
    responses((status = 200, body = Object), (status = 400), (status = 404), (status = 409)))]
async fn put_training_data(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name, id)): Path<(String, String, String)>,
    Body(req): Body<TrainingUpdate>,
) -> ApiResult<Json<Json_>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    let row = app
        .db
        .training_row(&nlu.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("training data {id} of NLU {name}")))?;
    let old = training_item(row)?;
    // A new input alone keeps the sentence's labels, moved to where their words now are.
    let entities = match (&req.input, &req.entities) {
        (_, Some(e)) => e.clone(),
        (Some(input), None) => lines::relabel(
            &TrainingData {
                input: old.input.clone(),
                entities: old.entities.clone(),
            },
            input,
        )
        .map_err(|e| ApiError::bad(format!("training data {id}: {e}")))?,
        (None, None) => old.entities.clone(),
    };
    let data = TrainingData {
        input: req.input.clone().unwrap_or(old.input),
        entities,
    }
    .with_ids();
    let entities = entities_of(&nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    lines::check_row(&data)
        .and_then(|()| check_row_entities(&data, &entities))
        .map_err(|e| ApiError::bad(format!("training data {id}: {e}")))?;
    let entities_json = serde_json::to_string(&data.entities).expect("entities serialise");
    match app
        .db
        .update_training_row(&nlu.id, &id, &data.input, &entities_json)
        .await
    {
        Err(DbError::Conflict) => {
            return Err(ApiError::Conflict(format!(
                "training data {id}: {:?} is the text of another sentence of NLU {name}; change or delete that one",
                data.input
            )));
        }
        done => done?,
    }
    let row = app
        .db
        .training_row(&nlu.id, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("training data {id} of NLU {name}")))?;
    let mut out = serde_json::Map::new();
    if let Some(i) = req.input {
        out.insert("input".into(), json!(i));
    }
    if req.entities.is_some() {
        out.insert("entities".into(), json!(data.entities));
    }
    out.insert("created_at".into(), json!(row.created_at.to_string()));
    out.insert("updated_at".into(), json!(row.updated_at.to_string()));
    Ok(Json(Json_::Object(out)))
}

/// Deletes one training sentence (the model keeps it until the NLU is trained again).
#[utoipa::path(delete, path = "/projects/{projectId}/nlus/{nluName}/training_data/{id}", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path), ("id" = String, Path)),
    responses((status = 204), (status = 404)))]
async fn delete_training_data(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name, id)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    if !app.db.delete_training_row(&nlu.id, &id).await? {
        return Err(ApiError::not_found(format!(
            "training data {id} of NLU {name}"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The sentences of a train/predict/debug request: form-data (`multipart/form-data` or
/// urlencoded) fields `sentence` / `sentence[]` (repeatable) and `file` (line format, JSON or
/// YAML), or a JSON body `{"sentence": [...]}`.
pub struct SentenceForm {
    pub sentences: Vec<String>,
    pub file: Option<(Option<String>, String)>,
}

impl FromRequest<App> for SentenceForm {
    type Rejection = ApiError;

    async fn from_request(req: Request, app: &App) -> Result<Self, Self::Rejection> {
        let ctype = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut out = SentenceForm {
            sentences: vec![],
            file: None,
        };
        if ctype.starts_with("multipart/form-data") {
            let mut mp = axum::extract::Multipart::from_request(req, app)
                .await
                .map_err(|e| ApiError::bad(format!("form-data: {e}")))?;
            while let Some(field) = mp
                .next_field()
                .await
                .map_err(|e| ApiError::bad(format!("form-data: {e}")))?
            {
                let name = field.name().unwrap_or("").to_string();
                let file_name = field.file_name().map(str::to_string);
                let text = field
                    .text()
                    .await
                    .map_err(|e| ApiError::bad(format!("form-data field {name}: {e}")))?;
                match name.as_str() {
                    "sentence" | "sentence[]" | "sentences" | "sentences[]" => {
                        out.sentences.push(text)
                    }
                    "file" => out.file = Some((file_name, text)),
                    other => {
                        return Err(ApiError::bad(format!(
                            "form-data field {other:?}: expected sentence (repeatable) or file"
                        )));
                    }
                }
            }
        } else if ctype.starts_with("application/x-www-form-urlencoded") {
            let bytes = axum::body::Bytes::from_request(req, app)
                .await
                .map_err(|e| ApiError::bad(format!("the request body could not be read: {e}")))?;
            for (k, v) in url::form_urlencoded::parse(&bytes) {
                match k.as_ref() {
                    "sentence" | "sentence[]" | "sentences" | "sentences[]" => {
                        out.sentences.push(v.into_owned())
                    }
                    other => {
                        return Err(ApiError::bad(format!(
                            "form field {other:?}: expected sentence (repeatable)"
                        )));
                    }
                }
            }
        } else {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct JsonForm {
                #[serde(default, alias = "sentences")]
                sentence: OneOrMany,
            }
            #[derive(Deserialize, Default)]
            #[serde(untagged)]
            enum OneOrMany {
                #[default]
                None,
                One(String),
                Many(Vec<String>),
            }
            let Body(f) = Body::<JsonForm>::from_request(req, app).await?;
            out.sentences = match f.sentence {
                OneOrMany::None => vec![],
                OneOrMany::One(s) => vec![s],
                OneOrMany::Many(v) => v,
            };
        }
        Ok(out)
    }
}

/// The answer of train and retrain: `{count, status}`, with the lines refused.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainAnswer {
    /// Rows accepted by this request (train) or trained on (retrain).
    pub count: usize,
    /// `success` (the new model is in use), `failed`, or `training` (still running; see
    /// `training.status` on the NLU).
    pub status: String,
    /// 1-based line (or item) numbers of the rows refused.
    pub err_rows: Vec<usize>,
    /// Why each was refused: `line 3: …`.
    pub errors: Vec<String>,
    /// The ids of the sentences this request added or relabelled.
    pub row_ids: Vec<String>,
    /// Accepted sentences that were stored already with the same labels (kept once).
    pub unchanged: usize,
    /// Accepted sentences that were stored already with other labels: they have the new
    /// ones now.
    pub relabelled: usize,
    /// The NLU revision the training made, on success.
    pub revision: Option<String>,
    /// Why the training failed.
    pub error: Option<String>,
}

/// Adds sentences (form-data `sentence[]` or a training `file`) and trains the NLU on all of
/// its sentences. Refused lines are listed with their reasons; the others are kept. A second
/// training while one runs is a 409.
#[utoipa::path(post, path = "/projects/{projectId}/nlus/{nluName}/train", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path)),
    request_body(content = String, content_type = "multipart/form-data", description = "sentence (repeatable) or file"),
    responses((status = 200, body = TrainAnswer), (status = 400), (status = 404), (status = 409)))]
async fn train(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
    form: SentenceForm,
) -> ApiResult<Json<TrainAnswer>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    if nlu.training == "training" {
        return Err(busy(&nlu));
    }
    let entities = entities_of(&nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    let (accepted, errors) = checked_sentences(&form, &entities)?;
    let refused = TrainAnswer {
        err_rows: errors.iter().map(|e| e.line).collect(),
        errors: errors.iter().map(ToString::to_string).collect(),
        ..TrainAnswer::default()
    };
    let count = accepted.len();
    if count == 0 {
        return Ok(Json(TrainAnswer {
            status: "failed".into(),
            error: Some("no sentence was accepted; nothing was trained".into()),
            ..refused
        }));
    }
    let rows: Vec<(String, String)> = accepted
        .into_iter()
        .map(|r| {
            let r = r.with_ids();
            let e = serde_json::to_string(&r.entities).expect("entities serialise");
            (r.input, e)
        })
        .collect();
    let stored = app
        .db
        .add_training_rows(&nlu.id, &rows, MAX_TRAINING_ROWS)
        .await?
        .map_err(|total| ApiError::bad(too_many_rows(&name, total)))?;
    let trained = run_training(&app, nlu).await?;
    let count_of = |what: TrainingStored| stored.iter().filter(|(_, s)| *s == what).count();
    Ok(Json(TrainAnswer {
        count,
        unchanged: count_of(TrainingStored::Unchanged),
        relabelled: count_of(TrainingStored::Relabelled),
        row_ids: stored
            .into_iter()
            .filter(|(_, s)| *s != TrainingStored::Unchanged)
            .map(|(id, _)| id)
            .collect(),
        err_rows: refused.err_rows,
        errors: refused.errors,
        ..trained
    }))
}

/// The sentences of a train request, parsed and checked against the NLU's `entities`: the
/// accepted rows, and the refused ones by number (sentences from 1, then the file's lines
/// or items with their own numbers).
fn checked_sentences(
    form: &SentenceForm,
    entities: &BTreeMap<String, EntitySpec>,
) -> ApiResult<(Vec<TrainingData>, Vec<LineError>)> {
    let mut parsed = lines::Parsed::default();
    for (i, s) in form.sentences.iter().enumerate() {
        match lines::parse_line(s) {
            Ok(Some(r)) => {
                parsed.rows.push(r);
                parsed.lines.push(i + 1);
            }
            Ok(None) => {}
            Err(message) => parsed.errors.push(LineError {
                line: i + 1,
                message,
            }),
        }
    }
    if let Some((file_name, text)) = &form.file {
        let p = lines::parse_file(file_name.as_deref(), text);
        parsed.rows.extend(p.rows);
        parsed.lines.extend(p.lines);
        parsed.errors.extend(p.errors);
    }
    if parsed.rows.is_empty() && parsed.errors.is_empty() {
        return Err(ApiError::bad(
            "no training sentences: send form-data sentence (repeatable) or a file",
        ));
    }
    // Rows naming entities or labels the NLU lacks are refused with the others.
    let mut accepted = Vec::new();
    let mut errors = parsed.errors;
    for (row, line) in parsed.rows.into_iter().zip(parsed.lines) {
        match check_row_entities(&row, entities) {
            Ok(()) => accepted.push(row),
            Err(m) => errors.push(LineError {
                line,
                message: format!("{:?}: {m}", row.input),
            }),
        }
    }
    errors.sort_by_key(|e| e.line);
    Ok((accepted, errors))
}

fn busy(nlu: &NluRow) -> ApiError {
    ApiError::Conflict(format!(
        "NLU {} is already training; train again when it has finished (training.status on GET …/nlus/{})",
        nlu.name, nlu.name
    ))
}

async fn run_training(app: &App, nlu: NluRow) -> ApiResult<TrainAnswer> {
    let rx = app
        .live
        .nlu
        .start_training(nlu.clone())
        .await
        .map_err(|_| busy(&nlu))?;
    let mut answer = TrainAnswer {
        status: "training".into(),
        ..TrainAnswer::default()
    };
    match tokio::time::timeout(SYNC_WAIT, rx).await {
        Ok(Ok(Trained::Done { revision })) => {
            answer.status = "success".into();
            answer.revision = Some(revision);
        }
        Ok(Ok(Trained::Failed(e))) => {
            answer.status = "failed".into();
            answer.error = Some(e);
        }
        Ok(Err(_)) | Err(_) => {}
    }
    Ok(answer)
}

/// Trains the NLU again on its stored sentences (after entity changes, say).
#[utoipa::path(post, path = "/projects/{projectId}/nlus/{nluName}/retrain", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path)),
    responses((status = 200, body = TrainAnswer), (status = 404), (status = 409)))]
async fn retrain(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
) -> ApiResult<Json<TrainAnswer>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    if nlu.training == "training" {
        return Err(busy(&nlu));
    }
    let count = app.db.training_rows(&nlu.id, 1, 0).await?.total as usize;
    let mut answer = run_training(&app, nlu).await?;
    answer.count = count;
    Ok(Json(answer))
}

/// Predicts every entity for each sentence (form-data `sentence[]`, or a `file` whose lines
/// are stripped of their markup). `result` is the first sentence's map (the documented shape);
/// `results` lists every sentence's.
#[utoipa::path(post, path = "/projects/{projectId}/nlus/{nluName}/predict", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path)),
    request_body(content = String, content_type = "multipart/form-data", description = "sentence (repeatable) or file"),
    responses((status = 200, body = Object), (status = 400), (status = 404)))]
async fn predict(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
    form: SentenceForm,
) -> ApiResult<Json<Json_>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, false).await?;
    let mut sentences = form.sentences;
    if let Some((file_name, text)) = &form.file {
        let p = lines::parse_file(file_name.as_deref(), text);
        if let Some(e) = p.errors.first() {
            return Err(ApiError::bad(format!("file: {e}")));
        }
        sentences.extend(p.rows.into_iter().map(|r| r.input));
    }
    if sentences.is_empty() {
        return Err(ApiError::bad(
            "no sentence to predict: send form-data sentence (repeatable) or a file",
        ));
    }
    if sentences.len() > MAX_PREDICT_SENTENCES {
        return Err(ApiError::bad(format!(
            "{} sentences; at most {MAX_PREDICT_SENTENCES} per call",
            sentences.len()
        )));
    }
    let model = app
        .live
        .nlu
        .model(&nlu, None)
        .await
        .map_err(ApiError::bad)?;
    let results = app
        .cpu_job(move || {
            sentences
                .into_iter()
                .map(|s| {
                    let output = model.predict(cut(&s));
                    json!({"input": s, "output": output})
                })
                .collect::<Vec<_>>()
        })
        .await?;
    Ok(Json(json!({
        "result": results.first().map(|r| r["output"].clone()).unwrap_or(json!({})),
        "results": results,
    })))
}

/// What the model sees and scores for one sentence: tokens, features, every label's score
/// before thresholds, the tagger's tags and the final prediction.
#[utoipa::path(post, path = "/projects/{projectId}/nlus/{nluName}/debug", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path)),
    request_body(content = String, content_type = "multipart/form-data", description = "sentence"),
    responses((status = 200, body = Object), (status = 400), (status = 404)))]
async fn debug(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
    form: SentenceForm,
) -> ApiResult<Json<Json_>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, false).await?;
    let [sentence] = <[String; 1]>::try_from(form.sentences).map_err(|v| {
        ApiError::bad(format!(
            "debug takes exactly one form-data field sentence (got {})",
            v.len()
        ))
    })?;
    let model = app
        .live
        .nlu
        .model(&nlu, None)
        .await
        .map_err(ApiError::bad)?;
    let debug = app.cpu_job(move || model.debug(cut(&sentence))).await?;
    Ok(Json(json!({ "debug": debug })))
}

/// An entity with its name, as the entity routes give and take it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NamedEntity {
    pub name: String,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub entity: EntitySpec,
}

#[utoipa::path(get, path = "/projects/{projectId}/nlus/{nluName}/entities", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path), ("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = PageOf<NamedEntity>), (status = 404)))]
async fn list_entities(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
    paging: Paging,
) -> ApiResult<Json<PageOf<NamedEntity>>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, false).await?;
    let all = entities_of(&nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    let total = all.len() as i64;
    let data = all
        .into_iter()
        .skip(paging.offset() as usize)
        .take(paging.limit as usize)
        .map(|(name, entity)| NamedEntity { name, entity })
        .collect();
    Ok(Json(super::page_of(paging, total, data)))
}

/// The body of the entity routes: an Entity object, with `name` on create.
fn entity_body(body: Json_, name: Option<&str>) -> ApiResult<(String, EntitySpec)> {
    let mut body = match body {
        Json_::Object(m) => m,
        _ => return Err(ApiError::bad("body: an Entity object is expected")),
    };
    let given = match body.remove("name") {
        Some(Json_::String(n)) => Some(n),
        None | Some(Json_::Null) => None,
        Some(other) => return Err(ApiError::bad(format!("name: a string (got {other})"))),
    };
    let name = match (name, given) {
        (Some(path), Some(g)) if g != path => {
            return Err(ApiError::bad(format!(
                "name: entities are not renamed (got {g:?} for entity {path})"
            )));
        }
        (Some(path), _) => path.to_string(),
        (None, Some(g)) => g,
        (None, None) => return Err(ApiError::bad("name: required")),
    };
    let spec: EntitySpec =
        super::parse_json(&serde_json::to_vec(&Json_::Object(body)).expect("json serialises"))?;
    Ok((name, spec))
}

/// An NLU's entities as its project may hold them: valid, and none named `faq` (the trait
/// the project's CMS FAQ tables train as).
fn check_project_entities(all: &BTreeMap<String, EntitySpec>) -> Result<(), String> {
    check_entities(all)?;
    if all.contains_key(botbox_service::nlu::FAQ_ENTITY) {
        return Err(format!(
            "entity {}: the name is reserved for the trait the CMS FAQ tables train as (its labels are the FAQ labels); name the entity otherwise",
            botbox_service::nlu::FAQ_ENTITY
        ));
    }
    Ok(())
}

async fn save_entities(
    app: &App,
    nlu: &NluRow,
    all: &BTreeMap<String, EntitySpec>,
) -> ApiResult<()> {
    check_project_entities(all).map_err(ApiError::bad)?;
    app.db
        .update_nlu(
            &nlu.id,
            &nlu.lang,
            &nlu.visibility,
            &serde_json::to_string(all).expect("entities serialise"),
        )
        .await?;
    Ok(())
}

#[utoipa::path(post, path = "/projects/{projectId}/nlus/{nluName}/entities", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path)),
    request_body = Object, responses((status = 200, body = NamedEntity), (status = 400), (status = 404), (status = 409)))]
async fn create_entity(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name)): Path<(String, String)>,
    Body(body): Body<Json_>,
) -> ApiResult<Json<NamedEntity>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    let (ename, spec) = entity_body(body, None)?;
    let mut all = entities_of(&nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    if all.contains_key(&ename) {
        return Err(ApiError::Conflict(format!(
            "entity {ename} already exists in NLU {name}"
        )));
    }
    all.insert(ename.clone(), spec.clone());
    save_entities(&app, &nlu, &all).await?;
    Ok(Json(NamedEntity {
        name: ename,
        entity: spec,
    }))
}

fn entity_of(nlu: &NluRow, ename: &str) -> ApiResult<(BTreeMap<String, EntitySpec>, EntitySpec)> {
    let all = entities_of(nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    let e = all
        .get(ename)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("entity {ename} of NLU {}", nlu.name)))?;
    Ok((all, e))
}

#[utoipa::path(get, path = "/projects/{projectId}/nlus/{nluName}/entities/{entityName}", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path), ("entityName" = String, Path)),
    responses((status = 200, body = NamedEntity), (status = 404)))]
async fn get_entity(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name, ename)): Path<(String, String, String)>,
) -> ApiResult<Json<NamedEntity>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, false).await?;
    let (_, entity) = entity_of(&nlu, &ename)?;
    Ok(Json(NamedEntity {
        name: ename,
        entity,
    }))
}

#[utoipa::path(put, path = "/projects/{projectId}/nlus/{nluName}/entities/{entityName}", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path), ("entityName" = String, Path)),
    request_body = Object, responses((status = 200, body = NamedEntity, description = "the entity, created when it was missing"), (status = 400), (status = 404)))]
async fn put_entity(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name, ename)): Path<(String, String, String)>,
    Body(body): Body<Json_>,
) -> ApiResult<Json<NamedEntity>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    // Creates the entity when it is missing: its name is the path's (checked with the rest).
    let mut all = entities_of(&nlu).map_err(|e| ApiError::Internal(anyhow::anyhow!(e)))?;
    let (_, spec) = entity_body(body, Some(&ename))?;
    all.insert(ename.clone(), spec.clone());
    save_entities(&app, &nlu, &all).await?;
    Ok(Json(NamedEntity {
        name: ename,
        entity: spec,
    }))
}

/// Deletes an entity no other entity refers to (`belongsTo`, `root`). Training sentences that
/// mark it keep their marks, which training then ignores.
#[utoipa::path(delete, path = "/projects/{projectId}/nlus/{nluName}/entities/{entityName}", tag = "nlu",
    params(("projectId" = String, Path), ("nluName" = String, Path), ("entityName" = String, Path)),
    responses((status = 200, body = NamedEntity), (status = 404), (status = 409)))]
async fn delete_entity(
    State(app): State<App>,
    caller: Caller,
    Path((pid, name, ename)): Path<(String, String, String)>,
) -> ApiResult<Json<NamedEntity>> {
    let nlu = nlu_for(&app, &caller, &pid, &name, true).await?;
    let (mut all, entity) = entity_of(&nlu, &ename)?;
    all.remove(&ename);
    if let Some((other, _)) = all.iter().find(|(_, e)| {
        e.belongs_to.as_deref() == Some(&ename)
            || e.root
                .as_deref()
                .is_some_and(|r| r.split_once(':').is_some_and(|(x, _)| x == ename))
    }) {
        return Err(ApiError::Conflict(format!(
            "entity {other} refers to {ename} (belongsTo or root); change it first"
        )));
    }
    save_entities(&app, &nlu, &all).await?;
    Ok(Json(NamedEntity {
        name: ename,
        entity,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Profiles {
    pub page: i64,
    pub limit: i64,
    pub total: i64,
    pub items: Vec<String>,
}

/// The entity profile names.
#[utoipa::path(get, path = "/nlus/profiles", tag = "nlu",
    params(("limit" = Option<i64>, Query), ("page" = Option<i64>, Query)),
    responses((status = 200, body = Profiles)))]
async fn profiles(_caller: Caller, paging: Paging) -> Json<Profiles> {
    let all = model::all_profiles();
    Json(Profiles {
        page: paging.page,
        limit: paging.limit,
        total: all.len() as i64,
        items: all
            .into_iter()
            .skip(paging.offset() as usize)
            .take(paging.limit as usize)
            .map(str::to_string)
            .collect(),
    })
}
