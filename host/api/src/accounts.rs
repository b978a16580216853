//! Login, tokens, users and teams.

use super::{ApiError, ApiResult, App, Body, Caller, ClientKey, unix_secs};
use axum::Json;
use axum::extract::{Extension, Path, State};
use botbox_api_types::{Account, Me, Member, Team, TeamUser, Token, User, UserTeam};
use botbox_service::auth::{self, Role, TEAM_ROLE_NAMES};
use botbox_store::{DbError, TokenRow};
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(cli_login))
        .routes(routes!(get_token))
        .routes(routes!(get_user))
        .routes(routes!(user_info))
        .routes(routes!(team_users))
        .routes(routes!(create_token, revoke_my_tokens))
        .routes(routes!(logout))
        .routes(routes!(me))
        .routes(routes!(storage))
        .routes(routes!(create_user, list_users))
        .routes(routes!(user_teams))
        .routes(routes!(create_team))
        .routes(routes!(get_team, delete_team))
        .routes(routes!(add_member, remove_member))
        .routes(routes!(disable_user))
        .routes(routes!(change_my_password))
        .routes(routes!(reset_password))
        .routes(routes!(enable_user))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

const BAD_CREDENTIALS: &str = "username or password is incorrect";

/// Used to spend the same time on unknown user names as on wrong passwords.
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| auth::hash_password("not a password"));

async fn issue_token(
    app: &App,
    user_id: &str,
    team_id: Option<&str>,
    role_id: &str,
    label: &str,
) -> ApiResult<Token> {
    let token = auth::new_token();
    let row = TokenRow {
        hash: auth::token_hash(&token),
        kind: if team_id.is_some() { "team" } else { "user" }.into(),
        label: label.into(),
        user_id: user_id.into(),
        team_id: team_id.map(str::to_owned),
        role_id: role_id.into(),
        expire: unix_secs() + app.config.token_ttl_secs,
    };
    app.db.insert_token(&row).await?;
    Ok(Token {
        id: token,
        kind: row.kind,
        label: row.label,
        user_id: row.user_id,
        team_id: row.team_id,
        bot_id: None,
        role_id: row.role_id,
        expire: row.expire,
    })
}

/// Logs in with a user name and password; returns a user token.
#[utoipa::path(post, path = "/login", tag = "auth", request_body = LoginRequest,
    responses((status = 200, body = Token), (status = 401, description = "username or password is incorrect")))]
async fn login(
    State(app): State<App>,
    client: Option<Extension<ClientKey>>,
    slot: Option<Extension<crate::audit::AuditSlot>>,
    Body(req): Body<LoginRequest>,
) -> ApiResult<Json<Token>> {
    let client = client.map(|c| c.0.0).unwrap_or_default();
    // A throttled attempt costs no read and leaves no entry (it is counted in the metrics).
    app.login_allowed(&req.username, &client)?;
    let user = app.db.user_by_name(&req.username).await?;
    if let Some(Extension(slot)) = &slot {
        // The name tried, cut short: a stranger's guesses are the administrator's to read.
        let name: String = req.username.chars().take(64).collect();
        let id = user.as_ref().map(|u| u.id.clone()).unwrap_or_default();
        slot.signing_in(botbox_service::audit::Actor::of(
            &id,
            &name,
            &auth::Acting::User,
            None,
        ));
    }
    let phc = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| DUMMY_HASH.clone());
    let password = req.password;
    let ok = app
        .password_job(move || auth::verify_password(&password, &phc))
        .await?;
    let user = match user {
        Some(u) if ok && u.disabled == 0 => u,
        _ => {
            tracing::info!(username = %req.username, "login refused");
            return Err(ApiError::Unauthorized(BAD_CREDENTIALS));
        }
    };
    app.login_succeeded(&req.username, &client);
    Ok(Json(
        issue_token(&app, &user.id, None, &user.role_id, "login").await?,
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    /// `team` (the only kind that can be requested).
    #[serde(rename = "type")]
    pub kind: String,
    pub team_id: Option<String>,
    pub team_name: Option<String>,
}

/// Obtains a team-bound token for one of the caller's teams (the CLI's switch-team).
#[utoipa::path(post, path = "/tokens", tag = "auth", request_body = TokenRequest,
    responses((status = 200, body = Token), (status = 404, description = "no such team among the caller's teams")))]
