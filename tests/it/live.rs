//! End-to-end tests of live conversations: the real `botbox serve` on loopback, local
//! stand-ins for provider APIs, on SQLite and PostgreSQL. What needs no stand-in (the
//! converse endpoint and a webhook's rate limit, the storage of steps committed together)
//! runs against the server in-process.

use crate::common::{
    Api, Backend, InProcess, Receiver, Res, Server, channel, deploy, example_bot, generic_body,
    hook, line_body, poll_until, s, texts, webex_body, webex_created,
};
use base64::Engine as _;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

on_both_backends!(
    pizza_through_generic,
    pizza_through_line,
    pizza_through_telegram,
    one_user_one_step_at_a_time,
    outbox_redelivers_after_receiver_was_down,
    environment_switch_takes_effect_at_the_next_message,
    converse_endpoint_and_rpm_limit,
    schedules_fire_and_survive_a_restart,
    steps_committed_together_keep_their_own_outcomes,
    a_step_that_lost_its_session_race_leaves_its_message_unseen,
);

/// Server flags of these tests: providers are on loopback; retries come fast.
const FLAGS: &[&str] = &["--allow-private-egress", "--outbox-backoff-ms", "50"];

async fn start(backend: Backend) -> Server {
    Server::start(backend, FLAGS).await
}

async fn pizza_through_generic(backend: Backend) {
    let server = start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("pizza")).await;
    let (rx, rx_url) = Receiver::start().await;
    let body = generic_body("web", &format!("{rx_url}/inbox"));
    let ch = channel(&api, &admin, &pid, &env, body).await;
    let webhook = s(&ch["webhook"]);

    let steps = [
        json!({"type": "text", "content": "I want pizza"}),
        json!({"type": "data", "payload": {"type": "pizza", "pizza": "pepperoni"}}),
        json!({"type": "text", "content": "2"}),
        json!({"type": "data", "payload": {"type": "confirm", "confirm": "yes"}}),
    ];
    for (i, m) in steps.iter().enumerate() {
        let r = hook(
            &api,
            &webhook,
            &[],
            &json!({"userId": "u-42", "messages": [m]}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json(), json!({"status": "ok"}));
        rx.wait_for(i + 1).await;
    }
    let got = rx.wait_for(4).await;
    assert!(
        got.iter()
            .all(|(path, _, b)| path == "/inbox" && b["userId"] == "u-42")
    );
    assert_eq!(texts(&got[0].2), ["[carousel]", "Which one do you want?"]);
    assert_eq!(texts(&got[1].2), ["How many? (1-9)"]);
    assert_eq!(texts(&got[2].2), ["[button]"]);
    assert_eq!(
        got[2].2["messages"][0]["payload"]["items"]["text"],
        "Is it correct: 2 x pepperoni?"
    );
    assert_eq!(texts(&got[3].2), ["Thank you for your order"]);

    // Transcripts: every incoming and outgoing message, with flow and intent.
    let t = api
        .get(&format!("/analytics/{pid}/production/list_transcript?startTimeStamp=0&endTimeStamp=99999999999999"), &admin)
        .await
        .ok();
    let rows = t.as_array().unwrap();
    let ins: Vec<&Value> = rows.iter().filter(|r| r["direction"] == "in").collect();
    let outs: Vec<&Value> = rows.iter().filter(|r| r["direction"] == "out").collect();
    assert_eq!((ins.len(), outs.len()), (4, 5), "{t}");
    assert_eq!(ins[0]["userId"], "u-42");
    assert_eq!(ins[0]["flow"], "order");
    assert!(
        rows.iter()
            .all(|r| r.as_object().unwrap().values().all(Value::is_string))
    );
    let first: Value = serde_json::from_str(ins[0]["message"].as_str().unwrap()).unwrap();
    assert_eq!(first["content"], "I want pizza");
    assert_eq!(first["metadata"]["channelType"], "generic");
    // A window that ends before the conversation holds nothing.
    let none = api
        .get(
            &format!("/analytics/{pid}/production/list_transcript?startTimeStamp=0&endTimeStamp=1"),
            &admin,
        )
        .await
        .ok();
    assert_eq!(none, json!([]));
}

