//! End-to-end tests of the command line: the real `botbox` binary as a client of a
//! live `botbox serve` on loopback. This is the README's walk-through.

use crate::common;

use crate::common::{ADMIN_PASSWORD, Backend, Server, assert_contains};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

pub(crate) struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `botbox <args>` with its own config home, in `cwd`, feeding `stdin`.
pub(crate) fn bb(home: &Path, cwd: &Path, server: &str, args: &[&str], stdin: &str) -> Out {
    let mut child = Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(args)
        .current_dir(cwd)
        .env("BOTBOX_HOME", home)
        .env("BOTBOX_CACHE", common::GUEST_CACHE)
        .env("BOTBOX_SERVER", server)
        .env_remove("BOTBOX_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[track_caller]
pub(crate) fn ok(o: Out) -> String {
    assert_eq!(o.code, 0, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    o.stdout
}

/// A CLI home and working folder on `server`, logged in as the administrator, holding the
/// bot folder `name` made by `botbox init` and pushed.
pub(crate) fn pushed_folder(server: &str, name: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let run = |args: &[&str]| bb(home.path(), work.path(), server, args, "");
    ok(run(&["login", "-u", "admin", "-p", ADMIN_PASSWORD]));
    ok(run(&["init", name]));
    ok(run(&["push", "--dir", name]));
    (home, work)
}

/// The only project (pushed and deployed by the CLI) with a generic channel on its first
/// environment: (project id, channel id).
async fn pushed_on_a_channel(api: &common::Api, admin: &str) -> (String, String) {
    let pid = api.get("/projects", admin).await.ok()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let envs = api
        .get(&format!("/projects/{pid}/environments"), admin)
        .await
        .ok();
    let env = envs["data"][0]["id"].as_str().unwrap().to_owned();
    let channel = common::generic_channel(api, admin, &pid, &env, "http://127.0.0.1:9/sink").await;
    (pid, channel)
}

/// `user` says `text` on a generic channel's webhook (answered 200).
async fn say(api: &common::Api, channel: &str, user: &str, text: &str) {
    let body = json!({"userId": user, "messages": [{"type": "text", "content": text}]});
    common::post_webhook(api, channel, &body).await;
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn walkthrough() {
    let server = Server::start(Backend::Sqlite, &[]).await;
    let url = server.base.clone();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    // `botbox test` runs the bot locally in a sandbox of its own, its guest cached where the
    // test servers cache theirs (BOTBOX_CACHE).
    std::fs::create_dir_all(home.path()).unwrap();
    let run = |args: &[&str], stdin: &str| bb(home.path(), work.path(), &url, args, stdin);

    // An account added on the server machine, straight into its database.
    let o = Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["user", "add", "carol", "--role", "viewer", "--data"])
        .arg(server.data_dir())
        .env("BOTBOX_NEW_PASSWORD", "carol-password")
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("added user carol"));
    let carol = server.api().login("carol", "carol-password").await;
    assert_eq!(carol["roleId"], "viewer");
    // Logging in with a token.
    let carol_home = tempfile::tempdir().unwrap();
    let o = bb(
        carol_home.path(),
        work.path(),
        &url,
        &["login", "-t", carol["id"].as_str().unwrap()],
        "",
    );
    assert_eq!(ok(o).trim(), "Logged in as carol");

    // Not logged in yet: a clear message.
    let o = run(&["whoami"], "");
    assert_ne!(o.code, 0);
    assert_contains(&o.stderr, "not logged in: run `botbox login` first");
    // Bad credentials.
    let o = run(&["login", "-u", "admin", "-p", "wrong"], "");
    assert_ne!(o.code, 0);
    assert_contains(&o.stderr, "username or password is incorrect");
    // Prompted login (username and password on stdin).
    let out = ok(run(&["login"], &format!("admin\n{ADMIN_PASSWORD}\n")));
    assert_eq!(out.trim(), "Logged in as admin");
    let me: Value = serde_json::from_str(&ok(run(&["whoami", "--json"], ""))).unwrap();
    assert_eq!(me["username"], "admin");

    // init → test → push → deploy.
    ok(run(&["init", "mybot"], ""));
    for f in [
        "mybot/bot.yml",
        "mybot/flows/hello.yml",
        "mybot/tests/hello.yml",
    ] {
        assert!(work.path().join(f).exists(), "{f}");
    }
    let out = ok(run(&["test", "--dir", "mybot"], ""));
    assert!(out.contains("2 passed, 0 failed"), "{out}");
    let out = ok(run(&["push", "--dir", "mybot"], ""));
    assert!(
        out.starts_with("Pushed mybot version 0.0.1 as revision "),
        "{out}"
    );
    let out = ok(run(
        &["deploy", "--dir", "mybot", "--env", "production"],
        "",
    ));
    assert!(out.contains("Deployed mybot 0.0.1"), "{out}");
    let out = ok(run(
        &["deploy", "--dir", "mybot", "--minor", "--env", "production"],
        "",
    ));
    assert!(out.contains("Deployed mybot 0.1.0"), "{out}");
    for (part, version) in [("--major", "1.0.0"), ("--patch", "1.0.1")] {
        let out = ok(run(
            &["deploy", "--dir", "mybot", part, "--env", "production"],
            "",
        ));
        assert!(out.contains(&format!("Deployed mybot {version}")), "{out}");
    }
    let out = ok(run(&["env", "list", "--dir", "mybot"], ""));
    assert!(
        out.contains("production") && out.contains("version 1.0.1"),
        "{out}"
    );
    let out = ok(run(
        &[
            "channel",
            "create",
            "web",
            "--env",
            "production",
            "--type",
            "generic",
            "--url",
            "http://127.0.0.1:9/x",
            "--option",
            "secret=s",
            "--dir",
            "mybot",
        ],
        "",
    ));
    assert!(out.contains("webhook: http://"), "{out}");
    let out = ok(run(
        &["channel", "list", "--env", "production", "--dir", "mybot"],
        "",
    ));
    assert!(out.contains("web  generic  http://"), "{out}");
    let out = ok(run(
        &[
            "channel",
            "update",
            "web",
            "--env",
            "production",
            "--url",
            "http://127.0.0.1:9/y",
            "--option",
            "token=t",
            "--dir",
            "mybot",
            "--json",
        ],
        "",
    ));
    let c: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            c["url"].as_str(),
            c["options"]["secret"].as_str(),
            c["options"]["token"].as_str()
        ),
        (Some("http://127.0.0.1:9/y"), Some("s"), Some("t"))
    );
    ok(run(
        &[
            "channel",
            "delete",
            "web",
            "--env",
            "production",
            "--dir",
            "mybot",
        ],
        "",
    ));
    let out = ok(run(
        &["channel", "list", "--env", "production", "--dir", "mybot"],
        "",
    ));
    assert_eq!(out.trim(), "No channels.");
    // Environments by hand: create on a version, move it, delete it.
    assert!(
        ok(run(
            &[
                "env",
                "create",
                "staging",
                "--version",
                "0.0.1",
                "--dir",
                "mybot"
            ],
            ""
        ))
        .contains("staging runs version 0.0.1")
    );
    assert!(
        ok(run(&["env", "update", "staging", "--dir", "mybot"], ""))
            .contains("staging runs version 1.0.1")
    );
    ok(run(&["env", "delete", "staging", "--dir", "mybot"], ""));
    assert!(!ok(run(&["env", "list", "--dir", "mybot"], "")).contains("staging"));
    // The tests also run against the server (the pushed revision).
    let out = ok(run(&["test", "--remote", "--dir", "mybot"], ""));
    assert!(out.contains("2 passed, 0 failed"), "{out}");

    // A failing test: readable diff, exit code 1.
    let tests = work.path().join("mybot/tests/hello.yml");
    let t = std::fs::read_to_string(&tests).unwrap();
    std::fs::write(&tests, t.replace("Hello! I am mybot.", "Howdy!")).unwrap();
    let o = run(&["test", "--dir", "mybot"], "");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert_contains(&o.stdout, "✗ tests/hello.yml: greets");
    assert!(
        o.stdout.contains("Howdy!") && o.stdout.contains("Hello! I am mybot."),
        "{}",
        o.stdout
    );
    assert_contains(&o.stdout, "1 passed, 1 failed");

    // An invalid bot: every problem with its file and line; nothing pushed.
    let flow = work.path().join("mybot/flows/hello.yml");
    let f = std::fs::read_to_string(&flow).unwrap();
    std::fs::write(
        &flow,
        f.replace(
            "      sorry:\n        fallback: true",
            "      nowhere:\n        fallback: true",
        ),
    )
    .unwrap();
    let o = run(&["push", "--dir", "mybot"], "");
    assert_ne!(o.code, 0);
    assert_contains(&o.stderr, "flows/hello.yml:");
    assert_contains(&o.stderr, "flows.hello.states.init.transitions.nowhere");

    // Console on a bot with memory: a conversation, then clear() starts it over.
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/counter"),
        &work.path().join("counter"),
    );
    ok(run(&["push", "--dir", "counter"], ""));
    ok(run(
        &["deploy", "--dir", "counter", "--env", "production"],
        "",
    ));
    let out = ok(run(
        &["console", "--dir", "counter", "--env", "production"],
        "hi\nmore\ncurrent()\nclear()\nhi\nbutton({x: 1})\nexit\n",
    ));
    let lines: Vec<&str> = out
        .lines()
        .map(|l| l.rsplit("> ").next().unwrap())
        .filter(|l| l.starts_with("Message") || *l == "true")
        .collect();
    assert_eq!(
        lines,
        [
            "Message 1 (total 1)",
            "Message 2 (total 2)",
            "true",
            "Message 1 (total 1)",
            "Message 2 (total 2)"
        ],
        "{out}"
    );
    assert!(
        out.contains("\"contexes\""),
        "current() shows the session: {out}"
    );
    let out = ok(run(
        &["console", "--dir", "counter", "--debug"],
        "hi\nexit\n",
    ));
    assert!(
        out.contains("(count/hi)") && out.contains("[flow count state counting]"),
        "{out}"
    );

    // Agent keys: `key create` prints a sak_ key once; it chats with the
    // environment's bot through /v1; `key list` shows only its hint; `key revoke` ends it.
    let out = ok(run(
        &["key", "create", "--dir", "counter", "--env", "production"],
        "",
    ));
    let key = out
        .split_whitespace()
        .find(|w| w.starts_with("sak_"))
        .unwrap_or_else(|| panic!("no key in {out}"))
        .to_owned();
    let v1 = server.api();
    let r = v1
        .post(
            "/v1/chat",
            &key,
            json!({"messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}),
        )
        .await
        .ok();
    let run_id = r["runId"].as_str().unwrap().to_owned();
    let stream = v1.get(&format!("/v1/chat/{run_id}/stream"), &key).await;
    assert_contains(&stream.text, "Message 1 (total 1)");
    let listed = ok(run(
        &["key", "list", "--dir", "counter", "--env", "production"],
        "",
    ));
    assert!(
        !listed.contains(&key) && listed.contains(&key[key.len() - 4..]),
        "{listed}"
    );
    let key_id = listed.split_whitespace().next().unwrap().to_owned();
    ok(run(
        &[
            "key",
            "revoke",
            &key_id,
            "--dir",
            "counter",
            "--env",
            "production",
        ],
        "",
    ));
    assert_eq!(
        v1.get(&format!("/v1/chat/{run_id}"), &key).await.status,
        401
    );

    // Teams: switch-team gets a team token; an unknown team explains what to do.
    let api = server.api();
    let admin = api.admin_token().await;
    let (bob_id, _) = api.user(&admin, "bob", "developer").await;
    for team in ["acme", "other"] {
        let t = api.post("/teams", &admin, json!({"name": team})).await.ok();
        api.post(
            &format!("/teams/{}/users/{bob_id}", t["id"].as_str().unwrap()),
            &admin,
            json!({"role": "developer"}),
        )
        .await
        .ok();
    }
    let bob_home = tempfile::tempdir().unwrap();
    let bob = |args: &[&str]| bb(bob_home.path(), work.path(), &url, args, "");
    ok(bob(&["login", "-u", "bob", "-p", "bob-password"]));
    assert_eq!(
        ok(bob(&["switch-team", "acme"])).trim(),
        "Switched to team: acme"
    );
    assert!(ok(bob(&["whoami"])).contains("bob in team acme"));
    // The admin's folder is bound to the admin's project: bob's push there goes nowhere.
    let o = bob(&["push", "--dir", "counter"]);
    assert_ne!(o.code, 0);
    assert_contains(&o.stderr, "is not one you can reach");
    // Bob's own copy, bound to nothing: work done as the team belongs to the team.
    copy_dir(
        &work.path().join("counter"),
        &work.path().join("bob-counter"),
    );
    std::fs::remove_file(work.path().join("bob-counter/.botbox.json")).unwrap();
    let o = bob(&["push", "--dir", "bob-counter"]);
    assert_contains(&o.stderr, "project counter of team acme");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        ok(bob(&["switch", "team", "other"])).trim(),
        "Switched to team: other"
    );
    let o = bob(&["deploy", "--dir", "bob-counter"]);
    assert_ne!(o.code, 0, "the folder is bound to team acme's project");
    assert!(
        o.stderr.contains("is not one you can reach") && o.stderr.contains("switch"),
        "{}",
        o.stderr
    );
    let o = bob(&["switch-team", "nope"]);
    assert_ne!(o.code, 0);
    assert_contains(
        &o.stderr,
        "Invalid team name. Unable to switch to team: nope",
    );
    assert_contains(&o.stderr, "log out and log in again");
    assert!(ok(bob(&["switch", "user"])).contains("Switched to user: bob"));
    assert!(!ok(bob(&["whoami"])).contains("in team"));
    ok(bob(&["logout", "--yes"]));
    assert_ne!(bob(&["whoami"]).code, 0);

    // The server is unreachable: said so.
    let o = bb(
        home.path(),
        work.path(),
        "http://127.0.0.1:9",
        &["whoami"],
        "",
    );
    assert_ne!(o.code, 0);
    assert_contains(
        &o.stderr,
        "cannot reach the botbox server at http://127.0.0.1:9",
    );
}