async fn create_token(
    State(app): State<App>,
    caller: Caller,
    Body(req): Body<TokenRequest>,
) -> ApiResult<Json<Token>> {
    caller.require_person()?;
    if req.kind != "team" {
        return Err(ApiError::bad(format!(
            "type: only \"team\" tokens can be requested (got {:?})",
            req.kind
        )));
    }
    let team = match (&req.team_id, &req.team_name) {
        (Some(id), _) => app.db.team_by_id(id).await?,
        (None, Some(name)) => app.db.team_by_name(name).await?,
        (None, None) => return Err(ApiError::bad("teamId or teamName is required")),
    };
    let what = req.team_id.or(req.team_name).unwrap_or_default();
    let Some(team) = team else {
        return Err(ApiError::not_found(format!("team {what}")));
    };
    let Some(role) = app.db.membership(&team.id, &caller.user_id).await? else {
        return Err(ApiError::not_found(format!("team {what}")));
    };
    Ok(Json(
        issue_token(&app, &caller.user_id, Some(&team.id), &role, "team").await?,
    ))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LoggedOut {
    pub ok: bool,
}

/// Revokes the token that authenticates this request.
#[utoipa::path(post, path = "/logout", tag = "auth", responses((status = 200, body = LoggedOut)))]
async fn logout(State(app): State<App>, caller: Caller) -> ApiResult<Json<LoggedOut>> {
    caller.require_person()?;
    app.db.delete_token(&caller.token_hash).await?;
    Ok(Json(LoggedOut { ok: true }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Revoked {
    /// How many tokens were revoked.
    pub revoked: u64,
}

/// Revokes every token of the calling user (user and team tokens, this one included): "log
/// me out everywhere", after a token leaked.
#[utoipa::path(delete, path = "/tokens", tag = "auth", responses((status = 200, body = Revoked)))]
async fn revoke_my_tokens(State(app): State<App>, caller: Caller) -> ApiResult<Json<Revoked>> {
    caller.require_person()?;
    let revoked = app.db.delete_user_tokens(&caller.user_id).await?;
    Ok(Json(Revoked { revoked }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PasswordChange {
    pub current_password: String,
    pub new_password: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PasswordReset {
    pub password: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordChanged {
    /// Tokens of the account revoked (all but the caller's own, for a change).
    pub revoked_other_tokens: bool,
}

/// Changes the caller's own password: the current one must be given. Every other token of
/// the account is revoked (sessions elsewhere end); the caller's stays valid.
#[utoipa::path(put, path = "/me/password", tag = "auth", request_body = PasswordChange,
    responses((status = 200, body = PasswordChanged), (status = 400, description = "the current password is wrong, or the new one is too short"), (status = 401)))]
async fn change_my_password(
    State(app): State<App>,
    client: Option<Extension<ClientKey>>,
    caller: Caller,
    Body(req): Body<PasswordChange>,
) -> ApiResult<Json<PasswordChanged>> {
    caller.require_person()?;
    let user = app
        .db
        .user_by_id(&caller.user_id)
        .await?
        .ok_or(ApiError::Unauthorized(BAD_CREDENTIALS))?;
    check_new_user(&user.username, &req.new_password, &user.role_id)
        .map_err(|e| ApiError::bad(format!("newPassword: {e}")))?;
    // Guessing the current password is throttled like logins.
    let client = client.map(|c| c.0.0).unwrap_or_default();
    app.login_allowed(&user.username, &client)?;
    let (current, phc) = (req.current_password, user.password_hash.clone());
    if !app
        .password_job(move || auth::verify_password(&current, &phc))
        .await?
    {
        return Err(ApiError::bad(
            "currentPassword: incorrect; the password was not changed",
        ));
    }
    app.login_succeeded(&user.username, &client);
    let new = req.new_password;
    let phc = app.password_job(move || auth::hash_password(&new)).await?;
    app.db
        .set_password(&user.id, &phc, Some(&caller.token_hash))
        .await?;
    tracing::warn!(user = %user.id, "password changed by its owner");
    Ok(Json(PasswordChanged {
        revoked_other_tokens: true,
    }))
}

/// Sets another account's password (platform administrators only); every token of that
/// account is revoked.
#[utoipa::path(put, path = "/users/{userId}/password", tag = "teams", request_body = PasswordReset,
    params(("userId" = String, Path)),
    responses((status = 200, body = PasswordChanged), (status = 400), (status = 403), (status = 404)))]
async fn reset_password(
    State(app): State<App>,
    caller: Caller,
    Path(user_id): Path<String>,
    Body(req): Body<PasswordReset>,
) -> ApiResult<Json<PasswordChanged>> {
    caller.require_person()?;
    if !caller.is_admin() || caller.team_id.is_some() {
        return Err(ApiError::Forbidden);
    }
    let u = app
        .db
        .user_by_id(&user_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("user {user_id}")))?;
    check_new_user(&u.username, &req.password, &u.role_id)
        .map_err(|e| ApiError::bad(format!("password: {e}")))?;
    let new = req.password;
    let phc = app.password_job(move || auth::hash_password(&new)).await?;
    app.db.set_password(&u.id, &phc, None).await?;
    tracing::warn!(user = %u.id, by = %caller.user_id, "password reset by an administrator");
    Ok(Json(PasswordChanged {
        revoked_other_tokens: true,
    }))
}

/// Disables an account (platform administrators only): every token of it is revoked in the
/// same transaction and it cannot log in until enabled again.
#[utoipa::path(post, path = "/users/{userId}/disable", tag = "teams",
    params(("userId" = String, Path)), responses((status = 200, body = User), (status = 403), (status = 404)))]
async fn disable_user(
    State(app): State<App>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<User>> {
    caller.require_person()?;
    set_disabled(&app, &caller, &user_id, true).await
}

/// Enables a disabled account again (platform administrators only).
#[utoipa::path(post, path = "/users/{userId}/enable", tag = "teams",
    params(("userId" = String, Path)), responses((status = 200, body = User), (status = 403), (status = 404)))]
async fn enable_user(
    State(app): State<App>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<User>> {
    caller.require_person()?;
    set_disabled(&app, &caller, &user_id, false).await
}

async fn set_disabled(
    app: &App,
    caller: &Caller,
    user_id: &str,
    disabled: bool,
) -> ApiResult<Json<User>> {
    if !caller.is_admin() || caller.team_id.is_some() {
        return Err(ApiError::Forbidden);
    }
    if disabled && caller.user_id == user_id {
        return Err(ApiError::Conflict(
            "an administrator cannot disable itself".into(),
        ));
    }
    let u = app
        .db
        .user_by_id(user_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("user {user_id}")))?;
    app.db.set_user_disabled(&u.id, disabled).await?;
    tracing::warn!(user = %u.id, by = %caller.user_id, disabled, "account access changed");
    Ok(Json(User {
        id: u.id,
        username: u.username,
        role_id: u.role_id,
    }))
}

/// Who the token belongs to, and what it may do.
#[utoipa::path(get, path = "/me", tag = "auth", responses((status = 200, body = Me)))]
async fn me(State(app): State<App>, caller: Caller) -> ApiResult<Json<Me>> {
    let team_name = match &caller.team_id {
        Some(t) => app.db.team_by_id(t).await?.map(|t| t.name),
        None => None,
    };
    Ok(Json(Me {
        user_id: caller.user_id.clone(),
        username: caller.username.clone(),
        team_id: caller.team_id.clone(),
        team_name,
        role_id: caller.role.name().into(),
        permissions: caller.role.permissions(),
        credential: match caller.acting {
            auth::Acting::User => "login",
            auth::Acting::Team(_) => "team",
            auth::Acting::WorkspaceKey { .. } => "workspaceKey",
        }
        .into(),
    }))
}

/// What a tenant stores of one kind.
#[derive(Debug, Serialize, ToSchema)]
pub struct StoredKind {
    /// `transcripts`, `sessions`, `task_artifacts` or `nlu_models`.
    pub kind: String,
    pub rows: i64,
    /// Bytes of the stored text (an artifact: its size).
    pub bytes: i64,
}

/// What the caller's tenant stores.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// The tenant: the user, or the team of a team token.
    pub owner_id: String,
    pub kinds: Vec<StoredKind>,
    pub total_bytes: i64,
}

