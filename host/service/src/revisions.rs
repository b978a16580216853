//! Publishing a bot revision: the storage quota, the version (given, or the next patch),
//! the size cap, validation and compilation, the JavaScript syntax check in the sandbox,
//! the warnings a bot author should see at push time (NLUs it may not use, CMS content the
//! latest CMS revision lacks), and the stored revision whose id is a hash of its source.
//! One function per step; [`publish`] runs them in order and stores nothing unless every
//! step passed.

use crate::cpu::CpuJobs;
use crate::error::ServiceError;
use crate::live::{Live, LiveError};
use botbox_store::{DbError, ProjectRow};
use runtime_core::source::Severity;
use serde_json::{Map, Value as Json, json};
use sha2::{Digest, Sha256};

/// How a push names its version.
pub struct PublishOptions {
    /// A version that exists becomes the next patch version (with a warning) instead of a
    /// conflict: kata-cli's push keeps the pulled version in bot.yml.
    pub bump: bool,
    /// The largest bot accepted, in bytes of JSON.
    pub bot_limit: usize,
    /// Who pushes it ([`crate::audit::Actor::label`]), stored as the revision's `pushedBy`.
    pub pushed_by: String,
}

/// Validates, compiles and stores a new revision of `project`. The answer is the stored bot
/// with its `revision` id and `warnings`.
pub async fn publish(
    live: &Live,
    cpu: &CpuJobs,
    project: &ProjectRow,
    mut bot: Json,
    opts: PublishOptions,
) -> Result<Json, ServiceError> {
    crate::quota::check(live, &project.owner_id).await?;
    let doc = bot
        .as_object_mut()
        .ok_or_else(|| ServiceError::Invalid("body: a Bot object is expected".into()))?;
    let versions = live.db.revision_versions(&project.id).await?;
    let version = choose_version(doc, &project.id, &versions, opts.bump)?;
    let source = serde_json::to_string(&bot).expect("json serialises");
    if source.len() > opts.bot_limit {
        return Err(ServiceError::Invalid(format!(
            "the bot is {} bytes of JSON; at most {} are accepted",
            source.len(),
            opts.bot_limit
        )));
    }
    let (mut bot, compiled, compiled_json) = compile(cpu, bot).await?;
    check_javascript(live, project, &compiled).await?;
    let mut warnings: Vec<String> = compiled.warnings.iter().map(|w| w.to_string()).collect();
    if let Some(old) = &version.bumped {
        warnings.push(format!(
            "version: {old} already exists; this revision is version {}",
            version.name
        ));
    }
    warnings.extend(unusable_references(live, project, &bot).await?);
    let revision = revision_id(&project.id, &source);
    let desc = bot.get("desc").and_then(Json::as_str);
    live.db
        .insert_revision(
            &project.id,
            &revision,
            &version.name,
            &source,
            &compiled_json,
            (&json!(warnings).to_string(), desc, &opts.pushed_by),
        )
        .await
        .map_err(|e| match e {
            DbError::Conflict => version.exists(&project.id),
            e => e.into(),
        })?;
    let doc = bot.as_object_mut().expect("checked above");
    doc.insert("revision".into(), json!(revision));
    doc.insert("warnings".into(), json!(warnings));
    Ok(bot)
}

/// A revision's id: a hash of its project and its source, so the same bot pushed twice to
/// one project has one id.
pub fn revision_id(project_id: &str, source: &str) -> String {
    hex::encode(&Sha256::digest(format!("{project_id}\n{source}"))[..20])
}

/// The version a revision gets, and the one it was bumped from.
struct Version {
    name: String,
    bumped: Option<String>,
}

impl Version {
    fn exists(&self, project_id: &str) -> ServiceError {
        ServiceError::Conflict(format!(
            "bot version {} already exists in project {project_id}",
            self.name
        ))
    }
}

