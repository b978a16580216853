//! `/docs/problems` and `/docs/problems/{code}`: the page every `/v1` problem's `type` URL
//! names, served by the server itself (offline, no external documentation site): what the
//! problem means and what to do about it. Static text; no tenant data.

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One problem: its `code` (the last segment of its `type` URL), status, title, and what a
/// client should do.
pub struct ProblemDoc {
    pub code: &'static str,
    pub status: u16,
    pub title: &'static str,
    pub meaning: &'static str,
    pub remedy: &'static str,
}

/// Every problem code `/v1` answers with (rate limits use the IANA `quota-exceeded` type).
pub const PROBLEMS: &[ProblemDoc] = &[
    ProblemDoc {
        code: "invalid-request",
        status: 400,
        title: "Invalid request",
        meaning: "The request's body or parameters are not what the endpoint takes. `errors` lists each problem with a JSON pointer to the field.",
        remedy: "Fix the fields named in `errors` and send the request again.",
    },
    ProblemDoc {
        code: "unauthorized",
        status: 401,
        title: "Unauthorized",
        meaning: "No key was sent, or the key is unknown, revoked or expired.",
        remedy: "Send `Authorization: Bearer <key>` with an active agent key (workspace keys for Cases); make a new key if it was revoked.",
    },
    ProblemDoc {
        code: "bad-signature",
        status: 401,
        title: "Bad signature",
        meaning: "An inbound hook call or a signed artifact URL carries no valid signature: a `webhook-*` header is missing or malformed, or the signature does not match the hook's secret.",
        remedy: "Sign the exact body with the hook's secret as Standard Webhooks describes (`webhook-id`, `webhook-timestamp`, `webhook-signature`), or use the artifact URL as given.",
    },
    ProblemDoc {
        code: "timestamp-out-of-tolerance",
        status: 401,
        title: "Timestamp out of tolerance",
        meaning: "An inbound hook call's `webhook-timestamp` is more than 5 minutes from the server's clock (a replay, or a sender whose clock is off).",
        remedy: "Send the current time in `webhook-timestamp` and keep the sender's clock synchronised (NTP).",
    },
    ProblemDoc {
        code: "forbidden",
        status: 403,
        title: "Forbidden",
        meaning: "The key is valid but may not do this (for example a workspace key on an agent endpoint, or an agent key on Cases).",
        remedy: "Use the kind of key the endpoint takes; `detail` says which.",
    },
    ProblemDoc {
        code: "not-found",
        status: 404,
        title: "Not found",
        meaning: "The conversation, run, Case or task does not exist, or belongs to another environment or workspace than the key's.",
        remedy: "Check the id; ids are only visible to keys of their own environment or workspace.",
    },
    ProblemDoc {
        code: "conflict",
        status: 409,
        title: "Conflict",
        meaning: "The request conflicts with the resource's current state.",
        remedy: "Read the resource again and retry with its current state; `detail` says what conflicted.",
    },
    ProblemDoc {
        code: "run-active",
        status: 409,
        title: "A run is already active",
        meaning: "The conversation has a run in progress; a conversation runs one at a time. `activeRunId` names it.",
        remedy: "Steer the active run (`POST /v1/runs/{runId}/steer`), wait for it to end, or cancel it.",
    },
    ProblemDoc {
        code: "run-not-active",
        status: 409,
        title: "The run is not active",
        meaning: "The run has ended (or is handled by another server), so it can no longer be steered or cancelled here.",
        remedy: "Start a new run in the conversation, or retry if another server was handling it.",
    },
    ProblemDoc {
        code: "idempotency-in-progress",
        status: 409,
        title: "Request in progress",
        meaning: "A request with the same `Idempotency-Key` is still being processed.",
        remedy: "Wait and send the same request again: it will answer with the first request's result.",
    },
    ProblemDoc {
        code: "idempotency-key-reused",
        status: 422,
        title: "Idempotency key reused",
        meaning: "The `Idempotency-Key` was used before with a different request body.",
        remedy: "Use a new key for a new request; reuse a key only to retry the very same request.",
    },
    ProblemDoc {
        code: "invalid-transition",
        status: 409,
        title: "Invalid transition",
        meaning: "A task cannot move from its current status to the one asked (for example reviewing a task that is not waiting for review).",
        remedy: "Read the task's status and act on what it allows.",
    },
    ProblemDoc {
        code: "task-not-done",
        status: 409,
        title: "Task not done",
        meaning: "A task's outputs were asked for before the task finished.",
        remedy: "Wait for the task to be `done` (poll it, or subscribe to its webhook) and ask again.",
    },
    ProblemDoc {
        code: "payload-too-large",
        status: 413,
        title: "Payload too large",
        meaning: "The request body is larger than the endpoint accepts.",
        remedy: "Send a smaller body; large files go as task artifacts.",
    },
    ProblemDoc {
        code: "unsupported-media-type",
        status: 415,
        title: "Unsupported media type",
        meaning: "The body's `Content-Type` is not one the endpoint reads.",
        remedy: "Send `Content-Type: application/json` (or what the endpoint's documentation names).",
    },
    ProblemDoc {
        code: "url-expired",
        status: 410,
        title: "URL expired",
        meaning: "A signed artifact URL was used after its expiry.",
        remedy: "Read the task again for fresh artifact URLs.",
    },
    ProblemDoc {
        code: "too-many-invalid-keys",
        status: 429,
        title: "Too many invalid keys",
        meaning: "This address sent too many unknown keys in a short time; further attempts are refused for a while.",
        remedy: "Check the key your client sends, and wait for `Retry-After` seconds.",
    },
    ProblemDoc {
        code: "internal",
        status: 500,
        title: "Internal error",
        meaning: "Something went wrong on the server's side.",
        remedy: "Retry later; give the operator the `requestId` so they can find it in the server's logs.",
    },
    ProblemDoc {
        code: "unavailable",
        status: 503,
        title: "Service unavailable",
        meaning: "The server is overloaded or shutting down and did not take the request.",
        remedy: "Retry after `Retry-After` seconds.",
    },
];