/// What the caller's tenant (its user, or the team of a team token) stores: rows and bytes
/// of its transcripts, sessions, task artifacts and NLU models. Computed when asked.
#[utoipa::path(get, path = "/storage", tag = "auth", responses((status = 200, body = Storage)))]
async fn storage(State(app): State<App>, caller: Caller) -> ApiResult<Json<Storage>> {
    let kinds = app.db.storage_of(caller.owner()).await?;
    Ok(Json(Storage {
        owner_id: caller.owner().to_owned(),
        total_bytes: kinds.iter().map(|k| k.bytes).sum(),
        kinds: kinds
            .into_iter()
            .map(|k| StoredKind {
                kind: k.kind.into(),
                rows: k.rows,
                bytes: k.bytes,
            })
            .collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewUser {
    pub username: String,
    pub password: String,
    /// `admin`, `developer` (default) or `viewer`.
    pub role_id: Option<String>,
}

/// Checks a new account's fields: the rules `botbox user add` and `POST /users` share.
pub fn check_new_user(username: &str, password: &str, role: &str) -> Result<(), String> {
    if username.is_empty()
        || username.len() > 64
        || !username
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!(
            "username: 1 to 64 letters, digits, '.', '_' or '-' (got {username:?})"
        ));
    }
    auth::check_password(password).map_err(|e| format!("password: {e}"))?;
    match Role::parse(role) {
        Some(Role::TeamAdmin) | None => Err(format!(
            "roleId: one of admin, developer, viewer (got {role:?})"
        )),
        Some(_) => Ok(()),
    }
}

/// Adds a user (platform administrators only).
#[utoipa::path(post, path = "/users", tag = "teams", request_body = NewUser,
    responses((status = 200, body = User), (status = 403), (status = 409, description = "user name taken")))]
