//! Many people, many tenants, through the CLI and the API: an administrator, two developers
//! whose bots share a name, and a team with a teamAdmin, a developer and a viewer. No
//! command of anyone reads or changes a project that is not theirs; the team's members
//! reach the team's projects with their own login according to their role; a CI job deploys
//! with a workspace key alone. And the prompts: passwords are read with echo off.

use crate::cli::{Out, bb, copy_dir, ok};
use crate::common::{self, ADMIN_PASSWORD, Backend, Server, s};
use serde_json::{Value, json};
use std::path::PathBuf;

/// A person at a terminal: their own CLI home and work folder.
struct Person {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    server: String,
}

impl Person {
    fn new(server: &Server) -> Person {
        Person {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
            server: server.base.clone(),
        }
    }

    /// `botbox <args>` in `<work>/<folder>`.
    fn run(&self, folder: &str, args: &[&str]) -> Out {
        let cwd = self.dir(folder);
        bb(self.home.path(), &cwd, &self.server, args, "")
    }

    fn dir(&self, folder: &str) -> PathBuf {
        self.work.path().join(folder)
    }

    fn login(&self, name: &str, password: &str) {
        ok(self.run("", &["login", "-u", name, "-p", password]));
    }

    /// The project id the folder is bound to.
    fn bound(&self, folder: &str) -> String {
        let t = std::fs::read_to_string(self.dir(folder).join(".botbox.json")).unwrap();
        let v: Value = serde_json::from_str(&t).unwrap();
        s(&v["projectId"])
    }
}

#[track_caller]
fn fails(o: Out, says: &str) -> String {
    assert_ne!(o.code, 0, "expected a failure; stdout: {}", o.stdout);
    assert!(
        o.stderr.contains(says),
        "expected {says:?} in: {}",
        o.stderr
    );
    o.stderr
}

/// The revisions a project holds (by whoever can read it: the administrator).
async fn revisions(api: &common::Api, admin: &str, pid: &str) -> usize {
    let r = api
        .get(&format!("/projects/{pid}/bot/revisions?limit=100"), admin)
        .await
        .ok();
    r["data"].as_array().unwrap().len()
}

/// Everyone of the story, logged in with the CLI: the administrator, two developers whose
/// bots share a name, and a team's teamAdmin (`ta`), developer (`tdev`) and viewer (`tview`).
struct Cast {
    server: Server,
    api: common::Api,
    admin_token: String,
    admin: Person,
    dev1: Person,
    dev2: Person,
    ta: Person,
    tdev: Person,
    tview: Person,
}

async fn cast() -> Cast {
    let server = Server::start(Backend::Sqlite, &[]).await;
    let api = server.api();
    let admin_token = api.admin_token().await;
    for name in ["dev1", "dev2", "ta", "tdev", "tview"] {
        api.user(&admin_token, name, "developer").await;
    }
    let [admin, dev1, dev2, ta, tdev, tview] = std::array::from_fn(|_| Person::new(&server));
    admin.login("admin", ADMIN_PASSWORD);
    for (p, name) in [
        (&dev1, "dev1"),
        (&dev2, "dev2"),
        (&ta, "ta"),
        (&tdev, "tdev"),
        (&tview, "tview"),
    ] {
        p.login(name, &format!("{name}-password"));
    }
    Cast {
        server,
        api,
        admin_token,
        admin,
        dev1,
        dev2,
        ta,
        tdev,
        tview,
    }
}

/// `p` makes and pushes a bot named `mybot`; the project it is bound to.
fn push_mybot(p: &Person) -> String {
    ok(p.run("", &["init", "mybot"]));
    ok(p.run("mybot", &["push"]));
    p.bound("mybot")
}

/// Team acme: its teamAdmin invites a developer and a viewer, and pushes a bot made for
/// the team, `teambot`, whose first push creates the team's project. The project's id and
/// the team's.
async fn team_acme(c: &Cast) -> (String, String) {
    let Cast { ta, tview, .. } = c;
    ok(ta.run("", &["team", "create", "acme"]));
    ok(ta.run(
        "",
        &["team", "invite", "acme", "tdev", "--role", "developer"],
    ));
    ok(ta.run("", &["team", "invite", "acme", "tview", "--role", "viewer"]));
    let members = ok(tview.run("", &["team", "members", "acme"]));
    for line in ["ta  teamAdmin", "tdev  developer", "tview  viewer"] {
        assert!(members.contains(line), "{members}");
    }
    ok(ta.run("", &["init", "teambot", "--team", "acme"]));
    let o = ok(ta.run("teambot", &["push"]));
    assert!(o.contains("to project teambot of team acme"), "{o}");
    let pt = ta.bound("teambot");
    let owner = c
        .api
        .get(&format!("/projects/{pt}"), &c.admin_token)
        .await
        .ok();
    (pt, s(&owner["owner"]["id"]))
}