/// Escapes text for HTML (the catalogue is ours, but pages stay correct whatever it says).
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Turns `code spans` of the catalogue into <code>.
fn text(s: &str) -> String {
    esc(s)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_owned()
            }
        })
        .collect()
}

fn page(title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t} · botbox</title><link rel=\"icon\" href=\"/console/favicon.svg\" type=\"image/svg+xml\">\
         <link rel=\"stylesheet\" href=\"/console/app.css\"></head><body>\
         <header class=\"top\"><a class=\"brand\" href=\"/\">botbox</a>\
         <nav aria-label=\"Main\"><a href=\"/docs/problems\">Problems</a></nav></header>\
         <main id=\"main\">{body}</main></body></html>",
        t = esc(title)
    );
    super::console::asset("text/html; charset=utf-8", html)
}

/// `/docs/problems` and `/docs/problems/{code}`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/docs/problems", get(|| async { index() }))
        .route(
            "/docs/problems/{code}",
            get(|Path(code): Path<String>| async move { one(&code) }),
        )
}

fn index() -> Response {
    let rows: String = PROBLEMS
        .iter()
        .map(|p| {
            format!(
                "<tr><td><a href=\"/docs/problems/{c}\">{c}</a></td><td>{s}</td><td>{t}</td></tr>",
                c = p.code,
                s = p.status,
                t = esc(p.title)
            )
        })
        .collect();
    page(
        "Problems",
        &format!(
            "<h1>Problems the agent API answers</h1><p class=\"muted\">Every error of <code>/v1</code> is \
             <code>application/problem+json</code> whose <code>type</code> is one of these pages.</p>\
             <div class=\"card\"><table><thead><tr><th>Code</th><th>Status</th><th>Title</th></tr></thead>\
             <tbody>{rows}</tbody></table></div>"
        ),
    )
}

fn one(code: &str) -> Response {
    let Some(p) = PROBLEMS.iter().find(|p| p.code == code) else {
        return (StatusCode::NOT_FOUND, "no such problem: see /docs/problems").into_response();
    };
    page(
        p.title,
        &format!(
            "<h1>{t}</h1><p class=\"muted\">HTTP {s} · <code>{c}</code></p>\
             <div class=\"card\"><h2>What it means</h2><p>{m}</p><h2>What to do</h2><p>{r}</p></div>\
             <p><a href=\"/docs/problems\">Every problem</a></p>",
            t = esc(p.title),
            s = p.status,
            c = p.code,
            m = text(p.meaning),
            r = text(p.remedy)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each code once, each with its words; a page per code and an index, a 404 otherwise.
    #[test]
    fn every_problem_has_one_page() {
        let mut codes: Vec<&str> = PROBLEMS.iter().map(|p| p.code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), PROBLEMS.len(), "a code listed twice");
        for p in PROBLEMS {
            assert!((400..600).contains(&p.status), "{}", p.code);
            assert!(!p.meaning.is_empty() && !p.remedy.is_empty(), "{}", p.code);
            assert_eq!(one(p.code).status(), StatusCode::OK);
        }
        assert_eq!(index().status(), StatusCode::OK);
        assert_eq!(one("nope").status(), StatusCode::NOT_FOUND);
        assert_eq!(text("send `a<b` now"), "send <code>a&lt;b</code> now");
    }

    /// Every problem code the `/v1` sources name (a kebab-case literal on its own line, as
    /// the problem constructors take it, or a `Problem::` helper's) has its page.
    #[test]
    fn every_code_in_the_sources_has_a_page() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let service = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../service/src/agent/problem.rs");
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.push(service);
        let known = |c: &str| PROBLEMS.iter().any(|p| p.code == c) || c == "quota-exceeded";
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let t = line.trim();
                let Some(code) = t.strip_prefix('"').and_then(|r| r.strip_suffix("\",")) else {
                    continue;
                };
                let kebab =
                    code.contains('-') && code.chars().all(|c| c.is_ascii_lowercase() || c == '-');
                // Only literals right after a problem constructor's opening line.
                let prev = if i > 0 { lines[i - 1] } else { "" };
                let problem = ["Problem::", "unauthorized(", "StatusCode::"]
                    .iter()
                    .any(|m| prev.contains(m));
                if kebab && problem {
                    assert!(known(code), "{}:{}: {code} has no page", f.display(), i + 1);
                }
            }
        }
    }
}
