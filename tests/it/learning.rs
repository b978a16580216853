//! Learning from production: the misunderstood inbox (fallbacks of any intent name grouped
//! and counted, labelled into an NLU that then predicts them, dismissed, never the console's
//! test chats, another tenant's 404) and replays (a revision run again on an environment's
//! recorded conversations: identical on the revision that served them, whatever its
//! JavaScript randomness, clock, api calls, NL predictions, schedules and CMS; differing
//! exactly where a new revision answers otherwise; nothing sent, nothing stored).

use crate::common::{
    Api, Backend, InProcess, assert_contains, converse_text, example_bot, generic_channel,
    poll_until, post_webhook, s, serve_stub,
};
use crate::nlu::trained_pizza_nl;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

on_both_backends!(
    fallbacks_of_any_intent_name_reach_the_inbox_grouped_and_counted,
    a_labelled_group_is_trained_into_the_nlu_and_predicted,
    replaying_the_revision_that_served_gives_identical_conversations,
    a_changed_reply_makes_exactly_the_conversations_that_reach_it_differ,
);

/// A server whose bots may call loopback stand-ins.
async fn server(backend: Backend) -> (InProcess, Api, String) {
    let server = InProcess::start_configured(backend, |cfg| {
        cfg.live.egress = botbox_egress::EgressConfig::allow_all();
    })
    .await;
    let api = server.api();
    let admin = api.admin_token().await;
    (server, api, admin)
}

async fn say(api: &Api, channel: &str, user: &str, text: &str) {
    let body = json!({"userId": user, "messages": [{"type": "text", "content": text}]});
    post_webhook(api, channel, &body).await;
}

/// Pushes `bot` to project `pid`, deploys it as `version` to environment `production`
/// (created when missing): (the revision, the environment's id).
async fn ship(api: &Api, token: &str, pid: &str, bot: Value, version: &str) -> (String, String) {
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), token, bot)
        .await
        .ok()["revision"]);
    api.post(
        &format!("/projects/{pid}/deployment/versions"),
        token,
        json!({"version": version, "botRevision": rev}),
    )
    .await
    .ok();
    let envs = api
        .get(&format!("/projects/{pid}/environments"), token)
        .await
        .ok();
    let env = match envs["data"].as_array().unwrap().first() {
        Some(e) => {
            let id = s(&e["id"]);
            api.put(
                &format!("/projects/{pid}/environments/{id}"),
                token,
                json!({"depVersion": version}),
            )
            .await
            .ok();
            id
        }
        None => s(&api
            .post(
                &format!("/projects/{pid}/environments"),
                token,
                json!({"depId": pid, "depVersion": version, "name": "production"}),
            )
            .await
            .ok()["id"]),
    };
    (rev, env)
}

/// A new project of `token`'s named `name` with `options`; its id.
async fn project(api: &Api, token: &str, name: &str, options: Value) -> String {
    s(&api
        .post(
            "/projects",
            token,
            json!({"name": name, "options": options}),
        )
        .await
        .ok()["id"])
}

async fn inbox(api: &Api, token: &str, pid: &str, env: &str, status: &str) -> Value {
    api.get(
        &format!("/projects/{pid}/environments/{env}/misunderstood?status={status}"),
        token,
    )
    .await
    .ok()
}

/// Alice's pizza-nl bot (its NLU trained on the example's sentences) on `production` with a
/// generic channel: (project, environment, channel).
async fn pizza_nl_live(api: &Api, alice: &str) -> (String, String, String) {
    let (pid, _, trained) = trained_pizza_nl(api, alice).await;
    assert_eq!(trained["status"], "success", "{trained}");
    let (_, env) = ship(api, alice, &pid, example_bot("pizza-nl"), "1.0.0").await;
    let channel = generic_channel(api, alice, &pid, &env, "http://127.0.0.1:9/replies").await;
    (pid, env, channel)
}