fn line_sign(secret: &str, body: &Value) -> String {
    let sig = botbox_channels::hmac_sha256(secret.as_bytes(), body.to_string().as_bytes());
    base64::engine::general_purpose::STANDARD.encode(sig)
}

/// LINE: signed events in, push messages out; a bad or missing signature runs nothing, a
/// retried event runs once, a postback continues the order.
async fn pizza_through_line(backend: Backend) {
    let server = start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("pizza")).await;
    let (rx, rx_url) = Receiver::start().await;
    let body = line_body(&rx_url, "line-secret", "line-token");
    let line = channel(&api, &admin, &pid, &env, body).await;
    let line_hook = s(&line["webhook"]);
    let event = |id: &str, text: &str| {
        json!({"destination": "Ubot", "events": [{
        "type": "message", "webhookEventId": id, "replyToken": "r", "timestamp": 1,
        "source": {"type": "user", "userId": "U-line"}, "message": {"type": "text", "id": id, "text": text}}]})
    };
    let first = event("ev1", "I want pizza");
    // A bad signature is rejected and nothing runs.
    let bad = hook(
        &api,
        &line_hook,
        &[("x-line-signature", line_sign("wrong", &first))],
        &first,
    )
    .await;
    assert_eq!(bad.status, 401);
    assert!(
        bad.text.contains("x-line-signature does not match"),
        "{}",
        bad.text
    );
    let unsigned = hook(&api, &line_hook, &[], &first).await;
    assert_eq!(unsigned.status, 401);
    let ok = hook(
        &api,
        &line_hook,
        &[("x-line-signature", line_sign("line-secret", &first))],
        &first,
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    let got = rx.wait_for(1).await;
    let (path, headers, body) = &got[0];
    assert_eq!(path, "/line/v2/bot/message/push");
    assert_eq!(headers["authorization"], "Bearer line-token");
    assert_eq!(body["to"], "U-line");
    assert_eq!(body["messages"][0]["type"], "template");
    assert_eq!(body["messages"][0]["template"]["type"], "carousel");
    assert_eq!(
        body["messages"][1],
        json!({"type": "text", "text": "Which one do you want?"})
    );
    // The provider retries the same event: it does not run twice.
    let again = hook(
        &api,
        &line_hook,
        &[("x-line-signature", line_sign("line-secret", &first))],
        &first,
    )
    .await;
    assert_eq!(again.status, 200);
    // A postback continues the order.
    let pb = json!({"events": [{"type": "postback", "webhookEventId": "ev2", "source": {"type": "user", "userId": "U-line"},
        "postback": {"data": "{\"type\":\"pizza\",\"pizza\":\"veggie\"}"}}]});
    hook(
        &api,
        &line_hook,
        &[("x-line-signature", line_sign("line-secret", &pb))],
        &pb,
    )
    .await
    .ok();
    let got = rx.wait_for(2).await;
    assert_eq!(got.len(), 2, "the retried event ran twice");
    assert_eq!(
        got[1].2["messages"],
        json!([{"type": "text", "text": "How many? (1-9)"}])
    );
    let in_count = api
        .get(
            &format!("/analytics/{pid}/production/list_transcript"),
            &admin,
        )
        .await
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["direction"] == "in")
        .count();
    assert_eq!(
        in_count, 2,
        "rejected and duplicate events leave no transcript"
    );
}

