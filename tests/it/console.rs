//! The web console's pages as the server sends them: compiled in, and with the headers that
//! keep a bot's content from running script or the page from being framed. (What the page
//! does is tested in a real browser: tests/ai-sdk/console.mjs.)

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_with_a_strict_policy() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    for (path, kind, needle) in [
        ("/", "text/html", "/console/app.js"),
        ("/console/app.js", "text/javascript", "textContent"),
        ("/console/app.css", "text/css", ".bubble"),
    ] {
        let r = api.get(path, "").await;
        assert_eq!(r.status, 200, "{path}");
        let h = |name: &str| {
            r.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        assert!(
            h("content-type").starts_with(kind),
            "{path}: {}",
            h("content-type")
        );
        assert!(r.text.contains(needle), "{path}");
        let csp = h("content-security-policy");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(h("x-frame-options"), "DENY");
        assert_eq!(h("x-content-type-options"), "nosniff");
    }
    // The page has no inline script for the policy to forbid.
    let page = api.get("/", "").await.text;
    assert!(
        !page.contains("<script>") && !page.contains("onclick="),
        "{page}"
    );
}