/// Sets the document's `id` and `version` (given, or the next patch after the highest) and
/// drops what the server writes itself (`revision`, `warnings`).
fn choose_version(
    doc: &mut Map<String, Json>,
    project_id: &str,
    versions: &[String],
    bump: bool,
) -> Result<Version, ServiceError> {
    for k in ["revision", "warnings"] {
        doc.remove(k);
    }
    doc.insert("id".into(), json!(project_id));
    let next = || next_patch(versions.iter().map(String::as_str));
    let version = match doc.get("version") {
        None | Some(Json::Null) => Version {
            name: next(),
            bumped: None,
        },
        Some(Json::String(v)) if !v.trim().is_empty() => match bump && versions.contains(v) {
            true => Version {
                name: next(),
                bumped: Some(v.clone()),
            },
            false => Version {
                name: v.clone(),
                bumped: None,
            },
        },
        Some(other) => {
            return Err(ServiceError::Invalid(format!(
                "version: a non-empty string is expected (got {other})"
            )));
        }
    };
    if versions.contains(&version.name) {
        return Err(version.exists(project_id));
    }
    doc.insert("version".into(), json!(version.name));
    Ok(version)
}

/// Validates and compiles on a CPU slot (work proportional to the bot); an invalid bot's
/// error lists every problem, one per line.
async fn compile(
    cpu: &CpuJobs,
    bot: Json,
) -> Result<(Json, runtime_core::Compiled, String), ServiceError> {
    let (bot, compiled) = cpu
        .run(move || {
            let compiled = runtime_core::compile(&bot).map(|c| {
                let json = serde_json::to_string(&c.bot).expect("bots serialise");
                (c, json)
            });
            (bot, compiled)
        })
        .await?;
    let (compiled, json) = compiled.map_err(|rejected| {
        ServiceError::Invalid(
            rejected
                .problems
                .iter()
                .map(|p| match p.severity {
                    Severity::Error => format!("error: {p}"),
                    Severity::Warning => format!("warning: {p}"),
                })
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })?;
    Ok((bot, compiled, json))
}

/// JavaScript is parsed in the sandbox (the host has no parser of its own): a syntax error
/// rejects the bot like any validation error, naming the method or expression.
async fn check_javascript(
    live: &Live,
    project: &ProjectRow,
    compiled: &runtime_core::Compiled,
) -> Result<(), ServiceError> {
    let problems = live
        .check_js(&project.owner_id, compiled.js_sites.clone())
        .await
        .map_err(|e| match e {
            LiveError::Step(m) => ServiceError::Invalid(format!(
                "error: the bot's JavaScript could not be checked: {m}"
            )),
            e => ServiceError::Internal(e.into()),
        })?;
    if problems.is_empty() {
        return Ok(());
    }
    Err(ServiceError::Invalid(
        problems
            .iter()
            .filter_map(|p| {
                let site = compiled.js_sites.get(p.site)?;
                Some(format!("error: {}", p.to_problem(site)))
            })
            .collect::<Vec<_>>()
            .join("\n"),
    ))
}

/// Warnings for what the bot names but cannot use: `nl` NLUs whose model it may not use
/// (missing, or another account's private one), and CMS content the latest CMS revision
/// lacks (it reads as empty).
async fn unusable_references(
    live: &Live,
    project: &ProjectRow,
    bot: &Json,
) -> Result<Vec<String>, ServiceError> {
    let mut warnings = vec![];
    let scope = botbox_sandbox::NlScope {
        owner: project.owner_id.as_str().into(),
        project: project.id.as_str().into(),
        pin: None,
    };
    for (path, name, nlu_id) in runtime_core::compile::nl_references(bot) {
        if let Err(why) = live.nlu.resolve(&scope, &nlu_id).await {
            let w = runtime_core::compile::nl_unavailable_warning(&path, &name, &nlu_id, &why);
            warnings.push(w.to_string());
        }
    }
    let latest_cms = project.cms_latest_revision.as_deref();
    for w in crate::cms::missing_references(&live.db, &project.id, latest_cms, bot).await? {
        warnings.push(w.to_string());
    }
    Ok(warnings)
}

/// The next patch version after the highest `a.b.c` version of `existing`.
pub fn next_patch<'a>(existing: impl IntoIterator<Item = &'a str>) -> String {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut it = v.split('.').map(|p| p.parse::<u64>().ok());
        let out = (it.next()??, it.next()??, it.next()??);
        it.next().is_none().then_some(out)
    };
    match existing.into_iter().filter_map(parse).max() {
        Some((a, b, c)) => format!("{a}.{b}.{}", c + 1),
        None => "0.0.1".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_patch_follows_the_highest_version() {
        assert_eq!(next_patch([]), "0.0.1");
        assert_eq!(next_patch(["1.0.0", "1.2.9", "1.10.0", "x"]), "1.10.1");
        assert_eq!(next_patch(["draft"]), "0.0.1");
    }
}
