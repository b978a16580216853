//! NL Studio, end to end against the server (in-process) on both backends: the NLU API
//! (one behaviour a test), visibility between accounts, deployments pinning their model, failed and
//! concurrent trainings, and the NL example bot's conversation tests against its trained model.

use crate::common::*;
use runtime_core::StepError;
use runtime_core::testing::{StepInput, Stepped, Stepper, parse_suite, run_case};
use serde_json::{Value, json};

on_both_backends!(
    // The NLU API.
    a_project_made_with_nlu_has_a_private_nlu_named_after_it,
    a_project_without_nlu_has_no_nlus,
    entities_put_with_a_mistake_are_refused_naming_the_entity_and_the_field,
    a_put_of_entities_sets_the_nlus_entities,
    an_nlu_cannot_be_renamed,
    an_entity_is_created_read_and_changed_by_its_routes,
    an_entity_name_is_taken_once,
    entities_are_listed_by_page,
    an_entity_another_belongs_to_cannot_be_deleted,
    a_deleted_entity_is_gone,
    a_put_creates_a_missing_entity_named_by_its_path,
    an_entity_named_against_the_rules_is_refused,
    dictionaries_and_rules_predict_before_any_training,
    a_training_with_nothing_to_train_is_refused,
    a_training_names_and_refuses_bad_lines_and_trains_the_rest,
    a_training_becomes_the_projects_latest_nlu_revision,
    training_data_is_listed_in_the_order_it_was_given,
    a_training_sentence_is_changed_by_its_id,
    a_training_sentence_labelled_past_its_end_is_refused,
    a_label_whose_text_is_not_its_value_is_refused,
    a_training_sentence_is_deleted_by_its_id,
    sentences_sent_again_are_stored_once,
    every_training_label_has_an_id,
    a_sentence_cannot_take_another_sentences_text,
    a_teams_viewer_reads_the_sentences_and_changes_nothing,
    a_training_sentence_given_only_a_new_input_keeps_its_labels,
    a_prediction_gives_every_entity_of_the_first_sentence_as_result,
    a_prediction_answers_each_sentence_in_results,
    debug_shows_the_tokens_and_every_labels_score,
    debug_takes_one_sentence,
    a_retrain_answers_the_count_of_stored_sentences_and_a_new_revision,
    the_nlu_profiles_include_the_built_in_ones,
    // Accounts, deployments, trainings and the example bots.
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
pub(crate) async fn nlu_project(api: &Api, token: &str, name: &str, lang: &str) -> String {
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

/// Alice's NLU (of her project `shop`) and the calls the tests make on it.
struct Nl {
    /// The project's path, `/projects/<id>`.
    project: String,
    /// Alice's token.
    alice: String,
    /// A client of the server.
    api: Api,
    /// The server, running while the test uses it.
    _server: InProcess,
}

/// [`Nl`] as a new project makes it: no entities, untrained.
async fn shop(backend: Backend) -> Nl {
    let (server, api, _admin, alice) = with_alice(backend).await;
    let project = format!(
        "/projects/{}",
        nlu_project(&api, &alice, "shop", "en").await
    );
    Nl {
        _server: server,
        api,
        alice,
        project,
    }
}

/// [`Nl`] with the example's entities (intent, the pizza dictionary, qty belonging to
/// pizza), untrained.
async fn pizza_nl(backend: Backend) -> Nl {
    let nl = shop(backend).await;
    nl.put("", json!({"entities": example_nlu()["entities"]}))
        .await
        .ok();
    nl
}

impl Nl {
    fn at(&self, rest: &str) -> String {
        format!("{}/nlus/shop{rest}", self.project)
    }
    async fn get(&self, rest: &str) -> Res {
        self.call("GET", rest, None).await
    }
    async fn post(&self, rest: &str, body: Value) -> Res {
        self.call("POST", rest, Some(body)).await
    }
    async fn put(&self, rest: &str, body: Value) -> Res {
        self.call("PUT", rest, Some(body)).await
    }
    async fn delete(&self, rest: &str) -> Res {
        self.call("DELETE", rest, None).await
    }
    /// `method` on `rest` under the NLU, as alice.
    async fn call(&self, method: &str, rest: &str, body: Option<Value>) -> Res {
        let path = self.at(rest);
        self.api
            .call(method, &path, Some(&self.alice), body.as_ref())
            .await
    }
    /// POSTs `sentences` as form-data to `rest` under the NLU.
    async fn form(&self, rest: &str, sentences: &[&str]) -> Res {
        form(&self.api, &self.at(rest), &self.alice, sentences, None).await
    }
    /// The prediction for `sentences` (checked 200).
    async fn predict(&self, sentences: &[&str]) -> Value {
        self.form("/predict", sentences).await.ok()
    }
    /// Adds the entity `city` (a phrase of the location profile).
    async fn add_city(&self) -> Value {
        let city = json!({"name": "city", "type": "phrase", "profile": "location"});
        self.post("/entities", city).await.ok()
    }
}

/// [`pizza_nl`] trained from the example's file with a line naming an undefined entity
/// appended, and two sentences, the second labelled with a label intent lacks.
struct Trained {
    nl: Nl,
    /// The training's answer.
    answer: Value,
    /// How many sentences were kept: the file's but the bad line, and `hello bot`.
    kept: usize,
    /// The number of the file's bad line.
    bad_line: usize,
}

async fn trained(backend: Backend) -> Trained {
    let nl = pizza_nl(backend).await;
    let mut file = example_training();
    file.push_str("(@flavour spicy) pizza #intent:order\n");
    let bad_line = file.lines().count();
    let kept = file.lines().filter(|l| !l.trim().is_empty()).count();
    let answer = form(
        &nl.api,
        &nl.at("/train"),
        &nl.alice,
        &["hello bot #intent:greet", "pizza now #intent:dance"],
        Some(("training.txt", file)),
    )
    .await
    .ok();
    Trained {
        nl,
        answer,
        kept,
        bad_line,
    }
}

impl Trained {
    /// The id of the first stored sentence, `hello bot`.
    async fn first_sentence(&self) -> String {
        s(&self.nl.get("/training_data?limit=1").await.ok()["data"][0]["id"])
    }
}

async fn a_project_made_with_nlu_has_a_private_nlu_named_after_it(backend: Backend) {
    let nl = shop(backend).await;
    let list = nl
        .api
        .get(&format!("{}/nlus", nl.project), &nl.alice)
        .await
        .ok();
    assert_eq!(list["total"], 1);
    assert_eq!(list["data"][0]["name"], "shop");
    assert_eq!(list["data"][0]["lang"], "en");
    assert_eq!(list["data"][0]["visibility"], "private");
    assert_eq!(list["data"][0]["nluId"], "alice:shop");
}

async fn a_project_without_nlu_has_no_nlus(backend: Backend) {
    let (_server, api, _admin, alice) = with_alice(backend).await;
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

async fn entities_put_with_a_mistake_are_refused_naming_the_entity_and_the_field(backend: Backend) {
    let nl = shop(backend).await;
    let no_labels = json!({"intent": {"type": "trait", "profile": "intent"}});
    let bad = nl.put("", json!({"entities": no_labels})).await;
    assert_eq!(bad.status, 400);
    assert_contains(&bad.text, "entity intent: labels: required");
    let misspelt = json!({"x": {"type": "dict", "profile": "default", "dictionnary": {}}});
    let bad = nl.put("", json!({"entities": misspelt})).await;
    assert_eq!(bad.status, 400);
    assert_contains(&bad.text, "dictionnary");
}

async fn a_put_of_entities_sets_the_nlus_entities(backend: Backend) {
    let nl = shop(backend).await;
    let put = nl
        .put("", json!({"entities": example_nlu()["entities"]}))
        .await
        .ok();
    assert_eq!(put["entities"]["pizza"]["type"], "dict");
}

async fn an_nlu_cannot_be_renamed(backend: Backend) {
    let nl = shop(backend).await;
    assert_eq!(nl.put("", json!({"name": "other"})).await.status, 400);
}

async fn an_entity_is_created_read_and_changed_by_its_routes(backend: Backend) {
    let nl = pizza_nl(backend).await;
    assert_eq!(nl.add_city().await["name"], "city");
    assert_eq!(nl.get("/entities/city").await.ok()["profile"], "location");
    let changed = nl
        .put(
            "/entities/city",
            json!({"type": "phrase", "profile": "default"}),
        )
        .await
        .ok();
    assert_eq!(changed["profile"], "default");
}

async fn an_entity_name_is_taken_once(backend: Backend) {
    let nl = pizza_nl(backend).await;
    nl.add_city().await;
    let dup = nl
        .post(
            "/entities",
            json!({"name": "city", "type": "phrase", "profile": "default"}),
        )
        .await;
    assert_eq!(dup.status, 409);
}

async fn entities_are_listed_by_page(backend: Backend) {
    let nl = pizza_nl(backend).await;
    nl.add_city().await;
    let page = nl.get("/entities?limit=2&page=2").await.ok();
    assert_eq!(page["total"], 4);
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
}

async fn an_entity_another_belongs_to_cannot_be_deleted(backend: Backend) {
    let nl = pizza_nl(backend).await;
    // qty belongs to pizza.
    let refused = nl.delete("/entities/pizza").await;
    assert_eq!(refused.status, 409);
    assert_contains(&refused.text, "qty");
}

async fn a_deleted_entity_is_gone(backend: Backend) {
    let nl = pizza_nl(backend).await;
    nl.add_city().await;
    nl.delete("/entities/city").await.ok();
    assert_eq!(nl.get("/entities/city").await.status, 404);
}

async fn a_put_creates_a_missing_entity_named_by_its_path(backend: Backend) {
    let nl = pizza_nl(backend).await;
    let made = nl
        .put(
            "/entities/town",
            json!({"type": "phrase", "profile": "location"}),
        )
        .await
        .ok();
    assert_eq!(
        (&made["name"], &made["profile"]),
        (&json!("town"), &json!("location"))
    );
    assert_eq!(nl.get("/entities/town").await.ok()["type"], "phrase");
}

async fn an_entity_named_against_the_rules_is_refused(backend: Backend) {
    let nl = pizza_nl(backend).await;
    let bad = nl
        .put("/entities/not%20a%20name", json!({"type": "phrase"}))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text);
}

async fn dictionaries_and_rules_predict_before_any_training(backend: Backend) {
    let nl = pizza_nl(backend).await;
    let p = nl.predict(&["two peperoni please"]).await;
    assert_eq!(
        top(&p["result"], "pizza")["resolved"]["dictKey"],
        "pepperoni"
    );
    assert_eq!(top(&p["result"], "qty")["value"], "two");
    assert!(p["result"].get("intent").is_none(), "{p}");
}

async fn a_training_with_nothing_to_train_is_refused(backend: Backend) {
    let nl = pizza_nl(backend).await;
    assert_eq!(nl.form("/train", &[]).await.status, 400);
}

async fn a_training_names_and_refuses_bad_lines_and_trains_the_rest(backend: Backend) {
    let t = trained(backend).await;
    assert_eq!(t.answer["status"], "success", "{}", t.answer);
    assert_eq!(t.answer["count"], t.kept);
    let errors: Vec<String> = t.answer["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("line 2:")
                && e.contains("\"dance\" is not one of intent's labels")),
        "{errors:?}"
    );
    let bad_line = format!("line {}:", t.bad_line);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with(&bad_line) && e.contains("\"flavour\" is not defined")),
        "{errors:?}"
    );
}

