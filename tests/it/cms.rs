//! The CMS through the project API: a project made with `options.cms` starts with an empty
//! revision, documents are validated with every problem at its place, each publish is a new
//! immutable revision, deployments bind one (the latest unless named), and revisions count
//! toward the owner's storage.

use crate::common::{
    Api, Backend, InProcess, Receiver, Res, Server, assert_contains, converse_text,
    generic_channel, one_state_bot, post_webhook, s, texts,
};
use serde_json::{Value, json};

on_both_backends!(
    a_cms_project_starts_with_an_empty_revision,
    a_document_with_problems_is_refused_naming_each_at_its_place,
    a_publish_answers_its_revision_with_the_content_and_who_published_it,
    the_same_content_published_again_is_a_revision_of_its_own,
    revisions_are_listed_newest_first,
    a_revision_is_read_by_its_id,
    the_last_publish_is_the_projects_latest_revision,
    a_bot_naming_content_the_latest_revision_lacks_is_warned_at_push,
    a_deployment_binds_the_latest_revision_unless_one_is_named,
    a_deployment_naming_no_revision_is_refused,
    another_projects_revision_is_not_this_ones,
    revisions_count_toward_the_owners_storage,
    deleting_a_project_deletes_its_revisions,
    a_project_without_a_cms_answers_an_empty_revision,
    a_project_without_a_cms_refuses_publishes_until_it_is_turned_on,
);

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

/// The admin's project `content`, made with a CMS: (the server, its API, the admin's
/// token, the project as its creation answered it).
async fn content(backend: Backend) -> (InProcess, Api, String, Value) {
    let (server, api, admin) = signed_in(backend).await;
    let p = create(&api, &admin, "content", json!({"bot": true, "cms": true})).await;
    (server, api, admin, p)
}

/// The document [`published`] publishes.
fn doc() -> Value {
    json!({
        "pages": {"home": {"greeting": {"text": {"type": "text", "value": "Welcome!"}}}},
        "faqs": {"hours": {"questions": ["when are you open"], "answers": ["9 to 5"]}},
        "changelog": "the greeting"
    })
}

/// [`content`] with [`doc`] published twice.
struct Published {
    _server: InProcess,
    api: Api,
    admin: String,
    pid: String,
    /// The revision the project started with.
    initial: String,
    /// The first publish's answer.
    first: Value,
    r1: String,
    r2: String,
}

impl Published {
    /// `rest` under the project's path.
    fn at(&self, rest: &str) -> String {
        format!("/projects/{}{rest}", self.pid)
    }
    async fn get(&self, rest: &str) -> Res {
        self.api.get(&self.at(rest), &self.admin).await
    }
    async fn post(&self, rest: &str, body: Value) -> Res {
        self.api.post(&self.at(rest), &self.admin, body).await
    }

    /// Pushes `bot`; the push's answer.
    async fn push(&self, bot: Value) -> Value {
        self.post("/bot/revisions", bot).await.ok()
    }

    /// Pushes a bot that says hi; its revision.
    async fn push_hi(&self) -> String {
        let hi = json!({"end": true, "action": {"name": "text", "options": {"text": "hi"}}});
        s(&self.push(one_state_bot(hi)).await["revision"])
    }

    /// [`deploy`] in this project.
    async fn deploy(&self, version: &str, rev: &str, more: Value) -> Res {
        deploy(&self.api, &self.admin, &self.pid, version, rev, more).await
    }

    /// A second CMS project's initial revision.
    async fn other_project(&self) -> String {
        let other = create(
            &self.api,
            &self.admin,
            "other",
            json!({"bot": true, "cms": true}),
        )
        .await;
        s(&other["cmsLatestRevision"])
    }
}

async fn published(backend: Backend) -> Published {
    let (server, api, admin, p) = content(backend).await;
    let pid = s(&p["id"]);
    let revisions = format!("/projects/{pid}/cms/revisions");
    let publish = || api.post(&revisions, &admin, doc());
    let first = publish().await.ok();
    let r2 = s(&publish().await.ok()["revision"]);
    Published {
        initial: s(&p["cmsLatestRevision"]),
        r1: s(&first["revision"]),
        first,
        r2,
        _server: server,
        api,
        admin,
        pid,
    }
}

