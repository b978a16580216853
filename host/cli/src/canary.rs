//! `botbox canary status|promote|abort`, `botbox audit` and `botbox history`: an environment's
//! canary, the audit trail of who changed what, and who made each revision and deployment.

use super::{Ctx, enc, find_env, listing, project, time_text};
use anyhow::{Result, anyhow};
use botbox_api_types::{AuditEntry, Canary, Deployment, Environment, PageOf, RevisionSummary};
use std::path::Path;

use crate::commands::{AuditArgs, CanaryAction};

/// A rate as people read it: `2.5 %`.
fn pct(r: f64) -> String {
    format!("{:.1} %", r * 100.0)
}

/// The lines `canary status` prints for a running canary.
pub fn canary_lines(c: &Canary) -> Vec<String> {
    vec![
        format!(
            "canary {} for {} % of users, {} for the rest (started {} by {})",
            c.dep_version,
            c.share,
            c.control.dep_version,
            time_text(c.started_at),
            c.started_by
        ),
        format!(
            "  {:<12} {:>8} messages  errors {:>7}  fallbacks {:>7}",
            c.dep_version,
            c.messages,
            pct(c.error_rate),
            pct(c.fallback_rate)
        ),
        format!(
            "  {:<12} {:>8} messages  errors {:>7}  fallbacks {:>7}",
            c.control.dep_version,
            c.control.messages,
            pct(c.control.error_rate),
            pct(c.control.fallback_rate)
        ),
        format!(
            "  rolls back after {} messages at errors over {} or fallbacks {} over the control's",
            c.rollback.min_messages,
            pct(c.rollback.max_error_rate),
            pct(c.rollback.max_fallback_increase)
        ),
    ]
}

fn status_text(e: &Environment) -> String {
    let mut lines = match &e.canary {
        Some(c) => canary_lines(c),
        None => vec![format!(
            "no canary: environment {} runs {} for everyone",
            e.name, e.deployment_version
        )],
    };
    if let Some(l) = &e.last_canary {
        lines.push(format!(
            "last canary: {} {} at {} by {}{}",
            l.dep_version,
            l.outcome,
            time_text(l.ended_at),
            l.ended_by,
            l.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ));
    }
    lines.join("\n")
}

/// `canary status|promote|abort` on environment `env` of the folder's project.
pub fn canary_cmd(ctx: &Ctx, dir: &Path, env: &str, action: CanaryAction) -> Result<()> {
    let p = project::of_folder(ctx, dir)?;
    let e = find_env(ctx, &p.id, env)?
        .ok_or_else(|| anyhow!("project {} has no environment {env}", project::describe(&p)))?;
    let base = format!("/projects/{}/environments/{}", enc(&p.id), enc(&e.id));
    let e: Environment = match action {
        CanaryAction::Status => ctx.call_as("GET", &base, None)?,
        CanaryAction::Promote => ctx.call_as("POST", &format!("{base}/canary/promote"), None)?,
        CanaryAction::Abort => ctx.call_as("DELETE", &format!("{base}/canary"), None)?,
    };
    let text = format!(
        "environment {} of project {}\n{}",
        e.name,
        project::describe(&p),
        status_text(&e)
    );
    ctx.out(text, super::to_json(&e));
    Ok(())
}

/// `botbox audit`: the project's entries (of the folder, or `--project`), or with `--all`
/// every entry the caller may see; newest first.
pub fn audit(ctx: &Ctx, a: AuditArgs) -> Result<()> {
    let mut query = format!("/audit?limit={}", a.limit.clamp(1, 1000));
    let scope = if a.all {
        "everything you may see".to_owned()
    } else {
        let p = project::of_folder(ctx, &a.dir)?;
        query += &format!("&projectId={}", enc(&p.id));
        format!("project {}", project::describe(&p))
    };
    for (name, v) in [("action", &a.action), ("actor", &a.actor)] {
        if let Some(v) = v {
            query += &format!("&{name}={}", enc(v));
        }
    }
    if let Some(h) = a.since_hours {
        let since = now_ms() - (h as i64) * 3_600_000;
        query += &format!("&since={since}");
    }
    let page: PageOf<AuditEntry> = ctx.call_as("GET", &query, None)?;
    let lines: Vec<String> = page.data.iter().map(entry_line).collect();
    let text = format!(
        "audit trail of {scope} ({} of {})\n{}",
        page.data.len(),
        page.total,
        listing(lines, "No entries.")
    );
    ctx.out(text, super::to_json(&page));
    Ok(())
}

fn entry_line(e: &AuditEntry) -> String {
    let who = match &e.actor.owner {
        Some(o) => format!("{} ({o})", e.actor.name),
        None => e.actor.name.clone(),
    };
    format!(
        "{}  {:<8} {:<22} {} {}  by {who} from {}{}",
        time_text(e.at),
        e.outcome,
        e.action,
        e.resource.kind,
        e.resource.id,
        if e.address.is_empty() {
            "-"
        } else {
            &e.address
        },
        e.detail
            .as_deref()
            .map(|d| format!("  ({d})"))
            .unwrap_or_default()
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `botbox history`: the project's latest bot revisions and deployment versions, newest
/// first, each with who made it, and where each version runs.
pub fn history(ctx: &Ctx, dir: &Path, limit: u32) -> Result<()> {
    let p = project::of_folder(ctx, dir)?;
    let pid = enc(&p.id);
    let n = limit.clamp(1, 100);
    let revs: PageOf<RevisionSummary> = ctx.call_as(
        "GET",
        &format!("/projects/{pid}/bot/revisions?limit={n}"),
        None,
    )?;
    let deps: PageOf<Deployment> = ctx.call_as(
        "GET",
        &format!("/projects/{pid}/deployment/versions?limit={n}"),
        None,
    )?;
    let envs: PageOf<Environment> = ctx.call_as(
        "GET",
        &format!("/projects/{pid}/environments?limit=100"),
        None,
    )?;
    let who = |w: &Option<String>| w.clone().unwrap_or_else(|| "-".into());
    let mut lines = vec![
        format!("project {}", project::describe(&p)),
        "bot revisions:".into(),
    ];
    lines.extend(revs.data.iter().map(|r| {
        format!(
            "  {:<10} {}  {}  pushed by {}",
            r.version,
            r.revision,
            time_text(r.created_at),
            who(&r.pushed_by)
        )
    }));
    lines.push("deployment versions:".into());
    lines.extend(deps.data.iter().map(|d| {
        let runs: Vec<&str> = envs
            .data
            .iter()
            .filter(|e| e.deployment_version == d.version)
            .map(|e| e.name.as_str())
            .collect();
        let runs = match runs.is_empty() {
            true => String::new(),
            false => format!("  runs in {}", runs.join(", ")),
        };
        format!(
            "  {:<10} revision {}  deployed by {}{runs}",
            d.version,
            d.bot_revision,
            who(&d.deployed_by)
        )
    }));
    let json =
        serde_json::json!({"project": p.id, "revisions": revs.data, "deployments": deps.data});
    ctx.out(lines.join("\n"), json);
    Ok(())
}