async fn a_training_becomes_the_projects_latest_nlu_revision(backend: Backend) {
    let t = trained(backend).await;
    let project = t.nl.api.get(&t.nl.project, &t.nl.alice).await.ok();
    assert_eq!(project["nluLatestRevision"], t.answer["revision"]);
    assert!(t.answer["revision"].is_string(), "{}", t.answer);
}

async fn training_data_is_listed_in_the_order_it_was_given(backend: Backend) {
    let t = trained(backend).await;
    let td = t.nl.get("/training_data?limit=1").await.ok();
    assert_eq!(td["total"], t.kept);
    assert_eq!(td["data"][0]["input"], "hello bot");
}

/// A sentence's label intent:greet from its start to `end`.
fn greet(end: usize) -> Value {
    json!({"entity": "intent", "label": "greet", "value": "greet", "start": 0, "end": end})
}

async fn a_training_sentence_is_changed_by_its_id(backend: Backend) {
    let t = trained(backend).await;
    let id = t.first_sentence().await;
    let upd =
        t.nl.put(
            &format!("/training_data/{id}"),
            json!({"input": "hello robot", "entities": [greet(11)]}),
        )
        .await
        .ok();
    assert_eq!(upd["input"], "hello robot");
    assert!(upd["updated_at"].is_string());
}

