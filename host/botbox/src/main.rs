//! `botbox`: the server and the command-line client (the wiring is the library's
//! [`botbox::server`]).

use anyhow::Result;
use botbox::server::{self, ServeConfig};
use botbox_api::ApiConfig;
use botbox_cli::commands;
use botbox_service::live::LiveConfig;
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "botbox",
    version,
    about = "Run untrusted chatbots safely, many tenants on one server."
)]
struct Cli {
    /// Print JSON instead of text (for scripts).
    #[arg(long, global = true)]
    json: bool,
    /// The botbox server (default: the one of the last login, else http://127.0.0.1:8080).
    #[arg(long, global = true, env = "BOTBOX_SERVER")]
    server: Option<String>,
    /// A PEM file of certificate authorities to trust for an https server (beside the
    /// built-in ones): a private authority's. Without it, SSL_CERT_FILE when set.
    #[arg(long, global = true, env = "BOTBOX_CA_CERT")]
    ca_cert: Option<PathBuf>,
    /// The project to act on, by id, whatever the folder is bound to (an administrator's
    /// only way to act on another tenant's project).
    #[arg(
        long = "project",
        id = "project_id",
        global = true,
        env = "BOTBOX_PROJECT"
    )]
    project: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct BotDir {
    /// The bot folder.
    #[arg(long, default_value = ".", global = true)]
    dir: PathBuf,
}

