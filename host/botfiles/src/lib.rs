//! A bot folder on disk read as one bot document, the way `botbox push`, `botbox test` and
//! `botbox validate` read it: `$include(…)` expanded, `${a.b}` references resolved, and every
//! part of the document remembered with the file it came from, so a validation problem or a
//! run-time error is reported at `file:line:column`.
//!
//! May depend on: `runtime-core` (the document parser and its positions) only. It must never
//! do more than read the folder's files: no network, no server types. Includes are bounded
//! in depth (16) so a folder that includes itself is an error, not a hang.

use runtime_core::source::{Positions, Problem, Severity, parse_document};
use runtime_core::{JsProblem, JsSite};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};

/// A bot document assembled from its files.
pub struct LoadedBot {
    pub doc: Json,
    /// Which file each part of the document came from: (JSON path prefix, file, positions).
    sources: Vec<(String, PathBuf, Positions)>,
}

impl LoadedBot {
    /// The file `path` was written in, its positions, and the path inside that file.
    fn source_of<'a>(&'a self, path: &'a str) -> Option<(&'a Path, &'a Positions, &'a str)> {
        let (prefix, file, pos) = self
            .sources
            .iter()
            .filter(|(prefix, _, _)| {
                prefix.is_empty()
                    || path == *prefix
                    || path.starts_with(&format!("{prefix}."))
                    || path.starts_with(&format!("{prefix}["))
            })
            .max_by_key(|(prefix, _, _)| prefix.len())?;
        Some((file, pos, path[prefix.len()..].trim_start_matches('.')))
    }

    /// A JavaScript syntax error at its place in the file: `file:line:column: error: path:
    /// message`, the line and column those of the error inside the code.
    pub fn locate_js(&self, site: &JsSite, p: &JsProblem) -> String {
        let problem = p.to_problem(site);
        if let Some((file, pos, rel)) = self.source_of(&site.path)
            && let Some((l, c)) = pos.inside(rel, p.line, p.column)
        {
            return format!(
                "{}:{l}:{c}: error: {}: {}",
                file.display(),
                problem.path,
                problem.message
            );
        }
        self.locate(&problem)
    }

    /// A method's run-time error placed in its file: in `… method boom threw: Error: x (line
    /// 2, column 5 of the method)` the method's place becomes `bot.yml:7:5: method boom
    /// threw: Error: x` (an included file's name when the method is there). Other text, and
    /// a method not found, come back as they are.
    pub fn place_runtime(&self, text: &str) -> String {
        let placed = || -> Option<String> {
            let threw = text.find(" threw: ")?;
            let start = text[..threw].rfind("method ")?;
            let name = &text[start + "method ".len()..threw];
            let at = text.rfind(" (line ")?;
            let (l, rest) = text[at + " (line ".len()..].split_once(", column ")?;
            let c = rest.strip_suffix(" of the method)")?;
            let (l, c) = (l.parse::<usize>().ok()?, c.parse::<usize>().ok()?);
            let path = self.method_path(name)?;
            let (file, pos, rel) = self.source_of(&path)?;
            let (fl, fc) = pos.inside(rel, l, c)?;
            Some(format!(
                "{}{}:{fl}:{fc}: {}",
                &text[..start],
                file.display(),
                &text[start..at]
            ))
        };
        placed()
            .or_else(|| self.place_expression(text))
            .unwrap_or_else(|| text.to_string())
    }

    /// An expression's error, `… expression "result.count" failed: …`, with the place of
    /// that expression in its file in front: a condition, mapping or option that is exactly
    /// it, or the `$(…)` that holds it (the first such place in the bot).
    fn place_expression(&self, text: &str) -> Option<String> {
        let start = text.find("expression \"")?;
        let src_start = start + "expression \"".len();
        let src_end = src_start + text[src_start..].find("\" failed: ")?;
        let src = &text[src_start..src_end];
        let (path, col) = find_expression(&self.doc, src, "")?;
        let (file, pos, rel) = self.source_of(&path)?;
        let (l, c) = match col {
            0 => pos.find(rel)?,
            col => pos.inside(rel, 1, col)?,
        };
        Some(format!(
            "{}{}:{l}:{c}: {}",
            &text[..start],
            file.display(),
            &text[start..]
        ))
    }

    /// The document path of method `name` (`methods.<key>` or `flows.<flow>.methods.<key>`,
    /// the key with or without its parameters).
    fn method_path(&self, name: &str) -> Option<String> {
        let is = |k: &String| k == name || k.starts_with(&format!("{name}("));
        if let Some(k) = self.doc["methods"]
            .as_object()
            .and_then(|m| m.keys().find(|k| is(k)))
        {
            return Some(format!("methods.{k}"));
        }
        self.doc["flows"].as_object()?.iter().find_map(|(f, flow)| {
            let k = flow["methods"].as_object()?.keys().find(|k| is(k))?;
            Some(format!("flows.{f}.methods.{k}"))
        })
    }

    /// `file:line:column: severity: path: message` for a problem.
    pub fn locate(&self, p: &Problem) -> String {
        let sev = match p.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let Some((file, pos, rel)) = self.source_of(&p.path) else {
            return format!("{sev}: {}: {}", p.path, p.message);
        };
        let at = match pos.find(rel) {
            Some((l, c)) => format!("{}:{l}:{c}", file.display()),
            None => file.display().to_string(),
        };
        if p.path.is_empty() {
            format!("{at}: {sev}: {}", p.message)
        } else {
            format!("{at}: {sev}: {}: {}", p.path, p.message)
        }
    }
}

