//! The project API, once on SQLite and once on PostgreSQL. Its logic (projects, bots,
//! deployments, environments and channels, revisions, teams, the authorisation matrix,
//! refused input, the rate limit) runs in-process against the router ([`InProcess`]: every
//! service wired as `botbox serve` wires it, no socket); what needs the real `botbox serve`
//! (the first start, its log, readiness, clients behind a trusted proxy) goes over HTTP.

use crate::common;

use crate::common::{
    Api, Backend, InProcess, Res, Server, assert_contains, example_bot, login_attempt, set_role,
};
use serde_json::{Value, json};

on_both_backends!(
    // Projects, bots, deployments, environments and channels.
    a_project_created_at_the_trailing_slash_path_keeps_its_options,
    a_bot_project_starts_with_an_empty_revision_0_0_0,
    the_initial_empty_revision_cannot_be_deployed,
    a_revision_pushed_without_a_version_gets_the_next_patch,
    a_pushed_revision_becomes_the_projects_latest,
    a_project_update_keeps_the_servers_fields,
    a_draft_saved_again_keeps_its_id_and_takes_the_new_content,
    a_deleted_draft_is_gone,
    a_deployment_version_is_named_after_its_project_and_keeps_its_revision,
    a_deployment_of_an_unknown_revision_is_refused,
    a_deployment_version_cannot_be_created_twice,
    a_deployment_without_a_version_gets_the_next_patch_and_is_current,
    deployment_versions_are_listed_by_page,
    an_environment_starts_on_its_version_with_no_channels,
    a_version_an_environment_runs_cannot_be_deleted,
    an_environment_moved_to_another_version_frees_the_old_one,
    a_channel_of_every_type_answers_with_its_options_and_webhook_url,
    channels_are_listed_by_page,
    a_channel_update_parses_string_options_and_keeps_absent_fields,
    a_deleted_channel_is_gone_from_its_environment,
    deleting_an_environment_deletes_its_channels,
    me_names_the_user_and_their_permissions,
    a_logged_out_token_is_refused,
    // Who may do what.
    each_caller_gets_what_its_role_allows_on_every_project_route,
    the_project_list_shows_each_caller_only_its_teams_projects,
    a_viewer_or_a_caller_without_a_valid_token_cannot_create_projects,
    ids_of_another_project_never_match_under_this_one,
    // Revisions, teams, refused input and limits.
    revisions_are_validated_and_immutable,
    nlus_that_cannot_run_are_named_at_push,
    only_a_team_admin_adds_members,
    a_team_token_makes_the_teams_projects,
    a_team_goes_only_empty_and_by_its_admin,
    bad_input_changes_nothing,
    the_other_documented_errors_have_their_bodies,
    rate_limit,
    servers_starting_together_create_one_admin,
);

/// POSTs `body` to project `pid`'s deployment versions.
async fn post_version(api: &Api, pid: &str, token: &str, body: Value) -> Res {
    api.post(&format!("/projects/{pid}/deployment/versions"), token, body)
        .await
}

/// An in-process server and the admin's project `p`: (the server, its API, the admin's
/// token, the project's id).
async fn admin_project(backend: Backend) -> (InProcess, Api, String, String) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let pid = s(&api
        .post("/projects", &admin, json!({"name": "p"}))
        .await
        .ok()["id"]);
    (server, api, admin, pid)
}

/// An in-process server with alice, a developer: (the server, its API, the admin's token,
/// alice's id and token).
async fn with_alice(backend: Backend) -> (InProcess, Api, String, (String, String)) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let alice = api.user(&admin, "alice", "developer").await;
    (server, api, admin, alice)
}

/// The ids of a list's `data`.
fn ids_of(list: &Value) -> Vec<Value> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].clone())
        .collect()
}

fn s(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}

/// A project with a pushed pizza bot, a deployment 1.0.0, an environment and a channel.
struct Fixture {
    project: String,
    revision: String,
    env: String,
    channel: String,
}

async fn fixture(api: &Api, token: &str, name: &str) -> Fixture {
    let post = |path: String, body: Value| async move { api.post(&path, token, body).await.ok() };
    let p = post(
        "/projects".into(),
        json!({"name": name, "options": {"bot": true}}),
    )
    .await;
    let project = s(&p["id"]);
    let bot = post(
        format!("/projects/{project}/bot/revisions"),
        example_bot("pizza"),
    )
    .await;
    let revision = s(&bot["revision"]);
    post_version(
        api,
        &project,
        token,
        json!({"version": "1.0.0", "botRevision": revision, "modules": null}),
    )
    .await
    .ok();
    let e = post(
        format!("/projects/{project}/environments"),
        json!({"depId": project, "depVersion": "1.0.0", "name": "Production", "slug": "production"}),
    )
    .await;
    let env = s(&e["id"]);
    let c = post(
        format!("/projects/{project}/environments/{env}/channels"),
        json!({"name": "web", "type": "generic", "url": "http://127.0.0.1:9/hook", "options": {"secret": "s3"}}),
    )
    .await;
    Fixture {
        project,
        revision,
        env,
        channel: s(&c["id"]),
    }
}

/// Alice (a developer) and her bot project `pizza`, created through the documented
/// trailing-slash path with every option set.
struct Pizza {
    server: InProcess,
    api: Api,
    alice: String,
    pid: String,
    /// The project as its creation answered it.
    created: Value,
}

async fn pizza(backend: Backend) -> Pizza {
    let (server, api, _, (_, alice)) = with_alice(backend).await;
    let created = api
        .post(
            "/projects/",
            &alice,
            json!({"name": "pizza", "options": {"bot": true, "nlu": true, "timezone": 7, "nluVisibility": "public", "nluLang": "id"}}),
        )
        .await
        .ok();
    Pizza {
        pid: s(&created["id"]),
        server,
        api,
        alice,
        created,
    }
}

impl Pizza {
    /// `rest` under the project's path.
    fn at(&self, rest: &str) -> String {
        format!("/projects/{}{rest}", self.pid)
    }
    async fn get(&self, rest: &str) -> Res {
        self.api.get(&self.at(rest), &self.alice).await
    }
    async fn post(&self, rest: &str, body: Value) -> Res {
        self.api.post(&self.at(rest), &self.alice, body).await
    }
    async fn put(&self, rest: &str, body: Value) -> Res {
        self.api.put(&self.at(rest), &self.alice, body).await
    }
    async fn delete(&self, rest: &str) -> Res {
        self.api.delete(&self.at(rest), &self.alice).await
    }

    /// Pushes the pizza example bot; its revision.
    async fn push(&self) -> String {
        s(&self.post("/bot/revisions", example_bot("pizza")).await.ok()["revision"])
    }

    /// POSTs `body` to the project's deployment versions.
    async fn version(&self, body: Value) -> Res {
        post_version(&self.api, &self.pid, &self.alice, body).await
    }

    /// Pushes the bot and deploys it as 1.0.0; its revision.
    async fn deployed(&self) -> String {
        let rev = self.push().await;
        self.version(json!({"version": "1.0.0", "botRevision": rev, "modules": null}))
            .await
            .ok();
        rev
    }

    /// Creates environment Production on version 1.0.0 (deployed before); its answer.
    async fn environment(&self) -> Value {
        self.post(
            "/environments",
            json!({"depId": self.pid, "depVersion": "1.0.0", "name": "Production", "slug": "production"}),
        )
        .await
        .ok()
    }

