//! Canary rollouts: a second deployment version for a share of an environment's channel
//! users, each user kept on one version for the canary's life; an automatic rollback when
//! the canary errs; promotion and abort; replicas that agree on who gets what.

use crate::common::{
    Api, Backend, InProcess, Server, assert_contains, generic_channel, poll_until, post_webhook, s,
};
use botbox_service::live::bucket;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

on_both_backends!(
    a_canary_serves_its_share_and_each_user_one_version,
    a_canary_that_errs_rolls_itself_back
);

/// A bot that answers any text with `text`; with `throws`, a method that throws runs first
/// (a bot error in every step, the step going on).
fn bot(text: &str, throws: bool) -> Value {
    let mut action = vec![json!({"name": "text", "options": {"text": text}})];
    let mut b = json!({"name": "canary-bot", "flows": {"main": {
        "intents": {"any": {"initial": true, "type": "text"}},
        "states": {
            "init": {"initial": true, "transitions": {"answer": "intent == 'any'"}},
            "answer": {"end": true, "action": []}
        }
    }}});
    if throws {
        action.insert(0, json!({"name": "method", "method": "boom"}));
        b["methods"] = json!({"boom(message, context, data, options, config, result)":
            "throw new Error('boom')"});
    }
    b["flows"]["main"]["states"]["answer"]["action"] = json!(action);
    b
}

/// A project whose environment `production` runs `1.0.0` (saying v1) with a generic
/// channel, and deployment `1.0.1` of `canary` ready beside it: (pid, env, channel).
async fn two_versions(api: &Api, token: &str, canary: Value) -> (String, String, String) {
    let (pid, env) = crate::common::deploy(api, token, bot("v1", false)).await;
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), token, canary)
        .await
        .ok()["revision"]);
    api.post(
        &format!("/projects/{pid}/deployment/versions"),
        token,
        json!({"version": "1.0.1", "botRevision": rev}),
    )
    .await
    .ok();
    let channel = generic_channel(api, token, &pid, &env, "http://127.0.0.1:9/replies").await;
    (pid, env, channel)
}

async fn say(api: &Api, channel: &str, user: &str) {
    let body = json!({"userId": user, "messages": [{"type": "text", "content": "hi"}]});
    post_webhook(api, channel, &body).await;
}

/// Per user, the deployment versions that answered their messages (from the transcripts).
async fn versions_by_user(api: &Api, token: &str, pid: &str) -> BTreeMap<String, BTreeSet<String>> {
    let t = api
        .get(
            &format!("/projects/{pid}/transcripts?environment=production&limit=1000"),
            token,
        )
        .await
        .ok();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for l in t["data"].as_array().unwrap() {
        if l["direction"] == "in" {
            out.entry(s(&l["userId"]))
                .or_default()
                .insert(s(&l["depVersion"]));
        }
    }
    out
}

async fn canary_of(api: &Api, token: &str, pid: &str, env: &str) -> Value {
    api.get(&format!("/projects/{pid}/environments/{env}"), token)
        .await
        .ok()
}

async fn a_canary_serves_its_share_and_each_user_one_version(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env, channel) = two_versions(&api, &admin, bot("v2", false)).await;
    let put = api
        .put(
            &format!("/projects/{pid}/environments/{env}/canary"),
            &admin,
            json!({"depVersion": "1.0.1", "share": 30}),
        )
        .await
        .ok();
    assert_eq!(put["canary"]["share"], 30);
    assert_eq!(put["canary"]["control"]["depVersion"], "1.0.0");
    assert_eq!(put["canary"]["rollback"]["minMessages"], 50);
    let users: Vec<String> = (0..60).map(|u| format!("user-{u}")).collect();
    for _ in 0..2 {
        for u in &users {
            say(&api, &channel, u).await;
        }
    }
    let served = versions_by_user(&api, &admin, &pid).await;
    assert_eq!(served.len(), users.len());
    let mut on_canary = 0;
    for u in &users {
        let expected = if bucket(&env, u) < 30 {
            "1.0.1"
        } else {
            "1.0.0"
        };
        let got: Vec<&str> = served[u].iter().map(String::as_str).collect();
        assert_eq!(got, [expected], "{u} was served {got:?}");
        on_canary += usize::from(expected == "1.0.1");
    }
    // The figures count every message by the version that served it.
    server
        .live
        .evaluate_canaries(botbox_store::now_ms() + 1)
        .await
        .unwrap();
    let c = canary_of(&api, &admin, &pid, &env).await["canary"].clone();
    assert_eq!(c["messages"], 2 * on_canary);
    assert_eq!(c["control"]["messages"], 2 * (users.len() - on_canary));
    assert_eq!(
        (c["errorRate"].as_f64(), c["fallbackRate"].as_f64()),
        (Some(0.0), Some(0.0))
    );
}

