//! The agent API under /v1, end to end: keys, chat runs streamed as the AI SDK UI message
//! stream, replay, cancel, steer, errors, limits. Tests whose bot calls a stand-in api
//! server on loopback, or that restart the server, run against the real server; the others
//! in-process.

use crate::common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Chunk types and the fields each may carry besides `type` (what ai@5.0.0 accepts).
fn allowed(chunk: &Value) -> bool {
    let t = chunk["type"].as_str().unwrap_or("");
    let fields: &[&str] = match t {
        "start" => &["messageId", "messageMetadata"],
        "start-step" | "finish-step" | "abort" => &[],
        "text-start" | "text-end" => &["id", "providerMetadata"],
        "text-delta" => &["id", "delta", "providerMetadata"],
        "tool-input-available" => &[
            "toolCallId",
            "toolName",
            "input",
            "providerExecuted",
            "providerMetadata",
            "dynamic",
        ],
        "tool-output-available" => &["toolCallId", "output", "providerExecuted", "dynamic"],
        "tool-output-error" => &["toolCallId", "errorText", "providerExecuted", "dynamic"],
        "error" => &["errorText"],
        "finish" => &["messageMetadata"],
        t if t.starts_with("data-") => &["id", "data", "transient"],
        _ => return false,
    };
    chunk
        .as_object()
        .unwrap()
        .keys()
        .all(|k| k == "type" || fields.contains(&k.as_str()))
}

/// The chunks of an SSE body (`[DONE]` as the string "[DONE]"), checking the framing: each
/// event is `id: n` and one `data:` line, ids counting from `first`.
fn chunks(body: &str, first: i64) -> Vec<Value> {
    let mut out = Vec::new();
    let mut expect = first;
    for ev in body.split("\n\n").filter(|e| !e.is_empty()) {
        if ev.starts_with(':') {
            continue;
        }
        let lines: Vec<&str> = ev.lines().collect();
        assert_eq!(lines.len(), 2, "event {ev:?}");
        assert_eq!(lines[0], format!("id: {expect}"));
        expect += 1;
        let data = lines[1].strip_prefix("data: ").expect("a data line");
        if data == "[DONE]" {
            out.push(json!("[DONE]"));
        } else {
            let v: Value = serde_json::from_str(data).unwrap();
            assert!(allowed(&v), "chunk outside the ai@5.0.0 schema: {v}");
            out.push(v);
        }
    }
    out
}

/// A live stream without its keep-alive comments (they depend on timing; the log does not).
fn without_pings(body: &str) -> String {
    body.replace(": ping\n\n", "")
}

/// How a run's stream opens up to its first tool call's input.
const FIRST_TOOL_CALL: [&str; 4] = [
    "start",
    "data-run-status",
    "start-step",
    "tool-input-available",
];

fn types(c: &[Value]) -> Vec<String> {
    c.iter()
        .map(|v| {
            v["type"]
                .as_str()
                .unwrap_or(v.as_str().unwrap_or("?"))
                .to_owned()
        })
        .collect()
}

fn texts_of(c: &[Value]) -> Vec<String> {
    c.iter()
        .filter(|v| v["type"] == "text-delta")
        .map(|v| s(&v["delta"]))
        .collect()
}

/// A stand-in for the bot's api: answers `{"email": "<user>@example.com"}`; with `hold`,
/// the first request is held until `release` (or forever), and `arrived` is notified.
#[derive(Clone, Default)]
struct SlowApi {
    hits: Arc<AtomicUsize>,
    arrived: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
}

impl SlowApi {
    async fn start(hold: bool) -> (SlowApi, String) {
        let me = SlowApi::default();
        let m = me.clone();
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let m = m.clone();
            async move {
                let n = m.hits.fetch_add(1, Ordering::SeqCst);
                m.arrived.notify_one();
                if hold && n == 0 {
                    m.release.notified().await;
                }
                let user = uri.path().rsplit('/').next().unwrap_or("").to_owned();
                axum::Json(json!({"email": format!("{user}@example.com")}))
            }
        });
        let url = crate::common::serve_stub(app).await;
        (me, url)
    }

    /// Waits (30 s at most) until the first request arrived.
    async fn wait_request(&self) {
        tokio::time::timeout(Duration::from_secs(30), async {
            while self.hits.load(Ordering::SeqCst) == 0 {
                self.arrived.notified().await;
            }
        })
        .await
        .expect("the bot's api call never arrived");
    }
}

/// The api-status example bot calling `base`.
fn api_bot(base: &str) -> Value {
    let mut bot = example_bot("api-status");
    bot["config"]["base"] = json!(base);
    bot
}

/// A deployed bot and an agent key of its environment, on a server process or in-process.
type Agent<S = Server> = Keyed<(), S>;

