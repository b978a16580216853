//! kata-cli 2.7.2 against botbox: kata-cli's calls, each test one of its commands, with
//! the paths, bodies and headers its API client sends and assertions on exactly the response
//! fields it reads (from its source: components/{users,projects,bots,nlus}/*.ts; the spec of
//! each call is in docs/moving-from-kata.md).

use crate::common::*;
use serde_json::{Value, json};

on_both_backends!(
    cli_login_refuses_a_wrong_password_with_a_message,
    a_cli_login_token_reads_as_a_user_token,
    an_unknown_token_is_not_found,
    a_created_project_is_listed_in_a_page,
    select_project_finds_a_project_by_name,
    select_project_of_an_unknown_name_is_not_found_with_a_message,
    the_first_push_is_version_0_0_1,
    revisions_are_listed_newest_first_after_the_initial_one,
    pull_reads_a_revision_with_its_flows_and_version,
    pushing_a_pulled_bot_yml_bumps_its_existing_version_with_a_warning,
    a_push_on_a_revision_that_is_no_longer_the_latest_asks_to_pull,
    a_project_with_an_nlu_has_an_nlu_revision_before_any_training,
    create_deployment_makes_the_first_deployment_of_the_latest_revisions,
    create_environment_lists_it_on_the_current_deployment,
    update_environment_moves_it_to_another_deployment,
    create_channel_answers_the_webhook,
    channel_options_are_answered_as_a_json_string,
    list_channel_shows_each_channel_with_its_name_type_and_id,
    update_channel_changes_the_listed_channel_by_id,
    delete_channel_removes_the_channel_found_in_the_environment,
    a_method_error_on_a_channel_is_listed_with_its_user_and_message,
    errors_of_another_group_are_left_out,
    rollback_moves_the_environment_back_and_names_it,
    console_converses_with_its_default_session_then_the_one_it_got_back,
    clearing_the_caches_leaves_the_bot_answering_as_before,
    nl_pull_reads_the_nlus_name_lang_visibility_and_entities,
    nl_push_edits_the_entity_map_by_name,
    an_untrained_nlu_has_no_active_job,
    nl_train_answers_a_row_id_per_training_line,
    nl_predict_answers_its_result_as_a_list,
    a_trained_nlu_lists_its_revision,
    training_data_is_found_by_login_and_nlu_name,
    list_profiles_answers_a_bare_array_of_profiles,
    create_team_lists_the_team_among_the_users_teams,
    list_team_user_shows_the_teams_creator_as_team_admin,
    a_team_token_reads_as_a_token_of_its_team,
    invite_member_adds_a_user_with_their_accounts_role,
    delete_project_makes_the_project_gone,
    other_clients_get_page_objects_and_plain_text_errors,
);

/// kata-cli's HTTP client: superagent 3.7.0 under zaun. Every request carries its User-Agent,
/// `Content-Type: application/json` (even bodiless GETs) and `Accept: application/json`.
/// Sent through `api` (in-process).
struct Kata {
    api: Api,
    token: Option<String>,
}

struct Got {
    status: u16,
    body: Value,
}

impl Got {
    /// Asserts a refusal with `status` whose `message` (what kata-cli prints) contains `part`.
    #[track_caller]
    fn refused(&self, status: u16, part: &str) {
        assert_eq!(self.status, status, "{}", self.body);
        let message = self.body["message"].as_str();
        assert!(message.is_some_and(|m| m.contains(part)), "{}", self.body);
    }
}

impl Kata {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Got {
        let mut rb = self
            .api
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}{path}", self.api.base),
            )
            .header("user-agent", "node-superagent/3.7.0")
            .header("content-type", "application/json")
            .header("accept", "application/json");
        if let Some(t) = &self.token {
            rb = rb.header("authorization", format!("Bearer {t}"));
        }
        if let Some(b) = body {
            rb = rb.body(b.to_string());
        }
        let Res { status, text, .. } = self.api.send(rb).await;
        let body = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!("{method} {path}: kata-cli reads JSON ({e}): {status} {text}")
        });
        Got { status, body }
    }
    async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let g = self.call(method, path, body).await;
        assert!(
            (200..300).contains(&g.status),
            "{method} {path}: {} {}",
            g.status,
            g.body
        );
        g.body
    }
    async fn get(&self, path: &str) -> Value {
        self.ok("GET", path, None).await
    }
    async fn multipart(&self, path: &str, field: &str, text: &str, file: bool) -> Value {
        let part = reqwest::multipart::Part::text(text.to_string());
        let part = if file {
            part.file_name("training.txt")
        } else {
            part
        };
        let form = reqwest::multipart::Form::new().part(field.to_string(), part);
        let r = self
            .api
            .send(
                self.api
                    .http
                    .post(format!("{}{path}", self.api.base))
                    .header("user-agent", "node-superagent/3.7.0")
                    .bearer_auth(self.token.as_deref().unwrap())
                    .multipart(form),
            )
            .await;
        assert!((200..300).contains(&r.status), "{path}: {}", r.status);
        r.json()
    }
}