/// Telegram: the secret token header in, `sendMessage` out, a carousel as one message per
/// card; a wrong token runs nothing, a callback query continues the order.
async fn pizza_through_telegram(backend: Backend) {
    let server = start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("pizza")).await;
    let (rx, rx_url) = Receiver::start().await;
    let tg = channel(
        &api,
        &admin,
        &pid,
        &env,
        json!({"name": "tg", "type": "telegram", "url": format!("{rx_url}/tg"),
        "options": {"token": "123:abc", "secretToken": "tg-secret"}}),
    )
    .await;
    let tg_hook = s(&tg["webhook"]);
    let update = |id: i64, text: &str| {
        json!({"update_id": id, "message": {"message_id": id, "from": {"id": 777, "first_name": "Budi"},
        "chat": {"id": 777, "type": "private"}, "date": 1, "text": text}})
    };
    let bad = hook(
        &api,
        &tg_hook,
        &[("x-telegram-bot-api-secret-token", "nope".into())],
        &update(1, "pizza"),
    )
    .await;
    assert_eq!(bad.status, 401);
    hook(
        &api,
        &tg_hook,
        &[("x-telegram-bot-api-secret-token", "tg-secret".into())],
        &update(1, "I want pizza"),
    )
    .await
    .ok();
    let got = rx.wait_for(3).await;
    let tg_calls: Vec<_> = got
        .iter()
        .filter(|(p, _, _)| p.starts_with("/tg"))
        .collect();
    assert_eq!(
        tg_calls.len(),
        3,
        "the carousel is one message per card (two pizzas), then the text"
    );
    for card in &tg_calls[..2] {
        assert_eq!(card.0, "/tg/bot123:abc/sendMessage");
        assert_eq!(card.2["chat_id"], "777");
        assert_eq!(
            card.2["reply_markup"]["inline_keyboard"]
                .as_array()
                .map(Vec::len),
            Some(1),
            "{}",
            card.2
        );
    }
    assert_eq!(tg_calls[2].2["text"], "Which one do you want?");
    let cb = json!({"update_id": 2, "callback_query": {"id": "q", "from": {"id": 777}, "message": {"chat": {"id": 777}},
        "data": "{\"type\":\"pizza\",\"pizza\":\"pepperoni\"}"}});
    hook(
        &api,
        &tg_hook,
        &[("x-telegram-bot-api-secret-token", "tg-secret".into())],
        &cb,
    )
    .await
    .ok();
    let got = rx.wait_for(4).await;
    assert_eq!(got[3].2["text"], "How many? (1-9)");
}

/// User `u` says `text` to the webhook at `url`.
async fn u_says(api: &Api, url: &str, text: &str) -> Res {
    hook(
        api,
        url,
        &[],
        &json!({"userId": "u", "messages": [{"type": "text", "content": text}]}),
    )
    .await
}

/// The counter bot deployed on a generic channel whose replies go to a local receiver.
async fn counter_on_generic(server: &Server) -> (Api, Receiver, Value) {
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("counter")).await;
    let (rx, rx_url) = Receiver::start().await;
    let ch = channel(&api, &admin, &pid, &env, generic_body("web", &rx_url)).await;
    (api, rx, ch)
}