async fn create_user(
    State(app): State<App>,
    caller: Caller,
    Body(req): Body<NewUser>,
) -> ApiResult<Json<User>> {
    caller.require_person()?;
    if !caller.is_admin() {
        return Err(ApiError::Forbidden);
    }
    let role = req.role_id.unwrap_or_else(|| "developer".into());
    check_new_user(&req.username, &req.password, &role).map_err(ApiError::BadRequest)?;
    let password = req.password;
    let phc = app
        .password_job(move || auth::hash_password(&password))
        .await?;
    let u = app
        .db
        .insert_user(&req.username, &phc, &role)
        .await
        .map_err(|e| match e {
            DbError::Conflict => {
                ApiError::Conflict(format!("user {} already exists", req.username))
            }
            e => e.into(),
        })?;
    Ok(Json(User {
        id: u.id,
        username: u.username,
        role_id: u.role_id,
    }))
}

/// Every account with its platform role and teams (platform administrators only).
#[utoipa::path(get, path = "/users", tag = "teams",
    responses((status = 200, body = [Account]), (status = 403)))]
async fn list_users(State(app): State<App>, caller: Caller) -> ApiResult<Json<Vec<Account>>> {
    caller.require_person()?;
    if !caller.is_admin() {
        return Err(ApiError::Forbidden);
    }
    let mut out = Vec::new();
    for u in app.db.list_users().await? {
        let teams = app.db.user_teams(&u.id).await?;
        out.push(Account {
            teams: teams.into_iter().map(|t| t.name).collect(),
            id: u.id,
            username: u.username,
            role_id: u.role_id,
            disabled: u.disabled != 0,
            created_at: u.created_at,
        });
    }
    Ok(Json(out))
}

