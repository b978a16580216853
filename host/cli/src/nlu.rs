//! `botbox nlu create|train|predict`: the NL Studio NLUs of the bot folder's project (the
//! project the folder is bound to, as for `deploy`). `train` sends a file in the line format
//! (`I want pepperoni #intent:order`, one sentence a line) and trains; `predict` prints each
//! sentence's entities with their scores.

use super::commands::NluAction;
use super::{Ctx, project_id_of};
use anyhow::{Context, Result};
use serde_json::{Value as Json, json};
use std::path::Path;

/// `nlu create|train|predict` on the NLUs of the bot's project.
pub fn nlu_cmd(ctx: &Ctx, dir: &Path, action: NluAction) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    let base = format!("/projects/{pid}/nlus");
    match action {
        NluAction::Create { name, lang, public } => {
            let visibility = if public { "public" } else { "private" };
            let out = ctx.call(
                "POST",
                &base,
                Some(&json!({"name": name, "lang": lang, "visibility": visibility})),
            )?;
            let id = out["nluId"].as_str().unwrap_or(&name);
            ctx.out(
                format!(
                    "Created NLU {id} ({lang}, {visibility}); bots use it as `type: nl` with `nluId: \"{id}\"`"
                ),
                out,
            );
        }
        NluAction::Train { name, file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let sentences: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("//"))
                .collect();
            let out = ctx.call(
                "POST",
                &format!("{base}/{name}/train"),
                Some(&json!({"sentences": sentences})),
            )?;
            ctx.out(trained(&file, &out), out);
        }
        NluAction::Predict { name, sentences } => {
            let out = ctx.call(
                "POST",
                &format!("{base}/{name}/predict"),
                Some(&json!({"sentences": sentences})),
            )?;
            ctx.out(predictions(&out), out);
        }
    }
    Ok(())
}

/// A training's outcome for people: the status and revision, then each refused line with
/// its number in `file`.
fn trained(file: &Path, out: &Json) -> String {
    let mut text = format!(
        "{} sentences sent; training: {}",
        out["count"],
        out["status"].as_str().unwrap_or("?")
    );
    if let Some(r) = out["revision"].as_str() {
        text.push_str(&format!(" (revision {})", &r[..r.len().min(12)]));
    }
    if let Some(e) = out["error"].as_str() {
        text.push_str(&format!("\n  {e}"));
    }
    for e in out["errors"].as_array().into_iter().flatten() {
        text.push_str(&format!(
            "\n  {}: {}",
            file.display(),
            e.as_str().unwrap_or("")
        ));
    }
    text
}

/// Each sentence with its entities: `hello there → intent greet (0.91)`.
fn predictions(out: &Json) -> String {
    let mut lines = Vec::new();
    for r in out["results"].as_array().into_iter().flatten() {
        let mut found = Vec::new();
        for (entity, preds) in r["output"].as_object().into_iter().flatten() {
            for p in preds.as_array().into_iter().flatten() {
                let value = p["label"].as_str().or(p["value"].as_str()).unwrap_or("");
                let score = p["score"].as_f64().unwrap_or(1.0);
                found.push(format!("{entity} {value} ({score:.2})"));
            }
        }
        let said = if found.is_empty() {
            "nothing".to_string()
        } else {
            found.join(", ")
        };
        lines.push(format!("{} → {said}", r["input"].as_str().unwrap_or("")));
    }
    lines.join("\n")
}
