//! Creating a project: its row, and what its options ask for, made with it. A bot project
//! starts with an empty revision (version 0.0.0, no compiled form: it cannot be deployed),
//! a CMS project with an empty CMS revision, an NLU project with its NLU (named after the
//! project) and that NLU's initial model: every client, kata-cli's included, finds a
//! revision of each to deploy.

use crate::error::ServiceError;
use crate::live::Live;
use crate::nlu::check_nlu_lang;
use crate::revisions::revision_id;
use botbox_store::{DbError, NewProject, ProjectRow};
use serde_json::json;

/// What a new project is, as the API checked it.
pub struct NewProjectSpec<'a> {
    pub owner_id: &'a str,
    /// The owner as people read it, for messages.
    pub owner_shown: &'a str,
    pub name: &'a str,
    pub label: Option<String>,
    pub description: Option<String>,
    /// The options as stored (JSON).
    pub options: String,
    pub bot: bool,
    pub cms: bool,
    /// `(language, visibility)` of the project's NLU, when it has one.
    pub nlu: Option<(&'a str, &'a str)>,
    /// Who creates it (the CMS revision's author).
    pub who: &'a str,
}

/// Creates the project and what its options ask for; the answer is its row as stored after
/// (with the revisions just made).
pub async fn create(live: &Live, spec: NewProjectSpec<'_>) -> Result<ProjectRow, ServiceError> {
    if let Some((lang, _)) = spec.nlu {
        check_nlu_free(live, &spec, lang).await?;
    }
    let row = live
        .db
        .insert_project(&NewProject {
            owner_id: spec.owner_id.to_owned(),
            name: spec.name.to_owned(),
            label: spec.label.clone(),
            description: spec.description.clone(),
            options: spec.options.clone(),
        })
        .await
        .map_err(|e| match e {
            DbError::Conflict => ServiceError::Conflict(format!(
                "{} already has a project named {}",
                spec.owner_shown, spec.name
            )),
            e => e.into(),
        })?;
    if spec.bot {
        store_empty_revision(live, &row, spec.name).await?;
    }
    if spec.cms {
        crate::cms::publish_initial(&live.db, &row.id, spec.who).await?;
    }
    if let Some((lang, visibility)) = spec.nlu {
        live.nlu
            .create_for_project(&row.id, spec.owner_id, spec.name, lang, visibility)
            .await?;
    }
    Ok(live.db.project(&row.id).await?.unwrap_or(row))
}

/// The project's NLU is named after it (bots address it as `<account>:<name>`): its
/// language must read as one, and the owner must have no NLU of that name.
async fn check_nlu_free(
    live: &Live,
    spec: &NewProjectSpec<'_>,
    lang: &str,
) -> Result<(), ServiceError> {
    check_nlu_lang(lang)?;
    if live.db.owner_nlu(spec.owner_id, spec.name).await?.is_some() {
        return Err(ServiceError::Conflict(format!(
            "an NLU named {} already exists for {}",
            spec.name, spec.owner_shown
        )));
    }
    Ok(())
}

/// The empty first revision of a bot project: kata-cli pushes on top of the latest
/// revision, and `botLatestRevision` is documented as a string.
async fn store_empty_revision(
    live: &Live,
    row: &ProjectRow,
    name: &str,
) -> Result<(), ServiceError> {
    let source = json!({"id": row.id, "name": name, "version": "0.0.0", "flows": {}}).to_string();
    let revision = revision_id(&row.id, &source);
    live.db
        .insert_revision(
            &row.id,
            &revision,
            "0.0.0",
            &source,
            "",
            ("[]", None, "system"),
        )
        .await?;
    Ok(())
}