async fn fallbacks_of_any_intent_name_reach_the_inbox_grouped_and_counted(backend: Backend) {
    let (_server, api, admin) = server(backend).await;
    let (_, alice) = api.user(&admin, "alice", "developer").await;
    let (_, bob) = api.user(&admin, "bob", "developer").await;
    let (pid, env, channel) = pizza_nl_live(&api, &alice).await;
    // `other` is the fallback flow's fallback intent; `hello` and orders are understood.
    for (user, text) in [
        ("u1", "hello"),
        ("u1", "What's the weather like?"),
        ("u2", "what's   the weather like"),
        ("u3", "i want a pizza"),
        ("u4", "Play some jazz music!"),
    ] {
        say(&api, &channel, user, text).await;
    }
    // A test chat of the console is not a channel user's.
    converse_text(&api, &alice, &pid, "play some jazz music").await;
    let all = inbox(&api, &alice, &pid, &env, "").await;
    let groups: Vec<(String, i64, Value, Value)> = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                s(&g["text"]),
                g["count"].as_i64().unwrap(),
                g["intent"].clone(),
                g["flow"].clone(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            (
                "what's the weather like".into(),
                2,
                json!("other"),
                json!("fallback")
            ),
            (
                "play some jazz music".into(),
                1,
                json!("other"),
                json!("fallback")
            ),
        ],
        "{all}"
    );
    assert_eq!(all["total"], 2);
    let weather = &all["data"][0];
    assert_eq!(weather["status"], "new");
    assert!(["u1", "u2"].contains(&weather["sampleUserId"].as_str().unwrap()));
    assert!(weather["firstSeen"].as_i64() <= weather["lastSeen"].as_i64());

    // The analytics count every fallback intent, whatever its name: 3 of 5.
    let a = api
        .get(
            &format!("/projects/{pid}/analytics?environment=production"),
            &alice,
        )
        .await
        .ok();
    assert_eq!(a["fallbackRate"], 0.6, "{a}");

    // Dismissed groups leave the new ones; the dismissed list has them.
    let jazz = s(&all["data"][1]["id"]);
    let item = format!("/projects/{pid}/environments/{env}/misunderstood/{jazz}");
    let put = api
        .put(&item, &alice, json!({"status": "dismissed"}))
        .await
        .ok();
    assert_eq!(put["status"], "dismissed");
    let new = inbox(&api, &alice, &pid, &env, "new").await;
    assert_eq!(new["total"], 1);
    assert_eq!(new["data"][0]["text"], "what's the weather like");
    let dismissed = inbox(&api, &alice, &pid, &env, "dismissed").await;
    assert_eq!(dismissed["data"][0]["id"], jazz.as_str());
    let bad = api
        .get(
            &format!("/projects/{pid}/environments/{env}/misunderstood?status=old"),
            &alice,
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_contains(
        &bad.text,
        "status \"old\" is not one of new, labelled, dismissed",
    );

    // Another tenant learns nothing: 404 on the list and on the item.
    let list = format!("/projects/{pid}/environments/{env}/misunderstood");
    assert_eq!(api.get(&list, &bob).await.status, 404);
    assert_eq!(
        api.put(&item, &bob, json!({"status": "dismissed"}))
            .await
            .status,
        404
    );
    let unknown = format!("{list}/0123456789abcdef");
    assert_eq!(
        api.put(&unknown, &alice, json!({"status": "dismissed"}))
            .await
            .status,
        404
    );

    // The NL bot's conversations replay identically on the revision that served them.
    let rev = s(&api.get(&format!("/projects/{pid}"), &alice).await.ok()["botLatestRevision"]);
    let r = replay(
        &api,
        &alice,
        &pid,
        json!({"environment": "production", "botRevision": rev}),
    )
    .await;
    assert_eq!(
        (r["conversations"].clone(), r["identical"].clone()),
        (json!(4), json!(4)),
        "{r}"
    );
}

