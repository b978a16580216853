//! Checks that keep the map honest, in the spirit of rust-analyzer's tidy tests: the crate
//! table in ARCHITECTURE.md is the workspace's real dependency graph, every crate's `lib.rs`
//! opens with its job, what it may depend on (the workspace crates its manifest uses) and
//! what it must never do, every crate takes the workspace's lints, each `allow` of which
//! says why, and every test runtime-core/tests/KATA_RULES.md cites exists. Paths and links
//! named in the docs are checked by the `docs` tests. No server is needed.

use super::docs::{files_under, read, root, shown};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// A `lib.rs`'s opening `//!` lines, joined by spaces.
fn opening(text: &str) -> String {
    text.lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| l.trim_start_matches("//!").to_owned() + " ")
        .collect()
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
        let header = opening(&read(&lib)).to_lowercase();
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

/// Each crate's `lib.rs` lists the workspace crates it may depend on ("May depend on: …",
/// each by its package name in backquotes) and that list is its manifest's: a dependency
/// added without the doc saying so, or a doc allowing one the manifest has not, is reported.
#[test]
fn every_crate_lists_the_workspace_crates_it_depends_on() {
    let ours: Vec<String> = members()
        .iter()
        .map(|m| package_name(&read(&m.join("Cargo.toml"))))
        .collect();
    let mut wrong = vec![];
    for m in members() {
        let lib = m.join("src/lib.rs");
        let deps = our_dependencies(&read(&m.join("Cargo.toml")));
        match allowed_dependencies(&opening(&read(&lib)), &ours) {
            None => wrong.push(format!("{}: no \"May depend on: …\" list", shown(&lib))),
            Some(said) => wrong.extend(
                dependency_mismatches(&said, &deps)
                    .into_iter()
                    .map(|w| format!("{}: {w}", shown(&lib))),
            ),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The workspace crates (short names, sorted) that the "May depend on: …" list of a crate's
/// opening names in backquotes; the list ends with its clause (`. ` or `;`). None without one.
fn allowed_dependencies(opening: &str, ours: &[String]) -> Option<Vec<String>> {
    let opening = opening.split_whitespace().collect::<Vec<_>>().join(" ");
    let list = opening.split_once("May depend on:")?.1;
    let end = [list.find(". "), list.find(';')]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(list.len());
    let mut named: Vec<String> = list[..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| ours.iter().any(|o| o == n))
        .map(short)
        .collect();
    named.sort();
    named.dedup();
    Some(named)
}

/// Where a crate's listed workspace crates (`said`) and its manifest's (`deps`) differ.
fn dependency_mismatches(said: &[String], deps: &[String]) -> Vec<String> {
    let unlisted = deps.iter().filter(|d| !said.contains(d));
    let unused = said.iter().filter(|s| !deps.contains(s));
    unlisted
        .map(|d| format!("its Cargo.toml depends on {d}, which its opening does not list"))
        .chain(unused.map(|s| format!("its opening lists {s}, which its Cargo.toml does not use")))
        .collect()
}

/// The list is read up to the end of its clause, by backquoted package names only, and
/// both kinds of mismatch are reported.
#[test]
fn the_dependency_list_is_read_from_its_clause() {
    let ours = ["botbox", "botbox-api", "botbox-store"].map(String::from);
    let opening = "Its job. May\n depend on: `botbox-store` (twice: `botbox-store`), serde and \
                   `botbox test`; must never use `botbox-api`.";
    assert_eq!(
        allowed_dependencies(opening, &ours),
        Some(vec!["store".to_owned()])
    );
    assert_eq!(
        allowed_dependencies("Depends on `botbox-store`.", &ours),
        None
    );
    let found = dependency_mismatches(&["store".to_owned()], &["api".to_owned()]);
    assert!(found.len() == 2 && found[0].contains("api") && found[1].contains("store"));
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

/// Where runtime-core/tests/KATA_RULES.md says which test pins each rule down.
const KATA_RULES: &str = "runtime-core/tests/KATA_RULES.md";

/// Every test that KATA_RULES.md cites exists, so that a renamed, moved or deleted test
/// does not leave a rule looking covered.
#[test]
fn every_test_the_kata_rules_cite_exists() {
    let (wrong, checked) = unresolved_citations(&read(&root().join(KATA_RULES)));
    assert!(
        checked > 100,
        "only {checked} citations found in {KATA_RULES}"
    );
    let wrong: Vec<String> = wrong
        .iter()
        .map(|(line, cite, why)| format!("{KATA_RULES}:{line}: `{cite}`: {why}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The citation check itself: citations of tests that do not exist (or in a form the file
/// does not define) are reported at their line; other backquoted text and the header are not.
#[test]
fn a_citation_of_a_missing_test_is_reported() {
    let text = "Header: `engine::not_read_here`\n## Rules\n\
        - a — `engine::a_volatile_flow_is_closed_not_stacked`, `hello/*`, `pizza/a whole…`\n\
        - b — `engine::no_such_test`, `hello/no such\n  case`, `tests/live.rs::pizza_through_generic`\n\
        - c — `tests/it/live.rs::gone`, `host::channels::nowhere::tests::*`, `interp::x`\n\
        - d — `context.$dataKey`, `<baseUrl>/1040`, `host::channels::line::tests::*`\n";
    let (wrong, checked) = unresolved_citations(text);
    let found: Vec<(usize, &str)> = wrong.iter().map(|(l, c, _)| (*l, c.as_str())).collect();
    assert_eq!(
        found,
        [
            (4, "engine::no_such_test"),
            (4, "hello/no such case"),
            (5, "tests/live.rs::pizza_through_generic"),
            (6, "tests/it/live.rs::gone"),
            (6, "host::channels::nowhere::tests::*"),
            (6, "interp::x"),
        ]
    );
    assert_eq!(checked, 10);
}

/// The backquoted spans of `text` from its first `## ` heading on, with the line each
/// starts on; a span may run over a line break (its whitespace becomes single spaces).
fn spans_after_first_heading(text: &str) -> Vec<(usize, String)> {
    let first = text
        .lines()
        .position(|l| l.starts_with("## "))
        .map_or(usize::MAX, |i| i + 1);
    let (mut line, mut out) = (1, vec![]);
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 && line >= first {
            out.push((line, part.split_whitespace().collect::<Vec<_>>().join(" ")));
        }
        line += part.matches('\n').count();
    }
    out
}

/// The citations in `text` that name no existing test, as (line, citation, why), and the
/// number of citations checked.
fn unresolved_citations(text: &str) -> (Vec<(usize, String, String)>, usize) {
    let (mut wrong, mut checked) = (vec![], 0);
    for (line, span) in spans_after_first_heading(text) {
        let Some(found) = resolve_citation(&span) else {
            continue;
        };
        checked += 1;
        if let Err(why) = found {
            wrong.push((line, span, why));
        }
    }
    (wrong, checked)
}

/// None when `span` is no citation, else whether the test it names exists. The forms are
/// those KATA_RULES.md's header defines; a path (`a::b`) in any other form is an error.
fn resolve_citation(span: &str) -> Option<Result<(), String>> {
    if let Some(rest) = span.strip_prefix("tests/") {
        return Some(end_to_end_test(rest));
    }
    let ident =
        |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || "_*".contains(c));
    let path: Vec<&str> = span.split("::").collect();
    if path.len() > 1 && path.iter().all(|s| ident(s)) {
        return Some(path_citation(&path));
    }
    let (example, case) = span.split_once('/')?;
    let is_example = !example.is_empty()
        && example
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    is_example.then(|| example_case(example, case))
}

/// `engine::x`, `validation::x`, `expressions::x` (runtime-core/tests/), or a unit test of a
/// crate by its module path: `runtime_core::…`, `guest_sdk::…`, `host::<crate>::…`.
fn path_citation(path: &[&str]) -> Result<(), String> {
    let root = root();
    match path {
        [file @ ("engine" | "validation" | "expressions"), name] => {
            test_in_file(&root.join(format!("runtime-core/tests/{file}.rs")), name)
        }
        ["runtime_core", rest @ ..] => unit_test(&root.join("runtime-core/src"), rest),
        ["guest_sdk", rest @ ..] => unit_test(&root.join("guest-sdk/src"), rest),
        ["host", krate, rest @ ..] => unit_test(&root.join("host").join(krate).join("src"), rest),
        _ => Err("not a citation form KATA_RULES.md defines".to_owned()),
    }
}

/// `it/<module>.rs::name` (after `tests/`): that file of the end-to-end tests has the test.
fn end_to_end_test(rest: &str) -> Result<(), String> {
    let (file, name) = rest
        .split_once("::")
        .filter(|(f, _)| f.starts_with("it/") && f.ends_with(".rs"))
        .ok_or_else(|| "not of the form tests/it/<module>.rs::name".to_owned())?;
    test_in_file(&root().join("tests").join(file), name)
}

/// A unit test by its module path under `src` (`a::b::tests::name`): the module's file
/// defines `name`, or for `*` has a test at all.
fn unit_test(src: &Path, path: &[&str]) -> Result<(), String> {
    let (name, module) = path
        .split_last()
        .ok_or_else(|| "no test named".to_owned())?;
    let file = module_file(src, module)
        .ok_or_else(|| format!("no module {} in {}", module.join("::"), shown(src)))?;
    let text = read(&file);
    let found = match *name {
        "*" => text.contains("#[test]"),
        name => defines_fn(&text, name),
    };
    found
        .then_some(())
        .ok_or_else(|| format!("no test {name} in {}", shown(&file)))
}

/// The file of `module` under `src` (`a/b.rs` or `a/b/mod.rs`, `lib.rs` for the crate's
/// root); an inline `tests` module is in its parent's file.
fn module_file(src: &Path, module: &[&str]) -> Option<PathBuf> {
    let parent = module.strip_suffix(&["tests"][..]);
    [Some(module), parent].into_iter().flatten().find_map(|m| {
        let candidates = match m {
            [] => vec![src.join("lib.rs")],
            _ => {
                let p = src.join(m.join("/"));
                vec![p.with_extension("rs"), p.join("mod.rs")]
            }
        };
        candidates.into_iter().find(|f| f.is_file())
    })
}

/// `file` exists and defines `fn name`.
fn test_in_file(file: &Path, name: &str) -> Result<(), String> {
    if !file.is_file() {
        return Err(format!("{} does not exist", shown(file)));
    }
    defines_fn(&read(file), name)
        .then_some(())
        .ok_or_else(|| format!("no fn {name} in {}", shown(file)))
}

/// Whether `text` has `fn name` (not merely a longer name that starts with it).
fn defines_fn(text: &str, name: &str) -> bool {
    let pat = format!("fn {name}");
    text.match_indices(&pat)
        .any(|(i, _)| !text[i + pat.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// `<example>/<case>`: a conversation test of examples/<example>/tests/ named `case`
/// (`*`: any; a name ending in `…`: one that starts with the rest).
fn example_case(example: &str, case: &str) -> Result<(), String> {
    let dir = root().join("examples").join(example).join("tests");
    if !dir.is_dir() {
        return Err(format!("{} does not exist", shown(&dir)));
    }
    let names = case_names(&dir);
    let found = match case.strip_suffix('…') {
        _ if case == "*" => !names.is_empty(),
        Some(start) => names.iter().any(|n| n.starts_with(start)),
        None => names.iter().any(|n| n == case),
    };
    found
        .then_some(())
        .ok_or_else(|| format!("no such case in {}", shown(&dir)))
}

/// The names of the conversation tests in the suites (YAML files) of `dir`.
fn case_names(dir: &Path) -> Vec<String> {
    let yaml = |p: &Path| p.extension().is_some_and(|e| e == "yml" || e == "yaml");
    files_under(dir, &[], yaml)
        .iter()
        .flat_map(|f| {
            let suite = runtime_core::testing::parse_suite(&read(f))
                .unwrap_or_else(|e| panic!("{}: {e}", shown(f)));
            suite.tests.into_iter().map(|case| case.name)
        })
        .collect()
}