    /// [`Pizza::environment`] of the bot deployed as 1.0.0.
    async fn production(&self) -> Value {
        self.deployed().await;
        self.environment().await
    }
}

async fn a_project_created_at_the_trailing_slash_path_keeps_its_options(backend: Backend) {
    let p = pizza(backend).await;
    assert_eq!(p.created["options"]["nluId"], "alice:pizza");
    assert_eq!(p.created["options"]["timezone"], 7.0);
}

async fn a_bot_project_starts_with_an_empty_revision_0_0_0(backend: Backend) {
    let p = pizza(backend).await;
    let initial = s(&p.created["botLatestRevision"]);
    let empty = p.get("/bot").await.ok();
    assert_eq!(empty["revision"], initial.as_str());
    assert_eq!(empty["version"], "0.0.0");
    assert_eq!(empty["flows"], json!({}));
}

async fn the_initial_empty_revision_cannot_be_deployed(backend: Backend) {
    let p = pizza(backend).await;
    let initial = s(&p.created["botLatestRevision"]);
    let refused = p.version(json!({"botRevision": initial})).await;
    assert_eq!(refused.status, 400);
    assert_contains(&refused.text, "initial empty revision");
}

async fn a_revision_pushed_without_a_version_gets_the_next_patch(backend: Backend) {
    let p = pizza(backend).await;
    let bot = p.post("/bot/revisions", example_bot("pizza")).await.ok();
    assert_eq!(bot["id"], p.pid.as_str());
    assert_eq!(
        bot["version"], "0.0.1",
        "a missing version becomes the next patch"
    );
}

async fn a_pushed_revision_becomes_the_projects_latest(backend: Backend) {
    let p = pizza(backend).await;
    let rev = p.push().await;
    assert_eq!(p.get("").await.ok()["botLatestRevision"], rev.as_str());
    let latest = p.get("/bot/").await.ok();
    assert_eq!(
        latest["revision"],
        rev.as_str(),
        "GET /bot carries the revision (kata-cli's push reads it)"
    );
    assert_eq!(latest["flows"], example_bot("pizza")["flows"]);
}

async fn a_project_update_keeps_the_servers_fields(backend: Backend) {
    let p = pizza(backend).await;
    let rev = p.push().await;
    let updated = p
        .put(
            "",
            json!({"label": "Pizza bot", "options": {"timezone": 8}, "botLatestRevision": "forged"}),
        )
        .await
        .ok();
    assert_eq!(updated["label"], "Pizza bot");
    assert_eq!(updated["options"]["timezone"], 8.0);
    assert_eq!(updated["options"]["nluVisibility"], "public");
    assert_eq!(updated["botLatestRevision"], rev.as_str());
}

async fn a_draft_saved_again_keeps_its_id_and_takes_the_new_content(backend: Backend) {
    let p = pizza(backend).await;
    assert_eq!(p.get("/bot/draft").await.status, 404);
    let d1 = p.put("/bot/draft", json!({"flows": {"a": 1}})).await.ok();
    let d2 = p.put("/bot/draft", json!({"flows": {"a": 2}})).await.ok();
    assert_eq!(d1["draftId"], d2["draftId"]);
    assert_eq!(p.get("/bot/draft").await.ok(), json!({"flows": {"a": 2}}));
}

async fn a_deleted_draft_is_gone(backend: Backend) {
    let p = pizza(backend).await;
    let d = p.put("/bot/draft", json!({"flows": {"a": 1}})).await.ok();
    assert_eq!(p.delete("/bot/draft").await.ok()["draftId"], d["draftId"]);
    assert_eq!(p.get("/bot/draft").await.status, 404);
}

async fn a_deployment_version_is_named_after_its_project_and_keeps_its_revision(backend: Backend) {
    let p = pizza(backend).await;
    let rev = p.push().await;
    let d = p
        .version(json!({"version": "1.0.0", "botRevision": rev, "modules": null}))
        .await
        .ok();
    assert_eq!(d["name"], format!("{}~1.0.0", p.pid));
    assert_eq!(d["botId"], p.pid.as_str());
    assert_eq!(d["modules"], Value::Null);
    assert_eq!(
        p.get("/deployment/versions/1.0.0").await.ok()["botRevision"],
        rev.as_str()
    );
}

async fn a_deployment_of_an_unknown_revision_is_refused(backend: Backend) {
    let p = pizza(backend).await;
    let unknown = p
        .version(json!({"version": "1.0.1", "botRevision": "nope"}))
        .await;
    assert_eq!(unknown.status, 400);
    assert_contains(&unknown.text, "botRevision: project");
}

async fn a_deployment_version_cannot_be_created_twice(backend: Backend) {
    let p = pizza(backend).await;
    let rev = p.deployed().await;
    let dup = p
        .version(json!({"version": "1.0.0", "botRevision": rev}))
        .await;
    assert_eq!(dup.status, 409, "{}", dup.text);
}

async fn a_deployment_without_a_version_gets_the_next_patch_and_is_current(backend: Backend) {
    let p = pizza(backend).await;
    let rev = p.deployed().await;
    let d = p.version(json!({"botRevision": rev})).await.ok();
    assert_eq!(d["version"], "1.0.1");
    assert_eq!(p.get("/deployment/").await.ok()["version"], "1.0.1");
}

async fn deployment_versions_are_listed_by_page(backend: Backend) {
    let p = pizza(backend).await;
    let rev = p.deployed().await;
    p.version(json!({"botRevision": rev})).await.ok();
    let list = p.get("/deployment/versions?limit=1&page=2").await.ok();
    // The project's id and the bot's revision are named where they appear.
    let filters = vec![(p.pid.as_str(), "[project]"), (rev.as_str(), "[revision]")];
    insta::with_settings!({filters => filters}, {
        insta::assert_json_snapshot!("deployment_versions_page_2_of_2", list, {
            ".data[].id" => "[id]",
            ".data[].nluRevision" => "[nlu revision]",
        });
    });
}

async fn an_environment_starts_on_its_version_with_no_channels(backend: Backend) {
    let p = pizza(backend).await;
    let e = p.production().await;
    assert_eq!(e["depId"], p.pid.as_str());
    assert_eq!(e["depVersion"], "1.0.0");
    assert_eq!(e["channels"], json!([]));
}

async fn a_version_an_environment_runs_cannot_be_deleted(backend: Backend) {
    let p = pizza(backend).await;
    p.production().await;
    let in_use = p.delete("/deployment/versions/1.0.0").await;
    assert_eq!(in_use.status, 409);
    assert_contains(&in_use.text, "Production");
}

async fn an_environment_moved_to_another_version_frees_the_old_one(backend: Backend) {
    let p = pizza(backend).await;
    let rev = p.deployed().await;
    let eid = s(&p.environment().await["id"]);
    p.version(json!({"botRevision": rev})).await.ok();
    let e = p
        .put(
            &format!("/environments/{eid}"),
            json!({"depVersion": "1.0.1"}),
        )
        .await
        .ok();
    assert_eq!(e["deploymentVersion"], "1.0.1");
    assert_eq!(e["deploymentId"], p.pid.as_str());
    p.delete("/deployment/versions/1.0.0").await.ok();
    let envs = p.get("/environments").await.ok();
    assert_eq!(envs["total"], 1);
    assert_eq!(envs["data"][0]["slug"], "production");
}