/// Two developers and the administrator each push a bot named mybot: three projects, each
/// bound to its folder and saying whose it is; nobody reaches another's by its name, and a
/// developer not even by its id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_of_one_name_stay_their_owners() {
    let c = cast().await;
    let Cast {
        api,
        admin_token,
        admin,
        dev1,
        dev2,
        ..
    } = &c;
    let admin_token = admin_token.as_str();
    // Two developers and the administrator each push a bot named mybot: three projects,
    // each bound to its folder, each saying whose it is.
    let mut pids = Vec::new();
    for (p, owner) in [
        (&dev1, "user dev1"),
        (&dev2, "user dev2"),
        (&admin, "user admin"),
    ] {
        ok(p.run("", &["init", "mybot"]));
        let o = p.run("mybot", &["push"]);
        assert!(
            o.stderr.contains(&format!("project mybot of {owner}")),
            "{}",
            o.stderr
        );
        assert!(ok(o).contains(&format!("to project mybot of {owner}")));
        pids.push(p.bound("mybot"));
    }
    let (p1, p2, pa) = (&pids[0], &pids[1], &pids[2]);
    assert!(p1 != p2 && p1 != pa && p2 != pa, "three projects: {pids:?}");
    // The administrator's push and deploy went to the administrator's own project.
    ok(admin.run("mybot", &["deploy"]));
    assert_eq!(
        revisions(api, admin_token, p1).await,
        2,
        "dev1's: the empty one and dev1's push"
    );
    assert_eq!(revisions(api, admin_token, pa).await, 2);
    let o = ok(admin.run("mybot", &["env", "list"]));
    assert!(o.contains("production"), "{o}");
    assert!(ok(dev1.run("mybot", &["env", "list"])).contains("No environments"));
    // An administrator reaches another tenant's project only by naming it.
    let o = admin.run("mybot", &["env", "list", "--project", p1]);
    assert!(
        o.stderr.contains("project mybot of user dev1"),
        "{}",
        o.stderr
    );
    assert!(ok(o).contains("No environments"));
    // A developer cannot name another's project: the id is not theirs to reach.
    fails(
        dev2.run("mybot", &["env", "list", "--project", p1]),
        "is not one you can reach",
    );
    // The administrator lists its own projects; every tenant's only when asked.
    let own = api.get("/projects", admin_token).await.ok();
    assert_eq!(own["total"], 1);
    assert_eq!(
        own["data"][0]["owner"],
        json!({"id": own["data"][0]["owner"]["id"], "type": "user", "name": "admin"})
    );
    assert_eq!(
        api.get("/projects?owner=all", admin_token).await.ok()["total"],
        3
    );
}

/// The team's members reach its project with their own login, by the committed binding, as
/// their role says; someone outside the team learns nothing even holding the folder, and a
/// name alone is looked up among the member's own projects only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_members_reach_its_project_as_their_role_says() {
    let c = cast().await;
    let (pt, _) = team_acme(&c).await;
    let Cast {
        ta,
        tdev,
        tview,
        dev1,
        ..
    } = &c;
    // Members reach it with their own login, by the committed binding, as their role says.
    for p in [&tdev, &tview, &dev1] {
        copy_dir(&ta.dir("teambot"), &p.dir("teambot"));
    }
    assert!(ok(tdev.run("teambot", &["push"])).contains("of team acme"));
    ok(tdev.run("teambot", &["deploy"]));
    assert!(ok(tview.run("teambot", &["env", "list"])).contains("production"));
    fails(
        tview.run("teambot", &["push"]),
        "(viewer) may not update its projects",
    );
    fails(tview.run("teambot", &["deploy"]), "(viewer) may not");
    // Someone outside the team learns nothing, even holding the folder.
    fails(
        dev1.run("teambot", &["env", "list"]),
        "is not one you can reach",
    );
    // Without a binding, a name is looked up among the member's own projects only; the
    // team's of that name is offered, never taken.
    std::fs::remove_file(tdev.dir("teambot").join(".botbox.json")).unwrap();
    let e = fails(
        tdev.run("teambot", &["env", "list"]),
        "no project named teambot is yours",
    );
    assert!(
        e.contains(&format!("{pt} (team acme)")) && e.contains("--project"),
        "{e}"
    );
}