async fn a_labelled_group_is_trained_into_the_nlu_and_predicted(backend: Backend) {
    let (_server, api, admin) = server(backend).await;
    let (_, alice) = api.user(&admin, "alice", "developer").await;
    let (pid, env, channel) = pizza_nl_live(&api, &alice).await;
    let nlu = format!("/projects/{pid}/nlus/pizza-nl");
    let predicted = |text: &'static str| {
        let (api, alice, nlu) = (api.clone(), alice.clone(), nlu.clone());
        async move {
            let p = crate::nlu::form(&api, &format!("{nlu}/predict"), &alice, &[text], None)
                .await
                .ok();
            p["result"]["intent"][0]["value"].clone()
        }
    };
    assert_ne!(predicted("sup dude").await, "greet");
    for user in ["u1", "u2"] {
        say(&api, &channel, user, "Sup dude").await;
    }
    say(&api, &channel, "u3", "sup dude!").await;
    let group = inbox(&api, &alice, &pid, &env, "new").await["data"][0].clone();
    assert_eq!(
        (s(&group["text"]), group["count"].as_i64()),
        ("sup dude".into(), Some(3))
    );
    let item = format!(
        "/projects/{pid}/environments/{env}/misunderstood/{}",
        s(&group["id"])
    );

    // A label the NLU lacks is refused, naming it; nothing is added.
    let wrong = api
        .put(
            &item,
            &alice,
            json!({"status": "labelled", "nluId": "alice:pizza-nl", "intent": "weather"}),
        )
        .await;
    assert_eq!(wrong.status, 400, "{}", wrong.text);
    assert_contains(
        &wrong.text,
        "\"weather\" is not a label of a trait entity of NLU pizza-nl",
    );
    let before = api
        .get(&format!("{nlu}/training_data?limit=1"), &alice)
        .await
        .ok()["total"]
        .clone();

    let labelled = api
        .put(
            &item,
            &alice,
            json!({"status": "labelled", "nluId": "alice:pizza-nl", "intent": "greet"}),
        )
        .await
        .ok();
    assert_eq!(
        (labelled["status"].clone(), labelled["label"].clone()),
        (json!("labelled"), json!("greet"))
    );
    // Both spellings of the group went in, once each.
    let td = api
        .get(&format!("{nlu}/training_data?limit=100"), &alice)
        .await
        .ok();
    assert_eq!(td["total"].as_i64(), before.as_i64().map(|n| n + 2), "{td}");
    let inputs: Vec<String> = td["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| s(&r["input"]))
        .collect();
    assert!(inputs.contains(&"Sup dude".to_string()), "{inputs:?}");
    assert!(inputs.contains(&"sup dude!".to_string()), "{inputs:?}");
    // Labelling again adds nothing twice.
    api.put(
        &item,
        &alice,
        json!({"status": "labelled", "nluId": "pizza-nl", "intent": "greet"}),
    )
    .await
    .ok();
    let again = api
        .get(&format!("{nlu}/training_data?limit=1"), &alice)
        .await
        .ok();
    assert_eq!(again["total"], td["total"]);
    assert_eq!(
        inbox(&api, &alice, &pid, &env, "labelled").await["total"],
        1
    );

    let trained = api
        .post(&format!("{nlu}/retrain"), &alice, json!({}))
        .await
        .ok();
    assert_eq!(trained["status"], "success", "{trained}");
    assert_eq!(predicted("sup dude").await, "greet");

    // Replayed now, the three conversations are greeted instead of apologised to.
    let rev = s(&api.get(&format!("/projects/{pid}"), &alice).await.ok()["botLatestRevision"]);
    let r = replay(
        &api,
        &alice,
        &pid,
        json!({"environment": "production", "botRevision": rev}),
    )
    .await;
    assert_eq!(r["differing"], 3, "{r}");
    let d = &r["results"][0]["firstDifference"];
    assert_eq!(
        d["before"],
        json!([{"type": "text", "content": "Sorry, I only take pizza orders."}])
    );
    assert_eq!(
        d["after"],
        json!([{"type": "text", "content": "Hello! Want a pizza?"}])
    );
}