/// `bot` on a server process started with `extra`'s flags.
async fn agent(backend: Backend, bot: Value, extra: &[&str]) -> Agent {
    agent_on(Server::start(backend, extra).await, bot).await
}

/// `bot` deployed on `server`, with an agent key.
async fn agent_on<S: Serves>(server: S, bot: Value) -> Agent<S> {
    let deployed = Deployed::start(server, bot).await;
    Keyed {
        key: deployed.agent_key("tests").await,
        deployed,
        stubs: (),
    }
}

impl<S> Agent<S> {
    /// `POST /v1/chat`, its answer read whole (with `stream`, the stream to its end).
    async fn chat(&self, body: Value, stream: bool) -> Res {
        let mut rb = self
            .api
            .http
            .post(format!("{}/v1/chat", self.api.base))
            .bearer_auth(&self.key)
            .json(&body);
        if stream {
            rb = rb.header("accept", "text/event-stream");
        }
        self.api.send(rb).await
    }

    /// `GET /v1/chat/{id}/stream`, read to its end.
    async fn stream(&self, id: &str) -> Res {
        self.api
            .send(
                self.api
                    .http
                    .get(format!("{}/v1/chat/{id}/stream", self.api.base))
                    .bearer_auth(&self.key),
            )
            .await
    }

    /// `POST /v1/chat` with `body`, not streamed.
    async fn post_chat(&self, body: Value) -> Res {
        self.v1("POST", "/v1/chat", Some(body)).await
    }

    async fn v1(&self, method: &str, path: &str, body: Option<Value>) -> Res {
        self.api
            .call(method, path, Some(&self.key), body.as_ref())
            .await
    }
}

impl Agent {
    /// `GET /v1/chat/{id}/stream` over HTTP: the answer as it comes.
    async fn get_stream(&self, id: &str, last: Option<i64>) -> reqwest::Response {
        let mut rb = self
            .api
            .http
            .get(format!("{}/v1/chat/{id}/stream", self.api.base))
            .bearer_auth(&self.key);
        if let Some(n) = last {
            rb = rb.header("last-event-id", n.to_string());
        }
        rb.send().await.unwrap()
    }
}