/// kata-cli's `init` template (components/bots/bot.ts), as `push` sends it.
fn init_bot(pid: &str) -> Value {
    json!({
        "schema": "kata.ai/schema/kata-ml/1.0",
        "name": "mybot",
        "desc": "My First Bot",
        "flows": {"hello": {
            "fallback": true,
            "intents": {"greeting": {"initial": true, "condition": "content == 'hi'"}, "fallback": {"fallback": true}},
            "states": {
                "init": {"initial": true, "transitions": {"greet": {"condition": "intent == \"greeting\""}, "other": {"fallback": true}}},
                "greet": {"end": true, "action": {"name": "text", "options": {"text": "hi!"}}},
                "other": {"end": true, "action": {"name": "text", "options": {"text": "sorry!"}}}
            }
        }},
        "tag": null,
        "id": pid
    })
}

/// kata push: the latest revision, then a PUT on it; reads `revision.substring(0,7)`.
async fn push(k: &Kata, pid: &str, bot: Value) -> Value {
    let latest = k.get(&format!("/projects/{pid}/bot/")).await;
    let rev = latest["revision"]
        .as_str()
        .expect("push reads the latest revision")
        .to_string();
    let pushed = k
        .ok(
            "PUT",
            &format!("/projects/{pid}/bot/revisions/{rev}"),
            Some(bot),
        )
        .await;
    assert!(pushed["revision"].as_str().unwrap().len() >= 7);
    assert_eq!(k.get(&format!("/projects/{pid}")).await["name"], "mybot");
    pushed
}

/// `init_bot` with the greeting edited to "hello!".
fn edited_bot(pid: &str) -> Value {
    let mut bot = init_bot(pid);
    bot["flows"]["hello"]["states"]["greet"]["action"]["options"]["text"] = json!("hello!");
    bot
}

/// A server where alice is a developer; kata-cli not logged in yet: the server, an
/// administrator's token and the client.
async fn server(backend: Backend) -> (InProcess, String, Kata) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    add_developer(&api, &admin, "alice").await;
    (server, admin, Kata { api, token: None })
}

/// Adds developer `name`, whose password is `<name>-password`.
async fn add_developer(api: &Api, admin: &str, name: &str) {
    let password = format!("{name}-password");
    api.post(
        "/users",
        admin,
        json!({"username": name, "password": password, "roleId": "developer"}),
    )
    .await
    .ok();
}

/// kata-cli logged in as alice through `/cli-login` (`login -u -p`, which reads `data.id`
/// and `data.userId`).
struct Alice {
    _server: InProcess,
    admin: String,
    k: Kata,
    id: String,
    token: String,
}

/// login -u alice -p `password`: kata-cli's POST /cli-login.
async fn cli_login(k: &Kata, password: &str) -> Got {
    let body = json!({"username": "alice", "password": password});
    k.call("POST", "/cli-login", Some(body)).await
}

async fn alice(backend: Backend) -> Alice {
    let (server, admin, mut k) = server(backend).await;
    let login = cli_login(&k, "alice-password").await;
    assert_eq!(login.status, 200, "{}", login.body);
    let token = s(&login.body["id"]);
    k.token = Some(token.clone());
    Alice {
        _server: server,
        admin,
        k,
        id: s(&login.body["userId"]),
        token,
    }
}

/// alice's project mybot (bot, CMS and NLU) made by `create-project`.
struct Project {
    alice: Alice,
    pid: String,
}

impl std::ops::Deref for Project {
    type Target = Kata;
    fn deref(&self) -> &Kata {
        &self.alice.k
    }
}

impl Project {
    /// `/projects/{pid}{rest}`.
    fn path(&self, rest: &str) -> String {
        format!("/projects/{}{rest}", self.pid)
    }
}

async fn project(backend: Backend) -> Project {
    let alice = alice(backend).await;
    let p = alice
        .k
        .ok(
            "POST",
            "/projects",
            Some(json!({"name": "mybot", "description": "desc", "options": {"bot": true, "cms": true, "nlu": true, "timezone": 7, "nluLang": "en", "nluVisibility": "private"}})),
        )
        .await;
    assert_eq!(p["name"], "mybot");
    Project {
        pid: s(&p["id"]),
        alice,
    }
}