/// User `u` says "hi" to the counter bot, then `n` more messages at once, the i-th to
/// `urls[i % urls.len()]`, each answered 200: the `n + 1` replies' counts, sorted, and the
/// counts they are when every message saw the previous one's session.
async fn hi_then_at_once(
    api: &Api,
    rx: &Receiver,
    urls: &[String],
    n: usize,
) -> (Vec<String>, Vec<String>) {
    u_says(api, &urls[0], "hi").await.ok();
    let mut tasks = vec![];
    for i in 0..n {
        let api = api.clone();
        let url = urls[i % urls.len()].clone();
        tasks.push(tokio::spawn(async move {
            u_says(&api, &url, &format!("more {i}")).await
        }));
    }
    for t in tasks {
        let r = t.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let got = rx.wait_for(n + 1).await;
    let mut counts: Vec<String> = got.iter().map(|(_, _, b)| texts(b)[0].clone()).collect();
    counts.sort();
    let mut want: Vec<String> = (1..=n + 1)
        .map(|k| format!("Message {k} (total {k})"))
        .collect();
    want.sort();
    (counts, want)
}

async fn one_user_one_step_at_a_time(backend: Backend) {
    let server = start(backend).await;
    let (api, rx, ch) = counter_on_generic(&server).await;
    let (counts, want) = hi_then_at_once(&api, &rx, &[s(&ch["webhook"])], 12).await;
    assert_eq!(counts, want, "every message saw the previous one's session");
}

async fn outbox_redelivers_after_receiver_was_down(backend: Backend) {
    let server = start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("hello")).await;
    // A port with nobody listening yet.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let body = generic_body("web", &format!("http://{addr}/down"));
    let ch = channel(&api, &admin, &pid, &env, body).await;
    let r = u_says(&api, &s(&ch["webhook"]), "hi").await;
    assert_eq!(r.status, 200);
    // The delivery failed at least once and waits in the outbox.
    let db = server.db().await;
    let cid = s(&ch["id"]);
    let rows = poll_until("a failed attempt recorded", || async {
        let rows = db.outbox_rows(&cid).await.unwrap();
        if rows.len() == 1 && rows[0].attempts >= 1 && rows[0].status == "pending" {
            Ok(rows)
        } else {
            Err(format!("{rows:?}"))
        }
    })
    .await;
    assert!(rows[0].last_error.is_some());
    // The receiver comes up: the reply arrives.
    let rx = Receiver::default();
    rx.serve(tokio::net::TcpListener::bind(addr).await.unwrap());
    let got = rx.wait_for(1).await;
    assert_eq!(got[0].0, "/down");
    assert_eq!(got[0].2["userId"], "u");
    assert!(!texts(&got[0].2).is_empty());
    poll_until("the row recorded as sent", || async {
        let rows = db.outbox_rows(&cid).await.unwrap();
        if rows[0].status == "sent" {
            Ok(())
        } else {
            Err(format!("{rows:?}"))
        }
    })
    .await;
}

async fn environment_switch_takes_effect_at_the_next_message(backend: Backend) {
    let server = start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let mut v1 = example_bot("counter");
    v1["version"] = json!("1.0.0");
    let (pid, env) = deploy(&api, &admin, v1.clone()).await;
    // Version 2 says something else.
    let mut v2 = v1.clone();
    v2["version"] = json!("2.0.0");
    v2["flows"]["count"]["states"]["counting"]["action"][0]["options"]["text"] =
        json!("v2 message $(context.count)");
    let rev2 = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), &admin, v2)
        .await
        .ok()["revision"]);
    api.post(
        &format!("/projects/{pid}/deployment/versions"),
        &admin,
        json!({"version": "2.0.0", "botRevision": rev2}),
    )
    .await
    .ok();
    let (rx, rx_url) = Receiver::start().await;
    let ch = channel(&api, &admin, &pid, &env, generic_body("web", &rx_url)).await;
    let webhook = s(&ch["webhook"]);
    let say = |t: &str| json!({"userId": "u", "messages": [{"type": "text", "content": t}]});
    hook(&api, &webhook, &[], &say("hi")).await.ok();
    hook(&api, &webhook, &[], &say("more")).await.ok();
    api.put(
        &format!("/projects/{pid}/environments/{env}"),
        &admin,
        json!({"depVersion": "2.0.0"}),
    )
    .await
    .ok();
    hook(&api, &webhook, &[], &say("more")).await.ok();
    let got = rx.wait_for(3).await;
    let first: Vec<String> = got.iter().map(|(_, _, b)| texts(b)[0].clone()).collect();
    assert_eq!(
        first,
        ["Message 1 (total 1)", "Message 2 (total 2)", "v2 message 3"],
        "the session carries over; the revision changes"
    );
}

