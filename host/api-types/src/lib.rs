//! The shapes of the HTTP API: the request and response bodies that the server (`botbox-api`)
//! writes and the CLI (`botbox-cli`) reads, with their OpenAPI schemas. One definition of
//! each, so that the two cannot drift apart.
//!
//! May depend on: serde and utoipa only. Must never hold behaviour beyond (de)serialisation:
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
    /// Who pushed it: a user's name, or `key:<name> (<owner>)` for a workspace key.
    #[serde(default)]
    pub pushed_by: Option<String>,
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
    /// Who created it: a user's name, or `key:<name> (<owner>)` for a workspace key.
    #[serde(default)]
    pub deployed_by: Option<String>,
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
    /// The canary running beside the environment's deployment, if one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<Canary>,
    /// How the environment's last canary ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_canary: Option<LastCanary>,
}

/// When a canary rolls itself back: once it has served `minMessages` messages, if its
/// step-error rate is over `maxErrorRate`, or its fallback rate is over the control's by more
/// than `maxFallbackIncrease` (rates are fractions, 0.05 = 5 %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CanaryRollback {
    #[serde(default = "default_max_error_rate")]
    pub max_error_rate: f64,
    #[serde(default = "default_max_fallback_increase")]
    pub max_fallback_increase: f64,
    #[serde(default = "default_min_messages")]
    pub min_messages: i64,
}

fn default_max_error_rate() -> f64 {
    0.05
}
fn default_max_fallback_increase() -> f64 {
    0.10
}
fn default_min_messages() -> i64 {
    50
}

impl Default for CanaryRollback {
    fn default() -> Self {
        CanaryRollback {
            max_error_rate: default_max_error_rate(),
            max_fallback_increase: default_max_fallback_increase(),
            min_messages: default_min_messages(),
        }
    }
}

/// `PUT …/environments/{environmentId}/canary`: run `depVersion` for `share` % of the
/// environment's users.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CanaryRequest {
    pub dep_version: String,
    /// 1 to 99: the percentage of users the canary serves.
    pub share: i64,
    #[serde(default)]
    pub rollback: Option<CanaryRollback>,
}

/// One side of a canary's comparison: the messages its version served since the canary
/// started, and the share of them whose step failed or reported an error, or fell back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanarySide {
    pub dep_version: String,
    pub messages: i64,
    pub error_rate: f64,
    pub fallback_rate: f64,
}

/// A running canary: its version's figures at the top level, the control's beside them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Canary {
    pub dep_version: String,
    pub share: i64,
    /// Unix ms.
    pub started_at: i64,
    pub started_by: String,
    pub messages: i64,
    pub error_rate: f64,
    pub fallback_rate: f64,
    pub control: CanarySide,
    pub rollback: CanaryRollback,
}

/// How a canary ended: `promoted`, `aborted` or `rolled back` (with the `reason`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastCanary {
    pub dep_version: String,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unix ms.
    pub ended_at: i64,
    /// A user's name, a key, or `system` for an automatic rollback.
    pub ended_by: String,
}

// ---------------------------------------------------------------------------------------------
// The audit trail

/// Who made a change: a user, a workspace key (with the owner it acts for) or `system`
/// (botbox itself: an automatic rollback).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditActor {
    /// `user`, `key` or `system`.
    pub kind: String,
    pub id: String,
    pub name: String,
    /// A key's owner (a team or user id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// What a change acted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditResource {
    pub kind: String,
    pub id: String,
}

/// One entry of the audit trail (`GET /audit`). Entries are never changed or deleted
/// through the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub id: String,
    /// Unix ms.
    pub at: i64,
    pub actor: AuditActor,
    /// The address the request came from.
    pub address: String,
    /// `bot.push`, `deployment.create`, `canary.rollback`, `login.failed`, ...
    pub action: String,
    pub resource: AuditResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// The owner (user or team id) of the resource, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// `ok`, `refused` (401/403/404), `failed` (other 4xx) or `error` (5xx).
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
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

// ---------------------------------------------------------------------------------------------
// Learning from production: the misunderstood inbox and replays

/// A group of an environment's misunderstood inbox: channel users' messages with the same
/// normalised text whose step matched no intent or a fallback intent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MisunderstoodItem {
    pub id: String,
    /// The normalised text (lower case, spaces collapsed, no punctuation at the ends).
    pub text: String,
    pub count: i64,
    pub first_seen: i64,
    pub last_seen: i64,
    /// The intent it fell to (a fallback intent), or none.
    pub intent: Option<String>,
    /// The flow that handled it.
    pub flow: Option<String>,
    /// `new`, `labelled` or `dismissed`.
    pub status: String,
    /// A user who sent it: their transcript is a sample conversation.
    pub sample_user_id: String,
    /// For a labelled group: the NLU its texts went to, and the label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nlu_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A span to mark in every text of a group: `value` is the text it covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MisunderstoodSpan {
    pub entity: String,
    pub value: String,
}

/// `PUT …/misunderstood/{id}`: `{"status": "dismissed"}`, or `{"status": "labelled",
/// "nluId", "intent"}` (optionally the trait `entity` the label belongs to, and spans).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MisunderstoodUpdate {
    pub status: String,
    #[serde(default)]
    pub nlu_id: Option<String>,
    #[serde(default)]
    pub intent: Option<String>,
    #[serde(default)]
    pub entity: Option<String>,
    #[serde(default)]
    pub entities: Vec<MisunderstoodSpan>,
}

/// `POST /projects/{projectId}/replays`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplayRequest {
    /// The environment whose recorded conversations are replayed: its name or id.
    pub environment: String,
    pub bot_revision: String,
    /// The CMS revision the bot reads (default: the environment's deployment's).
    #[serde(default)]
    pub cms_revision: Option<String>,
    /// The newest conversations to replay (default 100, at most 1,000).
    #[serde(default)]
    pub last: Option<i64>,
    /// Conversations that began at or after this time (Unix ms).
    #[serde(default)]
    pub since: Option<i64>,
    /// Conversations that began at or before this time, with their messages up to it.
    #[serde(default)]
    pub until: Option<i64>,
}

/// Where a replayed conversation first went another way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayDifference {
    /// The message's number in the conversation (from 1).
    pub message: i64,
    /// The user's message.
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    /// The replies the user got, and the replayed revision's: `type`, `content`, `payload`.
    #[schema(value_type = Vec<Object>)]
    pub before: Vec<serde_json::Value>,
    #[schema(value_type = Vec<Object>)]
    pub after: Vec<serde_json::Value>,
    /// An api call the replayed step made that was not recorded (and not made): `METHOD url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecorded_call: Option<String>,
}

/// One replayed conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayResult {
    pub user_id: String,
    pub channel_id: String,
    pub started_at: i64,
    /// Messages replayed (up to the first difference).
    pub messages: i64,
    /// `identical`, `differing` or `failed`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_difference: Option<ReplayDifference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A replay and, once done, its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Replay {
    pub id: String,
    /// `running`, `done` or `failed`.
    pub status: String,
    /// The environment's id and name.
    pub environment: String,
    pub environment_name: String,
    pub bot_revision: String,
    pub cms_revision: Option<String>,
    pub requested_by: String,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub conversations: i64,
    pub identical: i64,
    pub differing: i64,
    pub failed: i64,
    pub results: Vec<ReplayResult>,
    /// Why the replay failed as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