/// The ten channel types.
const CHANNEL_TYPES: [&str; 10] = [
    "generic",
    "line",
    "fbmessenger",
    "telegram",
    "twitter",
    "slack",
    "spark",
    "bbm",
    "qiscus",
    "whatsapp",
];

/// Alice's project with environment Production and a channel of each type (`ch-<type>`,
/// in [`CHANNEL_TYPES`]' order), options given as an object and as a JSON string in turn.
struct Channels {
    p: Pizza,
    env: String,
    /// The channels' path.
    path: String,
    /// Each creation's answer.
    created: Vec<Value>,
}

async fn channels(backend: Backend) -> Channels {
    let p = pizza(backend).await;
    let env = s(&p.production().await["id"]);
    let path = p.at(&format!("/environments/{env}/channels"));
    let mut created = vec![];
    for (i, t) in CHANNEL_TYPES.iter().enumerate() {
        let options = json!({"token": format!("tok-{t}"), "secret": "sec"});
        let options = if i % 2 == 0 {
            options
        } else {
            json!(options.to_string())
        };
        let body = json!({"name": format!("ch-{t}"), "type": t, "url": "https://provider.example/api", "rpmLimit": 60, "options": options});
        created.push(p.api.post(&path, &p.alice, body).await.ok());
    }
    Channels {
        p,
        env,
        path,
        created,
    }
}

impl Channels {
    /// The path of the `i`th channel.
    fn at(&self, i: usize) -> String {
        format!("{}/{}", self.path, s(&self.created[i]["id"]))
    }
}

async fn a_channel_of_every_type_answers_with_its_options_and_webhook_url(backend: Backend) {
    let c = channels(backend).await;
    for (t, created) in CHANNEL_TYPES.iter().zip(&c.created) {
        assert_eq!(created["options"]["token"], format!("tok-{t}"));
        assert_eq!(
            created["webhook"],
            format!("{}/webhooks/{}", c.p.server.base, s(&created["id"]))
        );
    }
}

async fn channels_are_listed_by_page(backend: Backend) {
    let c = channels(backend).await;
    let page =
        c.p.api
            .get(&format!("{}?limit=4&page=3", c.path), &c.p.alice)
            .await
            .ok();
    assert_eq!(page["total"], 10);
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
}

async fn a_channel_update_parses_string_options_and_keeps_absent_fields(backend: Backend) {
    let c = channels(backend).await;
    let (api, alice) = (&c.p.api, &c.p.alice);
    let updated = api
        .put(
            &c.at(0),
            alice,
            json!({"options": "{\"token\":\"rotated\"}", "rpmLimit": 10}),
        )
        .await
        .ok();
    assert_eq!(updated["options"], json!({"token": "rotated"}));
    assert_eq!(updated["rpmLimit"], 10);
    assert_eq!(
        updated["name"], "ch-generic",
        "absent fields keep their values"
    );
    assert_eq!(
        api.get(&c.at(0), alice).await.ok()["options"]["token"],
        "rotated"
    );
}

async fn a_deleted_channel_is_gone_from_its_environment(backend: Backend) {
    let c = channels(backend).await;
    let (api, alice) = (&c.p.api, &c.p.alice);
    assert_eq!(api.delete(&c.at(1), alice).await.ok()["type"], "line");
    assert_eq!(api.get(&c.at(1), alice).await.status, 404);
    assert_eq!(api.get(&c.path, alice).await.ok()["total"], 9);
}

async fn deleting_an_environment_deletes_its_channels(backend: Backend) {
    let c = channels(backend).await;
    let gone = c.p.delete(&format!("/environments/{}", c.env)).await.ok();
    assert_eq!(gone["name"], "Production");
    assert_eq!(c.p.api.get(&c.path, &c.p.alice).await.status, 404);
    assert_eq!(c.p.get("/environments").await.ok()["total"], 0);
}

async fn me_names_the_user_and_their_permissions(backend: Backend) {
    let (_server, api, _, (_, alice)) = with_alice(backend).await;
    let me = api.get("/me", &alice).await.ok();
    assert_eq!(me["username"], "alice");
    assert!(
        me["permissions"]
            .as_array()
            .unwrap()
            .contains(&json!("create_own_channels"))
    );
}

async fn a_logged_out_token_is_refused(backend: Backend) {
    let (_server, api, _, (_, alice)) = with_alice(backend).await;
    api.call("POST", "/logout", Some(&alice), None).await.ok();
    assert_eq!(api.get("/me", &alice).await.status, 401);
}

/// Served from the binary, with no storage: one backend is enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_the_main_routes() {
    let server = InProcess::start(Backend::Sqlite).await;
    let doc = server
        .api()
        .call("GET", "/openapi.json", None, None)
        .await
        .ok();
    for path in [
        "/login",
        "/projects",
        "/projects/{projectId}/bot/revisions",
        "/projects/{projectId}/deployment/versions/{version}",
        "/projects/{projectId}/environments/{environmentId}/channels/{channelId}",
        "/teams/{teamId}/users/{userId}",
        "/teams/{team}",
    ] {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} missing from the OpenAPI document"
        );
    }
}

/// Served from the binary, with no storage: one backend is enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_loads_no_remote_assets() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let html = api.call("GET", "/docs/", None, None).await;
    assert_eq!(html.status, 200);
    assert_contains(&html.text, "swagger");
    assert!(
        !html.text.contains("https://"),
        "the docs page must not load remote assets"
    );
    let js = api
        .call("GET", "/docs/swagger-ui-bundle.js", None, None)
        .await;
    assert_eq!(js.status, 200);
    assert!(js.text.len() > 100_000);
}

