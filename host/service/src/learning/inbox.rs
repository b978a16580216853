//! The misunderstood inbox's rules: an environment's groups as the author sees them, and
//! what labelling and dismissing do. Labelling adds every distinct text of the group to one
//! of the project's NLUs with the label (the next training learns them); it trains nothing.

use crate::error::ServiceError;
use crate::nlu::{MAX_TRAINING_ROWS, entities_of};
use botbox_nlu::model::{EntitySpec, check_row_entities};
use botbox_nlu::{TrainingData, TrainingEntity};
use botbox_store::{Db, InboxDecision, InboxGroup, NluRow, Page};
use std::collections::{BTreeMap, HashSet};

/// One group of the inbox as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxItem {
    /// The group's id: a hash of its normalised text.
    pub id: String,
    /// The normalised text.
    pub text: String,
    pub count: i64,
    pub first_seen: i64,
    pub last_seen: i64,
    pub intent: Option<String>,
    pub flow: Option<String>,
    /// `new`, `labelled` or `dismissed`.
    pub status: String,
    pub sample_user_id: String,
    /// For a labelled group: the NLU and the label it was given.
    pub nlu: Option<String>,
    pub label: Option<String>,
}

impl From<InboxGroup> for InboxItem {
    fn from(g: InboxGroup) -> InboxItem {
        InboxItem {
            text: super::normalize(&text_of(&g.sample)),
            id: g.miss,
            count: g.count,
            first_seen: g.first_seen,
            last_seen: g.last_seen,
            intent: g.intent,
            flow: g.flow,
            status: g.status,
            sample_user_id: g.sample_user,
            nlu: g.nlu_id,
            label: g.label,
        }
    }
}

