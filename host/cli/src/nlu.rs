//! `botbox nlu create|train|predict|entity`: the NL Studio NLUs of the bot folder's project
//! (the project the folder is bound to, as for `deploy`, or `--project`). `train` sends a
//! file in the line format (`I want pepperoni #intent:order`, one sentence a line) and trains,
//! failing when a line was refused; `predict` prints each sentence's entities with their
//! scores; `entity add|list|rm` manages the entities sentences are labelled with.

use super::commands::{EntityAction, NluAction};
use super::{Ctx, project_id_of};
use anyhow::{Context, Result, bail};
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
            // Each sentence sent with its line number in the file, for the refusals.
            let (numbers, sentences): (Vec<usize>, Vec<&str>) = text
                .lines()
                .map(str::trim)
                .enumerate()
                .filter(|(_, l)| !l.is_empty() && !l.starts_with("//"))
                .map(|(i, l)| (i + 1, l))
                .unzip();
            let out = ctx.call(
                "POST",
                &format!("{base}/{name}/train"),
                Some(&json!({"sentences": sentences})),
            )?;
            ctx.out(trained(&file, &numbers, &out), out.clone());
            let refused = out["errors"].as_array().map_or(0, Vec::len);
            if refused > 0 {
                bail!(
                    "{refused} of {} lines of {} refused (the others are stored): fix them and train again",
                    sentences.len(),
                    file.display()
                );
            }
            if out["status"] == "failed" {
                bail!("the training of {name} failed");
            }
        }
        NluAction::Predict { name, sentences } => {
            let out = ctx.call(
                "POST",
                &format!("{base}/{name}/predict"),
                Some(&json!({"sentences": sentences})),
            )?;
            ctx.out(predictions(&out), out);
        }
        NluAction::Entity { action } => entity_cmd(ctx, &base, action)?,
    }
    Ok(())
}

/// `nlu entity list|add|rm` under `base` (`/projects/{id}/nlus`).
fn entity_cmd(ctx: &Ctx, base: &str, action: EntityAction) -> Result<()> {
    match action {
        EntityAction::List { nlu } => {
            let out = ctx.call("GET", &format!("{base}/{nlu}/entities?limit=100"), None)?;
            ctx.out(entity_lines(&out), out);
        }
        EntityAction::Add {
            nlu,
            entity,
            kind,
            profile,
            labels,
            values,
            replace,
        } => {
            let path = format!("{base}/{nlu}/entities/{entity}");
            // A change starts from the entity as it is: what is not given stays.
            let mut body = if replace {
                ctx.call("GET", &path, None)?
            } else {
                json!({"name": entity})
            };
            body["type"] = json!(kind);
            match profile {
                Some(p) => body["profile"] = json!(p),
                None if !replace => body["profile"] = json!("default"),
                None => {}
            }
            if !labels.is_empty() {
                body["labels"] = json!(labels);
            }
            if !values.is_empty() {
                body["dictionary"] = dictionary(&values)?;
            }
            let out = if replace {
                ctx.call("PUT", &path, Some(&body))?
            } else {
                ctx.call("POST", &format!("{base}/{nlu}/entities"), Some(&body))?
            };
            let done = if replace { "Changed" } else { "Added" };
            ctx.out(format!("{done} {kind} entity {entity} of NLU {nlu}; train again (`botbox nlu train`) for predictions to use it"), out);
        }
        EntityAction::Rm { nlu, entity } => {
            ctx.call("DELETE", &format!("{base}/{nlu}/entities/{entity}"), None)?;
            ctx.out(
                format!("Removed entity {entity} of NLU {nlu}"),
                json!({"removed": entity}),
            );
        }
    }
    Ok(())
}

/// `--value key: synonym, synonym` entries as a dictionary `{key: [synonyms]}`.
fn dictionary(values: &[String]) -> Result<Json> {
    let mut dict = serde_json::Map::new();
    for v in values {
        let (key, synonyms) = v.split_once(':').unwrap_or((v, ""));
        let key = key.trim();
        if key.is_empty() {
            bail!("--value {v:?}: write `key` or `key: synonym, synonym`");
        }
        // A key given twice gathers both lists of forms.
        let forms = dict.entry(key.to_owned()).or_insert_with(|| json!([]));
        for s in synonyms.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            forms.as_array_mut().expect("a list").push(json!(s));
        }
    }
    Ok(Json::Object(dict))
}

/// One entity a line: `size  dict/default  small, medium, large`.
fn entity_lines(out: &Json) -> String {
    let items: Vec<(String, Json)> = out["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| (e["name"].as_str().unwrap_or("").to_owned(), e.clone()))
        .collect();
    if items.is_empty() {
        return "No entities yet: `botbox nlu entity add <nlu> <name> --type trait --label …`"
            .into();
    }
    items
        .iter()
        .map(|(name, e)| {
            let what = match (&e["labels"], &e["dictionary"]) {
                (Json::Array(l), _) => l
                    .iter()
                    .filter_map(Json::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
                (_, Json::Object(d)) => d.keys().cloned().collect::<Vec<_>>().join(", "),
                _ => String::new(),
            };
            format!(
                "{name}  {}/{}  {what}",
                e["type"].as_str().unwrap_or("?"),
                e["profile"].as_str().unwrap_or("?")
            )
            .trim_end()
            .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A training's outcome for people: what was stored and trained, then each refused line
/// as `file:line: why` (`numbers[i]` is the file line of the i-th sentence sent).
fn trained(file: &Path, numbers: &[usize], out: &Json) -> String {
    let count = out["count"].as_u64().unwrap_or(0);
    let refused = out["errors"].as_array().map_or(0, Vec::len);
    let unchanged = out["unchanged"].as_u64().unwrap_or(0);
    let relabelled = out["relabelled"].as_u64().unwrap_or(0);
    let mut text = format!(
        "{count} of {} sentences accepted ({} new, {relabelled} relabelled, {unchanged} already there)",
        numbers.len(),
        count.saturating_sub(unchanged + relabelled)
    );
    match (out["status"].as_str(), out["revision"].as_str()) {
        (Some("success"), Some(r)) if refused == 0 => text.push_str(&format!(
            "; training: success (revision {})",
            &r[..r.len().min(12)]
        )),
        (Some("success"), Some(r)) => text.push_str(&format!(
            "; trained on them (revision {}), but {refused} refused:",
            &r[..r.len().min(12)]
        )),
        (Some(status), _) => text.push_str(&format!("; training: {status}")),
        _ => {}
    }
    if let Some(e) = out["error"].as_str() {
        text.push_str(&format!("\n  {e}"));
    }
    for (i, e) in out["errors"].as_array().into_iter().flatten().enumerate() {
        let e = e.as_str().unwrap_or("");
        let sent = out["errRows"][i].as_u64().unwrap_or(0) as usize;
        let line = numbers.get(sent.wrapping_sub(1)).copied().unwrap_or(sent);
        let why = e.split_once(": ").map_or(e, |(_, why)| why);
        text.push_str(&format!("\n  {}:{line}: {why}", file.display()));
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
