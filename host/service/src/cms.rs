//! The CMS: content people edit without touching code, published as immutable revisions of
//! a project. A document holds **pages** of **forms** of **elements** (`text`, `textarea`,
//! `textlist`, `slider`, `dropdown`, `toggle`, each with a `value`) and **FAQ tables**
//! (labels, each with questions and answers):
//!
//! ```json
//! {"pages": {"home": {"greeting": {"text": {"type": "text", "value": "Hello!"}}}},
//!  "faqs": {"opening_hours": {"questions": ["when are you open"], "answers": ["9 to 5"]}}}
//! ```
//!
//! Bots read a value as `cms.<page>.<form>.<element>.value` and a table's answers as
//! `cms.faq.<label>.answers` (so no page is named `faq`).
//!
//! [`check`] validates a document and names the page, form and element of every problem;
//! [`publish`] stores a valid one as the project's newest revision.

use crate::nlu::{NluService, Trained};
use botbox_store::{CmsRevisionRow, Db, DbResult, ProjectRow};
use serde_json::{Map, Value as Json, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// Largest CMS document, in bytes of its JSON (1 MiB, as a bot): validation is linear in it.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// Problems reported per document at most.
const MAX_PROBLEMS: usize = 100;
/// Longest text of a `text` element, in characters; a `textarea` takes up to 64 KiB.
const MAX_TEXT: usize = 4096;
const MAX_TEXTAREA: usize = 64 << 10;

/// The element types and what their `value` holds.
pub const ELEMENT_TYPES: &[&str] = &[
    "text", "textarea", "textlist", "slider", "dropdown", "toggle",
];

/// A name a bot can write in `$(cms.<page>.<form>.<element>.value)`: a letter or `_`, then
/// letters, digits or `_`, at most 64 characters.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Collects problems, each at its place (`pages.home.greeting.text: …`).
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn at(&mut self, place: &str, what: impl std::fmt::Display) {
        if self.0.len() < MAX_PROBLEMS {
            self.0.push(format!("{place}: {what}"));
        }
    }
}

/// The objects under `v` at `place`, each name checked; `what` names them in problems.
fn named<'a>(
    v: Option<&'a Json>,
    place: &str,
    what: &str,
    problems: &mut Problems,
) -> Vec<(String, &'a Json)> {
    let Some(v) = v else { return vec![] };
    let Some(map) = v.as_object() else {
        problems.at(place, format!("an object of {what}s by name"));
        return vec![];
    };
    let mut out = Vec::with_capacity(map.len());
    for (name, inner) in map {
        let here = format!("{place}.{name}");
        if !is_name(name) {
            problems.at(
                &here,
                format!("{what} name: a letter or _, then letters, digits or _ (at most 64)"),
            );
        } else if !inner.is_object() {
            problems.at(&here, format!("{what}: an object"));
        } else {
            out.push((here, inner));
        }
    }
    out
}

/// Checks a CMS document; `Ok` with its stored form (`pages` and `faqs`, both present), or
/// every problem with its place.
pub fn check(doc: &Json) -> Result<Json, Vec<String>> {
    let mut problems = Problems::default();
    let Some(top) = doc.as_object() else {
        return Err(vec![
            "the CMS document is an object with pages and faqs".into(),
        ]);
    };
    for key in top.keys() {
        if !matches!(key.as_str(), "pages" | "faqs" | "changelog") {
            problems.at(key, "unknown field (pages, faqs, changelog)");
        }
    }
    if top.get("pages").and_then(|p| p.get("faq")).is_some() {
        problems.at(
            "pages.faq",
            "faq is the FAQ tables' name (cms.faq.<label>): name the page otherwise",
        );
    }
    for (page, forms) in named(top.get("pages"), "pages", "page", &mut problems) {
        for (form, elements) in named(Some(forms), &page, "form", &mut problems) {
            for (element, e) in named(Some(elements), &form, "element", &mut problems) {
                check_element(
                    &element,
                    e.as_object().expect("named objects"),
                    &mut problems,
                );
            }
        }
    }
    let faqs = named(top.get("faqs"), "faqs", "FAQ label", &mut problems);
    if faqs.len() > botbox_nlu::model::MAX_LABELS {
        problems.at(
            "faqs",
            format!(
                "at most {} FAQ labels (the labels of one NLU trait)",
                botbox_nlu::model::MAX_LABELS
            ),
        );
    }
    for (label, faq) in faqs {
        check_faq(
            &label,
            faq.as_object().expect("named objects"),
            &mut problems,
        );
    }
    if !problems.0.is_empty() {
        return Err(problems.0);
    }
    Ok(json!({
        "pages": top.get("pages").cloned().unwrap_or_else(|| json!({})),
        "faqs": top.get("faqs").cloned().unwrap_or_else(|| json!({})),
    }))
}

