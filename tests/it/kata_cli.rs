//! kata-cli 2.7.2 against botbox: kata-cli's journey replayed call by call, with
//! the paths, bodies and headers its API client sends and assertions on exactly the response
//! fields it reads (from its source: components/{users,projects,bots,nlus}/*.ts; the spec of
//! each call is in docs/moving-from-kata.md).

use crate::common::*;
use serde_json::{Value, json};

on_both_backends!(kata_cli_journey);

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

async fn kata_cli_journey(backend: Backend) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    api.user(&admin, "alice", "developer").await;
    api.user(&admin, "bob", "developer").await;
    let mut k = Kata {
        api: api.clone(),
        token: None,
    };

    // login -u -p: POST /cli-login (no bearer); reads data.id and data.userId.
    let bad = k
        .call(
            "POST",
            "/cli-login",
            Some(json!({"username": "alice", "password": "nope"})),
        )
        .await;
    assert_eq!(bad.status, 401);
    assert!(
        bad.body["message"].as_str().unwrap().contains("incorrect"),
        "{}",
        bad.body
    );
    let login = k
        .ok(
            "POST",
            "/cli-login",
            Some(json!({"username": "alice", "password": "alice-password"})),
        )
        .await;
    let token = login["id"].as_str().unwrap().to_string();
    let alice_id = login["userId"].as_str().unwrap().to_string();
    k.token = Some(token.clone());
    // login -t: GET /tokens/{token}; reads type and teamId.
    let t = k.get(&format!("/tokens/{token}")).await;
    assert_eq!(t["type"], "user");
    assert_eq!(
        k.call("GET", "/tokens/not-my-token", None).await.status,
        404
    );

    // create-project, list-project, select-project.
    let p = k
        .ok(
            "POST",
            "/projects",
            Some(json!({"name": "mybot", "description": "desc", "options": {"bot": true, "cms": true, "nlu": true, "timezone": 7, "nluLang": "en", "nluVisibility": "private"}})),
        )
        .await;
    let pid = p["id"].as_str().unwrap().to_string();
    assert_eq!(p["name"], "mybot");
    let list = k.get("/projects").await;
    assert_eq!(list["data"][0]["id"], pid.as_str());
    let page = k.get("/projects?limit=10&page=1").await;
    assert_eq!(
        (
            page["total"].as_i64(),
            page["page"].as_i64(),
            page["limit"].as_i64()
        ),
        (Some(1), Some(1), Some(10))
    );
    let by_name = k.get("/projects/getProjectByName?name=mybot").await;
    assert_eq!(
        (by_name["id"].as_str(), by_name["name"].as_str()),
        (Some(pid.as_str()), Some("mybot"))
    );
    let missing = k
        .call("GET", "/projects/getProjectByName?name=nope", None)
        .await;
    assert_eq!(missing.status, 404);
    assert!(missing.body["message"].is_string());

    // push (first and later), revisions, pull, push of a pulled bot.yml (its version exists).
    let first = push(&k, &pid, init_bot(&pid)).await;
    assert_eq!(first["version"], "0.0.1");
    let mut edited = init_bot(&pid);
    edited["flows"]["hello"]["states"]["greet"]["action"]["options"]["text"] = json!("hello!");
    let second = push(&k, &pid, edited).await;
    let revs = k.get(&format!("/projects/{pid}/bot/revisions")).await;
    let listed: Vec<&str> = revs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["revision"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed[0],
        second["revision"].as_str().unwrap(),
        "newest first"
    );
    assert_eq!(listed.len(), 3, "two pushes and the initial revision");
    let pulled = k
        .get(&format!("/projects/{pid}/bot/revisions/{}", listed[0]))
        .await;
    assert_eq!(
        pulled["flows"]["hello"]["states"]["greet"]["action"]["options"]["text"],
        "hello!"
    );
    assert_eq!(pulled["version"], "0.0.2");
    // pull strips id, revision, changelog; bot.yml keeps version 0.0.2: the push bumps it.
    let mut from_pull = pulled.clone();
    for key in ["id", "revision", "changelog"] {
        from_pull.as_object_mut().unwrap().remove(key);
    }
    from_pull["tag"] = Value::Null;
    from_pull["id"] = json!(pid);
    let third = push(&k, &pid, from_pull).await;
    assert_eq!(third["version"], "0.0.3");
    assert!(
        third["warnings"]
            .to_string()
            .contains("0.0.2 already exists"),
        "{}",
        third["warnings"]
    );
    // A push on a revision that is no longer the latest is refused with a message.
    let stale = k
        .call(
            "PUT",
            &format!("/projects/{pid}/bot/revisions/{}", listed[0]),
            Some(init_bot(&pid)),
        )
        .await;
    assert_eq!(stale.status, 409);
    assert!(
        stale.body["message"].as_str().unwrap().contains("pull"),
        "{}",
        stale.body
    );

    // create-deployment: every revision it reads is a string it can cut. A project made
    // with an NLU has its initial NLU revision before any training (kata-cli cuts the
    // newest one's string and crashed on a project without).
    assert_eq!(
        k.get(&format!("/projects/{pid}/nlu/revisions")).await["data"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    k.get(&format!("/projects/{pid}")).await;
    let bot_rev = k.get(&format!("/projects/{pid}/bot/")).await["revision"]
        .as_str()
        .unwrap()
        .to_string();
    let nlu_rev = k.get(&format!("/projects/{pid}/nlu/revisions")).await["data"][0]["revision"]
        .as_str()
        .unwrap()
        .to_string();
    let cms_rev = k.get(&format!("/projects/{pid}/cms/")).await["revision"]
        .as_str()
        .unwrap()
        .to_string();
    let no_dep = k
        .call("GET", &format!("/projects/{pid}/deployment/"), None)
        .await;
    assert_eq!(no_dep.status, 404, "kata-cli then uses 0.0.1");
    k.ok(
        "POST",
        &format!("/projects/{pid}/deployment/versions"),
        Some(json!({"version": "0.0.1", "botId": pid, "botRevision": bot_rev, "nluId": pid, "nluRevision": nlu_rev, "cmsId": pid, "cmsRevision": cms_rev, "modules": null})),
    )
    .await;
    assert_eq!(
        k.get(&format!("/projects/{pid}/deployment/")).await["version"],
        "0.0.1"
    );
    let deps = k.get(&format!("/projects/{pid}/deployment/versions")).await;
    let d0 = &deps["data"][0];
    assert!(
        d0["name"].is_string() && d0["version"] == "0.0.1" && d0["botRevision"] == bot_rev.as_str(),
        "{d0}"
    );

    // create-environment, list-environment, update-environment.
    let version = k.get(&format!("/projects/{pid}/deployment/")).await["version"].clone();
    assert_eq!(
        k.get(&format!("/projects/{pid}/environments")).await["data"],
        json!([])
    );
    k.ok(
        "POST",
        &format!("/projects/{pid}/environments"),
        Some(json!({"depId": pid, "depVersion": version, "name": "Development", "slug": "dev"})),
    )
    .await;
    let envs = k.get(&format!("/projects/{pid}/environments")).await;
    let env = &envs["data"][0];
    assert_eq!(
        (
            env["name"].as_str(),
            env["slug"].as_str(),
            env["depVersion"].as_str()
        ),
        (Some("Development"), Some("dev"), Some("0.0.1"))
    );
    let env_id = env["id"].as_str().unwrap().to_string();
    k.ok(
        "POST",
        &format!("/projects/{pid}/deployment/versions"),
        Some(json!({"version": "0.0.2", "botRevision": bot_rev, "nluRevision": nlu_rev, "cmsRevision": cms_rev})),
    )
    .await;
    let all = k
        .get(&format!(
            "/projects/{pid}/deployment/versions?limit=1000000"
        ))
        .await;
    assert!(
        all["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["version"] == "0.0.2")
    );
    let updated = k
        .ok(
            "PUT",
            &format!("/projects/{pid}/environments/{env_id}"),
            Some(json!({"depVersion": "0.0.2"})),
        )
        .await;
    assert!(updated.is_object());
    assert_eq!(
        k.get(&format!("/projects/{pid}/environments")).await["data"][0]["depVersion"],
        "0.0.2"
    );

    // Channels: list is a bare array; create answers the webhook; fbmessenger options are a
    // JSON string; delete-channel finds it in the environment's channels[].
    let chans = format!("/projects/{pid}/environments/{env_id}/channels");
    assert_eq!(k.get(&chans).await, json!([]));
    let web = k
        .ok(
            "POST",
            &chans,
            Some(json!({"name": "web", "type": "generic", "options": {"token": "tok", "refreshToken": null, "secret": null}, "url": "http://127.0.0.1:9/hook"})),
        )
        .await;
    let webhook = web["webhook"].as_str().unwrap().to_string();
    assert!(webhook.contains("/webhooks/"));
    let fb = k
        .ok(
            "POST",
            &chans,
            Some(json!({"name": "fb", "type": "fbmessenger", "options": {"token": "page-token", "refreshToken": null, "secret": "app-secret"}, "url": "https://graph.facebook.com/v2.6/me/messages"})),
        )
        .await;
    let opts: Value =
        serde_json::from_str(fb["options"].as_str().expect("options as a JSON string")).unwrap();
    assert!(opts.is_object());
    let listed = k.get(&chans).await;
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{listed}");
    assert!(listed[0]["type"].is_string() && listed[0]["id"].is_string());
    let web_id = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "web")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    k.ok(
        "PUT",
        &format!("{chans}/{web_id}"),
        Some(json!({"name": "web", "type": "generic", "options": {"token": "tok2", "refreshToken": null, "secret": null}, "url": "http://127.0.0.1:9/hook2"})),
    )
    .await;
    let env_full = k
        .get(&format!("/projects/{pid}/environments/{env_id}"))
        .await;
    let fb_id = env_full["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "fb")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    k.ok("DELETE", &format!("{chans}/{fb_id}"), None).await;
    assert_eq!(k.get(&chans).await.as_array().unwrap().len(), 1);

    // Errors: a bot whose method throws, reached through the channel; kata-cli asks for
    // today's user errors (group 1000, codes 1001..1100) with RFC 3339 times.
    let mut failing = init_bot(&pid);
    failing["methods"] = json!({"boom()": "throw new Error('kaboom');"});
    failing["flows"]["hello"]["states"]["greet"]["action"] =
        json!({"name": "method", "method": "boom"});
    push(&k, &pid, failing).await;
    let rev = k.get(&format!("/projects/{pid}/bot/")).await["revision"]
        .as_str()
        .unwrap()
        .to_string();
    k.ok(
        "POST",
        &format!("/projects/{pid}/deployment/versions"),
        Some(json!({"version": "0.0.3", "botRevision": rev})),
    )
    .await;
    k.ok(
        "PUT",
        &format!("/projects/{pid}/environments/{env_id}"),
        Some(json!({"depVersion": "0.0.3"})),
    )
    .await;
    let r = api
        .send(
            api.http
                .post(&webhook)
                .json(&json!({"userId": "u1", "messages": [{"type": "text", "content": "hi"}]})),
        )
        .await;
    assert!((200..300).contains(&r.status), "{}", r.text);
    let codes: Vec<String> = (1001..=1100).map(|c| c.to_string()).collect();
    let today = time::OffsetDateTime::now_utc().date();
    let errors = k
        .get(&format!(
            "/projects/{pid}/errors?environmentId={env_id}&channelId={web_id}&errorGroup=1000&errorCode={}&start={}T00%3A00%3A00.000Z&end={}T23%3A59%3A59.999Z",
            codes.join("%2C"),
            today,
            today
        ))
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
    let none = k
        .get(&format!("/projects/{pid}/errors?errorGroup=4000"))
        .await;
    assert_eq!(none["data"], json!([]));

    // Rollback to 0.0.1: the environment (on 0.0.3) moves back.
    let all = k
        .get(&format!(
            "/projects/{pid}/deployment/versions?limit=1000000&page=1"
        ))
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
    let rb = k
        .ok(
            "POST",
            &format!("/deployments/{d1}/rollback"),
            Some(json!({"author": "alice", "changelog": "bad release", "version": "0.0.1"})),
        )
        .await;
    assert_eq!(rb["environments"], json!(["Development"]));
    assert_eq!(
        k.get(&format!("/projects/{pid}/environments")).await["data"][0]["depVersion"],
        "0.0.1"
    );

    // console: converse with kata-cli's default session, then with the session it got back.
    let default_session = json!({"id": "test~from~console", "channelId": "console-channel", "environmentId": "console-environment",
        "deploymentId": "console-deployment", "dataKey": null, "states": {}, "contexes": {}, "history": [], "current": null,
        "meta": null, "timestamp": 1, "data": {}, "createdAt": 1, "updatedAt": 1, "sessionStart": 1});
    let said = k
        .ok(
            "POST",
            &format!("/projects/{pid}/bot/converse"),
            Some(json!({"environmentName": "Development", "session": default_session, "message": {"type": "text", "content": "hi"}})),
        )
        .await;
    // 0.0.1 runs the third push: the edited greeting.
    assert_eq!(said["responses"][0]["content"], "hello!", "{said}");
    assert!(said["session"].is_object());
    let again = k
        .ok(
            "POST",
            &format!("/projects/{pid}/bot/converse"),
            Some(json!({"session": said["session"], "message": {"type": "text", "content": "what?"}})),
        )
        .await;
    assert!(again["session"].is_object());

    // NLU: nl-pull, nl-push (entity map, post/put/delete with name), has_active_job,
    // nl-train (rowIds), nl-predict (result as a list), list-profiles (bare array), revisions.
    let nlu = k.get(&format!("/projects/{pid}/nlu/")).await;
    for key in ["name", "lang", "visibility", "entities"] {
        assert!(nlu.get(key).is_some(), "nl-pull needs {key}: {nlu}");
    }
    let name = nlu["name"].as_str().unwrap().to_string();
    let ents = format!("/projects/{pid}/nlus/{name}/entities");
    assert_eq!(k.get(&ents).await, json!({}));
    k.ok("POST", &ents, Some(json!({"type": "trait", "profile": "intent", "labels": ["greet", "bye"], "name": "intent"}))).await;
    k.ok(
        "POST",
        &ents,
        Some(json!({"type": "phrase", "profile": "location", "name": "old"})),
    )
    .await;
    k.ok(
        "PUT",
        &format!("{ents}/old"),
        Some(json!({"type": "phrase", "profile": "default", "name": "old"})),
    )
    .await;
    k.ok("DELETE", &format!("{ents}/old"), None).await;
    let map = k.get(&ents).await;
    assert_eq!(map["intent"]["labels"], json!(["greet", "bye"]));
    assert!(map["intent"].get("name").is_none());
    assert_eq!(
        k.get(&format!("/projects/{pid}/nlus/{name}/has_active_job"))
            .await["data"],
        false
    );
    let lines = "hello #intent:greet\nhi there #intent:greet\ngood morning #intent:greet\nbye #intent:bye\ngoodbye #intent:bye\nsee you later #intent:bye\n";
    let trained = k
        .multipart(
            &format!("/projects/{pid}/nlus/{name}/train"),
            "file",
            lines,
            true,
        )
        .await;
    assert_eq!(trained["rowIds"].as_array().unwrap().len(), 6, "{trained}");
    let predicted = k
        .multipart(
            &format!("/projects/{pid}/nlus/{name}/predict"),
            "sentence",
            "hello",
            false,
        )
        .await;
    assert_eq!(predicted["result"][0]["input"], "hello");
    assert!(predicted["result"][0]["output"].is_object());
    let profiles = k.get("/nlus/profiles").await;
    assert!(
        profiles
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "phrase" && p["name"] == "number")
    );
    let nlu_revs = k.get(&format!("/projects/{pid}/nlu/revisions")).await;
    assert!(!nlu_revs["data"][0]["revision"].as_str().unwrap().is_empty());
    // The NLU addressed as <login>:<project> (nl-list-training).
    let td = k
        .get(&format!(
            "/projects/{pid}/nlus/alice%3A{name}/training_data?page=1"
        ))
        .await;
    assert_eq!(td["data"].as_array().unwrap().len(), 6);

    // Teams: create-team, switch team, list-team, list-team-user, invite-member.
    let team = k
        .ok(
            "POST",
            "/teams",
            Some(json!({"username": "acme", "password": "", "roleId": "teamAdmin"})),
        )
        .await;
    assert!(team["id"].is_string());
    let me = k.get(&format!("/users/{alice_id}")).await;
    let acme = me["teams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["username"] == "acme")
        .expect("teams[] with username");
    let team_id = acme["teamId"].as_str().unwrap().to_string();
    let team_token = k
        .ok(
            "POST",
            "/tokens",
            Some(json!({"type": "team", "teamId": team_id})),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let teams = k.get("/users/alice/teams").await;
    let row = &teams.as_array().expect("a bare array")[0];
    assert_eq!(row["username"], "acme");
    assert_eq!(
        (
            row["projects"].as_i64(),
            row["members"].as_i64(),
            row["bots"].as_i64()
        ),
        (Some(0), Some(1), Some(0))
    );
    let users = k.get(&format!("/teams/{team_id}/users")).await;
    assert_eq!(users[0]["username"], "alice");
    assert_eq!(users[0]["roleName"], "teamAdmin");
    let user_token = k.token.replace(team_token.clone());
    let t = k.get(&format!("/tokens/{team_token}")).await;
    assert_eq!(
        (t["type"].as_str(), t["teamId"].as_str()),
        (Some("team"), Some(team_id.as_str()))
    );
    assert_eq!(
        k.get(&format!("/users/{team_id}")).await["username"],
        "acme"
    );
    let teams = k.get("/users/alice/teams").await;
    let tid = teams
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["username"] == "acme")
        .unwrap()["teamId"]
        .as_str()
        .unwrap()
        .to_string();
    let bob = k.get("/users/getInfo/bob").await;
    assert_eq!(bob["username"], "bob");
    let before: Vec<Value> = k
        .get(&format!("/teams/{tid}/users"))
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["userId"].clone())
        .collect();
    assert!(!before.contains(&bob["id"]));
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
    k.token = user_token;

    // DELETE /caches (zaun's CacheApi): drops this process's cached routes and revisions
    // of the caller's projects; the bot answers as before, read again from storage.
    let cleared = k.ok("DELETE", "/caches", None).await;
    assert!(cleared["cleared"].as_i64().unwrap() >= 1, "{cleared}");
    let after = k
        .ok(
            "POST",
            &format!("/projects/{pid}/bot/converse"),
            Some(json!({"environmentName": "Development", "message": {"type": "text", "content": "hi"}})),
        )
        .await;
    assert_eq!(after["responses"][0]["content"], "hello!");

    // delete-project by name; then the project is gone.
    let doomed = k
        .ok(
            "POST",
            "/projects",
            Some(json!({"name": "doomed", "options": {"bot": true}})),
        )
        .await;
    let did = doomed["id"].as_str().unwrap();
    k.ok("DELETE", &format!("/projects/{did}"), None).await;
    assert_eq!(
        k.call("GET", &format!("/projects/{did}"), None)
            .await
            .status,
        404
    );

    // Everyone else keeps the documented shapes: plain-text errors, page objects.
    let plain = api
        .get(
            &format!("/projects/{pid}/environments/{env_id}/channels"),
            &token,
        )
        .await
        .ok();
    assert!(plain["data"].is_array());
    let err = api.get("/projects/nope", &token).await;
    assert_eq!(err.status, 404);
    assert!(err.text.starts_with("Not found."), "{}", err.text);
}