async fn a_cms_project_starts_with_an_empty_revision(backend: Backend) {
    let (_server, api, admin, p) = content(backend).await;
    let initial = s(&p["cmsLatestRevision"]);
    assert_eq!(initial.len(), 40, "{p}");
    let latest = api
        .get(&format!("/projects/{}/cms", s(&p["id"])), &admin)
        .await
        .ok();
    assert_eq!(latest["revision"], initial.as_str());
    assert_eq!(latest["pages"], json!({}));
}

/// Every problem at its page, form and element; nothing is stored.
async fn a_document_with_problems_is_refused_naming_each_at_its_place(backend: Backend) {
    let (_server, api, admin, p) = content(backend).await;
    let revisions = format!("/projects/{}/cms/revisions", s(&p["id"]));
    let bad = api
        .post(
            &revisions,
            &admin,
            json!({"pages": {"home": {"greeting": {
                "text": {"type": "video", "value": "x"},
                "size": {"type": "slider", "value": 11, "min": 0, "max": 10}
            }}}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_contains(
        &bad.text,
        "pages.home.greeting.text: unknown type \"video\"",
    );
    assert_contains(
        &bad.text,
        "pages.home.greeting.size: the value 11 is outside the slider's range 0 to 10",
    );
    assert_eq!(api.get(&revisions, &admin).await.ok()["total"], 1);
}

async fn a_publish_answers_its_revision_with_the_content_and_who_published_it(backend: Backend) {
    let p = published(backend).await;
    assert_eq!(p.first["changelog"], "the greeting");
    assert_eq!(p.first["publishedBy"], "admin");
    assert_eq!(p.first["pages"], doc()["pages"]);
}

async fn the_same_content_published_again_is_a_revision_of_its_own(backend: Backend) {
    let p = published(backend).await;
    assert_ne!(p.r1, p.r2);
}

async fn revisions_are_listed_newest_first(backend: Backend) {
    let p = published(backend).await;
    let list = p.get("/cms/revisions").await.ok();
    let ids: Vec<String> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| s(&r["revision"]))
        .collect();
    assert_eq!(ids, [p.r2.clone(), p.r1.clone(), p.initial.clone()]);
    let filters = vec![
        (p.pid.as_str(), "[project]"),
        (p.initial.as_str(), "[initial]"),
        (p.r1.as_str(), "[first]"),
        (p.r2.as_str(), "[second]"),
    ];
    insta::with_settings!({filters => filters}, {
        insta::assert_json_snapshot!("cms_revisions_newest_first", list, {
            ".data[].createdAt" => "[time]",
        });
    });
}

async fn a_revision_is_read_by_its_id(backend: Backend) {
    let p = published(backend).await;
    let one = p.get(&format!("/cms/revisions/{}", p.r1)).await.ok();
    assert_eq!(one["faqs"], doc()["faqs"]);
}

async fn the_last_publish_is_the_projects_latest_revision(backend: Backend) {
    let p = published(backend).await;
    assert_eq!(p.get("").await.ok()["cmsLatestRevision"], p.r2.as_str());
}

/// A bot naming content the latest revision lacks is warned at push, at the place.
async fn a_bot_naming_content_the_latest_revision_lacks_is_warned_at_push(backend: Backend) {
    let p = published(backend).await;
    let naming = one_state_bot(json!({"end": true, "action": {"name": "text",
        "options": {"text": "$(cms.home.greeting.text.value) $(cms.home.greeting.title.value) $(cms.faq.hours.answers)"}}}));
    let pushed = p.push(naming).await;
    let warnings: Vec<String> = serde_json::from_value(pushed["warnings"].clone()).unwrap();
    let about: Vec<&String> = warnings.iter().filter(|w| w.contains("cms.")).collect();
    assert_eq!(about.len(), 1, "{warnings:?}");
    assert_contains(about[0], "flows.main.states.s.action.options.text");
    assert_contains(
        about[0],
        "cms.home.greeting.title is not in the project's latest CMS revision",
    );
}

async fn a_deployment_binds_the_latest_revision_unless_one_is_named(backend: Backend) {
    let p = published(backend).await;
    let rev = p.push_hi().await;
    let d = p.deploy("1.0.0", &rev, json!({})).await.ok();
    assert_eq!(d["cmsRevision"], p.r2.as_str());
    let d = p
        .deploy("1.0.1", &rev, json!({"cmsRevision": p.r1}))
        .await
        .ok();
    assert_eq!(d["cmsRevision"], p.r1.as_str());
}

async fn a_deployment_naming_no_revision_is_refused(backend: Backend) {
    let p = published(backend).await;
    let rev = p.push_hi().await;
    let refused = p
        .deploy("1.0.2", &rev, json!({"cmsRevision": "nope"}))
        .await;
    assert_eq!(refused.status, 400);
    assert_contains(&refused.text, "cmsRevision: nope is not a CMS revision");
    p.deploy("1.0.1", &rev, json!({})).await.ok();
    let refused = p
        .api
        .put(
            &p.at("/deployment/versions/1.0.1"),
            &p.admin,
            json!({"cmsRevision": "nope"}),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
}

async fn another_projects_revision_is_not_this_ones(backend: Backend) {
    let p = published(backend).await;
    let rev = p.push_hi().await;
    let other = p.other_project().await;
    let refused = p.deploy("1.0.3", &rev, json!({"cmsRevision": other})).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(p.get(&format!("/cms/revisions/{other}")).await.status, 404);
}

async fn revisions_count_toward_the_owners_storage(backend: Backend) {
    let p = published(backend).await;
    p.other_project().await;
    let cms = stored_cms(&p.api, &p.admin).await;
    assert_eq!(cms["rows"], 4, "three of this project, one of the other");
    assert!(cms["bytes"].as_i64().unwrap() > 0);
}

async fn deleting_a_project_deletes_its_revisions(backend: Backend) {
    let p = published(backend).await;
    p.other_project().await;
    p.api.delete(&p.at(""), &p.admin).await.ok();
    let cms = stored_cms(&p.api, &p.admin).await;
    assert_eq!(cms["rows"], 1, "the other project's initial revision");
}

/// As clients expect.
async fn a_project_without_a_cms_answers_an_empty_revision(backend: Backend) {
    let (_server, api, admin) = signed_in(backend).await;
    let plain = s(&create(&api, &admin, "plain", json!({"bot": true})).await["id"]);
    assert_eq!(
        api.get(&format!("/projects/{plain}/cms"), &admin)
            .await
            .ok()["revision"],
        ""
    );
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

/// Publishes `doc` to project `pid`'s CMS; the new revision.
async fn publish(api: &Api, token: &str, pid: &str, doc: Value) -> String {
    let revisions = format!("/projects/{pid}/cms/revisions");
    s(&api.post(&revisions, token, doc).await.ok()["revision"])
}

/// Deploys project `pid`'s bot revision `rev` as `version`, with the deployment's other
/// fields `more`.
async fn deploy(api: &Api, token: &str, pid: &str, version: &str, rev: &str, more: Value) -> Res {
    let mut body = json!({"version": version, "botRevision": rev});
    body.as_object_mut()
        .unwrap()
        .extend(more.as_object().unwrap().clone());
    api.post(&format!("/projects/{pid}/deployment/versions"), token, body)
        .await
}

/// A CMS document whose home greeting reads `text` and whose hours FAQ answers
/// "`text`: 9 to 5".
fn greeting(text: &str) -> Value {
    json!({"pages": {"home": {"greeting": {"text": {"type": "text", "value": text}}}},
        "faqs": {"hours": {"questions": ["when are you open"], "answers": [format!("{text}: 9 to 5")]}}})
}

/// The messages of project `pid`'s error list.
async fn error_messages(api: &Api, token: &str, pid: &str) -> Vec<String> {
    let errors = api
        .get(&format!("/projects/{pid}/errors"), token)
        .await
        .ok();
    let data = errors["data"].as_array().unwrap();
    data.iter().map(|e| s(&e["errorMessage"])).collect()
}

on_both_backends!(a_channel_message_reads_the_cms_revision_its_deployment_runs);

/// Publish v1, deploy a bot that reads `$(cms.home.greeting.text.value)`: a channel message
/// answers with v1's text; publish v2 and deploy it: the answer follows; roll back: v1's
/// text again. A revision that lacks the page is a step error in the project's error list.
async fn a_channel_message_reads_the_cms_revision_its_deployment_runs(backend: Backend) {
    let server = Server::start(backend, &["--allow-private-egress"]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let pid = s(&create(&api, &admin, "greeter", json!({"bot": true, "cms": true})).await["id"]);
    let publish = |doc: Value| publish(&api, &admin, &pid, doc);
    let bot = one_state_bot(json!({"end": true, "action": [
        {"name": "text", "options": {"text": "$(cms.home.greeting.text.value)"}},
        {"name": "text", "options": {"text": "$(cms.faq.hours.answers)"}}]}));
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), &admin, bot)
        .await
        .ok()["revision"]);
    let versions = format!("/projects/{pid}/deployment/versions");
    let deploy = |version: &'static str| {
        let deployed = deploy(&api, &admin, &pid, version, &rev, json!({}));
        async { s(&deployed.await.ok()["cmsRevision"]) }
    };
    let v1 = publish(greeting("Welcome, v1")).await;
    assert_eq!(deploy("1.0.0").await, v1);
    let env = s(&api
        .post(
            &format!("/projects/{pid}/environments"),
            &admin,
            json!({"depId": pid, "depVersion": "1.0.0", "name": "production"}),
        )
        .await
        .ok()["id"]);
    let (rx, rx_url) = Receiver::start().await;
    let channel = generic_channel(&api, &admin, &pid, &env, &format!("{rx_url}/inbox")).await;
    let say = |n: usize| {
        let (api, channel, rx) = (api.clone(), channel.clone(), &rx);
        async move {
            let body =
                json!({"userId": format!("u{n}"), "messages": [{"type": "text", "content": "hi"}]});
            post_webhook(&api, &channel, &body).await;
            let got = rx.wait_for(n).await;
            texts(&got[n - 1].2)
        }
    };
    assert_eq!(say(1).await, ["Welcome, v1", "Welcome, v1: 9 to 5"]);

    let v2 = publish(greeting("Welcome, v2")).await;
    assert_eq!(deploy("1.0.1").await, v2);
    api.put(
        &format!("/projects/{pid}/environments/{env}"),
        &admin,
        json!({"depVersion": "1.0.1"}),
    )
    .await
    .ok();
    assert_eq!(say(2).await, ["Welcome, v2", "Welcome, v2: 9 to 5"]);

    let d1 = api.get(&format!("{versions}/1.0.0"), &admin).await.ok();
    api.post(
        &format!("/deployments/{}/rollback", s(&d1["id"])),
        &admin,
        json!({}),
    )
    .await
    .ok();
    assert_eq!(say(3).await, ["Welcome, v1", "Welcome, v1: 9 to 5"]);

    // A revision without the page: the text reads as empty, and the step error says which
    // path the deployed revision lacks, in the project's error list.
    let v3 = publish(json!({"faqs": greeting("v3")["faqs"].clone()})).await;
    // Published, not deployed: the environment (converse in it as agent runs and tasks do)
    // still reads the revision its deployment runs.
    let in_env = api
        .post(
            &format!("/projects/{pid}/bot/converse"),
            &admin,
            json!({"message": {"type": "text", "content": "hi"}, "environmentName": "production"}),
        )
        .await
        .ok();
    assert_eq!(
        texts(&json!({"messages": in_env["responses"]})),
        ["Welcome, v1", "Welcome, v1: 9 to 5"]
    );
    assert_eq!(deploy("1.0.2").await, v3);
    api.put(
        &format!("/projects/{pid}/environments/{env}"),
        &admin,
        json!({"depVersion": "1.0.2"}),
    )
    .await
    .ok();
    assert_eq!(say(4).await, ["", "v3: 9 to 5"]);
    let messages = error_messages(&api, &admin, &pid).await;
    assert!(
        messages.iter().any(|m| m
            .contains("cms.home.greeting.text.value is not in the CMS content this bot runs with")),
        "{messages:?}"
    );
}

/// `botbox cms pull` writes the project's CMS as `cms.yml`; `botbox cms push` publishes the
/// edited file, and a problem in it names the file and the place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_pulls_and_pushes_cms_yml() {
    use crate::cli::{bb, ok, pushed_folder};
    let server = Server::start(Backend::Sqlite, &[]).await;
    let (home, work) = pushed_folder(&server.base, "site");
    let run = |args: &[&str]| bb(home.path(), work.path(), &server.base, args, "");
    assert!(ok(run(&["cms", "pull", "--dir", "site"])).contains("wrote"));
    let file = work.path().join("site/cms.yml");
    let pulled: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        serde_json::to_value(pulled).unwrap(),
        json!({"pages": {}, "faqs": {}})
    );

    std::fs::write(
        &file,
        "pages:\n  home:\n    greeting:\n      text: {type: text, value: Hello from the CMS}\n",
    )
    .unwrap();
    let off = run(&["cms", "push", "--dir", "site", "-m", "the greeting"]);
    assert_ne!(off.code, 0, "{}", off.stdout);
    assert!(
        off.stderr
            .contains("the project has no CMS; `botbox cms enable` turns it on"),
        "{}",
        off.stderr
    );
    assert!(ok(run(&["cms", "enable", "--dir", "site"])).contains("The CMS of project site is on"));
    let out = ok(run(&["cms", "push", "--dir", "site", "-m", "the greeting"]));
    assert!(out.contains("Published"), "{out}");
    let o = run(&["cms", "pull", "--dir", "site"]);
    assert_ne!(o.code, 0, "an existing file is kept without --force");
    ok(run(&["cms", "pull", "--dir", "site", "--force"]));
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("Hello from the CMS")
    );

    std::fs::write(
        &file,
        "pages:\n  home:\n    greeting:\n      size: {type: slider, value: 200}\n",
    )
    .unwrap();
    let o = run(&["cms", "push", "--dir", "site"]);
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("cms.yml")
            && o.stderr.contains(
                "pages.home.greeting.size: the value 200 is outside the slider's range 0 to 100"
            ),
        "{}",
        o.stderr
    );
}

