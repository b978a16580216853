//! `botbox case …` and `botbox task …`: a project's Cases and tasks through the project API
//! (the project is the bot's in `--dir`, as for `deploy` and `env`).

use super::commands::{CaseAction, TaskAction};
use super::{Ctx, listing, project_id_of};
use anyhow::{Context, Result, bail};
use botbox_api_types::{CaseRef, ListOf, TaskOutputs, TaskRef};
use serde_json::{Map, Value as Json, json};
use std::path::Path;

/// `case create -f case.yml` (creates or replaces by name, running on environment `env`),
/// `case list`, `case get <case>` and `case delete <case>` (by name or id).
pub fn case_cmd(ctx: &Ctx, dir: &Path, env: &str, action: CaseAction) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    match action {
        CaseAction::Get { case } => {
            let out = ctx.call("GET", &format!("/projects/{pid}/cases/{case}"), None)?;
            let text = serde_yaml::to_string(&out).unwrap_or_default();
            ctx.out(text.trim_end(), out);
        }
        CaseAction::Delete { case } => {
            ctx.call("DELETE", &format!("/projects/{pid}/cases/{case}"), None)?;
            ctx.out(format!("Case {case} deleted."), json!({"deleted": case}));
        }
        CaseAction::Create { file } => {
            let mut doc = read_case(&file)?;
            doc.insert("environment".into(), json!(env));
            let (case, out): (CaseRef, _) = ctx.call_view(
                "POST",
                &format!("/projects/{pid}/cases"),
                Some(&Json::Object(doc)),
            )?;
            ctx.out(
                format!("Case {} ({}) runs on {env}", case.name, case.id),
                out,
            );
        }
        CaseAction::List => {
            let (cases, out): (ListOf<CaseRef>, _) =
                ctx.call_view("GET", &format!("/projects/{pid}/cases"), None)?;
            let lines: Vec<String> = cases
                .data
                .iter()
                .map(|c| {
                    let review = if c.review == true { "  (review)" } else { "" };
                    format!("{}  {}{review}", c.id, c.name)
                })
                .collect();
            ctx.out(listing(lines, "No Cases."), out);
        }
    }
    Ok(())
}

/// Reads a Case document (YAML or JSON) into an object, naming the file in every error.
fn read_case(file: &Path) -> Result<Map<String, Json>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text)
        .with_context(|| format!("{}: not YAML or JSON", file.display()))?;
    match serde_json::to_value(yaml)? {
        Json::Object(m) => Ok(m),
        _ => bail!(
            "{}: a Case is a mapping (name, inputs, outputs, review, …)",
            file.display()
        ),
    }
}

/// `--input k=v` gives the string `v`; `--input k:=<json>` gives a JSON value (a number,
/// `true`, an object…). The server checks the values against the Case's fields.
pub fn parse_inputs(pairs: &[String]) -> Result<Map<String, Json>> {
    let mut out = Map::new();
    for p in pairs {
        // The first `=` ends the name: `q=a:=b` is the text "a:=b" for q.
        let Some((k, v)) = p.split_once('=') else {
            bail!("--input {p}: write name=text or name:=<json>");
        };
        let (k, v) = match k.strip_suffix(':') {
            Some(k) => {
                let v: Json = serde_json::from_str(v)
                    .with_context(|| format!("--input {p}: the value after := is not JSON"))?;
                (k, v)
            }
            None => (k, Json::String(v.to_owned())),
        };
        if k.is_empty() {
            bail!("--input {p}: the field name is empty");
        }
        out.insert(k.to_owned(), v);
    }
    Ok(out)
}

/// `task create <case> --input k=v …`, `task list <case>`, `task get <id>`,
/// `task outputs <id>` and `task review <id> --decision approve|reject|changes
/// [--comment …] [--output k=v …]`.
pub fn task_cmd(ctx: &Ctx, dir: &Path, action: TaskAction) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    let (task, out): (TaskRef, Json) = match action {
        TaskAction::List { case } => {
            let (tasks, out): (ListOf<TaskRef>, _) =
                ctx.call_view("GET", &format!("/projects/{pid}/cases/{case}/tasks"), None)?;
            let lines: Vec<String> = tasks
                .data
                .iter()
                .map(|t| format!("{}  {}", t.id, t.status))
                .collect();
            ctx.out(listing(lines, "No tasks."), out);
            return Ok(());
        }
        TaskAction::Outputs { id } => {
            let (o, out): (TaskOutputs, _) =
                ctx.call_view("GET", &format!("/projects/{pid}/tasks/{id}/outputs"), None)?;
            let mut text = serde_json::to_string_pretty(&o.outputs).unwrap_or_default();
            for art in &o.artifacts {
                text.push_str(&format!(
                    "\nartifact {} ({}): {}",
                    art.name, art.media_type, art.url
                ));
            }
            ctx.out(text, out);
            return Ok(());
        }
        TaskAction::Create { case, inputs } => {
            let body = json!({"inputs": parse_inputs(&inputs)?});
            ctx.call_view(
                "POST",
                &format!("/projects/{pid}/cases/{case}/tasks"),
                Some(&body),
            )?
        }
        TaskAction::Get { id } => {
            ctx.call_view("GET", &format!("/projects/{pid}/tasks/{id}"), None)?
        }
        TaskAction::Review {
            id,
            decision,
            comment,
            outputs,
        } => {
            let mut body = json!({"decision": decision});
            if let Some(c) = comment {
                body["comment"] = json!(c);
            }
            if !outputs.is_empty() {
                // Edited outputs (approve): merged over the bot's, checked by the server.
                body["outputs"] = Json::Object(parse_inputs(&outputs)?);
            }
            ctx.call_view(
                "POST",
                &format!("/projects/{pid}/tasks/{id}/review"),
                Some(&body),
            )?
        }
    };
    ctx.out(task_line(&task), out);
    Ok(())
}

fn task_line(t: &TaskRef) -> String {
    let mut s = format!("task {}  {}", t.id, t.status);
    let error = t
        .error
        .as_ref()
        .and_then(|e| e.as_str().or(e["message"].as_str()));
    if let Some(e) = error {
        s.push_str(&format!("\nerror: {e}"));
    }
    if let Some(o) = t.outputs.as_ref().filter(|o| o.is_object()) {
        s.push_str(&format!(
            "\noutputs: {}",
            serde_json::to_string_pretty(o).unwrap_or_default()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_strings_or_json() {
        let m = parse_inputs(&[
            "invoice_url=http://x/1?a=b".into(),
            "count:=3".into(),
            "tags:=[\"a\"]".into(),
        ])
        .unwrap();
        assert_eq!(m["invoice_url"], "http://x/1?a=b");
        assert_eq!(m["count"], 3);
        assert_eq!(m["tags"], json!(["a"]));
        let e = parse_inputs(&["n:=nope".into()]).unwrap_err().to_string();
        assert!(e.contains("--input n:=nope"), "{e}");
        assert!(parse_inputs(&["novalue".into()]).is_err());
        assert!(parse_inputs(&["=x".into()]).is_err());
        assert!(parse_inputs(&[":=1".into()]).is_err());
        // The first `=` ends the name, whatever the text holds.
        let m = parse_inputs(&["q=a:=b".into()]).unwrap();
        assert_eq!(m["q"], "a:=b");
    }
}