/// Every problem of a bot in one 400, nothing stored; warnings kept with the revision; a
/// version taken once; the compiled form stored with it.
async fn revisions_are_validated_and_immutable(backend: Backend) {
    let (server, api, admin, pid) = admin_project(backend).await;
    let revs = format!("/projects/{pid}/bot/revisions");

    // Every problem, with its path, in one 400; nothing stored.
    let bad = json!({
        "name": "bad", "version": "1.0.0",
        "flows": {"main": {"intents": {"hi": {"initial": true, "type": "text", "condition": "content == 'hi'"}},
                  "states": {"init": {"initial": true, "transitions": {"nowhere": {"condition": "true"}}}}}}
    });
    let r = api.post(&revs, &admin, bad).await;
    assert_eq!(r.status, 400);
    let mut lines = r.text.lines();
    assert_eq!(
        lines.next(),
        Some("Wrong API usage. Please refer to the documentation!")
    );
    let problems: Vec<&str> = lines.collect();
    assert!(
        problems
            .iter()
            .any(|l| l.starts_with("error: flows.main.states.init.transitions.nowhere")),
        "{}",
        r.text
    );
    // Nothing was stored: the latest is still the initial empty revision.
    assert_eq!(
        api.get(&format!("/projects/{pid}/bot"), &admin).await.ok()["version"],
        "0.0.0"
    );
    assert_eq!(
        api.get(&format!("/projects/{pid}"), &admin).await.ok()["botLatestRevision"],
        api.get(&format!("/projects/{pid}/bot"), &admin).await.ok()["revision"]
    );

    // A valid bot with an unknown key: stored, and the warning comes back.
    let mut bot = example_bot("hello");
    bot["version"] = json!("2.0.0");
    bot["transtions"] = json!(1);
    let ok = api.post(&revs, &admin, bot.clone()).await.ok();
    assert!(
        ok["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("transtions")),
        "{ok}"
    );
    assert_eq!(ok["transtions"], 1, "unknown keys are kept");
    let first = s(&ok["revision"]);
    // The revision list keeps the warnings found at push (the console shows them).
    let listed = api.get(&revs, &admin).await.ok();
    assert_eq!(listed["data"][0]["revision"], ok["revision"], "{listed}");
    assert_eq!(listed["data"][0]["warnings"], ok["warnings"], "{listed}");
    assert_eq!(listed["data"][1]["warnings"], json!([]), "{listed}");

    // The same version again: 409 naming it; the first revision is untouched.
    bot["desc"] = json!("changed");
    let dup = api.post(&revs, &admin, bot.clone()).await;
    assert_eq!(dup.status, 409);
    assert_contains(&dup.text, "bot version 2.0.0 already exists");
    let latest = api.get(&format!("/projects/{pid}/bot"), &admin).await.ok();
    assert_eq!(latest["version"], "2.0.0");
    assert_eq!(latest["desc"], example_bot("hello")["desc"]);
    assert_ne!(latest["desc"], "changed");

    // A new version is a new revision; the latest moves; the version counter follows.
    bot.as_object_mut().unwrap().remove("version");
    let next = api.post(&revs, &admin, bot).await.ok();
    assert_eq!(next["version"], "2.0.1");
    assert_ne!(s(&next["revision"]), first);
    assert_eq!(
        api.get(&format!("/projects/{pid}"), &admin).await.ok()["botLatestRevision"],
        next["revision"]
    );

    // The compiled form is stored with the revision, and it is what runtime-core produces.
    let db = server.db().await;
    let row = db.revision(&pid, &first).await.unwrap().unwrap();
    let compiled: runtime_core::CompiledBot = serde_json::from_str(&row.compiled).unwrap();
    assert_eq!(compiled.version.as_deref(), Some("2.0.0"));
    assert_eq!(
        compiled.name,
        example_bot("hello")["name"].as_str().unwrap()
    );
}

/// NLUs that cannot run are named at push time with the reason: a deprecated external
/// type, and an nl NLU pointing to a model the bot may not use.
async fn nlus_that_cannot_run_are_named_at_push(backend: Backend) {
    let (_server, api, admin, pid) = admin_project(backend).await;
    let revs = format!("/projects/{pid}/bot/revisions");
    let mut nlus = example_bot("hello");
    nlus["version"] = json!("3.0.0");
    nlus["nlus"] = json!({
        "qisg": {"type": "verstandClassifier", "options": {"model": "m1"}},
        "mine": {"type": "nl", "options": {"nluId": "admin:shop", "output": "value"}},
        "theirs": {"type": "nl", "options": {"nluId": "alice:shop", "output": "value"}},
    });
    let ok = api.post(&revs, &admin, nlus).await.ok();
    let warnings: Vec<&str> = ok["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings.iter().any(|w| w.starts_with("nlus.qisg.type: ")
            && w.contains("verstandClassifier")
            && w.contains("cannot run")),
        "{warnings:#?}"
    );
    // Neither model exists (an owner's existing or a public model gets no warning:
    // tests/it/nlu.rs).
    for nlu in ["theirs", "mine"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&format!("nlus.{nlu}.options.nluId: "))
                    && w.contains("not available to this bot")),
            "{warnings:#?}"
        );
    }
}

/// Team acme made by alice, bob its member with `role`; its id.
async fn acme_with_bob(api: &Api, alice: &str, bob_id: &str, role: &str) -> String {
    let tid = s(&api
        .post("/teams", alice, json!({"name": "acme"}))
        .await
        .ok()["id"]);
    set_role(api, &tid, bob_id, alice, role).await.ok();
    tid
}

