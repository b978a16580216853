//! People: passwords, accounts and teams through the server's API, so that nothing needs a
//! shell on the server. Team commands act with the user's own token (not a team token):
//! creating and managing teams is the user's business, whichever team the CLI acts for.

use super::{Ctx, UserTeam, enc, prompt_secret};
use anyhow::{Result, anyhow, bail};
use botbox_api_types::{Account, TeamUser};
use serde_json::{Value as Json, json};

/// The user's own token: `BOTBOX_TOKEN` when set, else the stored login's.
fn user_token(ctx: &Ctx) -> Result<String> {
    if let Some(t) = super::env_token() {
        return Ok(t);
    }
    ctx.config
        .user_token
        .clone()
        .ok_or_else(|| anyhow!("not logged in: run `botbox login` first"))
}

pub(crate) fn user_id(ctx: &Ctx) -> Result<String> {
    ctx.config
        .user_id
        .clone()
        .ok_or_else(|| anyhow!("not logged in: run `botbox login` first"))
}

/// Calls the API with the user's own token.
pub(crate) fn as_user(ctx: &Ctx, method: &str, path: &str, body: Option<&Json>) -> Result<Json> {
    ctx.call_with(method, path, body, Some(&user_token(ctx)?))
}

/// An account's id by name (administrators see every account, disabled ones too).
fn account_id(ctx: &Ctx, name: &str) -> Result<String> {
    let u = as_user(ctx, "GET", &format!("/users/{}", enc(name)), None)
        .map_err(|e| anyhow!("user {name}: {e}"))?;
    u["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no user {name}"))
}

/// Changes the logged-in user's password, asked for on the terminal with echo off: the
/// current one, then the new one twice. The CLI's own token stays valid, every other token
/// of the account is revoked.
pub fn passwd(ctx: &Ctx) -> Result<()> {
    let current = prompt_secret("current password: ")?;
    let new = prompt_secret("new password: ")?;
    let again = prompt_secret("new password again: ")?;
    if new != again {
        bail!("the two new passwords differ; the password was not changed");
    }
    as_user(
        ctx,
        "PUT",
        "/me/password",
        Some(&json!({"currentPassword": current, "newPassword": new})),
    )?;
    ctx.out(
        "Password changed (sessions elsewhere were signed out)",
        json!({"changed": true}),
    );
    Ok(())
}

/// Every account with its role and teams (administrators only).
pub fn user_list(ctx: &Ctx) -> Result<()> {
    let users: Vec<Account> = serde_json::from_value(as_user(ctx, "GET", "/users", None)?)
        .map_err(|e| anyhow!("GET /users: {e}"))?;
    let lines: Vec<String> = users
        .iter()
        .map(|u| {
            let teams = if u.teams.is_empty() {
                String::new()
            } else {
                format!("  teams: {}", u.teams.join(", "))
            };
            let off = if u.disabled { "  (disabled)" } else { "" };
            format!("{}  {}  {}{off}{teams}", u.username, u.role_id, u.id)
        })
        .collect();
    ctx.out(lines.join("\n"), serde_json::to_value(&users)?);
    Ok(())
}

/// The members of a team with their roles (a member's view; an administrator's of any team).
pub fn team_members(ctx: &Ctx, team: &str) -> Result<()> {
    let tid = team_id(ctx, team)?;
    let members: Vec<TeamUser> = serde_json::from_value(as_user(
        ctx,
        "GET",
        &format!("/teams/{}/users", enc(&tid)),
        None,
    )?)
    .map_err(|e| anyhow!("GET /teams/{tid}/users: {e}"))?;
    let lines: Vec<String> = members
        .iter()
        .map(|m| format!("{}  {}", m.username, m.role_id))
        .collect();
    ctx.out(
        format!("team {team}:\n{}", lines.join("\n")),
        serde_json::to_value(&members)?,
    );
    Ok(())
}

/// Adds an account on the server (administrators only).
pub fn user_add(ctx: &Ctx, username: &str, password: &str, role: &str) -> Result<()> {
    let u = as_user(
        ctx,
        "POST",
        "/users",
        Some(&json!({"username": username, "password": password, "roleId": role})),
    )?;
    ctx.out(
        format!(
            "added user {} ({}), role {}",
            u["username"].as_str().unwrap_or(username),
            u["id"].as_str().unwrap_or(""),
            u["roleId"].as_str().unwrap_or(role)
        ),
        u,
    );
    Ok(())
}

