//! The typed arguments of the commands that act on one kind of resource: an enum per
//! resource, parsed by clap in the binary and matched by the command's function here. An
//! unknown action is clap's error listing the actions; a missing name or id is caught
//! before any request is made.

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `botbox env …`: the environments of the bot's project.
#[derive(Subcommand, Debug)]
pub enum EnvAction {
    /// Lists the environments with their deployment versions.
    List,
    /// Creates an environment running a deployment version (default: the latest).
    Create {
        name: String,
        #[arg(long)]
        version: Option<String>,
    },
    /// Points an environment at a deployment version (default: the latest).
    Update {
        name: String,
        #[arg(long)]
        version: Option<String>,
    },
    /// Deletes an environment with its channels (its transcripts are kept).
    Delete { name: String },
}

/// `botbox key …`: agent API keys (`sak_…`) of an environment.
#[derive(Subcommand, Debug)]
pub enum KeyAction {
    /// Creates a key and prints it once: an environment's agent key (`sak_…`), or with
    /// `--workspace` a workspace key (`sk-ws-…`) for CI.
    Create {
        #[arg(long)]
        name: Option<String>,
        /// A workspace key of this team (a team's name, or your own user name for your own
        /// projects): `BOTBOX_TOKEN` for CI jobs that push and deploy its bots.
        #[arg(long)]
        workspace: Option<String>,
    },
    /// Lists the keys (their hints, never the keys).
    List,
    /// Revokes a key by its id (see `botbox key list`).
    Revoke { id: String },
}

/// A channel's settings on `create` and `update`.
#[derive(Args, Debug)]
pub struct ChannelSettings {
    /// The provider (generic, telegram, line, fbmessenger, …); create's default: generic.
    #[arg(long = "type")]
    pub kind: Option<String>,
    /// Where replies go (the provider's API or your endpoint).
    #[arg(long)]
    pub url: Option<String>,
    /// A provider option as key=value (repeatable).
    #[arg(long = "option")]
    pub options: Vec<String>,
}

/// `botbox channel …`: the channels of an environment.
#[derive(Subcommand, Debug)]
pub enum ChannelAction {
    /// Lists the channels with their webhook URLs.
    List,
    /// Creates a channel and prints its webhook URL.
    Create {
        name: String,
        #[command(flatten)]
        settings: ChannelSettings,
    },
    /// Changes a channel's type, URL or options (options merge over the current ones).
    Update {
        name: String,
        #[command(flatten)]
        settings: ChannelSettings,
    },
    /// Deletes a channel: its webhook stops at once.
    Delete { name: String },
}

