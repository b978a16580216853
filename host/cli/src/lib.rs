//! The `botbox` command line: the client side of the project API.
//!
//! May depend on: `runtime-core`, `botbox-api-types` (the API's request and response
//! bodies), `botbox-botfiles` (the bot folder that `push`, `test` and `validate` read) and
//! `botbox-sandbox` (`botbox test` runs bots locally in the same sandbox as the server).
//! Must never link the server's storage or services: it talks to a server over HTTP like
//! any client.
//!
//! Each command is a plain function over a [`Ctx`] (config, HTTP client, output mode). The
//! server URL and tokens live in `config.json` under `BOTBOX_HOME` (default
//! `~/.config/botbox`), readable by the user only.

use botbox_botfiles as bot;
pub mod canary;
pub mod cases;
pub mod commands;
use commands::{ChannelAction, ChannelSettings, EnvAction, KeyAction};
pub mod cms;
pub mod console;
pub mod learning;
pub mod nlu;
pub mod people;
pub mod project;

use anyhow::{Context, Result, anyhow, bail};
use botbox_api_types::{
    ApiKey, Channel, Deployment, Environment, Me, PageOf, Project, RevisionPushed, Token, UserTeam,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the CLI remembers between runs.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CliConfig {
    pub server: Option<String>,
    pub username: Option<String>,
    pub user_id: Option<String>,
    pub user_token: Option<String>,
    /// Team name → team token.
    #[serde(default)]
    pub teams: BTreeMap<String, String>,
    /// The team the CLI acts for (`None`: the user's own account).
    pub current_team: Option<String>,
}

pub fn home() -> PathBuf {
    if let Some(h) = std::env::var_os("BOTBOX_HOME") {
        return PathBuf::from(h);
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|h| h.join(".config")))
        .unwrap_or_else(|| PathBuf::from("."));
    base.join("botbox")
}

impl CliConfig {
    pub fn load() -> Result<CliConfig> {
        let path = home().join("config.json");
        match std::fs::read_to_string(&path) {
            Ok(t) => {
                serde_json::from_str(&t).with_context(|| format!("reading {}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(CliConfig::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn save(&self) -> Result<()> {
        let dir = home();
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("config.json");
        let tmp = dir.join("config.json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
        }
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }

    /// The token the CLI acts with now.
    pub fn token(&self) -> Option<&str> {
        match &self.current_team {
            Some(t) => self.teams.get(t).map(String::as_str),
            None => self.user_token.as_deref(),
        }
    }
}

/// `BOTBOX_TOKEN` when set (a token or a workspace key): it overrides the stored login.
pub(crate) fn env_token() -> Option<String> {
    std::env::var("BOTBOX_TOKEN").ok().filter(|t| !t.is_empty())
}

/// The context of one command.
pub struct Ctx {
    pub config: CliConfig,
    pub server: String,
    pub json: bool,
    /// `--project <id>`: the project every project command acts on, whatever the folder.
    pub project: Option<String>,
    http: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

impl Ctx {
    /// `ca_cert`: a PEM file of certificate authorities to trust beside the built-in ones
    /// (`--ca-cert`; else `SSL_CERT_FILE` when set), for a server whose certificate a
    /// private authority signed.
    pub fn new(server: Option<String>, json: bool, ca_cert: Option<&Path>) -> Result<Ctx> {
        let config = CliConfig::load()?;
        let server = server
            .or_else(|| config.server.clone())
            .unwrap_or_else(|| "http://127.0.0.1:8080".into())
            .trim_end_matches('/')
            .to_owned();
        let mut http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(60));
        let env_file = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty());
        let (file, flag) = match (ca_cert, &env_file) {
            (Some(f), _) => (Some(f.to_path_buf()), "--ca-cert"),
            (None, Some(f)) => (Some(PathBuf::from(f)), "SSL_CERT_FILE"),
            (None, None) => (None, ""),
        };
        if let Some(file) = file {
            match ca_certs(&file) {
                Ok(certs) => {
                    for cert in certs {
                        http = http.add_root_certificate(cert);
                    }
                }
                Err(e) if flag == "--ca-cert" => bail!("--ca-cert {}: {e}", file.display()),
                // Set for other programs too: a file this CLI cannot use is said, not fatal.
                Err(e) => eprintln!("warning: SSL_CERT_FILE {} not used: {e}", file.display()),
            }
        }
        Ok(Ctx {
            config,
            server,
            json,
            project: None,
            http: http.build()?,
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
        })
    }

    /// Prints the human form, or the JSON form with `--json`.
    pub fn out(&self, human: impl AsRef<str>, machine: Json) {
        if self.json {
            println!("{machine}");
        } else {
            println!("{}", human.as_ref());
        }
    }

    /// `BOTBOX_TOKEN` (a token or a workspace key, for CI jobs: nothing is stored), else
    /// the stored token of the login or team the CLI acts for.
    fn token(&self) -> Result<String> {
        if let Some(t) = env_token() {
            return Ok(t);
        }
        self.config
            .token()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("not logged in: run `botbox login` first (or set BOTBOX_TOKEN)"))
    }

    /// Calls the API; turns the server's plain-text errors into messages.
    pub fn call(&self, method: &str, path: &str, body: Option<&Json>) -> Result<Json> {
        let token = self.token()?;
        self.call_with(method, path, body, Some(&token))
    }

    /// [`Ctx::call`], its answer read as the API shape `T` (`botbox-api-types`): an answer
    /// that does not have the shape is an error naming the route, never an empty field.
    pub fn call_as<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&Json>,
    ) -> Result<T> {
        shaped(method, path, self.call(method, path, body)?)
    }

    /// [`Ctx::call`], read as `T` and also kept as it came (for `--json`, which shows the
    /// server's whole answer).
    pub fn call_view<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&Json>,
    ) -> Result<(T, Json)> {
        let whole = self.call(method, path, body)?;
        Ok((shaped(method, path, whole.clone())?, whole))
    }

    /// [`Ctx::call_with`], read as `T` (see [`Ctx::call_as`]).
    pub fn call_with_as<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&Json>,
        token: Option<&str>,
    ) -> Result<T> {
        shaped(method, path, self.call_with(method, path, body, token)?)
    }

    pub fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Json>,
        token: Option<&str>,
    ) -> Result<Json> {
        let url = format!("{}{path}", self.server);
        let mut rb = self
            .http
            .request(reqwest::Method::from_bytes(method.as_bytes())?, &url);
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        if let Some(b) = body {
            rb = rb.json(b);
        }
        self.rt.block_on(async {
            let r = rb
                .send()
                .await
                .map_err(|e| Unreachable::of(&self.server, &e))?;
            let status = r.status();
            let text = r.text().await?;
            match status.as_u16() {
                // 204 No Content (a delete) has no body: null.
                200..=299 if text.trim().is_empty() => Ok(Json::Null),
                200..=299 => serde_json::from_str(&text)
                    .with_context(|| format!("{method} {path}: not JSON")),
                401 if path == "/login" => bail!("{text}"),
                401 => bail!("not logged in, or the session expired: run `botbox login` ({text})"),
                _ => bail!("{} ({method} {path}: {status})", server_says(&text)),
            }
        })
    }
}