/// `botbox case create --env production -f case.yml`, `botbox task create <case> --input k=v`,
/// `botbox task get <id>` and `botbox task review` with the invoice example.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cases_and_tasks() {
    common::bounded(async {
        // The invoice the bot fetches.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let invoice = format!("http://{}/invoice/1", l.local_addr().unwrap());
        let app = axum::Router::new().fallback(|| async {
            axum::Json(
                json!({"vendor": "ACME", "lines": [{"amount": 10, "qty": 2}, {"amount": 5}]}),
            )
        });
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });

        let server = Server::start(Backend::Sqlite, &["--allow-private-egress"]).await;
        let url = server.base.clone();
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/invoice-case"),
            &work.path().join("invoice-case"),
        );
        let run = |args: &[&str]| bb(home.path(), work.path(), &url, args, "");
        ok(run(&["login", "-u", "admin", "-p", ADMIN_PASSWORD]));
        ok(run(&["push", "--dir", "invoice-case"]));
        ok(run(&[
            "deploy",
            "--dir",
            "invoice-case",
            "--env",
            "production",
        ]));

        let o = run(&[
            "case",
            "create",
            "--env",
            "production",
            "--dir",
            "invoice-case",
        ]);
        assert_ne!(o.code, 0);
        // clap names the missing argument before any request is made.
        assert_contains(&o.stderr, "--file <FILE>");
        let out = ok(run(&[
            "case",
            "create",
            "--env",
            "production",
            "-f",
            "invoice-case/case.yml",
            "--dir",
            "invoice-case",
        ]));
        assert!(out.starts_with("Case invoice ("), "{out}");
        assert!(ok(run(&["case", "list", "--dir", "invoice-case"])).contains("invoice  (review)"));

        // A bad input is refused with the field's pointer.
        let o = run(&[
            "task",
            "create",
            "invoice",
            "--input",
            "currency:=3",
            "--dir",
            "invoice-case",
        ]);
        assert_ne!(o.code, 0);
        assert_contains(&o.stderr, "/inputs/invoice_url");
        assert_contains(&o.stderr, "/inputs/currency");

        let input = format!("invoice_url={invoice}");
        let t: Value = serde_json::from_str(&ok(run(&[
            "--json",
            "task",
            "create",
            "invoice",
            "--input",
            &input,
            "--input",
            "currency=USD",
            "--dir",
            "invoice-case",
        ])))
        .unwrap();
        assert_eq!(t["status"], "pending");
        let id = t["id"].as_str().unwrap().to_owned();
        // The worker runs the bot; the Case asks for a review.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let out = loop {
            let out = ok(run(&["task", "get", &id, "--dir", "invoice-case"]));
            if !out.contains("  pending") && !out.contains("  in_progress") {
                break out;
            }
            assert!(std::time::Instant::now() < deadline, "{out}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        };
        assert!(out.starts_with(&format!("task {id}  review")), "{out}");
        assert!(out.contains("\"total\": 25"), "{out}");
        let o = run(&["task", "outputs", &id, "--dir", "invoice-case"]);
        assert_ne!(o.code, 0, "outputs are read once the task is done");
        assert_contains(&o.stderr, "409");
        // Approved with an edited output (typed: total:=24 is a number).
        let out = ok(run(&[
            "task",
            "review",
            &id,
            "--decision",
            "approve",
            "--output",
            "total:=24",
            "--dir",
            "invoice-case",
        ]));
        assert!(out.starts_with(&format!("task {id}  done")), "{out}");
        assert!(out.contains("\"total\": 24"), "{out}");
        let out = ok(run(&["task", "outputs", &id, "--dir", "invoice-case"]));
        assert!(out.contains("\"vendor\": \"ACME\""), "{out}");
        assert!(out.contains("artifact summary (text/plain): http"), "{out}");
        let out = ok(run(&["task", "list", "invoice", "--dir", "invoice-case"]));
        assert_eq!(out.trim(), format!("{id}  done"));
        let out = ok(run(&["case", "get", "invoice", "--dir", "invoice-case"]));
        assert!(out.contains("name: invoice"), "{out}");
        assert!(out.contains("review: true"), "{out}");
        let o = run(&[
            "task",
            "review",
            &id,
            "--decision",
            "approve",
            "--dir",
            "invoice-case",
        ]);
        assert_ne!(o.code, 0);
        assert_contains(&o.stderr, "409");
        let o = run(&["task", "get", "nope", "--dir", "invoice-case"]);
        assert_ne!(o.code, 0);
        assert_contains(&o.stderr, "404");
        assert_eq!(
            ok(run(&["case", "delete", "invoice", "--dir", "invoice-case"])).trim(),
            "Case invoice deleted."
        );
        assert_eq!(
            ok(run(&["case", "list", "--dir", "invoice-case"])).trim(),
            "No Cases."
        );
        let o = run(&["case", "get", "invoice", "--dir", "invoice-case"]);
        assert_contains(&o.stderr, "404");
    })
    .await
}