async fn converse_endpoint_and_rpm_limit(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("counter")).await;
    let url = format!("/projects/{pid}/bot/converse");
    // Stateless: the session goes in and comes out.
    let r1 = api
        .post(
            &url,
            &admin,
            json!({"message": {"type": "text", "content": "hi"}}),
        )
        .await
        .ok();
    assert_eq!(r1["responses"][0]["content"], "Message 1 (total 1)");
    assert_eq!(r1["session"]["id"], "test~from~console");
    let r2 = api
        .post(
            &url,
            &admin,
            json!({"message": {"type": "text", "content": "x"}, "session": r1["session"]}),
        )
        .await
        .ok();
    assert_eq!(r2["responses"][0]["content"], "Message 2 (total 2)");
    // Stateful: the server keeps it.
    for k in 1..=2 {
        let r = api.post(&url, &admin, json!({"message": {"type": "text", "content": "hi"}, "sessionId": "s1", "environmentName": "production"})).await.ok();
        assert_eq!(
            r["responses"][0]["content"],
            format!("Message {k} (total {k})")
        );
    }
    let bad = api
        .post(&url, &admin, json!({"message": {"type": "bogus"}}))
        .await;
    assert_eq!(bad.status, 400);
    assert!(bad.text.contains("message:"), "{}", bad.text);

    // A channel's rpmLimit caps its webhook. A minute boundary between the calls would reset
    // the window: then a fresh channel tries again (two boundaries cannot fall in one try).
    // (The replies go nowhere: the limit is the webhook's answer.)
    let mut tries = vec![];
    for attempt in 0..2 {
        let ch = channel(&api, &admin, &pid, &env, json!({"name": format!("web{attempt}"), "type": "generic", "url": "http://127.0.0.1:9/sink", "rpmLimit": 2})).await;
        let webhook = s(&ch["webhook"]);
        let minute = botbox_store::now_ms() / 60_000;
        let mut statuses = vec![];
        for _ in 0..3 {
            statuses.push(u_says(&api, &webhook, "hi").await.status);
        }
        let same_window = botbox_store::now_ms() / 60_000 == minute;
        tries.push(statuses.clone());
        if same_window {
            assert_eq!(statuses, [200, 200, 429]);
            break;
        }
    }
    assert!(tries.iter().any(|t| t == &[200, 200, 429]), "{tries:?}");
}

/// A bot that schedules a repeating command, answered with "tick!".
fn ticker_bot() -> Value {
    json!({
        "name": "ticker",
        "flows": {
            "main": {
                "intents": {
                    "remind": {"initial": true, "condition": "content == 'remind'"},
                    "tick": {"initial": true, "type": "command", "condition": "content == 'tick'"}
                },
                "states": {
                    "init": {"initial": true, "transitions": {
                        "armed": {"condition": "intent == 'remind'"},
                        "ticked": {"condition": "intent == 'tick'"}}},
                    "armed": {"end": true, "action": [
                        {"name": "schedule", "options": {
                            "id": "r", "command": "add", "message": {"type": "command", "content": "tick"},
                            "start": "2020-01-01 00:00:00", "end": "2099-01-01 00:00:00",
                            "freqType": "second", "freqInterval": 1}},
                        {"name": "text", "options": {"text": "armed"}}]},
                    "ticked": {"end": true, "action": {"name": "text", "options": {"text": "tick!"}}}
                }
            }
        }
    })
}

async fn schedules_fire_and_survive_a_restart(backend: Backend) {
    let mut server = start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, ticker_bot()).await;
    let (rx, rx_url) = Receiver::start().await;
    let ch = channel(&api, &admin, &pid, &env, generic_body("web", &rx_url)).await;
    let cid = s(&ch["id"]);
    u_says(&api, &s(&ch["webhook"]), "remind").await.ok();
    let got = rx.wait_for(2).await;
    assert_eq!(texts(&got[0].2), ["armed"]);
    assert_eq!(texts(&got[1].2), ["tick!"]);
    // Killed and started again: the schedule lives in the database and keeps firing.
    server.restart().await;
    let before = rx.seen.lock().unwrap().len();
    let got = rx.wait_for(before + 2).await;
    assert!(got[before..].iter().all(|(_, _, b)| texts(b) == ["tick!"]));
    let db = server.db().await;
    assert!(db.outbox_rows(&cid).await.unwrap().len() >= before + 2);
}