on_both_backends!(faq_questions_train_the_project_nlu_and_the_bot_answers);

/// Publishing FAQ tables trains the project's NLU: a paraphrase of a question predicts its
/// label as the `faq` trait, and a bot that classifies with it answers with one of the
/// label's answers. A later publish that leaves the FAQs alone trains nothing; an entity of
/// the NLU may not take the trait's name.
async fn faq_questions_train_the_project_nlu_and_the_bot_answers(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let p = create(
        &api,
        &admin,
        "helpdesk",
        json!({"bot": true, "cms": true, "nlu": true, "nluLang": "en"}),
    )
    .await;
    let pid = s(&p["id"]);
    let faqs = helpdesk_faqs();
    let published = api
        .post(
            &format!("/projects/{pid}/cms/revisions"),
            &admin,
            json!({"faqs": faqs, "changelog": "FAQ"}),
        )
        .await
        .ok();
    let trainings = published["nluTrainings"].as_array().unwrap();
    assert_eq!(trainings.len(), 1, "{published}");
    assert_eq!(trainings[0]["nlu"], "helpdesk");
    assert_eq!(trainings[0]["status"], "success", "{published}");

    let predicted = crate::nlu::form(
        &api,
        &format!("/projects/{pid}/nlus/helpdesk/predict"),
        &admin,
        &["which hours are you open", "I would like a refund please"],
        None,
    )
    .await
    .ok();
    let label = |i: usize| predicted["results"][i]["output"]["faq"][0]["label"].clone();
    assert_eq!(label(0), "hours", "{predicted}");
    assert_eq!(label(1), "refund", "{predicted}");

    let me = api.get("/me", &admin).await.ok();
    let bot = helpdesk_bot(&format!("{}:helpdesk", s(&me["username"])));
    api.post(&format!("/projects/{pid}/bot/revisions"), &admin, bot)
        .await
        .ok();
    let say = |text: &'static str| {
        let (api, admin, pid) = (api.clone(), admin.clone(), pid.clone());
        async move {
            let r = converse_text(&api, &admin, &pid, text).await;
            texts(&json!({"messages": r["responses"]}))
        }
    };
    assert_eq!(
        say("at what time do you open").await,
        ["We are open 9 to 5, Monday to Saturday."]
    );
    let delivery = say("how long will shipping take").await;
    assert!(
        ["We deliver in two days.", "Delivery takes two days."].contains(&delivery[0].as_str()),
        "{delivery:?}"
    );

    // Pages change, FAQs do not: nothing is trained.
    let pages_only = api
        .post(
            &format!("/projects/{pid}/cms/revisions"),
            &admin,
            json!({"faqs": faqs, "pages": {"home": {"a": {"t": {"type": "text", "value": "x"}}}}}),
        )
        .await
        .ok();
    assert_eq!(pages_only["nluTrainings"], json!([]), "{pages_only}");

    let taken = api
        .post(
            &format!("/projects/{pid}/nlus/helpdesk/entities"),
            &admin,
            json!({"name": "faq", "type": "trait", "profile": "default", "labels": ["x"]}),
        )
        .await;
    assert_eq!(taken.status, 400);
    assert!(taken.text.contains("reserved"), "{}", taken.text);
}