/// The first place in `doc` whose text is the expression `src` (column 0: the whole value)
/// or holds it as `$(src)` (the 1-based column of `src` in that text).
fn find_expression(doc: &Json, src: &str, path: &str) -> Option<(String, usize)> {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match doc {
        Json::String(t) if t.trim() == src => Some((path.to_string(), 0)),
        Json::String(t) => {
            let at = t.find(&format!("$({src})"))?;
            Some((path.to_string(), t[..at + 2].chars().count() + 1))
        }
        Json::Object(m) => m
            .iter()
            .find_map(|(k, v)| find_expression(v, src, &join(k))),
        Json::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_expression(v, src, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// Loads `bot.yml` (or any bot file) with its includes.
pub fn load(path: &Path) -> Result<LoadedBot, String> {
    let mut sources = vec![];
    let mut doc = read_part(path, "", &mut sources, 0)?;
    let snapshot = doc.clone();
    resolve_refs(&mut doc, &snapshot);
    Ok(LoadedBot { doc, sources })
}

fn read_part(
    path: &Path,
    prefix: &str,
    sources: &mut Vec<(String, PathBuf, Positions)>,
    depth: usize,
) -> Result<Json, String> {
    if depth > 16 {
        return Err(format!(
            "{}: $include nested more than 16 deep (a cycle?)",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let mut v = match ext {
        "yml" | "yaml" | "json" => {
            let (v, pos) = parse_document(&text).map_err(|p| format!("{}: {p}", path.display()))?;
            sources.push((prefix.to_owned(), path.to_owned(), pos));
            v
        }
        _ => return Ok(Json::String(text)),
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let me = sources.len() - 1;
    expand(&mut v, (dir, me), prefix, sources, depth)?;
    Ok(v)
}

/// `error` of the `$include` at `prefix` placed where the including file (`sources[me]`)
/// writes it: `bot.yml:4:9: $include(flows/x.yml): flows/x.yml: No such file or directory`.
fn include_error(
    sources: &[(String, PathBuf, Positions)],
    me: usize,
    prefix: &str,
    directive: &str,
    error: String,
) -> String {
    let (file_prefix, file, pos) = &sources[me];
    let rel = match file_prefix.as_str() {
        "" => prefix,
        fp => prefix
            .strip_prefix(fp)
            .map_or(prefix, |r| r.trim_start_matches('.')),
    };
    let at = match pos.find(rel) {
        Some((l, c)) => format!("{}:{l}:{c}", file.display()),
        None => file.display().to_string(),
    };
    format!("{at}: {}: {error}", directive.trim())
}

fn include_target(s: &str) -> Option<&str> {
    s.trim()
        .strip_prefix("$include(")?
        .strip_suffix(')')
        .map(str::trim)
}

/// Expands the `$include`s under `v` (at `prefix`) of the file `sources[me]`, in `dir`.
fn expand(
    v: &mut Json,
    (dir, me): (&Path, usize),
    prefix: &str,
    sources: &mut Vec<(String, PathBuf, Positions)>,
    depth: usize,
) -> Result<(), String> {
    match v {
        Json::String(s) => {
            if let Some(target) = include_target(s) {
                let target = target.trim_matches(['"', '\'']);
                *v = read_part(&dir.join(target), prefix, sources, depth + 1)
                    .map_err(|e| include_error(sources, me, prefix, s, e))?;
            }
        }
        Json::Object(m) => {
            for (k, child) in m.iter_mut() {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                expand(child, (dir, me), &p, sources, depth)?;
            }
        }
        Json::Array(a) => {
            for (i, child) in a.iter_mut().enumerate() {
                expand(child, (dir, me), &format!("{prefix}[{i}]"), sources, depth)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn lookup<'a>(doc: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').try_fold(doc, |v, k| v.get(k))
}

/// `${a.b}`: a whole value is replaced by the referenced value; inside a longer string, by
/// its text.
fn resolve_refs(v: &mut Json, doc: &Json) {
    match v {
        Json::String(s) => {
            if let Some(inner) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
                && !inner.contains("${")
                && let Some(found) = lookup(doc, inner.trim())
            {
                *v = found.clone();
                return;
            }
            let mut out = String::new();
            let mut rest = s.as_str();
            let mut changed = false;
            while let Some(start) = rest.find("${") {
                let Some(end) = rest[start..].find('}') else {
                    break;
                };
                let key = rest[start + 2..start + end].trim();
                match lookup(doc, key) {
                    Some(found) => {
                        out.push_str(&rest[..start]);
                        match found {
                            Json::String(t) => out.push_str(t),
                            other => out.push_str(&other.to_string()),
                        }
                        changed = true;
                    }
                    None => out.push_str(&rest[..start + end + 1]),
                }
                rest = &rest[start + end + 1..];
            }
            if changed {
                out.push_str(rest);
                *s = out;
            }
        }
        Json::Object(m) => m.values_mut().for_each(|c| resolve_refs(c, doc)),
        Json::Array(a) => a.iter_mut().for_each(|c| resolve_refs(c, doc)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_include_is_named_at_its_line_in_the_including_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("flows")).unwrap();
        std::fs::write(
            dir.path().join("bot.yml"),
            "name: b\nflows:\n  main: $include(flows/main.yml)\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("flows/main.yml"),
            "states:\n  s: {initial: true}\nactions:\n  a: $include(gone.yml)\n",
        )
        .unwrap();
        let Err(e) = load(&dir.path().join("bot.yml")) else {
            panic!("a missing include loads");
        };
        let bot = dir.path().join("bot.yml").display().to_string();
        let main = dir.path().join("flows/main.yml").display().to_string();
        assert!(
            e.starts_with(&format!(
                "{bot}:3:3: $include(flows/main.yml): {main}:4:3: $include(gone.yml): "
            )),
            "{e}"
        );
        assert!(e.contains("gone.yml: No such file"), "{e}");
    }

    #[test]
    fn includes_expand_and_problems_point_into_the_included_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("flows")).unwrap();
        std::fs::write(
            dir.path().join("bot.yml"),
            "name: b\nconfig: {greeting: Hello}\nflows:\n  main: $include(flows/main.yml)\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("flows/main.yml"),
            "intents:\n  hi: {initial: true, condition: \"content == 'hi'\"}\nstates:\n  init:\n    initial: true\n    transitions:\n      nowhere: {condition: \"true\"}\n    action: {name: text, options: {text: \"${config.greeting}!\"}}\n",
        )
        .unwrap();
        let bot = load(&dir.path().join("bot.yml")).unwrap();
        assert_eq!(
            bot.doc["flows"]["main"]["states"]["init"]["action"]["options"]["text"],
            "Hello!"
        );
        let rejected = runtime_core::compile(&bot.doc).unwrap_err();
        let lines: Vec<String> = rejected.errors().map(|p| bot.locate(p)).collect();
        assert!(
            lines.iter().any(|l| l.contains("flows/main.yml:7:")
                && l.contains("flows.main.states.init.transitions.nowhere")),
            "{lines:?}"
        );
    }
}