/// Two server processes on one PostgreSQL database, messages of one user sent to both at
/// once: every step sees the previous one's session, and every reply goes out exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_keep_one_users_order() {
    if crate::common::postgres_skipped("live::two_replicas_keep_one_users_order").await {
        return;
    }
    let a = start(Backend::Postgres).await;
    let b = a.replica().await;
    let (api, rx, ch) = counter_on_generic(&a).await;
    let cid = s(&ch["id"]);
    let hooks = [
        format!("{}/webhooks/{cid}", a.base),
        format!("{}/webhooks/{cid}", b.base),
    ];
    const N: usize = 16;
    let (counts, want) = hi_then_at_once(&api, &rx, &hooks, N).await;
    assert_eq!(
        counts, want,
        "each step saw the previous one's session, on either replica"
    );
    // Nothing more arrives: each reply was delivered by one replica only.
    let db = a.db().await;
    let rows = poll_until("every row sent", || async {
        let rows = db.outbox_rows(&cid).await.unwrap();
        if rows.iter().all(|r| r.status == "sent") {
            Ok(rows)
        } else {
            Err(format!("{rows:?}"))
        }
    })
    .await;
    assert_eq!(rows.len(), N + 1);
    assert_eq!(rx.seen.lock().unwrap().len(), N + 1);
    drop(b);
}

/// Each process keeps the sessions it stored last. When the other replica has moved a
/// session on since, the stale copy fails the version check and the step runs again on the
/// stored session: A, B, A in turn count 1, 2, 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicas_stale_session_copy_is_read_again() {
    if crate::common::postgres_skipped("live::a_replicas_stale_session_copy_is_read_again").await {
        return;
    }
    let a = start(Backend::Postgres).await;
    let b = a.replica().await;
    let (api, rx, ch) = counter_on_generic(&a).await;
    let cid = s(&ch["id"]);
    let msg = json!({"userId": "u", "messages": [{"type": "text", "content": "hi"}]});
    for (k, base) in [&a.base, &b.base, &a.base].into_iter().enumerate() {
        let r = hook(&api, &format!("{base}/webhooks/{cid}"), &[], &msg).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let got = rx.wait_for(k + 1).await;
        assert_eq!(
            texts(&got[k].2)[0],
            format!("Message {} (total {})", k + 1, k + 1),
            "message {} on {base}",
            k + 1
        );
    }
}