fn user_msg(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

// ---------------------------------------------------------------------------------------------

/// A run of the agent's key, streamed to its end: the run's id and its conversation's.
async fn finished_run<S>(a: &Agent<S>) -> (String, String) {
    let r = a
        .chat(json!({"messages": [user_msg("m1", "check alice")]}), false)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let started = r.json();
    let run = s(&started["runId"]);
    assert!(a.stream(&run).await.text.ends_with("data: [DONE]\n\n"));
    (run, s(&started["conversationId"]))
}

/// An environment's key is listed by its hint and stored as a hash, never itself; neither a
/// viewer nor a developer without a relation to the project may make one.
async fn keys_are_listed_by_hint_and_stored_hashed(backend: Backend) {
    let a = agent_on(InProcess::start(backend).await, example_bot("hello")).await;
    let api = &a.api;
    // Listed by hint, never the key itself.
    let list = api
        .get(
            &format!("/projects/{}/environments/{}/keys", a.pid, a.env),
            &a.admin,
        )
        .await
        .ok();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert!(list[0].get("key").is_none());
    assert_eq!(
        s(&list[0]["hint"]),
        format!("sak_…{}", &a.key[a.key.len() - 4..])
    );
    // The database holds only the hash.
    let db = a.server.db().await;
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM api_keys WHERE hash = $1")
        .bind(botbox_service::auth::token_hash(&a.key))
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(n, 1);
    let (raw,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM api_keys WHERE hash = $1 OR hint = $1 OR name = $1")
            .bind(&a.key)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(raw, 0);

    // Neither a viewer nor another developer without a relation to the project sees it.
    let (_, viewer) = api.user(&a.admin, "keyviewer", "viewer").await;
    let (_, dev) = api.user(&a.admin, "keydev", "developer").await;
    let path = format!("/projects/{}/environments/{}/keys", a.pid, a.env);
    assert_eq!(api.post(&path, &viewer, json!({})).await.status, 404);
    assert_eq!(api.post(&path, &dev, json!({})).await.status, 404);
}

/// A second environment's key does not reach the first one's runs or conversations.
async fn a_key_reaches_its_environments_runs_only(backend: Backend) {
    let a = agent_on(InProcess::start(backend).await, example_bot("hello")).await;
    let api = &a.api;
    let (run, conv) = finished_run(&a).await;
    let other_env = api
        .post(
            &format!("/projects/{}/environments", a.pid),
            &a.admin,
            json!({"depId": a.pid, "depVersion": "1.0.0", "name": "staging"}),
        )
        .await
        .ok();
    let other = api
        .post(
            &format!(
                "/projects/{}/environments/{}/keys",
                a.pid,
                s(&other_env["id"])
            ),
            &a.admin,
            json!({}),
        )
        .await
        .ok();
    let other_key = s(&other["key"]);
    for path in [format!("/v1/chat/{run}"), format!("/v1/chat/{run}/stream")] {
        let r = api.get(&path, &other_key).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text);
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
    }
    let r = api
        .post(
            "/v1/chat",
            &other_key,
            json!({"conversationId": conv, "messages": [user_msg("m2", "check bob")]}),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
}

/// A workspace key (the user's own namespace) cannot chat nor read a run.
async fn a_workspace_key_cannot_chat(backend: Backend) {
    let a = agent_on(InProcess::start(backend).await, example_bot("hello")).await;
    let api = &a.api;
    let (run, _) = finished_run(&a).await;
    let ws_key = a.workspace_key("ws").await;
    assert!(ws_key.starts_with("sk-ws-"));
    let r = api
        .post(
            "/v1/chat",
            &ws_key,
            json!({"messages": [user_msg("m3", "hi")]}),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.json()["code"], "forbidden");
    assert_eq!(
        api.get(&format!("/v1/chat/{run}"), &ws_key).await.status,
        403
    );
}

/// A revoked key fails at its very next request, with a problem whose `type` is a page of
/// this server; made-up and malformed keys get the same answer.
async fn a_revoked_key_fails_at_once_like_a_made_up_one(backend: Backend) {
    let a = agent_on(InProcess::start(backend).await, example_bot("hello")).await;
    let api = &a.api;
    let (run, _) = finished_run(&a).await;
    let path = format!("/projects/{}/environments/{}/keys", a.pid, a.env);
    let list = api.get(&path, &a.admin).await.ok();
    assert_eq!(
        a.v1("GET", &format!("/v1/chat/{run}"), None).await.status,
        200
    );
    let kid = s(&list[0]["id"]);
    let revoked = api.delete(&format!("{path}/{kid}"), &a.admin).await.ok();
    assert!(revoked["revokedAt"].is_string());
    let r = a.v1("GET", &format!("/v1/chat/{run}"), None).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_eq!(r.json()["code"], "unauthorized");
    // The problem's `type` is a page of this server saying what it means and what to do.
    let ty = s(&r.json()["type"]);
    let path = &ty[ty.find("/docs/problems/").expect("a problem page")..];
    let page = api.call("GET", path, None, None).await;
    assert_eq!(page.status, 200, "{ty}");
    assert!(
        page.text.contains("Unauthorized") && page.text.contains("What to do"),
        "{}",
        page.text
    );
    // Made-up and malformed keys get the same answer.
    for bad in [
        "sak_0000000000000000000000000000000000000000",
        "bbt_x",
        "nonsense",
    ] {
        let r = api.get(&format!("/v1/chat/{run}"), bad).await;
        assert_eq!(r.status, 401);
        assert_eq!(
            r.json()["detail"],
            a.v1("GET", &format!("/v1/chat/{run}"), None).await.json()["detail"]
        );
    }
}

/// An ended run stays replayable for its retention, then goes with its chunk log.
async fn ended_runs_are_pruned_after_their_retention(backend: Backend) {
    let a = agent_on(InProcess::start(backend).await, example_bot("hello")).await;
    let body = a
        .post_chat(json!({"messages": [user_msg("u1", "check carol")]}))
        .await
        .ok();
    let run = s(&body["runId"]);
    let c = chunks(&a.stream(&run).await.text, 1);
    assert_eq!(c.last().unwrap(), "[DONE]");
    let db = a.server.db().await;
    let (ended,): (Option<i64>,) = sqlx::query_as("SELECT ended_at FROM agent_runs WHERE id = $1")
        .bind(&run)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let ended = ended.expect("the run ended");
    // Within its retention: kept.
    assert_eq!(
        db.prune(botbox_store::Expired::AgentRuns, ended)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        a.v1("GET", &format!("/v1/chat/{run}"), None).await.status,
        200
    );
    // Past it: the run and its chunk log are gone.
    assert_eq!(
        db.prune(botbox_store::Expired::AgentRuns, ended + 1)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        a.v1("GET", &format!("/v1/chat/{run}"), None).await.status,
        404
    );
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM agent_run_chunks WHERE run_id = $1")
        .bind(&run)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// An address that keeps presenting invalid keys gets 429 (no key is looked up) once it has
/// made `BAD_KEYS_PER_MINUTE` such requests this minute; requests with a valid key from it
/// count nothing.
async fn invalid_keys_are_limited_per_address(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let limit = botbox_api::v1::BAD_KEYS_PER_MINUTE;
    let mut statuses = Vec::new();
    // Up to twice the limit: a minute boundary inside the loop restarts the count once.
    for i in 0..2 * (limit + 1) {
        let r = api.get("/v1/chat/run_x", &format!("sak_guess{i}")).await;
        statuses.push(r.status);
        if r.status == 429 {
            assert_eq!(r.json()["code"], "too-many-invalid-keys");
            assert!(r.header("retry-after").is_some());
            break;
        }
    }
    let first_429 = statuses
        .iter()
        .position(|s| *s == 429)
        .unwrap_or_else(|| panic!("no 429 after {} invalid keys", statuses.len()));
    assert!(
        first_429 >= limit as usize,
        "429 after only {first_429} failures"
    );
    assert!(
        statuses[..first_429].iter().all(|s| *s == 401),
        "{statuses:?}"
    );
}

async fn chat_streams_tools_and_texts_and_replays_byte_identical(backend: Backend) {
    let (slow, url) = SlowApi::start(false).await;
    let a = agent(backend, api_bot(&url), &["--allow-private-egress"]).await;
    let r = a
        .chat(json!({"id": "chat-1", "messages": [user_msg("u1", "check alice")], "trigger": "submit-message"}), true)
        .await;
    assert_eq!(r.status, 200);
    let h = r.headers.clone();
    assert_eq!(h["content-type"], "text/event-stream");
    assert_eq!(h["cache-control"], "no-cache");
    assert_eq!(h["x-vercel-ai-ui-message-stream"], "v1");
    assert_eq!(h["x-accel-buffering"], "no");
    let run = h["x-run-id"].to_str().unwrap().to_owned();
    let conv = h["x-conversation-id"].to_str().unwrap().to_owned();
    assert!(run.starts_with("run_") && conv.starts_with("conv_"));
    let live = r.text;
    let c = chunks(&live, 1);
    assert_eq!(slow.hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        types(&c),
        [
            &FIRST_TOOL_CALL[..],
            &[
                "tool-output-available",
                "text-start",
                "text-delta",
                "text-end",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "finish",
                "[DONE]"
            ]
        ]
        .concat()
    );
    assert_eq!(
        c[0]["messageMetadata"],
        json!({"runId": run, "conversationId": conv})
    );
    assert_eq!(
        c[1],
        json!({"type": "data-run-status", "data": {"status": "in_progress"}, "transient": true})
    );
    assert_eq!(c[3]["toolName"], "api");
    assert_eq!(c[3]["dynamic"], true);
    assert_eq!(c[3]["input"]["url"], format!("{url}/users/alice"));
    assert_eq!(c[4]["toolCallId"], c[3]["toolCallId"]);
    assert_eq!(c[4]["output"]["status"], 200);
    assert_eq!(
        texts_of(&c),
        ["email of alice is alice@example.com", "Success"]
    );
    assert_ne!(c[5]["id"], c[8]["id"]);
    assert_eq!(c[12]["messageMetadata"]["status"], "completed");

    // Replays: byte-identical, by run id; after Last-Event-ID only the rest.
    let replay = a.get_stream(&run, None).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["x-run-id"].to_str().unwrap(), run);
    let live = without_pings(&live);
    assert_eq!(replay.text().await.unwrap(), live);
    let again = a.get_stream(&run, None).await.text().await.unwrap();
    assert_eq!(again, live);
    let rest = a.get_stream(&run, Some(11)).await.text().await.unwrap();
    assert_eq!(
        types(&chunks(&rest, 12)),
        ["finish-step", "finish", "[DONE]"]
    );
    // The chat id and the conversation id have no active run now: 204.
    assert_eq!(a.get_stream("chat-1", None).await.status(), 204);
    assert_eq!(a.get_stream(&conv, None).await.status(), 204);
    // Status.
    let st = a.v1("GET", &format!("/v1/chat/{run}"), None).await.ok();
    assert_eq!(st["status"], "completed");
    assert_eq!(st["conversationId"], conv);
    assert!(st["endedAt"].is_string());

    // The same chat id continues the conversation; the old messages are not appended twice.
    let r = a
        .chat(json!({"id": "chat-1", "messages": [user_msg("u1", "check alice"), user_msg("u2", "check bob")]}), true)
        .await;
    assert_eq!(r.headers["x-conversation-id"].to_str().unwrap(), conv);
    let c2 = chunks(&r.text, 1);
    assert_eq!(
        texts_of(&c2),
        ["email of bob is bob@example.com", "Success"]
    );
    let db = a.server.db().await;
    let msgs = db.agent_messages(&conv).await.unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    let assistant: Value = serde_json::from_str(&msgs[1].body).unwrap();
    assert_eq!(
        assistant["parts"][0]["text"],
        "email of alice is alice@example.com"
    );
    // The session is stored like a channel user's.
    assert!(
        db.session(&format!("{}:agent:{conv}", a.env))
            .await
            .unwrap()
            .is_some()
    );
}

async fn rich_replies_and_data_parts(backend: Backend) {
    let a = agent_on(InProcess::start(backend).await, example_bot("buttons")).await;
    let r = a
        .chat(json!({"messages": [user_msg("u1", "menu")]}), true)
        .await;
    let conv = r.headers["x-conversation-id"].to_str().unwrap().to_owned();
    let c = chunks(&r.text, 1);
    let rich: Vec<&Value> = c
        .iter()
        .filter(|v| v["type"] == "data-bot-message")
        .collect();
    assert_eq!(rich.len(), 1, "{c:?}");
    assert!(rich[0]["id"].is_string());
    assert_eq!(
        rich[0]["data"]["payload"]["template_type"], "button",
        "{}",
        rich[0]
    );
    // A data part carries the clicked button's payload.
    let r = a
        .chat(
            json!({"conversationId": conv, "messages": [{"id": "u2", "role": "user",
                "parts": [{"type": "text", "text": "Tea"}, {"type": "data-postback", "data": {"choice": "tea"}}]}]}),
            true,
        )
        .await;
    let c = chunks(&r.text, 1);
    assert_eq!(texts_of(&c), ["You picked tea."]);
}

async fn js_methods_are_tool_calls(backend: Backend) {
    let a = agent_on(InProcess::start(backend).await, example_bot("methods")).await;
    let r = a
        .chat(json!({"messages": [user_msg("u1", "vip")]}), true)
        .await;
    let c = chunks(&r.text, 1);
    let calls: Vec<&Value> = c
        .iter()
        .filter(|v| v["type"] == "tool-input-available")
        .collect();
    let names: Vec<&str> = calls
        .iter()
        .map(|v| v["toolName"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["route", "greet"], "{c:?}");
    for call in calls {
        assert_eq!(call["dynamic"], true);
        let id = &call["toolCallId"];
        assert!(
            c.iter()
                .any(|v| v["type"] == "tool-output-available" && v["toolCallId"] == *id),
            "{id} never finished"
        );
    }
    assert_eq!(texts_of(&c), ["Hello vip (gold)"]);
}

async fn json_answer_then_stream_and_problems(backend: Backend) {
    let (_slow, url) = SlowApi::start(false).await;
    let a = agent(backend, api_bot(&url), &["--allow-private-egress"]).await;
    let r = a
        .post_chat(json!({"messages": [user_msg("u1", "check carol")]}))
        .await;
    let body = r.ok();
    assert_eq!(body["status"], "queued");
    assert_eq!(
        r.header("x-conversation-id"),
        body["conversationId"].as_str()
    );
    assert_eq!(r.header("x-run-id"), body["runId"].as_str());
    assert!(r.header("ratelimit").unwrap().starts_with("\"chat\";r="));
    assert_eq!(r.header("ratelimit-policy"), Some("\"chat\";q=60;w=60"));
    let run = s(&body["runId"]);
    let stream = a
        .get_stream(
            &s(&body["streamUrl"])
                .replace("/v1/chat/", "")
                .replace("/stream", ""),
            None,
        )
        .await;
    assert!(
        stream.headers()["ratelimit-policy"]
            .to_str()
            .unwrap()
            .starts_with("\"read\"")
    );
    let c = chunks(&stream.text().await.unwrap(), 1);
    assert_eq!(c.last().unwrap(), "[DONE]");
    assert_eq!(
        texts_of(&c),
        ["email of carol is carol@example.com", "Success"]
    );

    // Problems.
    let r = a.post_chat(json!({"conversationId": "conv_00000000000000000000000000000000", "messages": [user_msg("x", "hi")]})).await;
    assert_eq!(r.status, 404);
    let p = r.json();
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(p["status"], 404);
    assert_eq!(p["code"], "not-found");
    assert!(
        p["type"]
            .as_str()
            .unwrap()
            .ends_with("/docs/problems/not-found")
    );
    assert!(p["requestId"].as_str().unwrap().starts_with("req_"));
    let r = a.post_chat(json!({"messages": []})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["errors"][0]["pointer"], "/messages");
    let r = a
        .post_chat(json!({"messages": [{"id": "a", "role": "assistant", "parts": []}]}))
        .await;
    assert_eq!(r.json()["errors"][0]["pointer"], "/messages/0/role");
    assert_eq!(a.v1("GET", "/v1/chat/run_nope", None).await.status, 404);
    // An unknown /v1 path is a problem too, not the project API's plain text.
    let r = a.v1("GET", "/v1/nothing/here", None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert_eq!(r.json()["code"], "not-found");
    let r = a
        .api
        .raw(
            "POST",
            "/v1/chat",
            Some(a.key.as_str()),
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["code"], "invalid-request");
    // Steering a finished run: 409.
    let r = a
        .v1(
            "POST",
            &format!("/v1/chat/{run}/steer"),
            Some(json!({"text": "later"})),
        )
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["code"], "run-not-active");
    // Cancelling a finished run: 200, unchanged.
    let r = a
        .v1("POST", &format!("/v1/chat/{run}/cancel"), Some(json!({})))
        .await
        .ok();
    assert_eq!(r["status"], "completed");
}

async fn cancel_during_a_slow_api_call_aborts_at_once(backend: Backend) {
    let (slow, url) = SlowApi::start(true).await;
    let a = agent(backend, api_bot(&url), &["--allow-private-egress"]).await;
    let started = a
        .post_chat(json!({"id": "c", "messages": [user_msg("u1", "check dave")]}))
        .await
        .ok();
    let run = s(&started["runId"]);
    let conv = s(&started["conversationId"]);
    // Two readers follow live: by run id, and by the chat id (the active run).
    let r1 = a.get_stream(&run, None).await;
    let r2 = a.get_stream("c", None).await;
    assert_eq!(r2.status(), 200);
    assert_eq!(r2.headers()["x-run-id"].to_str().unwrap(), run);
    let t1 = tokio::spawn(r1.text());
    let t2 = tokio::spawn(r2.text());
    slow.wait_request().await;
    // A second chat on the conversation while the run is active: 409 with its id.
    let r = a
        .post_chat(json!({"conversationId": conv, "messages": [user_msg("u2", "check eve")]}))
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.json()["activeRunId"], run);
    assert_eq!(
        a.v1("GET", &format!("/v1/chat/{run}"), None).await.ok()["status"],
        "in_progress"
    );

    // The api server never answers: cancel ends the run at once.
    let t0 = Instant::now();
    let r = a
        .v1("POST", &format!("/v1/chat/{run}/cancel"), Some(json!({})))
        .await
        .ok();
    assert_eq!(r["status"], "cancelled");
    let live = tokio::time::timeout(Duration::from_secs(1), t1)
        .await
        .expect("stream ended")
        .unwrap()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    let c = chunks(&live, 1);
    assert_eq!(
        types(&c),
        [
            &FIRST_TOOL_CALL[..],
            &["tool-output-error", "finish-step", "abort", "[DONE]"]
        ]
        .concat()
    );
    assert_eq!(
        without_pings(&t2.await.unwrap().unwrap()),
        without_pings(&live)
    );
    // Idempotent.
    assert_eq!(
        a.v1("POST", &format!("/v1/chat/{run}/cancel"), None)
            .await
            .ok()["status"],
        "cancelled"
    );
    assert_eq!(
        a.get_stream(&run, None).await.text().await.unwrap(),
        without_pings(&live)
    );
    // The session is as before the run (there was none).
    let db = a.server.db().await;
    assert!(
        db.session(&format!("{}:agent:{conv}", a.env))
            .await
            .unwrap()
            .is_none()
    );
    // The conversation goes on.
    slow.release.notify_one();
    let r = a
        .chat(
            json!({"conversationId": conv, "messages": [user_msg("u3", "check eve")]}),
            true,
        )
        .await;
    let c = chunks(&r.text, 1);
    assert_eq!(texts_of(&c), ["email of eve is eve@example.com", "Success"]);
}

async fn steer_is_delivered_at_the_step_boundary(backend: Backend) {
    let (slow, url) = SlowApi::start(true).await;
    let a = agent(backend, api_bot(&url), &["--allow-private-egress"]).await;
    let started = a
        .post_chat(json!({"messages": [user_msg("u1", "check fay")]}))
        .await
        .ok();
    let run = s(&started["runId"]);
    let reader = tokio::spawn(a.get_stream(&run, None).await.text());
    slow.wait_request().await;
    let r = a
        .v1(
            "POST",
            &format!("/v1/chat/{run}/steer"),
            Some(json!({"message": user_msg("u2", "check gus")})),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let steer = s(&r.json()["steerId"]);
    assert!(steer.starts_with("steer_"));
    slow.release.notify_one();
    let c = chunks(&reader.await.unwrap().unwrap(), 1);
    let ty = types(&c);
    let at = ty
        .iter()
        .position(|t| t == "data-steer")
        .expect("a data-steer chunk");
    assert_eq!(
        c[at]["data"],
        json!({"steerId": steer, "status": "delivered"})
    );
    assert_eq!(c[at]["transient"], true);
    assert_eq!(ty[at - 1], "finish-step");
    assert_eq!(ty[at + 1], "start-step");
    assert_eq!(
        texts_of(&c),
        [
            "email of fay is fay@example.com",
            "Success",
            "email of gus is gus@example.com",
            "Success"
        ]
    );
    let st = a.v1("GET", &format!("/v1/chat/{run}"), None).await.ok();
    assert_eq!(st["status"], "completed");
    assert_eq!(
        st["steers"],
        json!([{"steerId": steer, "status": "delivered"}])
    );
    assert_eq!(
        a.v1(
            "POST",
            &format!("/v1/chat/{run}/steer"),
            Some(json!({"text": "late"}))
        )
        .await
        .status,
        409
    );
}

async fn a_run_in_flight_when_the_server_dies_ends_failed(backend: Backend) {
    let (slow, url) = SlowApi::start(true).await;
    let mut a = agent(backend, api_bot(&url), &["--allow-private-egress"]).await;
    let started = a
        .post_chat(json!({"messages": [user_msg("u1", "check hal")]}))
        .await
        .ok();
    let run = s(&started["runId"]);
    slow.wait_request().await;
    a.server.restart().await;
    a.api = a.server.api();
    let st = a.v1("GET", &format!("/v1/chat/{run}"), None).await.ok();
    assert_eq!(st["status"], "failed");
    assert!(st["error"].as_str().unwrap().contains("server stopped"));
    let c = chunks(&a.get_stream(&run, None).await.text().await.unwrap(), 1);
    let ty = types(&c);
    assert_eq!(ty[0], "start");
    assert_eq!(&ty[ty.len() - 3..], ["error", "finish", "[DONE]"]);
    assert_eq!(c[c.len() - 2]["messageMetadata"]["status"], "failed");
    // A new run on the conversation works.
    slow.release.notify_one();
    let conv = s(&started["conversationId"]);
    let r = a
        .chat(
            json!({"conversationId": conv, "messages": [user_msg("u2", "check ida")]}),
            true,
        )
        .await;
    assert_eq!(
        texts_of(&chunks(&r.text, 1)),
        ["email of ida is ida@example.com", "Success"]
    );
}

on_both_backends!(
    ended_runs_are_pruned_after_their_retention,
    invalid_keys_are_limited_per_address,
    keys_are_listed_by_hint_and_stored_hashed,
    a_key_reaches_its_environments_runs_only,
    a_workspace_key_cannot_chat,
    a_revoked_key_fails_at_once_like_a_made_up_one,
    chat_streams_tools_and_texts_and_replays_byte_identical,
    rich_replies_and_data_parts,
    js_methods_are_tool_calls,
    json_answer_then_stream_and_problems,
    cancel_during_a_slow_api_call_aborts_at_once,
    steer_is_delivered_at_the_step_boundary,
);

/// SQLite: one process per database, so the restarted server fails the run at once (on
/// PostgreSQL the run's lease must pass first; see docs/agent-api.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_when_the_server_dies_ends_failed_on_sqlite() {
    a_run_in_flight_when_the_server_dies_ends_failed(Backend::Sqlite).await
}

/// A retry with the same idempotency key replays the run, the key with another body is
/// refused, and a spent chat quota answers 429 with its fields; reads have their own policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retries_replay_and_a_spent_quota_answers_429() {
    let server = InProcess::start_with(
        Backend::Sqlite,
        botbox_api::ApiConfig {
            agent_chat_per_minute: 3,
            ..Default::default()
        },
    )
    .await;
    let a = agent_on(server, example_bot("hello")).await;
    let post = |body: Value, idem: Option<&'static str>| {
        let mut rb = a
            .api
            .http
            .post(format!("{}/v1/chat", a.api.base))
            .bearer_auth(&a.key)
            .json(&body);
        if let Some(k) = idem {
            rb = rb.header("idempotency-key", format!("\"{k}\""));
        }
        a.api.send(rb)
    };
    let first = post(
        json!({"messages": [user_msg("u1", "check jo")]}),
        Some("k-1"),
    )
    .await;
    assert_eq!(first.status, 200);
    assert!(first.headers.get("idempotent-replayed").is_none());
    assert!(
        first.headers["ratelimit"]
            .to_str()
            .unwrap()
            .starts_with("\"chat\";r=2;t=")
    );
    let first = first.json();
    let again = post(
        json!({"messages": [user_msg("u1", "check jo")]}),
        Some("k-1"),
    )
    .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    let again = again.json();
    assert_eq!(again["runId"], first["runId"]);
    let other = post(
        json!({"messages": [user_msg("u9", "check other")]}),
        Some("k-1"),
    )
    .await;
    assert_eq!(other.status, 422);
    let p = other.json();
    assert_eq!(p["code"], "idempotency-key-reused");
    // The quota of 3 chat requests a minute is spent: 429 with the fields.
    let r = post(json!({"messages": [user_msg("u2", "check kim")]}), None).await;
    assert_eq!(r.status, 429);
    assert!(
        r.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(r.headers["ratelimit-policy"], "\"chat\";q=3;w=60");
    assert!(
        r.headers["ratelimit"]
            .to_str()
            .unwrap()
            .starts_with("\"chat\";r=0;t=")
    );
    let p = r.json();
    assert_eq!(
        p["type"],
        "https://iana.org/assignments/http-problem-types#quota-exceeded"
    );
    assert_eq!(p["code"], "quota-exceeded");
    assert_eq!(p["violated-policies"], json!(["chat"]));
    // Reads have their own policy.
    assert_eq!(
        a.v1("GET", &format!("/v1/chat/{}", s(&first["runId"])), None)
            .await
            .status,
        200
    );
}

/// CORS: a preflight is answered without a key, and the ids and limits are exposed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_preflights_need_no_key_and_expose_the_ids_and_limits() {
    let server = InProcess::start(Backend::Sqlite).await;
    let a = agent_on(server, example_bot("hello")).await;
    let chat = json!({"messages": [user_msg("u1", "check jo")]});
    let first = a.v1("POST", "/v1/chat", Some(chat)).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let first = first.json();
    let pre = a
        .api
        .send(
            a.api
                .http
                .request(reqwest::Method::OPTIONS, format!("{}/v1/chat", a.api.base))
                .header("origin", "https://app.example")
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "authorization,content-type,idempotency-key",
                ),
        )
        .await;
    assert!((200..300).contains(&pre.status), "{}", pre.status);
    assert_eq!(pre.headers["access-control-allow-origin"], "*");
    let r = a
        .api
        .send(
            a.api
                .http
                .get(format!("{}/v1/chat/{}", a.api.base, s(&first["runId"])))
                .bearer_auth(&a.key)
                .header("origin", "https://app.example"),
        )
        .await;
    let exposed = r.headers["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for h in [
        "x-conversation-id",
        "x-run-id",
        "ratelimit",
        "ratelimit-policy",
        "retry-after",
    ] {
        assert!(exposed.contains(h), "{exposed}");
    }
}

