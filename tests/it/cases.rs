//! Cases and tasks, end to end against the real server: every path of a task (done,
//! review → approve with edited outputs, review → changes → done, reject, bot error, flow
//! not ended, time-out), outputs and artifacts with signed URLs, tenancy, restarts and a
//! killed worker's task taken over, callbacks signed per Standard Webhooks with retries and
//! 410, inbound hooks with signature, stale timestamp and dedupe.

use crate::common::*;
use botbox_service::cases::webhooks::{self, ServerKey, parse_secret, sign};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECRET_KEY: &str = "a-fixed-server-key-for-the-cases-tests-0123456789";

fn flags() -> Vec<&'static str> {
    vec![
        "--allow-private-egress",
        "--callback-retry-scale",
        "1000",
        "--secret-key",
        SECRET_KEY,
        "--task-lease-s",
        "2",
    ]
}

pub(crate) fn case_doc(name: &str, review: bool, env: &str) -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/invoice-case/case.yml"
    ))
    .unwrap();
    let mut doc: Value =
        serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&text).unwrap()).unwrap();
    doc["name"] = json!(name);
    doc["review"] = json!(review);
    doc["environmentId"] = json!(env);
    doc
}

/// A request as the stub saw it: path, headers, raw body.
type Seen = (String, axum::http::HeaderMap, Vec<u8>);

/// A stand-in HTTP server: records each request (headers and raw body) and answers with
/// the next scripted status (200 when the script is empty); `/invoice/<n>` answers an
/// invoice; with `hold_first`, the first `/slow` request never answers.
#[derive(Clone, Default)]
struct Stub {
    /// Its base URL.
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<VecDeque<u16>>>,
    notify: Arc<tokio::sync::Notify>,
    slow_hits: Arc<Mutex<usize>>,
}

impl Stub {
    async fn start() -> Stub {
        let mut me = Stub::default();
        let m = me.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let m = m.clone();
                async move {
                    let path = uri.path().to_owned();
                    if path.starts_with("/slow") {
                        let n = {
                            let mut h = m.slow_hits.lock().unwrap();
                            *h += 1;
                            *h
                        };
                        m.notify.notify_waiters();
                        if n == 1 {
                            std::future::pending::<()>().await;
                        }
                    }
                    if path.starts_with("/invoice/") {
                        return (
                            axum::http::StatusCode::OK,
                            axum::Json(json!({"vendor": "ACME", "lines": [{"amount": 10, "qty": 2}, {"amount": 5}]})),
                        );
                    }
                    m.seen.lock().unwrap().push((path, headers, body.to_vec()));
                    m.notify.notify_waiters();
                    let status = m.script.lock().unwrap().pop_front().unwrap_or(200);
                    (
                        axum::http::StatusCode::from_u16(status).unwrap(),
                        axum::Json(json!({"ok": true})),
                    )
                }
            },
        );
        me.url = crate::common::serve_stub(app).await;
        me
    }

    /// Waits (30 s at most) until `f` holds over the recorded requests.
    async fn wait_until<T>(&self, what: &str, f: impl Fn(&[Seen]) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let n = self.notify.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            // A copy: `f` may look at the recorded requests again (`events`), and the
            // lock is not reentrant.
            let seen = self.seen.lock().unwrap().clone();
            if let Some(v) = f(&seen) {
                return v;
            }
            if tokio::time::timeout_at(deadline, n).await.is_err() {
                panic!(
                    "timed out waiting for {what}; seen {}",
                    self.seen.lock().unwrap().len()
                );
            }
        }
    }

    /// The callbacks received for `task` with event `ty`, each (headers, body bytes).
    fn events(&self, task: &str, ty: &str) -> Vec<(axum::http::HeaderMap, Vec<u8>)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _, b)| {
                p.starts_with("/callbacks") && {
                    let v: Value = serde_json::from_slice(b).unwrap_or_default();
                    v["type"] == ty && v["data"]["taskId"] == task
                }
            })
            .map(|(_, h, b)| (h.clone(), b.clone()))
            .collect()
    }
}

/// The invoice bot deployed, a workspace key, and a stand-in for customers' endpoints.
type Ws = Keyed<Stub>;

async fn workspace(backend: Backend) -> Ws {
    workspace_with(backend, &[]).await
}

async fn workspace_with(backend: Backend, extra: &[&str]) -> Ws {
    // `extra`'s flags replace the defaults' of the same name (each may be given once).
    let mut args = flags();
    for pair in extra.chunks(2) {
        match args.iter().position(|a| *a == pair[0]) {
            Some(i) => args[i + 1] = pair[1],
            None => args.extend_from_slice(pair),
        }
    }
    let deployed = Deployed::start(
        Server::start_logged(backend, &args).await,
        example_bot("invoice-case"),
    )
    .await;
    Keyed {
        key: deployed.workspace_key("automation").await,
        deployed,
        stubs: Stub::start().await,
    }
}

impl Ws {
    async fn post(&self, path: &str, body: Value) -> Res {
        self.api.post(path, &self.key, body).await
    }
    async fn get(&self, path: &str) -> Res {
        self.api.get(path, &self.key).await
    }

    async fn case(&self, name: &str, review: bool) -> String {
        let r = self
            .post("/v1/cases", case_doc(name, review, &self.env))
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        s(&r.json()["id"])
    }