/// A stand-in api whose every answer differs (a counter): only a replay that answers from
/// the recording can say the same again. Counts the requests it got.
async fn counting_api() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            axum::Json(json!({"temp": 20 + n, "sky": format!("sky number {n}")}))
        }
    });
    (serve_stub(app).await, hits)
}

/// A bot of everything a step may draw from the world: `Math.random` and `Date` in a method,
/// a random text variant, an api call, a schedule that fires a command, and the CMS.
fn lucky_bot(api_base: &str) -> Value {
    json!({
        "name": "lucky",
        "methods": {
            "roll(message, context, data, options, config, result)":
                "return 'rolled ' + Math.floor(Math.random() * 1e6) + ' at ' + new Date().toISOString();"
        },
        "flows": {"main": {
            "intents": {
                "roll": {"initial": true, "condition": "content == 'roll'"},
                "pick": {"initial": true, "condition": "content == 'pick'"},
                "ask": {"initial": true, "condition": "content == 'ask'"},
                "remind": {"initial": true, "condition": "content == 'remind'"},
                "tick": {"initial": true, "type": "command", "condition": "content == 'tick'"},
                "hello": {"initial": true, "condition": "content == 'hello'"}
            },
            "states": {
                "init": {"initial": true, "end": true, "transitions": {
                    "roll": "intent == 'roll'", "pick": "intent == 'pick'", "ask": "intent == 'ask'",
                    "remind": "intent == 'remind'", "tick": "intent == 'tick'", "hello": "intent == 'hello'"
                }},
                "roll": {"end": true, "action": [{"name": "method", "method": "roll"}]},
                "pick": {"end": true, "action": [{"name": "text", "options": {"text": ["one", "two", "three", "four", "five"]}}]},
                "ask": {"end": true, "action": [
                    {"name": "api", "options": {"method": "GET", "uri": format!("{api_base}/now")}},
                    {"name": "text", "options": {"text": "api says $(result.sky)"}}
                ]},
                "remind": {"end": true, "action": [
                    {"name": "schedule", "options": {"id": "t", "command": "add",
                        "message": {"type": "command", "content": "tick"},
                        "start": "2026-01-01 00:00:00", "end": "2099-01-01 00:00:00",
                        "freqType": "day", "freqInterval": 1}},
                    {"name": "text", "options": {"text": "reminding"}}
                ]},
                "tick": {"end": true, "action": [{"name": "method", "method": "roll"}]},
                "hello": {"end": true, "action": [{"name": "text", "options": {"text": "$(cms.home.greeting.text.value)"}}]}
            }
        }}
    })
}

/// Starts a replay and waits for its end.
async fn replay(api: &Api, token: &str, pid: &str, body: Value) -> Value {
    let started = api
        .post(&format!("/projects/{pid}/replays"), token, body)
        .await;
    assert_eq!(started.status, 202, "{}", started.text);
    let id = s(&started.json()["id"]);
    poll_until("the replay's end", || {
        let (api, path) = (api.clone(), format!("/projects/{pid}/replays/{id}"));
        let token = token.to_owned();
        async move {
            let r = api.get(&path, &token).await.ok();
            match r["status"].as_str() {
                Some("running") => Err("running".to_string()),
                _ => Ok(r),
            }
        }
    })
    .await
}