/// The teams of a user (the user themself, or an administrator).
#[utoipa::path(get, path = "/users/{userId}/teams", tag = "teams",
    params(("userId" = String, Path)), responses((status = 200, body = [UserTeam]), (status = 403)))]
async fn user_teams(
    State(app): State<App>,
    caller: Caller,
    Path(user): Path<String>,
) -> ApiResult<Json<Vec<UserTeam>>> {
    caller.require_person()?;
    // By id (the documented form) or by name (kata-cli).
    let user_id = match app.db.user_by_name(&user).await? {
        Some(u) if u.id != user => u.id,
        _ => user,
    };
    if caller.user_id != user_id && !caller.is_admin() {
        return Err(ApiError::Forbidden);
    }
    let teams = app.db.user_teams(&user_id).await?;
    let mut out = Vec::with_capacity(teams.len());
    for t in teams {
        let (projects, bots) = app.db.owner_project_counts(&t.id).await?;
        let members = app.db.team_members(&t.id).await?.len() as i64;
        out.push(UserTeam {
            team_id: t.id.clone(),
            username: t.name.clone(),
            id: t.id,
            name: t.name,
            role: t.role_id.clone(),
            role_id: t.role_id,
            projects,
            members,
            bots,
        });
    }
    Ok(Json(out))
}

/// Logs in (kata-cli's name for `POST /login`).
#[utoipa::path(post, path = "/cli-login", tag = "auth", request_body = LoginRequest,
    responses((status = 200, body = Token), (status = 401)))]
async fn cli_login(
    state: State<App>,
    client: Option<Extension<ClientKey>>,
    slot: Option<Extension<crate::audit::AuditSlot>>,
    body: Body<LoginRequest>,
) -> ApiResult<Json<Token>> {
    login(state, client, slot, body).await
}

/// The token that authenticates this request, described (kata-cli's `login -t`). Any other
/// token id is 404: a token is not a name to look others up by.
#[utoipa::path(get, path = "/tokens/{tokenId}", tag = "auth",
    params(("tokenId" = String, Path)), responses((status = 200, body = Token), (status = 404)))]
async fn get_token(
    State(app): State<App>,
    caller: Caller,
    Path(token): Path<String>,
) -> ApiResult<Json<Token>> {
    caller.require_person()?;
    let hash = auth::token_hash(&token);
    if hash != caller.token_hash {
        return Err(ApiError::not_found("token"));
    }
    let row = app
        .db
        .token_by_hash(&hash)
        .await?
        .ok_or_else(|| ApiError::not_found("token"))?;
    Ok(Json(Token {
        id: token,
        kind: row.kind,
        label: row.label,
        user_id: row.user_id,
        team_id: row.team_id,
        bot_id: None,
        role_id: row.role_id,
        expire: row.expire,
    }))
}

/// A user's own account with its teams, or a team the caller belongs to (as
/// `{id, username: <team name>, type: "team"}`): what kata-cli's switch-team and token login
/// read.
#[utoipa::path(get, path = "/users/{userId}", tag = "teams",
    params(("userId" = String, Path, description = "a user's id or name, or a team id")),
    responses((status = 200, body = Object), (status = 404)))]