/// Sets another account's password (administrators only); its tokens are revoked.
pub fn user_reset_password(ctx: &Ctx, username: &str, password: &str) -> Result<()> {
    let id = account_id(ctx, username)?;
    as_user(
        ctx,
        "PUT",
        &format!("/users/{id}/password"),
        Some(&json!({"password": password})),
    )?;
    ctx.out(
        format!("password of {username} reset (its sessions were signed out)"),
        json!({"user": username, "reset": true}),
    );
    Ok(())
}

/// Disables (or enables again) an account (administrators only).
pub fn user_set_disabled(ctx: &Ctx, username: &str, disabled: bool) -> Result<()> {
    let id = account_id(ctx, username)?;
    let what = if disabled { "disable" } else { "enable" };
    as_user(ctx, "POST", &format!("/users/{id}/{what}"), None)?;
    ctx.out(
        format!("{username} {what}d"),
        json!({"user": username, "disabled": disabled}),
    );
    Ok(())
}

/// The logged-in user's teams.
fn my_teams(ctx: &Ctx) -> Result<Vec<UserTeam>> {
    let me = user_id(ctx)?;
    let teams = as_user(ctx, "GET", &format!("/users/{me}/teams"), None)?;
    serde_json::from_value(teams).map_err(|e| anyhow!("GET /users/{me}/teams: {e}"))
}

/// The id of team `name` (a team's name is unique on its server): one of the user's teams,
/// or any team for an administrator.
pub(crate) fn team_id(ctx: &Ctx, name: &str) -> Result<String> {
    let t = as_user(ctx, "GET", &format!("/teams/{}", enc(name)), None).map_err(|e| {
        if e.to_string().contains(": 404") {
            anyhow!("no team {name} that you can see (yours: `botbox team list`)")
        } else {
            e
        }
    })?;
    t["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("GET /teams/{name}: the answer has no id"))
}

/// The id of the user's own team `name` (a member's, whatever the user's role on the
/// server): for what must not reach other tenants by name.
pub(crate) fn my_team_id(ctx: &Ctx, name: &str) -> Result<String> {
    my_teams(ctx)?
        .into_iter()
        .find(|t| t.name == name)
        .map(|t| t.id)
        .ok_or_else(|| anyhow!("you are not a member of a team named {name} (`botbox team list`)"))
}

/// Creates a team; its creator is its teamAdmin.
pub fn team_create(ctx: &Ctx, name: &str) -> Result<()> {
    let t = as_user(ctx, "POST", "/teams", Some(&json!({"name": name})))?;
    ctx.out(
        format!("Created team {name}; `botbox switch-team {name}` acts for it"),
        t,
    );
    Ok(())
}

/// Adds a user to a team with a role (or changes their role).
pub fn team_invite(ctx: &Ctx, team: &str, username: &str, role: &str) -> Result<()> {
    let tid = team_id(ctx, team)?;
    let uid = account_id_any(ctx, username)?;
    as_user(
        ctx,
        "POST",
        &format!("/teams/{tid}/users/{uid}"),
        Some(&json!({"role": role})),
    )?;
    ctx.out(
        format!("{username} is a {role} of team {team}"),
        json!({"team": team, "user": username, "role": role}),
    );
    Ok(())
}

/// Removes a user from a team.
pub fn team_remove(ctx: &Ctx, team: &str, username: &str) -> Result<()> {
    let tid = team_id(ctx, team)?;
    let uid = account_id_any(ctx, username)?;
    as_user(ctx, "DELETE", &format!("/teams/{tid}/users/{uid}"), None)?;
    ctx.out(
        format!("{username} removed from team {team}"),
        json!({"team": team, "user": username}),
    );
    Ok(())
}

/// The user's teams with their role.
pub fn team_list(ctx: &Ctx) -> Result<()> {
    let teams = my_teams(ctx)?;
    let human = if teams.is_empty() {
        "no teams (`botbox team create <name>` makes one)".to_owned()
    } else {
        teams
            .iter()
            .map(|t| format!("{}  ({}, {} members)", t.name, t.role_id, t.members))
            .collect::<Vec<_>>()
            .join("\n")
    };
    ctx.out(human, serde_json::to_value(&teams)?);
    Ok(())
}

/// Any signed-in user may look another up by name (what an invitation needs).
fn account_id_any(ctx: &Ctx, name: &str) -> Result<String> {
    let u = as_user(ctx, "GET", &format!("/users/getInfo/{}", enc(name)), None)
        .map_err(|e| anyhow!("user {name}: {e}"))?;
    match u["id"].as_str() {
        Some(id) => Ok(id.to_owned()),
        None => bail!("no user {name}"),
    }
}