/// A JavaScript syntax error in a method is a validation error everywhere an author looks
/// before running: `botbox validate`, `botbox push` (checked locally) and the server's push
/// (checked in its sandbox, for clients that skip the CLI), each naming the method and,
/// in the CLI, the file, line and column of the error inside the method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_syntax_errors_are_refused_before_running() {
    let server = Server::start(Backend::Sqlite, &[]).await;
    let url = server.base.clone();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("shop");
    std::fs::create_dir_all(&dir).unwrap();
    // Line 6 of the file is the method's second line; its `;` (column 21 of the method,
    // 25 of the file) ends an object literal that wanted `,` or `}`.
    let bot = "name: shop\n\
               methods:\n\
               \x20 fine(ctx): \"return 1;\"\n\
               \x20 lookup(message, context, data, options, config, result): |\n\
               \x20   var order = {id: message.content};\n\
               \x20   var line = {total: 1;\n\
               \x20   return 'Order ' + order.id;\n\
               flows:\n\
               \x20 status:\n\
               \x20   intents: {ask: {initial: true, condition: \"content == 'status'\"}}\n\
               \x20   states:\n\
               \x20     init:\n\
               \x20       initial: true\n\
               \x20       end: true\n\
               \x20       action: {name: text, options: {text: hi}}\n";
    std::fs::write(dir.join("bot.yml"), bot).unwrap();
    let o = bb(home.path(), &dir, &url, &["validate", "bot.yml"], "");
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert_contains(
        &o.stdout,
        "bot.yml:6:25: error: methods.lookup(message, context, data, options, config, result): JavaScript syntax error at line 2, column 21 of the method",
    );
    ok(bb(
        home.path(),
        &dir,
        &url,
        &["login", "-u", "admin", "-p", ADMIN_PASSWORD],
        "",
    ));
    let o = bb(home.path(), &dir, &url, &["push"], "");
    assert_ne!(o.code, 0);
    // The reason first, on one line; the located problem on its own, "error" said once each.
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(
        lines[0], "error: the bot is not valid: 1 error",
        "{}",
        o.stderr
    );
    assert!(
        lines[1].contains("bot.yml:6:25: error: methods.lookup(message, context, data, options, config, result): JavaScript syntax error at line 2, column 21 of the method")
            && !lines[1].starts_with("error:"),
        "{}",
        o.stderr
    );
    // With --json: one JSON object.
    let o = bb(home.path(), &dir, &url, &["push", "--json"], "");
    let err: Value =
        serde_json::from_str(o.stderr.trim()).unwrap_or_else(|e| panic!("{e}: {}", o.stderr));
    assert_eq!(err["error"], "the bot is not valid: 1 error");
    assert!(
        err["lines"][0]
            .as_str()
            .unwrap()
            .contains("bot.yml:6:25: error"),
        "{err}"
    );

    // The server refuses it too, for clients that push without the CLI.
    let api = server.api();
    let admin = api.admin_token().await;
    let doc: Value =
        serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(bot).unwrap()).unwrap();
    let p = api
        .post(
            "/projects",
            &admin,
            json!({"name": "shop", "options": {"bot": true}}),
        )
        .await
        .ok();
    let pid = p["id"].as_str().unwrap();
    let r = api
        .post(&format!("/projects/{pid}/bot/revisions"), &admin, doc)
        .await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert_contains(
        &r.text,
        "methods.lookup(message, context, data, options, config, result): JavaScript syntax error at line 2, column 21 of the method",
    );
    // Fixed, it goes through.
    let fixed = bot.replace("{total: 1;", "{total: 1};");
    std::fs::write(dir.join("bot.yml"), &fixed).unwrap();
    let o = ok(bb(home.path(), &dir, &url, &["validate", "bot.yml"], ""));
    assert!(o.contains("ok (1 flows, 0 warnings)"), "{o}");
}

