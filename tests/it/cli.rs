//! End-to-end tests of the command line: the real `botbox` binary as a client of a
//! live `botbox serve` on loopback. The README's walk-through, one step a test.

use crate::common;

use crate::common::{ADMIN_PASSWORD, Api, Backend, Server, assert_contains};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
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
        .env_remove("BOTBOX_CA_CERT")
        .env_remove("SSL_CERT_FILE")
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

/// A command that must fail: what it printed on stderr.
#[track_caller]
fn failed(o: Out) -> String {
    assert_ne!(o.code, 0, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    o.stderr
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

/// Where no server listens: for what the CLI does alone, and for an unreachable server.
const NO_SERVER: &str = "http://127.0.0.1:9";

/// The example bot folder `name` of `examples/`.
fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// A CLI with a config home and a working folder of its own, and the server it talks to
/// (none for what the CLI does alone).
struct Cli {
    server: Option<Server>,
    url: String,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Cli {
    /// A CLI without a server.
    fn alone() -> Cli {
        Cli {
            server: None,
            url: NO_SERVER.into(),
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    /// A CLI of a new server on SQLite started with `flags`, not logged in.
    async fn on_server(flags: &[&str]) -> Cli {
        let server = Server::start(Backend::Sqlite, flags).await;
        Cli {
            url: server.base.clone(),
            server: Some(server),
            ..Cli::alone()
        }
    }

    /// A CLI of a new server, logged in as the administrator.
    async fn admin() -> Cli {
        let cli = Cli::on_server(&[]).await;
        cli.ok(&["login", "-u", "admin", "-p", ADMIN_PASSWORD]);
        cli
    }

    /// `botbox <args>` in the working folder, fed `stdin`.
    fn run(&self, args: &[&str], stdin: &str) -> Out {
        bb(self.home.path(), self.work.path(), &self.url, args, stdin)
    }

    /// `botbox <args>`, which must succeed: what it printed.
    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        ok(self.run(args, ""))
    }

    /// `botbox <args>`, which must fail: what it printed on stderr.
    #[track_caller]
    fn fails(&self, args: &[&str]) -> String {
        failed(self.run(args, ""))
    }

    /// `botbox <args>` in folder `dir` rather than the working folder.
    fn run_in(&self, dir: &Path, args: &[&str]) -> Out {
        bb(self.home.path(), dir, &self.url, args, "")
    }

    /// A path in the working folder.
    fn path(&self, rel: &str) -> PathBuf {
        self.work.path().join(rel)
    }

    /// A client of the server's API.
    fn api(&self) -> Api {
        self.server.as_ref().expect("a CLI with a server").api()
    }
}

/// The administrator's CLI with the bot folder mybot made by `botbox init` and pushed.
async fn pushed_mybot() -> Cli {
    let cli = Cli::admin().await;
    cli.ok(&["init", "mybot"]);
    cli.ok(&["push", "--dir", "mybot"]);
    cli
}

/// `pushed_mybot` deployed as 0.0.1 on environment production.
async fn deployed_mybot() -> Cli {
    let cli = pushed_mybot().await;
    cli.ok(&["deploy", "--dir", "mybot", "--env", "production"]);
    cli
}

/// `deployed_mybot` with a generic channel named web (option secret=s): the CLI and what
/// `channel create` printed.
async fn mybot_on_a_channel() -> (Cli, String) {
    let cli = deployed_mybot().await;
    let out = cli.ok(&[
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
    ]);
    (cli, out)
}

/// `deployed_mybot` deployed again as 0.1.0, with environment staging on 0.0.1: the CLI
/// and what `env create` printed.
async fn mybot_on_staging() -> (Cli, String) {
    let cli = deployed_mybot().await;
    cli.ok(&["deploy", "--dir", "mybot", "--minor", "--env", "production"]);
    let out = cli.ok(&[
        "env",
        "create",
        "staging",
        "--version",
        "0.0.1",
        "--dir",
        "mybot",
    ]);
    (cli, out)
}

/// The administrator's CLI with the counter example (a bot with memory) pushed, and
/// deployed on production when `deploy`.
async fn counter(deploy: bool) -> Cli {
    let cli = Cli::admin().await;
    copy_dir(&example("counter"), &cli.path("counter"));
    cli.ok(&["push", "--dir", "counter"]);
    if deploy {
        cli.ok(&["deploy", "--dir", "counter", "--env", "production"]);
    }
    cli
}

/// `counter` deployed, with an agent key of production made by `botbox key create`: the
/// CLI and the key.
async fn counter_keyed() -> (Cli, String) {
    let cli = counter(true).await;
    let out = cli.ok(&["key", "create", "--dir", "counter", "--env", "production"]);
    let key = out
        .split_whitespace()
        .find(|w| w.starts_with("sak_"))
        .unwrap_or_else(|| panic!("no key in {out}"))
        .to_owned();
    (cli, key)
}

/// `counter_keyed` having said "hi" to its bot through `/v1/chat`: the CLI, the key and
/// the run's id.
async fn counter_chatted() -> (Cli, String, String) {
    let (cli, key) = counter_keyed().await;
    let hi = json!({"messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    let r = cli.api().post("/v1/chat", &key, hi).await.ok();
    let run_id = r["runId"].as_str().unwrap().to_owned();
    (cli, key, run_id)
}

/// The administrator's CLI and that of bob, a developer, logged in (on the same server and
/// working folder).
struct AdminAndBob {
    admin: Cli,
    bob_home: tempfile::TempDir,
}

impl AdminAndBob {
    /// bob logs in with `password` (the administrator has made him).
    fn new(admin: Cli, password: &str) -> AdminAndBob {
        let both = AdminAndBob {
            admin,
            bob_home: tempfile::tempdir().unwrap(),
        };
        both.bob_ok(&["login", "-u", "bob", "-p", password]);
        both
    }

    /// bob made by `botbox user add` of the administrator, with password bob-password-1.
    async fn added_by_the_cli() -> AdminAndBob {
        let admin = Cli::admin().await;
        admin.ok(&["user", "add", "bob", "--password", "bob-password-1"]);
        AdminAndBob::new(admin, "bob-password-1")
    }

    /// bob made through the API, a developer of teams acme and other.
    async fn in_two_teams() -> AdminAndBob {
        let admin = Cli::admin().await;
        let api = admin.api();
        let token = api.admin_token().await;
        let (bob_id, _) = api.user(&token, "bob", "developer").await;
        for team in ["acme", "other"] {
            let t = api.post("/teams", &token, json!({"name": team})).await.ok();
            let members = format!("/teams/{}/users/{bob_id}", t["id"].as_str().unwrap());
            api.post(&members, &token, json!({"role": "developer"}))
                .await
                .ok();
        }
        AdminAndBob::new(admin, "bob-password")
    }

    /// `in_two_teams`, bob switched to team acme, with his own copy of the counter example
    /// (bound to no project) in folder bob-counter.
    async fn in_acme_with_a_counter() -> AdminAndBob {
        let both = AdminAndBob::in_two_teams().await;
        copy_dir(&example("counter"), &both.admin.path("bob-counter"));
        both.bob_ok(&["switch-team", "acme"]);
        both
    }

    /// `botbox <args>` as bob, fed `stdin`.
    fn bob(&self, args: &[&str], stdin: &str) -> Out {
        let a = &self.admin;
        bb(self.bob_home.path(), a.work.path(), &a.url, args, stdin)
    }

    /// `botbox <args>` as bob, which must succeed: what it printed.
    #[track_caller]
    fn bob_ok(&self, args: &[&str]) -> String {
        ok(self.bob(args, ""))
    }
}

/// `user add --data` writes straight into the server's database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_add_on_the_server_machine_adds_an_account_to_its_database() {
    let server = Server::start(Backend::Sqlite, &[]).await;
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_with_a_token_names_the_tokens_user() {
    let cli = Cli::on_server(&[]).await;
    let api = cli.api();
    let (_, carol) = api.user(&api.admin_token().await, "carol", "viewer").await;
    assert_eq!(
        cli.ok(&["login", "-t", &carol]).trim(),
        "Logged in as carol"
    );
}

#[test]
fn whoami_before_login_says_to_log_in_first() {
    let err = Cli::alone().fails(&["whoami"]);
    assert_contains(&err, "not logged in: run `botbox login` first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_with_a_wrong_password_is_refused() {
    let cli = Cli::on_server(&[]).await;
    let err = cli.fails(&["login", "-u", "admin", "-p", "wrong"]);
    assert_contains(&err, "username or password is incorrect");
}

/// `botbox login` without flags reads the username and password on stdin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_prompts_for_the_username_and_password() {
    let cli = Cli::on_server(&[]).await;
    let out = ok(cli.run(&["login"], &format!("admin\n{ADMIN_PASSWORD}\n")));
    assert_eq!(out.trim(), "Logged in as admin");
    let me: Value = serde_json::from_str(&cli.ok(&["whoami", "--json"])).unwrap();
    assert_eq!(me["username"], "admin");
}

/// `botbox test` runs locally, its sandbox's guest cached where the test servers cache theirs.
#[test]
fn init_makes_a_bot_whose_tests_pass() {
    let cli = Cli::alone();
    cli.ok(&["init", "mybot"]);
    for f in [
        "mybot/bot.yml",
        "mybot/flows/hello.yml",
        "mybot/tests/hello.yml",
    ] {
        assert!(cli.path(f).exists(), "{f}");
    }
    let out = cli.ok(&["test", "--dir", "mybot"]);
    assert!(out.contains("2 passed, 0 failed"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_names_the_version_and_revision_it_made() {
    let cli = Cli::admin().await;
    cli.ok(&["init", "mybot"]);
    let out = cli.ok(&["push", "--dir", "mybot"]);
    assert!(
        out.starts_with("Pushed mybot version 0.0.1 as revision "),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_puts_the_pushed_version_on_the_environment() {
    let cli = pushed_mybot().await;
    let out = cli.ok(&["deploy", "--dir", "mybot", "--env", "production"]);
    assert!(out.contains("Deployed mybot 0.0.1"), "{out}");
}

/// `--minor`, `--major` and `--patch`; `env list` then shows the environment on the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_bumps_the_part_of_the_version_it_is_asked_to() {
    let cli = deployed_mybot().await;
    for (part, version) in [
        ("--minor", "0.1.0"),
        ("--major", "1.0.0"),
        ("--patch", "1.0.1"),
    ] {
        let out = cli.ok(&["deploy", "--dir", "mybot", part, "--env", "production"]);
        assert!(out.contains(&format!("Deployed mybot {version}")), "{out}");
    }
    let out = cli.ok(&["env", "list", "--dir", "mybot"]);
    assert!(
        out.contains("production") && out.contains("version 1.0.1"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_create_prints_the_channels_webhook() {
    let (_, out) = mybot_on_a_channel().await;
    assert!(out.contains("webhook: http://"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_list_shows_each_channels_name_type_and_url() {
    let (cli, _) = mybot_on_a_channel().await;
    let out = cli.ok(&["channel", "list", "--env", "production", "--dir", "mybot"]);
    assert!(out.contains("web  generic  http://"), "{out}");
}

/// `channel update` sets the URL and adds options to those the channel has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_update_changes_the_url_and_adds_options() {
    let (cli, _) = mybot_on_a_channel().await;
    let url = "http://127.0.0.1:9/y";
    let out = cli.ok(&[
        "channel",
        "update",
        "web",
        "--env",
        "production",
        "--url",
        url,
        "--option",
        "token=t",
        "--dir",
        "mybot",
        "--json",
    ]);
    let c: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            c["url"].as_str(),
            c["options"]["secret"].as_str(),
            c["options"]["token"].as_str()
        ),
        (Some(url), Some("s"), Some("t"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_delete_removes_the_channel() {
    let (cli, _) = mybot_on_a_channel().await;
    cli.ok(&[
        "channel",
        "delete",
        "web",
        "--env",
        "production",
        "--dir",
        "mybot",
    ]);
    let out = cli.ok(&["channel", "list", "--env", "production", "--dir", "mybot"]);
    assert_eq!(out.trim(), "No channels.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_create_runs_the_version_it_is_given() {
    let (_, out) = mybot_on_staging().await;
    assert_eq!(out.trim(), "Environment staging runs version 0.0.1");
}

/// `env update` without a version moves the environment to the latest deployment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_update_moves_the_environment_to_the_latest_version() {
    let (cli, _) = mybot_on_staging().await;
    let out = cli.ok(&["env", "update", "staging", "--dir", "mybot"]);
    assert_eq!(out.trim(), "Environment staging runs version 0.1.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_delete_removes_the_environment() {
    let (cli, _) = mybot_on_staging().await;
    cli.ok(&["env", "delete", "staging", "--dir", "mybot"]);
    assert!(
        !cli.ok(&["env", "list", "--dir", "mybot"])
            .contains("staging")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_remote_runs_the_tests_against_the_pushed_revision() {
    let cli = pushed_mybot().await;
    let out = cli.ok(&["test", "--remote", "--dir", "mybot"]);
    assert!(
        out.contains("2 passed, 0 failed (on the server, revision "),
        "{out}"
    );
    // The folder's bot runs, not the server's latest: an edited apology fails its test.
    let flow = cli.path("mybot/flows/hello.yml");
    let text = std::fs::read_to_string(&flow).unwrap();
    std::fs::write(
        &flow,
        text.replace("Sorry, I only understand hi.", "Try saying hi."),
    )
    .unwrap();
    let o = cli.run(&["test", "--remote", "--dir", "mybot"], "");
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert_contains(&o.stdout, "1 passed, 1 failed (on the server, revision ");
    assert_contains(&o.stderr, "Pushed mybot version");
    let revision = o
        .stdout
        .rsplit("revision ")
        .next()
        .unwrap()
        .trim()
        .trim_end_matches(')');
    let history = cli.ok(&["history", "--dir", "mybot"]);
    assert_contains(&history, revision);
}

/// A failing test shows what was expected beside what the bot said, and exits with 1.
#[test]
fn a_failing_test_shows_a_readable_difference_and_exits_with_1() {
    let cli = Cli::alone();
    cli.ok(&["init", "mybot"]);
    let tests = cli.path("mybot/tests/hello.yml");
    let t = std::fs::read_to_string(&tests).unwrap();
    std::fs::write(&tests, t.replace("Hello! I am mybot.", "Howdy!")).unwrap();
    let o = cli.run(&["test", "--dir", "mybot"], "");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert_contains(&o.stdout, "✗ tests/hello.yml: greets");
    assert!(
        o.stdout.contains("Howdy!") && o.stdout.contains("Hello! I am mybot."),
        "{}",
        o.stdout
    );
    assert_contains(&o.stdout, "1 passed, 1 failed");
}

/// An invalid bot: each problem with its file and line, and nothing pushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_refuses_an_invalid_bot_naming_the_file_of_each_problem() {
    let cli = Cli::admin().await;
    cli.ok(&["init", "mybot"]);
    let flow = cli.path("mybot/flows/hello.yml");
    let f = std::fs::read_to_string(&flow).unwrap();
    let broken = f.replace(
        "      sorry:\n        fallback: true",
        "      nowhere:\n        fallback: true",
    );
    std::fs::write(&flow, broken).unwrap();
    let err = cli.fails(&["push", "--dir", "mybot"]);
    assert_contains(&err, "flows/hello.yml:");
    assert_contains(&err, "flows.hello.states.init.transitions.nowhere");
    let api = cli.api();
    let projects = api.get("/projects", &api.admin_token().await).await.ok();
    assert_eq!(projects["data"], json!([]), "nothing pushed");
}

/// On a bot with memory; `current()` shows the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_converses_until_clear_starts_over() {
    let cli = counter(true).await;
    let out = ok(cli.run(
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
}

/// `console --debug` (on the pushed revision) shows each reply's flow, intent and state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_debug_shows_the_intent_and_state_of_each_reply() {
    let cli = counter(false).await;
    let out = ok(cli.run(&["console", "--dir", "counter", "--debug"], "hi\nexit\n"));
    assert_contains(&out, "(count/hi)");
    assert_contains(&out, "[flow count state counting]");
}

/// `key create` prints a `sak_` key that chats with the environment's bot through `/v1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_create_prints_an_agent_key_that_chats_with_the_bot() {
    let (cli, key, run_id) = counter_chatted().await;
    let stream = format!("/v1/chat/{run_id}/stream");
    let said = cli.api().get(&stream, &key).await;
    assert_contains(&said.text, "Message 1 (total 1)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_list_shows_only_the_keys_hint() {
    let (cli, key) = counter_keyed().await;
    let listed = cli.ok(&["key", "list", "--dir", "counter", "--env", "production"]);
    assert!(
        !listed.contains(&key) && listed.contains(&key[key.len() - 4..]),
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_revoke_ends_the_key() {
    let (cli, key, run_id) = counter_chatted().await;
    let listed = cli.ok(&["key", "list", "--dir", "counter", "--env", "production"]);
    let key_id = listed.split_whitespace().next().unwrap();
    cli.ok(&[
        "key",
        "revoke",
        key_id,
        "--dir",
        "counter",
        "--env",
        "production",
    ]);
    let ended = cli.api().get(&format!("/v1/chat/{run_id}"), &key).await;
    assert_eq!(ended.status, 401);
}

/// `switch-team` gets a team token: from then on the CLI acts for the team.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_team_makes_the_cli_act_for_the_team() {
    let both = AdminAndBob::in_two_teams().await;
    assert_eq!(
        both.bob_ok(&["switch-team", "acme"]).trim(),
        "Switched to team: acme"
    );
    assert!(both.bob_ok(&["whoami"]).contains("bob in team acme"));
}

/// The administrator's folder is bound to the administrator's project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_cannot_push_a_folder_bound_to_a_project_it_cannot_reach() {
    let both = AdminAndBob::in_acme_with_a_counter().await;
    copy_dir(&example("counter"), &both.admin.path("counter"));
    both.admin.ok(&["push", "--dir", "counter"]);
    let err = failed(both.bob(&["push", "--dir", "counter"], ""));
    assert_contains(&err, "is not one you can reach");
}

/// Work done as a team belongs to the team: here a push of a folder bound to nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_as_a_team_makes_a_project_of_the_team() {
    let both = AdminAndBob::in_acme_with_a_counter().await;
    let o = both.bob(&["push", "--dir", "bob-counter"], "");
    assert_contains(&o.stderr, "project counter of team acme");
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_bound_to_one_teams_project_is_not_deployed_from_another_team() {
    let both = AdminAndBob::in_acme_with_a_counter().await;
    both.bob_ok(&["push", "--dir", "bob-counter"]);
    assert_eq!(
        both.bob_ok(&["switch", "team", "other"]).trim(),
        "Switched to team: other"
    );
    // The folder is bound to team acme's project.
    let err = failed(both.bob(&["deploy", "--dir", "bob-counter"], ""));
    assert!(
        err.contains("is not one you can reach") && err.contains("switch"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_team_to_an_unknown_team_explains_what_to_do() {
    let err = Cli::admin().await.fails(&["switch-team", "nope"]);
    assert_contains(&err, "Invalid team name. Unable to switch to team: nope");
    assert_contains(&err, "log out and log in again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_user_makes_the_cli_act_for_the_user_again() {
    let both = AdminAndBob::in_two_teams().await;
    both.bob_ok(&["switch-team", "acme"]);
    assert!(
        both.bob_ok(&["switch", "user"])
            .contains("Switched to user: bob")
    );
    assert!(!both.bob_ok(&["whoami"]).contains("in team"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_ends_the_login() {
    let cli = Cli::admin().await;
    cli.ok(&["logout", "--yes"]);
    assert_ne!(cli.run(&["whoami"], "").code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_named() {
    let cli = Cli::admin().await;
    let o = bb(cli.home.path(), cli.work.path(), NO_SERVER, &["whoami"], "");
    assert_contains(
        &failed(o),
        "cannot reach the botbox server at http://127.0.0.1:9",
    );
    // A bound folder's binding is not in doubt when the server did not answer.
    cli.ok(&["init", "mybot"]);
    cli.ok(&["push", "--dir", "mybot"]);
    let o = bb(
        cli.home.path(),
        cli.work.path(),
        NO_SERVER,
        &["push", "--dir", "mybot"],
        "",
    );
    let err = failed(o);
    assert_contains(&err, "cannot reach the botbox server at http://127.0.0.1:9");
    assert!(!err.contains(".botbox.json"), "{err}");
}

/// `user add --data` on a folder without a database refuses, and creates nothing there.
#[test]
fn user_add_refuses_a_folder_without_a_database() {
    let empty = tempfile::tempdir().unwrap();
    let err = Cli::alone().fails(&[
        "user",
        "add",
        "eve",
        "--password",
        "eve-password-1",
        "--data",
        empty.path().to_str().unwrap(),
    ]);
    assert_contains(&err, "no database in");
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
}

/// An administrator without a shell on the server adds an account through the API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_add_by_an_administrator_makes_an_account_that_logs_in() {
    let admin = Cli::admin().await;
    let out = admin.ok(&["user", "add", "bob", "--password", "bob-password-1"]);
    assert!(out.contains("added user bob"), "{out}");
    // Logs bob in, which must succeed.
    AdminAndBob::new(admin, "bob-password-1");
}

/// bob's `passwd` fed `answers` (current password, new, new again), which must fail and
/// leave his password bob-password-1: what it printed on stderr.
async fn passwd_refused(answers: &str) -> String {
    let both = AdminAndBob::added_by_the_cli().await;
    let err = failed(both.bob(&["passwd"], answers));
    both.admin.api().login("bob", "bob-password-1").await;
    err
}

/// The error says so first (not "not logged in").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwd_with_a_wrong_current_password_changes_nothing() {
    let err = passwd_refused("not-my-password\nbob-password-2\nbob-password-2\n").await;
    assert!(
        err.starts_with("error: currentPassword: incorrect; the password was not changed"),
        "{err}"
    );
}

/// The new password is asked twice: two that differ change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwd_refuses_new_passwords_that_differ() {
    let err = passwd_refused("bob-password-1\nbob-password-2\nbob-password-X\n").await;
    assert_contains(&err, "the two new passwords differ");
}

/// `passwd` changes the password; the CLI's own token still works, the old password not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwd_changes_the_password_and_keeps_the_cli_logged_in() {
    let both = AdminAndBob::added_by_the_cli().await;
    let out = ok(both.bob(
        &["passwd"],
        "bob-password-1\nbob-password-2\nbob-password-2\n",
    ));
    assert!(out.contains("Password changed"), "{out}");
    assert!(both.bob_ok(&["whoami"]).contains("bob"));
    let api = both.admin.api();
    let old = common::login_attempt(&api, "bob", "bob-password-1").await;
    assert_eq!(old.status, 401);
    api.login("bob", "bob-password-2").await;
}

/// Teams from the CLI alone: create, invite; the member lists the team and switches to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_invite_makes_a_user_a_member_with_a_role() {
    let both = AdminAndBob::added_by_the_cli().await;
    both.admin.ok(&["team", "create", "acme"]);
    let out = both
        .admin
        .ok(&["team", "invite", "acme", "bob", "--role", "developer"]);
    assert!(out.contains("bob is a developer of team acme"), "{out}");
    let out = both.bob_ok(&["team", "list"]);
    assert!(out.contains("acme  (developer"), "{out}");
    assert!(
        both.bob_ok(&["switch-team", "acme"])
            .contains("Switched to team: acme")
    );
}

/// Removed from the team the CLI acts for, the member lists no teams and switches back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_remove_takes_the_member_out_of_the_team() {
    let both = AdminAndBob::added_by_the_cli().await;
    both.admin.ok(&["team", "create", "acme"]);
    both.admin
        .ok(&["team", "invite", "acme", "bob", "--role", "developer"]);
    both.bob_ok(&["switch-team", "acme"]);
    both.admin.ok(&["team", "remove", "acme", "bob"]);
    assert!(both.bob_ok(&["team", "list"]).contains("no teams"));
    both.bob_ok(&["switch", "user"]);
    assert!(both.bob_ok(&["whoami"]).contains("bob"));
}

/// An administrator manages any team's members from the CLI, a team it is not in included;
/// someone outside the team learns nothing about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_manages_the_members_of_a_team_it_is_not_in() {
    let both = AdminAndBob::added_by_the_cli().await;
    both.admin
        .ok(&["user", "add", "carol", "--password", "carol-password-1"]);
    both.bob_ok(&["team", "create", "bobs"]);
    let out = both.admin.ok(&["team", "members", "bobs"]);
    assert!(out.contains("team bobs:\nbob  teamAdmin"), "{out}");
    let out = both
        .admin
        .ok(&["team", "invite", "bobs", "carol", "--role", "viewer"]);
    assert!(out.contains("carol is a viewer of team bobs"), "{out}");
    let out = both.bob_ok(&["team", "members", "bobs"]);
    assert!(out.contains("carol  viewer"), "{out}");
    // carol, outside the team once removed, is told no such team is visible to her.
    let carol = tempfile::tempdir().unwrap();
    let a = &both.admin;
    let as_carol = |args: &[&str]| bb(carol.path(), a.work.path(), &a.url, args, "");
    ok(as_carol(&[
        "login",
        "-u",
        "carol",
        "-p",
        "carol-password-1",
    ]));
    ok(as_carol(&["team", "members", "bobs"]));
    let out = both.admin.ok(&["team", "remove", "bobs", "carol"]);
    assert!(out.contains("carol removed from team bobs"), "{out}");
    let refused = as_carol(&["team", "members", "bobs"]);
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("no team bobs that you can see"),
        "{}",
        refused.stderr
    );
    assert!(!both.bob_ok(&["team", "members", "bobs"]).contains("carol"));
}

/// The administrator resets a password: the user's sessions end; the new password works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_password_ends_the_users_sessions() {
    let both = AdminAndBob::added_by_the_cli().await;
    let out = both.admin.ok(&[
        "user",
        "reset-password",
        "bob",
        "--password",
        "bob-password-3",
    ]);
    assert!(out.contains("password of bob reset"), "{out}");
    assert_ne!(both.bob(&["whoami"], "").code, 0, "bob's token was revoked");
    both.admin.api().login("bob", "bob-password-3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_user_cannot_log_in_until_enabled() {
    let both = AdminAndBob::added_by_the_cli().await;
    both.admin.ok(&["user", "disable", "bob"]);
    let login = ["login", "-u", "bob", "-p", "bob-password-1"];
    assert_ne!(both.bob(&login, "").code, 0);
    both.admin.ok(&["user", "enable", "bob"]);
    both.bob_ok(&login);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_add_by_someone_not_an_administrator_is_refused() {
    let both = AdminAndBob::added_by_the_cli().await;
    failed(both.bob(
        &["user", "add", "mallory", "--password", "mallory-password"],
        "",
    ));
}

/// Writes the bot oops into the CLI's working folder: its one step runs a method that
/// throws ("no stock for <message>"), an api action to loopback and a text whose expression
/// reads the api's result; its test expects "stock: 3".
fn write_oops(cli: &Cli) {
    std::fs::create_dir_all(cli.path("tests")).unwrap();
    let bot = serde_yaml::to_string(&common::method_and_api_bot(
        "oops",
        "boom",
        "throw new Error('no stock for ' + message.content);",
        "http://127.0.0.1:9/stock",
        "stock: $(result.count)",
    ))
    .unwrap();
    std::fs::write(cli.path("bot.yml"), bot).unwrap();
    std::fs::write(
        cli.path("tests/oops.yml"),
        "tests:\n  - name: stock\n    steps:\n      - send: pizza\n        expect: [\"stock: 3\"]\n",
    )
    .unwrap();
}

/// oops pushed by the administrator to a server without --allow-private-egress (its api
/// action to loopback is refused).
async fn oops_pushed() -> Cli {
    let cli = Cli::admin().await;
    write_oops(&cli);
    cli.ok(&["push"]);
    cli
}

/// `oops_pushed` told "pizza" in the console, then deployed on production and told "pasta"
/// by user u1 on a generic channel: the CLI, the project's id and the channel's id.
async fn oops_failed_in_the_console_and_on_a_channel() -> (Cli, String, String) {
    let cli = oops_pushed().await;
    ok(cli.run(&["console"], "pizza\nexit\n"));
    cli.ok(&["deploy", "--env", "production"]);
    let api = cli.api();
    let admin = api.admin_token().await;
    let (pid, channel) = pushed_on_a_channel(&api, &admin).await;
    say(&api, &channel, "u1", "pasta").await;
    (cli, pid, channel)
}

/// The thrown error, and the expression's at its `$(…)` (locally the api call meets a closed port).
#[test]
fn botbox_test_shows_the_bots_errors_beside_the_failure() {
    let cli = Cli::alone();
    write_oops(&cli);
    let o = cli.run(&["test"], "");
    assert_ne!(o.code, 0);
    assert_contains(
        &o.stdout,
        "the bot's error: ./bot.yml:3:64: method boom threw: Error: no stock for pizza\n",
    );
    assert!(
        o.stdout.lines().any(|l| l.contains("the bot's error: ./bot.yml:")
            && l.ends_with(": expression \"result.count\" failed: Cannot read properties of null (reading 'count')")),
        "{}",
        o.stdout
    );
}

/// A method's error at its place in the file; an egress refusal with how to allow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_prints_a_steps_errors_under_its_replies() {
    let cli = oops_pushed().await;
    let out = ok(cli.run(&["console"], "pizza\nexit\n"));
    assert!(
        out.contains("! ./bot.yml:3:64: method boom threw: Error: no stock for pizza\n"),
        "{out}"
    );
    assert!(
        out.contains("refused by the server's egress policy") && out.contains("--egress-allow"),
        "{out}"
    );
}

/// Through the API (no files) a method's error is placed inside the method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_errors_api_lists_the_errors_of_console_and_channel_steps() {
    let (cli, pid, channel) = oops_failed_in_the_console_and_on_a_channel().await;
    let api = cli.api();
    let admin = api.admin_token().await;
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
}

/// Each step made three: the method, the api call, the text's expression on the null result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn botbox_errors_lists_errors_oldest_first_with_their_channel() {
    let (cli, _, channel) = oops_failed_in_the_console_and_on_a_channel().await;
    let out = cli.ok(&["errors", "--since", "1h"]);
    let lines: Vec<&str> = out.lines().collect();
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
}

/// What is there first, then new errors as they happen, until stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn botbox_errors_follow_prints_new_errors_as_they_happen() {
    let (cli, _, channel) = oops_failed_in_the_console_and_on_a_channel().await;
    let mut follow = Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["errors", "--follow"])
        .current_dir(cli.work.path())
        .env("BOTBOX_HOME", cli.home.path())
        .env("BOTBOX_SERVER", &cli.url)
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
    say(&cli.api(), &channel, "u2", "salad").await;
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

/// The invoice-case example pushed and deployed on production by the administrator, on a
/// server that lets bots call loopback, with the invoice it fetches served there: the CLI
/// and the invoice's URL.
async fn invoice() -> (Cli, String) {
    let app = axum::Router::new().fallback(|| async {
        axum::Json(json!({"vendor": "ACME", "lines": [{"amount": 10, "qty": 2}, {"amount": 5}]}))
    });
    let invoice = format!("{}/invoice/1", common::serve_stub(app).await);
    let cli = Cli::on_server(&["--allow-private-egress"]).await;
    cli.ok(&["login", "-u", "admin", "-p", ADMIN_PASSWORD]);
    copy_dir(&example("invoice-case"), &cli.path("invoice-case"));
    cli.ok(&["push", "--dir", "invoice-case"]);
    cli.ok(&["deploy", "--dir", "invoice-case", "--env", "production"]);
    (cli, invoice)
}

/// `case create -f case.yml` of the invoice-case example: what it printed.
fn create_invoice_case(cli: &Cli) -> String {
    cli.ok(&[
        "case",
        "create",
        "--env",
        "production",
        "-f",
        "invoice-case/case.yml",
        "--dir",
        "invoice-case",
    ])
}

/// `invoice` with its Case made by `create_invoice_case`: the CLI and the invoice's URL.
async fn invoice_case() -> (Cli, String) {
    let (cli, invoice) = invoice().await;
    create_invoice_case(&cli);
    (cli, invoice)
}

/// `invoice_case` with a task of the invoice, once the worker has run the bot on it: the
/// CLI, `task create`'s answer and what `task get` printed then.
async fn task_run() -> (Cli, Value, String) {
    let (cli, invoice) = invoice_case().await;
    let input = format!("invoice_url={invoice}");
    let created = cli.ok(&[
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
    ]);
    let t: Value = serde_json::from_str(&created).unwrap();
    let id = t["id"].as_str().unwrap().to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let got = loop {
        let out = cli.ok(&["task", "get", &id, "--dir", "invoice-case"]);
        if !out.contains("  pending") && !out.contains("  in_progress") {
            break out;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    (cli, t, got)
}

/// `task review <id> --decision approve` of the invoice Case, with `more` arguments.
fn approve(cli: &Cli, id: &str, more: &[&str]) -> Out {
    let review = [
        "task",
        "review",
        id,
        "--decision",
        "approve",
        "--dir",
        "invoice-case",
    ];
    cli.run(&[&review[..], more].concat(), "")
}

/// `task_run` approved with the output total edited to 24 (typed: `total:=24` is a
/// number): the CLI, the task's id and what the review printed.
async fn task_approved() -> (Cli, String, String) {
    let (cli, t, _) = task_run().await;
    let id = t["id"].as_str().unwrap().to_owned();
    let out = ok(approve(&cli, &id, &["--output", "total:=24"]));
    (cli, id, out)
}

/// clap names the missing argument before any request is made.
#[test]
fn case_create_without_a_file_names_the_missing_argument() {
    let err = Cli::alone().fails(&[
        "case",
        "create",
        "--env",
        "production",
        "--dir",
        "invoice-case",
    ]);
    assert_contains(&err, "--file <FILE>");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_create_makes_a_case_listed_with_its_review() {
    let (cli, _) = invoice().await;
    let out = create_invoice_case(&cli);
    assert!(out.starts_with("Case invoice ("), "{out}");
    let listed = cli.ok(&["case", "list", "--dir", "invoice-case"]);
    assert!(listed.contains("invoice  (review)"), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_get_shows_the_cases_definition() {
    let (cli, _) = invoice_case().await;
    let out = cli.ok(&["case", "get", "invoice", "--dir", "invoice-case"]);
    assert!(out.contains("name: invoice"), "{out}");
    assert!(out.contains("review: true"), "{out}");
}

/// A bad input is refused with each field's pointer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_create_refuses_bad_inputs_naming_each_field() {
    let (cli, _) = invoice_case().await;
    let err = cli.fails(&[
        "task",
        "create",
        "invoice",
        "--input",
        "currency:=3",
        "--dir",
        "invoice-case",
    ]);
    assert_contains(&err, "/inputs/invoice_url");
    assert_contains(&err, "/inputs/currency");
}

/// A new task is pending; the worker runs the bot; the Case asks for a review of the outputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_run_by_the_bot_waits_for_review_with_its_outputs() {
    let (_, t, out) = task_run().await;
    assert_eq!(t["status"], "pending");
    let id = t["id"].as_str().unwrap();
    assert!(out.starts_with(&format!("task {id}  review")), "{out}");
    assert!(out.contains("\"total\": 25"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_outputs_are_refused_until_the_task_is_done() {
    let (cli, t, _) = task_run().await;
    let id = t["id"].as_str().unwrap();
    // Outputs are read once the task is done.
    let err = cli.fails(&["task", "outputs", id, "--dir", "invoice-case"]);
    assert_contains(&err, "409");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_review_approves_a_task_with_edited_outputs() {
    let (_, id, out) = task_approved().await;
    assert!(out.starts_with(&format!("task {id}  done")), "{out}");
    assert!(out.contains("\"total\": 24"), "{out}");
}

/// A done task's outputs: its values and links to its artifacts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_outputs_show_a_done_tasks_values_and_artifacts() {
    let (cli, id, _) = task_approved().await;
    let out = cli.ok(&["task", "outputs", &id, "--dir", "invoice-case"]);
    assert!(out.contains("\"vendor\": \"ACME\""), "{out}");
    assert!(out.contains("artifact summary (text/plain): http"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_list_shows_each_task_of_the_case_with_its_status() {
    let (cli, id, _) = task_approved().await;
    let out = cli.ok(&["task", "list", "invoice", "--dir", "invoice-case"]);
    assert_eq!(out.trim(), format!("{id}  done"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_task_cannot_be_reviewed_again() {
    let (cli, id, _) = task_approved().await;
    let err = failed(approve(&cli, &id, &[]));
    assert_contains(&err, "409");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_get_of_an_unknown_task_is_not_found() {
    let (cli, _) = invoice().await;
    let err = cli.fails(&["task", "get", "nope", "--dir", "invoice-case"]);
    assert_contains(&err, "404");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_delete_removes_the_case() {
    let (cli, _) = invoice_case().await;
    assert_eq!(
        cli.ok(&["case", "delete", "invoice", "--dir", "invoice-case"])
            .trim(),
        "Case invoice deleted."
    );
    assert_eq!(
        cli.ok(&["case", "list", "--dir", "invoice-case"]).trim(),
        "No Cases."
    );
    let err = cli.fails(&["case", "get", "invoice", "--dir", "invoice-case"]);
    assert_contains(&err, "404");
}

/// A JavaScript syntax error in a method is a validation error everywhere an author looks
/// before running: `botbox validate`, `botbox push` (checked locally) and the server's push
/// (checked in its sandbox, for clients that skip the CLI), each naming the method and,
/// in the CLI, the file, line and column of the error inside the method.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_syntax_errors_are_refused_before_running() {
    let cli = Cli::on_server(&[]).await;
    let dir = cli.path("shop");
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
    let o = cli.run_in(&dir, &["validate", "bot.yml"]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert_contains(
        &o.stdout,
        "bot.yml:6:25: error: methods.lookup(message, context, data, options, config, result): JavaScript syntax error at line 2, column 21 of the method",
    );
    cli.ok(&["login", "-u", "admin", "-p", ADMIN_PASSWORD]);
    let err = failed(cli.run_in(&dir, &["push"]));
    // The reason first, on one line; the located problem on its own, "error" said once each.
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines[0], "error: the bot is not valid: 1 error", "{err}");
    assert!(
        lines[1].contains("bot.yml:6:25: error: methods.lookup(message, context, data, options, config, result): JavaScript syntax error at line 2, column 21 of the method")
            && !lines[1].starts_with("error:"),
        "{err}"
    );
    // With --json: one JSON object.
    let o = cli.run_in(&dir, &["push", "--json"]);
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
    let api = cli.api();
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
    let o = ok(cli.run_in(&dir, &["validate", "bot.yml"]));
    assert!(o.contains("ok (1 flows, 0 warnings)"), "{o}");
}

/// The CLI shows conversations and gives a deployed bot back as files: `botbox transcript`
/// renders a known conversation line by line, the structured transcript API gives messages
/// as objects, and `botbox pull --env` writes the deployed revision to a bot.yml that
/// validates and is the bot that was pushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_and_pull_from_the_cli() {
    let cli = Cli::admin().await;
    let dir = cli.path("hello");
    copy_dir(&example("hello"), &dir);
    let run = |args: &[&str]| cli.run_in(&dir, args);
    ok(run(&["push"]));
    ok(run(&["deploy", "--env", "production"]));
    let api = cli.api();
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
    let pulled = cli.path("pulled");
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
    ok(cli.run_in(&pulled, &["validate", "bot.yml"]));
}

/// A method that throws is reported by `botbox test` at its place in the author's file:
/// the line and column of the throw inside the method, in `bot.yml` or in the included file
/// that holds the method.
#[test]
fn run_time_errors_point_into_the_authors_files() {
    let cli = Cli::alone();
    let dir = cli.path("oops");
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
    let o = cli.run(&["test", "--dir", "oops"], "");
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

/// The project id a bot folder is bound to.
fn bound_to(dir: &Path) -> String {
    let b: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".botbox.json")).unwrap()).unwrap();
    b["projectId"].as_str().unwrap_or_default().to_owned()
}

/// An administrator's `push --project <bob's project>` acts once, with a warning naming
/// bob: the folder stays bound to the administrator's own project, the next plain push goes
/// there, bob's audit trail names the administrator, and only `bind` moves the binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_with_project_acts_once_and_leaves_the_binding_alone() {
    let both = AdminAndBob::added_by_the_cli().await;
    let admin = &both.admin;
    both.bob_ok(&["init", "shop"]);
    both.bob_ok(&["push", "--dir", "shop"]);
    let bobs = bound_to(&admin.path("shop"));
    admin.ok(&["init", "mine"]);
    admin.ok(&["push", "--dir", "mine"]);
    let binding = std::fs::read_to_string(admin.path("mine/.botbox.json")).unwrap();
    let own = bound_to(&admin.path("mine"));
    let o = admin.run(&["push", "--dir", "mine", "--project", &bobs], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_contains(
        &o.stderr,
        &format!("warning: project shop of user bob ({bobs}) belongs to user bob"),
    );
    assert_eq!(
        std::fs::read_to_string(admin.path("mine/.botbox.json")).unwrap(),
        binding
    );
    assert_contains(&admin.ok(&["push", "--dir", "mine"]), &own);
    let trail = both.bob_ok(&["audit", "--dir", "shop", "--action", "bot.push"]);
    assert!(
        trail.lines().any(|l| l.contains("by admin from"))
            && trail.lines().any(|l| l.contains("by bob from")),
        "{trail}"
    );
    assert_contains(
        &admin.ok(&["bind", &bobs, "--dir", "mine"]),
        &format!("(was {own})"),
    );
    assert_eq!(bound_to(&admin.path("mine")), bobs);
}

/// A push by name in an unbound folder refuses when a team of the user has a project of
/// that name, and lists it, instead of making a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_by_name_refuses_when_a_team_has_that_project() {
    let both = AdminAndBob::in_acme_with_a_counter().await;
    both.bob_ok(&["push", "--dir", "bob-counter"]);
    both.bob_ok(&["switch", "user"]);
    copy_dir(&example("counter"), &both.admin.path("plain-counter"));
    let err = failed(both.bob(&["push", "--dir", "plain-counter"], ""));
    assert!(
        err.contains("(team acme)") && err.contains("botbox bind"),
        "{err}"
    );
    assert!(
        !both.admin.path("plain-counter/.botbox.json").exists()
            || bound_to(&both.admin.path("plain-counter")).is_empty()
    );
}

/// `deploy --canary` runs the new version beside the environment's for a share of its
/// users, and `canary status|abort` show and end it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_canary_runs_a_share_and_canary_abort_ends_it() {
    let cli = deployed_mybot().await;
    let out = cli.ok(&[
        "deploy",
        "--dir",
        "mybot",
        "--env",
        "production",
        "--canary",
        "10",
    ]);
    assert_contains(&out, "canary 0.0.2 for 10 % of users, 0.0.1 for the rest");
    let status = cli.ok(&["canary", "status", "--dir", "mybot"]);
    assert_contains(&status, "canary 0.0.2 for 10 %");
    let out = cli.ok(&["canary", "abort", "--dir", "mybot"]);
    assert_contains(&out, "last canary: 0.0.2 aborted");
    assert_contains(&out, "runs 0.0.1 for everyone");
    let history = cli.ok(&["history", "--dir", "mybot"]);
    assert_contains(&history, "pushed by admin");
    assert_contains(&history, "deployed by admin  runs in production");
    let err = cli.fails(&[
        "deploy", "--dir", "mybot", "--env", "staging", "--canary", "10",
    ]);
    assert_contains(&err, "environment staging of project mybot");
}

/// `botbox misunderstood` lists what the skeleton bot fell back on; `botbox replay` of a
/// changed apology fails naming each difference side by side; `deploy --replay` refuses it
/// and `--force` deploys anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misunderstood_and_replay_gate_a_deploy() {
    let cli = deployed_mybot().await;
    let out = cli.ok(&[
        "channel",
        "create",
        "open",
        "--env",
        "production",
        "--type",
        "generic",
        "--url",
        "http://127.0.0.1:9/x",
        "--dir",
        "mybot",
    ]);
    let hook = out
        .split_whitespace()
        .find(|w| w.contains("/webhooks/"))
        .unwrap_or_else(|| panic!("no webhook in {out}"));
    let channel = hook.rsplit('/').next().unwrap();
    let api = cli.api();
    for (user, text) in [
        ("u1", "hi"),
        ("u2", "What is this?"),
        ("u3", "what is this"),
        ("u4", "hi"),
    ] {
        let body = json!({"userId": user, "messages": [{"type": "text", "content": text}]});
        common::post_webhook(&api, channel, &body).await;
    }
    let inbox = cli.ok(&["misunderstood", "--env", "production", "--dir", "mybot"]);
    assert_contains(
        &inbox,
        "misunderstood in environment production of project mybot",
    );
    assert_contains(&inbox, "(1 of 1 groups)");
    assert_contains(&inbox, "2×  what is this");
    assert_contains(&inbox, "hello.other");
    assert!(!inbox.contains(" hi "), "{inbox}");

    let same = cli.ok(&["replay", "--env", "production", "--dir", "mybot"]);
    assert_contains(&same, "4 identical, 0 differing, 0 failed");
    let flow = cli.path("mybot/flows/hello.yml");
    let text = std::fs::read_to_string(&flow).unwrap();
    std::fs::write(
        &flow,
        text.replace("Sorry, I only understand hi.", "Try saying hi."),
    )
    .unwrap();
    let o = cli.run(&["replay", "--env", "production", "--dir", "mybot"], "");
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert_contains(&o.stdout, "2 identical, 2 differing, 0 failed");
    assert_contains(&o.stdout, "message 1: \"What is this?\"");
    assert_contains(&o.stdout, "\"Sorry, I only understand hi.\"");
    assert_contains(&o.stdout, "| \"Try saying hi.\"");
    assert_contains(&o.stderr, "2 of 4 conversations differ and 0 failed");

    let refused = cli.fails(&[
        "deploy",
        "--dir",
        "mybot",
        "--env",
        "production",
        "--replay",
    ]);
    assert_contains(&refused, "not deployed (deploy --force deploys anyway)");
    let envs = cli.ok(&["env", "list", "--dir", "mybot"]);
    assert_contains(&envs, "0.0.1");
    let forced = cli.ok(&[
        "deploy",
        "--dir",
        "mybot",
        "--env",
        "production",
        "--replay",
        "--force",
    ]);
    assert_contains(&forced, "Deployed mybot 0.0.2");
}

/// `deploy` keeps the CMS revision the environment runs unless `--cms` names another
/// (`latest`, or a revision), and says what it pinned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_keeps_the_environments_cms_revision_unless_told() {
    let cli = deployed_mybot().await;
    let pinned = |out: &str| -> String {
        let line = out
            .lines()
            .find(|l| l.starts_with("pinned: "))
            .unwrap_or_else(|| panic!("no pinned line in {out}"));
        line.rsplit(' ').next().unwrap().to_owned()
    };
    let out = cli.ok(&["deploy", "--dir", "mybot", "--env", "production"]);
    assert_eq!(pinned(&out), "none", "{out}");
    cli.ok(&["cms", "enable", "--dir", "mybot"]);
    let out = cli.ok(&[
        "deploy",
        "--dir",
        "mybot",
        "--env",
        "production",
        "--cms",
        "latest",
    ]);
    let first = pinned(&out);
    assert_eq!(first.len(), 40, "{out}");
    std::fs::write(
        cli.path("mybot/cms.yml"),
        "pages:\n  home:\n    greeting:\n      text: {type: text, value: Hi}\n",
    )
    .unwrap();
    cli.ok(&["cms", "push", "--dir", "mybot", "-m", "greeting"]);
    // A bot fix keeps the content the environment runs.
    let out = cli.ok(&["deploy", "--dir", "mybot", "--env", "production"]);
    assert_eq!(pinned(&out), first, "{out}");
    let out = cli.ok(&[
        "deploy",
        "--dir",
        "mybot",
        "--env",
        "production",
        "--cms",
        "latest",
    ]);
    let second = pinned(&out);
    assert_ne!(second, first);
    let out = cli.ok(&[
        "deploy",
        "--dir",
        "mybot",
        "--env",
        "production",
        "--cms",
        &first,
    ]);
    assert_eq!(pinned(&out), first, "{out}");
    let refused = cli.fails(&[
        "deploy",
        "--dir",
        "mybot",
        "--env",
        "production",
        "--cms",
        "nope",
    ]);
    assert_contains(&refused, "cmsRevision: nope is not a CMS revision");
}

/// `key create --workspace` makes a workspace key for the caller's own projects or a team's,
/// printed once with the line a CI job runs; with it alone (no login) a job pushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_key_from_the_cli_pushes_in_ci() {
    let cli = pushed_mybot().await;
    let out = cli.ok(&["key", "create", "--workspace", "admin", "--name", "ci"]);
    assert_contains(&out, "Workspace key ci for your own projects (admin)");
    assert_contains(&out, "BOTBOX_TOKEN=sk-ws-");
    let key = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("BOTBOX_TOKEN="))
        .unwrap()
        .to_owned();
    let ci_home = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["push", "--dir", "mybot"])
        .current_dir(cli.work.path())
        .env("BOTBOX_HOME", ci_home.path())
        .env("BOTBOX_SERVER", &cli.url)
        .env("BOTBOX_TOKEN", &key)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_contains(&stdout, "Pushed mybot version");

    cli.ok(&["team", "create", "acme"]);
    let out = cli.ok(&["key", "create", "--workspace", "acme"]);
    assert_contains(&out, "for team acme");
    let err = cli.fails(&["key", "create", "--workspace", "nobody"]);
    assert_contains(&err, "no team nobody that you can see");
}

/// `project list` shows the projects one reaches with their owners and ids; `--all` is every
/// tenant's, for administrators only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_list_names_owners_and_ids() {
    let both = AdminAndBob::in_two_teams().await;
    both.admin.ok(&["init", "mybot"]);
    both.admin.ok(&["push", "--dir", "mybot"]);
    copy_dir(&example("counter"), &both.admin.path("bob-counter"));
    both.bob_ok(&["push", "--dir", "bob-counter"]);
    let mine = both.admin.ok(&["project", "list"]);
    assert_contains(&mine, "the projects you reach (1)");
    assert_contains(&mine, "mybot");
    assert!(!mine.contains("counter"), "{mine}");
    let all = both.admin.ok(&["project", "list", "--all"]);
    assert_contains(&all, "every tenant's projects (2)");
    assert!(
        all.lines()
            .any(|l| l.starts_with("counter") && l.contains("user bob")),
        "{all}"
    );
    let bobs = both.bob_ok(&["project", "list"]);
    assert_contains(&bobs, "counter");
    assert!(!bobs.contains("mybot"), "{bobs}");
    let o = both.bob(&["project", "list", "--all"], "");
    assert_ne!(o.code, 0);
    assert_contains(&o.stderr, "administrators only");
    let json: Value = serde_json::from_str(&both.bob_ok(&["project", "list", "--json"])).unwrap();
    assert_eq!(json[0]["name"], "counter");
}

/// With `--project`, the commands that read a project need no bot folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_commands_run_outside_a_bot_folder_with_project() {
    let cli = deployed_mybot().await;
    let list = cli.ok(&["project", "list"]);
    let pid = list
        .lines()
        .find(|l| l.starts_with("mybot"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap()
        .to_owned();
    let elsewhere = tempfile::tempdir().unwrap();
    for args in [
        vec!["env", "list"],
        vec!["errors"],
        vec!["transcript", "--env", "production"],
        vec!["history"],
    ] {
        let mut args = args.clone();
        args.extend(["--project", pid.as_str()]);
        let o = bb(cli.home.path(), elsewhere.path(), &cli.url, &args, "");
        assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
        assert_contains(&o.stderr, &format!("project mybot of user admin ({pid})"));
    }
    let envs = bb(
        cli.home.path(),
        elsewhere.path(),
        &cli.url,
        &["env", "list", "--project", &pid],
        "",
    );
    assert_contains(&envs.stdout, "production");
}

/// `validate` says what a push would refuse (a name no project can have), and such a push
/// is refused before anything is made: no empty project is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_says_what_push_refuses_and_a_refused_push_leaves_nothing() {
    let cli = Cli::admin().await;
    cli.ok(&["init", "mybot"]);
    let bot = cli.path("mybot/bot.yml");
    let text = std::fs::read_to_string(&bot).unwrap();
    std::fs::write(&bot, text.replace("name: mybot", "name: my bot!")).unwrap();
    let o = cli.run_in(&cli.path("mybot"), &["validate", "bot.yml"]);
    assert_ne!(o.code, 0, "{}", o.stdout);
    assert_contains(
        &o.stdout,
        "bot.yml: name: a project is named after its bot: 1 to 64 letters, digits, '.', '_' or '-' (got \"my bot!\")",
    );
    let err = cli.fails(&["push", "--dir", "mybot"]);
    assert_contains(&err, "a push would be refused");
    assert_contains(&cli.ok(&["project", "list"]), "No projects.");
    let binding = std::fs::read_to_string(cli.path("mybot/.botbox.json")).unwrap_or_default();
    let binding: Value = serde_json::from_str(&binding).unwrap_or(Value::Null);
    assert!(binding["projectId"].is_null(), "{binding}");
}

/// `botbox test` runs a CMS bot with the folder's cms.yml, and a test may set CMS values of
/// its own.
#[test]
fn local_tests_read_cms_yml_and_a_tests_own_cms_values() {
    let cli = Cli::alone();
    cli.ok(&["init", "mybot"]);
    let flow = cli.path("mybot/flows/hello.yml");
    let text = std::fs::read_to_string(&flow).unwrap();
    std::fs::write(
        &flow,
        text.replace(
            "\"Hello! I am mybot.\"",
            "\"$(cms.home.greeting.text.value)\"",
        ),
    )
    .unwrap();
    std::fs::write(
        cli.path("mybot/cms.yml"),
        "pages:\n  home:\n    greeting:\n      text: {type: text, value: Hello from the CMS}\nfaqs: {}\n",
    )
    .unwrap();
    std::fs::write(
        cli.path("mybot/tests/hello.yml"),
        "tests:\n  - name: the folder's content\n    steps:\n      - send: hi\n        expect: [\"Hello from the CMS\"]\n  \
         - name: the test's own content\n    cms: {home: {greeting: {text: {value: Hi from the test}}}}\n    steps:\n      - send: hi\n        expect: [\"Hi from the test\"]\n",
    )
    .unwrap();
    let out = cli.ok(&["test", "--dir", "mybot"]);
    assert_contains(&out, "2 passed, 0 failed");
}
