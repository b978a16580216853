//! `botbox`: the server and the command-line client.

use anyhow::{Context, Result};
use botbox::api::ApiConfig;
use botbox::live::LiveConfig;
use botbox::server::{self, ServeConfig};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "botbox", version, about = "Run untrusted chatbots safely, many tenants on one server.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the server (SQLite in the data folder unless DATABASE_URL is postgres://).
    Serve(ServeArgs),
    /// Validates a bot file and prints every problem with its path and position.
    Validate {
        /// bot.yml or bot.json
        file: PathBuf,
    },
    /// Manages accounts directly in the database.
    User {
        #[command(subcommand)]
        command: UserCommand,
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
    /// Project API requests per minute per token (per address without one).
    #[arg(long, env = "BOTBOX_RATE_LIMIT", default_value_t = 100)]
    rate_limit: u32,
    /// Token lifetime in seconds.
    #[arg(long, env = "BOTBOX_TOKEN_TTL", default_value_t = 7 * 24 * 3600)]
    token_ttl: i64,
    /// Where the precompiled sandbox guest is cached (default: <data>/cache).
    #[arg(long, env = "BOTBOX_CACHE")]
    cache_dir: Option<PathBuf>,
    /// Let bots' api actions and channel deliveries reach loopback and private addresses
    /// (for local development and tests only).
    #[arg(long, env = "BOTBOX_ALLOW_PRIVATE_EGRESS")]
    allow_private_egress: bool,
    /// First retry delay of a failed delivery, in milliseconds (doubles per attempt).
    #[arg(long, env = "BOTBOX_OUTBOX_BACKOFF_MS", default_value_t = 1000)]
    outbox_backoff_ms: u64,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Adds a user.
    Add {
        username: String,
        /// The password (asked for when absent).
        #[arg(long, env = "BOTBOX_NEW_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// admin, developer or viewer.
        #[arg(long, default_value = "developer")]
        role: String,
        #[command(flatten)]
        storage: StorageArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Validate { file } => validate(&file),
        Command::Serve(a) => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_env("BOTBOX_LOG")
                        .unwrap_or_else(|_| "info".into()),
                )
                .with_writer(std::io::stderr)
                .init();
            let mut live = LiveConfig::default();
            live.sandbox.cache_dir = a
                .cache_dir
                .unwrap_or_else(|| a.storage.data.join("cache"));
            live.sandbox.limits.allow_private_network = a.allow_private_egress;
            live.outbox_backoff = std::time::Duration::from_millis(a.outbox_backoff_ms);
            let cfg = ServeConfig {
                live,
                addr: a.addr,
                data_dir: a.storage.data,
                database_url: a.storage.database_url,
                admin_password: a.admin_password,
                public_url: a.public_url,
                api: ApiConfig {
                    rate_limit_per_minute: a.rate_limit,
                    token_ttl_secs: a.token_ttl,
                    ..ApiConfig::default()
                },
            };
            runtime()?.block_on(server::serve(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::User {
            command:
                UserCommand::Add {
                    username,
                    password,
                    role,
                    storage,
                },
        } => {
            let password = match password {
                Some(p) => p,
                None => rpassword_prompt(&format!("password for {username}: "))?,
            };
            botbox::api::check_new_user(&username, &password, &role)
                .map_err(|e| anyhow::anyhow!(e))?;
            runtime()?.block_on(async {
                let db = server::open_db(&storage.data, storage.database_url.as_deref()).await?;
                let phc = botbox::auth::hash_password(&password);
                match db.insert_user(&username, &phc, &role).await {
                    Ok(u) => {
                        println!("added user {} ({}), role {}", u.username, u.id, u.role_id);
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(botbox::db::DbError::Conflict) => {
                        eprintln!("error: user {username} already exists");
                        Ok(ExitCode::from(1))
                    }
                    Err(e) => Err(e.into()),
                }
            })
        }
    }
}

/// Reads a line from stdin after a prompt (the terminal echoes it; pipe it in scripts).
fn rpassword_prompt(prompt: &str) -> Result<String> {
    use std::io::Write;
    eprint!("{prompt}");
    std::io::stderr().flush().ok();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

fn validate(path: &std::path::Path) -> Result<ExitCode> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {shown}"))?;
    match runtime_core::compile_source(&text) {
        Ok(c) => {
            for w in &c.warnings {
                println!("{shown}: warning: {w}");
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
                let kind = if p.severity == runtime_core::source::Severity::Error {
                    "error"
                } else {
                    "warning"
                };
                println!("{shown}: {kind}: {p}");
            }
            Ok(ExitCode::from(1))
        }
    }
}