/// The server did not answer at all (refused, timed out, a name that does not resolve, a
/// certificate not trusted): no answer about the request, so nothing the caller has (a
/// binding, a token) is in doubt.
#[derive(Debug)]
pub struct Unreachable {
    pub server: String,
    pub why: String,
    /// The connection failed on the server's certificate (not trusted, expired, another
    /// name's): the server may well be running.
    pub certificate: bool,
}

impl Unreachable {
    fn of(server: &str, e: &reqwest::Error) -> Unreachable {
        // reqwest's own sentence names only the URL: the cause is in its sources.
        let mut why = vec![];
        let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
        while let Some(s) = source {
            why.push(s.to_string());
            source = s.source();
        }
        let why = why.last().cloned().unwrap_or_else(|| e.to_string());
        // rustls's words for a server certificate it refused (not an alert about ours).
        let certificate = why.contains("invalid peer certificate");
        Unreachable {
            server: server.to_owned(),
            why,
            certificate,
        }
    }
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.certificate {
            let advice = if self.why.contains("NotValidForName") {
                "it was issued for another name: check the address in --server"
            } else if self.why.contains("Expired") || self.why.contains("NotValidYet") {
                "it is out of its dates: renew it on the server, or check this machine's clock"
            } else {
                "if a private authority signed it, pass that authority's certificate with `--ca-cert <file.pem>` (or SSL_CERT_FILE)"
            };
            return write!(
                f,
                "the server's certificate is not trusted: {} ({}); {advice}",
                self.why, self.server
            );
        }
        write!(
            f,
            "cannot reach the botbox server at {}: {}. Is `botbox serve` running there? (`botbox login --server URL` picks another)",
            self.server, self.why
        )
    }
}

/// The certificates of a PEM file (one or several).
fn ca_certs(file: &Path) -> Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(file)?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| anyhow!("not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        bail!("no certificate in it (PEM, -----BEGIN CERTIFICATE-----)");
    }
    Ok(certs)
}

impl std::error::Error for Unreachable {}

/// What an error answer says, the one true thing first: the server's detail line (after
/// the generic first sentence the project API's plain-text errors start with), else its
/// whole text.
fn server_says(text: &str) -> String {
    let text = text.trim();
    match text.split_once('\n') {
        Some((_, detail)) if !detail.trim().is_empty() => detail.trim().to_owned(),
        _ => text.to_owned(),
    }
}

/// `1 error`, `3 errors`.
fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// An answer read as the API shape `T`.
fn shaped<T: serde::de::DeserializeOwned>(method: &str, path: &str, v: Json) -> Result<T> {
    serde_json::from_value(v).with_context(|| {
        format!("{method} {path}: the server's answer is not the shape this CLI knows (another botbox version?)")
    })
}

/// A value as the JSON the `--json` output shows.
fn to_json<T: Serialize>(v: &T) -> Json {
    serde_json::to_value(v).expect("API shapes serialise")
}

// ---------------------------------------------------------------------------------------------
// Accounts

pub fn login(
    ctx: &mut Ctx,
    username: Option<String>,
    password: Option<String>,
    token: Option<String>,
) -> Result<()> {
    let (token, username) = match token {
        Some(t) => {
            let me: Me = ctx.call_with_as("GET", "/me", None, Some(&t))?;
            (t, me.username)
        }
        None => {
            let username = match username {
                Some(u) => u,
                None => prompt("username: ")?,
            };
            let password = match password {
                Some(p) => p,
                None => prompt_secret("password: ")?,
            };
            let t: Token = ctx.call_with_as(
                "POST",
                "/login",
                Some(&json!({"username": username, "password": password})),
                None,
            )?;
            (t.id, username)
        }
    };
    let me: Me = ctx.call_with_as("GET", "/me", None, Some(&token))?;
    let (username, key) = match me.credential.as_str() {
        "workspaceKey" => (me.username.clone(), true),
        _ => (username, false),
    };
    ctx.config = CliConfig {
        server: Some(ctx.server.clone()),
        username: Some(username.clone()),
        user_id: Some(me.user_id.clone()),
        user_token: Some(token),
        teams: BTreeMap::new(),
        current_team: None,
    };
    ctx.config.save()?;
    let what = if key {
        format!(
            "Logged in with workspace key {username} (developer rights on its workspace's projects)"
        )
    } else {
        format!("Logged in as {username}")
    };
    ctx.out(
        what,
        json!({"username": username, "userId": me.user_id, "server": ctx.server, "credential": me.credential}),
    );
    Ok(())
}

pub fn logout(ctx: &mut Ctx, yes: bool) -> Result<()> {
    if ctx.config.user_token.is_none() {
        ctx.out("Not logged in.", json!({"loggedOut": false}));
        return Ok(());
    }
    if !yes && !confirm("Log out and delete the stored tokens? [y/N] ")? {
        ctx.out("Cancelled.", json!({"loggedOut": false}));
        return Ok(());
    }
    let tokens: Vec<String> = ctx
        .config
        .user_token
        .iter()
        .cloned()
        .chain(ctx.config.teams.values().cloned())
        .collect();
    for t in tokens {
        // Revoke on the server too; a token that already expired is fine.
        let _ = ctx.call_with("POST", "/logout", None, Some(&t));
    }
    ctx.config = CliConfig {
        server: ctx.config.server.clone(),
        ..CliConfig::default()
    };
    ctx.config.save()?;
    ctx.out("Logged out.", json!({"loggedOut": true}));
    Ok(())
}

pub fn whoami(ctx: &Ctx) -> Result<()> {
    let me: Me = ctx.call_as("GET", "/me", None)?;
    let team = me
        .team_name
        .as_deref()
        .map(|t| format!(" in team {t}"))
        .unwrap_or_default();
    ctx.out(
        format!("{}{team} ({}) at {}", me.username, me.role_id, ctx.server),
        to_json(&me),
    );
    Ok(())
}