/// Over 1,000 users, a 30 % canary gets 30 % of them within 5 points, and raising the share
/// keeps every user the canary had.
#[test]
fn the_share_holds_over_a_thousand_users_and_grows_without_moving_anyone_back() {
    let users: Vec<String> = (0..1000).map(|u| format!("+62-811-{u:06}")).collect();
    let on = |share: u64| -> BTreeSet<&String> {
        users
            .iter()
            .filter(|u| bucket("env-prod", u) < share)
            .collect()
    };
    let (thirty, fifty) = (on(30), on(50));
    assert!((250..=350).contains(&thirty.len()), "{}", thirty.len());
    assert!(thirty.is_subset(&fifty));
}

async fn a_canary_that_errs_rolls_itself_back(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env, channel) = two_versions(&api, &admin, bot("v2", true)).await;
    api.put(
        &format!("/projects/{pid}/environments/{env}/canary"),
        &admin,
        json!({"depVersion": "1.0.1", "share": 50,
            "rollback": {"maxErrorRate": 0.05, "maxFallbackIncrease": 0.5, "minMessages": 10}}),
    )
    .await
    .ok();
    // The canary's first user speaks first: before the rollback, whenever it comes.
    let mut users: Vec<String> = (0..40).map(|u| format!("u{u}")).collect();
    let first = users.iter().position(|u| bucket(&env, u) < 50).unwrap();
    let canary_user = users.remove(first);
    users.insert(0, canary_user.clone());
    for u in &users {
        say(&api, &channel, u).await;
    }
    // Counted now (the server's own pass, every few seconds, may come first).
    let e = poll_until("the canary to roll back", || {
        let (live, api, admin, pid, env) = (
            server.live.clone(),
            api.clone(),
            admin.clone(),
            pid.clone(),
            env.clone(),
        );
        async move {
            live.evaluate_canaries(botbox_store::now_ms() + 1)
                .await
                .unwrap();
            let e = canary_of(&api, &admin, &pid, &env).await;
            match e["lastCanary"]["outcome"].as_str() {
                Some("rolled back") => Ok(e),
                _ => Err(e.to_string()),
            }
        }
    })
    .await;
    assert!(e.get("canary").is_none(), "{e}");
    assert_eq!(e["lastCanary"]["endedBy"], "system");
    assert_contains(&s(&e["lastCanary"]["reason"]), "error rate 100.0 %");
    assert_eq!(e["depVersion"], "1.0.0");
    // Its users are back on the control at their next message.
    say(&api, &channel, &canary_user).await;
    let t = api
        .get(
            &format!("/projects/{pid}/transcripts?environment=production&user={canary_user}"),
            &admin,
        )
        .await
        .ok();
    let served: Vec<String> = t["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["direction"] == "in")
        .map(|l| s(&l["depVersion"]))
        .collect();
    assert_eq!(served, ["1.0.1", "1.0.0"]);
    // The trail says botbox did it, and why.
    let a = api
        .get(
            &format!("/audit?projectId={pid}&action=canary.rollback"),
            &admin,
        )
        .await
        .ok();
    assert_eq!(a["total"], 1, "{a}");
    assert_eq!(a["data"][0]["actor"]["kind"], "system");
    assert_contains(&s(&a["data"][0]["detail"]), "1.0.1: error rate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_is_promoted_or_aborted_by_those_who_may_deploy() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env, _) = two_versions(&api, &admin, bot("v2", false)).await;
    let (_, viewer) = api.user(&admin, "looker", "viewer").await;
    let (_, stranger) = api.user(&admin, "stranger", "developer").await;
    let url = format!("/projects/{pid}/environments/{env}/canary");
    let start = json!({"depVersion": "1.0.1", "share": 10});
    for (body, status, says) in [
        (
            json!({"depVersion": "1.0.0", "share": 10}),
            400,
            "already runs 1.0.0 for everyone",
        ),
        (
            json!({"depVersion": "1.0.1", "share": 0}),
            400,
            "share: the percentage",
        ),
        (
            json!({"depVersion": "9.9.9", "share": 10}),
            400,
            "depVersion: environment production points at deployment version 9.9.9",
        ),
        (
            json!({"depVersion": "1.0.1", "share": 10, "rollback": {"maxErrorRate": 5}}),
            400,
            "rollback.maxErrorRate",
        ),
    ] {
        let r = api.put(&url, &admin, body).await;
        assert_eq!(r.status, status, "{}", r.text);
        assert_contains(&r.text, says);
    }
    assert_eq!(api.put(&url, &viewer, start.clone()).await.status, 404);
    assert_eq!(api.put(&url, &stranger, start.clone()).await.status, 404);
    api.put(&url, &admin, start.clone()).await.ok();
    // A rollout's next step: the same version with a larger share.
    let e = api
        .put(&url, &admin, json!({"depVersion": "1.0.1", "share": 40}))
        .await
        .ok();
    assert_eq!(e["canary"]["share"], 40);
    // The environment is not moved to the canary's version behind its back: that is a
    // promotion.
    let moved = api
        .put(
            &format!("/projects/{pid}/environments/{env}"),
            &admin,
            json!({"depVersion": "1.0.1"}),
        )
        .await;
    assert_eq!(moved.status, 409, "{}", moved.text);
    assert_contains(&moved.text, "promote it");
    // The canary's version cannot be deleted while it runs.
    let del = api
        .delete(
            &format!("/projects/{pid}/deployment/versions/1.0.1"),
            &admin,
        )
        .await;
    assert_eq!(del.status, 409, "{}", del.text);
    let e = api.delete(&url, &admin).await.ok();
    assert_eq!(
        (e["lastCanary"]["outcome"].clone(), e["depVersion"].clone()),
        (json!("aborted"), json!("1.0.0"))
    );
    assert!(e.get("canary").is_none());
    assert_eq!(api.delete(&url, &admin).await.status, 409);
    api.put(&url, &admin, start).await.ok();
    let e = api
        .post(&format!("{url}/promote"), &admin, json!({}))
        .await
        .ok();
    assert_eq!(e["lastCanary"]["outcome"], "promoted");
    assert_eq!(e["depVersion"], "1.0.1");
    assert_eq!(e["lastCanary"]["endedBy"], "admin");
    // A rollback ends a canary it would make pointless.
    api.put(&url, &admin, json!({"depVersion": "1.0.0", "share": 10}))
        .await
        .ok();
    let old = api
        .get(
            &format!("/projects/{pid}/deployment/versions/1.0.0"),
            &admin,
        )
        .await
        .ok();
    api.post(
        &format!("/deployments/{}/rollback", s(&old["id"])),
        &admin,
        json!({}),
    )
    .await
    .ok();
    let e = canary_of(&api, &admin, &pid, &env).await;
    assert_eq!(
        (e["depVersion"].clone(), e["lastCanary"]["outcome"].clone()),
        (json!("1.0.0"), json!("aborted"))
    );
    assert_contains(&s(&e["lastCanary"]["reason"]), "rolled back to 1.0.0");
    assert!(e.get("canary").is_none(), "{e}");
}

/// Two replicas on one PostgreSQL database: whichever receives a user's message, the user
/// gets the same version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_agree_on_who_gets_the_canary() {
    if crate::common::postgres_skipped("replicas_agree_on_who_gets_the_canary").await {
        return;
    }
    let servers = Server::start_together(2, &[]).await;
    let (a, b) = (servers[0].api(), servers[1].api());
    let admin = a.admin_token().await;
    let (pid, env, channel) = two_versions(&a, &admin, bot("v2", false)).await;
    a.put(
        &format!("/projects/{pid}/environments/{env}/canary"),
        &admin,
        json!({"depVersion": "1.0.1", "share": 50}),
    )
    .await
    .ok();
    let users: Vec<String> = (0..20).map(|u| format!("r{u}")).collect();
    for u in &users {
        say(&a, &channel, u).await;
        say(&b, &channel, u).await;
    }
    let served = versions_by_user(&a, &admin, &pid).await;
    for u in &users {
        let expected = if bucket(&env, u) < 50 {
            "1.0.1"
        } else {
            "1.0.0"
        };
        assert_eq!(served[u].iter().collect::<Vec<_>>(), [expected], "{u}");
    }
}