/// A team's maker is its teamAdmin, its name is taken once, and only a teamAdmin adds
/// members, with a known role; a member sees the team at once, and manages it only as a
/// teamAdmin.
async fn only_a_team_admin_adds_members(backend: Backend) {
    let (_server, api, admin, (alice_id, alice)) = with_alice(backend).await;
    let (bob_id, bob) = api.user(&admin, "bob", "developer").await;
    let team = api
        .post("/teams", &alice, json!({"name": "acme"}))
        .await
        .ok();
    let tid = s(&team["id"]);
    assert_eq!(
        team["members"],
        json!([{"userId": alice_id, "username": "alice", "roleId": "teamAdmin", "role": "teamAdmin"}])
    );
    assert_eq!(
        api.post("/teams", &bob, json!({"name": "acme"}))
            .await
            .status,
        409
    );

    // Bob is not a member: he cannot see the team or get a token for it.
    assert_eq!(api.get(&format!("/teams/{tid}"), &bob).await.status, 404);
    let r = api
        .post("/tokens", &bob, json!({"type": "team", "teamName": "acme"}))
        .await;
    assert_eq!(r.status, 404);
    // Only a team admin adds members.
    assert_eq!(
        set_role(&api, &tid, &bob_id, &bob, "developer")
            .await
            .status,
        404
    );
    let bad_role = set_role(&api, &tid, &bob_id, &alice, "owner").await;
    assert_eq!(bad_role.status, 400);
    assert!(
        bad_role
            .text
            .contains("role: one of teamAdmin, developer, viewer")
    );
    assert_eq!(
        set_role(&api, &tid, &bob_id, &alice, "developer")
            .await
            .ok(),
        json!({"role": "developer"})
    );
    // The invitation is visible at once (no new login needed).
    let teams = api.get(&format!("/users/{bob_id}/teams"), &bob).await.ok();
    assert_eq!(teams[0]["name"], "acme");
    assert_eq!(teams[0]["roleId"], "developer");
    assert_eq!(
        api.get(&format!("/users/{alice_id}/teams"), &bob)
            .await
            .status,
        403
    );
    assert_eq!(
        api.get(&format!("/teams/{tid}"), &bob).await.ok()["members"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Bob as a developer cannot manage the team.
    assert_eq!(
        set_role(&api, &tid, &bob_id, &bob, "teamAdmin")
            .await
            .status,
        403
    );
}

/// A team token: bob's projects made with it belong to the team; alice sees them through
/// her own team token and, as a member, through her own login token too. Demoted to
/// viewer, bob's same team token reads but cannot write.
async fn a_team_token_makes_the_teams_projects(backend: Backend) {
    let (_server, api, admin, (_, alice)) = with_alice(backend).await;
    let (bob_id, bob) = api.user(&admin, "bob", "developer").await;
    let tid = acme_with_bob(&api, &alice, &bob_id, "developer").await;
    let t = api
        .post("/tokens", &bob, json!({"type": "team", "teamName": "acme"}))
        .await
        .ok();
    assert_eq!(t["teamId"], tid.as_str());
    assert_eq!(t["roleId"], "developer");
    assert_eq!(t["type"], "team");
    let bob_team = s(&t["id"]);
    let pid = s(&api
        .post("/projects", &bob_team, json!({"name": "shared"}))
        .await
        .ok()["id"]);
    let alice_team = api.team_token(&alice, &tid).await;
    assert_eq!(
        api.get(&format!("/projects/{pid}"), &alice_team).await.ok()["name"],
        "shared"
    );
    let by_login = api.get(&format!("/projects/{pid}"), &alice).await.ok();
    assert_eq!(by_login["owner"]["type"], "team");
    assert_eq!(by_login["owner"]["name"], "acme");
    assert_eq!(api.get(&format!("/projects/{pid}"), &bob).await.status, 200);
    assert_eq!(api.get("/projects", &alice_team).await.ok()["total"], 1);
    assert_eq!(api.get("/projects", &alice).await.ok()["total"], 1);
    let me = api.get("/me", &bob_team).await.ok();
    assert_eq!(me["teamName"], "acme");

    // Demoted to viewer: the same team token now reads but cannot write.
    set_role(&api, &tid, &bob_id, &alice, "viewer").await.ok();
    assert_eq!(
        api.get(&format!("/projects/{pid}"), &bob_team).await.status,
        200
    );
    assert_eq!(
        api.put(
            &format!("/projects/{pid}"),
            &bob_team,
            json!({"label": "x"})
        )
        .await
        .status,
        403
    );
}

/// A team with projects cannot be deleted, and a viewer cannot delete one at all; an empty
/// team goes.
async fn a_team_goes_only_empty_and_by_its_admin(backend: Backend) {
    let (_server, api, admin, (_, alice)) = with_alice(backend).await;
    let (bob_id, bob) = api.user(&admin, "bob", "developer").await;
    let tid = acme_with_bob(&api, &alice, &bob_id, "viewer").await;
    let alice_team = api.team_token(&alice, &tid).await;
    api.post("/projects", &alice_team, json!({"name": "shared"}))
        .await
        .ok();
    assert_eq!(api.delete("/teams/acme", &bob).await.status, 403);
    assert_eq!(api.delete("/teams/acme", &alice).await.status, 409);
    let empty = api
        .post("/teams", &alice, json!({"name": "empty"}))
        .await
        .ok();
    let gone = api.delete("/teams/empty", &alice).await.ok();
    assert_eq!(gone["id"], empty["id"]);
    assert_eq!(
        api.get(&format!("/teams/{}", s(&empty["id"])), &alice)
            .await
            .status,
        404
    );
}

/// Who calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    NoToken,
    Expired,
    OtherTeam,
    OwnViewer,
    OwnDeveloper,
    AnyAdmin,
}

/// What a route does, which decides the expected status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

fn expected(who: Who, kind: Kind) -> u16 {
    match (who, kind) {
        (Who::NoToken | Who::Expired, _) => 401,
        // Another team has the permission but not the ownership: the project is not revealed.
        (Who::OtherTeam, _) => 404,
        (Who::OwnViewer, Kind::Read) => 200,
        (Who::OwnViewer, Kind::Write) => 403,
        (Who::OwnDeveloper | Who::AnyAdmin, _) => 200,
    }
}

/// Team acme (alice, and dave as a viewer) owns project `target`; carol's team `other` owns
/// `theirs` (each a [`fixture`]). The matrix's callers, each with its token.
struct Tenants {
    _server: InProcess,
    api: Api,
    admin: String,
    /// Alice's acme token: the owner's.
    owner: String,
    /// Carol's token for team other.
    carol: String,
    target: Fixture,
    theirs: Fixture,
    callers: Vec<(Who, Option<String>)>,
}

async fn tenants(backend: Backend) -> Tenants {
    let (server, api, admin, (_, alice)) = with_alice(backend).await;
    let (_, carol) = api.user(&admin, "carol", "developer").await;
    let (dave_id, dave) = api.user(&admin, "dave", "developer").await;
    let acme = api.post("/teams", &alice, json!({"name": "acme"})).await;
    let acme = s(&acme.ok()["id"]);
    set_role(&api, &acme, &dave_id, &alice, "viewer").await.ok();
    let other = api.post("/teams", &carol, json!({"name": "other"})).await;
    let other = s(&other.ok()["id"]);
    let owner = api.team_token(&alice, &acme).await;
    let dave_acme = api.team_token(&dave, &acme).await;
    let carol = api.team_token(&carol, &other).await;
    let target = fixture(&api, &owner, "target").await;
    // The other team has a project of its own, which must never show up for acme.
    let theirs = fixture(&api, &carol, "theirs").await;
    let expired = expired_token(&server, "alice", &acme).await;
    let callers = vec![
        (Who::NoToken, None),
        (Who::Expired, Some(expired)),
        (Who::OtherTeam, Some(carol.clone())),
        (Who::OwnViewer, Some(dave_acme)),
        (Who::OwnDeveloper, Some(owner.clone())),
        (Who::AnyAdmin, Some(admin.clone())),
    ];
    Tenants {
        _server: server,
        api,
        admin,
        owner,
        carol,
        target,
        theirs,
        callers,
    }
}

/// A team token of `username` for `team` that expired long ago, written straight into the
/// database.
async fn expired_token(server: &InProcess, username: &str, team: &str) -> String {
    let token = botbox_service::auth::new_token();
    let db = server.db().await;
    let user = db.user_by_name(username).await.unwrap().unwrap();
    db.insert_token(&botbox_store::TokenRow {
        hash: botbox_service::auth::token_hash(&token),
        kind: "team".into(),
        label: "test".into(),
        user_id: user.id,
        team_id: Some(team.to_owned()),
        role_id: "teamAdmin".into(),
        expire: 1,
    })
    .await
    .unwrap();
    token
}

/// The matrix's rows: project `f`'s routes as its `n`th caller `who` calls them. What a
/// caller creates is named for it; it deletes version `9.9.<n>` and channel `doomed`,
/// made for it by the owner.
fn routes(
    f: &Fixture,
    who: Who,
    n: usize,
    doomed: &str,
) -> Vec<(Kind, &'static str, String, Option<Value>)> {
    use Kind::{Read, Write};
    let (p, r) = (format!("/projects/{}", f.project), &f.revision);
    let versions = format!("{p}/deployment/versions");
    let v1 = format!("{versions}/1.0.0");
    let env = format!("{p}/environments");
    let one = format!("{env}/{}", f.env);
    let channels = format!("{one}/channels");
    let c = format!("{channels}/{}", f.channel);
    let mut bot = example_bot("hello");
    bot["version"] = json!(format!("5.0.{n}"));
    let label = json!({"label": format!("by {who:?}")});
    let draft = json!({"who": format!("{who:?}")});
    let version = json!({"version": format!("2.0.{n}"), "botRevision": r});
    let same_revision = json!({"botRevision": r});
    let new_env = json!({"depId": f.project, "depVersion": "1.0.0", "name": format!("env{n}")});
    let same_version = json!({"depVersion": "1.0.0"});
    let channel = json!({"name": format!("c{n}"), "type": "line"});
    let rpm = json!({"rpmLimit": n});
    vec![
        (Read, "GET", p.clone(), None),
        (Write, "PUT", p.clone(), Some(label)),
        (Read, "GET", format!("{p}/bot"), None),
        (Write, "POST", format!("{p}/bot/revisions"), Some(bot)),
        (Read, "GET", format!("{p}/bot/draft"), None),
        (Write, "PUT", format!("{p}/bot/draft"), Some(draft)),
        (Write, "POST", versions.clone(), Some(version)),
        (Read, "GET", format!("{p}/deployment"), None),
        (Read, "GET", versions.clone(), None),
        (Read, "GET", v1.clone(), None),
        (Write, "PUT", v1, Some(same_revision)),
        (Write, "DELETE", format!("{versions}/9.9.{n}"), None),
        (Read, "GET", env.clone(), None),
        (Read, "GET", one.clone(), None),
        (Write, "POST", env, Some(new_env)),
        (Write, "PUT", one, Some(same_version)),
        (Read, "GET", channels.clone(), None),
        (Write, "POST", channels.clone(), Some(channel)),
        (Read, "GET", c.clone(), None),
        (Write, "PUT", c, Some(rpm)),
        (Write, "DELETE", format!("{channels}/{doomed}"), None),
    ]
}

/// What the owner makes for the `n`th caller of the matrix to delete: version `9.9.<n>` and a
/// channel (its id). The draft is saved again, so that reads find one before any writer.
async fn prepare_for_caller(t: &Tenants, n: usize) -> String {
    let (api, f) = (&t.api, &t.target);
    let version = json!({"version": format!("9.9.{n}"), "botRevision": f.revision});
    post_version(api, &f.project, &t.owner, version).await.ok();
    let channels = format!("/projects/{}/environments/{}/channels", f.project, f.env);
    let channel = json!({"name": format!("del{n}"), "type": "telegram"});
    let doomed = s(&api.post(&channels, &t.owner, channel).await.ok()["id"]);
    let draft = format!("/projects/{}/bot/draft", f.project);
    api.put(&draft, &t.owner, json!({})).await.ok();
    doomed
}

/// Every project route answers each caller as its role allows ([`expected`]); a refused
/// call reveals nothing of the project, and refused writes change nothing.
async fn each_caller_gets_what_its_role_allows_on_every_project_route(backend: Backend) {
    let t = tenants(backend).await;
    let (api, f) = (&t.api, &t.target);
    for (i, (who, token)) in t.callers.iter().enumerate() {
        let n = i + 1;
        let doomed = prepare_for_caller(&t, n).await;
        for (kind, method, path, body) in routes(f, *who, n, &doomed) {
            let res = api
                .call(method, &path, token.as_deref(), body.as_ref())
                .await;
            assert_eq!(
                res.status,
                expected(*who, kind),
                "{who:?} {method} {path}: {}",
                res.text
            );
            if res.status != 200 {
                // A refused call reveals nothing of the project.
                assert!(
                    !res.text.contains("target") && !res.text.contains("pizza"),
                    "{who:?} {method} {path}: {}",
                    res.text
                );
            }
        }
    }
    // The label is an allowed writer's, and the other team's project still has only its
    // owner's data: none of the refused writes landed.
    let target = api
        .get(&format!("/projects/{}", f.project), &t.owner)
        .await
        .ok();
    assert!(
        matches!(
            target["label"].as_str(),
            Some("by OwnDeveloper") | Some("by AnyAdmin")
        ),
        "{target}"
    );
    let theirs = &t.theirs;
    let theirs_now = api
        .get(&format!("/projects/{}", theirs.project), &t.carol)
        .await
        .ok();
    assert_eq!(theirs_now["label"], Value::Null);
    let their_channels = format!(
        "/projects/{}/environments/{}/channels",
        theirs.project, theirs.env
    );
    let their_channels = api.get(&their_channels, &t.carol).await.ok();
    assert_eq!(their_channels["total"], 1);
    assert_eq!(their_channels["data"][0]["id"], theirs.channel.as_str());
}

async fn the_project_list_shows_each_caller_only_its_teams_projects(backend: Backend) {
    let t = tenants(backend).await;
    let (p, theirs) = (json!(t.target.project), json!(t.theirs.project));
    for (who, token) in &t.callers {
        let list = t.api.call("GET", "/projects", token.as_deref(), None).await;
        match who {
            Who::NoToken | Who::Expired => assert_eq!(list.status, 401),
            Who::AnyAdmin => {
                // Every tenant's, when asked for.
                let all = t
                    .api
                    .call("GET", "/projects?owner=all", token.as_deref(), None)
                    .await;
                let ids = ids_of(&all.ok());
                assert!(ids.contains(&p) && ids.contains(&theirs));
            }
            Who::OtherTeam => assert_eq!(
                ids_of(&list.ok()),
                vec![theirs.clone()],
                "the other team sees only its own project"
            ),
            Who::OwnViewer | Who::OwnDeveloper => assert_eq!(
                ids_of(&list.ok()),
                vec![p.clone()],
                "{who:?} sees its team's project only"
            ),
        }
    }
}

async fn a_viewer_or_a_caller_without_a_valid_token_cannot_create_projects(backend: Backend) {
    let t = tenants(backend).await;
    for (n, (who, token)) in t.callers.iter().enumerate() {
        let body = json!({"name": format!("new{n}")});
        let create = t
            .api
            .call("POST", "/projects", token.as_deref(), Some(&body))
            .await;
        let want = match who {
            Who::NoToken | Who::Expired => 401,
            Who::OwnViewer => 403,
            _ => 200,
        };
        assert_eq!(
            create.status, want,
            "{who:?} POST /projects: {}",
            create.text
        );
    }
}

async fn ids_of_another_project_never_match_under_this_one(backend: Backend) {
    let t = tenants(backend).await;
    let theirs = &t.theirs;
    let path = format!(
        "/projects/{}/environments/{}/channels/{}",
        t.target.project, theirs.env, theirs.channel
    );
    assert_eq!(t.api.get(&path, &t.admin).await.status, 404);
}

/// Malformed bodies, wrong types, bad options and bad paging each answer 400 with the
/// documented prefix and a detail naming what is wrong, and change nothing.
async fn bad_input_changes_nothing(backend: Backend) {
    let (_server, api, admin, pid) = admin_project(backend).await;
    let before = api.get(&format!("/projects/{pid}"), &admin).await.ok();

    let cases: Vec<(&str, String, Vec<u8>, &str)> = vec![
        ("POST", "/projects".into(), b"{\"name\": ".to_vec(), "EOF"),
        (
            "POST",
            "/projects".into(),
            br#"{"name": 5}"#.to_vec(),
            "name: invalid type",
        ),
        (
            "POST",
            "/projects".into(),
            br#"{"name": "q", "options": {"bot": "yes"}}"#.to_vec(),
            "options.bot: invalid type",
        ),
        (
            "POST",
            "/projects".into(),
            br#"{"name": "q", "options": {"nluVisibility": "secret"}}"#.to_vec(),
            "options.nluVisibility",
        ),
        (
            "POST",
            "/projects".into(),
            br#"{"name": "has space"}"#.to_vec(),
            "name: 1 to 64",
        ),
        (
            "PUT",
            format!("/projects/{pid}"),
            br#"{"options": {"timezone": "x"}}"#.to_vec(),
            "options",
        ),
        (
            "POST",
            format!("/projects/{pid}/bot/revisions"),
            b"[1, 2]".to_vec(),
            "a Bot object",
        ),
        (
            "POST",
            format!("/projects/{pid}/bot/revisions"),
            vec![b' '; 10],
            "JSON body is required",
        ),
        (
            "GET",
            "/projects?limit=0".into(),
            vec![],
            "limit must be a whole number from 1",
        ),
        ("GET", "/projects?page=abc".into(), vec![], "page must be"),
    ];
    // A body over the limit is a 413 that says so, and changes nothing either.
    let mut big = br#"{"name": "big", "description": ""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 5 << 20));
    big.extend(b"\"}");
    let r = api.raw("POST", "/projects", Some(&admin), big).await;
    assert_eq!(r.status, 413, "{}", r.text);
    assert_contains(&r.text, "at most 4 MiB is accepted");
    for (method, path, body, detail) in cases {
        let r = api.raw(method, &path, Some(&admin), body).await;
        assert_eq!(r.status, 400, "{method} {path}: {}", r.text);
        assert!(
            r.text
                .starts_with("Wrong API usage. Please refer to the documentation!"),
            "{}",
            r.text
        );
        assert!(
            r.text.contains(detail),
            "{method} {path}: expected {detail:?} in {}",
            r.text
        );
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    }
    // Nothing was written.
    assert_eq!(
        api.get(&format!("/projects/{pid}"), &admin).await.ok(),
        before
    );
    assert_eq!(api.get("/projects", &admin).await.ok()["total"], 1);
}

/// The other documented errors, with their bodies: no token, a wrong password (the same
/// for a user that does not exist), a viewer's write, an unknown project or route; and the
/// token in the query string, as documented.
async fn the_other_documented_errors_have_their_bodies(backend: Backend) {
    let (_server, api, admin, _) = admin_project(backend).await;
    let r = api.call("GET", "/projects", None, None).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    for username in ["admin", "nobody"] {
        let r = login_attempt(&api, username, "wrong").await;
        assert_eq!(
            (r.status, r.text.as_str()),
            (401, "username or password is incorrect")
        );
    }
    let (_, viewer) = api.user(&admin, "vera", "viewer").await;
    let r = api.post("/projects", &viewer, json!({"name": "v"})).await;
    assert_eq!(
        (r.status, r.text.as_str()),
        (403, "You're not authorized to view this page.")
    );
    let r = api.get("/projects/doesnotexist", &admin).await;
    assert_eq!(r.status, 404);
    let r = api.get("/no/such/route", &admin).await;
    assert_eq!(r.status, 404);
    // Token in the query string works as documented.
    let r = api
        .call("GET", &format!("/projects?token={admin}"), None, None)
        .await;
    assert_eq!(r.ok()["total"], 1);
}

async fn rate_limit(backend: Backend) {
    let server = InProcess::start_with(
        backend,
        botbox_api::ApiConfig {
            rate_limit_per_minute: 5,
            ..Default::default()
        },
    )
    .await;
    let api = server.api();
    let admin = api.admin_token().await; // one request without a token (per address)
    // A window boundary between two requests would reset the counter: then try once more.
    for attempt in 0..2 {
        let mut statuses = vec![];
        let mut resets = vec![];
        let mut last = None;
        for _ in 0..6 {
            let r = api.get("/projects", &admin).await;
            statuses.push(r.status);
            resets.push(r.header("ratelimit-reset").unwrap().parse::<i64>().unwrap());
            last = Some(r);
        }
        if resets.windows(2).any(|w| w[1] > w[0]) && attempt == 0 {
            continue;
        }
        let (first_five, sixth) = statuses.split_at(5);
        // The first window may have been started by earlier requests of this token in the
        // same minute (none here: the token is new).
        assert!(first_five.iter().all(|s| *s == 200), "{statuses:?}");
        assert_eq!(sixth, [429]);
        let last = last.unwrap();
        assert_eq!(last.text, "Ratelimit exceeded! 5 per minute");
        assert_eq!(last.header("ratelimit-limit"), Some("5"));
        assert_eq!(last.header("ratelimit-remaining"), Some("0"));
        let retry: i64 = last.header("retry-after").unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry));
        break;
    }
    // Another token of the same user shares the user's budget (minting tokens buys no
    // requests), unless a new window began in between.
    let other = api.login("admin", common::ADMIN_PASSWORD).await;
    let r = api.get("/projects", other["id"].as_str().unwrap()).await;
    assert!(
        r.status == 429 || r.header("ratelimit-remaining") == Some("4"),
        "{} {:?}",
        r.status,
        r.header("ratelimit-remaining")
    );
    // Another user has its own.
    server
        .db()
        .await
        .insert_user(
            "other",
            &botbox_service::auth::hash_password("other-password"),
            "developer",
        )
        .await
        .unwrap();
    let t = api.login("other", "other-password").await;
    let r = api.get("/projects", t["id"].as_str().unwrap()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("ratelimit-remaining"), Some("4"));

    // Without a token the address is counted (the logins above were 3 of its 5).
    // Whatever the window, a request after one that left 0 remaining in the same window is
    // refused, and one is refused within 11 requests.
    let mut prev: Option<(i64, i64)> = None; // (remaining, reset)
    let mut refused = false;
    for _ in 0..11 {
        let r = api.call("GET", "/projects", None, None).await;
        let remaining: i64 = r.header("ratelimit-remaining").unwrap().parse().unwrap();
        let reset: i64 = r.header("ratelimit-reset").unwrap().parse().unwrap();
        if let Some((0, prev_reset)) = prev
            && reset <= prev_reset
        {
            assert_eq!(r.status, 429, "{}", r.text);
            assert_eq!(r.text, "Ratelimit exceeded! 5 per minute");
            refused = true;
            break;
        }
        assert_eq!(r.status, 401, "{}", r.text);
        prev = Some((remaining, reset));
    }
    assert!(refused, "no request without a token was refused");
}