/// `project` pushed twice: kata-cli's template, then with the greeting edited; the second
/// push's revision.
async fn pushed_twice(backend: Backend) -> (Project, String) {
    let p = project(backend).await;
    push(&p, &p.pid, init_bot(&p.pid)).await;
    let second = push(&p, &p.pid, edited_bot(&p.pid)).await;
    (p, s(&second["revision"]))
}

/// create-deployment as kata-cli does it: the project, the latest bot, NLU and CMS revisions
/// (each a string it cuts), then the deployment `version` of them; the bot revision.
async fn create_deployment(p: &Project, version: &str) -> String {
    p.get(&p.path("")).await;
    let bot_rev = s(&p.get(&p.path("/bot/")).await["revision"]);
    let nlu_rev = s(&p.get(&p.path("/nlu/revisions")).await["data"][0]["revision"]);
    let cms_rev = s(&p.get(&p.path("/cms/")).await["revision"]);
    let pid = &p.pid;
    p.ok(
        "POST",
        &p.path("/deployment/versions"),
        Some(json!({"version": version, "botId": pid, "botRevision": bot_rev, "nluId": pid, "nluRevision": nlu_rev, "cmsId": pid, "cmsRevision": cms_rev, "modules": null})),
    )
    .await;
    bot_rev
}

/// create-environment Development (slug dev) on the current deployment; its id.
async fn create_environment(p: &Project) -> String {
    let version = p.get(&p.path("/deployment/")).await["version"].clone();
    p.ok(
        "POST",
        &p.path("/environments"),
        Some(json!({"depId": p.pid, "depVersion": version, "name": "Development", "slug": "dev"})),
    )
    .await;
    s(&p.get(&p.path("/environments")).await["data"][0]["id"])
}

/// update-environment: environment `env` to deployment `version`.
async fn move_environment(p: &Project, env: &str, version: &str) -> Value {
    p.ok(
        "PUT",
        &p.path(&format!("/environments/{env}")),
        Some(json!({"depVersion": version})),
    )
    .await
}

/// A deployment 0.0.2 of bot revision `rev` alone (no ids), and update-environment of
/// `env` to it.
async fn deploy_again(p: &Project, env: &str, rev: &str) {
    p.ok(
        "POST",
        &p.path("/deployment/versions"),
        Some(json!({"version": "0.0.2", "botRevision": rev})),
    )
    .await;
    move_environment(p, env, "0.0.2").await;
}

/// `project` with the edited greeting ("hello!") deployed as 0.0.1 on environment
/// Development: the project and the environment's id.
async fn deployed(backend: Backend) -> (Project, String) {
    let p = project(backend).await;
    push(&p, &p.pid, edited_bot(&p.pid)).await;
    create_deployment(&p, "0.0.1").await;
    let env = create_environment(&p).await;
    (p, env)
}

/// The body of a generic channel named `name` as kata-cli's create-channel sends it.
fn web_channel(name: &str, token: &str, url: &str) -> Value {
    json!({"name": name, "type": "generic", "options": {"token": token, "refreshToken": null, "secret": null}, "url": url})
}

/// The body of an fbmessenger channel named fb as kata-cli's create-channel sends it.
fn fb_channel() -> Value {
    json!({"name": "fb", "type": "fbmessenger", "options": {"token": "page-token", "refreshToken": null, "secret": "app-secret"}, "url": "https://graph.facebook.com/v2.6/me/messages"})
}

/// create-channel of web (generic) in the channels at `chans`: its answer.
async fn create_web(p: &Project, chans: &str) -> Value {
    let web = web_channel("web", "tok", "http://127.0.0.1:9/hook");
    p.ok("POST", chans, Some(web)).await
}

/// `deployed` with two channels, web (generic) and fb (fbmessenger): the project, the
/// environment's id and its channels' path.
async fn two_channels(backend: Backend) -> (Project, String, String) {
    let (p, env) = deployed(backend).await;
    let chans = p.path(&format!("/environments/{env}/channels"));
    create_web(&p, &chans).await;
    p.ok("POST", &chans, Some(fb_channel())).await;
    (p, env, chans)
}

/// The id of the channel named `name` in a list of channels.
fn channel_id(list: &Value, name: &str) -> String {
    let found = list.as_array().unwrap().iter().find(|c| c["name"] == name);
    s(&found.unwrap_or_else(|| panic!("no channel {name} in {list}"))["id"])
}

