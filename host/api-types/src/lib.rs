//! The shapes of the HTTP API: the request and response bodies that the server (`botbox-api`)
//! writes and the CLI (`botbox-cli`) reads, with their OpenAPI schemas. One definition of
//! each, so that the two cannot drift apart.
//!
//! May depend on serde and utoipa only. Must never hold behaviour beyond (de)serialisation:
//! these are public API shapes (the project API's and kata-cli's); a change here is a change
//! of the public API.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

// ---------------------------------------------------------------------------------------------
// Paging

/// A page of a list: its number, its size, the total count and its items.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PageOf<T> {
    pub page: i64,
    pub limit: i64,
    pub total: i64,
    pub data: Vec<T>,
}

// ---------------------------------------------------------------------------------------------
// Accounts, tokens and teams

/// A token: `id` is the bearer token, shown only here.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub label: String,
    pub user_id: String,
    pub team_id: Option<String>,
    pub bot_id: Option<String>,
    pub role_id: String,
    /// Unix time in seconds after which the token is refused.
    pub expire: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    /// The user; for a workspace key, the key's id.
    pub user_id: String,
    /// The user's name; for a workspace key, `key:<its name>`.
    pub username: String,
    /// The team of a team token, or the workspace of a workspace key.
    pub team_id: Option<String>,
    pub team_name: Option<String>,
    pub role_id: String,
    pub permissions: Vec<String>,
    /// What authenticated the request: `login` (a login token: the user and their teams),
    /// `team` (a team token) or `workspaceKey`.
    #[serde(default)]
    pub credential: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: String,
    pub username: String,
    pub role_id: String,
}

/// An account as an administrator's user list shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub id: String,
    pub username: String,
    /// The platform role: `admin`, `developer` or `viewer`.
    pub role_id: String,
    pub disabled: bool,
    /// Unix time in ms.
    pub created_at: i64,
    /// The names of the teams it belongs to.
    pub teams: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserTeam {
    pub id: String,
    pub name: String,
    pub role_id: String,
    pub role: String,
    /// kata-cli's names and counts of the same team.
    pub team_id: String,
    pub username: String,
    pub projects: i64,
    pub members: i64,
    pub bots: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamUser {
    pub user_id: String,
    pub username: String,
    pub role_id: String,
    pub role_name: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub user_id: String,
    pub username: String,
    pub role_id: String,
    pub role: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub id: String,
    pub name: String,
    pub created_by: String,
    pub members: Vec<Member>,
}

// ---------------------------------------------------------------------------------------------
// Projects and bot revisions

fn yes() -> bool {
    true
}
fn private() -> String {
    "private".into()
}
fn en() -> String {
    "en".into()
}

impl Default for ProjectOptions {
    /// The options of a project created without any: every field's default.
    fn default() -> Self {
        serde_json::from_str("{}").expect("defaults parse")
    }
}

/// A project's options.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectOptions {
    #[serde(default = "yes")]
    pub bot: bool,
    #[serde(default)]
    pub cms: bool,
    #[serde(default)]
    pub nlu: bool,
    #[serde(default)]
    pub timezone: f64,
    /// `private` or `public`.
    #[serde(default = "private")]
    pub nlu_visibility: String,
    #[serde(default = "en")]
    pub nlu_lang: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nlu_id: Option<String>,
}

/// A project.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub id: String,
    pub name: String,
    /// Whose project it is: a user or a team.
    pub owner: Owner,
    pub label: Option<String>,
    pub description: Option<String>,
    pub bot_latest_revision: Option<String>,
    pub nlu_latest_revision: Option<String>,
    pub cms_latest_revision: Option<String>,
    pub options: ProjectOptions,
    /// Unix ms; updated by every push and project change.
    #[serde(default)]
    pub created_at: i64,
    #[serde(default)]
    pub updated_at: i64,
}

/// The owner of a project: a user's own namespace or a team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// A user id or a team id.
    pub id: String,
    /// `user` or `team`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The user's or the team's name.
    pub name: String,
}

impl std::fmt::Display for Owner {
    /// `user dev1` or `team acme`: how people read an owner.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSummary {
    pub revision: String,
    pub version: String,
    pub created_at: i64,
    /// The validation warnings found when it was pushed.
    pub warnings: Vec<String>,
}

/// The fields of a push's answer that clients rely on. The answer is the bot document as
/// stored, plus its `revision` (the id) and `warnings`; `version` is the bot's own, bumped
/// when the push asked for it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RevisionPushed {
    pub revision: String,
    pub version: String,
}

// ---------------------------------------------------------------------------------------------
// Deployments, environments and channels

/// A deployment. `name` is `<projectId>~<version>`; `modules` is always null.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    pub id: String,
    pub name: String,
    pub version: String,
    pub bot_revision: String,
    pub nlu_revision: Option<String>,
    pub cms_revision: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub modules: Option<Value>,
    /// The project id.
    pub bot_id: String,
}

/// An environment of a project.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    pub id: String,
    pub name: String,
    pub slug: String,
    pub deployment_id: String,
    pub deployment_version: String,
    /// The same as `deploymentId`/`deploymentVersion`, as the create request names them
    /// (and kata-cli reads them).
    pub dep_id: String,
    pub dep_version: String,
    /// On `GET …/environments/{id}` only: the environment's channels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<Vec<Channel>>,
}

/// A channel of an environment, with the `webhook` that receives its messages.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Channel {
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub url: String,
    pub rpm_limit: Option<i64>,
    pub agent_id: Option<String>,
    #[schema(value_type = Object)]
    pub options: Map<String, Value>,
    pub webhook: String,
    pub environment_id: String,
}

// ---------------------------------------------------------------------------------------------
// Agent API keys

/// A key as listed: never the key itself.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    pub id: String,
    /// agent or workspace
    pub kind: String,
    /// The environment (agent key) or the team / user (workspace key).
    pub scope: String,
    pub name: String,
    /// `sak_…` and the key's last four characters.
    pub hint: String,
    pub created_at: String,
    pub created_by: String,
    pub last_used_at: Option<String>,
    pub revoked_at: Option<String>,
    /// The key itself: only in the answer that creates it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct NewApiKey {
    /// A label for the key (default: "default").
    #[serde(default)]
    pub name: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Cases and tasks
//
// A Case's and a task's documents are public shapes of their own (docs/agent-api.md); these
// are the fields of them that clients rely on.

/// A list of the Cases API (`/v1` and the project API's Cases routes): `{"data": [...]}`,
/// unpaged.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ListOf<T> {
    pub data: Vec<T>,
}

/// The fields of a Case document that clients rely on (the document holds the Case's whole
/// definition beside them).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CaseRef {
    pub id: String,
    pub name: String,
    /// Whether a person reviews the bot's outputs before the task is done.
    #[serde(default)]
    pub review: Value,
}

/// The fields of a task document that clients rely on.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskRef {
    pub id: String,
    pub status: String,
    /// Why the task failed: a text, or an object with a `message`.
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub outputs: Option<Value>,
}

/// A task's outputs and its artifacts' download links.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskOutputs {
    #[serde(default)]
    pub outputs: Value,
    #[serde(default)]
    pub artifacts: Vec<ArtifactLink>,
}

/// An artifact of a task, with a signed URL that expires.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactLink {
    pub name: String,
    pub media_type: String,
    pub url: String,
}