/// Three FAQ tables (hours, delivery, refund) of five questions each.
fn helpdesk_faqs() -> Value {
    json!({
        "hours": {"questions": ["when are you open", "what are your opening hours",
            "what time do you open", "are you open on sunday", "until when are you open today"],
            "answers": ["We are open 9 to 5, Monday to Saturday."]},
        "delivery": {"questions": ["do you deliver", "how long does shipping take",
            "can you ship to my address", "what does delivery cost", "where is my parcel"],
            "answers": ["We deliver in two days.", "Delivery takes two days."]},
        "refund": {"questions": ["can I get my money back", "how do I return an item",
            "I want a refund", "what is your return policy", "the product is broken, refund me"],
            "answers": ["Returns are free within 30 days."]}
    })
}

/// A bot that classifies with the NLU `nlu_id`'s `faq` trait and answers with the label's
/// CMS answers, or "Sorry?".
fn helpdesk_bot(nlu_id: &str) -> Value {
    json!({
        "name": "helpdesk",
        "nlus": {"help": {"type": "nl", "options": {"nluId": nlu_id,
            "output": "value", "flatten": true, "threshold": 0.3}}},
        "flows": {
            "faq": {
                "intents": {"question": {"initial": true,
                    "classifier": {"nlu": "help", "expression": "faq"},
                    "attributes": {"label": {"nlu": "help", "path": "faq"}}}},
                "states": {"init": {"initial": true, "transitions": {"answer": {"fallback": true}}},
                    "answer": {"end": true, "action": {"name": "text",
                        "options": {"text": "$(cms.faq[attributes.label].answers)"}}}}
            },
            "main": {"fallback": true, "intents": {"any": {"fallback": true}},
                "states": {"init": {"initial": true, "transitions": {"sorry": {"fallback": true}}},
                    "sorry": {"end": true, "action": {"name": "text", "options": {"text": "Sorry?"}}}}}
        }
    })
}

