//! The CMS through the project API: a project made with `options.cms` starts with an empty
//! revision, documents are validated with every problem at its place, each publish is a new
//! immutable revision, deployments bind one (the latest unless named), and revisions count
//! toward the owner's storage.

use crate::common::{Api, Backend, InProcess, one_state_bot, s};
use serde_json::{Value, json};

on_both_backends!(cms_revisions_are_published_listed_and_bound_to_deployments);

/// A server in-process and the administrator's token.
async fn signed_in(backend: Backend) -> (InProcess, Api, String) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    (server, api, admin)
}

/// What the caller's tenant stores of CMS revisions (`GET /storage`'s kind).
async fn stored_cms(api: &Api, token: &str) -> Value {
    let storage = api.get("/storage", token).await.ok();
    let kinds = storage["kinds"].as_array().unwrap();
    kinds
        .iter()
        .find(|k| k["kind"] == "cms_revisions")
        .cloned()
        .unwrap()
}

/// A new project `name` with `options`, as `POST /projects` answers it.
async fn create(api: &Api, token: &str, name: &str, options: Value) -> Value {
    api.post(
        "/projects",
        token,
        json!({"name": name, "options": options}),
    )
    .await
    .ok()
}

async fn cms_revisions_are_published_listed_and_bound_to_deployments(backend: Backend) {
    let (_server, api, admin) = signed_in(backend).await;
    let p = create(&api, &admin, "content", json!({"bot": true, "cms": true})).await;
    let pid = s(&p["id"]);
    let initial = s(&p["cmsLatestRevision"]);
    assert_eq!(initial.len(), 40, "{p}");
    let latest = api.get(&format!("/projects/{pid}/cms"), &admin).await.ok();
    assert_eq!(latest["revision"], initial.as_str());
    assert_eq!(latest["pages"], json!({}));

    // Every problem at its page, form and element; nothing is stored.
    let bad = api
        .post(
            &format!("/projects/{pid}/cms/revisions"),
            &admin,
            json!({"pages": {"home": {"greeting": {
                "text": {"type": "video", "value": "x"},
                "size": {"type": "slider", "value": 11, "min": 0, "max": 10}
            }}}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.text
            .contains("pages.home.greeting.text: unknown type \"video\"")
            && bad.text.contains(
                "pages.home.greeting.size: the value 11 is outside the slider's range 0 to 10"
            ),
        "{}",
        bad.text
    );
    assert_eq!(
        api.get(&format!("/projects/{pid}/cms/revisions"), &admin)
            .await
            .ok()["total"],
        1
    );

    let doc = json!({
        "pages": {"home": {"greeting": {"text": {"type": "text", "value": "Welcome!"}}}},
        "faqs": {"hours": {"questions": ["when are you open"], "answers": ["9 to 5"]}},
        "changelog": "the greeting"
    });
    let v1 = api
        .post(
            &format!("/projects/{pid}/cms/revisions"),
            &admin,
            doc.clone(),
        )
        .await
        .ok();
    let r1 = s(&v1["revision"]);
    assert_eq!(v1["changelog"], "the greeting");
    assert_eq!(v1["publishedBy"], "admin");
    assert_eq!(v1["pages"], doc["pages"]);
    // The same content again is a revision of its own.
    let r2 = s(&api
        .post(
            &format!("/projects/{pid}/cms/revisions"),
            &admin,
            doc.clone(),
        )
        .await
        .ok()["revision"]);
    assert_ne!(r1, r2);
    let list = api
        .get(&format!("/projects/{pid}/cms/revisions"), &admin)
        .await
        .ok();
    let ids: Vec<String> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| s(&r["revision"]))
        .collect();
    assert_eq!(ids, [r2.clone(), r1.clone(), initial.clone()]);
    let one = api
        .get(&format!("/projects/{pid}/cms/revisions/{r1}"), &admin)
        .await
        .ok();
    assert_eq!(one["faqs"], doc["faqs"]);
    assert_eq!(
        api.get(&format!("/projects/{pid}"), &admin).await.ok()["cmsLatestRevision"],
        r2.as_str()
    );

    // Deployments: the latest unless one is named; a revision of nothing is refused.
    let bot =
        one_state_bot(json!({"end": true, "action": {"name": "text", "options": {"text": "hi"}}}));
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), &admin, bot)
        .await
        .ok()["revision"]);
    let versions = format!("/projects/{pid}/deployment/versions");
    let d = api
        .post(
            &versions,
            &admin,
            json!({"version": "1.0.0", "botRevision": rev}),
        )
        .await
        .ok();
    assert_eq!(d["cmsRevision"], r2.as_str());
    let d = api
        .post(
            &versions,
            &admin,
            json!({"version": "1.0.1", "botRevision": rev, "cmsRevision": r1}),
        )
        .await
        .ok();
    assert_eq!(d["cmsRevision"], r1.as_str());
    let refused = api
        .post(
            &versions,
            &admin,
            json!({"version": "1.0.2", "botRevision": rev, "cmsRevision": "nope"}),
        )
        .await;
    assert_eq!(refused.status, 400);
    assert!(
        refused
            .text
            .contains("cmsRevision: nope is not a CMS revision"),
        "{}",
        refused.text
    );
    let refused = api
        .put(
            &format!("{versions}/1.0.1"),
            &admin,
            json!({"cmsRevision": "nope"}),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);

    // Another project's revision is not this one's.
    let other = create(&api, &admin, "other", json!({"bot": true, "cms": true})).await;
    let other = s(&other["cmsLatestRevision"]);
    let refused = api
        .post(
            &versions,
            &admin,
            json!({"version": "1.0.3", "botRevision": rev, "cmsRevision": other}),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(
        api.get(&format!("/projects/{pid}/cms/revisions/{other}"), &admin)
            .await
            .status,
        404
    );

    // Revisions count toward storage.
    let cms = stored_cms(&api, &admin).await;
    assert_eq!(cms["rows"], 4, "three of this project, one of the other");
    assert!(cms["bytes"].as_i64().unwrap() > 0);

    // A project without a CMS answers an empty revision, as clients expect.
    let plain = s(&create(&api, &admin, "plain", json!({"bot": true})).await["id"]);
    assert_eq!(
        api.get(&format!("/projects/{plain}/cms"), &admin)
            .await
            .ok()["revision"],
        ""
    );
    // Deleting a project deletes its revisions.
    api.delete(&format!("/projects/{pid}"), &admin).await.ok();
    let cms = stored_cms(&api, &admin).await;
    assert_eq!(cms["rows"], 1, "the other project's initial revision");
}

on_both_backends!(a_new_project_answers_the_revisions_it_starts_with);

/// `POST /projects` answers the revisions it made: the bot's empty first one, the NLU's
/// initial one and the CMS's, each the one its `GET` lists.
async fn a_new_project_answers_the_revisions_it_starts_with(backend: Backend) {
    let (_server, api, admin) = signed_in(backend).await;
    let options = json!({"bot": true, "nlu": true, "cms": true});
    let p = create(&api, &admin, "everything", options).await;
    let pid = s(&p["id"]);
    for field in [
        "botLatestRevision",
        "nluLatestRevision",
        "cmsLatestRevision",
    ] {
        assert!(
            p[field].as_str().is_some_and(|r| !r.is_empty()),
            "{field}: {p}"
        );
    }
    assert_eq!(api.get(&format!("/projects/{pid}"), &admin).await.ok(), p);
    let cms = api.get(&format!("/projects/{pid}/cms"), &admin).await.ok();
    assert_eq!(cms["revision"], p["cmsLatestRevision"]);
}
