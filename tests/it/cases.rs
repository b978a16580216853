//! Cases and tasks, end to end against the real server: a task through every
//! path (done, review → approve with edited outputs, review → changes → done, reject, bot
//! error, flow not ended, time-out), outputs and artifacts with signed URLs, tenancy,
//! restarts and a killed worker's task taken over, callbacks signed per Standard Webhooks
//! with retries and 410, inbound hooks with signature, stale timestamp and dedupe.

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

async fn a_task_through_every_path(backend: Backend) {
    let w = workspace(backend).await;
    let (ep, secret) = w.endpoint("/callbacks").await;
    let auto = w.case("invoice-auto", false).await;
    let reviewed = w.case("invoice", true).await;

    // Inputs are checked field by field.
    let r = w
        .post(
            &format!("/v1/cases/{auto}/tasks"),
            json!({"inputs": {"currency": 3, "extra": true}}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    let p = r.json();
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    let mut ptrs: Vec<String> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| s(&e["pointer"]))
        .collect();
    ptrs.sort();
    assert_eq!(
        ptrs,
        ["/inputs/currency", "/inputs/extra", "/inputs/invoice_url"]
    );

    // 1. done, no review: outputs, the artifact through its signed URL, task.completed.
    let t1 = w.task(&auto, w.invoice()).await;
    let done = w.wait(&t1, "done").await;
    assert_eq!(
        done["outputs"],
        json!({"vendor": "ACME", "total": 25, "currency": "USD", "lines": 2, "reply": "total 25 USD"})
    );
    let out = w.get(&format!("/v1/tasks/{t1}/outputs")).await.ok();
    assert_eq!(out["outputs"]["total"], 25);
    let art = &out["artifacts"][0];
    assert_eq!(art["name"], "summary");
    assert_eq!(art["mediaType"], "text/plain");
    let url = s(&art["url"]);
    let got = w.api.http.get(&url).send().await.unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.headers()["content-type"], "text/plain");
    assert_eq!(got.text().await.unwrap(), "ACME: 2 lines, 25 USD");
    // A changed signature, and an expired URL correctly signed, are refused.
    let bad = url.replace("signature=", "signature=x");
    assert_eq!(w.api.http.get(&bad).send().await.unwrap().status(), 403);
    let key = ServerKey::load(Some(SECRET_KEY), std::path::Path::new("/nonexistent")).unwrap();
    let art_id = s(&art["id"]);
    let past = botbox_store::now_ms() / 1000 - 1;
    let expired = format!(
        "{}/v1/artifacts/{art_id}?expires={past}&signature={}",
        w.server.base,
        key.artifact_signature(&art_id, past)
    );
    assert_eq!(w.api.http.get(&expired).send().await.unwrap().status(), 410);
    let later = past + 3600;
    let moved = format!(
        "{}/v1/artifacts/{art_id}?expires={later}&signature={}",
        w.server.base,
        key.artifact_signature(&art_id, past)
    );
    assert_eq!(w.api.http.get(&moved).send().await.unwrap().status(), 403);
    let (h, b) = w
        .stubs
        .wait_until("task.completed", |_| {
            w.stubs.events(&t1, "task.completed").pop()
        })
        .await;
    assert!(
        verified(&h, &b, &secret),
        "the callback's signature verifies"
    );
    let ev: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(
        ev["data"],
        json!({"taskId": t1, "caseId": auto, "status": "done"})
    );
    assert!(h["webhook-id"].to_str().unwrap().starts_with("msg_"));

    // 2. review → approve with edited outputs.
    let t2 = w.task(&reviewed, w.invoice()).await;
    let rev = w.wait(&t2, "review").await;
    assert!(rev["review"]["requestedAt"].is_string());
    assert_eq!(
        rev["artifacts"][0]["name"], "summary",
        "a reviewer sees the artifacts"
    );
    let r = w.get(&format!("/v1/tasks/{t2}/outputs")).await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["code"], "task-not-done");
    let r = w.get(&format!("/v1/tasks/{t2}")).await;
    assert_eq!(r.header("retry-after"), Some("60"));
    w.stubs
        .wait_until("task.review_requested", |_| {
            w.stubs.events(&t2, "task.review_requested").pop()
        })
        .await;
    let r = w
        .post(
            &format!("/v1/tasks/{t2}/review"),
            json!({"decision": "approve", "outputs": {"total": "lots"}}),
        )
        .await;
    assert_eq!(r.status, 400, "edited outputs are typed: {}", r.text);
    assert_eq!(r.json()["errors"][0]["pointer"], "/outputs/total");
    // The decision under an Idempotency-Key: a retry replays it, another body is refused.
    let decide = |k: &'static str, body: Value| {
        w.api
            .http
            .post(format!("{}/v1/tasks/{t2}/review", w.server.base))
            .bearer_auth(&w.key)
            .header("idempotency-key", k)
            .json(&body)
            .send()
    };
    let approve =
        json!({"decision": "approve", "comment": "ok with rounding", "outputs": {"total": 24}});
    let r = Res::read(decide("d1", approve.clone()).await.unwrap()).await;
    let replay = Res::read(decide("d1", approve).await.unwrap()).await;
    assert_eq!(replay.status, r.status);
    assert_eq!(
        replay.header("idempotent-replayed"),
        Some("true"),
        "{}",
        replay.text
    );
    assert_eq!(replay.json()["review"], r.json()["review"]);
    let other = Res::read(decide("d1", json!({"decision": "reject"})).await.unwrap()).await;
    assert_eq!(other.status, 422, "{}", other.text);
    assert_eq!(other.json()["code"], "idempotency-key-reused");
    let t = r.ok();
    assert_eq!(t["status"], "done");
    assert_eq!(t["outputs"]["total"], 24);
    assert_eq!(t["outputs"]["vendor"], "ACME");
    assert_eq!(t["review"]["decision"], "approve");
    assert_eq!(t["review"]["comment"], "ok with rounding");
    assert!(s(&t["review"]["decidedBy"]).contains("automation"));
    assert_eq!(t["reviews"][0]["outputs"]["total"], 24);
    // Deciding again is not a transition the task state machine allows.
    let r = w
        .post(
            &format!("/v1/tasks/{t2}/review"),
            json!({"decision": "reject"}),
        )
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["code"], "invalid-transition");
    assert_eq!(r.json()["currentStatus"], "done");

    // 3. review → changes (the comment reaches the bot) → review → approve.
    let t3 = w.task(&reviewed, w.invoice()).await;
    w.wait(&t3, "review").await;
    let r = w
        .post(
            &format!("/v1/tasks/{t3}/review"),
            json!({"decision": "changes"}),
        )
        .await;
    assert_eq!(r.status, 400, "changes need a comment");
    let r = w
        .post(
            &format!("/v1/tasks/{t3}/review"),
            json!({"decision": "changes", "comment": "apply discount 10"}),
        )
        .await
        .ok();
    assert!(
        ["in_progress", "review"].contains(&r["status"].as_str().unwrap()),
        "{r}"
    );
    let again = w.wait(&t3, "review").await;
    assert_eq!(again["outputs"]["total"], 22.5);
    assert_eq!(again["outputs"]["note"], "discount 10%");
    assert_eq!(again["reviews"][0]["decision"], "changes");
    let r = w
        .post(
            &format!("/v1/tasks/{t3}/review"),
            json!({"decision": "approve"}),
        )
        .await
        .ok();
    assert_eq!(r["status"], "done");
    let out = w.get(&format!("/v1/tasks/{t3}/outputs")).await.ok();
    let url = s(&out["artifacts"][0]["url"]);
    let text = w
        .api
        .http
        .get(&url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        text, "ACME: 22.5 USD after 10% discount",
        "the new pass's artifact"
    );

    // 4. reject.
    let t4 = w.task(&reviewed, w.invoice()).await;
    w.wait(&t4, "review").await;
    let r = w
        .post(
            &format!("/v1/tasks/{t4}/review"),
            json!({"decision": "reject", "comment": "wrong vendor"}),
        )
        .await
        .ok();
    assert_eq!(r["status"], "failed");
    assert_eq!(
        r["error"],
        json!({"code": "rejected", "message": "wrong vendor"})
    );
    w.stubs
        .wait_until("task.failed", |_| w.stubs.events(&t4, "task.failed").pop())
        .await;

    // Idempotency-Key on creation: the same task.
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

    // Another workspace's key sees nothing of this one; an agent key may not use Cases.
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
    let other_key = s(&ok["key"]);
    let r = w.post("/v1/hooks", json!({"caseId": auto})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let hook = s(&r.json()["id"]);
    let hooks = w.api.get("/v1/hooks", &other_key).await.ok();
    assert_eq!(
        hooks["data"],
        json!([]),
        "another workspace lists none of these hooks"
    );
    let eps = w.api.get("/v1/webhooks", &other_key).await.ok();
    assert_eq!(eps["data"], json!([]), "nor these endpoints");
    for (m, p) in [
        ("GET", format!("/v1/tasks/{t1}")),
        ("GET", format!("/v1/tasks/{t1}/outputs")),
        ("GET", format!("/v1/cases/{auto}")),
        ("POST", format!("/v1/cases/{auto}/tasks")),
        ("POST", format!("/v1/tasks/{t3}/review")),
        ("DELETE", format!("/v1/cases/{auto}")),
        ("GET", format!("/v1/webhooks/{ep}")),
        ("GET", format!("/v1/webhooks/{ep}/messages")),
        ("POST", format!("/v1/webhooks/{ep}/rotate")),
        ("POST", format!("/v1/webhooks/{ep}/enable")),
        ("DELETE", format!("/v1/webhooks/{ep}")),
        ("DELETE", format!("/v1/hooks/{hook}")),
    ] {
        let r = w
            .api
            .call(
                m,
                &p,
                Some(&other_key),
                Some(&json!({"inputs": {}, "decision": "approve"})),
            )
            .await;
        assert_eq!(r.status, 404, "{m} {p}: {}", r.text);
    }
    let r = w
        .api
        .call(
            "POST",
            "/v1/cases",
            Some(&other_key),
            Some(&case_doc("x", false, &w.env)),
        )
        .await;
    assert_eq!(r.status, 400, "another workspace's environment: {}", r.text);
    assert_eq!(r.json()["errors"][0]["pointer"], "/environmentId");
    let ak = w.agent_key("default").await;
    let r = w.api.get(&format!("/v1/tasks/{t1}"), &ak).await;
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

async fn callbacks_retry_disable_on_410_and_rotate(backend: Backend) {
    let w = workspace(backend).await;
    let auto = w.case("invoice-auto", false).await;
    let (ep, secret) = w.endpoint("/callbacks").await;
    // 500, 500, then 200: three attempts of one message, the same webhook-id each time.
    w.stubs.script.lock().unwrap().extend([500, 500]);
    let t = w.task(&auto, w.invoice()).await;
    w.wait(&t, "done").await;
    let got = w
        .stubs
        .wait_until("three attempts", |_| {
            let e = w.stubs.events(&t, "task.completed");
            (e.len() >= 3).then_some(e)
        })
        .await;
    let ids: Vec<&str> = got
        .iter()
        .map(|(h, _)| h["webhook-id"].to_str().unwrap())
        .collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    assert!(got.iter().all(|(h, b)| verified(h, b, &secret)));
    let msg = poll_until("the message delivered", || async {
        let m = w.get(&format!("/v1/webhooks/{ep}/messages")).await.ok();
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

    // Rotation: the next callback carries both signatures; each secret verifies it.
    let r = w
        .post(&format!("/v1/webhooks/{ep}/rotate"), json!({}))
        .await
        .ok();
    let new_secret = parse_secret(&s(&r["secret"])).unwrap();
    assert_ne!(new_secret, secret);
    let t2 = w.task(&auto, w.invoice()).await;
    let (h, b) = w
        .stubs
        .wait_until("a callback after rotation", |_| {
            w.stubs.events(&t2, "task.completed").pop()
        })
        .await;
    assert_eq!(
        h["webhook-signature"].to_str().unwrap().split(' ').count(),
        2
    );
    assert!(verified(&h, &b, &secret) && verified(&h, &b, &new_secret));

    // 410 Gone disables the endpoint.
    w.stubs.script.lock().unwrap().push_back(410);
    let t3 = w.task(&auto, w.invoice()).await;
    w.wait(&t3, "done").await;
    let e = endpoint_when(&w, &ep, "the endpoint disabled", |e| e["enabled"] == false).await;
    assert!(s(&e["disabledReason"]).contains("410"));
    let t4 = w.task(&auto, w.invoice()).await;
    w.wait(&t4, "done").await;
    let r = w
        .post(&format!("/v1/webhooks/{ep}/enable"), json!({}))
        .await
        .ok();
    assert_eq!(r["enabled"], true);
    assert!(
        w.stubs.events(&t4, "task.completed").is_empty(),
        "a disabled endpoint gets nothing"
    );

    // The agent API's runs reach the same endpoints: a chat run ends with run.completed.
    let ak = w.agent_key("chat").await;
    let r = w
        .api
        .post(
            "/v1/chat",
            &ak,
            json!({"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}),
        )
        .await
        .ok();
    let run = s(&r["runId"]);
    let (h, b) = w
        .stubs
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
        verified(&h, &b, &new_secret),
        "the run's callback is signed too"
    );
    let ev: Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(ev["data"]["status"], "completed");
    assert_eq!(ev["data"]["agentId"], w.env.as_str());
}

async fn inbound_hooks_verify_and_deduplicate(backend: Backend) {
    // Three calls a minute per hook (and per key), to reach the hook's quota below.
    let w = workspace_with(backend, &["--agent-chat-limit", "3"]).await;
    let reviewed = w.case("invoice", true).await;
    let r = w
        .post(
            "/v1/hooks",
            json!({"caseId": reviewed, "mapping": {"invoice_url": "/invoice/url"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let hook = r.json();
    let secret = parse_secret(&s(&hook["secret"])).unwrap();
    let url = s(&hook["url"]);
    assert!(url.ends_with(&format!("/v1/hooks/{}", s(&hook["id"]))));
    let body = json!({"invoice": {"url": format!("{}/invoice/9", w.stubs.url)}, "currency": "JPY"})
        .to_string();
    let post = |id: &str, ts: i64, sig: String| {
        w.api
            .http
            .post(&url)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sig)
            .body(body.clone())
            .send()
    };
    let now = botbox_store::now_ms() / 1000;
    let first = Res::read(
        post("evt_1", now, sign(&secret, "evt_1", now, body.as_bytes()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(first.status, 202, "{}", first.text);
    let task = s(&first.json()["taskId"]);
    let again = Res::read(
        post("evt_1", now, sign(&secret, "evt_1", now, body.as_bytes()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again.status, 202);
    assert_eq!(
        s(&again.json()["taskId"]),
        task,
        "a repeated webhook-id answers the first task"
    );
    let list = w.get(&format!("/v1/cases/{reviewed}/tasks")).await.ok();
    assert_eq!(
        list["data"].as_array().unwrap().len(),
        1,
        "and creates nothing"
    );
    let bad = Res::read(
        post("evt_2", now, sign(b"wrong", "evt_2", now, body.as_bytes()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(bad.status, 401);
    assert_eq!(bad.json()["code"], "bad-signature");
    let old = now - 600;
    let stale = Res::read(
        post("evt_3", old, sign(&secret, "evt_3", old, body.as_bytes()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stale.status, 401);
    assert_eq!(stale.json()["code"], "timestamp-out-of-tolerance");
    let ahead = now + 400;
    let early = Res::read(
        post(
            "evt_4",
            ahead,
            sign(&secret, "evt_4", ahead, body.as_bytes()),
        )
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(early.status, 401, "a timestamp too far ahead");
    assert_eq!(early.json()["code"], "timestamp-out-of-tolerance");
    // The hook's quota (3 a minute) is charged only by verified calls: the refused ones
    // above used none of it; the third verified call passes, the fourth is 429.
    let third = Res::read(
        post("evt_5", now, sign(&secret, "evt_5", now, body.as_bytes()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(third.status, 202, "{}", third.text);
    // (Fixed one-minute windows: should one end meanwhile, a few more calls reach 429.)
    let mut fourth = None;
    for id in ["evt_6", "evt_7", "evt_8", "evt_9", "evt_10"] {
        let r = Res::read(
            post(id, now, sign(&secret, id, now, body.as_bytes()))
                .await
                .unwrap(),
        )
        .await;
        if r.status != 202 {
            fourth = Some(r);
            break;
        }
    }
    let fourth = fourth.expect("the hook's quota is never reached");
    assert_eq!(fourth.status, 429, "{}", fourth.text);
    assert_eq!(fourth.json()["code"], "quota-exceeded");
    assert!(fourth.header("retry-after").is_some());
    // Guessing one hook's signature is throttled per address and hook (30 refusals a
    // minute, then 429 without a look-up); the same address keeps its other hooks and its
    // keyed requests (a provider's shared senders, a proxy).
    let mut throttled = false;
    for i in 0..70 {
        let id = format!("guess_{i}");
        let r = Res::read(
            post(&id, now, sign(b"guess", &id, now, body.as_bytes()))
                .await
                .unwrap(),
        )
        .await;
        if r.status == 429 {
            assert_eq!(r.json()["code"], "too-many-invalid-keys");
            throttled = true;
            break;
        }
        assert_eq!(r.status, 401);
    }
    assert!(throttled, "refused signatures are never throttled");
    let other = s(&w
        .post("/v1/hooks", json!({"caseId": reviewed}))
        .await
        .json()["url"]);
    let r = w.api.http.post(&other).body("{}").send().await.unwrap();
    assert_eq!(r.status(), 401, "another hook is not locked out");
    assert_eq!(
        w.get("/v1/hooks").await.status,
        200,
        "nor the address's keyed requests"
    );
    let t = w.wait(&task, "review").await;
    assert_eq!(
        t["inputs"],
        json!({"invoice_url": format!("{}/invoice/9", w.stubs.url), "currency": "JPY"})
    );
    assert_eq!(t["outputs"]["currency"], "JPY");
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
    an_endpoint_failing_through_its_schedule_is_disabled,
    a_task_through_every_path,
    failures_are_clear_errors,
    review_survives_a_restart_and_a_killed_workers_task_is_taken_over,
    callbacks_retry_disable_on_410_and_rotate,
    inbound_hooks_verify_and_deduplicate,
    the_project_api_serves_the_cli,
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