fn check_element(place: &str, e: &Map<String, Json>, problems: &mut Problems) {
    let Some(kind) = e.get("type").and_then(Json::as_str) else {
        problems.at(
            place,
            format!("type is required: one of {}", ELEMENT_TYPES.join(", ")),
        );
        return;
    };
    let allowed: &[&str] = match kind {
        "slider" => &["type", "value", "min", "max", "step", "label"],
        "dropdown" => &["type", "value", "options", "label"],
        _ => &["type", "value", "label"],
    };
    for key in e.keys().filter(|k| !allowed.contains(&k.as_str())) {
        problems.at(place, format!("unknown field {key} for a {kind} element"));
    }
    let value = e.get("value").unwrap_or(&Json::Null);
    let text_of = |max: usize, problems: &mut Problems| match value.as_str() {
        Some(s) if s.chars().count() > max => {
            problems.at(place, format!("a {kind} value is at most {max} characters"))
        }
        Some(_) => {}
        None => problems.at(place, format!("a {kind} value is text")),
    };
    match kind {
        "text" => text_of(MAX_TEXT, problems),
        "textarea" => text_of(MAX_TEXTAREA, problems),
        "textlist" => {
            if !value.as_array().is_some_and(|a| {
                a.iter()
                    .all(|v| v.as_str().is_some_and(|s| s.chars().count() <= MAX_TEXT))
            }) {
                problems.at(
                    place,
                    format!("a textlist value is a list of texts of at most {MAX_TEXT} characters"),
                );
            }
        }
        "toggle" => {
            if !value.is_boolean() {
                problems.at(place, "a toggle value is true or false");
            }
        }
        "slider" => check_slider(place, e, value, problems),
        "dropdown" => check_dropdown(place, e, value, problems),
        other => problems.at(
            place,
            format!(
                "unknown type {other:?}: one of {}",
                ELEMENT_TYPES.join(", ")
            ),
        ),
    }
}

fn check_slider(place: &str, e: &Map<String, Json>, value: &Json, problems: &mut Problems) {
    let bound = |key: &str, default: f64, problems: &mut Problems| match e.get(key) {
        None => Some(default),
        Some(v) => v.as_f64().or_else(|| {
            problems.at(place, format!("a slider's {key} is a number"));
            None
        }),
    };
    let (min, max) = (bound("min", 0.0, problems), bound("max", 100.0, problems));
    let Some(v) = value.as_f64() else {
        problems.at(place, "a slider value is a number");
        return;
    };
    if let (Some(min), Some(max)) = (min, max) {
        if min > max {
            problems.at(
                place,
                format!("a slider's min ({min}) is above its max ({max})"),
            );
        } else if !(min..=max).contains(&v) {
            problems.at(
                place,
                format!("the value {v} is outside the slider's range {min} to {max}"),
            );
        }
    }
}

fn check_dropdown(place: &str, e: &Map<String, Json>, value: &Json, problems: &mut Problems) {
    let Some(options) = e
        .get("options")
        .and_then(Json::as_array)
        .filter(|o| !o.is_empty() && o.iter().all(Json::is_string))
    else {
        problems.at(place, "a dropdown has options: a non-empty list of texts");
        return;
    };
    if !options.contains(value) {
        let list: Vec<&str> = options.iter().filter_map(Json::as_str).collect();
        problems.at(
            place,
            format!(
                "the value {value} is not among the options ({})",
                list.join(", ")
            ),
        );
    }
}

fn check_faq(place: &str, faq: &Map<String, Json>, problems: &mut Problems) {
    for key in faq
        .keys()
        .filter(|k| !matches!(k.as_str(), "questions" | "answers"))
    {
        problems.at(place, format!("unknown field {key} (questions, answers)"));
    }
    for key in ["questions", "answers"] {
        let ok = faq.get(key).and_then(Json::as_array).is_some_and(|a| {
            !a.is_empty()
                && a.iter().all(|v| {
                    v.as_str()
                        .is_some_and(|s| !s.trim().is_empty() && s.chars().count() <= MAX_TEXT)
                })
        });
        if !ok {
            problems.at(place, format!("{key}: a non-empty list of non-empty texts"));
        }
    }
}

