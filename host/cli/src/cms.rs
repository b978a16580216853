//! `botbox cms pull` and `botbox cms push`: the CMS of the bot's project as a `cms.yml` file
//! beside `bot.yml` (the project is the one the folder is bound to, as for `deploy`).
//! `push` publishes the file as a new revision; `pull` writes the latest one.

use super::commands::CmsAction;
use super::{Ctx, project_id_of};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value as Json, json};
use std::path::Path;

/// The file in a bot folder that holds its CMS content.
pub const CMS_FILE: &str = "cms.yml";

/// `cms pull [--force]` and `cms push [-m changelog]`.
pub fn cms_cmd(ctx: &Ctx, dir: &Path, action: CmsAction) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    let file = dir.join(CMS_FILE);
    match action {
        CmsAction::Pull { force } => {
            if file.exists() && !force {
                bail!(
                    "{} exists: give --force to overwrite it with the project's latest CMS revision",
                    file.display()
                );
            }
            let latest = ctx.call("GET", &format!("/projects/{pid}/cms"), None)?;
            let doc = json!({"pages": latest["pages"], "faqs": latest["faqs"]});
            std::fs::write(&file, serde_yaml::to_string(&doc)?)
                .with_context(|| format!("writing {}", file.display()))?;
            let rev = latest["revision"].as_str().unwrap_or("");
            ctx.out(
                format!("wrote {} (CMS revision {rev})", file.display()),
                json!({"file": file, "revision": rev}),
            );
        }
        CmsAction::Push { message } => {
            let text = std::fs::read_to_string(&file).with_context(|| {
                format!("reading {} (`botbox cms pull` writes it)", file.display())
            })?;
            let yaml: serde_yaml::Value =
                serde_yaml::from_str(&text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
            let mut doc: Json = serde_json::to_value(yaml)?;
            if let (Some(o), Some(m)) = (doc.as_object_mut(), message) {
                o.insert("changelog".into(), json!(m));
            }
            let out = ctx
                .call(
                    "POST",
                    &format!("/projects/{pid}/cms/revisions"),
                    Some(&doc),
                )
                .map_err(|e| match format!("{e:#}") {
                    m if m.contains("has no CMS") => anyhow!(
                        "{}: the project has no CMS; `botbox cms enable` turns it on",
                        file.display()
                    ),
                    m => anyhow!("{}: {m}", file.display()),
                })?;
            ctx.out(
                format!(
                    "Published {} as CMS revision {}; `botbox deploy` runs it",
                    file.display(),
                    out["revision"].as_str().unwrap_or("")
                ),
                out,
            );
        }
        CmsAction::Enable => {
            let p = ctx.call(
                "PUT",
                &format!("/projects/{pid}"),
                Some(&json!({"options": {"cms": true}})),
            )?;
            ctx.out(
                format!(
                    "The CMS of project {} is on (latest revision {})",
                    p["name"].as_str().unwrap_or(&pid),
                    p["cmsLatestRevision"].as_str().unwrap_or("")
                ),
                p,
            );
        }
    }
    Ok(())
}
