//! The web console: a single page (`/`) and its script and style, compiled into the binary
//! (no frontend build step), talking to the project API with the signed-in user's token.
//! Bots' replies are tenants' content: the page puts them in as text, and these headers
//! forbid what a reply that slipped through could do — no inline or foreign script, no
//! framing (clickjacking), no MIME sniffing, no referrer to the bots' image hosts.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// Scripts and styles from this origin only; images from anywhere over http(s) (bots show
/// pictures from their own hosts); the page talks to this origin alone.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' https: http: data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
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

/// `/`, `/console/app.js`, `/console/app.css`.
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
            "/console/app.js",
            get(|| async {
                asset(
                    "text/javascript; charset=utf-8",
                    include_str!("console/app.js"),
                )
            }),
        )
        .route(
            "/console/app.css",
            get(|| async { asset("text/css; charset=utf-8", include_str!("console/app.css")) }),
        )
}
