//! The audit trail: every change attributed to who made it, from where, with its outcome;
//! each person reads only what concerns them; nothing in it can be changed through the API.

use crate::common::{Api, Backend, InProcess, example_bot, login_attempt, s, set_role};
use serde_json::{Value, json};

on_both_backends!(changes_are_attributed_and_each_reader_sees_their_share);

/// The entries `token` may read, with `query` (`projectId=…&action=…`), newest first.
async fn trail(api: &Api, token: &str, query: &str) -> Vec<Value> {
    let r = api
        .get(&format!("/audit?limit=1000&{query}"), token)
        .await
        .ok();
    r["data"].as_array().unwrap().clone()
}

fn actions(entries: &[Value]) -> Vec<String> {
    entries.iter().map(|e| s(&e["action"])).collect()
}

/// What the cast did, in order: dev1 makes `shop` and pushes; dev2 makes a `shop` of their
/// own; the administrator pushes into dev1's `shop` by its id; a team's viewer tries to
/// deploy and is refused; someone fails to sign in as dev1.
async fn changes_are_attributed_and_each_reader_sees_their_share(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (dev1_id, dev1) = api.user(&admin, "dev1", "developer").await;
    let (dev2_id, dev2) = api.user(&admin, "dev2", "developer").await;
    let (_, ta) = api.user(&admin, "ta", "developer").await;
    let (tv_id, tv) = api.user(&admin, "tv", "developer").await;
    let (td_id, td) = api.user(&admin, "td", "developer").await;
    let shop = |token: String, team: Option<String>| {
        let api = api.clone();
        async move {
            let mut body = json!({"name": "shop", "options": {"bot": true}});
            if let Some(t) = team {
                body["teamId"] = json!(t);
            }
            s(&api.post("/projects", &token, body).await.ok()["id"])
        }
    };
    let p1 = shop(dev1.clone(), None).await;
    let p2 = shop(dev2.clone(), None).await;
    let acme = s(&api.post("/teams", &ta, json!({"name": "acme"})).await.ok()["id"]);
    set_role(&api, &acme, &tv_id, &ta, "viewer").await.ok();
    set_role(&api, &acme, &td_id, &ta, "developer").await.ok();
    let team_shop = shop(ta.clone(), Some(acme.clone())).await;
    let push = |token: String, pid: String| {
        let api = api.clone();
        async move {
            api.post(
                &format!("/projects/{pid}/bot/revisions"),
                &token,
                example_bot("hello"),
            )
            .await
            .ok()
        }
    };
    push(dev1.clone(), p1.clone()).await;
    let admins = push(admin.clone(), p1.clone()).await;
    push(td.clone(), team_shop.clone()).await;
    let refused = api
        .post(
            &format!("/projects/{team_shop}/deployment/versions"),
            &tv,
            json!({"version": "1.0.0", "botRevision": "x"}),
        )
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        login_attempt(&api, "dev1", "not-the-password").await.status,
        401
    );

    // dev1 sees the administrator's push into dev1's project, by name, and the failed
    // sign-in on dev1's account; the revision says who pushed it.
    let mine = trail(&api, &dev1, &format!("projectId={p1}")).await;
    assert_eq!(actions(&mine), ["bot.push", "bot.push", "project.create"]);
    assert_eq!(mine[0]["actor"]["name"], "admin");
    assert_eq!(
        mine[0]["resource"],
        json!({"kind": "revision", "id": admins["revision"]})
    );
    assert_eq!(
        (mine[0]["outcome"].clone(), mine[0]["ownerId"].clone()),
        (json!("ok"), json!(dev1_id))
    );
    let revs = api
        .get(&format!("/projects/{p1}/bot/revisions"), &dev1)
        .await
        .ok();
    assert_eq!(revs["data"][0]["pushedBy"], "admin", "{revs}");
    let logins = trail(&api, &dev1, "action=login").await;
    assert_eq!(logins.len(), 2, "{logins:?}");
    assert_eq!(logins[0]["outcome"], "refused");

    // dev2 sees nothing of dev1's project of the same name, and their own; a probe of
    // dev1's project is dev2's entry, without whose project it is.
    assert!(
        trail(&api, &dev2, &format!("projectId={p1}"))
            .await
            .is_empty()
    );
    let probe = api
        .put(&format!("/projects/{p1}"), &dev2, json!({"label": "x"}))
        .await;
    assert_eq!(probe.status, 404);
    let probes = trail(&api, &dev2, "action=project.update").await;
    assert_eq!(probes.len(), 1, "{probes:?}");
    assert_eq!(probes[0]["outcome"], "refused");
    assert!(
        probes[0].get("projectId").is_none() && probes[0].get("ownerId").is_none(),
        "{probes:?}"
    );
    let owners_view = trail(&api, &dev1, "action=project.update").await;
    assert_eq!(
        (owners_view.len(), owners_view[0]["actor"]["name"].clone()),
        (1, json!("dev2"))
    );
    let theirs = trail(&api, &dev2, "").await;
    assert!(
        theirs
            .iter()
            .all(|e| e["actor"]["id"] == json!(dev2_id) || e["ownerId"] == json!(dev2_id)),
        "{theirs:?}"
    );
    assert!(actions(&theirs).contains(&"project.create".to_owned()));
    assert!(theirs.iter().any(|e| e["projectId"] == json!(p2)));

    // The teamAdmin sees the team project's entries, the viewer's refusal among them; the
    // team's developer only their own actions; the viewer only their own refusal.
    let team = trail(&api, &ta, &format!("projectId={team_shop}")).await;
    assert_eq!(
        actions(&team),
        ["deployment.create", "bot.push", "project.create"]
    );
    assert_eq!(
        (team[0]["outcome"].clone(), team[0]["actor"]["name"].clone()),
        (json!("refused"), json!("tv"))
    );
    // (Their accounts' creation is about them: they see it too.)
    let td_sees = trail(&api, &td, "").await;
    assert_eq!(actions(&td_sees), ["bot.push", "login", "user.create"]);
    assert!(
        td_sees
            .iter()
            .all(|e| e["actor"]["id"] == json!(td_id) || e["ownerId"] == json!(td_id)),
        "{td_sees:?}"
    );
    let tv_sees = trail(&api, &tv, "").await;
    assert_eq!(
        actions(&tv_sees),
        ["deployment.create", "login", "user.create"]
    );

    // The administrator sees everything; filters narrow it.
    let all = trail(&api, &admin, "").await;
    assert!(all.len() >= 12, "{}", all.len());
    assert!(trail(&api, &admin, "actor=nobody").await.is_empty());
    assert_eq!(
        trail(&api, &admin, &format!("actor={td_id}")).await.len(),
        2
    );
    let later = trail(
        &api,
        &admin,
        &format!("since={}", botbox_store::now_ms() + 60_000),
    )
    .await;
    assert!(later.is_empty());
    assert_eq!(api.get("/audit?since=yesterday", &admin).await.status, 400);

    // No route changes or deletes an entry.
    for method in ["PUT", "DELETE", "POST"] {
        let r = api
            .call(method, "/audit", Some(&admin), Some(&json!({})))
            .await;
        assert_eq!(r.status, 405, "{method} /audit: {}", r.text);
    }
}