/// A CI job deploys with a workspace key alone, or kept by `login -t`; the key never reaches
/// beyond its workspace, nor administration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_key_deploys_and_reaches_nothing_else() {
    let c = cast().await;
    let (_, acme) = team_acme(&c).await;
    let p1 = push_mybot(&c.dev1);
    let p1 = p1.as_str();
    let Cast {
        server, api, ta, ..
    } = &c;
    let ta_token = api.login("ta", "ta-password").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = s(&api
        .post(
            &format!("/teams/{acme}/keys"),
            &ta_token,
            json!({"name": "ci"}),
        )
        .await
        .ok()["key"]);
    let ci = Person::new(server);
    copy_dir(&ta.dir("teambot"), &ci.dir("teambot"));
    let with_key = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"))
            .args(args)
            .current_dir(ci.dir("teambot"))
            .env("BOTBOX_HOME", ci.home.path())
            .env("BOTBOX_CACHE", common::GUEST_CACHE)
            .env("BOTBOX_SERVER", &ci.server)
            .env("BOTBOX_TOKEN", &key)
            .output()
            .unwrap();
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    };
    assert!(ok(with_key(&["push"])).contains("of team acme"));
    assert!(ok(with_key(&["deploy", "--env", "production"])).contains("production"));
    // Or kept by `login -t`, like a token.
    let o = ok(ci.run("teambot", &["login", "-t", &key]));
    assert!(o.contains("Logged in with workspace key key:ci"), "{o}");
    assert!(ok(ci.run("teambot", &["env", "list"])).contains("production"));
    // Never beyond its workspace, never administration.
    fails(
        with_key(&["env", "list", "--project", p1]),
        "is not one you can reach",
    );
    fails(
        with_key(&["user", "list"]),
        "accounts, teams, tokens and keys need a person's login",
    );
    let r = api.get("/users", &key).await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.text.contains("workspace key"), "{}", r.text);
}

/// Who is who: the administrator's user list, nobody else's; token answers say what they
/// act for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_is_who_and_what_a_token_acts_for() {
    let c = cast().await;
    let (_, acme) = team_acme(&c).await;
    let Cast {
        api, admin, dev1, ..
    } = &c;
    // Who is who: the administrator's user list; nobody else's.
    let users = ok(admin.run("", &["user", "list"]));
    assert!(
        users.contains("tview  developer") && users.contains("teams: acme"),
        "{users}"
    );
    fails(dev1.run("", &["user", "list"]), "not authorized");
    // Token answers say what they act for.
    let t = api.login("tdev", "tdev-password").await;
    assert!(t["teamId"].is_null() && t["botId"].is_null());
    let team_token = api
        .post(
            "/tokens",
            s(&t["id"]).as_str(),
            json!({"type": "team", "teamId": acme}),
        )
        .await
        .ok();
    assert_eq!(team_token["teamId"], json!(acme));
}

/// A terminal for one command: a pseudo-terminal whose far side is the child's controlling
/// terminal (its stdin, stdout and stderr), so the child reads passwords as from a person.
#[cfg(target_os = "linux")]
mod pty {
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    pub struct Terminal {
        master: std::fs::File,
        pub seen: Arc<Mutex<String>>,
        pub child: Child,
    }