/// People without a shell on the server: an administrator adds bob through the API, bob
/// changes his password, the administrator resets it and disables him; teams are made and
/// joined from the CLI alone (the walk-through's switch-team); `user add --data` refuses a
/// folder without a database instead of creating one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_and_teams_from_the_cli_alone() {
    let server = Server::start(Backend::Sqlite, &[]).await;
    let url = server.base.clone();
    let admin_home = tempfile::tempdir().unwrap();
    let bob_home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let admin = |args: &[&str], stdin: &str| bb(admin_home.path(), work.path(), &url, args, stdin);
    let bob = |args: &[&str], stdin: &str| bb(bob_home.path(), work.path(), &url, args, stdin);
    ok(admin(&["login", "-u", "admin", "-p", ADMIN_PASSWORD], ""));

    // A folder without a database: refused, and nothing is created there.
    let empty = tempfile::tempdir().unwrap();
    let o = admin(
        &[
            "user",
            "add",
            "eve",
            "--password",
            "eve-password-1",
            "--data",
            empty.path().to_str().unwrap(),
        ],
        "",
    );
    assert_ne!(o.code, 0);
    assert_contains(&o.stderr, "no database in");
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);

    let out = ok(admin(
        &["user", "add", "bob", "--password", "bob-password-1"],
        "",
    ));
    assert!(out.contains("added user bob"), "{out}");
    ok(bob(&["login", "-u", "bob", "-p", "bob-password-1"], ""));
    // A wrong current password changes nothing, and the error says so first (not "not
    // logged in").
    let o = bob(
        &["passwd"],
        "not-my-password\nbob-password-2\nbob-password-2\n",
    );
    assert_ne!(o.code, 0);
    assert!(
        o.stderr
            .starts_with("error: currentPassword: incorrect; the password was not changed"),
        "{}",
        o.stderr
    );
    // The new password is asked twice: two that differ change nothing.
    let o = bob(
        &["passwd"],
        "bob-password-1\nbob-password-2\nbob-password-X\n",
    );
    assert_ne!(o.code, 0);
    assert_contains(&o.stderr, "the two new passwords differ");
    let out = ok(bob(
        &["passwd"],
        "bob-password-1\nbob-password-2\nbob-password-2\n",
    ));
    assert!(out.contains("Password changed"), "{out}");
    // The CLI's own token still works; the old password does not.
    assert!(ok(bob(&["whoami"], "")).contains("bob"));
    let api = server.api();
    assert_eq!(
        api.raw(
            "POST",
            "/login",
            None,
            json!({"username": "bob", "password": "bob-password-1"})
                .to_string()
                .into_bytes()
        )
        .await
        .status,
        401
    );
    api.login("bob", "bob-password-2").await;

    // Teams from the CLI: create, invite, list, switch.
    ok(admin(&["team", "create", "acme"], ""));
    let out = ok(admin(
        &["team", "invite", "acme", "bob", "--role", "developer"],
        "",
    ));
    assert!(out.contains("bob is a developer of team acme"), "{out}");
    let out = ok(bob(&["team", "list"], ""));
    assert!(out.contains("acme  (developer"), "{out}");
    assert!(ok(bob(&["switch-team", "acme"], "")).contains("Switched to team: acme"));
    ok(admin(&["team", "remove", "acme", "bob"], ""));
    assert!(ok(bob(&["team", "list"], "")).contains("no teams"));
    ok(bob(&["switch", "user"], ""));
    assert!(ok(bob(&["whoami"], "")).contains("bob"));

    // The administrator resets bob's password (his sessions end) and disables him.
    let out = ok(admin(
        &[
            "user",
            "reset-password",
            "bob",
            "--password",
            "bob-password-3",
        ],
        "",
    ));
    assert!(out.contains("password of bob reset"), "{out}");
    assert_ne!(bob(&["whoami"], "").code, 0, "bob's token was revoked");
    api.login("bob", "bob-password-3").await;
    ok(admin(&["user", "disable", "bob"], ""));
    let o = bob(&["login", "-u", "bob", "-p", "bob-password-3"], "");
    assert_ne!(o.code, 0);
    ok(admin(&["user", "enable", "bob"], ""));
    ok(bob(&["login", "-u", "bob", "-p", "bob-password-3"], ""));
    // Not an administrator: refused.
    let o = bob(
        &["user", "add", "mallory", "--password", "mallory-password"],
        "",
    );
    assert_ne!(o.code, 0);
}