#[derive(clap::Args)]
struct DeployArgs {
    #[command(flatten)]
    dir: BotDir,
    #[arg(long, conflicts_with_all = ["minor", "patch"])]
    major: bool,
    #[arg(long, conflicts_with = "patch")]
    minor: bool,
    #[arg(long)]
    patch: bool,
    /// The environment (created when missing).
    #[arg(long, default_value = "production")]
    env: String,
    /// Run the new version for this share of the environment's users (1-99) as a canary
    /// beside the version it runs now, instead of moving the environment.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=99))]
    canary: Option<u8>,
    /// Replay the environment's latest 100 conversations on the revision first, and refuse
    /// to deploy when any of them differs or fails.
    #[arg(long)]
    replay: bool,
    /// With --replay: deploy even when conversations differ.
    #[arg(long, requires = "replay")]
    force: bool,
    /// The CMS revision the deployment pins: a revision id, `latest`, or `current` (the
    /// one the environment runs now; the default, so a bot fix never moves content).
    #[arg(long)]
    cms: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the server (SQLite in the data folder unless DATABASE_URL is postgres://).
    Serve(Box<ServeArgs>),
    /// Validates a bot file and prints every problem with its path and position.
    Validate {
        /// bot.yml or bot.json
        file: PathBuf,
    },
    /// Writes a consistent copy of the SQLite database and the server key to one archive,
    /// while the server keeps serving (PostgreSQL: use pg_dump, see docs/operations.md).
    Backup {
        /// The archive to write (must not exist).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Rebuilds the analytics rollups from the transcript lines and bot errors still stored
    /// (older hours, already pruned, keep their counts); safe while the server runs.
    RebuildRollups {
        #[command(flatten)]
        storage: StorageArgs,
    },
    /// Puts a `botbox backup` archive back into a data folder that holds no database.
    Restore {
        /// The archive.
        file: PathBuf,
        /// The data folder to restore into.
        #[arg(long, env = "BOTBOX_DATA", default_value = "data")]
        data: PathBuf,
    },
    /// Manages accounts: through the server's API (administrators), or with `user add
    /// --data DIR` straight in an existing database on the server machine.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Changes your password (asked for with echo off: the current one, then the new one
    /// twice).
    Passwd,
    /// Teams: create, invite, remove, list (with your own account's token).
    Team {
        #[command(subcommand)]
        command: TeamCommand,
    },
    /// Logs in to a botbox server and keeps the token (or a workspace key, `-t sk-ws-…`).
    Login {
        #[arg(short, long)]
        username: Option<String>,
        #[arg(short, long, env = "BOTBOX_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// Log in with an existing token instead.
        #[arg(short, long)]
        token: Option<String>,
    },
    /// Forgets (and revokes) the stored tokens.
    Logout {
        /// Do not ask for confirmation.
        #[arg(short, long)]
        yes: bool,
    },
    /// Shows who the CLI acts as.
    Whoami,
    /// Acts for a team from now on (a team-bound token).
    SwitchTeam { team: String },
    /// `switch team <name>` or `switch user`.
    Switch {
        /// team or user
        kind: String,
        name: Option<String>,
    },
    /// Creates a bot skeleton that passes its tests.
    Init {
        name: String,
        /// Create the project for this team at the first push (default: the owner the CLI
        /// acts for).
        #[arg(long)]
        team: Option<String>,
    },
    /// Validates the bot locally and creates a revision on the server.
    Push {
        #[command(flatten)]
        dir: BotDir,
    },
    /// Creates the next deployment version of the latest revision and points an environment at it.
    Deploy(DeployArgs),
    /// Projects across folders: `project list [--all]` with their owners and ids.
    Project {
        #[command(subcommand)]
        action: commands::ProjectAction,
    },
    /// Binds the bot folder to a project by id (the only command that replaces a binding).
    Bind {
        project_id: String,
        #[command(flatten)]
        dir: BotDir,
    },
    /// An environment's canary: the second deployment version it runs for a share of users.
    Canary {
        #[command(subcommand)]
        action: commands::CanaryAction,
        /// The environment whose canary this is.
        #[arg(long, default_value = "production", global = true)]
        env: String,
        #[command(flatten)]
        dir: BotDir,
    },
    /// What an environment's users said that the bot did not understand (matched no intent
    /// or a fallback intent), grouped by text, most frequent first.
    Misunderstood(botbox_cli::commands::MisunderstoodArgs),
    /// Replays an environment's latest recorded conversations on a revision (the folder's
    /// bot, pushed first, or --revision) and shows where the answers differ; exits non-zero
    /// when any conversation differs or fails.
    Replay(botbox_cli::commands::ReplayArgs),
    /// The audit trail: who changed what, newest first (the project's with --project or in a
    /// bot folder; everything you may see with --all).
    Audit(botbox_cli::commands::AuditArgs),
    /// The project's bot revisions and deployment versions, with who made each and where
    /// each version runs.
    History {
        #[command(flatten)]
        dir: BotDir,
        /// How many of each (newest first).
        #[arg(long, default_value_t = 10)]
        limit: u32,
    },
    /// The environments of the bot's project.
    Env {
        #[command(subcommand)]
        action: commands::EnvAction,
        #[command(flatten)]
        dir: BotDir,
    },
    /// Agent API keys (sak_…) of an environment.
    Key {
        #[command(subcommand)]
        action: commands::KeyAction,
        /// The environment whose keys these are.
        #[arg(long, default_value = "production", global = true)]
        env: String,
        #[command(flatten)]
        dir: BotDir,
    },
    /// The channels of an environment.
    Channel {
        #[command(subcommand)]
        action: commands::ChannelAction,
        /// The environment whose channels these are.
        #[arg(long, default_value = "production", global = true)]
        env: String,
        #[command(flatten)]
        dir: BotDir,
    },
    /// The Cases of the bot's project.
    Case {
        #[command(subcommand)]
        action: commands::CaseAction,
        /// The environment the Case runs on.
        #[arg(long, default_value = "production", global = true)]
        env: String,
        #[command(flatten)]
        dir: BotDir,
    },
    /// The tasks of the project's Cases.
    Task {
        #[command(subcommand)]
        action: commands::TaskAction,
        #[command(flatten)]
        dir: BotDir,
    },
    /// The CMS of the bot's project as `cms.yml`.
    Cms {
        #[command(subcommand)]
        action: commands::CmsAction,
        #[command(flatten)]
        dir: BotDir,
    },
    /// The NL Studio NLUs of the bot's project: create one, train it, predict.
    Nlu {
        #[command(subcommand)]
        action: commands::NluAction,
        #[command(flatten)]
        dir: BotDir,
    },
    /// Talks to the bot: text lines, button({...}), command("x"), current(), clear(), exit.
    Console {
        #[command(flatten)]
        dir: BotDir,
        /// Run the environment's deployment (default: the latest revision).
        #[arg(long)]
        env: Option<String>,
        /// Show each response's flow and intent, and the state.
        #[arg(long)]
        debug: bool,
    },
    /// An environment's conversations, oldest first, as a person reads them.
    Transcript {
        #[command(flatten)]
        dir: BotDir,
        /// The environment (name or slug).
        #[arg(long, default_value = "production")]
        env: String,
        /// Only this user's messages.
        #[arg(long)]
        user: Option<String>,
        /// Only the last … (`1h`, `2d`, `30m`).
        #[arg(long, value_parser = humantime::parse_duration)]
        since: Option<std::time::Duration>,
    },
    /// Writes a project's bot back to files: `<dir>/bot.yml`.
    Pull {
        /// The project, by name among those of whoever the CLI acts for (or give
        /// `--project <id>`).
        name: Option<String>,
        /// The revision deployed to this environment (default: the latest revision).
        #[arg(long, conflicts_with = "revision")]
        env: Option<String>,
        /// This revision.
        #[arg(long)]
        revision: Option<String>,
        /// Where to write (default: a folder named like the project).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Overwrite an existing bot.yml.
        #[arg(long)]
        force: bool,
    },
    /// The bot's errors from every kind of step (channels, console, agent runs, Case tasks),
    /// oldest first.
    Errors {
        #[command(flatten)]
        dir: BotDir,
        /// Only this environment's.
        #[arg(long)]
        env: Option<String>,
        /// Only those of the last … (`1h`, `2d`, `30m`).
        #[arg(long, value_parser = humantime::parse_duration)]
        since: Option<std::time::Duration>,
        /// Keep printing new errors as they happen (Ctrl-C stops).
        #[arg(long, short)]
        follow: bool,
    },
    /// Runs the bot's conversation tests (tests/*.yml) in the local sandbox.
    Test {
        #[command(flatten)]
        dir: BotDir,
        /// Run them on the server (the latest pushed revision) instead.
        #[arg(long)]
        remote: bool,
        /// Where the precompiled sandbox guest is cached, as for `serve` (default:
        /// $BOTBOX_HOME/cache). Not used with --remote.
        #[arg(long, env = "BOTBOX_CACHE")]
        cache_dir: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct StorageArgs {
    /// Folder for the embedded SQLite database.
    #[arg(long, env = "BOTBOX_DATA", default_value = "data")]
    data: PathBuf,
    /// sqlite://… or postgres://…; SQLite in --data when absent.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, env = "BOTBOX_ADDR", default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    #[command(flatten)]
    storage: StorageArgs,
    /// Password of the first admin account (generated and printed once when absent).
    #[arg(long, env = "BOTBOX_ADMIN_PASSWORD", hide_env_values = true)]
    admin_password: Option<String>,
    /// Base URL the outside world reaches this server at (for channel webhooks).
    #[arg(long, env = "BOTBOX_PUBLIC_URL")]
    public_url: Option<String>,
    /// Agent API (/v1) chat requests (POST /v1/chat, steer, cancel, and every other /v1 POST)
    /// per key and minute; also the verified calls of each inbound hook (`POST /v1/hooks/{id}`)
    /// per minute, each of which creates a task. Default 60.
    #[arg(long, env = "BOTBOX_AGENT_CHAT_LIMIT", default_value_t = 60)]
    agent_chat_limit: u32,
    /// Agent API (/v1) reads (GETs) per key and minute.
    #[arg(long, env = "BOTBOX_AGENT_READ_LIMIT", default_value_t = 600)]
    agent_read_limit: u32,
    /// Project API requests per minute per user (per address without a token). A console
    /// page view costs at most 3, so people clicking never meet it; scripts do.
    #[arg(long, env = "BOTBOX_RATE_LIMIT", default_value_t = 100)]
    rate_limit: u32,
    /// Token lifetime in seconds.
    #[arg(long, env = "BOTBOX_TOKEN_TTL", default_value_t = 7 * 24 * 3600)]
    token_ttl: i64,
    /// Where the precompiled sandbox guest is cached (default: <data>/cache).
    #[arg(long, env = "BOTBOX_CACHE")]
    cache_dir: Option<PathBuf>,
    /// Destinations outbound calls (api actions, deliveries, provider reads) may reach
    /// although they are not public: address:port entries (127.0.0.1:9000, [::1]:9000; for
    /// URLs that name the address) and networks (10.0.0.0/8, also for names resolving into
    /// them), comma-separated. Default: none. Every tenant's bots and channels can reach
    /// what is listed.
    #[arg(
        long,
        env = "BOTBOX_EGRESS_ALLOW",
        value_name = "LIST",
        value_delimiter = ','
    )]
    egress_allow: Vec<botbox_egress::Allow>,
    /// Shorthand for --egress-allow 0.0.0.0/0,::/0: outbound calls may reach every address,
    /// loopback, private networks, cloud metadata and this server included (local
    /// development and tests only).
    #[arg(long, env = "BOTBOX_ALLOW_PRIVATE_EGRESS")]
    allow_private_egress: bool,
    /// First retry delay of a failed delivery, in milliseconds (doubles per attempt).
    #[arg(long, env = "BOTBOX_OUTBOX_BACKOFF_MS", default_value_t = 1000)]
    outbox_backoff_ms: u64,
    /// Time-out of one reply delivery, in milliseconds. A reply not sent by the process that
    /// stored it (it crashed) is sent by the outbox worker after twice this.
    #[arg(long, env = "BOTBOX_DELIVERY_TIMEOUT_MS", default_value_t = 5000)]
    delivery_timeout_ms: u64,
    /// Memory for loaded NL Studio models, in MiB (weighed by their stored size). Models
    /// not in it are read from storage and parsed again at their next use.
    #[arg(long, env = "BOTBOX_NLU_CACHE_MB", default_value_t = 256)]
    nlu_cache_mb: u64,
    /// NLU trainings that run at once (each takes a core while it runs; more wait, showing
    /// `training`).
    #[arg(long, env = "BOTBOX_NLU_TRAINING_SLOTS", default_value_t = 1)]
    nlu_training_slots: usize,
    /// The server key that webhook secrets and artifact URL signatures derive from (32+
    /// characters). Default: `secret.key` in the data folder, created on first start.
    /// Replicas on one PostgreSQL database must all be given the same key.
    #[arg(long, env = "BOTBOX_SECRET_KEY", hide_env_values = true)]
    secret_key: Option<String>,
    /// Divides the callback retry schedule (5 s, 5 min, 30 min, … 24 h) by this (tests).
    #[arg(long, env = "BOTBOX_CALLBACK_RETRY_SCALE", default_value_t = 1)]
    callback_retry_scale: u32,
    /// A running task's lease in seconds: a task whose worker died is taken over after it.
    #[arg(long, env = "BOTBOX_TASK_LEASE_S", default_value_t = 30)]
    task_lease_s: u64,
    /// Seconds a drain (after SIGTERM or SIGINT) may take: requests, agent runs, tasks and
    /// deliveries in flight finish first; past it the process exits with them unfinished,
    /// as a crash would (nothing stored is lost). A second signal exits at once.
    #[arg(long, env = "BOTBOX_SHUTDOWN_TIMEOUT", default_value_t = 30)]
    shutdown_timeout: u64,
    /// Serve `GET /metrics` (Prometheus) on this address of its own, without authentication
    /// (keep it private). Without it, `/metrics` is on the main address for an admin's token
    /// or --metrics-token.
    #[arg(long, env = "BOTBOX_METRICS_ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// A reverse proxy in front of the server (an address or a network, repeatable): for
    /// requests from it the client is the right-most other address of X-Forwarded-For, so
    /// rate limits and overload caps see real clients. Never trust a proxy clients can
    /// bypass. Default: none (X-Forwarded-For is ignored).
    #[arg(
        long = "trusted-proxy",
        env = "BOTBOX_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = proxy_net
    )]
    trusted_proxies: Vec<ipnet::IpNet>,
    /// A bearer token that may read `/metrics` on the main address (for Prometheus'
    /// `authorization` setting), besides admins' tokens.
    #[arg(long, env = "BOTBOX_METRICS_TOKEN", hide_env_values = true)]
    metrics_token: Option<String>,
    /// Log lines as `text` (for people) or `json` (one object per line, for collectors).
    #[arg(long, env = "BOTBOX_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Requests in flight in the whole server; past it, 503 with Retry-After.
    #[arg(long, env = "BOTBOX_MAX_IN_FLIGHT", default_value_t = 4096)]
    max_in_flight: usize,
    /// Requests in flight per source (a credential, a webhook's channel, else an address);
    /// past it that source gets 503 with Retry-After while others go on.
    #[arg(long, env = "BOTBOX_MAX_IN_FLIGHT_PER_SOURCE", default_value_t = 256)]
    max_in_flight_per_source: usize,
    /// A tenant's storage (transcripts, sessions, task artifacts, NLU models) in MiB past
    /// which its bot pushes are refused with 507 (0: no quota). Messages are never refused.
    #[arg(long, env = "BOTBOX_STORAGE_QUOTA_MB", default_value_t = 0)]
    storage_quota_mb: u64,
    /// How long transcript lines are kept: `90d`, `12h`, a bare number of days, or 0 for
    /// ever. Older lines are deleted every minute. An admin may set a project's own window.
    #[arg(long, alias = "transcript-retention-days", env = "BOTBOX_TRANSCRIPT_RETENTION",
        default_value = "90d", value_parser = parse_window)]
    transcript_retention: Window,
    /// Sessions not changed for this long are deleted (their user starts afresh), as for
    /// --transcript-retention; default 0: kept for ever.
    #[arg(long, env = "BOTBOX_SESSION_RETENTION", default_value = "0", value_parser = parse_window)]
    session_retention: Window,
    /// How long audit entries are kept, as for --transcript-retention (0: for ever).
    #[arg(long, env = "BOTBOX_AUDIT_RETENTION", default_value = "365d", value_parser = parse_window)]
    audit_retention: Window,
    /// Time between pruning passes (soak benchmarks shorten it).
    #[arg(long, env = "BOTBOX_PRUNE_EVERY", default_value = "60s", value_parser = humantime::parse_duration, hide = true)]
    prune_every: std::time::Duration,
    /// Every retention window divided by this (soak benchmarks).
    #[arg(long, default_value_t = 1, hide = true)]
    retention_scale: u32,
    /// Seconds for a request's answer to start (streams count until their headers); past
    /// it, 503.
    #[arg(long, env = "BOTBOX_REQUEST_TIMEOUT", default_value_t = 60)]
    request_timeout: u64,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Adds a user: on the server you are logged in to (administrators), or with --data
    /// (or --database-url) straight into that existing database.
    Add {
        username: String,
        /// The password (asked for when absent).
        #[arg(long, env = "BOTBOX_NEW_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// admin, developer or viewer.
        #[arg(long, default_value = "developer")]
        role: String,
        /// The server's data folder: write to its database instead of calling the API. The
        /// database must exist (start the server once first); none is ever created here.
        #[arg(long)]
        data: Option<PathBuf>,
        /// PostgreSQL instead of the data folder's SQLite (with the same meaning as --data).
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: Option<String>,
    },
    /// Sets another user's password (administrators); their sessions are signed out.
    ResetPassword {
        username: String,
        /// The new password (asked for when absent).
        #[arg(long, env = "BOTBOX_NEW_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Every account with its role and teams (administrators).
    List,
    /// Disables an account: it cannot log in and its tokens stop working.
    Disable { username: String },
    /// Enables a disabled account again.
    Enable { username: String },
}