/// What replaying must leave alone: the environment's transcript lines and sessions.
async fn stored(server: &InProcess) -> (i64, Vec<(String, String)>) {
    let db = server.db().await;
    let (lines,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM transcripts")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let sessions: Vec<(String, String)> =
        sqlx::query_as("SELECT id, body FROM sessions ORDER BY id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    (lines, sessions)
}

async fn replaying_the_revision_that_served_gives_identical_conversations(backend: Backend) {
    let (server, api, admin) = server(backend).await;
    let (_, alice) = api.user(&admin, "alice", "developer").await;
    let (base, hits) = counting_api().await;
    let mut checked = 0;

    // The weather example, its api pointed at the counting stand-in.
    let mut weather = example_bot("weather");
    weather["config"]["apiBase"] = json!(base);
    let otp = example_bot("otp");
    let pizza = example_bot("pizza");
    let scripts: [(&str, Value, &[&str]); 3] = [
        (
            "weather",
            weather,
            &["weather in jakarta", "weather bandung", "thanks"],
        ),
        ("otp", otp, &["code", "4321"]),
        (
            "pizza",
            pizza,
            &["i want pizza", "large", "pepperoni", "yes"],
        ),
    ];
    for (name, bot, texts) in scripts {
        let pid = project(&api, &alice, name, json!({"bot": true})).await;
        let (rev, env) = ship(&api, &alice, &pid, bot, "1.0.0").await;
        let channel = generic_channel(&api, &alice, &pid, &env, "http://127.0.0.1:9/r").await;
        for u in 0..12 {
            for t in texts.iter().take(1 + u % texts.len()) {
                say(&api, &channel, &format!("{name}-{u}"), t).await;
            }
        }
        let r = replay(
            &api,
            &alice,
            &pid,
            json!({"environment": "production", "botRevision": rev}),
        )
        .await;
        assert_eq!(
            (r["status"].clone(), r["conversations"].clone()),
            (json!("done"), json!(12)),
            "{r}"
        );
        assert_eq!(r["identical"], 12, "{name}: {r}");
        checked += 12;
    }

    // The bot of everything, with its CMS, and a schedule that fires.
    let pid = project(&api, &alice, "lucky", json!({"bot": true, "cms": true})).await;
    let doc =
        json!({"pages": {"home": {"greeting": {"text": {"type": "text", "value": "Welcome!"}}}}});
    api.post(&format!("/projects/{pid}/cms/revisions"), &alice, doc)
        .await
        .ok();
    let (rev, env) = ship(&api, &alice, &pid, lucky_bot(&base), "1.0.0").await;
    let channel = generic_channel(&api, &alice, &pid, &env, "http://127.0.0.1:9/r").await;
    let script = ["roll", "pick", "ask", "hello", "roll", "pick", "ask"];
    for u in 0..14 {
        for t in script.iter().skip(u % 3).take(3 + u % 4) {
            say(&api, &channel, &format!("lucky-{u}"), t).await;
        }
    }
    say(&api, &channel, "lucky-remind", "remind").await;
    let ticked = poll_until("the schedule's tick", || {
        let (api, alice) = (api.clone(), alice.clone());
        let path = format!("/projects/{pid}/transcripts?environment=production&user=lucky-remind");
        async move {
            let t = api.get(&path, &alice).await.ok();
            let lines = t["data"].as_array().unwrap().clone();
            let tick = lines
                .iter()
                .any(|l| l["direction"] == "in" && l["message"]["content"] == "tick");
            if tick && lines.len() >= 4 {
                Ok(lines)
            } else {
                Err(format!("{lines:?}"))
            }
        }
    })
    .await;
    assert!(ticked.iter().any(|l| {
        l["message"]["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("rolled ")
    }));
    let before = stored(&server).await;
    let calls = hits.load(Ordering::SeqCst);
    assert!(calls >= 14, "the bots called the api {calls} times");

    let r = replay(
        &api,
        &alice,
        &pid,
        json!({"environment": env, "botRevision": rev, "last": 1000}),
    )
    .await;
    assert_eq!(r["conversations"], 15, "{r}");
    assert_eq!(r["identical"], 15, "{r}");
    checked += 15;
    assert!(checked >= 50);
    // Nothing was asked of the api, nothing stored, no session moved.
    assert_eq!(hits.load(Ordering::SeqCst), calls);
    assert_eq!(stored(&server).await, before);

    // Bad asks are refused, naming what is wrong.
    let too_many = api
        .post(
            &format!("/projects/{pid}/replays"),
            &alice,
            json!({"environment": "production", "botRevision": rev, "last": 1001}),
        )
        .await;
    assert_eq!(too_many.status, 400);
    assert_contains(
        &too_many.text,
        "last: 1001 conversations; a replay runs 1 to 1000",
    );
    let no_rev = api
        .post(
            &format!("/projects/{pid}/replays"),
            &alice,
            json!({"environment": "production", "botRevision": "nope"}),
        )
        .await;
    assert_eq!(no_rev.status, 400);
    assert_contains(
        &no_rev.text,
        "botRevision: bot revision nope does not exist",
    );
    let (_, bob) = api.user(&admin, "bob", "developer").await;
    let path = format!("/projects/{pid}/replays/{}", s(&r["id"]));
    assert_eq!(api.get(&path, &bob).await.status, 404);
}

async fn a_changed_reply_makes_exactly_the_conversations_that_reach_it_differ(backend: Backend) {
    let (server, api, admin) = server(backend).await;
    let (_, alice) = api.user(&admin, "alice", "developer").await;
    let pid = project(&api, &alice, "otp", json!({"bot": true})).await;
    let otp = example_bot("otp");
    ship(&api, &alice, &pid, otp.clone(), "1.0.0").await;
    let envs = api
        .get(&format!("/projects/{pid}/environments"), &alice)
        .await
        .ok();
    let env = s(&envs["data"][0]["id"]);
    let channel = generic_channel(&api, &alice, &pid, &env, "http://127.0.0.1:9/r").await;
    // Users 0-3 give the right code and reach `ok`; 4-7 a wrong one; 8-9 only ask.
    for u in 0..10 {
        let user = format!("user-{u}");
        say(&api, &channel, &user, "code").await;
        if u < 8 {
            say(&api, &channel, &user, if u < 4 { "4321" } else { "1111" }).await;
        }
    }
    let mut changed = otp.clone();
    changed["flows"]["otp"]["states"]["ok"]["action"]["options"]["text"] =
        json!("Verified, welcome back");
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), &alice, changed)
        .await
        .ok()["revision"]);
    let before = stored(&server).await;

    let r = replay(
        &api,
        &alice,
        &pid,
        json!({"environment": "production", "botRevision": rev}),
    )
    .await;
    assert_eq!(
        (
            r["conversations"].clone(),
            r["identical"].clone(),
            r["differing"].clone(),
            r["failed"].clone()
        ),
        (json!(10), json!(6), json!(4), json!(0)),
        "{r}"
    );
    let mut differing: Vec<String> = vec![];
    for c in r["results"].as_array().unwrap() {
        if c["outcome"] == "differing" {
            differing.push(s(&c["userId"]));
            let d = &c["firstDifference"];
            assert_eq!(d["message"], 2, "{c}");
            assert_eq!(d["input"]["content"], "4321");
            assert_eq!(
                d["before"],
                json!([{"type": "text", "content": "Verified"}])
            );
            assert_eq!(
                d["after"],
                json!([{"type": "text", "content": "Verified, welcome back"}])
            );
        }
    }
    differing.sort();
    assert_eq!(differing, ["user-0", "user-1", "user-2", "user-3"]);
    assert_eq!(stored(&server).await, before);

    // A revision that makes a call the recording lacks: differing, the call named, not made.
    let (base, hits) = counting_api().await;
    let mut calling = otp.clone();
    calling["flows"]["otp"]["states"]["ok"]["action"] = json!([
        {"name": "api", "options": {"method": "GET", "uri": format!("{base}/audit?token=s3cret")}},
        {"name": "text", "options": {"text": "Verified"}}
    ]);
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), &alice, calling)
        .await
        .ok()["revision"]);
    let r = replay(
        &api,
        &alice,
        &pid,
        json!({"environment": env, "botRevision": rev, "last": 10}),
    )
    .await;
    assert_eq!(
        (r["conversations"].clone(), r["differing"].clone()),
        (json!(10), json!(4)),
        "{r}"
    );
    let named: Vec<&Value> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["firstDifference"].get("unrecordedCall"))
        .collect();
    assert_eq!(named.len(), 4, "{r}");
    for call in named {
        let call = call.as_str().unwrap();
        assert!(call.starts_with(&format!("GET {base}/audit")), "{call}");
        assert!(!call.contains("s3cret"), "{call}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a replay made an api call");
}
