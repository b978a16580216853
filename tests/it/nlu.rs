//! NL Studio, end to end against the server (in-process) on both backends: the NLU API
//! walkthrough, visibility between accounts, deployments pinning their model, failed and
//! concurrent trainings, and the NL example bot's conversation tests against its trained model.

use crate::common::*;
use runtime_core::StepError;
use runtime_core::testing::{StepInput, Stepped, Stepper, parse_suite, run_case};
use serde_json::{Value, json};

on_both_backends!(
    nlu_api_walkthrough,
    visibility_between_accounts,
    deployments_pin_their_nlu_model,
    a_failed_training_keeps_the_model_and_one_training_runs_at_a_time,
    every_example_nl_bot_passes_its_conversation_tests,
    the_api_trains_and_predicts_as_the_nlu_crate_does,
);

fn example_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// POSTs form-data: `sentence` fields and an optional `file` (name, text).
pub(crate) async fn form(
    api: &Api,
    path: &str,
    token: &str,
    sentences: &[&str],
    file: Option<(&str, String)>,
) -> Res {
    let mut f = reqwest::multipart::Form::new();
    for s in sentences {
        f = f.text("sentence[]", s.to_string());
    }
    if let Some((name, text)) = file {
        f = f.part(
            "file",
            reqwest::multipart::Part::text(text).file_name(name.to_string()),
        );
    }
    api.send(
        api.http
            .post(format!("{}{path}", api.base))
            .bearer_auth(token)
            .multipart(f),
    )
    .await
}

/// A project with an NLU named like it; returns the project id.
async fn nlu_project(api: &Api, token: &str, name: &str, lang: &str) -> String {
    let p = api
        .post(
            "/projects",
            token,
            json!({"name": name, "options": {"bot": true, "nlu": true, "nluLang": lang}}),
        )
        .await
        .ok();
    s(&p["id"])
}

fn example_nlu() -> Value {
    let text = std::fs::read_to_string(example_path("pizza-nl").join("nlu.yml")).unwrap();
    serde_yaml::from_str(&text).unwrap()
}

fn example_training() -> String {
    std::fs::read_to_string(example_path("pizza-nl").join("training.txt")).unwrap()
}

fn top(result: &Value, entity: &str) -> Value {
    result[entity][0].clone()
}