#[derive(Subcommand)]
enum TeamCommand {
    /// Creates a team (you become its teamAdmin).
    Create { name: String },
    /// Adds a user to one of your teams, or changes their role.
    Invite {
        team: String,
        username: String,
        /// teamAdmin, developer or viewer.
        #[arg(long, default_value = "developer")]
        role: String,
    },
    /// Removes a user from one of your teams.
    Remove { team: String, username: String },
    /// Your teams and your role in each.
    List,
    /// A team's members and their roles.
    Members { team: String },
}

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    // The client's global options mean nothing to `serve`: its help leaves them out.
    // A subcommand's own argument of a global's name stops the global's propagation there.
    let command = Cli::command().mut_subcommand("serve", |serve| {
        serve
            .arg(
                clap::Arg::new("json")
                    .long("json")
                    .hide(true)
                    .action(clap::ArgAction::SetTrue),
            )
            .arg(clap::Arg::new("server").long("server").hide(true))
    });
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let json = cli.json;
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", error_text(&format!("{e:#}"), json));
            ExitCode::from(1)
        }
    }
}

/// A `--trusted-proxy`: a network (`10.0.0.0/8`) or one address (`127.0.0.1`).
fn proxy_net(s: &str) -> Result<ipnet::IpNet, String> {
    s.parse::<ipnet::IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{s:?} is not an address (127.0.0.1) or a network (10.0.0.0/8)"))
}