/// A workspace key's changes are the key's, named with its owner, and a key cannot read the
/// trail (it is for people).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_changes_name_the_key_and_its_owner() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (dev_id, dev) = api.user(&admin, "dev", "developer").await;
    let key = s(&api
        .post(
            &format!("/teams/{dev_id}/keys"),
            &dev,
            json!({"name": "ci"}),
        )
        .await
        .ok()["key"]);
    let pid = s(&api
        .post(
            "/projects",
            &key,
            json!({"name": "from-ci", "options": {"bot": true}}),
        )
        .await
        .ok()["id"]);
    let rev = s(&api
        .post(
            &format!("/projects/{pid}/bot/revisions"),
            &key,
            example_bot("hello"),
        )
        .await
        .ok()["revision"]);
    let d = api
        .post(
            &format!("/projects/{pid}/deployment/versions"),
            &key,
            json!({"version": "1.0.0", "botRevision": rev}),
        )
        .await
        .ok();
    assert_eq!(d["deployedBy"], "key:ci (user dev)");
    let e = trail(
        &api,
        &dev,
        &format!("projectId={pid}&action=deployment.create"),
    )
    .await;
    assert_eq!(
        e[0]["actor"],
        json!({"kind": "key", "id": e[0]["actor"]["id"], "name": "key:ci (user dev)", "owner": dev_id})
    );
    assert_eq!(e[0]["detail"], format!("1.0.0: bot revision {rev}"));
    assert_eq!(api.get("/audit", &key).await.status, 403);
}