async fn nlu_api_walkthrough(backend: Backend) {
    let (_server, api, _admin, alice) = with_alice(backend).await;
    let pid = nlu_project(&api, &alice, "shop", "en").await;

    // The project's NLU exists, named after it, addressed as alice:shop.
    let list = api.get(&format!("/projects/{pid}/nlus"), &alice).await.ok();
    assert_eq!(list["total"], 1);
    assert_eq!(list["data"][0]["name"], "shop");
    assert_eq!(list["data"][0]["lang"], "en");
    assert_eq!(list["data"][0]["visibility"], "private");
    assert_eq!(list["data"][0]["nluId"], "alice:shop");
    let base = format!("/projects/{pid}/nlus/shop");

    // Entities: the whole map by PUT, with errors that name the entity and the field.
    let bad = api
        .put(
            &base,
            &alice,
            json!({"entities": {"intent": {"type": "trait", "profile": "intent"}}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(
        bad.text.contains("entity intent: labels: required"),
        "{}",
        bad.text
    );
    let bad = api
        .put(
            &base,
            &alice,
            json!({"entities": {"x": {"type": "dict", "profile": "default", "dictionnary": {}}}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(bad.text.contains("dictionnary"), "{}", bad.text);
    let nlu = example_nlu();
    let put = api
        .put(&base, &alice, json!({"entities": nlu["entities"]}))
        .await
        .ok();
    assert_eq!(put["entities"]["pizza"]["type"], "dict");
    let renamed = api.put(&base, &alice, json!({"name": "other"})).await;
    assert_eq!(renamed.status, 400);

    // Entity routes.
    let e = api
        .post(
            &format!("{base}/entities"),
            &alice,
            json!({"name": "city", "type": "phrase", "profile": "location"}),
        )
        .await
        .ok();
    assert_eq!(e["name"], "city");
    let dup = api
        .post(
            &format!("{base}/entities"),
            &alice,
            json!({"name": "city", "type": "phrase", "profile": "default"}),
        )
        .await;
    assert_eq!(dup.status, 409);
    let got = api.get(&format!("{base}/entities/city"), &alice).await.ok();
    assert_eq!(got["profile"], "location");
    let changed = api
        .put(
            &format!("{base}/entities/city"),
            &alice,
            json!({"type": "phrase", "profile": "default"}),
        )
        .await
        .ok();
    assert_eq!(changed["profile"], "default");
    let page = api
        .get(&format!("{base}/entities?limit=2&page=2"), &alice)
        .await
        .ok();
    assert_eq!(page["total"], 4);
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
    // pizza is referred to by qty (belongsTo): not deleted.
    let refused = api.delete(&format!("{base}/entities/pizza"), &alice).await;
    assert_eq!(refused.status, 409);
    assert!(refused.text.contains("qty"), "{}", refused.text);
    api.delete(&format!("{base}/entities/city"), &alice)
        .await
        .ok();
    assert_eq!(
        api.get(&format!("{base}/entities/city"), &alice)
            .await
            .status,
        404
    );
    // PUT creates a missing entity, named by its path; a name the rules refuse is a 400.
    let made = api
        .put(
            &format!("{base}/entities/town"),
            &alice,
            json!({"type": "phrase", "profile": "location"}),
        )
        .await
        .ok();
    assert_eq!(
        (&made["name"], &made["profile"]),
        (&json!("town"), &json!("location"))
    );
    assert_eq!(
        api.get(&format!("{base}/entities/town"), &alice).await.ok()["type"],
        "phrase"
    );
    let bad = api
        .put(
            &format!("{base}/entities/not%20a%20name"),
            &alice,
            json!({"type": "phrase"}),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text);
    api.delete(&format!("{base}/entities/town"), &alice)
        .await
        .ok();

    // Dictionaries and rules predict before any training.
    let p = form(
        &api,
        &format!("{base}/predict"),
        &alice,
        &["two peperoni please"],
        None,
    )
    .await
    .ok();
    assert_eq!(
        top(&p["result"], "pizza")["resolved"]["dictKey"],
        "pepperoni"
    );
    assert_eq!(top(&p["result"], "qty")["value"], "two");
    assert!(p["result"].get("intent").is_none(), "{p}");

    // Train from the example's file plus two sentences, one of them bad: the bad line is
    // named and refused, the rest is kept and trained.
    let mut file = example_training();
    file.push_str("(@flavour spicy) pizza #intent:order\n");
    let bad_line = file.lines().count();
    let t = form(
        &api,
        &format!("{base}/train"),
        &alice,
        &["hello bot #intent:greet", "pizza now #intent:dance"],
        Some(("training.txt", file.clone())),
    )
    .await
    .ok();
    assert_eq!(t["status"], "success", "{t}");
    let good = file.lines().filter(|l| !l.trim().is_empty()).count() - 1 + 1;
    assert_eq!(t["count"], good);
    let errors: Vec<String> = t["errors"].as_array().unwrap().iter().map(s).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("line 2:")
                && e.contains("\"dance\" is not one of intent's labels")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with(&format!("line {bad_line}:"))
                && e.contains("\"flavour\" is not defined")),
        "{errors:?}"
    );
    let r1 = s(&t["revision"]);
    let project = api.get(&format!("/projects/{pid}"), &alice).await.ok();
    assert_eq!(project["nluLatestRevision"], r1.as_str());

    // Training data: listed in order, changed by id.
    let td = api
        .get(&format!("{base}/training_data?limit=1"), &alice)
        .await
        .ok();
    assert_eq!(td["total"], good);
    assert_eq!(td["data"][0]["input"], "hello bot");
    let id = s(&td["data"][0]["id"]);
    let upd = api
        .put(
            &format!("{base}/training_data/{id}"),
            &alice,
            json!({"input": "hello robot", "entities": [{"entity": "intent", "label": "greet", "value": "greet", "start": 0, "end": 11}]}),
        )
        .await
        .ok();
    assert_eq!(upd["input"], "hello robot");
    assert!(upd["updated_at"].is_string());
    let bad = api
        .put(
            &format!("{base}/training_data/{id}"),
            &alice,
            json!({"entities": [{"entity": "intent", "label": "greet", "value": "greet", "start": 0, "end": 99}]}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(bad.text.contains("end 99"), "{}", bad.text);
    // Only a new input: the sentence keeps its labels (a trait spans the new sentence).
    let upd = api
        .put(
            &format!("{base}/training_data/{id}"),
            &alice,
            json!({"input": "well hello there, robot"}),
        )
        .await
        .ok();
    assert_eq!(upd["input"], "well hello there, robot");
    let td = api
        .get(&format!("{base}/training_data?limit=1"), &alice)
        .await
        .ok();
    let e = &td["data"][0]["entities"][0];
    assert_eq!(
        (&e["entity"], &e["label"], &e["start"], &e["end"]),
        (&json!("intent"), &json!("greet"), &json!(0), &json!(23)),
        "{td}"
    );

    // Predict: every entity of the sentence, the first sentence's map as `result`.
    let p = form(
        &api,
        &format!("{base}/predict"),
        &alice,
        &["i want to order two pepperoni pizzas", "good morning"],
        None,
    )
    .await
    .ok();
    let intent = top(&p["result"], "intent");
    assert_eq!(intent["value"], "order");
    assert_eq!(intent["type"], "trait");
    assert!(intent["score"].as_f64().unwrap() > 0.5, "{intent}");
    let pizza = top(&p["result"], "pizza");
    assert_eq!(
        (pizza["start"].as_u64(), pizza["end"].as_u64()),
        (Some(20), Some(29))
    );
    assert_eq!(top(&p["result"], "qty")["belongsTo"]["name"], "pizza");
    assert_eq!(p["results"][1]["input"], "good morning");
    assert_eq!(top(&p["results"][1]["output"], "intent")["value"], "greet");

    // Debug shows tokens and every label's score.
    let d = form(
        &api,
        &format!("{base}/debug"),
        &alice,
        &["hello there"],
        None,
    )
    .await
    .ok();
    assert_eq!(d["debug"]["tokens"][0]["token"], "hello");
    let scores = d["debug"]["entities"]["intent"]["scores"]
        .as_array()
        .unwrap();
    assert_eq!(scores.len(), 3, "{d}");
    let two = form(&api, &format!("{base}/debug"), &alice, &["a", "b"], None).await;
    assert_eq!(two.status, 400);

    // Retrain answers the count of stored sentences.
    let rt = api
        .post(&format!("{base}/retrain"), &alice, json!({}))
        .await
        .ok();
    assert_eq!(rt["status"], "success");
    assert_eq!(rt["count"], good);
    assert_ne!(s(&rt["revision"]), r1);

    // Profiles.
    let pr = api.get("/nlus/profiles?limit=100", &alice).await.ok();
    let items: Vec<String> = pr["items"].as_array().unwrap().iter().map(s).collect();
    for want in ["default", "klitika", "number", "intent", "sentiment", "ner"] {
        assert!(items.contains(&want.to_string()), "{items:?}");
    }
    assert_eq!(pr["total"], items.len());

    // Nothing to train is a 400; a project without nlu has none.
    let empty = form(&api, &format!("{base}/train"), &alice, &[], None).await;
    assert_eq!(empty.status, 400);
    let plain = api
        .post("/projects", &alice, json!({"name": "plain"}))
        .await
        .ok();
    let none = api
        .get(&format!("/projects/{}/nlus", s(&plain["id"])), &alice)
        .await
        .ok();
    assert_eq!(none["total"], 0);
}

async fn visibility_between_accounts(backend: Backend) {
    let (_server, api, admin, alice) = with_alice(backend).await;
    let (_, bob) = api.user(&admin, "bob", "developer").await;
    let (_, base, _) = trained_pizza_nl(&api, &alice).await;

    // Bob's bot uses alice's private NLU: a warning at push, null output at run time.
    let bot = json!({
        "name": "borrow",
        "nlus": {"shop": {"type": "nl", "options": {"nluId": "alice:pizza-nl", "output": "value", "flatten": true}}},
        "flows": {"f": {
            "intents": {"any": {"initial": true, "type": "text", "attributes": {"i": {"nlu": "shop", "path": "intent"}}}},
            "states": {"s": {"initial": true, "end": true, "transitions": {"s": {"fallback": true}},
                "action": {"name": "text", "options": {"text": "intent=$(attributes.i)"}}}}
        }}
    });
    let bp = s(&api
        .post("/projects", &bob, json!({"name": "borrow"}))
        .await
        .ok()["id"]);
    let pushed = api
        .post(&format!("/projects/{bp}/bot/revisions"), &bob, bot.clone())
        .await
        .ok();
    let warnings = pushed["warnings"].to_string();
    assert!(
        warnings.contains("alice:pizza-nl") && warnings.contains("private"),
        "{warnings}"
    );
    let say = |token: String, pid: String| {
        let api = api.clone();
        async move {
            let r = api
                .post(
                    &format!("/projects/{pid}/bot/converse"),
                    &token,
                    json!({"message": {"type": "text", "content": "i want a pizza"}}),
                )
                .await
                .ok();
            (texts_of(&r), r["errors"].to_string())
        }
    };
    let (out, errors) = say(bob.clone(), bp.clone()).await;
    assert_eq!(out, ["intent="], "{errors}");
    assert!(errors.contains("not available to this bot"), "{errors}");

    // Bob cannot read, predict with or change it.
    assert_eq!(api.get(&base, &bob).await.status, 404);
    assert_eq!(
        form(&api, &format!("{base}/predict"), &bob, &["hi"], None)
            .await
            .status,
        404
    );
    assert_eq!(
        api.put(&base, &bob, json!({"visibility": "public"}))
            .await
            .status,
        404
    );

    // Public: bob reads and predicts, his bot gets predictions; he still cannot change it.
    api.put(&base, &alice, json!({"visibility": "public"}))
        .await
        .ok();
    api.get(&base, &bob).await.ok();
    let p = form(&api, &format!("{base}/predict"), &bob, &["hello"], None)
        .await
        .ok();
    assert_eq!(top(&p["result"], "intent")["value"], "greet");
    assert_eq!(
        api.put(&base, &bob, json!({"visibility": "private"}))
            .await
            .status,
        404
    );
    assert_eq!(
        form(
            &api,
            &format!("{base}/train"),
            &bob,
            &["x #intent:order"],
            None
        )
        .await
        .status,
        404
    );
    assert_eq!(
        api.post(&format!("{base}/retrain"), &bob, json!({}))
            .await
            .status,
        404
    );
    let (out, _) = say(bob.clone(), bp.clone()).await;
    assert_eq!(out, ["intent=order"]);

    // Private again: bob's bot is cut off at the next message.
    api.put(&base, &alice, json!({"visibility": "private"}))
        .await
        .ok();
    let (out, _) = say(bob, bp).await;
    assert_eq!(out, ["intent="]);
}

/// An in-process server with alice, a developer: (the server, its API, the admin's token,
/// alice's token).
async fn with_alice(backend: Backend) -> (InProcess, Api, String, String) {
    let server = InProcess::start(backend).await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (_, alice) = api.user(&admin, "alice", "developer").await;
    (server, api, admin, alice)
}

/// Alice's project `pizza-nl` with the example NLU's entities, trained on the example's
/// training text: (the project's id, its NLU's path, the training's answer).
async fn trained_pizza_nl(api: &Api, alice: &str) -> (String, String, Value) {
    let pid = nlu_project(api, alice, "pizza-nl", "en").await;
    let base = format!("/projects/{pid}/nlus/pizza-nl");
    api.put(&base, alice, json!({"entities": example_nlu()["entities"]}))
        .await
        .ok();
    let t = form(
        api,
        &format!("{base}/train"),
        alice,
        &[],
        Some(("t.txt", example_training())),
    )
    .await
    .ok();
    (pid, base, t)
}

fn texts_of(result: &Value) -> Vec<String> {
    result["responses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["content"].as_str().map(str::to_string))
        .collect()
}

async fn deployments_pin_their_nlu_model(backend: Backend) {
    let (_server, api, _admin, alice) = with_alice(backend).await;
    let pid = nlu_project(&api, &alice, "moods", "en").await;
    let base = format!("/projects/{pid}/nlus/moods");
    api.put(
        &base,
        &alice,
        json!({"entities": {"mood": {"type": "trait", "profile": "default", "labels": ["happy", "sad"]}}}),
    )
    .await
    .ok();
    let happy_words = [
        "great",
        "wonderful",
        "fantastic",
        "lovely",
        "awesome",
        "brilliant",
    ];
    let sad_words = [
        "terrible",
        "awful",
        "horrible",
        "miserable",
        "dreadful",
        "gloomy",
    ];
    let lines = |pos: &str, neg: &str| -> Vec<String> {
        let mut v = vec![];
        for w in happy_words {
            v.push(format!("i feel {w} today #mood:{pos}"));
        }
        for w in sad_words {
            v.push(format!("i feel {w} today #mood:{neg}"));
        }
        v
    };
    let v1 = lines("happy", "sad");
    let v1: Vec<&str> = v1.iter().map(String::as_str).collect();
    let t1 = form(&api, &format!("{base}/train"), &alice, &v1, None)
        .await
        .ok();
    assert_eq!(t1["status"], "success", "{t1}");
    let r1 = s(&t1["revision"]);

    let bot = json!({
        "name": "mood",
        "nlus": {"m": {"type": "nl", "options": {"nluId": "alice:moods", "output": "value", "flatten": true}}},
        "flows": {"f": {
            "intents": {"any": {"initial": true, "type": "text", "attributes": {"mood": {"nlu": "m", "path": "mood"}}}},
            "states": {"s": {"initial": true, "end": true, "transitions": {"s": {"fallback": true}},
                "action": {"name": "text", "options": {"text": "$(attributes.mood)"}}}}
        }}
    });
    let rev = s(&api
        .post(&format!("/projects/{pid}/bot/revisions"), &alice, bot)
        .await
        .ok()["revision"]);
    // No nluRevision given: the deployment pins the latest.
    let d1 = api
        .post(
            &format!("/projects/{pid}/deployment/versions"),
            &alice,
            json!({"version": "1.0.0", "botRevision": rev}),
        )
        .await
        .ok();
    assert_eq!(d1["nluRevision"], r1.as_str());
    api.post(
        &format!("/projects/{pid}/environments"),
        &alice,
        json!({"depId": pid, "depVersion": "1.0.0", "name": "production"}),
    )
    .await
    .ok();
    let say = |text: &'static str| {
        let api = api.clone();
        let (pid, alice) = (pid.clone(), alice.clone());
        async move {
            let r = api
                .post(
                    &format!("/projects/{pid}/bot/converse"),
                    &alice,
                    json!({"message": {"type": "text", "content": text}, "environmentName": "production"}),
                )
                .await
                .ok();
            texts_of(&r)
        }
    };
    assert_eq!(say("i feel wonderful today").await, ["happy"]);

    // The NLU is retrained with the labels swapped: the deployed bot keeps its model...
    let v2 = lines("sad", "happy");
    let v2: Vec<&str> = v2.iter().map(String::as_str).collect();
    // (replace the data: the stored sentences are edited to the new labels)
    let td = api
        .get(&format!("{base}/training_data?limit=100"), &alice)
        .await
        .ok();
    for (row, line) in td["data"].as_array().unwrap().iter().zip(&v2) {
        let parsed: Vec<&str> = line.rsplitn(2, ":").collect();
        let label = parsed[0];
        let input = s(&row["input"]);
        api.put(
            &format!("{base}/training_data/{}", s(&row["id"])),
            &alice,
            json!({"entities": [{"entity": "mood", "label": label, "value": label, "start": 0, "end": input.chars().count()}]}),
        )
        .await
        .ok();
    }
    let t2 = api
        .post(&format!("{base}/retrain"), &alice, json!({}))
        .await
        .ok();
    assert_eq!(t2["status"], "success");
    let r2 = s(&t2["revision"]);
    let p = form(
        &api,
        &format!("{base}/predict"),
        &alice,
        &["i feel wonderful today"],
        None,
    )
    .await
    .ok();
    assert_eq!(top(&p["result"], "mood")["value"], "sad");
    assert_eq!(say("i feel wonderful today").await, ["happy"]);

    // ... until a deployment pins the new revision; the environment follows at once.
    let bad = api
        .put(
            &format!("/projects/{pid}/deployment/versions/1.0.0"),
            &alice,
            json!({"nluRevision": "nope"}),
        )
        .await;
    assert_eq!(bad.status, 400);
    api.put(
        &format!("/projects/{pid}/deployment/versions/1.0.0"),
        &alice,
        json!({"nluRevision": r2}),
    )
    .await
    .ok();
    assert_eq!(say("i feel wonderful today").await, ["sad"]);
}

async fn a_failed_training_keeps_the_model_and_one_training_runs_at_a_time(backend: Backend) {
    let (server, api, _admin, alice) = with_alice(backend).await;
    let (pid, base, t) = trained_pizza_nl(&api, &alice).await;
    let r1 = s(&t["revision"]);
    let db = server.db().await;
    let nlu = db.project_nlu(&pid, "pizza-nl").await.unwrap().unwrap();

    // A training runs: a second one is refused clearly, nothing is stored.
    assert!(db.begin_training(&nlu.id).await.unwrap());
    let busy = form(
        &api,
        &format!("{base}/train"),
        &alice,
        &["hi #intent:greet"],
        None,
    )
    .await;
    assert_eq!(busy.status, 409);
    assert!(busy.text.contains("already training"), "{}", busy.text);
    assert_eq!(
        api.post(&format!("{base}/retrain"), &alice, json!({}))
            .await
            .status,
        409
    );
    let status = api.get(&base, &alice).await.ok();
    assert_eq!(status["training"]["status"], "training");
    db.fail_training(&nlu.id, "test").await.unwrap();

    // A stored row that no longer reads makes the training fail: the error is kept and the
    // old model stays in use.
    sqlx::query("UPDATE nlu_training_data SET entities = 'not json' WHERE nlu_id = $1 AND seq = 1")
        .bind(&nlu.id)
        .execute(&db.pool)
        .await
        .unwrap();
    let failed = api
        .post(&format!("{base}/retrain"), &alice, json!({}))
        .await
        .ok();
    assert_eq!(failed["status"], "failed");
    assert!(
        s(&failed["error"]).contains("stored training row"),
        "{failed}"
    );
    let status = api.get(&base, &alice).await.ok();
    assert_eq!(status["training"]["status"], "failed");
    assert_eq!(status["training"]["revision"], r1.as_str());
    let project = api.get(&format!("/projects/{pid}"), &alice).await.ok();
    assert_eq!(project["nluLatestRevision"], r1.as_str());
    let p = form(&api, &format!("{base}/predict"), &alice, &["hello"], None)
        .await
        .ok();
    assert_eq!(top(&p["result"], "intent")["value"], "greet");
}

/// The files of folder `dir`, by name.
fn sorted_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// Runs a conversation test's steps through the server's stateless converse endpoint.
struct ServerStepper {
    api: Api,
    token: String,
    pid: String,
}

impl Stepper for ServerStepper {
    fn step(&mut self, input: StepInput<'_>) -> Stepped {
        let body = json!({"message": input.msg, "session": input.session});
        let url = format!("/projects/{}/bot/converse", self.pid);
        let r = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(self.api.post(&url, &self.token, body))
        });
        if r.status != 200 {
            return Err(StepError::Aborted(r.text));
        }
        Ok(serde_json::from_str(&r.text).expect("a converse result"))
    }
}

/// Every example with an `nlu.yml`: its NLU is put and trained from its `training.txt`, the
/// bot pushed, and its conversation tests run against the trained model.
async fn every_example_nl_bot_passes_its_conversation_tests(backend: Backend) {
    let (_server, api, _admin, alice) = with_alice(backend).await;
    let mut ran = 0;
    let mut failures = vec![];
    for entry in std::fs::read_dir(example_path("")).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("nlu.yml").exists() {
            continue;
        }
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let pid = nlu_project(&api, &alice, &name, "en").await;
        let nlu: Value =
            serde_yaml::from_str(&std::fs::read_to_string(dir.join("nlu.yml")).unwrap()).unwrap();
        let base = format!("/projects/{pid}/nlus/{name}");
        api.put(
            &base,
            &alice,
            json!({"lang": nlu["lang"], "entities": nlu["entities"]}),
        )
        .await
        .ok();
        let training = std::fs::read_to_string(dir.join("training.txt")).unwrap();
        let t = form(
            &api,
            &format!("{base}/train"),
            &alice,
            &[],
            Some(("training.txt", training)),
        )
        .await
        .ok();
        assert_eq!(t["status"], "success", "{name}: {t}");
        assert_eq!(t["errRows"], json!([]), "{name}: {t}");
        let bot = example_bot(&name);
        let pushed = api
            .post(
                &format!("/projects/{pid}/bot/revisions"),
                &alice,
                bot.clone(),
            )
            .await
            .ok();
        assert_eq!(pushed["warnings"], json!([]), "{name}");
        let compiled = runtime_core::compile(&bot).unwrap().bot;
        let mut stepper = ServerStepper {
            api: api.clone(),
            token: alice.clone(),
            pid: pid.clone(),
        };
        for t in sorted_files(&dir.join("tests")) {
            let suite = parse_suite(&std::fs::read_to_string(&t).unwrap()).unwrap();
            for case in &suite.tests {
                ran += 1;
                for f in run_case(&compiled, case, &mut stepper).failures {
                    failures.push(format!("{} / {}: {f}", t.display(), case.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 5, "ran {ran} cases");
}

/// One code path: a model trained through the API (entities by PUT, the line-format file by
/// `train`) predicts exactly what `NluModel::train` on the same entities and parsed lines
/// predicts — the path `nlu-bench` measures — labels, scores and spans, for sentences seen
/// in training and not.
async fn the_api_trains_and_predicts_as_the_nlu_crate_does(backend: Backend) {
    let (_server, api, _admin, alice) = with_alice(backend).await;
    let pid = nlu_project(&api, &alice, "shop", "en").await;
    let base = format!("/projects/{pid}/nlus/shop");
    let nlu = example_nlu();
    api.put(&base, &alice, json!({"entities": nlu["entities"]}))
        .await
        .ok();
    let training = example_training();
    let t = form(
        &api,
        &format!("{base}/train"),
        &alice,
        &[],
        Some(("training.txt", training.clone())),
    )
    .await
    .ok();
    assert_eq!(t["status"], "success", "{t}");

    let entities = serde_json::from_value(nlu["entities"].clone()).unwrap();
    let parsed = botbox_nlu::lines::parse_text(&training);
    assert!(parsed.errors.is_empty());
    let local =
        botbox_nlu::model::NluModel::train(botbox_nlu::Lang::En, &entities, &parsed.rows).unwrap();
    let sentences = [
        "I want two pepperoni pizzas",
        "hello there",
        "cancel my order please",
        "what is the weather like",
        "one veggie and a margarita",
        "hi, can I get a pizza",
    ];
    for text in sentences {
        let p = form(&api, &format!("{base}/predict"), &alice, &[text], None)
            .await
            .ok();
        let want = serde_json::to_value(local.predict(text)).unwrap();
        assert!(
            same(&p["result"], &want),
            "{text}: {} against {want}",
            p["result"]
        );
    }
}

/// Equal JSON, numbers within 1e-12 (a float read back from text may differ in its last bit).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-12
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// `botbox nlu create|train|predict` in a bot folder: an NLU made for the folder's project,
/// trained from a file in the line format (a refused line named with the file), predicting
/// a sentence; a second NLU of the same name is refused with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_creates_trains_and_predicts_with_an_nlu() {
    use crate::cli::{bb, ok, pushed_folder};
    let server = Server::start(Backend::Sqlite, &[]).await;
    let (home, work) = pushed_folder(&server.base, "greeter");
    let run = |args: &[&str]| bb(home.path(), work.path(), &server.base, args, "");
    let out = ok(run(&["nlu", "create", "words", "--dir", "greeter"]));
    assert!(out.contains("Created NLU admin:words"), "{out}");
    let again = run(&["nlu", "create", "words", "--dir", "greeter"]);
    assert_ne!(again.code, 0);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    // The trait must exist before sentences use it.
    let api = server.api();
    let admin = api.admin_token().await;
    let pid = s(&api.get("/projects", &admin).await.ok()["data"][0]["id"]);
    api.post(
        &format!("/projects/{pid}/nlus/words/entities"),
        &admin,
        json!({"name": "intent", "type": "trait", "profile": "intent", "labels": ["greet", "bye"]}),
    )
    .await
    .ok();
    let file = work.path().join("greeter/training.txt");
    std::fs::write(
        &file,
        "hello #intent:greet\nhi there #intent:greet\ngood morning #intent:greet\n\
         bye #intent:bye\ngoodbye #intent:bye\nsee you later #intent:bye\nhowdy #intent:wave\n",
    )
    .unwrap();
    let out = ok(run(&[
        "nlu",
        "train",
        "words",
        "greeter/training.txt",
        "--dir",
        "greeter",
    ]));
    assert!(out.contains("training: success"), "{out}");
    assert!(
        out.contains("training.txt") && out.contains("wave"),
        "{out}"
    );
    let out = ok(run(&[
        "nlu",
        "predict",
        "words",
        "hello friend",
        "--dir",
        "greeter",
    ]));
    assert!(out.starts_with("hello friend → intent greet ("), "{out}");
}

/// `botbox test` on a bot with a `type: nl` NLU, run locally, says how to run it against
/// the trained model: `botbox test --remote`.
#[test]
fn local_tests_of_an_nl_bot_say_to_run_them_remotely() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("pizza-nl");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    for f in ["bot.yml", "nlu.yml", "training.txt"] {
        let from = example_path("pizza-nl").join(f);
        if from.exists() {
            std::fs::copy(&from, dir.join(f)).unwrap();
        }
    }
    for e in std::fs::read_dir(example_path("pizza-nl").join("tests")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join("tests").join(e.file_name())).unwrap();
    }
    let o = crate::cli::bb(
        home.path(),
        work.path(),
        "http://127.0.0.1:9",
        &["test", "--dir", "pizza-nl"],
        "",
    );
    assert_ne!(o.code, 0);
    let all = format!("{}{}", o.stdout, o.stderr);
    assert!(all.contains("botbox test --remote"), "{all}");
}
