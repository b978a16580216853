//! Runs the conversation tests of every bot under examples/ on the native engine.

use guest_sdk::native::NativeStepper;
use runtime_core::testing::{parse_suite, run_case};
use std::path::{Path, PathBuf};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

#[test]
fn every_example_passes_its_conversation_tests() {
    let mut ran = 0;
    let mut failures = vec![];
    let mut dirs: Vec<_> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in &dirs {
        // A bot with an NL Studio model (`nlu.yml`) needs the trained model: its tests run
        // end to end in tests/it/nlu.rs (`every_example_nl_bot_passes_its_conversation_tests`).
        if dir.join("nlu.yml").exists() {
            continue;
        }
        // Read as `botbox push` reads it: includes expanded, references resolved.
        let doc = botbox_botfiles::load(&dir.join("bot.yml"))
            .unwrap_or_else(|e| panic!("{e}"))
            .doc;
        let compiled = runtime_core::compile(&doc)
            .unwrap_or_else(|e| panic!("{}/bot.yml rejected:\n{e}", dir.display()));
        assert!(
            compiled.warnings.is_empty(),
            "{}/bot.yml has warnings:\n{:#?}",
            dir.display(),
            compiled.warnings
        );
        let mut tests: Vec<_> = std::fs::read_dir(dir.join("tests"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        tests.sort();
        for t in tests {
            let suite = parse_suite(&std::fs::read_to_string(&t).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", t.display()));
            for case in &suite.tests {
                ran += 1;
                let report = run_case(&compiled.bot, case, &mut NativeStepper);
                for f in report.failures {
                    failures.push(format!("{} / {}: {f}", t.display(), case.name));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        dirs.len() >= 12,
        "expected at least 12 example bots, found {}",
        dirs.len()
    );
    assert!(
        ran >= 24,
        "expected at least 24 conversation cases, ran {ran}"
    );
}
