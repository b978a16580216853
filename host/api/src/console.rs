//! The web console: a single page (`/`) and its script modules and style, compiled into the binary
//! (no frontend build step), talking to the project API with the signed-in user's token.
//! Bots' replies are tenants' content: the page puts them in as text, and these headers
//! forbid what a reply that slipped through could do — no inline or foreign script, no
//! framing (clickjacking), no MIME sniffing, no referrer to the bots' image hosts.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Scripts and styles from this origin only; images from anywhere over http(s) (bots show
/// pictures from their own hosts); the page talks to this origin alone.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' https: http: data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// A console file with the headers every console page is sent with.
pub(crate) fn asset(content_type: &'static str, body: impl Into<axum::body::Body>) -> Response {
    let mut r = (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body.into(),
    )
        .into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The console's files (`/console/<name>`), compiled in: its script modules, style sheet
/// and icon, and the third-party library it uses (`vendor/`, with its licence).
const FILES: &[(&str, &str, &str)] = &[
    ("main.js", JS, include_str!("console/main.js")),
    ("lib.js", JS, include_str!("console/lib.js")),
    ("signin.js", JS, include_str!("console/signin.js")),
    ("projects.js", JS, include_str!("console/projects.js")),
    ("chat.js", JS, include_str!("console/chat.js")),
    ("transcripts.js", JS, include_str!("console/transcripts.js")),
    ("errors.js", JS, include_str!("console/errors.js")),
    ("keys.js", JS, include_str!("console/keys.js")),
    ("cases.js", JS, include_str!("console/cases.js")),
    ("analytics.js", JS, include_str!("console/analytics.js")),
    ("bot.js", JS, include_str!("console/bot.js")),
    ("nl.js", JS, include_str!("console/nl.js")),
    ("cms.js", JS, include_str!("console/cms.js")),
    ("playground.js", JS, include_str!("console/playground.js")),
    ("activity.js", JS, include_str!("console/activity.js")),
    ("learning.js", JS, include_str!("console/learning.js")),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("console/app.css"),
    ),
    ("favicon.svg", SVG, include_str!("console/favicon.svg")),
    // The graph layout of the bot page: @dagrejs/dagre, MIT (see console/vendor/README.md).
    (
        "vendor/dagre.esm.js",
        JS,
        include_str!("console/vendor/dagre.esm.js"),
    ),
    (
        "vendor/LICENSE",
        "text/plain; charset=utf-8",
        include_str!("console/vendor/LICENSE"),
    ),
];
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// `/`, `/favicon.ico` (the icon, for browsers that ask for it by that name) and
/// `/console/<file>` (`/console/vendor/<file>` for the third-party one); any other console
/// path is a 404.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async {
                asset(
                    "text/html; charset=utf-8",
                    include_str!("console/index.html"),
                )
            }),
        )
        .route(
            "/favicon.ico",
            get(|| async { asset(SVG, include_str!("console/favicon.svg")) }),
        )
        .route(
            "/console/{*file}",
            get(|Path(file): Path<String>| async move {
                if file == "nlu-profiles.json" {
                    return asset("application/json", nlu_profiles());
                }
                match FILES.iter().find(|(name, _, _)| *name == file) {
                    Some((_, kind, body)) => asset(kind, *body),
                    None => (StatusCode::NOT_FOUND, "no such console file").into_response(),
                }
            }),
        )
}

/// `/console/nlu-profiles.json`: the NLU profiles of each entity type (`{"trait": [...],
/// "phrase": [...], "dict": [...]}`), from the NLU crate's lists, for NL Studio's entity
/// form. A console file rather than an API read: it is the same for everyone and costs a
/// page view no API request.
fn nlu_profiles() -> String {
    let mut by_type: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (kind, profile) in botbox_nlu::model::profiles_by_type() {
        by_type.entry(kind).or_default().push(profile);
    }
    serde_json::to_string(&by_type).expect("profiles serialise")
}