/// The id of a new revision: 40 hex characters of SHA-256 over the project, the revision it
/// follows, the document and the changelog, so publishing the same content again is a new
/// revision of its own.
pub fn revision_id(
    project_id: &str,
    previous: Option<&str>,
    document: &str,
    changelog: &str,
) -> String {
    let h = Sha256::digest(
        format!(
            "{project_id}\n{}\n{document}\n{changelog}",
            previous.unwrap_or("")
        )
        .as_bytes(),
    );
    hex::encode(&h[..20])
}

/// Why a publish was refused.
#[derive(Debug)]
pub enum PublishError {
    /// The document's problems, each at its place.
    Invalid(Vec<String>),
    Db(botbox_store::DbError),
}

impl From<botbox_store::DbError> for PublishError {
    fn from(e: botbox_store::DbError) -> Self {
        PublishError::Db(e)
    }
}

/// Validates `doc` and stores it as the project's newest CMS revision, published by `who`.
/// `previous` is the project's latest revision (the chain the id is computed on).
pub async fn publish(
    db: &Db,
    project_id: &str,
    previous: Option<&str>,
    doc: &Json,
    changelog: &str,
    who: &str,
) -> Result<CmsRevisionRow, PublishError> {
    let stored = check(doc).map_err(PublishError::Invalid)?;
    let text = serde_json::to_string(&stored).expect("JSON serialises");
    let id = revision_id(project_id, previous, &text, changelog);
    Ok(db
        .insert_cms_revision(project_id, &id, &text, changelog, who)
        .await?)
}

/// How publishing a revision retrained one NLU of the project on its FAQ tables.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FaqTraining {
    /// The NLU's name.
    pub nlu: String,
    /// `success` (the new model is in use), `failed`, `training` (still running after the
    /// wait) or `queued` (another training ran; it trains again when that one ends).
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Publishes `doc` as the project's newest revision (as [`publish`]) and, when its FAQ tables differ from those of the
/// revision it follows, trains every NLU of the project again so that the `faq` trait
/// follows them, waiting up to `wait` for each training.
pub async fn publish_and_train(
    db: &Db,
    nlus: &Arc<NluService>,
    project: &ProjectRow,
    doc: &Json,
    changelog: &str,
    who: &str,
    wait: Duration,
) -> Result<(CmsRevisionRow, Vec<FaqTraining>), PublishError> {
    let (project_id, previous) = (&project.id, project.cms_latest_revision.as_deref());
    let before = match previous {
        Some(rev) => db
            .cms_revision(project_id, rev)
            .await?
            .map(|r| faqs_of(&r.document)),
        None => None,
    };
    let row = publish(db, project_id, previous, doc, changelog, who).await?;
    let after = faqs_of(&row.document);
    if before.unwrap_or_else(|| json!({})) == after {
        return Ok((row, vec![]));
    }
    let mut trainings = Vec::new();
    for nlu in db.project_nlus(project_id, 1000, 0).await?.items {
        let name = nlu.name.clone();
        let mut t = FaqTraining {
            nlu: name,
            status: "queued",
            revision: None,
            error: None,
        };
        if let Some(rx) = nlus.train_soon(nlu).await {
            t.status = "training";
            match tokio::time::timeout(wait, rx).await {
                Ok(Ok(Trained::Done { revision })) => {
                    t.status = "success";
                    t.revision = Some(revision);
                }
                Ok(Ok(Trained::Failed(e))) => {
                    t.status = "failed";
                    t.error = Some(e);
                }
                Ok(Err(_)) | Err(_) => {}
            }
        }
        trainings.push(t);
    }
    Ok((row, trainings))
}

/// The FAQ tables of a stored document (`{}` when it has none or cannot be read).
fn faqs_of(document: &str) -> Json {
    serde_json::from_str::<Json>(document)
        .ok()
        .and_then(|mut d| d.get_mut("faqs").map(Json::take))
        .unwrap_or_else(|| json!({}))
}

/// A stored CMS document as bots read it (`cms`): its pages by name, and its FAQ tables
/// under `faq`.
pub fn bot_view(document: &str) -> Result<Json, serde_json::Error> {
    Ok(runtime_core::model::cms_view(serde_json::from_str(
        document,
    )?))
}