pub fn switch_team(ctx: &mut Ctx, name: &str) -> Result<()> {
    let user_id = ctx
        .config
        .user_id
        .clone()
        .ok_or_else(|| anyhow!("not logged in: run `botbox login` first"))?;
    let user_token = ctx
        .config
        .user_token
        .clone()
        .ok_or_else(|| anyhow!("not logged in: run `botbox login` first"))?;
    let teams: Vec<UserTeam> = ctx.call_with_as(
        "GET",
        &format!("/users/{user_id}/teams"),
        None,
        Some(&user_token),
    )?;
    let Some(team) = teams.into_iter().find(|t| t.name == name) else {
        bail!(
            "Invalid team name. Unable to switch to team: {name}\n\
             If you were invited to it just now, log out and log in again (`botbox logout`, `botbox login`)."
        );
    };
    let t: Token = ctx.call_with_as(
        "POST",
        "/tokens",
        Some(&json!({"type": "team", "teamId": team.id})),
        Some(&user_token),
    )?;
    ctx.config.teams.insert(name.to_owned(), t.id);
    ctx.config.current_team = Some(name.to_owned());
    ctx.config.save()?;
    ctx.out(
        format!("Switched to team: {name}"),
        json!({"team": name, "teamId": team.id, "role": t.role_id}),
    );
    Ok(())
}

pub fn switch_user(ctx: &mut Ctx) -> Result<()> {
    ctx.config.current_team = None;
    ctx.config.save()?;
    let user = ctx.config.username.clone().unwrap_or_default();
    ctx.out(format!("Switched to user: {user}"), json!({"user": user}));
    Ok(())
}

fn prompt(label: &str) -> Result<String> {
    use std::io::Write;
    eprint!("{label}");
    std::io::stderr().flush().ok();
    read_line(label)
}

/// One line of stdin, without its line end; `label` names what was asked for.
fn read_line(label: &str) -> Result<String> {
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line)? == 0 {
        bail!("no input for {}", label.trim_end_matches([':', ' ']));
    }
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

/// Reads a secret after `label`: from the terminal with echo off when there is one, else a
/// line of stdin without a prompt (scripts pipe it in). Nothing typed is shown.
pub fn prompt_secret(label: &str) -> Result<String> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return rpassword::prompt_password(label)
            .with_context(|| format!("reading {}", label.trim_end_matches([':', ' '])));
    }
    read_line(label)
}

fn confirm(label: &str) -> Result<bool> {
    Ok(matches!(prompt(label)?.trim(), "y" | "Y" | "yes"))
}

// ---------------------------------------------------------------------------------------------
// Bots

const SKELETON_BOT: &str = "schema: kata.ai/schema/kata-ml/1.0
name: NAME
desc: A new bot. Edit flows/hello.yml, then `botbox test` and `botbox push`.
flows:
  hello: $include(flows/hello.yml)
";

const SKELETON_FLOW: &str = "# Greets on \"hi\"; anything else gets an apology.
fallback: true
intents:
  greeting:
    initial: true
    condition: \"content == 'hi'\"
  other:
    fallback: true