    impl Terminal {
        pub fn spawn(mut cmd: Command) -> Terminal {
            let (mut master, mut slave) = (0, 0);
            // SAFETY: openpty writes two descriptors into the integers given.
            let rc = unsafe {
                libc::openpty(
                    &mut master,
                    &mut slave,
                    std::ptr::null_mut(),
                    std::ptr::null(),
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0, "openpty");
            // SAFETY: both descriptors were just opened and are owned here alone.
            let (master, slave) =
                unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
            let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
            cmd.stdin(io(&slave)).stdout(io(&slave)).stderr(io(&slave));
            // SAFETY: between fork and exec only async-signal-safe calls: a new session
            // whose controlling terminal is the pty (fd 0).
            unsafe {
                cmd.pre_exec(|| {
                    libc::setsid();
                    libc::ioctl(0, libc::TIOCSCTTY as _, 0);
                    Ok(())
                });
            }
            let child = cmd.spawn().unwrap();
            drop(slave);
            let master = std::fs::File::from(master);
            let seen = Arc::new(Mutex::new(String::new()));
            let (mut reader, log) = (master.try_clone().unwrap(), seen.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                // EIO once the child's side is closed ends the loop.
                while let Ok(n @ 1..) = reader.read(&mut buf) {
                    log.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            });
            Terminal {
                master,
                seen,
                child,
            }
        }

        /// Waits (30 s at most) until the terminal has shown `text` `times` times.
        pub fn wait_for(&self, text: &str, times: usize) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.seen.lock().unwrap().matches(text).count() < times {
                assert!(
                    Instant::now() < deadline,
                    "no {text:?} in {:?}",
                    self.seen.lock().unwrap()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }

        /// Whether the terminal echoes what is typed now.
        pub fn echoes(&self) -> bool {
            // SAFETY: tcgetattr fills the zeroed termios of an open terminal descriptor.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                assert_eq!(libc::tcgetattr(self.master.as_raw_fd(), &mut t), 0);
                t.c_lflag & libc::ECHO != 0
            }
        }

        /// Types `line` at the prompt that is showing for the `n`th time, once the program
        /// has turned echo off (30 s at most): a secret typed then is never shown.
        pub fn type_secret(&mut self, prompt: &str, n: usize, line: &str) {
            self.wait_for(prompt, n);
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.echoes() {
                assert!(Instant::now() < deadline, "echo stayed on at {prompt:?}");
                std::thread::sleep(Duration::from_millis(10));
            }
            self.master
                .write_all(format!("{line}\n").as_bytes())
                .unwrap();
        }
    }
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_are_read_from_the_terminal_with_echo_off() {
    let server = Server::start(Backend::Sqlite, &[]).await;
    let home = tempfile::tempdir().unwrap();
    let cmd = |args: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"));
        c.args(args)
            .env("BOTBOX_HOME", home.path())
            .env("BOTBOX_SERVER", &server.base)
            .env_remove("BOTBOX_PASSWORD");
        c
    };
    let finish = |mut t: pty::Terminal| -> String {
        let status = t.child.wait().unwrap();
        let seen = t.seen.lock().unwrap().clone();
        assert!(status.success(), "{seen}");
        seen
    };
    let mut t = pty::Terminal::spawn(cmd(&["login", "-u", "admin"]));
    t.type_secret("password: ", 1, ADMIN_PASSWORD);
    t.wait_for("Logged in as admin", 1);
    let seen = finish(t);
    assert!(
        !seen.contains(ADMIN_PASSWORD),
        "the password was shown: {seen}"
    );

    // passwd: the current password, then the new one twice, none of them shown.
    let mut t = pty::Terminal::spawn(cmd(&["passwd"]));
    t.type_secret("current password: ", 1, ADMIN_PASSWORD);
    t.type_secret("new password: ", 1, "a-new-admin-password");
    t.type_secret("new password again: ", 1, "a-new-admin-password");
    t.wait_for("Password changed", 1);
    let seen = finish(t);
    assert!(
        !seen.contains("a-new-admin-password") && !seen.contains(ADMIN_PASSWORD),
        "{seen}"
    );
    server.api().login("admin", "a-new-admin-password").await;
}

/// The first administrator's password follows the rule of every account: a server given a
/// short one refuses to start and says why.
#[test]
fn a_short_admin_password_is_refused_at_start() {
    let data = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_botbox"))
        .args(["serve", "--addr", "127.0.0.1:0", "--data"])
        .arg(data.path())
        .env("BOTBOX_ADMIN_PASSWORD", "short")
        .env("BOTBOX_CACHE", common::GUEST_CACHE)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "BOTBOX_ADMIN_PASSWORD (--admin-password): at least 8 characters; refusing to start"
        ),
        "{err}"
    );
}