/// Warnings for the CMS content a bot document names (`cms.<page>.<form>.<element>`) that
/// the project's latest CMS revision `latest` lacks (all of it when there is none), each at
/// its place in the document: said at push, since such a value reads as empty.
pub async fn missing_references(
    db: &Db,
    project_id: &str,
    latest: Option<&str>,
    bot: &Json,
) -> DbResult<Vec<runtime_core::source::Problem>> {
    let refs = runtime_core::compile::cms_references(bot);
    if refs.is_empty() {
        return Ok(vec![]);
    }
    let pages = match latest {
        Some(rev) => db
            .cms_revision(project_id, rev)
            .await?
            .and_then(|r| bot_view(&r.document).ok()),
        None => None,
    };
    let has = |[p, f, e]: &[String; 3]| {
        pages
            .as_ref()
            .and_then(|pg| pg.get(p)?.get(f)?.get(e))
            .is_some()
    };
    Ok(refs
        .iter()
        .filter(|(_, r)| !has(r))
        .map(|(path, r)| runtime_core::compile::cms_missing_warning(path, r, latest))
        .collect())
}

/// The empty document a project made with `options.cms` starts with, so that every client
/// finds a revision to deploy.
pub async fn publish_initial(db: &Db, project_id: &str, who: &str) -> DbResult<CmsRevisionRow> {
    let doc = json!({"pages": {}, "faqs": {}});
    match publish(db, project_id, None, &doc, "initial (empty)", who).await {
        Ok(row) => Ok(row),
        Err(PublishError::Db(e)) => Err(e),
        Err(PublishError::Invalid(p)) => unreachable!("the empty document is valid: {p:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_document_keeps_its_pages_and_faqs() {
        let doc = json!({
            "pages": {"home": {"greeting": {
                "text": {"type": "text", "value": "Hello!"},
                "body": {"type": "textarea", "value": "A longer text"},
                "tags": {"type": "textlist", "value": ["a", "b"]},
                "size": {"type": "slider", "value": 3, "min": 1, "max": 5},
                "color": {"type": "dropdown", "value": "red", "options": ["red", "blue"]},
                "open": {"type": "toggle", "value": true}
            }}},
            "faqs": {"hours": {"questions": ["when are you open"], "answers": ["9 to 5"]}},
            "changelog": "first"
        });
        let stored = check(&doc).unwrap();
        assert_eq!(stored["pages"], doc["pages"]);
        assert_eq!(stored["faqs"], doc["faqs"]);
        assert!(stored.get("changelog").is_none());
        assert_eq!(check(&json!({})).unwrap(), json!({"pages": {}, "faqs": {}}));
    }

    #[test]
    fn every_problem_is_named_at_its_page_form_and_element() {
        let doc = json!({
            "pages": {"home": {"greeting": {
                "a": {"type": "video", "value": "x"},
                "b": {"type": "slider", "value": 9, "min": 1, "max": 5},
                "c": {"type": "dropdown", "value": "green", "options": ["red", "blue"]},
                "d": {"type": "toggle", "value": "yes"},
                "e": {"type": "text", "value": "x", "colour": "red"},
                "bad-name": {"type": "text", "value": "x"}
            }}, "faq": {}},
            "faqs": {"hours": {"questions": [], "answers": ["9 to 5"]}},
            "extra": 1
        });
        let problems = check(&doc).unwrap_err();
        let expect = [
            "pages.home.greeting.a: unknown type \"video\"",
            "pages.home.greeting.b: the value 9 is outside the slider's range 1 to 5",
            "pages.home.greeting.c: the value \"green\" is not among the options (red, blue)",
            "pages.home.greeting.d: a toggle value is true or false",
            "pages.home.greeting.e: unknown field colour for a text element",
            "pages.home.greeting.bad-name: element name: a letter",
            "pages.faq: faq is the FAQ tables' name",
            "faqs.hours: questions: a non-empty list of non-empty texts",
            "extra: unknown field",
        ];
        for e in expect {
            assert!(
                problems.iter().any(|p| p.starts_with(e)),
                "{e} not in {problems:#?}"
            );
        }
        assert_eq!(problems.len(), expect.len(), "{problems:#?}");
    }

    #[test]
    fn ids_follow_the_chain() {
        let a = revision_id("p", None, "{}", "x");
        assert_eq!(a.len(), 40);
        assert_eq!(a, revision_id("p", None, "{}", "x"));
        assert_ne!(a, revision_id("p", Some(&a), "{}", "x"));
        assert_ne!(a, revision_id("q", None, "{}", "x"));
    }
}