async fn a_training_sentence_labelled_past_its_end_is_refused(backend: Backend) {
    let t = trained(backend).await;
    let id = t.first_sentence().await;
    let bad =
        t.nl.put(
            &format!("/training_data/{id}"),
            json!({"entities": [greet(99)]}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_contains(&bad.text, "end 99");
}

/// A client that labels a span shifted from its word (offsets in bytes, say) is refused:
/// the span's characters must be its value.
async fn a_label_whose_text_is_not_its_value_is_refused(backend: Backend) {
    let t = trained(backend).await;
    let id = t.first_sentence().await;
    let shifted = json!({"entity": "pizza", "start": 5, "end": 9, "value": "bot"});
    let bad =
        t.nl.put(
            &format!("/training_data/{id}"),
            json!({"input": "hello bot", "entities": [greet(9), shifted]}),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text);
    assert_contains(
        &bad.text,
        "characters 5-9 are \" bot\", not its value \"bot\"",
    );
    let right = json!({"entity": "pizza", "start": 6, "end": 9, "value": "bot"});
    t.nl.put(
        &format!("/training_data/{id}"),
        json!({"entities": [greet(9), right]}),
    )
    .await
    .ok();
}

async fn a_training_sentence_is_deleted_by_its_id(backend: Backend) {
    let t = trained(backend).await;
    let id = t.first_sentence().await;
    let path = t.nl.at(&format!("/training_data/{id}"));
    let delete = || t.nl.api.delete(&path, &t.nl.alice);
    assert_eq!(delete().await.status, 204);
    let td = t.nl.get("/training_data?limit=1").await.ok();
    assert_eq!(td["total"], t.kept - 1);
    assert_ne!(td["data"][0]["id"], json!(id));
    let again = delete().await;
    assert_eq!(again.status, 404, "{}", again.text);
}

/// The same sentences sent again are kept once; one sent with other labels takes them.
async fn sentences_sent_again_are_stored_once(backend: Backend) {
    let t = trained(backend).await;
    let again = form(
        &t.nl.api,
        &t.nl.at("/train"),
        &t.nl.alice,
        &[
            "hello bot #intent:greet",
            "hello bot",
            "i want a pizza #intent:cancel",
        ],
        Some(("training.txt", example_training())),
    )
    .await
    .ok();
    let td = t.nl.get("/training_data?limit=100").await.ok();
    assert_eq!(td["total"], t.kept, "{again}");
    // "hello bot" came twice in the request: the later one (no label) is what it says now;
    // "i want a pizza" too: the file's line, after the request's sentence, stands (unchanged).
    assert_eq!(again["relabelled"], 1, "{again}");
    let rows = td["data"].as_array().unwrap();
    let find = |text: &str| rows.iter().find(|r| r["input"] == text).unwrap().clone();
    assert_eq!(find("hello bot")["entities"], json!([]));
    // The file's own line comes after the request's sentence: the file's label stands.
    assert_eq!(find("i want a pizza")["entities"][0]["label"], "order");
    assert_eq!(again["unchanged"], t.kept - 1, "{again}");
    assert_eq!(again["rowIds"].as_array().unwrap().len(), 1, "{again}");
}

/// A sentence's text is its key: an edit to another sentence's text is refused (409).
async fn a_sentence_cannot_take_another_sentences_text(backend: Backend) {
    let t = trained(backend).await;
    let id = t.first_sentence().await;
    let taken =
        t.nl.put(
            &format!("/training_data/{id}"),
            json!({"input": "i want a pizza"}),
        )
        .await;
    assert_eq!(taken.status, 409, "{}", taken.text);
    assert_contains(&taken.text, "is the text of another sentence");
    assert_eq!(
        t.nl.get("/training_data?limit=1").await.ok()["data"][0]["input"],
        "hello bot"
    );
}

/// A team's viewer reads an NLU's sentences and changes none of them.
async fn a_teams_viewer_reads_the_sentences_and_changes_nothing(backend: Backend) {
    let (_server, api, admin, alice) = with_alice(backend).await;
    let (viewer_id, viewer) = api.user(&admin, "vera", "developer").await;
    let team = s(&api
        .post("/teams", &alice, json!({"name": "acme"}))
        .await
        .ok()["id"]);
    api.post(
        &format!("/teams/{team}/users/{viewer_id}"),
        &alice,
        json!({"role": "viewer"}),
    )
    .await
    .ok();
    let p = api
        .post(
            "/projects",
            &alice,
            json!({"name": "words", "teamId": team, "options": {"nlu": true, "nluLang": "en"}}),
        )
        .await
        .ok();
    let base = format!("/projects/{}/nlus/words", s(&p["id"]));
    form(
        &api,
        &format!("{base}/train"),
        &alice,
        &["hello there"],
        None,
    )
    .await
    .ok();
    let td = api
        .get(&format!("{base}/training_data"), &viewer)
        .await
        .ok();
    assert_eq!(td["data"][0]["input"], "hello there");
    let row = format!("{base}/training_data/{}", s(&td["data"][0]["id"]));
    assert_eq!(api.delete(&row, &viewer).await.status, 403);
    assert_eq!(
        api.put(&row, &viewer, json!({"input": "bye"})).await.status,
        403
    );
    let train = form(&api, &format!("{base}/train"), &viewer, &["bye"], None).await;
    assert_eq!(train.status, 403);
    assert_eq!(
        api.get(&format!("{base}/training_data"), &alice).await.ok()["total"],
        1
    );
}

/// Labels carry ids (the API's TrainingEntity has one), made up when a client sent none.
async fn every_training_label_has_an_id(backend: Backend) {
    let t = trained(backend).await;
    let td = t.nl.get("/training_data?limit=100").await.ok();
    let labels: Vec<&Value> = td["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["entities"].as_array().unwrap())
        .collect();
    assert!(labels.len() >= t.kept - 5, "{td}"); // all but the five negative examples
    assert!(labels.iter().all(|e| e["id"].is_string()), "{td}");
}

/// Only a new input: the sentence keeps its labels (a trait spans the new sentence).
async fn a_training_sentence_given_only_a_new_input_keeps_its_labels(backend: Backend) {
    let t = trained(backend).await;
    let id = t.first_sentence().await;
    let upd =
        t.nl.put(
            &format!("/training_data/{id}"),
            json!({"input": "well hello there, robot"}),
        )
        .await
        .ok();
    assert_eq!(upd["input"], "well hello there, robot");
    let td = t.nl.get("/training_data?limit=1").await.ok();
    let e = &td["data"][0]["entities"][0];
    assert_eq!(
        (&e["entity"], &e["label"], &e["start"], &e["end"]),
        (&json!("intent"), &json!("greet"), &json!(0), &json!(23)),
        "{td}"
    );
}

/// Every entity of the sentence, the first sentence's map as `result`.
async fn a_prediction_gives_every_entity_of_the_first_sentence_as_result(backend: Backend) {
    let t = trained(backend).await;
    let p =
        t.nl.predict(&["i want to order two pepperoni pizzas", "good morning"])
            .await;
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
}

async fn a_prediction_answers_each_sentence_in_results(backend: Backend) {
    let t = trained(backend).await;
    let p =
        t.nl.predict(&["i want to order two pepperoni pizzas", "good morning"])
            .await;
    assert_eq!(p["results"][1]["input"], "good morning");
    assert_eq!(top(&p["results"][1]["output"], "intent")["value"], "greet");
}

async fn debug_shows_the_tokens_and_every_labels_score(backend: Backend) {
    let t = trained(backend).await;
    let d = t.nl.form("/debug", &["hello there"]).await.ok();
    assert_eq!(d["debug"]["tokens"][0]["token"], "hello");
    let scores = d["debug"]["entities"]["intent"]["scores"]
        .as_array()
        .unwrap();
    assert_eq!(scores.len(), 3, "{d}");
}

async fn debug_takes_one_sentence(backend: Backend) {
    let t = trained(backend).await;
    assert_eq!(t.nl.form("/debug", &["a", "b"]).await.status, 400);
}

async fn a_retrain_answers_the_count_of_stored_sentences_and_a_new_revision(backend: Backend) {
    let t = trained(backend).await;
    let rt = t.nl.post("/retrain", json!({})).await.ok();
    assert_eq!(rt["status"], "success");
    assert_eq!(rt["count"], t.kept);
    assert_ne!(s(&rt["revision"]), s(&t.answer["revision"]));
}

async fn the_nlu_profiles_include_the_built_in_ones(backend: Backend) {
    let (_server, api, _admin, alice) = with_alice(backend).await;
    let pr = api.get("/nlus/profiles?limit=100", &alice).await.ok();
    let items: Vec<String> = pr["items"].as_array().unwrap().iter().map(s).collect();
    for want in ["default", "klitika", "number", "intent", "sentiment", "ner"] {
        assert!(items.contains(&want.to_string()), "{items:?}");
    }
    assert_eq!(pr["total"], items.len());
}

/// A bot `name` that takes the attribute `entity` from the NLU `nlu_id` (its value at the
/// entity's path) for any text, and says `text`.
fn nl_bot(name: &str, nlu_id: &str, entity: &str, text: &str) -> Value {
    json!({
        "name": name,
        "nlus": {"n": {"type": "nl", "options": {"nluId": nlu_id, "output": "value", "flatten": true}}},
        "flows": {"f": {
            "intents": {"any": {"initial": true, "type": "text", "attributes": {entity: {"nlu": "n", "path": entity}}}},
            "states": {"s": {"initial": true, "end": true, "transitions": {"s": {"fallback": true}},
                "action": {"name": "text", "options": {"text": text}}}}
        }}
    })
}

async fn visibility_between_accounts(backend: Backend) {
    let (_server, api, admin, alice) = with_alice(backend).await;
    let (_, bob) = api.user(&admin, "bob", "developer").await;
    let (_, base, _) = trained_pizza_nl(&api, &alice).await;

    // Bob's bot uses alice's private NLU: a warning at push, null output at run time.
    let bot = nl_bot(
        "borrow",
        "alice:pizza-nl",
        "intent",
        "intent=$(attributes.intent)",
    );
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
            let r = converse_text(&api, &token, &pid, "i want a pizza").await;
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
    // What it was taught stays its owner's: bob may not read or delete its sentences.
    let td = format!("{base}/training_data");
    assert_eq!(api.get(&td, &bob).await.status, 403);
    let first = s(&api.get(&format!("{td}?limit=1"), &alice).await.ok()["data"][0]["id"]);
    assert_eq!(api.delete(&format!("{td}/{first}"), &bob).await.status, 404);
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
pub(crate) async fn trained_pizza_nl(api: &Api, alice: &str) -> (String, String, Value) {
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

/// Twelve sentences, "i feel <word> today": six happy words labelled `mood:<pos>`, six sad
/// ones `mood:<neg>`.
fn mood_lines(pos: &str, neg: &str) -> Vec<String> {
    let happy = [
        "great",
        "wonderful",
        "fantastic",
        "lovely",
        "awesome",
        "brilliant",
    ];
    let sad = [
        "terrible",
        "awful",
        "horrible",
        "miserable",
        "dreadful",
        "gloomy",
    ];
    let label = |words: [&str; 6], l: &str| words.map(|w| format!("i feel {w} today #mood:{l}"));
    [label(happy, pos), label(sad, neg)].concat()
}

/// Edits the stored sentences of the NLU at `base` to the labels of `lines` (one each, in
/// order, the mood trait over the whole sentence).
async fn relabel(api: &Api, alice: &str, base: &str, lines: &[String]) {
    let td = api
        .get(&format!("{base}/training_data?limit=100"), alice)
        .await
        .ok();
    for (row, line) in td["data"].as_array().unwrap().iter().zip(lines) {
        let (_, label) = line.rsplit_once(':').unwrap();
        let end = s(&row["input"]).chars().count();
        api.put(
            &format!("{base}/training_data/{}", s(&row["id"])),
            alice,
            json!({"entities": [{"entity": "mood", "label": label, "value": label, "start": 0, "end": end}]}),
        )
        .await
        .ok();
    }
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
    let v1 = mood_lines("happy", "sad");
    let v1: Vec<&str> = v1.iter().map(String::as_str).collect();
    let t1 = form(&api, &format!("{base}/train"), &alice, &v1, None)
        .await
        .ok();
    assert_eq!(t1["status"], "success", "{t1}");
    let r1 = s(&t1["revision"]);

    let bot = nl_bot("mood", "alice:moods", "mood", "$(attributes.mood)");
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
    relabel(&api, &alice, &base, &mood_lines("sad", "happy")).await;
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
    // The trait must exist before sentences use it: made, listed, a dictionary beside it.
    let nlu = |args: &[&str]| {
        let mut all = vec!["nlu"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--dir", "greeter"]);
        run(&all)
    };
    let out = ok(nlu(&[
        "entity",
        "add",
        "words",
        "intent",
        "--type",
        "trait",
        "--profile",
        "intent",
        "--label",
        "greet",
        "--label",
        "bye",
    ]));
    assert!(
        out.contains("Added trait entity intent of NLU words"),
        "{out}"
    );
    ok(nlu(&[
        "entity",
        "add",
        "words",
        "size",
        "--type",
        "dict",
        "--value",
        "small: tiny, little",
        "--value",
        "large",
    ]));
    let out = ok(nlu(&["entity", "list", "words"]));
    assert!(out.contains("intent  trait/intent  greet, bye"), "{out}");
    assert!(out.contains("size  dict/default  large, small"), "{out}");
    // A change keeps what it does not name (the profile here).
    ok(nlu(&[
        "entity",
        "add",
        "words",
        "intent",
        "--type",
        "trait",
        "--label",
        "greet",
        "--label",
        "bye",
        "--label",
        "thanks",
        "--replace",
    ]));
    let out = ok(nlu(&["entity", "list", "words"]));
    assert!(
        out.contains("intent  trait/intent  greet, bye, thanks"),
        "{out}"
    );
    let bad = nlu(&[
        "entity", "add", "words", "size", "--type", "dict", "--value", "huge",
    ]);
    assert_ne!(bad.code, 0, "a second entity of one name");
    ok(nlu(&["entity", "rm", "words", "size"]));
    assert!(!ok(nlu(&["entity", "list", "words"])).contains("size"));

    let file = work.path().join("greeter/training.txt");
    std::fs::write(
        &file,
        "hello #intent:greet\nhi there #intent:greet\n\n// greetings above\ngood morning #intent:greet\n\
         bye #intent:bye\ngoodbye #intent:bye\nsee you later #intent:bye\nhowdy #intent:wave\n",
    )
    .unwrap();
    let train = || nlu(&["train", "words", "greeter/training.txt"]);
    // A refused line fails the command and is named by its line in the file; the others
    // are stored and trained.
    let out = train();
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(!out.stdout.contains("success"), "{}", out.stdout);
    assert!(
        out.stdout.contains("6 of 7 sentences accepted (6 new"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("greeter/training.txt:9: ") && out.stdout.contains("wave"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("1 of 7 lines of greeter/training.txt refused"),
        "{}",
        out.stderr
    );
    // Sending the same file again stores nothing twice.
    let out = train();
    assert!(
        out.stdout
            .contains("(0 new, 0 relabelled, 6 already there)"),
        "{}",
        out.stdout
    );
    let api = server.api();
    let admin = api.admin_token().await;
    let pid = s(&api.get("/projects", &admin).await.ok()["data"][0]["id"]);
    let rows = api
        .get(
            &format!("/projects/{pid}/nlus/words/training_data?limit=50"),
            &admin,
        )
        .await
        .ok();
    assert_eq!(rows["total"], 6, "{rows}");
    // Without the refused line the command succeeds.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("howdy #intent:wave\n", "");
    std::fs::write(&file, text).unwrap();
    let out = ok(train());
    assert!(out.contains("training: success"), "{out}");
    let out = ok(nlu(&["predict", "words", "hello friend"]));
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
