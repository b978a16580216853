//! Who may do what: the authorization matrix over every route of the project API. The
//! credentials are a login token (administrator, a team's teamAdmin, developer and viewer,
//! a stranger, two developers whose projects share a name), a team token, a workspace key
//! (the team's, and one of a user's own namespace) and an agent key; each cell is the status
//! that credential must get. Every route the OpenAPI document lists must have its row: a new
//! route without one fails here.

use crate::common::{Api, Backend, InProcess, s};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The people, teams, projects and keys of the matrix.
struct World {
    api: Api,
    /// Credential name → bearer value (`none`: no header).
    creds: BTreeMap<&'static str, Option<String>>,
    /// The team `acme`'s project `mybot` (created by its teamAdmin).
    team_project: String,
    /// dev1's and dev2's projects, both named `mybot`.
    dev1_project: String,
    acme: String,
    /// An account only administrators may touch (user routes act on it).
    victim: String,
    ta: String,
    dev1: String,
}

async fn world(backend: Backend) -> (InProcess, World) {
    // Each credential makes a few hundred requests here: past the per-minute rate limit.
    let server = InProcess::start_with(
        backend,
        botbox_api::ApiConfig {
            rate_limit_per_minute: 1_000_000,
            ..Default::default()
        },
    )
    .await;
    let api = server.api();
    let admin = api.admin_token().await;
    let (_, ta) = api.user(&admin, "ta", "developer").await;
    let (tdev_id, tdev) = api.user(&admin, "tdev", "developer").await;
    let (tview_id, tview) = api.user(&admin, "tview", "developer").await;
    let (_, eve) = api.user(&admin, "eve", "developer").await;
    let (dev1_id, dev1) = api.user(&admin, "dev1", "developer").await;
    let (_, dev2) = api.user(&admin, "dev2", "developer").await;
    let (victim, _) = api.user(&admin, "victim", "developer").await;
    let acme = s(&api.post("/teams", &ta, json!({"name": "acme"})).await.ok()["id"]);
    for (uid, role) in [(&tdev_id, "developer"), (&tview_id, "viewer")] {
        api.post(
            &format!("/teams/{acme}/users/{uid}"),
            &ta,
            json!({"role": role}),
        )
        .await
        .ok();
    }
    let project = |token: String, body: Value| {
        let api = api.clone();
        async move { s(&api.post("/projects", &token, body).await.ok()["id"]) }
    };
    let mybot = json!({"name": "mybot", "options": {"bot": true}});
    let dev1_project = project(dev1.clone(), mybot.clone()).await;
    project(dev2.clone(), mybot.clone()).await;
    let team_project = project(
        ta.clone(),
        json!({"name": "mybot", "options": {"bot": true}, "teamId": acme}),
    )
    .await;
    let key = |token: String, ws: String| {
        let api = api.clone();
        async move {
            s(&api
                .post(&format!("/teams/{ws}/keys"), &token, json!({"name": "ci"}))
                .await
                .ok()["key"])
        }
    };
    let acme_key = key(ta.clone(), acme.clone()).await;
    let dev1_key = key(dev1.clone(), dev1_id.clone()).await;
    let (_, agent_key) = botbox_service::agent::keys::create(
        &server.db().await,
        botbox_service::agent::keys::NewKey {
            kind: botbox_service::agent::keys::KeyKind::Agent,
            scope: "an-environment",
            project_id: Some(&team_project),
            owner_id: &acme,
            name: "agent",
            created_by: &tdev_id,
        },
    )
    .await
    .unwrap();
    let tview_team = api.team_token(&tview, &acme).await;
    let tdev_team = api.team_token(&tdev, &acme).await;
    let creds = BTreeMap::from([
        ("admin", Some(admin)),
        ("ta", Some(ta.clone())),
        ("tdev", Some(tdev)),
        ("tview", Some(tview)),
        ("tview-team", Some(tview_team)),
        ("tdev-team", Some(tdev_team)),
        ("eve", Some(eve)),
        ("dev1", Some(dev1.clone())),
        ("dev2", Some(dev2)),
        ("acme-key", Some(acme_key)),
        ("dev1-key", Some(dev1_key)),
        ("agent-key", Some(agent_key)),
        ("none", None),
    ]);
    let w = World {
        api,
        creds,
        team_project,
        dev1_project,
        acme,
        victim,
        ta,
        dev1,
    };
    (server, w)
}