states:
  init:
    initial: true
    transitions:
      greet:
        condition: \"intent == 'greeting'\"
      sorry:
        fallback: true
  greet:
    end: true
    action:
      name: text
      options: {text: \"Hello! I am NAME.\"}
  sorry:
    end: true
    action:
      name: text
      options: {text: \"Sorry, I only understand hi.\"}
";

const SKELETON_TEST: &str = "tests:
  - name: greets
    steps:
      - send: hi
        expect: [\"Hello! I am NAME.\"]
  - name: anything else gets an apology
    steps:
      - send: what?
        expect: [\"Sorry, I only understand hi.\"]
";

/// Creates the bot folder `name`, bound to no project yet: its first push creates the
/// project (for `team` when given) and records its id in the folder's `.botbox.json`.
pub fn init(ctx: &Ctx, name: &str, team: Option<&str>) -> Result<()> {
    if !name_chars_ok(name) {
        bail!("bot name: letters, digits, '.', '_' or '-' (got {name:?})");
    }
    let dir = Path::new(name);
    if dir.exists() {
        bail!("{name} already exists; pick another name or remove it");
    }
    std::fs::create_dir_all(dir.join("flows"))?;
    std::fs::create_dir_all(dir.join("tests"))?;
    std::fs::write(dir.join("bot.yml"), SKELETON_BOT.replace("NAME", name))?;
    std::fs::write(
        dir.join("flows/hello.yml"),
        SKELETON_FLOW.replace("NAME", name),
    )?;
    std::fs::write(
        dir.join("tests/hello.yml"),
        SKELETON_TEST.replace("NAME", name),
    )?;
    project::Binding {
        team: team.map(str::to_owned),
        ..Default::default()
    }
    .write(dir)?;
    ctx.out(
        format!("Created {name}/ (bot.yml, flows/hello.yml, tests/hello.yml, {}). Next: cd {name} && botbox test", project::BINDING_FILE),
        json!({"created": name}),
    );
    Ok(())
}

/// Loads and validates the bot in `dir`, printing every problem with its file and line.
pub fn load_valid(dir: &Path) -> Result<(bot::LoadedBot, runtime_core::Compiled)> {
    let path = ["bot.yml", "bot.yaml", "bot.json"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.exists())
        .ok_or_else(|| {
            anyhow!(
                "no bot.yml in {}: run this in a bot folder (`botbox init <name>` makes one)",
                dir.display()
            )
        })?;
    let loaded = bot::load(&path).map_err(|e| anyhow!(e))?;
    match runtime_core::compile(&loaded.doc) {
        Ok(c) => Ok((loaded, c)),
        Err(rejected) => {
            let lines: Vec<String> = rejected.problems.iter().map(|p| loaded.locate(p)).collect();
            let n = rejected.errors().count();
            bail!(
                "the bot is not valid: {}\n{}",
                plural(n, "error"),
                lines.join("\n")
            )
        }
    }
}

/// The bot files of a folder, when it holds a valid bot: run-time errors the server reports
/// are placed in them ([`bot::LoadedBot::place_runtime`]), as last pushed.
pub(crate) struct LocalFiles(Option<bot::LoadedBot>);

impl LocalFiles {
    pub(crate) fn of(dir: &Path) -> LocalFiles {
        LocalFiles(load_valid(dir).ok().map(|(loaded, _)| loaded))
    }

    /// `error` with its place in the folder's files in front, when it can be found there.
    pub(crate) fn place(&self, error: &str) -> String {
        match &self.0 {
            Some(l) => l.place_runtime(error),
            None => error.to_string(),
        }
    }
}

/// [`load_valid`], and the bot's JavaScript parsed as the server parses it at push (in a
/// sandbox started here only for a bot with JavaScript): a syntax error fails with its
/// file, line and column.
pub fn load_checked(dir: &Path) -> Result<(bot::LoadedBot, runtime_core::Compiled)> {
    let (loaded, compiled) = load_valid(dir)?;
    let refused = push_refusals(&loaded.doc);
    if !refused.is_empty() {
        bail!("a push would be refused:\n{}", refused.join("\n"));
    }
    if !compiled.js_sites.is_empty() {
        fail_on_js_errors(&loaded, &compiled, &local_sandbox(None)?)?;
    }
    Ok((loaded, compiled))
}

/// Whether `name` is made of what a bot's (and so its project's) name may hold: letters,
/// digits, `.`, `_` and `-`, at least one.
fn name_chars_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The largest bot a server accepts, in bytes of JSON.
pub const BOT_LIMIT: usize = 1 << 20;

/// What a server refuses at push that the bot's document already shows: its name, which
/// names its project (1 to 64 letters, digits, `.`, `_` or `-`), and its size past
/// [`BOT_LIMIT`]. Checked by `validate` and before a push creates anything.
pub fn push_refusals(doc: &Json) -> Vec<String> {
    let mut out = vec![];
    let name = doc.get("name").and_then(Json::as_str).unwrap_or("");
    if !name_chars_ok(name) || name.len() > 64 {
        out.push(format!(
            "name: a project is named after its bot: 1 to 64 letters, digits, '.', '_' or '-' (got {name:?})"
        ));
    }
    let mut pushed = doc.clone();
    if let Some(o) = pushed.as_object_mut() {
        o.remove("tests");
    }
    let size = serde_json::to_string(&pushed).map_or(0, |t| t.len());
    if size > BOT_LIMIT {
        out.push(format!(
            "the bot is {size} bytes of JSON; a server accepts at most {BOT_LIMIT}"
        ));
    }
    out
}

/// Fails with every JavaScript syntax error of the bot, located in its files.
pub fn fail_on_js_errors(
    loaded: &bot::LoadedBot,
    compiled: &runtime_core::Compiled,
    sandbox: &botbox_sandbox::Sandbox,
) -> Result<()> {
    let lines = js_errors(loaded, compiled, sandbox)?;
    if lines.is_empty() {
        return Ok(());
    }
    bail!(
        "the bot is not valid: {}\n{}",
        plural(lines.len(), "error"),
        lines.join("\n")
    )
}

/// The bot's JavaScript syntax errors, located in its files (none: empty).
pub fn js_errors(
    loaded: &bot::LoadedBot,
    compiled: &runtime_core::Compiled,
    sandbox: &botbox_sandbox::Sandbox,
) -> Result<Vec<String>> {
    let sites = &compiled.js_sites;
    let problems = botbox_sandbox::block_on(sandbox.check_js("local", sites))
        .map_err(|e| anyhow!("checking the bot's JavaScript: {e}"))?;
    Ok(problems
        .iter()
        .filter_map(|p| Some(loaded.locate_js(sites.get(p.site)?, p)))
        .collect())
}

/// A sandbox for this machine's own runs (`botbox test`, JavaScript checks); its compiled
/// guest is cached under `cache_dir` (default: `$BOTBOX_CACHE`, else the CLI's home).
pub fn local_sandbox(cache_dir: Option<PathBuf>) -> Result<botbox_sandbox::Sandbox> {
    let cache_dir = cache_dir
        .or_else(|| std::env::var_os("BOTBOX_CACHE").map(PathBuf::from))
        .unwrap_or_else(|| home().join("cache"));
    botbox_sandbox::Sandbox::new(botbox_sandbox::SandboxConfig {
        cache_dir,
        slots: 4,
        warm_per_revision: 1,
        ..Default::default()
    })
}

pub fn push(ctx: &Ctx, dir: &Path) -> Result<()> {
    let (project, r, text) = push_revision(ctx, dir)?;
    ctx.out(
        text,
        json!({"project": project.id, "revision": r.revision, "version": r.version}),
    );
    Ok(())
}

/// Pushes the folder's bot as a new revision of its project: the project, the revision,
/// and the sentence that says so.
pub fn push_revision(ctx: &Ctx, dir: &Path) -> Result<(Project, RevisionPushed, String)> {
    let (loaded, compiled) = load_checked(dir)?;
    for w in &compiled.warnings {
        eprintln!("{}", loaded.locate(w));
    }
    let name = compiled.bot.name.clone();
    if !ctx.json {
        eprintln!("pushing {name} to {} …", ctx.server);
    }
    let project = project::resolve(ctx, Some(dir), &name, true)?;
    let pid = project.id.as_str();
    let mut doc = loaded.doc.clone();
    if let Some(o) = doc.as_object_mut() {
        o.remove("tests");
    }
    let r: RevisionPushed = ctx.call_as(
        "POST",
        &format!("/projects/{pid}/bot/revisions"),
        Some(&doc),
    )?;
    let text = format!(
        "Pushed {name} version {} as revision {} to project {} ({} warning(s))",
        r.version,
        r.revision,
        project::describe(&project),
        compiled.warnings.len()
    );
    Ok((project, r, text))
}

/// The next version after `latest` for a `major`, `minor` or `patch` bump.
pub fn bump(latest: Option<&str>, part: &str) -> String {
    let (a, b, c) = latest
        .and_then(|v| {
            let mut it = v.split('.').map(|p| p.parse::<u64>().ok());
            Some((it.next()??, it.next()??, it.next()??))
        })
        .unwrap_or((0, 0, 0));
    match part {
        "major" => format!("{}.0.0", a + 1),
        "minor" => format!("{a}.{}.0", b + 1),
        _ => format!("{a}.{b}.{}", c + 1),
    }
}

/// How `deploy` checks a revision first: replayed against the environment's latest
/// conversations (`replay`), refused when any differs unless `force`.
#[derive(Debug, Clone, Default)]
pub struct DeployCheck {
    pub replay: bool,
    pub force: bool,
    /// The CMS revision to pin: a revision id, `latest`, or `current` (default: the one the
    /// environment runs now, so a bot fix never moves content).
    pub cms: Option<String>,
}

/// `botbox deploy`: a new deployment version of the latest revision, and the environment
/// moved to it (created when missing), or with `canary` the version run beside the
/// environment's for that share of its users.
pub fn deploy(
    ctx: &Ctx,
    dir: &Path,
    part: &str,
    (env_name, canary): (&str, Option<u8>),
    check: DeployCheck,
) -> Result<()> {
    let (_, compiled) = load_valid(dir)?;
    let project = project::resolve(ctx, Some(dir), &compiled.bot.name, false)?;
    let pid = project.id.clone();
    let rev = project.bot_latest_revision.clone().ok_or_else(|| {
        anyhow!(
            "project {} has no revision yet: run `botbox push` first",
            compiled.bot.name
        )
    })?;
    let env = find_env(ctx, &pid, env_name)?;
    if canary.is_some() && env.is_none() {
        bail!(
            "environment {env_name} of project {} does not exist: a canary runs beside an environment's deployment; deploy without --canary first",
            project::describe(&project)
        );
    }
    if check.replay {
        replay_before_deploy(ctx, &project, (env_name, env.is_some()), &rev, check.force)?;
    }
    let latest: Option<Deployment> = ctx
        .call_as("GET", &format!("/projects/{pid}/deployment"), None)
        .ok();
    let version = bump(latest.as_ref().map(|d| d.version.as_str()), part);
    let cms = cms_pin(ctx, &pid, env.as_ref(), check.cms.as_deref())?;
    let mut ask = json!({"version": version, "botRevision": rev, "modules": null});
    if let Some(c) = &cms {
        ask["cmsRevision"] = json!(c);
    }
    let made: Deployment = ctx.call_as(
        "POST",
        &format!("/projects/{pid}/deployment/versions"),
        Some(&ask),
    )?;
    let pinned = format!(
        "bot revision {rev}, CMS revision {}",
        made.cms_revision.as_deref().unwrap_or("none")
    );
    let (env, text) = match (env, canary) {
        (Some(e), Some(share)) => {
            let e: Environment = ctx.call_as(
                "PUT",
                &format!("/projects/{pid}/environments/{}/canary", e.id),
                Some(&json!({"depVersion": version, "share": share})),
            )?;
            let lines = e
                .canary
                .as_ref()
                .map(canary::canary_lines)
                .unwrap_or_default();
            let text = format!(
                "Deployed {} {version} (revision {rev}) as a canary for {share} % of environment {env_name}'s users, project {}\n{}",
                compiled.bot.name,
                project::describe(&project),
                lines.join("\n")
            );
            (to_json(&e), text)
        }
        (Some(e), None) => {
            let e = ctx.call(
                "PUT",
                &format!("/projects/{pid}/environments/{}", e.id),
                Some(&json!({"depVersion": version})),
            )?;
            (e, String::new())
        }
        (None, _) => {
            let e = ctx.call(
                "POST",
                &format!("/projects/{pid}/environments"),
                Some(&json!({"depId": pid, "depVersion": version, "name": env_name})),
            )?;
            (e, String::new())
        }
    };
    let text = if text.is_empty() {
        format!(
            "Deployed {} {version} (revision {rev}) to environment {env_name} of project {}",
            compiled.bot.name,
            project::describe(&project)
        )
    } else {
        text
    };
    ctx.out(
        format!("{text}\npinned: {pinned}"),
        json!({"project": pid, "version": version, "revision": rev, "cmsRevision": made.cms_revision,
               "environment": env, "canary": canary}),
    );
    Ok(())
}

/// The CMS revision a new deployment pins for `--cms` (`None`: the server's default, the
/// project's latest): `current` (or nothing) keeps the one the environment runs now.
fn cms_pin(
    ctx: &Ctx,
    pid: &str,
    env: Option<&Environment>,
    asked: Option<&str>,
) -> Result<Option<String>> {
    match asked.unwrap_or("current") {
        "latest" => Ok(None),
        "current" => {
            let Some(e) = env else { return Ok(None) };
            let d: Deployment = ctx.call_as(
                "GET",
                &format!(
                    "/projects/{pid}/deployment/versions/{}",
                    enc(&e.deployment_version)
                ),
                None,
            )?;
            Ok(d.cms_revision)
        }
        rev => Ok(Some(rev.to_owned())),
    }
}

/// `deploy --replay`: the revision replayed against the environment's latest 100
/// conversations; an error when any differs or failed, unless `force` (then a warning).
fn replay_before_deploy(
    ctx: &Ctx,
    project: &Project,
    (env_name, exists): (&str, bool),
    rev: &str,
    force: bool,
) -> Result<()> {
    if !exists {
        eprintln!("environment {env_name} does not exist yet: nothing to replay");
        return Ok(());
    }
    let r = learning::run_replay(ctx, project, env_name, rev, 100)?;
    eprintln!("{}", learning::replay_text(project, &r));
    match learning::gate(&r) {
        Ok(()) => Ok(()),
        Err(e) if force => {
            eprintln!("deploying anyway (--force): {e}");
            Ok(())
        }
        Err(e) => Err(e.context("not deployed (deploy --force deploys anyway)")),
    }
}

/// The bot's errors (every kind of step: channels, console, agent runs, Case tasks), oldest
/// first, since `since` ago (or all kept), of one environment or all; with `follow`, new
/// ones as they come (polled every 2 s) until interrupted.
pub fn errors(
    ctx: &Ctx,
    dir: &Path,
    env: Option<&str>,
    since: Option<std::time::Duration>,
    follow: bool,
) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    // The folder's own files, to place a method's errors in them.
    let local = LocalFiles::of(dir);
    let env_id = match env {
        Some(name) => Some(
            find_env(ctx, &pid, name)?
                .ok_or_else(|| anyhow!("no environment {name} (`botbox env list`)"))?
                .id,
        ),
        None => None,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut start = since.map_or(0, |s| now - s.as_millis() as i64);
    loop {
        // Newest first, a page at a time: read until the start, then print oldest first.
        let mut found: Vec<Json> = Vec::new();
        for page in 1.. {
            let mut path = format!("/projects/{pid}/errors?limit=100&page={page}&start={start}");
            if let Some(e) = &env_id {
                path.push_str(&format!("&environmentId={e}"));
            }
            let got = ctx.call("GET", &path, None)?;
            let data = got["data"].as_array().cloned().unwrap_or_default();
            let n = data.len();
            found.extend(data);
            if n < 100 {
                break;
            }
        }
        found.reverse();
        for e in &found {
            let at = e["timestamp"].as_i64().unwrap_or(0);
            start = start.max(at + 1);
            if ctx.json {
                println!("{e}");
            } else {
                println!(
                    "{}  {}/{}  [{}]  {}",
                    time_text(at),
                    e["errorGroup"].as_str().unwrap_or(""),
                    e["errorCode"].as_str().unwrap_or(""),
                    e["channelId"].as_str().unwrap_or(""),
                    local.place(e["errorMessage"].as_str().unwrap_or(""))
                );
            }
        }
        if !follow {
            if found.is_empty() && !ctx.json {
                eprintln!("no errors");
            }
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// An environment's conversations as a person reads them, oldest first: one line per
/// message, `>` from the user, `<` from the bot (with its flow and intent), of one user or
/// all, since `since` ago (or all kept).
pub fn transcript(
    ctx: &Ctx,
    dir: &Path,
    env: &str,
    user: Option<&str>,
    since: Option<std::time::Duration>,
) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut after = since.map_or(-1, |s| now - s.as_millis() as i64);
    let mut shown = 0;
    loop {
        let mut path = format!(
            "/projects/{pid}/transcripts?environment={}&after={after}&limit=500",
            enc(env)
        );
        if let Some(u) = user {
            path.push_str(&format!("&user={}", enc(u)));
        }
        let page = ctx.call("GET", &path, None)?;
        for line in page["data"].as_array().into_iter().flatten() {
            shown += 1;
            if ctx.json {
                println!("{line}");
            } else {
                println!("{}", transcript_line(line));
            }
        }
        match page["nextAfter"].as_i64() {
            Some(a) => after = a,
            None => break,
        }
    }
    if shown == 0 && !ctx.json {
        eprintln!("no messages");
    }
    Ok(())
}

/// `s` for a URL's path segment or query value.
pub(crate) fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `time  user  > text` for a message in, `time  user  < text  (flow/intent)` out; a
/// template as its kind and the titles or buttons a person would see.
fn transcript_line(l: &Json) -> String {
    let m = &l["message"];
    let s = |v: &Json| v.as_str().unwrap_or("").to_owned();
    let body = match m["type"].as_str().unwrap_or("") {
        "text" => s(&m["content"]),
        "command" => format!("[command {}]", s(&m["content"])),
        _ => {
            let p = &m["payload"];
            match p["template_type"].as_str() {
                Some(t) => {
                    let items = p["items"].as_array();
                    let parts: Vec<String> = match items {
                        Some(items) => items
                            .iter()
                            .map(|i| s(&i["title"]))
                            .filter(|t| !t.is_empty())
                            .collect(),
                        None => p["actions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(|a| s(&a["label"]))
                            .collect(),
                    };
                    let text = p["items"]["text"]
                        .as_str()
                        .or(p["text"].as_str())
                        .map(|t| format!("{t} "))
                        .unwrap_or_default();
                    format!("[{t}] {text}{}", parts.join(" | "))
                }
                None => format!("[{}] {}", s(&m["type"]), p),
            }
        }
    };
    let (arrow, tail) = if l["direction"] == "in" {
        (">", String::new())
    } else {
        (
            "<",
            format!(
                "  ({}/{})",
                l["flow"].as_str().unwrap_or("-"),
                l["intent"].as_str().unwrap_or("-")
            ),
        )
    };
    format!(
        "{}  {}  {arrow} {body}{tail}",
        time_text(l["timestamp"].as_i64().unwrap_or(0)),
        s(&l["userId"])
    )
}

/// Writes a revision of the project `name` (or `--project`) back to `out/bot.yml` (default:
/// a folder named like the project), bound to the project: the one deployed to `env`, or
/// `revision`, else the latest. An existing file is kept unless `force`.
pub fn pull(
    ctx: &Ctx,
    name: Option<&str>,
    env: Option<&str>,
    revision: Option<&str>,
    out: Option<&Path>,
    force: bool,
) -> Result<()> {
    if name.is_none() && ctx.project.is_none() {
        bail!("which project? `botbox pull <name>` or `botbox pull --project <id>`");
    }
    let project = project::resolve(ctx, None, name.unwrap_or_default(), false)?;
    let name = project.name.as_str();
    let default_out = PathBuf::from(name);
    let out = out.unwrap_or(&default_out);
    let pid = &project.id;
    let rev = match (env, revision) {
        (_, Some(r)) => r.to_owned(),
        (Some(e), None) => {
            let env = find_env(ctx, pid, e)?
                .ok_or_else(|| anyhow!("no environment {e} (`botbox env list`)"))?;
            let d: Deployment = ctx.call_as(
                "GET",
                &format!(
                    "/projects/{pid}/deployment/versions/{}",
                    env.deployment_version
                ),
                None,
            )?;
            d.bot_revision
        }
        (None, None) => project
            .bot_latest_revision
            .clone()
            .ok_or_else(|| anyhow!("project {name} has no revision yet"))?,
    };
    let mut doc = ctx.call("GET", &format!("/projects/{pid}/bot/revisions/{rev}"), None)?;
    if let Some(o) = doc.as_object_mut() {
        for k in ["id", "revision", "warnings"] {
            o.remove(k);
        }
    }
    let file = out.join("bot.yml");
    if file.exists() && !force {
        bail!(
            "{} exists: pull into another folder (--dir) or give --force to overwrite it",
            file.display()
        );
    }
    std::fs::create_dir_all(out)?;
    std::fs::write(&file, serde_yaml::to_string(&doc)?)?;
    // The folder is bound to the project it came from: later commands there act on it.
    project::Binding::default().bound_to(&project).write(out)?;
    ctx.out(
        format!(
            "wrote {} (revision {rev} of project {})",
            file.display(),
            project::describe(&project)
        ),
        json!({"file": file, "revision": rev, "project": project.id}),
    );
    Ok(())
}

/// A Unix time in ms as RFC 3339 (UTC, seconds).
fn time_text(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

fn find_env(ctx: &Ctx, pid: &str, name: &str) -> Result<Option<Environment>> {
    let envs: PageOf<Environment> = ctx.call_as(
        "GET",
        &format!("/projects/{pid}/environments?limit=100"),
        None,
    )?;
    Ok(envs
        .data
        .into_iter()
        .find(|e| e.name == name || e.slug == name))
}

/// The id and bot name of the project the bot in `dir` is bound to (see [`project`]).
/// The id and name of the project a command acts on: `--project`'s (no bot folder needed),
/// else the folder's bot's.
pub(crate) fn project_id_of(ctx: &Ctx, dir: &Path) -> Result<(String, String)> {
    let project = project::of_folder(ctx, dir)?;
    Ok((project.id, project.name))
}

/// `env list|create|update|delete`.
pub fn env_cmd(ctx: &Ctx, dir: &Path, action: EnvAction) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    match action {
        EnvAction::List => {
            let envs: PageOf<Environment> = ctx.call_as(
                "GET",
                &format!("/projects/{pid}/environments?limit=100"),
                None,
            )?;
            let lines: Vec<String> = envs
                .data
                .iter()
                .map(|e| format!("{}  {}  version {}", e.name, e.id, e.deployment_version))
                .collect();
            ctx.out(listing(lines, "No environments."), to_json(&envs));
        }
        EnvAction::Create { name, version } => {
            let version = version_or_latest(ctx, &pid, version)?;
            let out = ctx.call(
                "POST",
                &format!("/projects/{pid}/environments"),
                Some(&json!({"depId": pid, "depVersion": version, "name": name})),
            )?;
            ctx.out(format!("Environment {name} runs version {version}"), out);
        }
        EnvAction::Update { name, version } => {
            let version = version_or_latest(ctx, &pid, version)?;
            let e = find_env(ctx, &pid, &name)?.ok_or_else(|| anyhow!("no environment {name}"))?;
            let out = ctx.call(
                "PUT",
                &format!("/projects/{pid}/environments/{}", e.id),
                Some(&json!({"depVersion": version})),
            )?;
            ctx.out(format!("Environment {name} runs version {version}"), out);
        }
        EnvAction::Delete { name } => {
            let e = find_env(ctx, &pid, &name)?.ok_or_else(|| anyhow!("no environment {name}"))?;
            let out = ctx.call(
                "DELETE",
                &format!("/projects/{pid}/environments/{}", e.id),
                None,
            )?;
            ctx.out(
                format!("Environment {name} deleted (with its channels)"),
                out,
            );
        }
    }
    Ok(())
}

/// The version given, else the project's latest deployment's.
fn version_or_latest(ctx: &Ctx, pid: &str, version: Option<String>) -> Result<String> {
    match version {
        Some(v) => Ok(v),
        None => Ok(ctx
            .call_as::<Deployment>("GET", &format!("/projects/{pid}/deployment"), None)?
            .version),
    }
}

/// A list's lines, or `empty` when there are none.
fn listing(lines: Vec<String>, empty: &str) -> String {
    if lines.is_empty() {
        empty.into()
    } else {
        lines.join("\n")
    }
}

/// `channel list|create|update|delete` on the channels of environment `env_name`.
pub fn channel_cmd(ctx: &Ctx, dir: &Path, env_name: &str, action: ChannelAction) -> Result<()> {
    let (pid, _) = project_id_of(ctx, dir)?;
    let env = find_env(ctx, &pid, env_name)?.ok_or_else(|| {
        anyhow!("no environment {env_name}: `botbox deploy --env {env_name}` makes it")
    })?;
    let base = format!("/projects/{pid}/environments/{}/channels", env.id);
    let list =
        || -> Result<PageOf<Channel>> { ctx.call_as("GET", &format!("{base}?limit=100"), None) };
    let find = |name: &str| -> Result<Channel> {
        list()?
            .data
            .into_iter()
            .find(|c| c.name == name)
            .ok_or_else(|| anyhow!("no channel {name} in {env_name}"))
    };
    match action {
        ChannelAction::List => {
            let list = list()?;
            let lines: Vec<String> = list
                .data
                .iter()
                .map(|c| format!("{}  {}  {}", c.name, c.kind, c.webhook))
                .collect();
            ctx.out(listing(lines, "No channels."), to_json(&list));
        }
        ChannelAction::Create { name, settings } => {
            let kind = settings.kind.as_deref().unwrap_or("generic");
            let mut body = json!({"name": name, "type": kind, "options": options(&settings)?});
            if let Some(u) = &settings.url {
                body["url"] = json!(u);
            }
            let c: Channel = ctx.call_as("POST", &base, Some(&body))?;
            ctx.out(
                format!("Channel {} created; webhook: {}", c.name, c.webhook),
                to_json(&c),
            );
        }
        ChannelAction::Update { name, settings } => {
            let c = find(&name)?;
            let mut body = json!({});
            if let Some(u) = &settings.url {
                body["url"] = json!(u);
            }
            if let Some(k) = &settings.kind {
                body["type"] = json!(k);
            }
            let opts = options(&settings)?;
            if !opts.is_empty() {
                let mut merged = c.options.clone();
                merged.extend(opts);
                body["options"] = Json::Object(merged);
            }
            let c: Channel = ctx.call_as("PUT", &format!("{base}/{}", c.id), Some(&body))?;
            ctx.out(
                format!("Channel {} updated; webhook: {}", c.name, c.webhook),
                to_json(&c),
            );
        }
        ChannelAction::Delete { name } => {
            let c = find(&name)?;
            let out = ctx.call("DELETE", &format!("{base}/{}", c.id), None)?;
            ctx.out(format!("Channel {} deleted", c.name), out);
        }
    }
    Ok(())
}

/// The `--option key=value` pairs as an object of strings.
fn options(settings: &ChannelSettings) -> Result<serde_json::Map<String, Json>> {
    let mut opts = serde_json::Map::new();
    for o in &settings.options {
        let (k, v) = o
            .split_once('=')
            .ok_or_else(|| anyhow!("--option takes key=value (got {o})"))?;
        opts.insert(k.to_owned(), json!(v));
    }
    Ok(opts)
}

// ---------------------------------------------------------------------------------------------
// Tests

/// The folder's `cms.yml` (what `botbox cms pull` writes) as JSON, if it has one.
fn local_cms(dir: &Path) -> Result<Option<Json>> {
    let file = dir.join(cms::CMS_FILE);
    if !file.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let yaml: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    Ok(Some(serde_json::to_value(yaml)?))
}

/// Runs the bot's conversation tests in the local sandbox (or on the server with `remote`).
/// Returns whether all passed.
///
/// `cache_dir`: where the local sandbox's compiled guest is kept (`--cache-dir` or
/// `BOTBOX_CACHE`, as for the server, so one compiled guest serves both); default
/// `$BOTBOX_HOME/cache`.
pub fn test(ctx: &Ctx, dir: &Path, remote: bool, cache_dir: Option<PathBuf>) -> Result<bool> {
    use runtime_core::testing::{Stepper, parse_suite, run_case};
    let (loaded, mut compiled) = load_valid(dir)?;
    // The folder's CMS content (`botbox cms pull` writes it), as a deployment would give it.
    if let Some(doc) = local_cms(dir)? {
        compiled.bot.cms = runtime_core::model::cms_view(doc);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("tests"))
        .with_context(|| format!("{}/tests", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")))
        .collect();
    files.sort();
    let mut ran_on = "the local sandbox".to_owned();
    let mut stepper: Box<dyn Stepper> = if remote {
        // The folder's bot, as a revision of its project: what the tests run on the server.
        let (p, pushed, text) = push_revision(ctx, dir)?;
        if !ctx.json {
            eprintln!("{text}");
        }
        ran_on = format!("the server, revision {}", pushed.revision);
        Box::new(RemoteStepper {
            ctx,
            pid: p.id,
            revision: pushed.revision,
        })
    } else {
        let cache_dir = cache_dir.unwrap_or_else(|| home().join("cache"));
        if !ctx.json {
            eprintln!(
                "starting the sandbox (the first run compiles it; later runs load it from {}) …",
                cache_dir.display()
            );
        }
        let sandbox = local_sandbox(Some(cache_dir))?;
        fail_on_js_errors(&loaded, &compiled, &sandbox)?;
        let revision = botbox_sandbox::Revision::new("local", &compiled.bot);
        Box::new(OwnedSandboxStepper {
            sandbox,
            revision,
            cms: compiled.bot.cms.clone(),
            made: 0,
        })
    };
    let (mut passed, mut failed) = (0, 0);
    let mut report = vec![];
    for f in &files {
        let text = std::fs::read_to_string(f)?;
        let suite = parse_suite(&text).map_err(|e| anyhow!("{}: {e}", f.display()))?;
        for case in &suite.tests {
            let r = run_case(&compiled.bot, case, stepper.as_mut());
            let file = f.strip_prefix(dir).unwrap_or(f).display().to_string();
            if r.failures.is_empty() {
                passed += 1;
                if !ctx.json {
                    println!("✓ {file}: {}", r.name);
                }
            } else {
                failed += 1;
                if !ctx.json {
                    println!("✗ {file}: {}", r.name);
                    for fl in &r.failures {
                        for line in fl.lines() {
                            println!("    {}", loaded.place_runtime(line));
                        }
                    }
                }
            }
            report.push(json!({"file": file, "name": r.name, "failures": r.failures}));
        }
    }
    ctx.out(
        format!("{passed} passed, {failed} failed (on {ran_on})"),
        json!({"passed": passed, "failed": failed, "cases": report, "ranOn": ran_on}),
    );
    Ok(failed == 0)
}

struct OwnedSandboxStepper {
    sandbox: botbox_sandbox::Sandbox,
    revision: botbox_sandbox::Revision,
    /// The CMS content `revision` holds: a test with content of its own gets a revision of
    /// its own (`made` numbers them).
    cms: Json,
    made: u32,
}

impl runtime_core::testing::Stepper for OwnedSandboxStepper {
    fn step(
        &mut self,
        input: runtime_core::testing::StepInput<'_>,
    ) -> runtime_core::testing::Stepped {
        if input.bot.cms != self.cms {
            self.made += 1;
            self.revision =
                botbox_sandbox::Revision::new(&format!("local~{}", self.made), input.bot);
            self.cms = input.bot.cms.clone();
        }
        botbox_sandbox::testing::SandboxStepper {
            sandbox: &self.sandbox,
            revision: self.revision.clone(),
        }
        .step(input)
    }
}

/// Steps through the server's converse endpoint (the latest pushed revision). HTTP mocks of
/// a test do not reach the server.
struct RemoteStepper<'a> {
    ctx: &'a Ctx,
    pid: String,
    revision: String,
}

impl runtime_core::testing::Stepper for RemoteStepper<'_> {
    fn step(
        &mut self,
        input: runtime_core::testing::StepInput<'_>,
    ) -> runtime_core::testing::Stepped {
        let body =
            json!({"message": input.msg, "session": input.session, "revision": self.revision});
        match self.ctx.call(
            "POST",
            &format!("/projects/{}/bot/converse", self.pid),
            Some(&body),
        ) {
            Ok(v) => serde_json::from_value(v)
                .map_err(|e| runtime_core::StepError::Aborted(e.to_string())),
            Err(e) => Err(runtime_core::StepError::Aborted(format!("{e:#}"))),
        }
    }
}

/// `key create --workspace <team>`: a workspace key of a team (or of the caller's own
/// projects, named by the caller's user name), printed once with how a CI job uses it.
fn workspace_key(ctx: &Ctx, workspace: &str, name: Option<&str>) -> Result<()> {
    let me = people::user_id(ctx)?;
    let own = ctx.config.username.as_deref() == Some(workspace);
    let team = if own {
        me
    } else {
        people::team_id(ctx, workspace)?
    };
    let body = json!({"name": name.unwrap_or("ci")});
    // As the person, whichever team the CLI acts for.
    let path = format!("/teams/{}/keys", enc(&team));
    let out: ApiKey = serde_json::from_value(people::as_user(ctx, "POST", &path, Some(&body))?)?;
    let key = out
        .key
        .as_deref()
        .ok_or_else(|| anyhow!("POST /teams/{team}/keys: the answer has no key"))?;
    let whose = if own {
        format!("your own projects ({workspace})")
    } else {
        format!("team {workspace}")
    };
    ctx.out(
        format!(
            "Workspace key {} for {whose} (shown once; keep it secret):\n{key}\n\
             A CI job uses it with the server's address:\n  \
             BOTBOX_SERVER={} BOTBOX_TOKEN={key} botbox push",
            out.name, ctx.server
        ),
        to_json(&out),
    );
    Ok(())
}

/// `key create|list|revoke`: agent keys (`sak_…`) of environment `env` of the bot in `dir`.
/// The key is printed once, by `create`.
pub fn key_cmd(ctx: &Ctx, dir: &Path, env: &str, action: KeyAction) -> Result<()> {
    if let KeyAction::Create {
        name,
        workspace: Some(ws),
    } = &action
    {
        return workspace_key(ctx, ws, name.as_deref());
    }
    let (pid, _) = project_id_of(ctx, dir)?;
    let e = find_env(ctx, &pid, env)?.ok_or_else(|| anyhow!("no environment {env}"))?;
    let base = format!("/projects/{pid}/environments/{}/keys", e.id);
    match action {
        KeyAction::Create { name, .. } => {
            let body = match name {
                Some(n) => json!({"name": n}),
                None => json!({}),
            };
            let out: ApiKey = ctx.call_as("POST", &base, Some(&body))?;
            let key = out
                .key
                .as_deref()
                .ok_or_else(|| anyhow!("POST {base}: the answer has no key"))?;
            ctx.out(
                format!("Agent key for {env} (shown once; keep it secret):\n{key}"),
                to_json(&out),
            );
        }
        KeyAction::List => {
            let keys: Vec<ApiKey> = ctx.call_as("GET", &base, None)?;
            let lines: Vec<String> = keys
                .iter()
                .map(|k| {
                    let revoked = match k.revoked_at {
                        Some(_) => "  (revoked)",
                        None => "",
                    };
                    format!("{}  {}  {}{revoked}", k.id, k.hint, k.name)
                })
                .collect();
            ctx.out(listing(lines, "No keys."), to_json(&keys));
        }
        KeyAction::Revoke { id } => {
            let out = ctx.call("DELETE", &format!("{base}/{id}"), None)?;
            ctx.out(format!("Key {id} revoked"), out);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn bumps() {
        assert_eq!(super::bump(None, "patch"), "0.0.1");
        assert_eq!(super::bump(Some("1.2.3"), "patch"), "1.2.4");
        assert_eq!(super::bump(Some("1.2.3"), "minor"), "1.3.0");
        assert_eq!(super::bump(Some("1.2.3"), "major"), "2.0.0");
    }
}