    async fn task(&self, case: &str, inputs: Value) -> String {
        let r = self
            .post(
                &format!("/v1/cases/{case}/tasks"),
                json!({"inputs": inputs}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        assert_eq!(r.json()["status"], "pending");
        s(&r.json()["id"])
    }

    fn invoice(&self) -> Value {
        json!({"invoice_url": format!("{}/invoice/1", self.stubs.url), "currency": "USD"})
    }

    /// Polls the task until its status is `want` (30 s at most); a final status other than
    /// `want` fails at once.
    async fn wait(&self, task: &str, want: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let t = self.get(&format!("/v1/tasks/{task}")).await.ok();
            if t["status"] == want {
                return t;
            }
            let st = s(&t["status"]);
            assert!(
                !["done", "failed"].contains(&st.as_str()) || st == want,
                "task ended {st}, not {want}: {t}"
            );
            assert!(
                std::time::Instant::now() < deadline,
                "task still {st}: {t}\n{}",
                self.server.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The latest callback of event `ty` for `task` (30 s at most): (headers, body).
    async fn callback(&self, task: &str, ty: &str) -> (axum::http::HeaderMap, Vec<u8>) {
        let stubs = &self.stubs;
        stubs.wait_until(ty, |_| stubs.events(task, ty).pop()).await
    }

    async fn endpoint(&self, path: &str) -> (String, Vec<u8>) {
        let r = self
            .post(
                "/v1/webhooks",
                json!({"url": format!("{}{path}", self.stubs.url), "eventTypes": ["*"]}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
        let secret = s(&r.json()["secret"]);
        assert!(secret.starts_with("whsec_"));
        (s(&r.json()["id"]), parse_secret(&secret).unwrap())
    }
}

fn verified(h: &axum::http::HeaderMap, body: &[u8], secret: &[u8]) -> bool {
    let now = botbox_store::now_ms() / 1000;
    webhooks::verify(h, body, &[secret.to_vec()], now).is_ok()
}

/// A workspace with a callback endpoint at `/callbacks` (its id and secret) and the
/// invoice Case without review (`auto`).
struct Called {
    w: Ws,
    ep: String,
    secret: Vec<u8>,
    auto: String,
}

async fn called(backend: Backend) -> Called {
    let w = workspace(backend).await;
    let auto = w.case("invoice-auto", false).await;
    let (ep, secret) = w.endpoint("/callbacks").await;
    Called {
        w,
        ep,
        secret,
        auto,
    }
}

impl Called {
    /// Runs a task of `auto` to done; its id.
    async fn done(&self) -> String {
        let t = self.w.task(&self.auto, self.w.invoice()).await;
        self.w.wait(&t, "done").await;
        t
    }

    /// The first `n` task.completed callbacks of `task`, each (headers, body).
    async fn completed(&self, task: &str, n: usize) -> Vec<(axum::http::HeaderMap, Vec<u8>)> {
        let stubs = &self.w.stubs;
        stubs
            .wait_until("task.completed", |_| {
                let e = stubs.events(task, "task.completed");
                (e.len() >= n).then_some(e)
            })
            .await
    }

    /// POSTs `action` (`rotate`, `enable`) to the endpoint; its answer.
    async fn endpoint_action(&self, action: &str) -> Value {
        let path = format!("/v1/webhooks/{}/{action}", self.ep);
        self.w.post(&path, json!({})).await.ok()
    }

    /// A task done while the stand-in answers 500, 500, then 200; its id.
    async fn done_after_two_failures(&self) -> String {
        self.w.stubs.script.lock().unwrap().extend([500, 500]);
        self.done().await
    }
}

/// [`Called`] with a task of `auto` done (`task`, its view).
struct Done {
    called: Called,
    task: String,
    view: Value,
}

impl std::ops::Deref for Done {
    type Target = Called;
    fn deref(&self) -> &Called {
        &self.called
    }
}

async fn done_task(backend: Backend) -> Done {
    let called = called(backend).await;
    let task = called.w.task(&called.auto, called.w.invoice()).await;
    let view = called.w.wait(&task, "done").await;
    Done { called, task, view }
}

impl Done {
    /// The done task's first artifact, as its outputs list it.
    async fn artifact(&self) -> Value {
        let out = self
            .w
            .get(&format!("/v1/tasks/{}/outputs", self.task))
            .await;
        out.ok()["artifacts"][0].clone()
    }

    /// A URL of artifact `art_id` saying it `expires` then, with the server key's
    /// signature for an expiry of `signed_until` (the same for a correctly signed URL).
    fn artifact_url(&self, art_id: &str, expires: i64, signed_until: i64) -> String {
        let key = ServerKey::load(Some(SECRET_KEY), std::path::Path::new("/nonexistent")).unwrap();
        format!(
            "{}/v1/artifacts/{art_id}?expires={expires}&signature={}",
            self.w.server.base,
            key.artifact_signature(art_id, signed_until)
        )
    }
}

/// A workspace with a callback endpoint at `/callbacks` (its secret) and the invoice Case
/// with review, whose first task waits for review (`task`, its view).
struct InReview {
    w: Ws,
    secret: Vec<u8>,
    task: String,
    view: Value,
}

async fn in_review(backend: Backend) -> InReview {
    let w = workspace(backend).await;
    let (_, secret) = w.endpoint("/callbacks").await;
    let reviewed = w.case("invoice", true).await;
    let task = w.task(&reviewed, w.invoice()).await;
    let view = w.wait(&task, "review").await;
    InReview {
        w,
        secret,
        task,
        view,
    }
}

impl InReview {
    /// Decides the review with `body`.
    async fn decide(&self, body: Value) -> Res {
        self.w
            .post(&format!("/v1/tasks/{}/review", self.task), body)
            .await
    }

    /// Decides the review with `body` under Idempotency-Key `key`.
    async fn decide_once(&self, key: &str, body: &Value) -> Res {
        let rb = self.w.api.http.post(format!(
            "{}/v1/tasks/{}/review",
            self.w.server.base, self.task
        ));
        let rb = rb
            .bearer_auth(&self.w.key)
            .header("idempotency-key", key)
            .json(body);
        Res::read(rb.send().await.unwrap()).await
    }

    /// Asks for changes with `comment`, then waits for the task back in review.
    async fn changes(&self, comment: &str) -> (Value, Value) {
        let asked = self
            .decide(json!({"decision": "changes", "comment": comment}))
            .await
            .ok();
        (asked, self.w.wait(&self.task, "review").await)
    }
}

/// The approval with edited outputs the review tests decide with.
fn approval() -> Value {
    json!({"decision": "approve", "comment": "ok with rounding", "outputs": {"total": 24}})
}

/// The body a GET of `url` answers with (checked 200).
async fn fetch_text(w: &Ws, url: &str) -> String {
    let got = w.api.http.get(url).send().await.unwrap();
    assert_eq!(got.status(), 200);
    got.text().await.unwrap()
}

async fn task_inputs_are_checked_field_by_field(backend: Backend) {
    let w = workspace(backend).await;
    let auto = w.case("invoice-auto", false).await;
    let r = w
        .post(
            &format!("/v1/cases/{auto}/tasks"),
            json!({"inputs": {"currency": 3, "extra": true}}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    // A pointer and a detail per bad field; the server's address as "[server]".
    let server = w.server.base.replace('.', r"\.");
    insta::with_settings!({filters => vec![(server.as_str(), "[server]")]}, {
        insta::assert_json_snapshot!("task_inputs_refused", r.json(), {".requestId" => "[id]"});
    });
}

async fn a_task_without_review_ends_done_with_its_outputs(backend: Backend) {
    let d = done_task(backend).await;
    let stub = d.w.stubs.url.replace('.', r"\.");
    let filters = vec![
        (d.task.as_str(), "[task]"),
        (d.auto.as_str(), "[case]"),
        (stub.as_str(), "[stub]"),
    ];
    insta::with_settings!({filters => filters}, {
        insta::assert_json_snapshot!("task_done", d.view, {
            ".createdAt" => "[time]",
            ".updatedAt" => "[time]",
            ".artifacts[].id" => "[id]",
            ".artifacts[].url" => "[signed url]",
        });
    });
    let out = d.w.get(&format!("/v1/tasks/{}/outputs", d.task)).await.ok();
    assert_eq!(out["outputs"]["total"], 25);
}

async fn a_done_tasks_artifact_is_served_at_its_signed_url(backend: Backend) {
    let d = done_task(backend).await;
    let art = d.artifact().await;
    assert_eq!(art["name"], "summary");
    assert_eq!(art["mediaType"], "text/plain");
    let got = d.w.api.http.get(s(&art["url"])).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.headers()["content-type"], "text/plain");
    assert_eq!(got.text().await.unwrap(), "ACME: 2 lines, 25 USD");
}

/// A signed artifact URL works only as signed and until it expires: a changed signature
/// or a moved expiry is refused, an expired URL is gone even when correctly signed.
async fn an_artifact_url_is_refused_once_tampered_with_or_expired(backend: Backend) {
    let d = done_task(backend).await;
    let art = d.artifact().await;
    let http = &d.w.api.http;
    let get = |url: String| async move { http.get(url).send().await.unwrap().status() };
    let bad = s(&art["url"]).replace("signature=", "signature=x");
    assert_eq!(get(bad).await, 403);
    let art_id = s(&art["id"]);
    let past = botbox_store::now_ms() / 1000 - 1;
    assert_eq!(get(d.artifact_url(&art_id, past, past)).await, 410);
    assert_eq!(get(d.artifact_url(&art_id, past + 3600, past)).await, 403);
}

async fn a_done_task_is_called_back_with_a_signed_task_completed(backend: Backend) {
    let d = done_task(backend).await;
    let (h, b) = d.w.callback(&d.task, "task.completed").await;
    assert!(
        verified(&h, &b, &d.secret),
        "the callback's signature verifies"
    );
    let ev: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        ev["data"],
        json!({"taskId": d.task, "caseId": d.auto, "status": "done"})
    );
    assert!(h["webhook-id"].to_str().unwrap().starts_with("msg_"));
}

async fn a_task_waiting_for_review_shows_its_artifacts(backend: Backend) {
    let r = in_review(backend).await;
    assert!(r.view["review"]["requestedAt"].is_string());
    assert_eq!(
        r.view["artifacts"][0]["name"], "summary",
        "a reviewer sees the artifacts"
    );
}

async fn a_task_in_review_has_no_outputs_yet(backend: Backend) {
    let r = in_review(backend).await;
    let out = r.w.get(&format!("/v1/tasks/{}/outputs", r.task)).await;
    assert_eq!(out.status, 409);
    assert_eq!(out.json()["code"], "task-not-done");
}

async fn a_task_in_review_tells_pollers_to_retry_after_a_minute(backend: Backend) {
    let r = in_review(backend).await;
    let t = r.w.get(&format!("/v1/tasks/{}", r.task)).await;
    assert_eq!(t.header("retry-after"), Some("60"));
}

async fn a_task_entering_review_is_called_back(backend: Backend) {
    let r = in_review(backend).await;
    let (h, b) = r.w.callback(&r.task, "task.review_requested").await;
    assert!(verified(&h, &b, &r.secret));
}

async fn edited_outputs_are_checked_against_their_types(backend: Backend) {
    let r = in_review(backend).await;
    let refused = r
        .decide(json!({"decision": "approve", "outputs": {"total": "lots"}}))
        .await;
    assert_eq!(
        refused.status, 400,
        "edited outputs are typed: {}",
        refused.text
    );
    assert_eq!(refused.json()["errors"][0]["pointer"], "/outputs/total");
}

async fn approving_with_edited_outputs_finishes_the_task_with_them(backend: Backend) {
    let r = in_review(backend).await;
    let t = r.decide(approval()).await.ok();
    assert_eq!(t["status"], "done");
    assert_eq!(t["outputs"]["total"], 24);
    assert_eq!(t["outputs"]["vendor"], "ACME");
    assert_eq!(t["review"]["decision"], "approve");
    assert_eq!(t["review"]["comment"], "ok with rounding");
    assert!(s(&t["review"]["decidedBy"]).contains("automation"));
    assert_eq!(t["reviews"][0]["outputs"]["total"], 24);
}

/// A decision under an Idempotency-Key: a retry replays it, another body is refused.
async fn a_review_decision_is_idempotent_under_its_key(backend: Backend) {
    let r = in_review(backend).await;
    let first = r.decide_once("d1", &approval()).await;
    let replay = r.decide_once("d1", &approval()).await;
    assert_eq!(replay.status, first.status);
    assert_eq!(
        replay.header("idempotent-replayed"),
        Some("true"),
        "{}",
        replay.text
    );
    assert_eq!(replay.json()["review"], first.ok()["review"]);
    let other = r.decide_once("d1", &json!({"decision": "reject"})).await;
    assert_eq!(other.status, 422, "{}", other.text);
    assert_eq!(other.json()["code"], "idempotency-key-reused");
}

async fn a_decided_task_cannot_be_decided_again(backend: Backend) {
    let r = in_review(backend).await;
    r.decide(approval()).await.ok();
    let again = r.decide(json!({"decision": "reject"})).await;
    assert_eq!(again.status, 409);
    assert_eq!(again.json()["code"], "invalid-transition");
    assert_eq!(again.json()["currentStatus"], "done");
}

async fn asking_for_changes_needs_a_comment(backend: Backend) {
    let r = in_review(backend).await;
    let refused = r.decide(json!({"decision": "changes"})).await;
    assert_eq!(refused.status, 400, "changes need a comment");
}

async fn changes_take_the_comment_to_the_bot_and_the_task_back_to_review(backend: Backend) {
    let r = in_review(backend).await;
    let (asked, again) = r.changes("apply discount 10").await;
    assert!(
        ["in_progress", "review"].contains(&asked["status"].as_str().unwrap()),
        "{asked}"
    );
    assert_eq!(again["outputs"]["total"], 22.5);
    assert_eq!(again["outputs"]["note"], "discount 10%");
    assert_eq!(again["reviews"][0]["decision"], "changes");
}

async fn a_task_approved_after_changes_serves_the_artifact_of_its_last_pass(backend: Backend) {
    let r = in_review(backend).await;
    r.changes("apply discount 10").await;
    let approved = r.decide(json!({"decision": "approve"})).await.ok();
    assert_eq!(approved["status"], "done");
    let out = r.w.get(&format!("/v1/tasks/{}/outputs", r.task)).await.ok();
    assert_eq!(
        fetch_text(&r.w, &s(&out["artifacts"][0]["url"])).await,
        "ACME: 22.5 USD after 10% discount",
        "the new pass's artifact"
    );
}

async fn a_rejected_task_fails_with_the_reviewers_comment(backend: Backend) {
    let r = in_review(backend).await;
    let rejected = r
        .decide(json!({"decision": "reject", "comment": "wrong vendor"}))
        .await
        .ok();
    assert_eq!(rejected["status"], "failed");
    assert_eq!(
        rejected["error"],
        json!({"code": "rejected", "message": "wrong vendor"})
    );
    let (h, b) = r.w.callback(&r.task, "task.failed").await;
    assert!(verified(&h, &b, &r.secret));
}

async fn a_task_created_again_under_its_idempotency_key_is_the_same_task(backend: Backend) {
    let w = workspace(backend).await;
    let auto = w.case("invoice-auto", false).await;
    let send = |k: &'static str| {
        w.api
            .http
            .post(format!("{}/v1/cases/{auto}/tasks", w.server.base))
            .bearer_auth(&w.key)
            .header("idempotency-key", k)
            .json(&json!({"inputs": w.invoice()}))
            .send()
    };
    let a = Res::read(send("k1").await.unwrap()).await;
    let b = Res::read(send("k1").await.unwrap()).await;
    assert_eq!(a.status, 201);
    assert_eq!(a.json()["id"], b.json()["id"]);
    assert_eq!(b.header("idempotent-replayed"), Some("true"));
}

/// A key of another developer's workspace, on `w`'s server.
async fn other_workspace_key(w: &Ws) -> String {
    let (_, other) = w.api.user(&w.admin, "other-dev", "developer").await;
    let me = w.api.get("/me", &other).await.ok();
    let ok = w
        .api
        .post(
            &format!("/teams/{}/keys", s(&me["userId"])),
            &other,
            json!({"name": "x"}),
        )
        .await
        .ok();
    s(&ok["key"])
}

async fn another_workspace_sees_none_of_these_tasks_cases_endpoints_or_hooks(backend: Backend) {
    let d = done_task(backend).await;
    let (w, t, auto, ep) = (&d.w, &d.task, &d.auto, &d.ep);
    let r = w.post("/v1/hooks", json!({"caseId": auto})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let hook = s(&r.json()["id"]);
    let other_key = other_workspace_key(w).await;
    let hooks = w.api.get("/v1/hooks", &other_key).await.ok();
    assert_eq!(
        hooks["data"],
        json!([]),
        "another workspace lists none of these hooks"
    );
    let eps = w.api.get("/v1/webhooks", &other_key).await.ok();
    assert_eq!(eps["data"], json!([]), "nor these endpoints");
    for (m, p) in [
        ("GET", format!("/v1/tasks/{t}")),
        ("GET", format!("/v1/tasks/{t}/outputs")),
        ("GET", format!("/v1/cases/{auto}")),
        ("POST", format!("/v1/cases/{auto}/tasks")),
        ("POST", format!("/v1/tasks/{t}/review")),
        ("DELETE", format!("/v1/cases/{auto}")),
        ("GET", format!("/v1/webhooks/{ep}")),
        ("GET", format!("/v1/webhooks/{ep}/messages")),
        ("POST", format!("/v1/webhooks/{ep}/rotate")),
        ("POST", format!("/v1/webhooks/{ep}/enable")),
        ("DELETE", format!("/v1/webhooks/{ep}")),
        ("DELETE", format!("/v1/hooks/{hook}")),
    ] {
        let body = json!({"inputs": {}, "decision": "approve"});
        let r = w.api.call(m, &p, Some(&other_key), Some(&body)).await;
        assert_eq!(r.status, 404, "{m} {p}: {}", r.text);
    }
}

async fn another_workspace_cannot_put_a_case_on_this_environment(backend: Backend) {
    let w = workspace(backend).await;
    let other_key = other_workspace_key(&w).await;
    let doc = case_doc("x", false, &w.env);
    let r = w
        .api
        .call("POST", "/v1/cases", Some(&other_key), Some(&doc))
        .await;
    assert_eq!(r.status, 400, "another workspace's environment: {}", r.text);
    assert_eq!(r.json()["errors"][0]["pointer"], "/environmentId");
}

async fn an_agent_key_may_not_use_cases(backend: Backend) {
    let d = done_task(backend).await;
    let ak = d.w.agent_key("default").await;
    let r = d.w.api.get(&format!("/v1/tasks/{}", d.task), &ak).await;
    assert_eq!(r.status, 403, "{}", r.text);
}

/// A bot whose task flow fails in the ways a Case's bot can: a JavaScript loop (its fuel),
/// a flow left open, an api call that never answers (the Case's time-out).
fn failing_bot(slow: &str) -> Value {
    json!({
        "name": "failing",
        "methods": {"spin()": "while (true) {}"},
        "flows": {"task": {
            "intents": {
                "loop": {"initial": true, "type": "data", "condition": "payload.inputs.mode == 'loop'"},
                "wait": {"initial": true, "type": "data", "condition": "payload.inputs.mode == 'wait'"},
                "slow": {"initial": true, "type": "data", "condition": "payload.inputs.mode == 'slow'"}
            },
            "states": {
                "start": {"initial": true, "transitions": {
                    "spin": "intent == 'loop'", "ask": "intent == 'wait'", "call": "intent == 'slow'"}},
                "spin": {"end": true, "action": [{"name": "method", "method": "spin"}]},
                "ask": {"action": [{"name": "text", "options": {"text": "which one?"}}],
                    "transitions": {"spin": "content == 'never'"}},
                "call": {"end": true, "action": [{"name": "api", "options": {"method": "GET", "uri": format!("{slow}/slow")}}]}
            }
        }}
    })
}

async fn failures_are_clear_errors(backend: Backend) {
    let w = workspace(backend).await;
    let (pid, env) = deploy(&w.api, &w.admin, failing_bot(&w.stubs.url)).await;
    let mut doc = json!({"name": "fails", "environmentId": env,
        "inputs": [{"name": "mode", "type": "string"}], "outputs": [], "timeoutSeconds": 30});
    let fast = s(&w.post("/v1/cases", doc.clone()).await.json()["id"]);
    doc["name"] = json!("times-out");
    doc["timeoutSeconds"] = json!(1);
    let slow = s(&w.post("/v1/cases", doc).await.json()["id"]);

    let t = w.task(&fast, json!({"mode": "loop"})).await;
    let f = w.wait(&t, "failed").await;
    assert_eq!(f["error"]["code"], "step-failed", "{f}");
    assert!(
        s(&f["error"]["message"]).to_lowercase().contains("fuel")
            || s(&f["error"]["message"]).contains("spin"),
        "{f}"
    );
    // The bot's author finds it with the bot's errors too (channel `task`).
    let errors = w
        .api
        .get(&format!("/projects/{pid}/errors"), &w.admin)
        .await
        .ok();
    assert!(
        errors["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["channelId"] == "task"
                && e["errorGroup"] == "step"
                && e["environmentId"] == env.as_str()),
        "{errors}"
    );

    let t = w.task(&fast, json!({"mode": "wait"})).await;
    let f = w.wait(&t, "failed").await;
    assert_eq!(f["error"]["code"], "flow-not-ended");
    assert!(
        s(&f["error"]["message"]).contains("\"task\"")
            && s(&f["error"]["message"]).contains("\"ask\""),
        "{f}"
    );

    let t = w.task(&slow, json!({"mode": "slow"})).await;
    let f = w.wait(&t, "failed").await;
    assert_eq!(
        f["error"],
        json!({"code": "timeout", "message": "the bot did not finish within the Case's 1 s"})
    );
}

async fn review_survives_a_restart_and_a_killed_workers_task_is_taken_over(backend: Backend) {
    let mut w = workspace(backend).await;
    let reviewed = w.case("invoice", true).await;
    // Created under an Idempotency-Key: the key's answer outlives the process.
    let (http, key, body) = (
        reqwest::Client::new(),
        w.key.clone(),
        json!({"inputs": w.invoice()}),
    );
    let create = |base: String| {
        http.post(format!("{base}/v1/cases/{reviewed}/tasks"))
            .bearer_auth(&key)
            .header("idempotency-key", "order-17")
            .json(&body)
            .send()
    };
    let first = Res::read(create(w.server.base.clone()).await.unwrap()).await;
    assert_eq!(first.status, 201, "{}", first.text);
    let t = s(&first.json()["id"]);
    w.wait(&t, "review").await;
    w.server.restart().await;
    w.api = w.server.api();
    let replay = Res::read(create(w.server.base.clone()).await.unwrap()).await;
    assert_eq!(replay.status, 201, "{}", replay.text);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        s(&replay.json()["id"]),
        t,
        "a retry after a restart creates no second task"
    );
    let list = w.get(&format!("/v1/cases/{reviewed}/tasks")).await.ok();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    let again = w.wait(&t, "review").await;
    assert_eq!(
        again["outputs"]["total"], 25,
        "review keeps its outputs across a restart"
    );
    let r = w
        .post(
            &format!("/v1/tasks/{t}/review"),
            json!({"decision": "approve"}),
        )
        .await
        .ok();
    assert_eq!(r["status"], "done");

    // A task whose bot is in an api call that never answers when the server dies.
    let auto = w.case("invoice-auto", false).await;
    let hanging = json!({"invoice_url": format!("{}/slow/invoice", w.stubs.url)});
    let t = w.task(&auto, hanging).await;
    w.wait(&t, "in_progress").await;
    w.stubs
        .wait_until("the bot's api call", |_| {
            (*w.stubs.slow_hits.lock().unwrap() >= 1).then_some(())
        })
        .await;
    w.server.restart().await;
    w.api = w.server.api();
    // The new process (SQLite: at start; PostgreSQL: once the 2 s lease passed) runs the
    // task again; the api answers this time (an empty invoice), and the task is done.
    let done = w.wait(&t, "done").await;
    assert_eq!(done["outputs"]["total"], 0);
    assert_eq!(
        *w.stubs.slow_hits.lock().unwrap(),
        2,
        "the task ran exactly once more"
    );
}

async fn a_failed_callback_is_retried_as_the_same_signed_message(backend: Backend) {
    let c = called(backend).await;
    let t = c.done_after_two_failures().await;
    let got = c.completed(&t, 3).await;
    let ids: Vec<&str> = got
        .iter()
        .map(|(h, _)| h["webhook-id"].to_str().unwrap())
        .collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    assert!(got.iter().all(|(h, b)| verified(h, b, &c.secret)));
}

async fn a_delivered_message_lists_each_attempts_status(backend: Backend) {
    let c = called(backend).await;
    let t = c.done_after_two_failures().await;
    let msg = poll_until("the message delivered", || async {
        let path = format!("/v1/webhooks/{}/messages", c.ep);
        let m = c.w.get(&path).await.ok();
        m["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["payload"]["data"]["taskId"] == t && m["status"] == "delivered")
            .cloned()
            .ok_or_else(|| m.to_string())
    })
    .await;
    let codes: Vec<i64> = msg["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["statusCode"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, [500, 500, 200]);
}

async fn after_a_rotation_callbacks_carry_both_signatures(backend: Backend) {
    let c = called(backend).await;
    let r = c.endpoint_action("rotate").await;
    let new_secret = parse_secret(&s(&r["secret"])).unwrap();
    assert_ne!(new_secret, c.secret);
    let t = c.done().await;
    let (h, b) = c.completed(&t, 1).await.remove(0);
    assert_eq!(
        h["webhook-signature"].to_str().unwrap().split(' ').count(),
        2
    );
    assert!(verified(&h, &b, &c.secret) && verified(&h, &b, &new_secret));
}

/// [`called`] with the endpoint disabled by a 410 answer.
async fn gone(backend: Backend) -> (Called, Value) {
    let c = called(backend).await;
    c.w.stubs.script.lock().unwrap().push_back(410);
    c.done().await;
    let e = endpoint_when(&c.w, &c.ep, "the endpoint disabled", |e| {
        e["enabled"] == false
    })
    .await;
    (c, e)
}

async fn an_endpoint_answering_410_is_disabled(backend: Backend) {
    let (_, e) = gone(backend).await;
    assert!(s(&e["disabledReason"]).contains("410"));
}

async fn a_disabled_endpoint_gets_nothing_and_can_be_enabled_again(backend: Backend) {
    let (c, _) = gone(backend).await;
    let t = c.done().await;
    let r = c.endpoint_action("enable").await;
    assert_eq!(r["enabled"], true);
    assert!(
        c.w.stubs.events(&t, "task.completed").is_empty(),
        "a disabled endpoint gets nothing"
    );
}

async fn an_agent_run_ends_with_a_signed_run_completed_callback(backend: Backend) {
    let c = called(backend).await;
    let ak = c.w.agent_key("chat").await;
    let r = c
        .w
        .api
        .post(
            "/v1/chat",
            &ak,
            json!({"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}),
        )
        .await
        .ok();
    let run = s(&r["runId"]);
    let stubs = &c.w.stubs;
    let (h, b) = stubs
        .wait_until("run.completed", |seen| {
            seen.iter()
                .filter(|(p, _, _)| p.starts_with("/callbacks"))
                .find(|(_, _, b)| {
                    let v: Value = serde_json::from_slice(b).unwrap_or_default();
                    v["type"] == "run.completed" && v["data"]["runId"] == run
                })
                .map(|(_, h, b)| (h.clone(), b.clone()))
        })
        .await;
    assert!(
        verified(&h, &b, &c.secret),
        "the run's callback is signed too"
    );
    let ev: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(ev["data"]["status"], "completed");
    assert_eq!(ev["data"]["agentId"], c.w.env.as_str());
}

/// The reviewed invoice Case behind an inbound hook that maps `/invoice/url` to its input,
/// on a server allowing three calls a minute per hook (and per key); `body` is the call
/// the tests send.
struct Hooked {
    w: Ws,
    case: String,
    hook: Value,
    url: String,
    secret: Vec<u8>,
    body: String,
}

async fn hooked(backend: Backend) -> Hooked {
    let w = workspace_with(backend, &["--agent-chat-limit", "3"]).await;
    let case = w.case("invoice", true).await;
    let r = w
        .post(
            "/v1/hooks",
            json!({"caseId": case, "mapping": {"invoice_url": "/invoice/url"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let hook = r.json();
    let body = json!({"invoice": {"url": format!("{}/invoice/9", w.stubs.url)}, "currency": "JPY"});
    Hooked {
        secret: parse_secret(&s(&hook["secret"])).unwrap(),
        url: s(&hook["url"]),
        body: body.to_string(),
        w,
        case,
        hook,
    }
}

impl Hooked {
    /// Calls the hook as message `id` sent at `ts` (Unix seconds), signed with `secret`.
    async fn call_with(&self, id: &str, ts: i64, secret: &[u8]) -> Res {
        let rb = self.w.api.http.post(&self.url);
        let rb = rb
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", ts.to_string())
            .header(
                "webhook-signature",
                sign(secret, id, ts, self.body.as_bytes()),
            )
            .body(self.body.clone());
        Res::read(rb.send().await.unwrap()).await
    }

    /// Calls the hook as message `id`, sent now and signed with its secret.
    async fn call(&self, id: &str) -> Res {
        self.call_with(id, now(), &self.secret).await
    }
}

fn now() -> i64 {
    botbox_store::now_ms() / 1000
}

async fn a_signed_call_to_the_hooks_url_starts_a_task_with_the_mapped_inputs(backend: Backend) {
    let h = hooked(backend).await;
    assert!(h.url.ends_with(&format!("/v1/hooks/{}", s(&h.hook["id"]))));
    let first = h.call("evt_1").await;
    assert_eq!(first.status, 202, "{}", first.text);
    let t = h.w.wait(&s(&first.json()["taskId"]), "review").await;
    assert_eq!(
        t["inputs"],
        json!({"invoice_url": format!("{}/invoice/9", h.w.stubs.url), "currency": "JPY"})
    );
    assert_eq!(t["outputs"]["currency"], "JPY");
}

async fn a_repeated_webhook_id_answers_the_first_task_and_creates_nothing(backend: Backend) {
    let h = hooked(backend).await;
    let task = s(&h.call("evt_1").await.json()["taskId"]);
    let again = h.call("evt_1").await;
    assert_eq!(again.status, 202);
    assert_eq!(
        s(&again.json()["taskId"]),
        task,
        "a repeated webhook-id answers the first task"
    );
    let list = h.w.get(&format!("/v1/cases/{}/tasks", h.case)).await.ok();
    assert_eq!(
        list["data"].as_array().unwrap().len(),
        1,
        "and creates nothing"
    );
}

async fn a_hook_call_with_a_wrong_signature_is_refused(backend: Backend) {
    let h = hooked(backend).await;
    let bad = h.call_with("evt_2", now(), b"wrong").await;
    assert_eq!(bad.status, 401);
    assert_eq!(bad.json()["code"], "bad-signature");
}

async fn a_hook_call_stamped_too_long_ago_or_ahead_is_refused(backend: Backend) {
    let h = hooked(backend).await;
    let stale = h.call_with("evt_3", now() - 600, &h.secret).await;
    assert_eq!(stale.status, 401);
    assert_eq!(stale.json()["code"], "timestamp-out-of-tolerance");
    let early = h.call_with("evt_4", now() + 400, &h.secret).await;
    assert_eq!(early.status, 401, "a timestamp too far ahead");
    assert_eq!(early.json()["code"], "timestamp-out-of-tolerance");
}

/// The hook's quota (3 a minute) is charged only by verified calls: refused ones use none
/// of it, so the third verified call passes and the fourth is refused.
async fn only_verified_calls_use_the_hooks_quota(backend: Backend) {
    let h = hooked(backend).await;
    assert_eq!(h.call("evt_1").await.status, 202);
    assert_eq!(h.call("evt_1").await.status, 202);
    let refused = [
        h.call_with("evt_2", now(), b"wrong").await,
        h.call_with("evt_3", now() - 600, &h.secret).await,
        h.call_with("evt_4", now() + 400, &h.secret).await,
    ];
    assert!(refused.iter().all(|r| r.status == 401), "{refused:?}");
    let third = h.call("evt_5").await;
    assert_eq!(third.status, 202, "{}", third.text);
    // (Fixed one-minute windows: should one end meanwhile, a few more calls reach 429.)
    let mut fourth = None;
    for id in ["evt_6", "evt_7", "evt_8", "evt_9", "evt_10"] {
        let r = h.call(id).await;
        if r.status != 202 {
            fourth = Some(r);
            break;
        }
    }
    let fourth = fourth.expect("the hook's quota is never reached");
    assert_eq!(fourth.status, 429, "{}", fourth.text);
    assert_eq!(fourth.json()["code"], "quota-exceeded");
    assert!(fourth.header("retry-after").is_some());
}

/// Guessing one hook's signature is throttled per address and hook (30 refusals a minute,
/// then 429 without a look-up); the same address keeps its other hooks and its keyed
/// requests (a provider's shared senders, a proxy).
async fn guessing_a_hooks_signature_is_throttled_for_that_hook_only(backend: Backend) {
    let h = hooked(backend).await;
    let mut throttled = false;
    for i in 0..70 {
        let r = h.call_with(&format!("guess_{i}"), now(), b"guess").await;
        if r.status == 429 {
            assert_eq!(r.json()["code"], "too-many-invalid-keys");
            throttled = true;
            break;
        }
        assert_eq!(r.status, 401);
    }
    assert!(throttled, "refused signatures are never throttled");
    let other = h.w.post("/v1/hooks", json!({"caseId": h.case})).await;
    let other = s(&other.json()["url"]);
    let r = h.w.api.http.post(&other).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 401, "another hook is not locked out");
    assert_eq!(
        h.w.get("/v1/hooks").await.status,
        200,
        "nor the address's keyed requests"
    );
}

/// The CLI's surface: a project's Cases and tasks with a user's token.
async fn the_project_api_serves_the_cli(backend: Backend) {
    let w = workspace(backend).await;
    let mut doc = case_doc("invoice", false, "");
    doc.as_object_mut().unwrap().remove("environmentId");
    doc["environment"] = json!("production");
    let c = w
        .api
        .post(&format!("/projects/{}/cases", w.pid), &w.admin, doc)
        .await
        .ok();
    let t = w
        .api
        .post(
            &format!("/projects/{}/cases/invoice/tasks", w.pid),
            &w.admin,
            json!({"inputs": w.invoice()}),
        )
        .await
        .ok();
    let id = s(&t["id"]);
    let t = poll_until("the task done", || async {
        let t = w
            .api
            .get(&format!("/projects/{}/tasks/{id}", w.pid), &w.admin)
            .await
            .ok();
        if t["status"] == "done" {
            Ok(t)
        } else {
            Err(t.to_string())
        }
    })
    .await;
    assert_eq!(t["outputs"]["total"], 25);
    let list = w
        .api
        .get(&format!("/projects/{}/cases", w.pid), &w.admin)
        .await
        .ok();
    assert_eq!(list["data"][0]["id"], c["id"]);
}

/// Endpoint `ep` once `done` holds of it (30 s at most).
async fn endpoint_when(w: &Ws, ep: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    poll_until(what, || async {
        let e = w.get(&format!("/v1/webhooks/{ep}")).await.ok();
        if done(&e) { Ok(e) } else { Err(e.to_string()) }
    })
    .await
}

/// The endpoint's messages that failed, once there are `n` (30 s at most).
async fn failed_messages(w: &Ws, ep: &str, n: usize) -> Vec<Value> {
    poll_until("failed messages", || async {
        let m = w.get(&format!("/v1/webhooks/{ep}/messages")).await.ok();
        let failed: Vec<Value> = m["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["status"] == "failed")
            .cloned()
            .collect();
        if failed.len() >= n {
            Ok(failed)
        } else {
            Err(m.to_string())
        }
    })
    .await
}

/// An endpoint that fails every attempt: after one message fails through the whole
/// schedule it is `failing`; after three in a row it is disabled; `enable` clears both.
async fn an_endpoint_failing_through_its_schedule_is_disabled(backend: Backend) {
    // The three-day schedule in about a quarter of a second.
    let w = workspace_with(backend, &["--callback-retry-scale", "1000000"]).await;
    let auto = w.case("invoice-auto", false).await;
    let (ep, _) = w.endpoint("/callbacks").await;
    w.stubs.script.lock().unwrap().extend([500; 40]);
    let t = w.task(&auto, w.invoice()).await;
    w.wait(&t, "done").await;
    let failed = failed_messages(&w, &ep, 1).await;
    assert_eq!(
        failed[0]["attempts"].as_array().unwrap().len(),
        10,
        "the first attempt and nine retries"
    );
    // The message's failure is recorded, then the endpoint marked failing.
    let e = endpoint_when(&w, &ep, "the endpoint failing", |e| e["failing"] == true).await;
    assert_eq!(
        e["enabled"], true,
        "one exhausted message does not disable: {e}"
    );
    assert!(e["failingSince"].is_string());
    for _ in 0..2 {
        let t = w.task(&auto, w.invoice()).await;
        w.wait(&t, "done").await;
    }
    failed_messages(&w, &ep, 3).await;
    // The third message's failure is recorded, then the endpoint is disabled.
    let e = endpoint_when(&w, &ep, "the endpoint disabled", |e| e["enabled"] == false).await;
    assert!(
        s(&e["disabledReason"]).contains("3 messages in a row"),
        "{e}"
    );
    let e = w
        .post(&format!("/v1/webhooks/{ep}/enable"), json!({}))
        .await
        .ok();
    assert_eq!(
        (e["enabled"].clone(), e["failing"].clone()),
        (json!(true), json!(false))
    );
}

on_both_backends!(
    // A task: its inputs, outputs and artifacts, its review, idempotency, tenancy, failures.
    task_inputs_are_checked_field_by_field,
    a_task_without_review_ends_done_with_its_outputs,
    a_done_tasks_artifact_is_served_at_its_signed_url,
    an_artifact_url_is_refused_once_tampered_with_or_expired,
    a_task_waiting_for_review_shows_its_artifacts,
    a_task_in_review_has_no_outputs_yet,
    a_task_in_review_tells_pollers_to_retry_after_a_minute,
    edited_outputs_are_checked_against_their_types,
    approving_with_edited_outputs_finishes_the_task_with_them,
    a_review_decision_is_idempotent_under_its_key,
    a_decided_task_cannot_be_decided_again,
    asking_for_changes_needs_a_comment,
    changes_take_the_comment_to_the_bot_and_the_task_back_to_review,
    a_task_approved_after_changes_serves_the_artifact_of_its_last_pass,
    a_rejected_task_fails_with_the_reviewers_comment,
    a_task_created_again_under_its_idempotency_key_is_the_same_task,
    another_workspace_sees_none_of_these_tasks_cases_endpoints_or_hooks,
    another_workspace_cannot_put_a_case_on_this_environment,
    an_agent_key_may_not_use_cases,
    failures_are_clear_errors,
    review_survives_a_restart_and_a_killed_workers_task_is_taken_over,
    the_project_api_serves_the_cli,
    // Callbacks.
    a_done_task_is_called_back_with_a_signed_task_completed,
    a_task_entering_review_is_called_back,
    a_failed_callback_is_retried_as_the_same_signed_message,
    a_delivered_message_lists_each_attempts_status,
    after_a_rotation_callbacks_carry_both_signatures,
    an_endpoint_answering_410_is_disabled,
    a_disabled_endpoint_gets_nothing_and_can_be_enabled_again,
    an_endpoint_failing_through_its_schedule_is_disabled,
    an_agent_run_ends_with_a_signed_run_completed_callback,
    // Inbound hooks.
    a_signed_call_to_the_hooks_url_starts_a_task_with_the_mapped_inputs,
    a_repeated_webhook_id_answers_the_first_task_and_creates_nothing,
    a_hook_call_with_a_wrong_signature_is_refused,
    a_hook_call_stamped_too_long_ago_or_ahead_is_refused,
    only_verified_calls_use_the_hooks_quota,
    guessing_a_hooks_signature_is_throttled_for_that_hook_only,
);

/// With `--storage-quota-mb 1`, a workspace storing more than 1 MiB has its next task's
/// artifacts refused: the task fails with `storage-quota` naming the figures, and nothing
/// of it is stored as an artifact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_past_its_storage_quota_gets_no_artifacts() {
    let w = workspace_with(Backend::Sqlite, &["--storage-quota-mb", "1"]).await;
    let auto = w.case("invoice-auto", false).await;
    let db = w.server.db().await;
    sqlx::query(
        "INSERT INTO transcripts (id, project_id, environment_id, environment_name, channel_id, \
         user_id, direction, message, flow, intent, state, created_at) VALUES \
         ('big', $1, $2, 'production', 'c', 'u', 'in', $3, NULL, NULL, NULL, 0)",
    )
    .bind(&w.pid)
    .bind(&w.env)
    .bind("x".repeat(1_100_000))
    .execute(&db.pool)
    .await
    .unwrap();
    let t = w.task(&auto, w.invoice()).await;
    let f = w.wait(&t, "failed").await;
    assert_eq!(f["error"]["code"], "storage-quota", "{f}");
    assert!(s(&f["error"]["message"]).contains("of its 1048576"), "{f}");
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM task_artifacts WHERE task_id = $1")
        .bind(&t)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 0);
}