/// `botbox case …`: the Cases of the bot's project.
#[derive(Subcommand, Debug)]
pub enum CaseAction {
    /// Creates a Case from a file, or replaces the Case of that name.
    Create {
        /// The Case document (YAML or JSON).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Lists the project's Cases.
    List,
    /// Prints a Case (by name or id) as YAML.
    Get { case: String },
    /// Deletes a Case (by name or id).
    Delete { case: String },
}

/// `botbox task …`: the tasks of the project's Cases.
#[derive(Subcommand, Debug)]
pub enum TaskAction {
    /// Creates a task of a Case: `--input name=text` or `--input name:=<json>`.
    Create {
        case: String,
        #[arg(long = "input")]
        inputs: Vec<String>,
    },
    /// Lists a Case's tasks, newest first.
    List { case: String },
    /// Prints a task.
    Get { id: String },
    /// Prints a done task's outputs and artifacts.
    Outputs { id: String },
    /// Records a reviewer's decision on a task in review.
    Review {
        id: String,
        /// approve, reject or changes.
        #[arg(long)]
        decision: String,
        #[arg(long)]
        comment: Option<String>,
        /// An edited output (approve): name=text or `name:=<json>` (repeatable).
        #[arg(long = "output")]
        outputs: Vec<String>,
    },
}

/// `botbox cms …`: the project's CMS as `cms.yml`.
#[derive(Subcommand, Debug)]
pub enum CmsAction {
    /// Writes the latest CMS revision to cms.yml.
    Pull {
        /// Overwrite an existing cms.yml.
        #[arg(long)]
        force: bool,
    },
    /// Publishes cms.yml as a new CMS revision.
    Push {
        /// The revision's changelog.
        #[arg(short, long)]
        message: Option<String>,
    },
    /// Turns the project's CMS on (its options.cms), with an empty first revision.
    Enable,
}

/// `botbox nlu …`: the project's NL Studio NLUs.
#[derive(Subcommand, Debug)]
pub enum NluAction {
    /// Creates an NLU in the bot's project (bots address it as `<account>:<name>`).
    Create {
        name: String,
        /// en or id.
        #[arg(long, default_value = "en")]
        lang: String,
        /// Other accounts' bots may use it too.
        #[arg(long)]
        public: bool,
    },
    /// Adds a file's sentences (one a line: `I want pepperoni #intent:order`) and trains.
    Train { name: String, file: PathBuf },
    /// Predicts each sentence and prints its entities with their scores.
    Predict {
        name: String,
        #[arg(required = true)]
        sentences: Vec<String>,
    },
    /// An NLU's entities: traits (labels of a whole sentence), phrases (spans the model
    /// learns) and dictionaries (listed words and their synonyms).
    Entity {
        #[command(subcommand)]
        action: EntityAction,
    },
}

/// `botbox nlu entity …`.
#[derive(Subcommand, Debug)]
pub enum EntityAction {
    /// The NLU's entities with their type, profile, labels and dictionary keys.
    List { nlu: String },
    /// Adds an entity (`--replace`: changes the one of that name instead).
    Add {
        nlu: String,
        entity: String,
        /// trait, phrase or dict.
        #[arg(long = "type", value_parser = ["trait", "phrase", "dict"])]
        kind: String,
        /// The profile, one of the type's (intent, sentiment, number, email, …; the server
        /// lists them at GET /nlus/profiles). Default: `default`, or the entity's own with
        /// --replace.
        #[arg(long)]
        profile: Option<String>,
        /// A trait's label (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// A dictionary entry, `key` or `key: synonym, synonym` (repeatable).
        #[arg(long = "value")]
        values: Vec<String>,
        /// Change the entity of that name: the type, profile, labels and entries given
        /// replace its own; what is not given (belongsTo, say) stays.
        #[arg(long)]
        replace: bool,
    },
    /// Removes an entity (refused while another entity belongs to it).
    Rm { nlu: String, entity: String },
}

/// `botbox canary …`: the canary of an environment.
#[derive(Subcommand, Debug)]
pub enum CanaryAction {
    /// The canary's split and both versions' figures, or how the last one ended.
    Status,
    /// Makes the canary's version the environment's deployment.
    Promote,
    /// Ends the canary: its users go back to the environment's deployment.
    Abort,
}

/// `botbox audit`: which entries of the audit trail.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The bot folder whose project's entries to show.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Every entry you may see, not only the project's.
    #[arg(long)]
    pub all: bool,
    /// Only this action (bot.push, deployment.create, canary.rollback, ...).
    #[arg(long)]
    pub action: Option<String>,
    /// Only this actor (a user id, a key id, or system).
    #[arg(long)]
    pub actor: Option<String>,
    /// Entries at most this many hours old.
    #[arg(long)]
    pub since_hours: Option<u64>,
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
}

/// `botbox misunderstood`: which environment's inbox, and which groups.
#[derive(Args, Debug)]
pub struct MisunderstoodArgs {
    /// The bot folder whose project this is.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    #[arg(long, default_value = "production")]
    pub env: String,
    /// Only groups of this status: new, labelled or dismissed.
    #[arg(long)]
    pub status: Option<String>,
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
}

/// `botbox replay`: which revision, on which environment's conversations.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The bot folder: its bot is pushed and replayed unless `--revision` names one.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    #[arg(long, default_value = "production")]
    pub env: String,
    /// A pushed revision's id, instead of pushing the folder's bot.
    #[arg(long)]
    pub revision: Option<String>,
    /// How many of the latest conversations (at most 1,000).
    #[arg(long, default_value_t = 100)]
    pub last: u32,
}

/// `botbox project …`: projects across folders.
#[derive(Subcommand, Debug)]
pub enum ProjectAction {
    /// Lists the projects you reach (your own and your teams'), each with its owner and id;
    /// with `--all`, every tenant's (administrators).
    List {
        #[arg(long)]
        all: bool,
    },
}