/// How a failed command reports itself: `error: <reason>` (the reason first; located lines,
/// such as a bot file's problems, follow on their own lines), or with `--json` one JSON
/// object `{"error": <reason>, "lines": [...]}`.
fn error_text(message: &str, json: bool) -> String {
    let mut lines = message.lines();
    let first = lines.next().unwrap_or("").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let rest: Vec<&str> = lines.map(str::trim_end).filter(|l| !l.is_empty()).collect();
    if json {
        return serde_json::json!({"error": first, "lines": rest}).to_string();
    }
    std::iter::once(format!("error: {first}"))
        .chain(rest.iter().map(|l| l.to_string()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// `botbox deploy`: the part of the version it bumps (major, minor, else patch), where, and
/// what it checks first.
fn deploy(ctx: &botbox_cli::Ctx, d: DeployArgs) -> Result<()> {
    let part = match (d.major, d.minor) {
        (true, _) => "major",
        (_, true) => "minor",
        _ => "patch",
    };
    let check = botbox_cli::DeployCheck {
        replay: d.replay,
        force: d.force,
        cms: d.cms,
    };
    botbox_cli::deploy(ctx, &d.dir.dir, part, (&d.env, d.canary), check)
}

/// Runs one command: the server side's own (serve, validate, backup, restore,
/// rebuild-rollups, user add --data) here, the client's through `botbox_cli` with a context made on first use.
fn run(cli: Cli) -> Result<ExitCode> {
    use botbox_cli as c;
    let ctx = || {
        let mut ctx = c::Ctx::new(cli.server.clone(), cli.json, cli.ca_cert.as_deref())?;
        ctx.project = cli.project.clone();
        anyhow::Ok(ctx)
    };
    let done = |r: Result<()>| r.map(|()| ExitCode::SUCCESS);
    match cli.command {
        Command::Serve(a) => serve(*a),
        Command::Validate { file } => validate(&file),
        Command::Backup { out, storage } => backup(&out, &storage),
        Command::Restore { file, data } => restore(&file, &data),
        Command::RebuildRollups { storage } => rebuild_rollups(&storage),
        Command::User { command } => user_cmd(command, &ctx),
        Command::Team { command } => done(team_cmd(&ctx()?, command)),
        Command::Passwd => done(c::people::passwd(&ctx()?)),
        Command::Login {
            username,
            password,
            token,
        } => done(c::login(&mut ctx()?, username, password, token)),
        Command::Logout { yes } => done(c::logout(&mut ctx()?, yes)),
        Command::Whoami => done(c::whoami(&ctx()?)),
        Command::SwitchTeam { team } => done(c::switch_team(&mut ctx()?, &team)),
        Command::Switch { kind, name } => done(switch(&mut ctx()?, &kind, name)),
        Command::Init { name, team } => done(c::init(&ctx()?, &name, team.as_deref())),
        Command::Push { dir } => done(c::push(&ctx()?, &dir.dir)),
        Command::Deploy(d) => done(deploy(&ctx()?, d)),
        Command::Misunderstood(a) => done(c::learning::misunderstood(&ctx()?, a)),
        Command::Replay(a) => done(c::learning::replay(&ctx()?, a)),
        Command::Project { action } => done(c::project::list(&ctx()?, action)),
        Command::Bind { project_id, dir } => done(c::project::bind(&ctx()?, &dir.dir, &project_id)),
        Command::Canary { action, env, dir } => {
            done(c::canary::canary_cmd(&ctx()?, &dir.dir, &env, action))
        }
        Command::Audit(a) => done(c::canary::audit(&ctx()?, a)),
        Command::History { dir, limit } => done(c::canary::history(&ctx()?, &dir.dir, limit)),
        Command::Env { action, dir } => done(c::env_cmd(&ctx()?, &dir.dir, action)),
        Command::Key { action, env, dir } => done(c::key_cmd(&ctx()?, &dir.dir, &env, action)),
        Command::Channel { action, env, dir } => {
            done(c::channel_cmd(&ctx()?, &dir.dir, &env, action))
        }
        Command::Case { action, env, dir } => {
            done(c::cases::case_cmd(&ctx()?, &dir.dir, &env, action))
        }
        Command::Task { action, dir } => done(c::cases::task_cmd(&ctx()?, &dir.dir, action)),
        Command::Cms { action, dir } => done(c::cms::cms_cmd(&ctx()?, &dir.dir, action)),
        Command::Nlu { action, dir } => done(c::nlu::nlu_cmd(&ctx()?, &dir.dir, action)),
        Command::Transcript {
            dir,
            env,
            user,
            since,
        } => done(c::transcript(
            &ctx()?,
            &dir.dir,
            &env,
            user.as_deref(),
            since,
        )),
        Command::Pull {
            name,
            env,
            revision,
            dir,
            force,
        } => done(c::pull(
            &ctx()?,
            name.as_deref(),
            env.as_deref(),
            revision.as_deref(),
            dir.as_deref(),
            force,
        )),
        Command::Errors {
            dir,
            env,
            since,
            follow,
        } => done(c::errors(&ctx()?, &dir.dir, env.as_deref(), since, follow)),
        Command::Console { dir, env, debug } => done(c::console::console(
            &ctx()?,
            &dir.dir,
            env.as_deref(),
            debug,
        )),
        Command::Test {
            dir,
            remote,
            cache_dir,
        } => Ok(match c::test(&ctx()?, &dir.dir, remote, cache_dir)? {
            true => ExitCode::SUCCESS,
            false => ExitCode::from(1),
        }),
    }
}

/// `switch team <name>` or `switch user`.
fn switch(ctx: &mut botbox_cli::Ctx, kind: &str, name: Option<String>) -> Result<()> {
    match (kind, name) {
        ("team", Some(n)) => botbox_cli::switch_team(ctx, &n),
        ("user", _) => botbox_cli::switch_user(ctx),
        _ => anyhow::bail!("usage: botbox switch team <name> | botbox switch user"),
    }
}

fn team_cmd(ctx: &botbox_cli::Ctx, command: TeamCommand) -> Result<()> {
    use botbox_cli::people;
    match command {
        TeamCommand::Create { name } => people::team_create(ctx, &name),
        TeamCommand::Invite {
            team,
            username,
            role,
        } => people::team_invite(ctx, &team, &username, &role),
        TeamCommand::Remove { team, username } => people::team_remove(ctx, &team, &username),
        TeamCommand::List => people::team_list(ctx),
        TeamCommand::Members { team } => people::team_members(ctx, &team),
    }
}

/// `botbox backup`: the SQLite database and the server key in one archive.
fn backup(out: &std::path::Path, storage: &StorageArgs) -> Result<ExitCode> {
    let taken = botbox::backup::backup(&storage.data, storage.database_url.as_deref(), out)?;
    println!(
        "wrote {} (database {} bytes{})",
        out.display(),
        taken.db_bytes,
        if taken.key {
            ", server key"
        } else {
            "; no secret.key in the data folder: keep the --secret-key you run with"
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `botbox rebuild-rollups`: the analytics rollups counted again from what is stored.
fn rebuild_rollups(storage: &StorageArgs) -> Result<ExitCode> {
    let hours = runtime()?.block_on(async {
        let db = botbox::server::open_db(&storage.data, storage.database_url.as_deref()).await?;
        anyhow::Ok(db.rebuild_rollups().await?)
    })?;
    println!("rebuilt {hours} environment-hours of analytics rollups");
    Ok(ExitCode::SUCCESS)
}

/// `botbox restore`: a backup archive into a data folder that holds no database.
fn restore(file: &std::path::Path, data: &std::path::Path) -> Result<ExitCode> {
    botbox::backup::restore(file, data)?;
    println!(
        "restored {} into {}; start it with `botbox serve --data {}`",
        file.display(),
        data.display(),
        data.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Logs to stderr, filtered by `BOTBOX_LOG` (default `info`), as JSON lines with `json`.
fn init_logs(format: &str) {
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BOTBOX_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in a file or a pipe that a
        // log collector reads.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if format == "json" {
        logs.json().init();
    } else {
        logs.init();
    }
}

/// `botbox serve`: logs, metrics, the configuration, and the server until it drains.
fn serve(a: ServeArgs) -> Result<ExitCode> {
    server::return_big_blocks_to_the_os();
    init_logs(&a.log_format);
    let metrics = server::install_metrics()?;
    let cfg = serve_config(a, &metrics);
    let rt = runtime()?;
    let served = rt.block_on(async {
        // Histograms are buffered per thread until an upkeep folds them in.
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                every.tick().await;
                metrics.run_upkeep();
            }
        });
        server::serve(cfg).await
    });
    // Threads still blocked (a step cut by the drain's time-out) are not waited for.
    rt.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// The live path's settings from `serve`'s flags.
fn live_config(a: &ServeArgs) -> LiveConfig {
    let mut live = LiveConfig::default();
    live.sandbox.cache_dir = a
        .cache_dir
        .clone()
        .unwrap_or_else(|| a.storage.data.join("cache"));
    if a.allow_private_egress {
        live.egress = botbox_egress::EgressConfig::allow_all();
    }
    live.egress.allow.extend(a.egress_allow.iter().cloned());
    live.outbox_backoff = std::time::Duration::from_millis(a.outbox_backoff_ms);
    live.delivery_timeout = std::time::Duration::from_millis(a.delivery_timeout_ms.max(1));
    live.retention.transcripts = a.transcript_retention.0;
    live.retention.idle_sessions = a.session_retention.0;
    live.retention.audit_log = a.audit_retention.0;
    live.retention.every = a.prune_every;
    live.retention = live.retention.scaled(a.retention_scale);
    live.storage_quota_bytes = (a.storage_quota_mb > 0)
        .then(|| i64::try_from(a.storage_quota_mb << 20).unwrap_or(i64::MAX));
    live.nlu = botbox_service::nlu::NluConfig {
        cache_bytes: a.nlu_cache_mb << 20,
        training_slots: a.nlu_training_slots.max(1),
    };
    live
}

/// The API's settings from `serve`'s flags; `/metrics` renders `metrics`.
fn api_config(a: &ServeArgs, metrics: &metrics_exporter_prometheus::PrometheusHandle) -> ApiConfig {
    let render = metrics.clone();
    ApiConfig {
        rate_limit_per_minute: a.rate_limit,
        token_ttl_secs: a.token_ttl,
        agent_chat_per_minute: a.agent_chat_limit,
        agent_read_per_minute: a.agent_read_limit,
        overload: botbox_api::overload::Overload {
            max_in_flight: a.max_in_flight.max(1),
            max_in_flight_per_source: a.max_in_flight_per_source.max(1),
            request_timeout: std::time::Duration::from_secs(a.request_timeout.max(1)),
        },
        metrics: Some(botbox_api::MetricsRoute {
            render: std::sync::Arc::new(move || render.render()),
            token: a.metrics_token.clone(),
        }),
        ..ApiConfig::default()
    }
}

/// Everything `botbox serve` runs with, from its flags.
fn serve_config(
    a: ServeArgs,
    metrics: &metrics_exporter_prometheus::PrometheusHandle,
) -> ServeConfig {
    ServeConfig {
        live: live_config(&a),
        api: api_config(&a, metrics),
        callbacks: botbox_service::cases::webhooks::CallbackConfig {
            allow_http: a.allow_private_egress,
            ..Default::default()
        }
        .scaled(a.callback_retry_scale),
        tasks: botbox_service::cases::worker::TaskConfig {
            lease: std::time::Duration::from_secs(a.task_lease_s.max(1)),
            ..Default::default()
        },
        shutdown_timeout: std::time::Duration::from_secs(a.shutdown_timeout),
        addr: a.addr,
        data_dir: a.storage.data,
        database_url: a.storage.database_url,
        admin_password: a.admin_password,
        public_url: a.public_url,
        metrics_addr: a.metrics_addr,
        trusted_proxies: a.trusted_proxies,
        secret_key: a.secret_key,
    }
}

fn user_cmd(command: UserCommand, ctx: &dyn Fn() -> Result<botbox_cli::Ctx>) -> Result<ExitCode> {
    let ok = |()| ExitCode::SUCCESS;
    let password_of = |given: Option<String>, who: &str| match given {
        Some(p) => Ok(p),
        None => new_password(who),
    };
    match command {
        UserCommand::Add {
            username,
            password,
            role,
            data,
            database_url,
        } => {
            let password = password_of(password, &username)?;
            botbox_api::check_new_user(&username, &password, &role)
                .map_err(|e| anyhow::anyhow!(e))?;
            if data.is_none() && database_url.is_none() {
                return botbox_cli::people::user_add(&ctx()?, &username, &password, &role).map(ok);
            }
            let data = data.unwrap_or_else(|| PathBuf::from("data"));
            if database_url.is_none() && !data.join("botbox.db").exists() {
                anyhow::bail!(
                    "no database in {}: give the server's data folder (--data DIR, where \
                     `botbox serve` keeps botbox.db), or leave --data out to add the user \
                     through the server you are logged in to",
                    data.display()
                );
            }
            runtime()?.block_on(async {
                let db = server::open_db(&data, database_url.as_deref()).await?;
                let phc = botbox_service::auth::hash_password(&password);
                match db.insert_user(&username, &phc, &role).await {
                    Ok(u) => {
                        println!("added user {} ({}), role {}", u.username, u.id, u.role_id);
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(botbox_store::DbError::Conflict) => {
                        eprintln!("error: user {username} already exists");
                        Ok(ExitCode::from(1))
                    }
                    Err(e) => Err(e.into()),
                }
            })
        }
        UserCommand::ResetPassword { username, password } => {
            let password = password_of(password, &username)?;
            botbox_cli::people::user_reset_password(&ctx()?, &username, &password).map(ok)
        }
        UserCommand::List => botbox_cli::people::user_list(&ctx()?).map(ok),
        UserCommand::Disable { username } => {
            botbox_cli::people::user_set_disabled(&ctx()?, &username, true).map(ok)
        }
        UserCommand::Enable { username } => {
            botbox_cli::people::user_set_disabled(&ctx()?, &username, false).map(ok)
        }
    }
}

/// A new password for `who`, typed twice with echo off (one line of stdin when piped).
fn new_password(who: &str) -> Result<String> {
    let p = botbox_cli::prompt_secret(&format!("password for {who}: "))?;
    if std::io::IsTerminal::is_terminal(&std::io::stdin())
        && botbox_cli::prompt_secret(&format!("password for {who} again: "))? != p
    {
        anyhow::bail!("the two passwords differ; nothing was changed");
    }
    Ok(p)
}

fn validate(path: &std::path::Path) -> Result<ExitCode> {
    let shown = path.display();
    let loaded = botbox_botfiles::load(path).map_err(|e| anyhow::anyhow!(e))?;
    match runtime_core::compile(&loaded.doc) {
        Ok(c) => {
            for w in &c.warnings {
                println!("{}", loaded.locate(w));
            }
            let refused = botbox_cli::push_refusals(&loaded.doc);
            if !refused.is_empty() {
                for r in &refused {
                    println!("{shown}: {r}");
                }
                println!("{shown}: a push would be refused");
                return Ok(ExitCode::from(1));
            }
            if !c.js_sites.is_empty() {
                let errors = botbox_cli::js_errors(&loaded, &c, &botbox_cli::local_sandbox(None)?)?;
                if !errors.is_empty() {
                    for e in &errors {
                        println!("{e}");
                    }
                    println!("{shown}: {} JavaScript syntax error(s)", errors.len());
                    return Ok(ExitCode::from(1));
                }
            }
            println!(
                "{shown}: ok ({} flows, {} warnings)",
                c.bot.flows.len(),
                c.warnings.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(rejected) => {
            for p in &rejected.problems {
                println!("{}", loaded.locate(p));
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// A retention window: `None` keeps for ever.
#[derive(Debug, Clone, Copy)]
struct Window(Option<std::time::Duration>);

/// `0` (for ever), a bare number of days, or a duration (`90d`, `12h`, `30m`).
fn parse_window(s: &str) -> Result<Window, String> {
    let s = s.trim();
    let d = match s.parse::<u64>() {
        Ok(days) => std::time::Duration::from_secs(days.saturating_mul(24 * 3600)),
        Err(_) => humantime::parse_duration(s)
            .map_err(|e| format!("{e} (expected 0, a number of days, or a duration like 90d)"))?,
    };
    Ok(Window((!d.is_zero()).then_some(d)))
}