/// Group commit (SQLite commits the steps waiting for the write turn together): in one
/// transaction, a step whose session moved on writes nothing of its own while the others
/// are stored whole; and many concurrent steps all land.
async fn steps_committed_together_keep_their_own_outcomes(backend: Backend) {
    use botbox_store::{NewTranscript, StepWrite};
    let server = InProcess::start(backend).await;
    let db = server.db().await;
    let tag = botbox_store::new_id();
    let write =
        |session: &str, read_version: Option<i64>, lines: usize, replies: usize| StepWrite {
            session_id: format!("{tag}:{session}"),
            environment_id: "env".into(),
            channel_id: format!("{tag}:{session}"),
            user_id: session.into(),
            body: format!("{{\"id\": \"{session}\", \"v\": {read_version:?}}}").into(),
            read_version,
            transcripts: (0..lines)
                .map(|n| NewTranscript {
                    project_id: tag.clone(),
                    environment_id: "env".into(),
                    environment_name: "group".into(),
                    channel_id: format!("{tag}:{session}"),
                    user_id: session.into(),
                    direction: "in",
                    message: format!("{session} line {n}"),
                    flow: None,
                    intent: None,
                    state: None,
                    step_us: Some(n as i64),
                    dep_version: None,
                    outcome: None,
                    replay: None,
                    miss: None,
                    starts: false,
                })
                .collect(),
            outbox: (0..replies)
                .map(|n| {
                    (
                        "http://127.0.0.1:9/".into(),
                        "[]".into(),
                        format!("{session} reply {n}"),
                    )
                })
                .collect(),
            outbox_lease_ms: 600_000,
            ..StepWrite::default()
        };
    // `old` exists at version 1.
    assert!(
        db.commit_step(write("old", None, 0, 0))
            .await
            .unwrap()
            .is_some()
    );
    let before = db.session(&format!("{tag}:old")).await.unwrap().unwrap();
    assert_eq!(before.version, 1);

    let out = db
        .commit_together(vec![
            write("a", None, 2, 1),
            write("old", Some(7), 3, 2), // stale: the session is at version 1
            write("b", None, 1, 0),
            write("old", None, 1, 1), // a second "first" session: it exists already
        ])
        .await
        .unwrap();
    let shape: Vec<Option<usize>> = out
        .into_iter()
        .map(|r| r.unwrap().map(|rows| rows.len()))
        .collect();
    assert_eq!(shape, [Some(1), None, Some(0), None]);
    let after = db.session(&format!("{tag}:old")).await.unwrap().unwrap();
    assert_eq!((after.version, &after.body), (1, &before.body));
    let lines = db
        .list_transcripts(&tag, "group", 0, i64::MAX)
        .await
        .unwrap();
    let mut texts: Vec<&str> = lines.iter().map(|l| l.message.as_str()).collect();
    texts.sort();
    assert_eq!(texts, ["a line 0", "a line 1", "b line 0"]);
    assert_eq!(
        db.outbox_rows(&format!("{tag}:old")).await.unwrap().len(),
        0
    );
    assert_eq!(db.outbox_rows(&format!("{tag}:a")).await.unwrap().len(), 1);

    // Forty steps at once, through the group commit where there is one.
    let tasks: Vec<_> = (0..40)
        .map(|n| {
            let db = db.clone();
            let w = write(&format!("c{n}"), None, 1, 1);
            tokio::spawn(async move { db.commit_step(w).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().map(|r| r.len()), Some(1));
    }
    let lines = db
        .list_transcripts(&tag, "group", 0, i64::MAX)
        .await
        .unwrap();
    assert_eq!(lines.len(), 3 + 40);
    for n in 0..40 {
        let s = db.session(&format!("{tag}:c{n}")).await.unwrap().unwrap();
        assert_eq!(s.version, 1);
    }
}

/// A step whose session changed under it (another replica, or a stale cache) writes nothing,
/// and its message stays unseen: the step runs again on the newer session and is stored then.
/// A message must not be marked seen by a commit that stored none of its outcome (it would
/// then be dropped as a duplicate when run again, and lost).
async fn a_step_that_lost_its_session_race_leaves_its_message_unseen(backend: Backend) {
    use botbox_store::StepWrite;
    let server = InProcess::start(backend).await;
    let db = server.db().await;
    let tag = botbox_store::new_id();
    let write = |read_version: Option<i64>, body: &str| StepWrite {
        session_id: format!("{tag}:s"),
        environment_id: "env".into(),
        channel_id: format!("{tag}:ch"),
        user_id: "u".into(),
        body: body.to_owned().into(),
        read_version,
        provider_id: Some(("u".into(), "m1".into())),
        ..StepWrite::default()
    };
    let first = StepWrite {
        provider_id: None,
        ..write(None, "{\"n\": 1}")
    };
    assert!(db.commit_step(first).await.unwrap().is_some());
    // Stale: the step read version 7, the session is at 1. Alone and in a group.
    assert!(
        db.commit_step(write(Some(7), "{\"n\": 2}"))
            .await
            .unwrap()
            .is_none()
    );
    let out = db
        .commit_together(vec![write(Some(7), "{\"n\": 2}")])
        .await
        .unwrap();
    assert!(out[0].as_ref().unwrap().is_none());
    assert!(
        !db.seen(&format!("{tag}:ch"), "u", "m1").await.unwrap(),
        "a message whose step stored nothing is marked seen: its rerun would be dropped"
    );
    // The rerun on the newer session is stored, and marks the message seen.
    assert!(
        db.commit_step(write(Some(1), "{\"n\": 2}"))
            .await
            .unwrap()
            .is_some()
    );
    assert!(db.seen(&format!("{tag}:ch"), "u", "m1").await.unwrap());
    let s = db.session(&format!("{tag}:s")).await.unwrap().unwrap();
    assert_eq!((s.version, s.body.as_str()), (2, "{\"n\": 2}"));
    // A second delivery of the same message writes nothing.
    assert!(
        db.commit_step(write(Some(2), "{\"n\": 3}"))
            .await
            .unwrap()
            .is_none()
    );
    let s = db.session(&format!("{tag}:s")).await.unwrap().unwrap();
    assert_eq!(s.version, 2);
}

/// Webex sends only the message's id: the webhook reads the text from the Webex API with the
/// bot token, runs it, and replies with `POST /messages`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webex_messages_are_read_by_id() {
    let server = start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(&api, &admin, example_bot("pizza")).await;

    // The Webex stand-in: messages by id (with the bot token only), and replies recorded.
    let replies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let notify = Arc::new(tokio::sync::Notify::new());
    let base = {
        let (replies, notify) = (replies.clone(), notify.clone());
        let app = axum::Router::new()
            .route(
                "/messages/{id}",
                axum::routing::get(
                    |axum::extract::Path(id): axum::extract::Path<String>,
                     headers: axum::http::HeaderMap| async move {
                        if headers.get("authorization").and_then(|h| h.to_str().ok())
                            != Some("Bearer webex-token")
                        {
                            return (axum::http::StatusCode::UNAUTHORIZED, axum::Json(json!({})));
                        }
                        let text = match id.as_str() {
                            "m1" => "I want pizza",
                            _ => "cancel",
                        };
                        (
                            axum::http::StatusCode::OK,
                            axum::Json(json!({"id": id, "roomId": "R1", "text": text})),
                        )
                    },
                ),
            )
            .route(
                "/messages",
                axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
                    let (replies, notify) = (replies.clone(), notify.clone());
                    async move {
                        replies.lock().unwrap().push(v);
                        notify.notify_waiters();
                        axum::Json(json!({}))
                    }
                }),
            );
        crate::common::serve_stub(app).await
    };
    let ch = channel(&api, &admin, &pid, &env, webex_body(&base, "webex-token")).await;
    let webhook = s(&ch["webhook"]);
    let created = webex_created;
    let r = hook(&api, &webhook, &[], &created("m1")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let got = loop {
        let notified = notify.notified();
        {
            let got = replies.lock().unwrap();
            // The pizza bot's first answer: the menu and "Which one?".
            if got.len() >= 2 {
                break got.clone();
            }
        }
        assert!(
            tokio::time::timeout_at(deadline, notified).await.is_ok(),
            "no reply reached the Webex stand-in"
        );
    };
    assert_eq!(got[0]["roomId"], "R1");
    assert!(!s(&got[0]["text"]).is_empty(), "{got:?}");
    // The transcript has the text that was read, not an empty message.
    let lines = api
        .get(
            &format!("/analytics/{pid}/production/list_transcript?startTimeStamp=0&endTimeStamp=99999999999999"),
            &admin,
        )
        .await
        .ok();
    assert!(lines.to_string().contains("I want pizza"), "{lines}");

    // A Webex API that refuses the token: the webhook fails (500) and nothing runs.
    let bad = channel(
        &api,
        &admin,
        &pid,
        &env,
        json!({"name": "webex2", "type": "spark", "url": base, "options": {"token": "wrong"}}),
    )
    .await;
    let r = hook(&api, &s(&bad["webhook"]), &[], &created("m2")).await;
    assert_eq!(r.status, 500, "{}", r.text);
    assert_eq!(replies.lock().unwrap().len(), got.len());
}