/// The /v1 routes are in the OpenAPI document, and the playground page and script are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v1_routes_are_documented_and_the_playground_served() {
    let server = InProcess::start(Backend::Sqlite).await;
    let a = agent_on(server, example_bot("hello")).await;
    let doc = a.api.call("GET", "/openapi.json", None, None).await.json();
    for p in [
        "/v1/chat",
        "/v1/chat/{runId}",
        "/v1/chat/{runId}/stream",
        "/v1/chat/{runId}/cancel",
        "/v1/chat/{runId}/steer",
    ] {
        assert!(doc["paths"][p].is_object(), "{p} undocumented");
    }
    assert!(doc["components"]["schemas"]["ChatRequest"].is_object());
    assert!(
        doc["paths"]["/projects/{projectId}/environments/{environmentId}/keys"]["post"].is_object()
    );
    let page = a.api.call("GET", "/v1/playground", None, None).await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains("/console/playground.js"));
    let script = a
        .api
        .call("GET", "/console/playground.js", None, None)
        .await;
    assert!(script.text.contains("/v1/chat"));
}

/// An agent run's step errors are the bot's errors too (channel `agent`): a method that
/// throws and an api call that times out are listed by `GET /projects/{id}/errors`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_errors_are_listed_with_the_bots() {
    // The api holds its first request: the call times out after its 5 s.
    let (_slow, url) = SlowApi::start(true).await;
    let bot = method_and_api_bot(
        "oops",
        "boom",
        "throw new Error('no stock');",
        &format!("{url}/stock"),
        "done",
    );
    let a = agent(Backend::Sqlite, bot, &["--allow-private-egress"]).await;
    let body = a
        .post_chat(json!({"messages": [user_msg("u1", "pizza")]}))
        .await
        .ok();
    let run = s(&body["runId"]);
    let stream = a.get_stream(&run, None).await;
    let c = chunks(&stream.text().await.unwrap(), 1);
    assert_eq!(c.last().unwrap(), "[DONE]");
    // The stream carries them for a debugging view, transient.
    assert!(
        c.iter().any(|ch| ch["type"] == "data-bot-error"
            && s(&ch["data"]["message"]).contains("no stock")
            && ch["transient"] == true),
        "{c:?}"
    );
    let errors = a
        .api
        .get(&format!("/projects/{}/errors", a.pid), &a.admin)
        .await
        .ok();
    let seen: Vec<(String, String)> = errors["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["channelId"] == "agent")
        .map(|e| (s(&e["errorCode"]), s(&e["errorMessage"])))
        .collect();
    assert!(
        seen.iter()
            .any(|(c, m)| c == "method-error" && m.contains("no stock")),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|(c, m)| c == "timeout" && m.contains("timed out")),
        "{seen:?}"
    );
}