/// `deployed` with a web channel, then a bot whose greeting runs a method that throws
/// deployed as 0.0.2 and said "hi" to on the channel by user u1: the project, the
/// environment's id and the channel's id.
async fn failed_on_a_channel(backend: Backend) -> (Project, String, String) {
    let (p, env) = deployed(backend).await;
    let chans = p.path(&format!("/environments/{env}/channels"));
    let web = create_web(&p, &chans).await;
    let mut failing = init_bot(&p.pid);
    failing["methods"] = json!({"boom()": "throw new Error('kaboom');"});
    failing["flows"]["hello"]["states"]["greet"]["action"] =
        json!({"name": "method", "method": "boom"});
    let rev = s(&push(&p, &p.pid, failing).await["revision"]);
    deploy_again(&p, &env, &rev).await;
    let hi = json!({"userId": "u1", "messages": [{"type": "text", "content": "hi"}]});
    let r = p
        .api
        .send(p.api.http.post(s(&web["webhook"])).json(&hi))
        .await;
    assert!((200..300).contains(&r.status), "{}", r.text);
    (p, env, s(&web["id"]))
}

/// Says `text` through `/bot/converse`, with `body`'s fields (environmentName, session).
async fn converse(p: &Project, mut body: Value, text: &str) -> Value {
    body["message"] = json!({"type": "text", "content": text});
    p.ok("POST", &p.path("/bot/converse"), Some(body)).await
}

/// nl-pull's `name` of the project's NLU.
async fn nlu_name(p: &Project) -> String {
    s(&p.get(&p.path("/nlu/")).await["name"])
}

/// `project` with nl-push's intent entity (greet, bye) and nl-train of six lines: the
/// project, the NLU's name and train's answer.
async fn trained(backend: Backend) -> (Project, String, Value) {
    let p = project(backend).await;
    let name = nlu_name(&p).await;
    p.ok(
        "POST",
        &p.path(&format!("/nlus/{name}/entities")),
        Some(json!({"type": "trait", "profile": "intent", "labels": ["greet", "bye"], "name": "intent"})),
    )
    .await;
    let lines = "hello #intent:greet\nhi there #intent:greet\ngood morning #intent:greet\nbye #intent:bye\ngoodbye #intent:bye\nsee you later #intent:bye\n";
    let train = p.path(&format!("/nlus/{name}/train"));
    let trained = p.multipart(&train, "file", lines, true).await;
    (p, name, trained)
}

/// alice with team acme made by create-team: alice, create-team's answer and the team's
/// id, as kata-cli reads it from the user's `teams[]`.
async fn team(backend: Backend) -> (Alice, Value, String) {
    let alice = alice(backend).await;
    let team = alice
        .k
        .ok(
            "POST",
            "/teams",
            Some(json!({"username": "acme", "password": "", "roleId": "teamAdmin"})),
        )
        .await;
    let me = alice.k.get(&format!("/users/{}", alice.id)).await;
    let acme = me["teams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["username"] == "acme")
        .expect("teams[] with username");
    let id = s(&acme["teamId"]);
    (alice, team, id)
}

/// switch team: a team token of team `id`.
async fn team_token(k: &Kata, id: &str) -> String {
    let t = k
        .ok(
            "POST",
            "/tokens",
            Some(json!({"type": "team", "teamId": id})),
        )
        .await;
    s(&t["id"])
}

async fn cli_login_refuses_a_wrong_password_with_a_message(backend: Backend) {
    let (_server, _, k) = server(backend).await;
    cli_login(&k, "nope").await.refused(401, "incorrect");
}

/// login -t: GET /tokens/{token}; reads type and teamId.
async fn a_cli_login_token_reads_as_a_user_token(backend: Backend) {
    let a = alice(backend).await;
    let t = a.k.get(&format!("/tokens/{}", a.token)).await;
    assert_eq!(t["type"], "user");
}

async fn an_unknown_token_is_not_found(backend: Backend) {
    let a = alice(backend).await;
    assert_eq!(
        a.k.call("GET", "/tokens/not-my-token", None).await.status,
        404
    );
}

/// list-project: the created project, in a page object.
async fn a_created_project_is_listed_in_a_page(backend: Backend) {
    let p = project(backend).await;
    let list = p.get("/projects").await;
    assert_eq!(list["data"][0]["id"], p.pid.as_str());
    let page = p.get("/projects?limit=10&page=1").await;
    assert_eq!(
        (
            page["total"].as_i64(),
            page["page"].as_i64(),
            page["limit"].as_i64()
        ),
        (Some(1), Some(1), Some(10))
    );
}

async fn select_project_finds_a_project_by_name(backend: Backend) {
    let p = project(backend).await;
    let by_name = p.get("/projects/getProjectByName?name=mybot").await;
    assert_eq!(
        (by_name["id"].as_str(), by_name["name"].as_str()),
        (Some(p.pid.as_str()), Some("mybot"))
    );
}

async fn select_project_of_an_unknown_name_is_not_found_with_a_message(backend: Backend) {
    let p = project(backend).await;
    let missing = p
        .call("GET", "/projects/getProjectByName?name=nope", None)
        .await;
    assert_eq!(missing.status, 404);
    assert!(missing.body["message"].is_string());
}

async fn the_first_push_is_version_0_0_1(backend: Backend) {
    let p = project(backend).await;
    let first = push(&p, &p.pid, init_bot(&p.pid)).await;
    assert_eq!(first["version"], "0.0.1");
}

async fn revisions_are_listed_newest_first_after_the_initial_one(backend: Backend) {
    let (p, second) = pushed_twice(backend).await;
    let revs = p.get(&p.path("/bot/revisions")).await;
    let listed: Vec<&str> = revs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_str().unwrap())
        .collect();
    assert_eq!(listed[0], second, "newest first");
    assert_eq!(listed.len(), 3, "two pushes and the initial revision");
}

