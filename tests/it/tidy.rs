//! Checks that keep the map honest, in the spirit of rust-analyzer's tidy tests: the crate
//! table in ARCHITECTURE.md is the workspace's real dependency graph, every crate's `lib.rs`
//! opens with its job, what it may depend on and what it must never do, and every crate
//! takes the workspace's lints, each `allow` of which says why. Paths and links named in the
//! docs are checked by the `docs` tests. No server is needed.

use super::docs::{files_under, read, root, shown};
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

/// Counts `{` and `}` of a line outside strings, characters and line comments.
fn brace_depth_change(line: &str) -> i32 {
    let code = line.split("//").next().unwrap_or("");
    let (mut depth, mut in_str, mut prev) = (0, false, ' ');
    for c in code.chars() {
        match c {
            '"' if prev != '\\' => in_str = !in_str,
            '{' if !in_str && prev != '\'' => depth += 1,
            '}' if !in_str && prev != '\'' => depth -= 1,
            _ => {}
        }
        prev = c;
    }
    depth
}

/// The functions of `text` (before its `#[cfg(test)]` module) longer than `max` lines:
/// (first line, name, lines).
fn long_functions(text: &str, max: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut out = vec![];
    for (i, l) in lines[..end].iter().enumerate() {
        let t = l.trim_start();
        let after_fn = t
            .split_once("fn ")
            .filter(|(before, _)| {
                before.split_whitespace().all(|w| {
                    matches!(w, "pub" | "async" | "const" | "unsafe") || w.starts_with("pub(")
                })
            })
            .map(|(_, rest)| rest);
        let Some(rest) = after_fn else { continue };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut opened) = (0, false);
        for (j, body) in lines[i..].iter().enumerate() {
            let d = brace_depth_change(body);
            opened |= body.contains('{');
            depth += d;
            if !opened && body.trim_end().ends_with(';') {
                break;
            }
            if opened && depth <= 0 {
                if j + 1 > max {
                    out.push((i + 1, name.clone(), j + 1));
                }
                break;
            }
        }
    }
    out
}

/// No production function a reader must scroll: at most 100 lines (tests may be longer).
#[test]
fn no_production_function_is_over_100_lines() {
    let rust = |p: &std::path::Path| p.extension().is_some_and(|e| e == "rs");
    let files = ["runtime-core/src", "guest-sdk/src", "host"]
        .iter()
        .flat_map(|dir| files_under(&root().join(dir), &["tests", "target", "benches"], rust));
    let (mut long, mut read_files) = (vec![], 0);
    for f in files {
        read_files += 1;
        let shown = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
        for (line, name, n) in long_functions(&read(&f), 100) {
            long.push(format!("{shown}:{line}: fn {name} is {n} lines"));
        }
    }
    assert!(read_files > 100, "only {read_files} source files found");
    assert!(long.is_empty(), "{}", long.join("\n"));
}

/// The length check itself: a function of 101 lines is found, one of 100 is not, and
/// braces in strings and comments do not count.
#[test]
fn the_length_check_counts_a_functions_lines() {
    let body = |n: usize| "    let s = \"{\"; // }\n".repeat(n - 2);
    let long = format!("pub async fn long() {{\n{}}}\n", body(101));
    let short = format!("fn short() {{\n{}}}\n", body(100));
    assert_eq!(
        long_functions(&long, 100),
        vec![(1, "long".to_owned(), 101)]
    );
    assert!(long_functions(&short, 100).is_empty());
}

/// Migrations only add, so that replicas of the previous release keep working on a database
/// this one has migrated (a rolling upgrade; the `rolling` test runs one).
#[test]
fn migrations_only_add() {
    let mut files = files_under(&root().join("migrations"), &[], |p| {
        p.extension().is_some_and(|e| e == "sql")
    });
    files.sort();
    let texts: Vec<(String, String)> = files.iter().map(|f| (shown(f), read(f))).collect();
    let broken = not_expand_only(&texts);
    assert!(
        broken.is_empty(),
        "migrations that would break the previous release:\n{}",
        broken.join("\n")
    );
}

