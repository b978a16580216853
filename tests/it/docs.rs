//! The documentation (README.md, ARCHITECTURE.md, docs/*.md) and the example bots, checked as text: no
//! line cites the project's internal design notes, every relative link resolves, and every
//! repository path the docs name in backquotes exists. No server is needed.

use std::path::{Path, PathBuf};

/// The repository's root (this test binary belongs to host/botbox).
pub(super) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, ARCHITECTURE.md and every docs/*.md.
fn markdown_files() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Every file under `dir` that `keep` accepts, recursively, sorted; folders named in `skip`
/// are not entered.
pub(super) fn files_under(dir: &Path, skip: &[&str], keep: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                if !skip.contains(&name.as_ref()) {
                    todo.push(path);
                }
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every text file under `dir` (yml, yaml, txt, md, json), recursively, sorted.
fn text_files_under(dir: &Path) -> Vec<PathBuf> {
    files_under(dir, &[], |p| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yml" | "yaml" | "txt" | "md" | "json"))
    })
}

pub(super) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `path` relative to the repository root, for messages.
pub(super) fn shown(path: &Path) -> String {
    let root = root();
    path.strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Whether `text` has `prefix` immediately followed by an ASCII digit.
fn followed_by_digit(text: &str, prefix: &str) -> bool {
    text.match_indices(prefix).any(|(i, _)| {
        text[i + prefix.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// What in `line` cites the project's internal design notes (the contract documents, the
/// reference notes and their sections, issue numbers, their decision lines), if anything.
/// `markdown` says whether the line is Markdown prose; elsewhere only comments (`#`) are
/// read for a leading "Decision:", since `decision:` is also a data key (a review's).
fn citation(line: &str, markdown: bool) -> Option<&'static str> {
    let l = line.to_lowercase();
    let digit_after = [
        ("seed ", "seed <n>"),
        ("issue ", "issue <n>"),
        ("reference s", "reference S<n>"),
    ];
    for (prefix, what) in digit_after {
        if followed_by_digit(&l, prefix) {
            return Some(what);
        }
    }
    let literal = [
        "the seed",
        "§",
        "agent-api-protocol.md",
        "reference/bot-language.md",
        "sandbox-notes.md",
        "decision:**",
    ];
    if let Some(found) = literal.into_iter().find(|p| l.contains(p)) {
        return Some(found);
    }
    let t = l.trim_start();
    if markdown || t.starts_with('#') {
        let t = t.trim_start_matches(|c: char| "#->*+ ".contains(c));
        if t.starts_with("decision:") {
            return Some("decision:");
        }
    }
    None
}

#[test]
fn docs_speak_to_users() {
    // The check itself must catch what it is for.
    assert!(citation("The contract is seed 000 and the reference", true).is_some());
    assert!(citation("stays open at an end state (reference §5.5).", true).is_some());
    assert!(
        citation(
            "# Pizza ordering (reference S3, S4, S10): a carousel",
            false
        )
        .is_some()
    );
    assert!(citation("with their own **Decision:** lines", true).is_some());
    assert!(citation("# A bot as a processing layer (issue 17): it serves", false).is_some());
    assert!(citation("(not in the seed) for the CLI", true).is_some());
    assert!(citation("one host call seeds a step's ids; random seeds 42", true).is_none());
    assert!(citation("{type: review, decision: changes, comment: x}", false).is_none());

    let root = root();
    let mut files = markdown_files();
    files.extend(text_files_under(&root.join("examples")));
    let mut found = Vec::new();
    for file in &files {
        let markdown = file.extension().is_some_and(|e| e == "md");
        for (n, line) in read(file).lines().enumerate() {
            if let Some(what) = citation(line, markdown) {
                found.push(format!(
                    "{}:{}: [{what}] {}",
                    shown(file),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} line(s) cite internal design notes; say the behaviour itself instead:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// A Markdown text outside its fenced code blocks: its inline code spans (text between
/// backquotes, which may run over a line break within a paragraph) with the line each
/// starts on, and each line's text outside them (a link inside backquotes is no link).
struct Prose {
    spans: Vec<(usize, String)>,
    lines: Vec<(usize, String)>,
}

fn prose(text: &str) -> Prose {
    let mut p = Prose {
        spans: Vec::new(),
        lines: Vec::new(),
    };
    let (mut fenced, mut in_code) = (false, false);
    let (mut span, mut span_line) = (String::new(), 0);
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            in_code = false;
            continue;
        }
        if fenced {
            continue;
        }
        if t.is_empty() {
            // A paragraph's end also ends an unclosed backquote.
            in_code = false;
            continue;
        }
        let mut outside = String::new();
        for c in line.chars() {
            match (c, in_code) {
                ('`', true) => {
                    p.spans.push((span_line, std::mem::take(&mut span)));
                    in_code = false;
                }
                ('`', false) => {
                    span.clear();
                    span_line = n + 1;
                    in_code = true;
                }
                (c, true) => span.push(c),
                (c, false) => outside.push(c),
            }
        }
        if in_code {
            span.push(' ');
        }
        p.lines.push((n + 1, outside));
    }
    p
}

/// The targets of the Markdown links `[text](target)` in a line's text outside code.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        // A title after the target (`](path "title")`) is not part of it.
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        let target = target.trim_start_matches('<').trim_end_matches('>');
        out.push(target.to_owned());
        rest = &rest[end..];
    }
    out
}

/// The file or directory a relative link points at, or `None` for links this check
/// leaves alone (other schemes, anchors on the same page).
fn link_path(target: &str) -> Option<&str> {
    let lower = target.to_lowercase();
    if target.is_empty()
        || target.starts_with('#')
        || ["http:", "https:", "mailto:"]
            .iter()
            .any(|s| lower.starts_with(s))
    {
        return None;
    }
    let path = target.split(['#', '?']).next().unwrap_or(target);
    (!path.is_empty()).then_some(path)
}

#[test]
fn docs_links_resolve() {
    let sample = prose("see [a](docs/a.md#x) and [b](http://x) `[c](d)`\n");
    assert_eq!(
        link_targets(&sample.lines[0].1),
        ["docs/a.md#x", "http://x"]
    );
    assert_eq!(link_path("docs/a.md#x"), Some("docs/a.md"));
    assert_eq!(link_path("#limits"), None);
    assert_eq!(link_path("https://example.com/a"), None);
    assert_eq!(link_path("mailto:someone@example.com"), None);

    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let dir = file.parent().expect("a file's folder").to_path_buf();
        for (n, line) in prose(&read(&file)).lines {
            for target in link_targets(&line) {
                let Some(path) = link_path(&target) else {
                    continue;
                };
                checked += 1;
                if !dir.join(path).exists() {
                    broken.push(format!("{}:{n}: ]({target}) — no such file", shown(&file)));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} relative links found: is the parser broken?"
    );
    assert!(
        broken.is_empty(),
        "{} relative link(s) point at nothing:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

/// The repository path a code span names, with a trailing `:line` or `#anchor` removed, or
/// `None` when the span is no plain repository path (other text, a pattern, a placeholder).
fn repository_path(span: &str) -> Option<&str> {
    const TOP: [&str; 8] = [
        "host/",
        "tests/",
        "examples/",
        "runtime-core/",
        "guest-sdk/",
        "migrations/",
        "docs/",
        ".ci/",
    ];
    if !TOP.iter().any(|t| span.starts_with(t)) || span.contains(['*', '<', '{', ' ', '…']) {
        return None;
    }
    let mut path = span.split('#').next().unwrap_or(span);
    // `file.rs:120` or `file.rs:120:5`.
    while let Some((before, after)) = path.rsplit_once(':') {
        if !after.is_empty() && after.chars().all(|c| c.is_ascii_digit()) {
            path = before;
        } else {
            break;
        }
    }
    Some(path)
}

#[test]
fn docs_name_files_that_exist() {
    let sample = prose("in `host/api/src/console/` and `a\nb`\n\n```\n`c`\n```\n");
    assert_eq!(
        sample.spans,
        [
            (1, "host/api/src/console/".to_owned()),
            (1, "a b".to_owned())
        ]
    );
    assert_eq!(
        repository_path("host/botbox/src/main.rs:12"),
        Some("host/botbox/src/main.rs")
    );
    assert_eq!(
        repository_path("docs/operations.md#limits"),
        Some("docs/operations.md")
    );
    assert_eq!(repository_path("tests/*.yml"), None);
    assert_eq!(repository_path("examples/<name>/"), None);
    assert_eq!(repository_path("botbox serve"), None);

    let root = root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        for (n, span) in prose(&read(&file)).spans {
            let Some(path) = repository_path(&span) else {
                continue;
            };
            checked += 1;
            if !root.join(path).exists() {
                missing.push(format!("{}:{n}: `{span}` — no such path", shown(&file)));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} repository paths found: is the parser broken?"
    );
    assert!(
        missing.is_empty(),
        "{} repository path(s) named in the docs do not exist:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// The systemd unit of docs/botbox.service passes `systemd-analyze verify` (with the
/// binary of this build in `ExecStart`); skipped, with a notice, where systemd-analyze is
/// not installed.
#[test]
fn the_systemd_unit_verifies() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let unit = std::fs::read_to_string(root.join("docs/botbox.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/botbox serve"),
        "{unit}"
    );
    documented_setup_matches(&unit);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("botbox.service");
    std::fs::write(
        &file,
        unit.replace("/usr/local/bin/botbox", env!("CARGO_BIN_EXE_botbox")),
    )
    .unwrap();
    match std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&file)
        .output()
    {
        Err(_) => eprintln!("systemd-analyze is not installed: the unit was not verified"),
        Ok(o) => assert!(
            o.status.success() && o.stderr.is_empty(),
            "systemd-analyze verify: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

/// The set-up commands of docs/operations.md lay things out as the unit expects: the binary
/// where `ExecStart` runs it, the unit's user created, the data folder of `--data` (the only
/// writable path) made for that user, the unit copied where systemd reads it, then enabled.
fn documented_setup_matches(unit: &str) {
    let ops = read(&root().join("docs/operations.md"));
    let section = &ops[ops
        .find("### As a service")
        .expect("operations.md: As a service")..];
    let start = section.find("```sh\n").expect("As a service: a sh block") + 6;
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let value = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("the unit has no {key}"))
            .trim()
    };
    let exec = value("ExecStart=");
    let binary = exec.split(' ').next().unwrap();
    let user = value("User=");
    let data = exec
        .split(" --data ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .expect("ExecStart names --data");
    assert_eq!(value("ReadWritePaths="), data);
    for line in [
        format!("install -m 0755 target/release/botbox {binary}"),
        format!("useradd --system --user-group --home-dir {data} --shell /usr/sbin/nologin {user}"),
        format!("install -d -o {user} -g {user} -m 0750 {data}"),
        "install -m 0644 docs/botbox.service /etc/systemd/system/botbox.service".into(),
        "systemctl enable --now botbox".into(),
        format!("cat {data}/admin-password"),
    ] {
        assert!(
            block.lines().any(|l| l.trim() == line),
            "operations.md's set-up does not run `{line}`:\n{block}"
        );
    }
}