/// Replicas started together on an empty database each create the first admin at the same
/// moment: exactly one creates it and says so, the others find it made, and none fails.
async fn servers_starting_together_create_one_admin(backend: Backend) {
    let first = InProcess::start_empty(backend).await;
    let db = first.db().await;
    let starts: Vec<_> = (0..8)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move { botbox::server::bootstrap_admin(&db, None).await })
        })
        .collect();
    let mut created = 0;
    for s in starts {
        match s.await.unwrap() {
            Ok(Some(_password)) => created += 1,
            Ok(None) => {}
            Err(e) => panic!("a server starting together with others failed: {e:#}"),
        }
    }
    assert_eq!(
        created, 1,
        "exactly one start creates (and prints) the admin"
    );
    assert_eq!(db.user_count().await.unwrap(), 1);
}

/// The first start creates `admin` with a generated password, written once to a file only
/// the server's user reads (its path printed, the password never); with
/// `BOTBOX_ADMIN_PASSWORD` set the log says the account was created, without the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_writes_the_admin_password_to_a_private_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, said) = serve_saying(dir.path(), None);
    // The password is in a file of the data folder only its owner reads, never in the log.
    let file = password_file(&said).expect("the first start names the password's file");
    assert_eq!(
        std::path::Path::new(&file),
        dir.path().join("admin-password")
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let password = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert!(password.len() >= 20);
    let api = Api::over_http(reqwest::Client::new(), listening_on(&said));
    assert_eq!(api.login("admin", &password).await["roleId"], "admin");
    first.kill().unwrap();
    first.wait().unwrap();
    let (mut second, said) = serve_saying(dir.path(), None);
    assert_eq!(password_file(&said), None, "the password is made once");
    let api = Api::over_http(reqwest::Client::new(), listening_on(&said));
    assert_eq!(api.login("admin", &password).await["roleId"], "admin");
    second.kill().unwrap();
    second.wait().unwrap();

    let chosen = tempfile::tempdir().unwrap();
    let (mut third, said) = serve_saying(chosen.path(), Some("chosen-admin-password-1"));
    assert!(
        said.iter().any(|l| l == "created the admin account: username admin, with the password of BOTBOX_ADMIN_PASSWORD"),
        "{said:?}"
    );
    assert!(
        !said.iter().any(|l| l.contains("chosen-admin-password-1")),
        "{said:?}"
    );
    assert!(!chosen.path().join("admin-password").exists());
    third.kill().unwrap();
    third.wait().unwrap();
}