async fn get_user(
    State(app): State<App>,
    caller: Caller,
    Path(key): Path<String>,
) -> ApiResult<Json<serde_json::Value>> {
    caller.require_person()?;
    let user = match app.db.user_by_id(&key).await? {
        Some(u) => Some(u),
        None => app.db.user_by_name(&key).await?,
    };
    if let Some(u) = user {
        if u.id != caller.user_id && !caller.is_admin() {
            return Err(ApiError::not_found(format!("user {key}")));
        }
        let teams: Vec<serde_json::Value> = app
            .db
            .user_teams(&u.id)
            .await?
            .into_iter()
            .map(|t| serde_json::json!({"teamId": t.id, "username": t.name, "roleId": t.role_id}))
            .collect();
        return Ok(Json(serde_json::json!({
            "id": u.id, "userId": u.id, "username": u.username, "roleId": u.role_id,
            "type": "user", "teams": teams,
        })));
    }
    if let Some(t) = app.db.team_by_id(&key).await?
        && (caller.is_admin() || app.db.membership(&t.id, &caller.user_id).await?.is_some())
    {
        return Ok(Json(serde_json::json!({
            "id": t.id, "username": t.name, "type": "team",
        })));
    }
    Err(ApiError::not_found(format!("user {key}")))
}

/// A user's id and name by name (what an invitation needs). Signed-in users only; nothing
/// else of the account is shown.
#[utoipa::path(get, path = "/users/getInfo/{key}", tag = "teams",
    params(("key" = String, Path, description = "a user name")),
    responses((status = 200, body = Object), (status = 404)))]
async fn user_info(
    State(app): State<App>,
    caller: Caller,
    Path(key): Path<String>,
) -> ApiResult<Json<serde_json::Value>> {
    caller.require_person()?;
    let u = app
        .db
        .user_by_name(&key)
        .await?
        .filter(|u| u.disabled == 0)
        .ok_or_else(|| ApiError::not_found(format!("user {key}")))?;
    Ok(Json(
        serde_json::json!({"id": u.id, "userId": u.id, "username": u.username}),
    ))
}

/// The members of a team, as a bare array (members and administrators only).
#[utoipa::path(get, path = "/teams/{teamId}/users", tag = "teams",
    params(("teamId" = String, Path)), responses((status = 200, body = [TeamUser]), (status = 404)))]
async fn team_users(
    State(app): State<App>,
    caller: Caller,
    Path(team_id): Path<String>,
) -> ApiResult<Json<Vec<TeamUser>>> {
    caller.require_person()?;
    let t = team_for_member(&app, &caller, &team_id).await?;
    Ok(Json(
        app.db
            .team_members(&t.id)
            .await?
            .into_iter()
            .map(|m| TeamUser {
                user_id: m.user_id,
                username: m.username,
                role_name: m.role_id.clone(),
                role_id: m.role_id,
            })
            .collect(),
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTeam {
    /// The team's name (kata-cli sends it as `username`).
    #[serde(alias = "username")]
    pub name: String,
    /// kata-cli sends an empty password and `roleId: teamAdmin`: accepted and ignored (a team
    /// has no password; its creator becomes its teamAdmin).
    #[serde(default)]
    #[allow(dead_code)]
    pub password: Option<String>,
    #[serde(default, rename = "roleId")]
    #[allow(dead_code)]
    pub role_id: Option<String>,
}

async fn team_json(app: &App, t: botbox_store::TeamRow) -> ApiResult<Team> {
    let members = app.db.team_members(&t.id).await?;
    Ok(Team {
        id: t.id,
        name: t.name,
        created_by: t.created_by,
        members: members
            .into_iter()
            .map(|m| Member {
                user_id: m.user_id,
                username: m.username,
                role: m.role_id.clone(),
                role_id: m.role_id,
            })
            .collect(),
    })
}

/// Creates a team; the caller becomes its `teamAdmin`.
#[utoipa::path(post, path = "/teams", tag = "teams", request_body = NewTeam,
    responses((status = 200, body = Team), (status = 409, description = "team name taken")))]
async fn create_team(
    State(app): State<App>,
    caller: Caller,
    Body(req): Body<NewTeam>,
) -> ApiResult<Json<Team>> {
    caller.require_person()?;
    // The creator becomes teamAdmin: only a role that may create for itself may create a
    // team (a viewer could otherwise raise its own rights through one).
    if !auth::may_create_team(caller.platform_role) {
        return Err(ApiError::Forbidden);
    }
    let name = req.name.trim();
    super::check_name("name", name)?;
    if app.db.user_by_name(name).await?.is_some() {
        return Err(ApiError::Conflict(format!("{name} is a user name")));
    }
    let t = app
        .db
        .insert_team(name, &caller.user_id, Role::TeamAdmin.name())
        .await
        .map_err(|e| match e {
            DbError::Conflict => ApiError::Conflict(format!("team {name} already exists")),
            e => e.into(),
        })?;
    Ok(Json(team_json(&app, t).await?))
}

/// A team with its members (members and administrators only).
#[utoipa::path(get, path = "/teams/{team}", tag = "teams",
    params(("team" = String, Path, description = "the team id, or its name")),
    responses((status = 200, body = Team), (status = 404)))]