async fn pull_reads_a_revision_with_its_flows_and_version(backend: Backend) {
    let (p, second) = pushed_twice(backend).await;
    let pulled = p.get(&p.path(&format!("/bot/revisions/{second}"))).await;
    assert_eq!(
        pulled["flows"]["hello"]["states"]["greet"]["action"]["options"]["text"],
        "hello!"
    );
    assert_eq!(pulled["version"], "0.0.2");
}

/// pull strips id, revision and changelog; the bot.yml's version (0.0.2) exists: push bumps it.
async fn pushing_a_pulled_bot_yml_bumps_its_existing_version_with_a_warning(backend: Backend) {
    let (p, second) = pushed_twice(backend).await;
    let mut from_pull = p.get(&p.path(&format!("/bot/revisions/{second}"))).await;
    for key in ["id", "revision", "changelog"] {
        from_pull.as_object_mut().unwrap().remove(key);
    }
    from_pull["tag"] = Value::Null;
    from_pull["id"] = json!(p.pid);
    let third = push(&p, &p.pid, from_pull).await;
    assert_eq!(third["version"], "0.0.3");
    assert!(
        third["warnings"]
            .to_string()
            .contains("0.0.2 already exists"),
        "{}",
        third["warnings"]
    );
}

async fn a_push_on_a_revision_that_is_no_longer_the_latest_asks_to_pull(backend: Backend) {
    let (p, second) = pushed_twice(backend).await;
    push(&p, &p.pid, init_bot(&p.pid)).await;
    let stale = p
        .call(
            "PUT",
            &p.path(&format!("/bot/revisions/{second}")),
            Some(init_bot(&p.pid)),
        )
        .await;
    stale.refused(409, "pull");
}