/// `botbox serve` on data folder `dir` (with `BOTBOX_ADMIN_PASSWORD` = `password`, or
/// without it): the process and the lines it printed up to the one saying where it listens.
fn serve_saying(
    dir: &std::path::Path,
    password: Option<&str>,
) -> (std::process::Child, Vec<String>) {
    use std::io::{BufRead, BufReader};
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--data"])
        .arg(dir)
        .env_remove("BOTBOX_ADMIN_PASSWORD")
        .env_remove("DATABASE_URL")
        .env("BOTBOX_LOG", "warn")
        .env("BOTBOX_CACHE", common::GUEST_CACHE)
        .stdout(std::process::Stdio::piped());
    if let Some(p) = password {
        cmd.env("BOTBOX_ADMIN_PASSWORD", p);
    }
    let mut child = cmd.spawn().unwrap();
    let mut said = vec![];
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.starts_with("botbox listening on ");
        said.push(line);
        if done {
            break;
        }
    }
    (child, said)
}

/// The file a first start names as holding the generated password.
fn password_file(said: &[String]) -> Option<String> {
    said.iter().find_map(|l| {
        let rest =
            l.strip_prefix("created the admin account: username admin; its password is in ")?;
        Some(rest.split(" (").next().unwrap().to_owned())
    })
}

