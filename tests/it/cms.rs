//! The CMS through the project API: a project made with `options.cms` starts with an empty
//! revision, documents are validated with every problem at its place, each publish is a new
//! immutable revision, deployments bind one (the latest unless named), and revisions count
//! toward the owner's storage.

use crate::common::{
    Api, Backend, InProcess, Receiver, Server, converse_text, generic_channel, one_state_bot,
    post_webhook, s, texts,
};
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

    // A bot naming content the latest revision lacks is warned at push, at the place.
    let naming = one_state_bot(json!({"end": true, "action": {"name": "text",
        "options": {"text": "$(cms.home.greeting.text.value) $(cms.home.greeting.title.value) $(cms.faq.hours.answers)"}}}));
    let pushed = api
        .post(&format!("/projects/{pid}/bot/revisions"), &admin, naming)
        .await
        .ok();
    let warnings: Vec<String> = serde_json::from_value(pushed["warnings"].clone()).unwrap();
    let about: Vec<&String> = warnings.iter().filter(|w| w.contains("cms.")).collect();
    assert_eq!(about.len(), 1, "{warnings:?}");
    assert!(
        about[0].contains("flows.main.states.s.action.options.text")
            && about[0]
                .contains("cms.home.greeting.title is not in the project's latest CMS revision"),
        "{}",
        about[0]
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

on_both_backends!(a_channel_message_reads_the_cms_revision_its_deployment_runs);

/// Publish v1, deploy a bot that reads `$(cms.home.greeting.text.value)`: a channel message
/// answers with v1's text; publish v2 and deploy it: the answer follows; roll back: v1's
/// text again. A revision that lacks the page is a step error in the project's error list.
async fn a_channel_message_reads_the_cms_revision_its_deployment_runs(backend: Backend) {
    let server = Server::start(backend, &["--allow-private-egress"]).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let pid = s(&create(&api, &admin, "greeter", json!({"bot": true, "cms": true})).await["id"]);
    let greeting = |text: &str| {
        json!({"pages": {"home": {"greeting": {"text": {"type": "text", "value": text}}}},
            "faqs": {"hours": {"questions": ["when are you open"], "answers": [format!("{text}: 9 to 5")]}}})
    };
    let publish = |doc: Value| {
        let (api, admin, pid) = (api.clone(), admin.clone(), pid.clone());
        async move {
            s(&api
                .post(&format!("/projects/{pid}/cms/revisions"), &admin, doc)
                .await
                .ok()["revision"])
        }
    };
    let bot = one_state_bot(json!({"end": true, "action": [
        {"name": "text", "options": {"text": "$(cms.home.greeting.text.value)"}},
        {"name": "text", "options": {"text": "$(cms.faq.hours.answers)"}}]}));
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), &admin, bot)
        .await
        .ok()["revision"]);
    let versions = format!("/projects/{pid}/deployment/versions");
    let deploy = |version: &'static str| {
        let (api, admin, versions, rev) =
            (api.clone(), admin.clone(), versions.clone(), rev.clone());
        async move {
            let d = api
                .post(
                    &versions,
                    &admin,
                    json!({"version": version, "botRevision": rev}),
                )
                .await
                .ok();
            s(&d["cmsRevision"])
        }
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
    let errors = api
        .get(&format!("/projects/{pid}/errors"), &admin)
        .await
        .ok();
    let messages: Vec<String> = errors["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| s(&e["errorMessage"]))
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m
                .contains("cms.home.greeting.text.value is not in the CMS revision this bot runs")),
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
    let faqs = json!({
        "hours": {"questions": ["when are you open", "what are your opening hours",
            "what time do you open", "are you open on sunday", "until when are you open today"],
            "answers": ["We are open 9 to 5, Monday to Saturday."]},
        "delivery": {"questions": ["do you deliver", "how long does shipping take",
            "can you ship to my address", "what does delivery cost", "where is my parcel"],
            "answers": ["We deliver in two days.", "Delivery takes two days."]},
        "refund": {"questions": ["can I get my money back", "how do I return an item",
            "I want a refund", "what is your return policy", "the product is broken, refund me"],
            "answers": ["Returns are free within 30 days."]}
    });
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
    let bot = json!({
        "name": "helpdesk",
        "nlus": {"help": {"type": "nl", "options": {"nluId": format!("{}:helpdesk", s(&me["username"])),
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
    });
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
