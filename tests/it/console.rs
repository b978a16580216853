//! The web console's pages as the server sends them: compiled in, and with the headers that
//! keep a bot's content from running script or the page from being framed. (What the page
//! does is tested in a real browser: tests/ai-sdk/console.mjs.)

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_with_a_strict_policy() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    for (path, kind, needle) in [
        ("/", "text/html", "/console/main.js"),
        ("/console/main.js", "text/javascript", "import"),
        ("/console/lib.js", "text/javascript", "textContent"),
        ("/console/app.css", "text/css", ".bubble"),
        (
            "/console/vendor/dagre.esm.js",
            "text/javascript",
            "graphlib",
        ),
        ("/console/vendor/LICENSE", "text/plain", "Chris Pettitt"),
        (
            "/console/nlu-profiles.json",
            "application/json",
            "\"trait\":[\"default\",\"faq\",\"intent\"",
        ),
        ("/favicon.ico", "image/svg+xml", "<svg"),
    ] {
        let r = api.get(path, "").await;
        assert_eq!(r.status, 200, "{path}");
        let h = |name: &str| {
            r.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        assert!(
            h("content-type").starts_with(kind),
            "{path}: {}",
            h("content-type")
        );
        assert!(r.text.contains(needle), "{path}");
        let csp = h("content-security-policy");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(h("x-frame-options"), "DENY");
        assert_eq!(h("x-content-type-options"), "nosniff");
    }
    assert_eq!(api.get("/console/nope.js", "").await.status, 404);
    assert_eq!(api.get("/console/vendor/nope.js", "").await.status, 404);
    // The page has no inline script for the policy to forbid.
    let page = api.get("/", "").await.text;
    assert!(
        !page.contains("<script>") && !page.contains("onclick="),
        "{page}"
    );
}

/// The converse answer lists the step's calls for the console's debug panel: each method
/// run, and each api call with its answer or its error (here the egress policy's refusal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_step_lists_its_api_and_method_calls() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let bot = method_and_api_bot(
        "calls",
        "twice",
        "return 'twice';",
        "http://127.0.0.1:9/stock?key=1",
        "done",
    );
    let (pid, _) = deploy(&api, &admin, bot).await;
    let r = api
        .post(
            &format!("/projects/{pid}/bot/converse"),
            &admin,
            serde_json::json!({"message": {"type": "text", "content": "go"}}),
        )
        .await
        .ok();
    let calls = r["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{r}");
    assert_eq!(
        calls[0],
        serde_json::json!({"type": "method", "name": "twice"})
    );
    assert_eq!(calls[1]["type"], "api");
    assert_eq!(calls[1]["method"], "GET");
    assert!(
        calls[1]["error"]
            .as_str()
            .unwrap()
            .contains("refused by the server's egress policy"),
        "{r}"
    );
}

/// The bot as YAML for the console's source view: the same document, and a clear 400 for a
/// format it does not know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_reads_as_yaml() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, _) = deploy(&api, &admin, example_bot("hello")).await;
    let r = api
        .get(&format!("/projects/{pid}/bot?format=yaml"), &admin)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/yaml")
    );
    let back: serde_json::Value =
        serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&r.text).unwrap()).unwrap();
    assert_eq!(
        back,
        api.get(&format!("/projects/{pid}/bot"), &admin).await.ok()
    );
    let r = api
        .get(&format!("/projects/{pid}/bot?format=xml"), &admin)
        .await;
    assert_eq!(r.status, 400);
    assert!(r.text.contains("format: json or yaml"), "{}", r.text);
}