async fn get_team(
    State(app): State<App>,
    caller: Caller,
    Path(team_id): Path<String>,
) -> ApiResult<Json<Team>> {
    caller.require_person()?;
    let t = team_for_member(&app, &caller, &team_id).await?;
    Ok(Json(team_json(&app, t).await?))
}

/// A team by id (or name) that the caller may read: members and platform administrators;
/// anyone else learns nothing (404).
async fn team_for_member(
    app: &App,
    caller: &Caller,
    key: &str,
) -> ApiResult<botbox_store::TeamRow> {
    let t = team_by_id_or_name(app, key, true).await?;
    if !caller.is_admin() && app.db.membership(&t.id, &caller.user_id).await?.is_none() {
        return Err(ApiError::not_found(format!("team {key}")));
    }
    Ok(t)
}

/// The documented routes address a team by id for GET and by name for DELETE on the same
/// path; both routes accept either, trying the documented one first.
async fn team_by_id_or_name(
    app: &App,
    key: &str,
    id_first: bool,
) -> ApiResult<botbox_store::TeamRow> {
    let first = if id_first {
        app.db.team_by_id(key).await?
    } else {
        app.db.team_by_name(key).await?
    };
    let found = match first {
        Some(t) => Some(t),
        None if id_first => app.db.team_by_name(key).await?,
        None => app.db.team_by_id(key).await?,
    };
    found.ok_or_else(|| ApiError::not_found(format!("team {key}")))
}

/// May the caller manage this team's membership? Team admins and platform admins may; other
/// members get 403; strangers learn nothing (404).
async fn require_team_admin(
    app: &App,
    caller: &Caller,
    team_id: &str,
    what: &str,
) -> ApiResult<()> {
    if caller.is_admin() {
        return Ok(());
    }
    match app.db.membership(team_id, &caller.user_id).await? {
        Some(r) if r == Role::TeamAdmin.name() => Ok(()),
        Some(_) => Err(ApiError::Forbidden),
        None => Err(ApiError::not_found(format!("team {what}"))),
    }
}

/// Deletes a team by name (its administrators only). A team that still owns projects is kept.
#[utoipa::path(delete, path = "/teams/{team}", tag = "teams",
    params(("team" = String, Path, description = "the team name, or its id")),
    responses((status = 200, body = Team), (status = 403), (status = 404), (status = 409)))]
async fn delete_team(
    State(app): State<App>,
    caller: Caller,
    Path(team_name): Path<String>,
) -> ApiResult<Json<Team>> {
    caller.require_person()?;
    let t = team_by_id_or_name(&app, &team_name, false).await?;
    require_team_admin(&app, &caller, &t.id, &team_name).await?;
    let n = app.db.count_owned_projects(&t.id).await?;
    if n > 0 {
        return Err(ApiError::Conflict(format!(
            "team {team_name} still owns {n} project(s)"
        )));
    }
    let out = team_json(&app, t.clone()).await?;
    app.db.delete_team(&t.id).await?;
    Ok(Json(out))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberRole {
    /// `teamAdmin`, `developer` or `viewer` (kata-cli's `teamMember` means `developer`).
    #[serde(alias = "roleId")]
    pub role: String,
}

/// Adds a user to a team, or changes their role (team administrators only).
#[utoipa::path(post, path = "/teams/{teamId}/users/{userId}", tag = "teams", request_body = MemberRole,
    params(("teamId" = String, Path), ("userId" = String, Path)),
    responses((status = 200, body = MemberRole), (status = 403), (status = 404)))]