/// The checker refuses each kind of change an older release cannot live with.
#[test]
fn a_migration_that_breaks_the_previous_release_is_refused() {
    let first = (
        "1.sql".to_owned(),
        "CREATE TABLE a (id TEXT PRIMARY KEY, n BIGINT);".to_owned(),
    );
    for (bad, why) in [
        ("DROP TABLE a;", "drops"),
        ("ALTER TABLE a DROP COLUMN n;", "drops"),
        ("ALTER TABLE a RENAME COLUMN n TO m;", "renames"),
        (
            "ALTER TABLE a ALTER COLUMN n TYPE TEXT;",
            "changes a column",
        ),
        (
            "ALTER TABLE a ADD COLUMN m TEXT NOT NULL;",
            "without a DEFAULT",
        ),
        ("CREATE UNIQUE INDEX a_n ON a (n);", "a unique index on A"),
    ] {
        let found = not_expand_only(&[first.clone(), ("2.sql".into(), bad.into())]);
        assert!(
            found.len() == 1 && found[0].contains(why),
            "{bad}: {found:?}"
        );
    }
    let fine = "-- a note\nALTER TABLE a ADD COLUMN m TEXT; ALTER TABLE a ADD COLUMN k BIGINT NOT NULL DEFAULT 0;\n\
                CREATE TABLE b (id TEXT); CREATE UNIQUE INDEX b_id ON b (id); CREATE INDEX a_m ON a (m);";
    assert_eq!(
        not_expand_only(&[first, ("2.sql".into(), fine.into())]),
        Vec::<String>::new()
    );
}

/// What in `files` (name, SQL; in order) an older release could not live with: a table or
/// column dropped or renamed, a column's type or nullability changed, a column added as
/// NOT NULL without a DEFAULT (older inserts would fail), a unique index on a table an
/// earlier file made (older inserts may break it), or a unique index dropped (older ON
/// CONFLICT clauses need it).
fn not_expand_only(files: &[(String, String)]) -> Vec<String> {
    let mut tables_before: std::collections::HashSet<String> = Default::default();
    let mut unique_indexes: std::collections::HashSet<String> = Default::default();
    let mut broken = vec![];
    for (name, sql) in files {
        let text: String = sql
            .lines()
            .map(|l| l.split("--").next().unwrap())
            .collect::<Vec<_>>()
            .join(" ");
        let mut made_here = vec![];
        for stmt in text.split(';') {
            let st = stmt
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .to_uppercase();
            let words: Vec<&str> = st.split(' ').collect();
            let after = |w: &str| {
                let i = words.iter().position(|x| *x == w)?;
                words.get(i + 1).map(|s| s.trim_matches('(').to_owned())
            };
            let why = if st.starts_with("CREATE TABLE") {
                made_here.extend(after("TABLE").filter(|t| t != "IF"));
                None
            } else if st.starts_with("CREATE UNIQUE INDEX") {
                let table = after("ON").unwrap_or_default();
                unique_indexes.extend(after("INDEX"));
                tables_before
                    .contains(&table)
                    .then(|| format!("a unique index on {table}, which older releases write"))
            } else if st.starts_with("DROP INDEX") {
                let index = after("INDEX").unwrap_or_default();
                unique_indexes
                    .contains(&index)
                    .then(|| format!("drops the unique index {index}"))
            } else if st.starts_with("DROP") || st.contains(" DROP COLUMN") {
                Some("drops what older releases read".to_owned())
            } else if st.contains(" RENAME ") {
                Some("renames what older releases read".to_owned())
            } else if st.contains(" ALTER COLUMN ") {
                Some("changes a column older releases read".to_owned())
            } else if st.contains(" ADD COLUMN ")
                && st.contains("NOT NULL")
                && !st.contains("DEFAULT")
            {
                Some(
                    "adds a NOT NULL column without a DEFAULT: older releases' inserts fail"
                        .to_owned(),
                )
            } else {
                None
            };
            if let Some(why) = why {
                broken.push(format!("{name}: {why}: {}", stmt.trim()));
            }
        }
        tables_before.extend(made_here);
    }
    broken
}