/// A step's errors reach the author wherever they look: a method that throws and an api
/// action refused by the egress policy (saying how an operator may allow it) show in
/// `botbox test` beside the failed expectation, in the console, in the errors API for
/// console and channel steps, and in `botbox errors` (with `--follow`, as they happen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_time_errors_reach_the_author() {
    // No --allow-private-egress: an api action to loopback is refused.
    let server = Server::start(Backend::Sqlite, &[]).await;
    let url = server.base.clone();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("oops");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    let bot = serde_yaml::to_string(&common::method_and_api_bot(
        "oops",
        "boom",
        "throw new Error('no stock for ' + message.content);",
        "http://127.0.0.1:9/stock",
        "stock: $(result.count)",
    ))
    .unwrap();
    std::fs::write(dir.join("bot.yml"), bot).unwrap();
    std::fs::write(
        dir.join("tests/oops.yml"),
        "tests:\n  - name: stock\n    steps:\n      - send: pizza\n        expect: [\"stock: 3\"]\n",
    )
    .unwrap();
    let run = |args: &[&str], stdin: &str| bb(home.path(), &dir, &url, args, stdin);

    // botbox test (local sandbox, no egress policy of the server's: the api call fails on
    // the closed port) shows the thrown error beside the failure.
    let o = run(&["test"], "");
    assert_ne!(o.code, 0);
    assert_contains(
        &o.stdout,
        "the bot's error: ./bot.yml:3:64: method boom threw: Error: no stock for pizza\n",
    );
    // The expression's error at the `$(…)` that holds it.
    assert!(
        o.stdout.lines().any(|l| l.contains("the bot's error: ./bot.yml:")
            && l.ends_with(": expression \"result.count\" failed: Cannot read properties of null (reading 'count')")),
        "{}",
        o.stdout
    );

    ok(run(&["login", "-u", "admin", "-p", ADMIN_PASSWORD], ""));
    ok(run(&["push"], ""));
    // The console prints the step's errors under its replies.
    let out = ok(run(&["console"], "pizza\nexit\n"));
    // A method's error at its place in the folder's file.
    assert!(
        out.contains("! ./bot.yml:3:64: method boom threw: Error: no stock for pizza\n"),
        "{out}"
    );
    assert!(
        out.contains("refused by the server's egress policy") && out.contains("--egress-allow"),
        "{out}"
    );
    // A channel step's errors too.
    ok(run(&["deploy", "--env", "production"], ""));
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, channel) = pushed_on_a_channel(&api, &admin).await;
    say(&api, &channel, "u1", "pasta").await;
    let errors = api
        .get(&format!("/projects/{pid}/errors"), &admin)
        .await
        .ok();
    let seen: Vec<(String, String, String)> = errors["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["channelId"].as_str().unwrap().to_owned(),
                e["errorCode"].as_str().unwrap().to_owned(),
                e["errorMessage"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Through the API (no files): the place inside the method, exact.
    assert!(
        seen.iter().any(|(_, _, m)| m
            == "method boom threw: Error: no stock for pizza (line 1, column 7 of the method)"),
        "{seen:?}"
    );
    for (ch, code, needle) in [
        ("console", "method-error", "no stock for pizza"),
        ("console", "api-error", "egress policy"),
        (channel.as_str(), "method-error", "no stock for pasta"),
        (channel.as_str(), "api-error", "egress policy"),
    ] {
        assert!(
            seen.iter()
                .any(|(c, k, m)| c == ch && k == code && m.contains(needle)),
            "{ch} {code} {needle}: {seen:?}"
        );
    }
    // botbox errors: oldest first, with the channel.
    let out = ok(run(&["errors", "--since", "1h"], ""));
    let lines: Vec<&str> = out.lines().collect();
    // Each step: the method, the api call, then the text's expression on the null result.
    assert_eq!(lines.len(), 6, "{out}");
    assert!(
        lines[0].contains("bot/method-error  [console]")
            && lines[0].ends_with("./bot.yml:3:64: method boom threw: Error: no stock for pizza"),
        "{out}"
    );
    assert!(lines[1].contains("bot/api-error  [console]"), "{out}");
    assert!(
        lines[2].contains("bot/expression-error  [console]"),
        "{out}"
    );
    assert!(
        lines[3].contains(&format!("bot/method-error  [{channel}]")),
        "{out}"
    );

    // --follow: what is there, then new errors as they happen, until stopped.
    let mut follow = Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["errors", "--follow"])
        .current_dir(&dir)
        .env("BOTBOX_HOME", home.path())
        .env("BOTBOX_SERVER", &url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = || {
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("a line")
    };
    for _ in 0..6 {
        next();
    }
    say(&api, &channel, "u2", "salad").await;
    let mut new = Vec::new();
    while !new
        .iter()
        .any(|l: &String| l.contains("no stock for salad"))
    {
        new.push(next());
    }
    follow.kill().unwrap();
    follow.wait().unwrap();
}

/// The CLI shows conversations and gives a deployed bot back as files: `botbox transcript`
/// renders a known conversation line by line, the structured transcript API gives messages
/// as objects, and `botbox pull --env` writes the deployed revision to a bot.yml that
/// validates and is the bot that was pushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_and_pull_from_the_cli() {
    let server = Server::start(Backend::Sqlite, &[]).await;
    let url = server.base.clone();
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("hello");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hello"),
        &dir,
    );
    let run = |args: &[&str]| bb(home.path(), &dir, &url, args, "");
    ok(run(&["login", "-u", "admin", "-p", ADMIN_PASSWORD]));
    ok(run(&["push"]));
    ok(run(&["deploy", "--env", "production"]));
    let api = server.api();
    let admin = api.admin_token().await;
    let (pid, channel) = pushed_on_a_channel(&api, &admin).await;
    for (user, text) in [("ann", "hi"), ("bob", "hi"), ("ann", "what")] {
        say(&api, &channel, user, text).await;
    }
    let out = ok(run(&["transcript", "--env", "production", "--user", "ann"]));
    let lines: Vec<String> = out
        .lines()
        // Without the time, which the test cannot know.
        .map(|l| l.split_once("  ").unwrap().1.to_owned())
        .collect();
    assert_eq!(
        lines,
        [
            "ann  > hi",
            "ann  < hi!  (hello/greeting)",
            "ann  > what",
            "ann  < sorry!  (hello/fallback)",
        ],
        "{out}"
    );
    let t = api
        .get(
            &format!("/projects/{pid}/transcripts?environment=production&limit=2"),
            &admin,
        )
        .await
        .ok();
    assert_eq!(t["data"].as_array().unwrap().len(), 2);
    assert_eq!(t["data"][0]["message"]["content"], "hi", "{t}");
    assert!(t["nextAfter"].is_i64(), "{t}");

    // pull: the deployed revision back as files.
    let pulled = work.path().join("pulled");
    let o = ok(run(&[
        "pull",
        "hello",
        "--env",
        "production",
        "--dir",
        pulled.to_str().unwrap(),
    ]));
    assert!(o.contains("wrote"), "{o}");
    let again = run(&["pull", "hello", "--dir", pulled.to_str().unwrap()]);
    assert_ne!(again.code, 0, "an existing bot.yml is kept");
    let text = std::fs::read_to_string(pulled.join("bot.yml")).unwrap();
    let back: Value = serde_yaml::from_str(&text).unwrap();
    let original: Value = common::example_bot("hello");
    assert_eq!(back["flows"], original["flows"], "{text}");
    assert_eq!(back["name"], "hello");
    ok(bb(home.path(), &pulled, &url, &["validate", "bot.yml"], ""));
}