async fn add_member(
    State(app): State<App>,
    caller: Caller,
    Path((team_id, user_id)): Path<(String, String)>,
    Body(req): Body<MemberRole>,
) -> ApiResult<Json<MemberRole>> {
    caller.require_person()?;
    if app.db.team_by_id(&team_id).await?.is_none() {
        return Err(ApiError::not_found(format!("team {team_id}")));
    }
    require_team_admin(&app, &caller, &team_id, &team_id).await?;
    let req = MemberRole {
        role: match req.role.as_str() {
            "teamMember" => "developer".into(),
            _ => req.role,
        },
    };
    // The path names the user by id (the documented form) or by name (kata-cli's
    // invite-member).
    let user_id = match app.db.user_by_id(&user_id).await? {
        Some(u) => u.id,
        None => match app.db.user_by_name(&user_id).await? {
            Some(u) => u.id,
            None => return Err(ApiError::not_found(format!("user {user_id}"))),
        },
    };
    if !TEAM_ROLE_NAMES.contains(&req.role.as_str()) {
        return Err(ApiError::bad(format!(
            "role: one of {} (got {:?})",
            TEAM_ROLE_NAMES.join(", "),
            req.role
        )));
    }
    if app.db.user_by_id(&user_id).await?.is_none() {
        return Err(ApiError::not_found(format!("user {user_id}")));
    }
    let granter = if caller.is_admin() {
        Role::Admin
    } else {
        Role::TeamAdmin
    };
    let role = Role::parse(&req.role).expect("checked above");
    if !auth::may_grant(granter, role) {
        return Err(ApiError::Forbidden);
    }
    // Demoting the last teamAdmin would leave the team without anyone to manage it; checked
    // in the same transaction as the change (concurrent demotions cannot both pass).
    if !app.db.set_member(&team_id, &user_id, &req.role).await? {
        return Err(ApiError::Conflict(format!(
            "user {user_id} is the last teamAdmin of team {team_id}"
        )));
    }
    Ok(Json(MemberRole { role: req.role }))
}

/// Removes a member from a team (team administrators, or the member itself leaving); the
/// member's team tokens are revoked with it. The last teamAdmin cannot be removed (409).
#[utoipa::path(delete, path = "/teams/{teamId}/users/{userId}", tag = "teams",
    params(("teamId" = String, Path), ("userId" = String, Path)),
    responses((status = 200, body = Member), (status = 403), (status = 404), (status = 409)))]
async fn remove_member(
    State(app): State<App>,
    caller: Caller,
    Path((team_id, user_id)): Path<(String, String)>,
) -> ApiResult<Json<Member>> {
    caller.require_person()?;
    if app.db.team_by_id(&team_id).await?.is_none() {
        return Err(ApiError::not_found(format!("team {team_id}")));
    }
    if caller.user_id != user_id {
        require_team_admin(&app, &caller, &team_id, &team_id).await?;
    }
    let member = app
        .db
        .team_members(&team_id)
        .await?
        .into_iter()
        .find(|m| m.user_id == user_id)
        .ok_or_else(|| ApiError::not_found(format!("member {user_id} of team {team_id}")))?;
    match app.db.remove_member(&team_id, &user_id).await? {
        botbox_store::RemoveMember::Removed => {}
        botbox_store::RemoveMember::NotAMember => {
            return Err(ApiError::not_found(format!(
                "member {user_id} of team {team_id}"
            )));
        }
        botbox_store::RemoveMember::LastAdmin => {
            return Err(ApiError::Conflict(format!(
                "user {user_id} is the last teamAdmin of team {team_id}"
            )));
        }
    }
    Ok(Json(Member {
        user_id: member.user_id,
        username: member.username,
        role: member.role_id.clone(),
        role_id: member.role_id,
    }))
}