/// What a credential may do on a project.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    /// Reads and writes pass the authorization (whatever the handler answers then).
    Writes,
    /// Reads pass; anything else is 403.
    Reads,
    /// 404 on every route: the project's existence is not revealed.
    Hidden,
    /// 401: not a credential of this API.
    Refused,
}

/// Each credential's cell on the team's project and on dev1's.
fn project_cells() -> [(&'static str, Cell, Cell); 13] {
    use Cell::*;
    [
        ("admin", Writes, Writes),
        ("ta", Writes, Hidden),
        ("tdev", Writes, Hidden),
        ("tview", Reads, Hidden),
        ("tview-team", Reads, Hidden),
        ("tdev-team", Writes, Hidden),
        ("eve", Hidden, Hidden),
        ("dev1", Hidden, Writes),
        ("dev2", Hidden, Hidden),
        ("acme-key", Writes, Hidden),
        ("dev1-key", Hidden, Writes),
        ("agent-key", Refused, Refused),
        ("none", Refused, Refused),
    ]
}

/// The project API's routes (method, template), from the OpenAPI document.
fn routes() -> Vec<(String, String)> {
    all_routes()
        .into_iter()
        .filter(|(_, p)| !p.starts_with("/v1"))
        .collect()
}

/// The agent API's routes (method, template).
fn v1_routes() -> Vec<(String, String)> {
    all_routes()
        .into_iter()
        .filter(|(_, p)| p.starts_with("/v1"))
        .collect()
}

fn all_routes() -> Vec<(String, String)> {
    let doc = serde_json::to_value(botbox_api::openapi()).unwrap();
    let mut out = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                out.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// `template` with `{projectId}` (and a bot id) as `pid`, every other parameter as an id
/// that names nothing.
fn fill(template: &str, pid: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').unwrap() + open;
        match &rest[open + 1..close] {
            "projectId" | "botId" => out.push_str(pid),
            _ => out.push_str("nope"),
        }
        rest = &rest[close + 1..];
    }
    out + rest
}

impl World {
    async fn call(&self, cred: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let token = self.creds[cred].as_deref();
        let r = self.api.raw(method, path, token, body.to_vec()).await;
        (r.status, r.text)
    }

    /// A project of the same owner as `pid`, to be deleted by a cell that may delete.
    async fn throwaway(&self, pid: &str, n: usize) -> String {
        let name = format!("throwaway-{n}");
        let (token, body) = if pid == self.team_project {
            (
                &self.ta,
                json!({"name": name, "options": {"bot": true}, "teamId": self.acme}),
            )
        } else {
            (&self.dev1, json!({"name": name, "options": {"bot": true}}))
        };
        s(&self.api.post("/projects", token, body).await.ok()["id"])
    }
}

/// Every route under `/projects/{projectId}`, every credential, both projects. Bodies are
/// malformed JSON, other ids name nothing: a cell that passes authorization fails later
/// without changing anything (deleting the project itself deletes a throwaway one).
async fn every_project_route_answers_each_credential_as_its_cell(backend: Backend) {
    let (_server, w) = world(backend).await;
    let mut wrong = Vec::new();
    let mut n = 0;
    for (method, template) in routes() {
        if !template.starts_with("/projects/{projectId}")
            && !template.starts_with("/analytics/{botId}")
        {
            continue;
        }
        // NL reads of a public NLU are open to any signed-in user: their own test.
        let nl_read = template.contains("/nlus/{nluName}")
            && (method == "GET" || template.ends_with("/predict") || template.ends_with("/debug"));
        for (cred, on_team, on_dev1) in project_cells() {
            for (pid, cell) in [(&w.team_project, on_team), (&w.dev1_project, on_dev1)] {
                n += 1;
                let read = method == "GET";
                let deletes_project = method == "DELETE" && template == "/projects/{projectId}";
                let target = if deletes_project && cell == Cell::Writes {
                    w.throwaway(pid, n).await
                } else {
                    pid.clone()
                };
                let path = fill(&template, &target);
                let (status, text) = w.call(cred, &method, &path, b"{").await;
                let hidden =
                    status == 404 && text.lines().last() == Some(&format!("project {target}"));
                // Keys are administered by people: a workspace key may not make agent keys.
                let key_admin = template.contains("/keys") && cred.ends_with("-key");
                let ok = match cell {
                    Cell::Refused => status == 401,
                    Cell::Writes if key_admin => status == 403,
                    Cell::Hidden if nl_read => status == 404,
                    Cell::Hidden => hidden,
                    Cell::Reads if !read && !nl_read => status == 403,
                    Cell::Reads | Cell::Writes => {
                        !matches!(status, 401 | 403) && !hidden && status < 500
                    }
                };
                if !ok {
                    wrong.push(format!(
                        "{method} {template} as {cred} on {}: expected {cell:?}, got {status} {}",
                        if *pid == w.team_project {
                            "the team's project"
                        } else {
                            "dev1's project"
                        },
                        text.lines().last().unwrap_or("")
                    ));
                }
            }
        }
    }
    assert_no_wrong_cells(&wrong);
}

/// The routes outside a project: (method, path, body, status per credential in the order
/// admin, ta, eve, tview-team, acme-key, agent-key, none; 0: not tried).
fn other_rows(w: &World) -> Vec<(&'static str, String, Value, [u16; 7])> {
    let (acme, victim) = (&w.acme, &w.victim);
    vec![
        (
            "GET",
            "/me".into(),
            Value::Null,
            [200, 200, 200, 200, 200, 401, 401],
        ),
        (
            "GET",
            "/storage".into(),
            Value::Null,
            [200, 200, 200, 200, 200, 401, 401],
        ),
        (
            "GET",
            "/projects".into(),
            Value::Null,
            [200, 200, 200, 200, 200, 401, 401],
        ),
        (
            "GET",
            "/projects?owner=all".into(),
            Value::Null,
            [200, 403, 403, 403, 403, 401, 401],
        ),
        (
            "GET",
            format!("/projects?owner={acme}"),
            Value::Null,
            [200, 200, 404, 200, 200, 401, 401],
        ),
        (
            "POST",
            "/projects".into(),
            json!({"name": "bad name!", "teamId": acme}),
            [400, 400, 404, 403, 400, 401, 401],
        ),
        (
            "GET",
            "/projects/getProjectByName?name=mybot".into(),
            Value::Null,
            [404, 200, 404, 200, 200, 401, 401],
        ),
        (
            "DELETE",
            "/caches".into(),
            Value::Null,
            [200, 200, 200, 403, 200, 401, 401],
        ),
        (
            "POST",
            "/deployments/nope/rollback".into(),
            json!({}),
            [404, 404, 404, 404, 404, 401, 401],
        ),
        // The audit trail is for people; each reads their own share of it.
        (
            "GET",
            "/audit".into(),
            Value::Null,
            [200, 200, 200, 200, 403, 401, 401],
        ),
        (
            "GET",
            "/nlus/profiles".into(),
            Value::Null,
            [200, 200, 200, 200, 200, 401, 401],
        ),
        // Failed logins count per account (10 per 15 minutes): a few cells are enough.
        (
            "POST",
            "/login".into(),
            json!({"username": "nobody", "password": "x"}),
            [401, 0, 0, 0, 401, 401, 401],
        ),
        (
            "POST",
            "/cli-login".into(),
            json!({"username": "nobody", "password": "x"}),
            [0, 0, 401, 0, 0, 0, 401],
        ),
        // Revoking: persons' cells are the journey test's (a fresh token each).
        (
            "POST",
            "/logout".into(),
            Value::Null,
            [0, 0, 0, 0, 403, 401, 401],
        ),
        (
            "DELETE",
            "/tokens".into(),
            Value::Null,
            [0, 0, 0, 0, 403, 401, 401],
        ),
        (
            "PUT",
            "/me/password".into(),
            json!({"currentPassword": "wrong-password", "newPassword": "long-enough-1"}),
            [400, 400, 400, 400, 403, 401, 401],
        ),
        (
            "POST",
            "/tokens".into(),
            json!({"type": "team", "teamId": acme}),
            [404, 200, 404, 200, 403, 401, 401],
        ),
        (
            "GET",
            "/tokens/nope".into(),
            Value::Null,
            [404, 404, 404, 404, 403, 401, 401],
        ),
        (
            "GET",
            "/users".into(),
            Value::Null,
            [200, 403, 403, 403, 403, 401, 401],
        ),
        (
            "POST",
            "/users".into(),
            json!({"username": "bad name!", "password": "x"}),
            [400, 403, 403, 403, 403, 401, 401],
        ),
        (
            "GET",
            "/users/getInfo/ta".into(),
            Value::Null,
            [200, 200, 200, 200, 403, 401, 401],
        ),
        (
            "GET",
            format!("/users/{victim}"),
            Value::Null,
            [200, 404, 404, 404, 403, 401, 401],
        ),
        (
            "GET",
            format!("/users/{victim}/teams"),
            Value::Null,
            [200, 403, 403, 403, 403, 401, 401],
        ),
        (
            "POST",
            format!("/users/{victim}/disable"),
            Value::Null,
            [200, 403, 403, 403, 403, 401, 401],
        ),
        (
            "POST",
            format!("/users/{victim}/enable"),
            Value::Null,
            [200, 403, 403, 403, 403, 401, 401],
        ),
        (
            "PUT",
            format!("/users/{victim}/password"),
            json!({"password": "short"}),
            [400, 403, 403, 403, 403, 401, 401],
        ),
        (
            "POST",
            "/teams".into(),
            json!({"name": "bad name!"}),
            [400, 400, 400, 400, 403, 401, 401],
        ),
        (
            "GET",
            format!("/teams/{acme}"),
            Value::Null,
            [200, 200, 404, 200, 403, 401, 401],
        ),
        // The team still has a project: nobody may delete it yet.
        (
            "DELETE",
            format!("/teams/{acme}"),
            Value::Null,
            [409, 409, 404, 403, 403, 401, 401],
        ),
        (
            "GET",
            format!("/teams/{acme}/users"),
            Value::Null,
            [200, 200, 404, 200, 403, 401, 401],
        ),
        (
            "POST",
            format!("/teams/{acme}/users/{victim}"),
            json!({"role": "nonsense"}),
            [400, 400, 404, 403, 403, 401, 401],
        ),
        (
            "DELETE",
            format!("/teams/{acme}/users/{victim}"),
            Value::Null,
            [404, 404, 404, 403, 403, 401, 401],
        ),
        (
            "GET",
            format!("/teams/{acme}/keys"),
            Value::Null,
            [200, 200, 404, 200, 403, 401, 401],
        ),
        (
            "POST",
            format!("/teams/{acme}/keys"),
            json!({"name": ""}),
            [400, 400, 404, 403, 403, 401, 401],
        ),
        (
            "DELETE",
            format!("/teams/{acme}/keys/nope"),
            Value::Null,
            [404, 404, 404, 403, 403, 401, 401],
        ),
    ]
}

/// Every route outside a project, by its row; a route without a row fails.
async fn every_other_route_answers_each_credential_as_its_row(backend: Backend) {
    let (_server, w) = world(backend).await;
    let rows = other_rows(&w);
    let template_of = |path: &str| -> String {
        // The row's path back to its template: ids of this world become their parameter.
        let mut t = path.split('?').next().unwrap().to_owned();
        for (id, name) in [(&w.acme, "{teamId}"), (&w.victim, "{userId}")] {
            t = t.replace(id.as_str(), name);
        }
        t.replace("/getInfo/ta", "/getInfo/{key}")
            .replace("/tokens/nope", "/tokens/{tokenId}")
            .replace("/keys/nope", "/keys/{keyId}")
            .replace("/deployments/nope", "/deployments/{deploymentId}")
    };
    let covered: Vec<(String, String)> = rows
        .iter()
        .map(|(m, p, _, _)| (m.to_string(), template_of(p)))
        .collect();
    let routes = routes()
        .into_iter()
        .filter(|(_, t)| {
            !t.starts_with("/projects/{projectId}") && !t.starts_with("/analytics/{botId}")
        })
        .map(|(m, t)| (m, t.replace("/teams/{team}", "/teams/{teamId}")));
    assert_every_route_has_a_row(routes, &covered);
    let creds = [
        "admin",
        "ta",
        "eve",
        "tview-team",
        "acme-key",
        "agent-key",
        "none",
    ];
    w.assert_rows(creds, &rows).await;
}

/// The agent API (`/v1`): (method, path, body, status for admin's login token, the team's
/// workspace key, an agent key, no credential; 0: not tried). Requests without a valid key
/// are throttled per address (30 a minute), so those cells sample one route per family.
fn v1_rows() -> Vec<(&'static str, &'static str, Value, [u16; 4])> {
    let none = Value::Null;
    vec![
        ("POST", "/v1/chat", json!({}), [401, 403, 400, 401]),
        ("GET", "/v1/chat/nope", none.clone(), [0, 403, 404, 0]),
        ("POST", "/v1/chat/nope/cancel", json!({}), [0, 403, 404, 0]),
        ("POST", "/v1/chat/nope/steer", json!({}), [0, 403, 404, 0]),
        (
            "GET",
            "/v1/chat/nope/stream",
            none.clone(),
            [0, 403, 404, 0],
        ),
        ("GET", "/v1/cases", none.clone(), [401, 200, 403, 401]),
        ("POST", "/v1/cases", json!({}), [0, 400, 403, 0]),
        ("GET", "/v1/cases/nope", none.clone(), [0, 404, 403, 0]),
        ("PUT", "/v1/cases/nope", json!({}), [0, 404, 403, 0]),
        ("DELETE", "/v1/cases/nope", none.clone(), [0, 404, 403, 0]),
        (
            "GET",
            "/v1/cases/nope/tasks",
            none.clone(),
            [0, 404, 403, 0],
        ),
        ("POST", "/v1/cases/nope/tasks", json!({}), [0, 404, 403, 0]),
        ("GET", "/v1/tasks/nope", none.clone(), [401, 404, 403, 401]),
        (
            "GET",
            "/v1/tasks/nope/outputs",
            none.clone(),
            [0, 404, 403, 0],
        ),
        ("POST", "/v1/tasks/nope/review", json!({}), [0, 404, 403, 0]),
        ("GET", "/v1/webhooks", none.clone(), [401, 200, 403, 401]),
        ("POST", "/v1/webhooks", json!({}), [0, 400, 403, 0]),
        ("GET", "/v1/webhooks/nope", none.clone(), [0, 404, 403, 0]),
        (
            "DELETE",
            "/v1/webhooks/nope",
            none.clone(),
            [0, 404, 403, 0],
        ),
        (
            "POST",
            "/v1/webhooks/nope/enable",
            json!({}),
            [0, 404, 403, 0],
        ),
        (
            "POST",
            "/v1/webhooks/nope/rotate",
            json!({}),
            [0, 404, 403, 0],
        ),
        (
            "GET",
            "/v1/webhooks/nope/messages",
            none.clone(),
            [0, 404, 403, 0],
        ),
        ("GET", "/v1/hooks", none.clone(), [401, 200, 403, 401]),
        ("POST", "/v1/hooks", json!({}), [0, 400, 403, 0]),
        ("DELETE", "/v1/hooks/nope", none.clone(), [0, 404, 403, 0]),
        // Signed routes: a signature, not a key, authenticates them.
        ("POST", "/v1/hooks/nope", json!({}), [401, 401, 401, 401]),
        ("GET", "/v1/artifacts/nope", none, [403, 403, 403, 403]),
    ]
}

/// Every `/v1` route, by its row; a route without a row fails.
async fn every_v1_route_answers_each_key_as_its_row(backend: Backend) {
    let (_server, w) = world(backend).await;
    let rows = v1_rows();
    let template = |p: &str| {
        p.split('/')
            .map(|seg| if seg == "nope" { "{}" } else { seg })
            .collect::<Vec<_>>()
            .join("/")
    };
    let covered: Vec<(String, String)> = rows
        .iter()
        .map(|(m, p, _, _)| (m.to_string(), template(p)))
        .collect();
    let routes = v1_routes().into_iter().map(|(m, t)| {
        let generic = t
            .split('/')
            .map(|seg| if seg.starts_with('{') { "{}" } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        (m, generic)
    });
    assert_every_route_has_a_row(routes, &covered);
    w.assert_rows(["admin", "acme-key", "agent-key", "none"], &rows)
        .await;
}

/// Fails listing every cell whose status was not its expected one.
fn assert_no_wrong_cells(wrong: &[String]) {
    assert!(
        wrong.is_empty(),
        "{} wrong cells:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// Fails naming every route (method, template) that `covered` lacks.
fn assert_every_route_has_a_row(
    routes: impl Iterator<Item = (String, String)>,
    covered: &[(String, String)],
) {
    let missing: Vec<String> = routes
        .filter(|r| !covered.contains(r))
        .map(|(m, t)| format!("{m} {t}"))
        .collect();
    assert!(missing.is_empty(), "routes without a row: {missing:?}");
}

impl World {
    /// Sends each row's request as each credential (a status of 0: not tried) and fails
    /// listing every cell whose status is not the row's.
    async fn assert_rows<const N: usize>(
        &self,
        creds: [&str; N],
        rows: &[(&'static str, impl AsRef<str>, Value, [u16; N])],
    ) {
        let mut wrong = Vec::new();
        for (method, path, body, want) in rows {
            let path = path.as_ref();
            for (cred, want) in creds.iter().zip(want) {
                if *want == 0 {
                    continue;
                }
                let bytes = if body.is_null() {
                    vec![]
                } else {
                    serde_json::to_vec(body).unwrap()
                };
                let (status, text) = self.call(cred, method, path, &bytes).await;
                if status != *want {
                    wrong.push(format!(
                        "{method} {path} as {cred}: expected {want}, got {status} {}",
                        text.lines().last().unwrap_or("")
                    ));
                }
            }
        }
        assert_no_wrong_cells(&wrong);
    }
}

/// A key of a user's own namespace acts within that user's rights: it stops with the
/// account and works again when it is enabled.
async fn a_users_key_stops_with_the_account(backend: Backend) {
    let (_server, w) = world(backend).await;
    let admin = w.creds["admin"].clone().unwrap();
    let dev1_id = s(&w.api.get("/me", &w.dev1).await.ok()["userId"]);
    let project = format!("/projects/{}", w.dev1_project);
    assert_eq!(w.call("dev1-key", "GET", &project, b"").await.0, 200);
    let disabled = w
        .api
        .post(&format!("/users/{dev1_id}/disable"), &admin, json!({}))
        .await;
    assert_eq!(disabled.status, 200, "{}", disabled.text);
    assert_eq!(w.call("dev1-key", "GET", &project, b"").await.0, 401);
    assert_eq!(w.call("dev1-key", "GET", "/projects", b"").await.0, 401);
    // The team's key is the team's, whoever made it.
    assert_eq!(w.call("acme-key", "GET", "/projects", b"").await.0, 200);
    w.api
        .post(&format!("/users/{dev1_id}/enable"), &admin, json!({}))
        .await
        .ok();
    assert_eq!(w.call("dev1-key", "GET", &project, b"").await.0, 200);
}

on_both_backends!(
    every_project_route_answers_each_credential_as_its_cell,
    every_other_route_answers_each_credential_as_its_row,
    a_users_key_stops_with_the_account,
    every_v1_route_answers_each_key_as_its_row,
);