/// create-deployment cuts the newest NLU revision's string (kata-cli crashed without one).
async fn a_project_with_an_nlu_has_an_nlu_revision_before_any_training(backend: Backend) {
    let p = project(backend).await;
    assert_eq!(
        p.get(&p.path("/nlu/revisions")).await["data"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

async fn create_deployment_makes_the_first_deployment_of_the_latest_revisions(backend: Backend) {
    let p = project(backend).await;
    push(&p, &p.pid, init_bot(&p.pid)).await;
    let no_dep = p.call("GET", &p.path("/deployment/"), None).await;
    assert_eq!(no_dep.status, 404, "kata-cli then uses 0.0.1");
    let bot_rev = create_deployment(&p, "0.0.1").await;
    assert_eq!(p.get(&p.path("/deployment/")).await["version"], "0.0.1");
    let deps = p.get(&p.path("/deployment/versions")).await;
    let d0 = &deps["data"][0];
    assert!(
        d0["name"].is_string() && d0["version"] == "0.0.1" && d0["botRevision"] == bot_rev.as_str(),
        "{d0}"
    );
}

async fn create_environment_lists_it_on_the_current_deployment(backend: Backend) {
    let p = project(backend).await;
    push(&p, &p.pid, init_bot(&p.pid)).await;
    create_deployment(&p, "0.0.1").await;
    assert_eq!(p.get(&p.path("/environments")).await["data"], json!([]));
    create_environment(&p).await;
    let envs = p.get(&p.path("/environments")).await;
    let env = &envs["data"][0];
    assert_eq!(
        (
            env["name"].as_str(),
            env["slug"].as_str(),
            env["depVersion"].as_str()
        ),
        (Some("Development"), Some("dev"), Some("0.0.1"))
    );
}

/// A deployment of revisions alone (no ids) is listed; update-environment moves to it.
async fn update_environment_moves_it_to_another_deployment(backend: Backend) {
    let (p, env) = deployed(backend).await;
    let bot_rev = s(&p.get(&p.path("/bot/")).await["revision"]);
    let nlu_rev = s(&p.get(&p.path("/nlu/revisions")).await["data"][0]["revision"]);
    let cms_rev = s(&p.get(&p.path("/cms/")).await["revision"]);
    p.ok(
        "POST",
        &p.path("/deployment/versions"),
        Some(json!({"version": "0.0.2", "botRevision": bot_rev, "nluRevision": nlu_rev, "cmsRevision": cms_rev})),
    )
    .await;
    let all = p.get(&p.path("/deployment/versions?limit=1000000")).await;
    assert!(
        all["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["version"] == "0.0.2")
    );
    assert!(move_environment(&p, &env, "0.0.2").await.is_object());
    assert_eq!(
        p.get(&p.path("/environments")).await["data"][0]["depVersion"],
        "0.0.2"
    );
}

/// Before it, list-channel answers an empty bare array.
async fn create_channel_answers_the_webhook(backend: Backend) {
    let (p, env) = deployed(backend).await;
    let chans = p.path(&format!("/environments/{env}/channels"));
    assert_eq!(p.get(&chans).await, json!([]));
    let web = create_web(&p, &chans).await;
    assert!(web["webhook"].as_str().unwrap().contains("/webhooks/"));
}

async fn channel_options_are_answered_as_a_json_string(backend: Backend) {
    let (p, env) = deployed(backend).await;
    let fb = p
        .ok(
            "POST",
            &p.path(&format!("/environments/{env}/channels")),
            Some(fb_channel()),
        )
        .await;
    let opts: Value =
        serde_json::from_str(fb["options"].as_str().expect("options as a JSON string")).unwrap();
    assert!(opts.is_object());
}

async fn list_channel_shows_each_channel_with_its_name_type_and_id(backend: Backend) {
    let (p, _, chans) = two_channels(backend).await;
    let listed = p.get(&chans).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{listed}");
    assert!(listed[0]["type"].is_string() && listed[0]["id"].is_string());
}

async fn update_channel_changes_the_listed_channel_by_id(backend: Backend) {
    let (p, _, chans) = two_channels(backend).await;
    let web_id = channel_id(&p.get(&chans).await, "web");
    let updated = p
        .ok(
            "PUT",
            &format!("{chans}/{web_id}"),
            Some(web_channel("web", "tok2", "http://127.0.0.1:9/hook2")),
        )
        .await;
    assert_eq!(updated["url"], "http://127.0.0.1:9/hook2");
    assert!(
        updated["options"].as_str().unwrap().contains("tok2"),
        "{updated}"
    );
}

/// delete-channel finds the channel in the environment's `channels[]`.
async fn delete_channel_removes_the_channel_found_in_the_environment(backend: Backend) {
    let (p, env, chans) = two_channels(backend).await;
    let env_full = p.get(&p.path(&format!("/environments/{env}"))).await;
    let fb_id = channel_id(&env_full["channels"], "fb");
    p.ok("DELETE", &format!("{chans}/{fb_id}"), None).await;
    assert_eq!(p.get(&chans).await.as_array().unwrap().len(), 1);
}

/// kata-cli asks for today's user errors (group 1000, codes 1001..1100) with RFC 3339 times.
async fn a_method_error_on_a_channel_is_listed_with_its_user_and_message(backend: Backend) {
    let (p, env, web_id) = failed_on_a_channel(backend).await;
    let codes: Vec<String> = (1001..=1100).map(|c| c.to_string()).collect();
    let today = time::OffsetDateTime::now_utc().date();
    let errors = p
        .get(&p.path(&format!(
            "/errors?environmentId={env}&channelId={web_id}&errorGroup=1000&errorCode={}&start={}T00%3A00%3A00.000Z&end={}T23%3A59%3A59.999Z",
            codes.join("%2C"),
            today,
            today
        )))
        .await;
    let e = &errors["data"][0];
    assert!(e["timestamp"].is_i64(), "{errors}");
    assert_eq!(e["errorCode"], "method-error");
    assert_eq!(
        e["userId"], "u1",
        "the error names the user whose conversation it was"
    );
    assert!(
        e["errorMessage"].as_str().unwrap().contains("kaboom"),
        "{e}"
    );
}

async fn errors_of_another_group_are_left_out(backend: Backend) {
    let (p, _, _) = failed_on_a_channel(backend).await;
    let none = p.get(&p.path("/errors?errorGroup=4000")).await;
    assert_eq!(none["data"], json!([]));
}

async fn rollback_moves_the_environment_back_and_names_it(backend: Backend) {
    let (p, env) = deployed(backend).await;
    let rev = s(&p.get(&p.path("/bot/")).await["revision"]);
    deploy_again(&p, &env, &rev).await;
    let all = p
        .get(&p.path("/deployment/versions?limit=1000000&page=1"))
        .await;
    let d1 = all["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["version"] == "0.0.1")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let rb = p
        .ok(
            "POST",
            &format!("/deployments/{d1}/rollback"),
            Some(json!({"author": "alice", "changelog": "bad release", "version": "0.0.1"})),
        )
        .await;
    assert_eq!(rb["environments"], json!(["Development"]));
    assert_eq!(
        p.get(&p.path("/environments")).await["data"][0]["depVersion"],
        "0.0.1"
    );
}

/// console: kata-cli's default session first, then the session it got back.
async fn console_converses_with_its_default_session_then_the_one_it_got_back(backend: Backend) {
    let (p, _) = deployed(backend).await;
    let default_session = json!({"id": "test~from~console", "channelId": "console-channel", "environmentId": "console-environment",
        "deploymentId": "console-deployment", "dataKey": null, "states": {}, "contexes": {}, "history": [], "current": null,
        "meta": null, "timestamp": 1, "data": {}, "createdAt": 1, "updatedAt": 1, "sessionStart": 1});
    let said = converse(
        &p,
        json!({"environmentName": "Development", "session": default_session}),
        "hi",
    )
    .await;
    assert_eq!(said["responses"][0]["content"], "hello!", "{said}");
    assert!(said["session"].is_object());
    let again = converse(&p, json!({"session": said["session"]}), "what?").await;
    assert!(again["session"].is_object());
}

/// DELETE /caches (zaun's CacheApi): the caller's routes and revisions are read again.
async fn clearing_the_caches_leaves_the_bot_answering_as_before(backend: Backend) {
    let (p, _) = deployed(backend).await;
    let dev = json!({"environmentName": "Development"});
    converse(&p, dev.clone(), "hi").await;
    let cleared = p.ok("DELETE", "/caches", None).await;
    assert!(cleared["cleared"].as_i64().unwrap() >= 1, "{cleared}");
    let after = converse(&p, dev, "hi").await;
    assert_eq!(after["responses"][0]["content"], "hello!");
}

async fn nl_pull_reads_the_nlus_name_lang_visibility_and_entities(backend: Backend) {
    let p = project(backend).await;
    let nlu = p.get(&p.path("/nlu/")).await;
    insta::assert_json_snapshot!("nl_pull", nlu, {".id" => "[id]"});
}

/// nl-push: entities as a map by name, each posted, put and deleted by its name.
async fn nl_push_edits_the_entity_map_by_name(backend: Backend) {
    let p = project(backend).await;
    let ents = p.path(&format!("/nlus/{}/entities", nlu_name(&p).await));
    assert_eq!(p.get(&ents).await, json!({}));
    p.ok("POST", &ents, Some(json!({"type": "trait", "profile": "intent", "labels": ["greet", "bye"], "name": "intent"}))).await;
    p.ok(
        "POST",
        &ents,
        Some(json!({"type": "phrase", "profile": "location", "name": "old"})),
    )
    .await;
    p.ok(
        "PUT",
        &format!("{ents}/old"),
        Some(json!({"type": "phrase", "profile": "default", "name": "old"})),
    )
    .await;
    p.ok("DELETE", &format!("{ents}/old"), None).await;
    // Keyed by name, without a name inside; the deleted entity gone.
    assert_eq!(
        p.get(&ents).await,
        json!({"intent": {"type": "trait", "profile": "intent", "labels": ["greet", "bye"]}})
    );
}

async fn an_untrained_nlu_has_no_active_job(backend: Backend) {
    let p = project(backend).await;
    let name = nlu_name(&p).await;
    let job = p
        .get(&p.path(&format!("/nlus/{name}/has_active_job")))
        .await;
    assert_eq!(job["data"], false);
}

async fn nl_train_answers_a_row_id_per_training_line(backend: Backend) {
    let (_, _, trained) = trained(backend).await;
    assert_eq!(trained["rowIds"].as_array().unwrap().len(), 6, "{trained}");
}

/// nl-predict reads `result` as a list.
async fn nl_predict_answers_its_result_as_a_list(backend: Backend) {
    let (p, name, _) = trained(backend).await;
    let predict = p.path(&format!("/nlus/{name}/predict"));
    let predicted = p.multipart(&predict, "sentence", "hello", false).await;
    assert_eq!(predicted["result"][0]["input"], "hello");
    assert!(predicted["result"][0]["output"].is_object());
}

async fn a_trained_nlu_lists_its_revision(backend: Backend) {
    let (p, _, _) = trained(backend).await;
    let nlu_revs = p.get(&p.path("/nlu/revisions")).await;
    assert!(!nlu_revs["data"][0]["revision"].as_str().unwrap().is_empty());
}

/// nl-list-training addresses the NLU as <login>:<project>.
async fn training_data_is_found_by_login_and_nlu_name(backend: Backend) {
    let (p, name, _) = trained(backend).await;
    let td = p
        .get(&p.path(&format!("/nlus/alice%3A{name}/training_data?page=1")))
        .await;
    assert_eq!(td["data"].as_array().unwrap().len(), 6);
}

/// list-profiles: a bare array of the entity profiles.
async fn list_profiles_answers_a_bare_array_of_profiles(backend: Backend) {
    let a = alice(backend).await;
    let profiles = a.k.get("/nlus/profiles").await;
    assert!(
        profiles
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "phrase" && p["name"] == "number")
    );
}

/// list-team: a bare array with each team's counts.
async fn create_team_lists_the_team_among_the_users_teams(backend: Backend) {
    let (a, created, _) = team(backend).await;
    assert!(created["id"].is_string());
    let teams = a.k.get("/users/alice/teams").await;
    insta::assert_json_snapshot!("list_team", teams, {"[].id" => "[id]", "[].teamId" => "[id]"});
}

async fn list_team_user_shows_the_teams_creator_as_team_admin(backend: Backend) {
    let (a, _, id) = team(backend).await;
    let users = a.k.get(&format!("/teams/{id}/users")).await;
    assert_eq!(users[0]["username"], "alice");
    assert_eq!(users[0]["roleName"], "teamAdmin");
}

/// switch team: the team token reads as the team's, and the team reads as a user.
async fn a_team_token_reads_as_a_token_of_its_team(backend: Backend) {
    let (mut a, _, id) = team(backend).await;
    let token = team_token(&a.k, &id).await;
    a.k.token = Some(token.clone());
    let t = a.k.get(&format!("/tokens/{token}")).await;
    assert_eq!(
        (t["type"].as_str(), t["teamId"].as_str()),
        (Some("team"), Some(id.as_str()))
    );
    assert_eq!(a.k.get(&format!("/users/{id}")).await["username"], "acme");
}

/// invite-member, as the team: the member keeps the role of their account.
async fn invite_member_adds_a_user_with_their_accounts_role(backend: Backend) {
    let (mut a, _, id) = team(backend).await;
    add_developer(&a.k.api, &a.admin, "bob").await;
    a.k.token = Some(team_token(&a.k, &id).await);
    let k = &a.k;
    let teams = k.get("/users/alice/teams").await;
    let acme = teams
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["username"] == "acme");
    let tid = s(&acme.unwrap()["teamId"]);
    let bob = k.get("/users/getInfo/bob").await;
    assert_eq!(bob["username"], "bob");
    let before = k.get(&format!("/teams/{tid}/users")).await;
    let before: Vec<&Value> = before
        .as_array()
        .unwrap()
        .iter()
        .map(|u| &u["userId"])
        .collect();
    assert!(!before.contains(&&bob["id"]));
    let added = k
        .ok(
            "POST",
            &format!("/teams/{tid}/users/bob"),
            Some(json!({"roleId": "teamMember"})),
        )
        .await;
    assert!(added.is_object());
    let after = k.get(&format!("/teams/{tid}/users")).await;
    let b = after
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "bob")
        .unwrap();
    assert_eq!(b["roleName"], "developer");
}

async fn delete_project_makes_the_project_gone(backend: Backend) {
    let a = alice(backend).await;
    let doomed =
        a.k.ok(
            "POST",
            "/projects",
            Some(json!({"name": "doomed", "options": {"bot": true}})),
        )
        .await;
    let did = s(&doomed["id"]);
    a.k.ok("DELETE", &format!("/projects/{did}"), None).await;
    assert_eq!(
        a.k.call("GET", &format!("/projects/{did}"), None)
            .await
            .status,
        404
    );
}

/// Clients other than kata-cli keep the documented shapes: page objects, plain-text errors.
async fn other_clients_get_page_objects_and_plain_text_errors(backend: Backend) {
    let (p, env) = deployed(backend).await;
    let (api, token) = (&p.api, &p.alice.token);
    let plain = api
        .get(&p.path(&format!("/environments/{env}/channels")), token)
        .await
        .ok();
    assert!(plain["data"].is_array());
    let err = api.get("/projects/nope", token).await;
    assert_eq!(err.status, 404);
    assert!(err.text.starts_with("Not found."), "{}", err.text);
}