/// A method that throws is reported by `botbox test` at its place in the author's file:
/// the line and column of the throw inside the method, in `bot.yml` or in the included file
/// that holds the method.
#[test]
fn run_time_errors_point_into_the_authors_files() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("oops");
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::create_dir_all(dir.join("flows")).unwrap();
    // Line 4 of bot.yml is the method's first line: its `throw` is on line 5, column 5, and
    // the error is made at `new` (column 11).
    std::fs::write(
        dir.join("bot.yml"),
        "name: oops\n\
         methods:\n\
         \x20 boom(message): |\n\
         \x20   var n = 1;\n\
         \x20   throw new Error('kaboom ' + n);\n\
         flows:\n\
         \x20 main: $include(./flows/main.yml)\n",
    )
    .unwrap();
    // In the included file the flow's own method reads a property of null on its line 2.
    std::fs::write(
        dir.join("flows/main.yml"),
        "fallback: true\n\
         methods:\n\
         \x20 count(message): |\n\
         \x20   var o = null;\n\
         \x20   return o.count;\n\
         intents:\n\
         \x20 any: {fallback: true}\n\
         states:\n\
         \x20 init:\n\
         \x20   initial: true\n\
         \x20   transitions: {s: {fallback: true}}\n\
         \x20 s:\n\
         \x20   end: true\n\
         \x20   action:\n\
         \x20     - {name: method, method: boom}\n\
         \x20     - {name: method, method: count}\n\
         \x20     - {name: text, options: {text: done}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("tests/t.yml"),
        "tests:\n  - name: throws\n    steps:\n      - send: hi\n        expect: [{text: nope}]\n",
    )
    .unwrap();
    let o = bb(
        home.path(),
        work.path(),
        "http://127.0.0.1:9",
        &["test", "--dir", "oops"],
        "",
    );
    assert_ne!(o.code, 0);
    assert!(
        o.stdout
            .contains("the bot's error: oops/bot.yml:5:11: method boom threw: Error: kaboom 1\n")
            || o.stdout
                .contains("bot.yml:5:11: method boom threw: Error: kaboom 1\n"),
        "{}",
        o.stdout
    );
    assert_contains(
        &o.stdout,
        "flows/main.yml:5:14: method count threw: TypeError: cannot read property 'count' of null or undefined",
    );
}