/// A message's text, from its JSON as transcripts store it.
fn text_of(message: &str) -> String {
    serde_json::from_str::<serde_json::Value>(message)
        .ok()
        .and_then(|m| m.get("content")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The statuses a list may be filtered by.
pub const STATUSES: [&str; 3] = ["new", "labelled", "dismissed"];

/// A page of environment `env`'s groups, most frequent first.
pub async fn list(
    db: &Db,
    env: &str,
    status: Option<&str>,
    paging: (i64, i64),
) -> Result<Page<InboxItem>, ServiceError> {
    if let Some(s) = status.filter(|s| !STATUSES.contains(s)) {
        return Err(ServiceError::Invalid(format!(
            "status {s:?} is not one of {}",
            STATUSES.join(", ")
        )));
    }
    let page = db.inbox().list(env, status, paging).await?;
    Ok(Page {
        total: page.total,
        items: page.items.into_iter().map(InboxItem::from).collect(),
    })
}

/// What the author decided about a group.
#[derive(Debug, Clone)]
pub enum Decision {
    Dismiss,
    /// Label the group's texts with `label` of `entity` (a trait entity of NLU `nlu`; when
    /// `None`, the NLU's one trait entity that has that label), and mark the `spans` (an
    /// entity and the text it covers) wherever that text occurs in a message.
    Label {
        nlu: String,
        label: String,
        entity: Option<String>,
        spans: Vec<(String, String)>,
    },
}

/// Records `decision` about group `id` of environment `env` of `project` by `who`; for a
/// label, adds the texts to the NLU first. `None` when the group has no line kept.
pub async fn decide(
    db: &Db,
    (project, env): (&str, &str),
    id: &str,
    decision: &Decision,
    who: &str,
) -> Result<Option<InboxItem>, ServiceError> {
    if db.inbox().group(env, id).await?.is_none() {
        return Ok(None);
    }
    let (status, nlu_id, label) = match decision {
        Decision::Dismiss => ("dismissed", None, None),
        Decision::Label {
            nlu,
            label,
            entity,
            spans,
        } => {
            let nlu = project_nlu(db, project, nlu).await?;
            let texts = group_texts(db, env, id).await?;
            add_labelled(db, &nlu, &texts, (entity.as_deref(), label), spans).await?;
            ("labelled", Some(nlu.name), Some(label.as_str()))
        }
    };
    let d = InboxDecision {
        project_id: project,
        status,
        nlu_id: nlu_id.as_deref(),
        intent: label,
        by: who,
        at: botbox_store::now_ms(),
    };
    db.inbox().decide(env, id, &d).await?;
    Ok(db.inbox().group(env, id).await?.map(InboxItem::from))
}

/// The project's NLU named `name` (an `nluId` `<account>:<name>` names it too).
async fn project_nlu(db: &Db, project: &str, name: &str) -> Result<NluRow, ServiceError> {
    let short = name.split_once(':').map_or(name, |(_, n)| n);
    db.project_nlu(project, short).await?.ok_or_else(|| {
        ServiceError::Invalid(format!("nluId: {name} is not an NLU of this project"))
    })
}

/// The distinct texts of a group, as users typed them.
async fn group_texts(db: &Db, env: &str, id: &str) -> Result<Vec<String>, ServiceError> {
    let mut seen = HashSet::new();
    Ok(db
        .inbox()
        .messages(env, id)
        .await?
        .iter()
        .map(|m| text_of(m).trim().to_owned())
        .filter(|t| !t.is_empty() && seen.insert(t.clone()))
        .collect())
}

/// Adds each of `texts` not yet in `nlu`'s training data, labelled, in one transaction.
async fn add_labelled(
    db: &Db,
    nlu: &NluRow,
    texts: &[String],
    (entity, label): (Option<&str>, &str),
    spans: &[(String, String)],
) -> Result<usize, ServiceError> {
    let entities = entities_of(nlu).map_err(|e| ServiceError::Internal(anyhow::anyhow!(e)))?;
    let entity = trait_for(nlu, &entities, entity, label)?;
    let have: HashSet<String> = db
        .all_training_rows(&nlu.id)
        .await?
        .into_iter()
        .map(|r| r.input)
        .collect();
    let mut rows = vec![];
    for text in texts.iter().filter(|t| !have.contains(*t)) {
        let row = labelled_row(text, &entity, label, spans).with_ids();
        check_row_entities(&row, &entities)
            .map_err(|e| ServiceError::Invalid(format!("{text:?}: {e}")))?;
        let json = serde_json::to_string(&row.entities).expect("entities serialise");
        rows.push((row.input, json));
    }
    db.add_training_rows(&nlu.id, &rows, MAX_TRAINING_ROWS)
        .await?
        .map_err(|total| ServiceError::Invalid(crate::nlu::too_many_rows(&nlu.name, total)))?;
    Ok(rows.len())
}

/// The trait entity that `label` belongs to: the one named, or the NLU's only trait entity
/// listing that label.
fn trait_for(
    nlu: &NluRow,
    entities: &BTreeMap<String, EntitySpec>,
    named: Option<&str>,
    label: &str,
) -> Result<String, ServiceError> {
    if let Some(name) = named {
        return Ok(name.to_owned());
    }
    let traits: Vec<&String> = entities
        .iter()
        .filter(|(_, s)| s.kind == "trait")
        .filter(|(_, s)| {
            s.labels
                .as_ref()
                .is_none_or(|l| l.iter().any(|x| x == label))
        })
        .map(|(n, _)| n)
        .collect();
    match traits.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(ServiceError::Invalid(format!(
            "intent: {label:?} is not a label of a trait entity of NLU {}",
            nlu.name
        ))),
        many => Err(ServiceError::Invalid(format!(
            "entity: NLU {} has several trait entities that take {label:?} ({}); name one",
            nlu.name,
            many.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `text` labelled `label` of trait `entity`, with each span whose text occurs in it.
fn labelled_row(text: &str, entity: &str, label: &str, spans: &[(String, String)]) -> TrainingData {
    let len = text.chars().count();
    let mut entities = vec![TrainingEntity {
        id: None,
        entity: entity.to_owned(),
        label: Some(label.to_owned()),
        start: 0,
        end: len,
        value: text.to_owned(),
        belongs_to: None,
    }];
    let chars: Vec<char> = text.chars().collect();
    for (span_entity, value) in spans {
        let Some(start) = find_ignoring_case(&chars, value) else {
            continue;
        };
        // Offsets count characters; the span keeps the text as the user wrote it.
        let end = start + value.chars().count();
        entities.push(TrainingEntity {
            id: None,
            entity: span_entity.clone(),
            label: None,
            start,
            end,
            value: chars[start..end].iter().collect(),
            belongs_to: None,
        });
    }
    TrainingData {
        input: text.to_owned(),
        entities,
    }
}

/// The first character offset in `text` where `value` occurs, case aside.
fn find_ignoring_case(text: &[char], value: &str) -> Option<usize> {
    let value: Vec<char> = value.chars().collect();
    if value.is_empty() || value.len() > text.len() {
        return None;
    }
    let same = |a: char, b: char| a == b || a.to_lowercase().eq(b.to_lowercase());
    (0..=text.len() - value.len()).find(|&i| {
        text[i..i + value.len()]
            .iter()
            .zip(&value)
            .all(|(a, b)| same(*a, *b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_labelled_row_spans_the_sentence_and_finds_each_span_in_it() {
        let spans = [("size".to_owned(), "large".to_owned())];
        let row = labelled_row("A LARGE pizza, émile", "intent", "order", &spans);
        assert_eq!(row.entities[0].end, 20);
        assert_eq!(row.entities[0].label.as_deref(), Some("order"));
        let span = &row.entities[1];
        assert_eq!((span.start, span.end, span.value.as_str()), (2, 7, "LARGE"));
        let none = labelled_row("a pizza", "intent", "order", &spans);
        assert_eq!(none.entities.len(), 1);
    }
}