async fn a_project_without_a_cms_refuses_publishes_until_it_is_turned_on(backend: Backend) {
    let (_server, api, admin) = signed_in(backend).await;
    let p = create(&api, &admin, "plain", json!({"bot": true})).await;
    let pid = s(&p["id"]);
    assert_eq!(p["options"]["cms"], false);
    let refused = api
        .post(&format!("/projects/{pid}/cms/revisions"), &admin, doc())
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_contains(
        &refused.text,
        &format!(
            "project plain has no CMS: turn it on with PUT /projects/{pid} {{\"options\": {{\"cms\": true}}}}"
        ),
    );
    let list = api
        .get(&format!("/projects/{pid}/cms/revisions"), &admin)
        .await
        .ok();
    assert_eq!(list["total"], 0);

    let on = api
        .put(
            &format!("/projects/{pid}"),
            &admin,
            json!({"options": {"cms": true}}),
        )
        .await
        .ok();
    assert_eq!(on["options"]["cms"], true);
    assert_eq!(on["options"]["bot"], true, "the other options stay");
    assert_eq!(s(&on["cmsLatestRevision"]).len(), 40, "{on}");
    let published = api
        .post(&format!("/projects/{pid}/cms/revisions"), &admin, doc())
        .await
        .ok();
    assert_eq!(published["changelog"], "the greeting");
}
