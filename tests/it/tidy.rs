//! Checks that keep the map honest, in the spirit of rust-analyzer's tidy tests: the crate
//! table in ARCHITECTURE.md is the workspace's real dependency graph, every crate's `lib.rs`
//! opens with its job, what it may depend on and what it must never do, and every crate
//! takes the workspace's lints, each `allow` of which says why. Paths and links named in the
//! docs are checked by the `docs` tests. No server is needed.

use super::docs::{read, root};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The workspace's members, from the root manifest's `members` list.
fn members() -> Vec<PathBuf> {
    let manifest = read(&root().join("Cargo.toml"));
    let list = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("a members list in Cargo.toml");
    list.split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root().join(m))
        .collect()
}

/// The lines of table `[name]` of a TOML text, comments and blank lines left out.
fn table<'a>(toml: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("[{name}]");
    toml.lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect()
}

fn package_name(toml: &str) -> String {
    table(toml, "package")
        .iter()
        .find_map(|l| l.strip_prefix("name = "))
        .map(|n| n.trim().trim_matches('"').to_owned())
        .expect("a package name")
}

/// A crate's normal dependencies among the workspace's crates, by short name
/// (`botbox-store` is `store`), sorted.
fn our_dependencies(toml: &str) -> Vec<String> {
    let mut deps: Vec<String> = table(toml, "dependencies")
        .iter()
        .filter_map(|l| l.split(['=', '.']).next())
        .map(str::trim)
        .filter(|d| d.starts_with("botbox") || *d == "runtime-core" || *d == "guest-sdk")
        .map(short)
        .collect();
    deps.sort();
    deps
}

fn short(name: &str) -> String {
    match name.strip_prefix("botbox-") {
        Some(s) => s.to_owned(),
        None => name.to_owned(),
    }
}

/// ARCHITECTURE.md's crate table: crate (short name) → the crates it uses, sorted.
fn documented_edges() -> BTreeMap<String, Vec<String>> {
    let text = read(&root().join("ARCHITECTURE.md"));
    let rows = text
        .lines()
        .skip_while(|l| !l.starts_with("| crate | uses (our crates) |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'));
    rows.map(|row| {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = short(cells[1].trim_matches('`'));
        let mut uses: Vec<String> = cells[2]
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty() && *u != "—")
            .map(short)
            .collect();
        uses.sort();
        (name, uses)
    })
    .collect()
}

#[test]
fn the_crate_table_is_the_workspaces_dependency_graph() {
    let documented = documented_edges();
    let mut real = BTreeMap::new();
    for m in members() {
        let toml = read(&m.join("Cargo.toml"));
        real.insert(short(&package_name(&toml)), our_dependencies(&toml));
    }
    let mut wrong = vec![];
    for (name, deps) in &real {
        match documented.get(name) {
            None => wrong.push(format!("{name}: no row in ARCHITECTURE.md's crate table")),
            Some(doc) if doc != deps => wrong.push(format!(
                "{name}: ARCHITECTURE.md says it uses {doc:?}, its Cargo.toml {deps:?}"
            )),
            Some(_) => {}
        }
    }
    for name in documented.keys().filter(|n| !real.contains_key(*n)) {
        wrong.push(format!(
            "{name}: in ARCHITECTURE.md's table but not a workspace member"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_crate_opens_with_its_job_and_its_boundaries() {
    let mut wrong = vec![];
    for m in members() {
        let lib = m.join("src/lib.rs");
        let shown = lib
            .strip_prefix(root())
            .unwrap_or(&lib)
            .display()
            .to_string();
        let text = read(&lib);
        let header: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.trim_start_matches("//!").to_lowercase() + " ")
            .collect();
        if header.split_whitespace().count() < 30 {
            wrong.push(format!(
                "{shown}: no opening paragraph saying the crate's job"
            ));
        } else if !header.contains("depend") {
            wrong.push(format!(
                "{shown}: the opening does not say what it may depend on"
            ));
        } else if !header.contains("never") {
            wrong.push(format!(
                "{shown}: the opening does not say what it must never do"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_crate_takes_the_workspace_lints_and_each_allow_says_why() {
    let mut wrong = vec![];
    for m in members() {
        let toml = read(&m.join("Cargo.toml"));
        if table(&toml, "lints") != ["workspace = true"] {
            wrong.push(format!("{}: no `[lints] workspace = true`", m.display()));
        }
    }
    let manifest = read(&root().join("Cargo.toml"));
    let lines: Vec<&str> = manifest.lines().collect();
    let lints = lines
        .iter()
        .position(|l| l.starts_with("[workspace.lints"))
        .expect("[workspace.lints] in Cargo.toml");
    for (i, line) in lines.iter().enumerate().skip(lints) {
        if line.starts_with("[workspace.dependencies]") {
            break;
        }
        if line.contains("\"allow\"") && !lines[i - 1].trim_start().starts_with('#') {
            wrong.push(format!(
                "Cargo.toml:{}: `{line}` without a reason above it",
                i + 1
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