/// The chat tester in an environment records its steps (`record`): the conversation is in
/// the environment's transcripts as channel `console` with who chatted, and analytics count
/// it only when asked to include test traffic. Without `record` nothing is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_tester_records_its_conversations_as_test_traffic() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let bot = one_state_bot(
        serde_json::json!({"end": true, "action": {"name": "text", "options": {"text": "hello"}}}),
    );
    let (pid, _) = deploy(&api, &admin, bot).await;
    let say = |record: bool| {
        let (api, admin, pid) = (api.clone(), admin.clone(), pid.clone());
        async move {
            api.post(
                &format!("/projects/{pid}/bot/converse"),
                &admin,
                serde_json::json!({"message": {"type": "text", "content": "hi"},
                    "environmentName": "production", "record": record}),
            )
            .await
            .ok()
        }
    };
    say(false).await;
    let lines = |api: Api, admin: String, pid: String| async move {
        api.get(
            &format!("/projects/{pid}/transcripts?environment=production&after=-1"),
            &admin,
        )
        .await
        .ok()["data"]
            .as_array()
            .unwrap()
            .clone()
    };
    assert!(
        lines(api.clone(), admin.clone(), pid.clone())
            .await
            .is_empty()
    );
    say(true).await;
    let kept = lines(api.clone(), admin.clone(), pid.clone()).await;
    let seen: Vec<(String, String, String)> = kept
        .iter()
        .map(|l| (s(&l["channelId"]), s(&l["userId"]), s(&l["direction"])))
        .collect();
    let me = s(&api.get("/me", &admin).await.ok()["username"]);
    assert_eq!(
        seen,
        [
            ("console".into(), me.clone(), "in".into()),
            ("console".into(), me, "out".into())
        ]
    );
    let analytics = |include: &'static str| {
        let (api, admin, pid) = (api.clone(), admin.clone(), pid.clone());
        async move {
            api.get(
                &format!("/projects/{pid}/analytics?environment=production{include}"),
                &admin,
            )
            .await
            .ok()["messages"]
                .as_i64()
                .unwrap()
        }
    };
    assert_eq!(
        analytics("").await,
        0,
        "test traffic is left out by default"
    );
    assert_eq!(analytics("&includeTests=true").await, 1);
}

/// The project list says what each project is and when it last changed: a project without a
/// description takes its bot's `desc` at push, one with its own keeps it; times in Unix ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_carry_a_description_and_their_last_change() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let mut bot = one_state_bot(serde_json::json!({"end": true}));
    bot["desc"] = "Orders pizza".into();
    let plain = s(&api
        .post("/projects", &admin, serde_json::json!({"name": "plain"}))
        .await
        .ok()["id"]);
    let own = s(&api
        .post(
            "/projects",
            &admin,
            serde_json::json!({"name": "own", "description": "Our own words"}),
        )
        .await
        .ok()["id"]);
    for pid in [&plain, &own] {
        api.post(
            &format!("/projects/{pid}/bot/revisions"),
            &admin,
            bot.clone(),
        )
        .await
        .ok();
    }
    let list = api.get("/projects", &admin).await.ok();
    let find = |id: &str| {
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(find(&plain)["description"], "Orders pizza");
    assert_eq!(find(&own)["description"], "Our own words");
    let p = find(&plain);
    assert!(p["createdAt"].as_i64().unwrap() > 0, "{p}");
    assert!(
        p["updatedAt"].as_i64().unwrap() >= p["createdAt"].as_i64().unwrap(),
        "{p}"
    );
}

/// A project's page in one request: the project, its revisions, its environments with their
/// channels, its deployments and CMS revisions; a stranger gets the same 404 as for the
/// project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_page_is_one_request() {
    let server = InProcess::start(Backend::Sqlite).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, env) = deploy(
        &api,
        &admin,
        one_state_bot(serde_json::json!({"end": true})),
    )
    .await;
    let ch = generic_channel(&api, &admin, &pid, &env, "https://example.com/hook").await;
    let o = api
        .get(&format!("/projects/{pid}/overview"), &admin)
        .await
        .ok();
    assert_eq!(o["project"]["id"], pid.as_str());
    assert_eq!(o["botRevisions"][0]["version"], "0.0.1", "{o}");
    assert_eq!(o["environments"][0]["name"], "production");
    assert_eq!(o["environments"][0]["channels"][0]["id"], ch.as_str());
    assert!(o["environments"][0]["channels"][0]["webhook"].is_string());
    assert_eq!(o["deployments"][0]["version"], "1.0.0");
    assert!(o["cmsRevisions"].as_array().unwrap().is_empty());
    api.post(
        "/users",
        &admin,
        serde_json::json!({"username": "stranger", "password": "stranger-password", "roleId": "developer"}),
    )
    .await
    .ok();
    let stranger = s(&api.login("stranger", "stranger-password").await["id"]);
    let r = api
        .call(
            "GET",
            &format!("/projects/{pid}/overview"),
            Some(&stranger),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
}
