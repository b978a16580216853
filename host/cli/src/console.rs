//! `botbox console`: an interactive session with the bot.
//!
//! Lines are text messages, or calls: `text("hi")`, `button({...})` / `button(op, {...})`,
//! `data({...})`, `command("name", {...})`, `current()`, `clear()`, `exit`. Arguments are
//! JavaScript-style literals (`{type: 'pizza'}` works as well as JSON).

use super::Ctx;
use anyhow::Result;
use runtime_core::model::MsgType;
use runtime_core::session::Response;
use serde_json::{Map, Value as Json, json};
use std::io::{BufRead, Write};
use std::path::Path;

/// What one console line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Send(Json),
    Current,
    Clear,
    Exit,
    Nothing,
}

/// Parses a call's argument list: a YAML flow sequence reads JS object literals and JSON.
fn args(inner: &str) -> Result<Vec<Json>, String> {
    if inner.trim().is_empty() {
        return Ok(vec![]);
    }
    let v: serde_yaml::Value = serde_yaml::from_str(&format!("[{inner}]"))
        .map_err(|e| format!("cannot read the arguments: {e}"))?;
    match serde_json::to_value(v).map_err(|e| e.to_string())? {
        Json::Array(a) => Ok(a),
        _ => Err("cannot read the arguments".into()),
    }
}

pub fn parse_line(line: &str) -> Result<Input, String> {
    let l = line.trim();
    if l.is_empty() {
        return Ok(Input::Nothing);
    }
    if l == "exit" || l == "exit()" || l == ".exit" {
        return Ok(Input::Exit);
    }
    let call = l.split_once('(').filter(|(name, rest)| {
        rest.ends_with(')') && name.chars().all(|c| c.is_ascii_alphabetic())
    });
    let Some((name, rest)) = call else {
        return Ok(Input::Send(json!({"type": "text", "content": l})));
    };
    let a = args(&rest[..rest.len() - 1])?;
    let obj = |v: Option<&Json>| -> Result<Map<String, Json>, String> {
        match v {
            None => Ok(Map::new()),
            Some(Json::Object(o)) => Ok(o.clone()),
            Some(other) => Err(format!("an object is expected, got {other}")),
        }
    };
    match name {
        "text" => match a.first() {
            Some(Json::String(s)) => Ok(Input::Send(json!({"type": "text", "content": s}))),
            _ => Err("text(\"...\") takes a string".into()),
        },
        "button" | "data" => match a.as_slice() {
            [Json::String(op), rest @ ..] => {
                let mut p = obj(rest.first())?;
                p.insert("op".into(), json!(op));
                Ok(Input::Send(json!({"type": "data", "payload": p})))
            }
            [first, ..] => Ok(Input::Send(
                json!({"type": "data", "payload": obj(Some(first))?}),
            )),
            [] => Ok(Input::Send(json!({"type": "data", "payload": {}}))),
        },
        "command" => match a.first() {
            Some(Json::String(c)) => Ok(Input::Send(
                json!({"type": "command", "content": c, "payload": obj(a.get(1))?}),
            )),
            _ => Err("command(\"name\", {...}) takes a command name".into()),
        },
        "current" => Ok(Input::Current),
        "clear" => Ok(Input::Clear),
        _ => Ok(Input::Send(json!({"type": "text", "content": l}))),
    }
}

/// What the converse route answers that the console shows: the bot's responses (the
/// language's own type, one definition with the engine) and the session to send back.
#[derive(serde::Deserialize)]
struct Conversed {
    responses: Vec<Response>,
    session: Json,
    /// The step's user errors (a method that threw, an api call that failed, …).
    #[serde(default)]
    errors: Vec<String>,
}

fn show(r: &Response, debug: bool) -> String {
    let body = match r.msg_type {
        MsgType::Text => r.content.clone().unwrap_or_default(),
        _ => {
            let p = r.payload.clone().unwrap_or(Json::Null);
            match p["template_type"].as_str() {
                Some(t) => format!("[{t}] {p}"),
                None => format!("[{}] {p}", json!(r.msg_type).as_str().unwrap_or("data")),
            }
        }
    };
    if debug {
        format!(
            "{body}  ({}/{})",
            r.flow,
            r.intent.as_deref().unwrap_or("-")
        )
    } else {
        body
    }
}

pub fn console(ctx: &Ctx, dir: &Path, env: Option<&str>, debug: bool) -> Result<()> {
    let (pid, name) = super::project_id_of(ctx, dir)?;
    let local = super::LocalFiles::of(dir);
    let mut session: Option<Json> = None;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    if !ctx.json {
        eprintln!(
            "console of {name} ({}); exit to quit",
            env.map(|e| format!("environment {e}"))
                .unwrap_or("latest revision".into())
        );
    }
    loop {
        if !ctx.json {
            write!(out, "{name}> ")?;
            out.flush()?;
        }
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        match parse_line(&line) {
            Err(e) => println!("error: {e}"),
            Ok(Input::Nothing) => {}
            Ok(Input::Exit) => break,
            Ok(Input::Current) => println!(
                "{}",
                session
                    .as_ref()
                    .map(|s| serde_json::to_string_pretty(s).unwrap_or_default())
                    .unwrap_or("null".into())
            ),
            Ok(Input::Clear) => {
                if session.take().is_some() {
                    println!("true");
                }
            }
            Ok(Input::Send(message)) => {
                let mut body = json!({"message": message});
                if let Some(s) = &session {
                    body["session"] = s.clone();
                }
                if let Some(e) = env {
                    body["environmentName"] = json!(e);
                }
                match ctx.call_as::<Conversed>(
                    "POST",
                    &format!("/projects/{pid}/bot/converse"),
                    Some(&body),
                ) {
                    Ok(r) => {
                        if ctx.json {
                            println!(
                                "{}",
                                json!({"responses": r.responses, "session": r.session, "errors": r.errors})
                            );
                        } else {
                            for resp in &r.responses {
                                println!("{}", show(resp, debug));
                            }
                            for e in &r.errors {
                                println!("  ! {}", local.place(e));
                            }
                            if debug {
                                let meta = &r.session["meta"];
                                println!(
                                    "  [flow {} state {}]",
                                    meta["lastFlow"].as_str().unwrap_or("-"),
                                    meta["lastState"].as_str().unwrap_or("-")
                                );
                            }
                        }
                        session = Some(r.session);
                    }
                    Err(e) => println!("error: {e:#}"),
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(
            parse_line("hi there").unwrap(),
            Input::Send(json!({"type": "text", "content": "hi there"}))
        );
        assert_eq!(
            parse_line("text(\"hi\")").unwrap(),
            Input::Send(json!({"type": "text", "content": "hi"}))
        );
        assert_eq!(
            parse_line("button({type: 'pizza', pizza: \"veggie\"})").unwrap(),
            Input::Send(json!({"type": "data", "payload": {"type": "pizza", "pizza": "veggie"}}))
        );
        assert_eq!(
            parse_line("button('confirm', {answer: 'yes'})").unwrap(),
            Input::Send(json!({"type": "data", "payload": {"answer": "yes", "op": "confirm"}}))
        );
        assert_eq!(
            parse_line("command(\"start\", {a: 1})").unwrap(),
            Input::Send(json!({"type": "command", "content": "start", "payload": {"a": 1}}))
        );
        assert_eq!(parse_line("clear()").unwrap(), Input::Clear);
        assert_eq!(parse_line("exit").unwrap(), Input::Exit);
        assert!(parse_line("data(3)").is_err());
    }
}
