//! `botbox`: the server and command-line client.
//!
//! So far only `botbox validate <bot.yml>` exists: it runs runtime-core's validation and
//! prints every problem with its path and position. Serving (`botbox serve`) arrives with the
//! project API (issue 4); until then it says so and exits with status 2.

use anyhow::{Context, Result, bail};
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("validate") => {
            let Some(path) = args.get(1) else {
                bail!("usage: botbox validate <bot.yml>")
            };
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            match runtime_core::compile_source(&text) {
                Ok(c) => {
                    for w in &c.warnings {
                        println!("{path}: warning: {w}");
                    }
                    println!(
                        "{path}: ok ({} flows, {} warnings)",
                        c.bot.flows.len(),
                        c.warnings.len()
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Err(rejected) => {
                    for p in &rejected.problems {
                        let kind = if p.severity == runtime_core::source::Severity::Error {
                            "error"
                        } else {
                            "warning"
                        };
                        println!("{path}: {kind}: {p}");
                    }
                    Ok(ExitCode::from(1))
                }
            }
        }
        Some("serve") => {
            eprintln!("botbox serve is not implemented yet: the project API comes with issue 4");
            Ok(ExitCode::from(2))
        }
        _ => {
            println!("usage: botbox validate <bot.yml>");
            Ok(ExitCode::from(2))
        }
    }
}