/// The base URL the server said it listens on.
fn listening_on(said: &[String]) -> String {
    said.iter()
        .find_map(|l| l.strip_prefix("botbox listening on "))
        .expect("the server listens")
        .to_owned()
}

/// A log written to a file (not a terminal) is plain text: no colour codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_written_to_a_file_has_no_colour_codes() {
    let server = Server::start_logged(Backend::Sqlite, &[]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    // Disabling an account is logged (a warning with fields).
    let (bob, _) = api.user(&admin, "bob", "developer").await;
    api.call("POST", &format!("/users/{bob}/disable"), Some(&admin), None)
        .await
        .ok();
    let log = server.log();
    assert!(log.contains("account access changed"), "the log: {log}");
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in a log file: {log:?}"
    );
}

/// `GET /ready` answers 200 once the server's sandbox is up (no token needed; `Server::start`
/// itself waits for it), and 503 `failed` when it cannot start, while the server still serves
/// the rest of the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_says_when_the_sandbox_can_run_bots() {
    let server = Server::start(Backend::Sqlite, &[]).await;
    let r = server.api().call("GET", "/ready", None, None).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": "ready"})));

    // A cache folder that is a file: the guest can be neither loaded nor stored (the flag
    // wins over the tests' BOTBOX_CACHE).
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("cache-file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let broken = Server::start_unready(
        Backend::Sqlite,
        &["--cache-dir", not_a_dir.to_str().unwrap()],
    )
    .await;
    let api = broken.api();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            let r = api.call("GET", "/ready", None, None).await;
            if r.json()["status"] != "starting" {
                return r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("/ready still said starting after 60 s");
    assert_eq!(
        (answer.status, answer.json()),
        (503, json!({"status": "failed"}))
    );
    // Liveness is not readiness: the process serves, so a restart is not what it needs.
    let live = api.call("GET", "/live", None, None).await;
    assert_eq!(
        (live.status, live.json()),
        (200, json!({"status": "alive"}))
    );
    // The rest of the API works.
    let token = api.admin_token().await;
    assert_eq!(api.get("/me", &token).await.ok()["username"], "admin");
}

/// A project name as people type it ("My Bot") is refused with the rule stated; the display
/// name goes in `label`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_name_with_spaces_is_refused_with_the_rule() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let r = api
        .post("/projects", &admin, json!({"name": "My Bot"}))
        .await;
    assert_eq!(r.status, 400);
    assert_contains(
        &r.text,
        "name: 1 to 64 letters, digits, '.', '_' or '-' (got \"My Bot\")",
    );
    let p = api
        .post(
            "/projects",
            &admin,
            json!({"name": "my-bot", "label": "My Bot"}),
        )
        .await
        .ok();
    assert_eq!(p["label"], "My Bot");
}

/// Behind a trusted reverse proxy (`--trusted-proxy`) the per-address limit counts each
/// client the proxy names in X-Forwarded-For; without the flag, a client's own
/// X-Forwarded-For is ignored and every request counts for the connection's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_see_the_client_behind_a_trusted_proxy() {
    for trusted in [true, false] {
        let mut args = vec!["--rate-limit", "3"];
        if trusted {
            args.extend(["--trusted-proxy", "127.0.0.1"]);
        }
        let server = Server::start(Backend::Sqlite, &args).await;
        let http = reqwest::Client::new();
        let get = |client: &'static str| {
            let (http, base) = (http.clone(), server.base.clone());
            async move {
                http.get(format!("{base}/projects"))
                    .header("x-forwarded-for", client)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        // A window boundary between requests resets the counters: try once more then.
        let mut seen = vec![];
        for _ in 0..2 {
            seen = vec![];
            for _ in 0..4 {
                seen.push(get("203.0.113.1").await);
            }
            seen.push(get("203.0.113.2").await);
            if seen[3] == 429 {
                break;
            }
        }
        assert_eq!(&seen[..4], [401, 401, 401, 429], "{trusted}: {seen:?}");
        let other = if trusted { 401 } else { 429 };
        assert_eq!(seen[4], other, "{trusted}: another client, {seen:?}");
    }
}

/// A body over a route's limit is a 413 that says both sizes, whether its length was given
/// (refused before it is read) or not (cut as it arrives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_refused_in_words() {
    let server = common::Server::start(Backend::Sqlite, &[]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let pid = s(&api
        .post("/projects", &admin, json!({"name": "big"}))
        .await
        .ok()["id"]);
    // Refused from the headers alone: the client need not send the body.
    let ask = |path: String, token: Option<String>, len: usize| {
        let addr = server.api().base.trim_start_matches("http://").to_owned();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            let mut c = std::net::TcpStream::connect(&addr).unwrap();
            let auth = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
            write!(c, "POST {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}content-type: application/json\r\ncontent-length: {len}\r\n\r\n").unwrap();
            // The head, then the body (the server may write them apart).
            let mut answer = String::new();
            let mut buf = [0; 4096];
            while !answer.ends_with("accepted") && !answer.ends_with('}') {
                let n = c.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                answer.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            answer
        })
        .join()
        .unwrap()
    };
    let answer = ask(
        format!("/projects/{pid}/bot/revisions"),
        Some(admin.clone()),
        5 << 20,
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_contains(&answer, "the body is 5.0 MiB; at most 4 MiB is accepted");
    let answer = ask("/webhooks/nope".into(), None, 2 << 20);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_contains(&answer, "the body is 2.0 MiB; at most 1 MiB is accepted");
    let five_mib = vec![b' '; 5 << 20];

    // In process the request carries no length: the body is cut at the limit.
    let local = InProcess::start(Backend::Sqlite).await;
    let api = local.api();
    let admin = api.admin_token().await;
    let pid = s(&api
        .post("/projects", &admin, json!({"name": "big"}))
        .await
        .ok()["id"]);
    let r = api
        .raw(
            "POST",
            &format!("/projects/{pid}/bot/revisions"),
            Some(&admin),
            five_mib,
        )
        .await;
    assert_eq!(r.status, 413, "{}", r.text);
    assert_contains(&r.text, "the body is over 4 MiB; at most 4 MiB is accepted");
}
