//! Which project a command acts on. Never a guess: an explicit `--project <id>` (or
//! `BOTBOX_PROJECT`) first, then the id the bot folder is bound to (`.botbox.json`, meant to
//! be committed), and only then the bot's name, looked up among the projects of the owner the
//! CLI acts for (the user, or the team of `switch-team`, or the workspace of a key). A name
//! found only under other owners the caller reaches is an error that lists them; an
//! administrator reaches another tenant's project only by its id, and is warned when it does.
//!
//! A folder's binding is written only where there is none: by `init`, `pull` (a new folder),
//! the first push by name of an unbound folder, and `bind`, the one command that replaces
//! one. `--project` acts once and never touches the file.

use super::{Ctx, enc};
use anyhow::{Context, Result, anyhow, bail};
use botbox_api_types::{Me, PageOf, Project, UserTeam};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;

/// The file in a bot folder that binds it to its project.
pub const BINDING_FILE: &str = ".botbox.json";

/// What `.botbox.json` holds.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// The project's id on the server (`null` until the first push).
    pub project_id: Option<String>,
    /// The project's name and owner when it was bound, for people reading the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The team the first push creates the project for (`init --team`); else the owner
    /// the CLI acts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
}

impl Binding {
    pub fn read(dir: &Path) -> Result<Option<Binding>> {
        let path = dir.join(BINDING_FILE);
        match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .with_context(|| format!("{}: not a project binding", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(BINDING_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", path.display()))
    }

    /// This binding pointing at `p`.
    pub fn bound_to(&self, p: &Project) -> Binding {
        Binding {
            project_id: Some(p.id.clone()),
            project: Some(p.name.clone()),
            owner: Some(p.owner.to_string()),
            team: self.team.clone(),
        }
    }
}

/// `mybot of user dev1 (id …)`: how every command names the project it acted on.
pub fn describe(p: &Project) -> String {
    format!("{} of {} ({})", p.name, p.owner, p.id)
}

/// Says on stderr which project a command acts on (stdout stays the command's answer).
pub fn announce(ctx: &Ctx, p: &Project) {
    if !ctx.json {
        eprintln!("project {}", describe(p));
    }
}

/// The project by id; `from` says where the id came from and `hint` what to do when it
/// cannot be reached, for the error.
/// Project `id` (named by `from`); when the server answered that it is not the caller's,
/// the error ends with `hint` (not when the server did not answer: the binding is not in
/// doubt then).
fn by_id(ctx: &Ctx, id: &str, from: &str, hint: &str) -> Result<Project> {
    ctx.call_as("GET", &format!("/projects/{}", enc(id)), None)
        .map_err(|e| {
            if e.downcast_ref::<super::Unreachable>().is_some() {
                return e;
            }
            anyhow!(
                "project {id} ({from}) is not one you can reach on {} ({e:#}){hint}",
                ctx.server
            )
        })
}

/// Every page of `GET /projects` with `query`.
pub(crate) fn all_projects(ctx: &Ctx, query: &str) -> Result<Vec<Project>> {
    let mut out = Vec::new();
    for page in 1.. {
        let p: PageOf<Project> = ctx.call_as(
            "GET",
            &format!("/projects?limit=100&page={page}{query}"),
            None,
        )?;
        let n = p.data.len();
        out.extend(p.data);
        if n < 100 {
            break;
        }
    }
    Ok(out)
}

/// The owner the CLI acts for: the team of a team token or a key's workspace, else the user.
fn acting_owner(ctx: &Ctx) -> Result<String> {
    let me: Me = ctx.call_as("GET", "/me", None)?;
    Ok(me.team_id.unwrap_or(me.user_id))
}

/// The project a command in `dir` (or on the bot `name`) acts on. With `create`, a project
/// the name does not find is created (for the binding's team, else the acting owner), and
/// an unbound folder is bound to the project found or created by name. A project named by
/// `--project` leaves the folder's binding as it is.
pub fn resolve(ctx: &Ctx, dir: Option<&Path>, name: &str, create: bool) -> Result<Project> {
    let binding = match dir {
        Some(d) => Binding::read(d)?,
        None => None,
    };
    if let Some(id) = &ctx.project {
        return Ok(announced(ctx, by_id(ctx, id, "--project", "")?));
    }
    let project = if let Some(id) = binding.as_ref().and_then(|b| b.project_id.clone()) {
        let p = by_id(
            ctx,
            &id,
            &format!(
                "{BINDING_FILE} in {}",
                dir.unwrap_or(Path::new(".")).display()
            ),
            &format!(
                "\nthe folder is bound to that project: act as its owner (`botbox switch user` or \
                 `botbox switch-team <team>`), name another with --project <id>, or remove \
                 {BINDING_FILE} to bind the folder again"
            ),
        )?;
        if p.name != name {
            eprintln!(
                "note: the bot is named {name}, the folder is bound to project {}",
                describe(&p)
            );
        }
        return Ok(announced(ctx, p));
    } else {
        by_name(ctx, binding.as_ref(), name, create)?
    };
    if let (Some(d), true) = (dir, create) {
        binding.unwrap_or_default().bound_to(&project).write(d)?;
    }
    Ok(announced(ctx, project))
}

fn announced(ctx: &Ctx, p: Project) -> Project {
    announce(ctx, &p);
    if !ctx.json
        && let Ok(Some(who)) = someone_elses(ctx, &p)
    {
        eprintln!(
            "warning: project {} belongs to {}, not to you or a team of yours: you act on it as an administrator",
            describe(&p),
            who
        );
    }
    p
}

/// The project's owner when it is neither the caller nor one of the caller's teams (an
/// administrator acting on another tenant's project).
fn someone_elses(ctx: &Ctx, p: &Project) -> Result<Option<String>> {
    let me: Me = ctx.call_as("GET", "/me", None)?;
    if p.owner.id == me.user_id || me.team_id.as_deref() == Some(p.owner.id.as_str()) {
        return Ok(None);
    }
    let teams: Vec<UserTeam> =
        ctx.call_as("GET", &format!("/users/{}/teams", enc(&me.user_id)), None)?;
    Ok((!teams.iter().any(|t| t.id == p.owner.id)).then(|| p.owner.to_string()))
}

/// The project a command acts on without reading the bot: `--project` when given (so the
/// command works outside a bot folder), else the folder's bot by [`resolve`].
pub fn of_folder(ctx: &Ctx, dir: &Path) -> Result<Project> {
    if let Some(id) = &ctx.project {
        return Ok(announced(ctx, by_id(ctx, id, "--project", "")?));
    }
    let (_, compiled) = super::load_valid(dir)?;
    resolve(ctx, Some(dir), &compiled.bot.name, false)
}

/// `botbox bind <projectId>`: binds the folder to that project, replacing any binding (the
/// only command that replaces one); the previous project is named.
pub fn bind(ctx: &Ctx, dir: &Path, id: &str) -> Result<()> {
    let p = by_id(ctx, id, "bind", "")?;
    let old = Binding::read(dir)?.unwrap_or_default();
    let was = old.project_id.clone();
    // A team the old binding named is the old project's: it does not come along.
    Binding {
        team: None,
        ..Binding::default()
    }
    .bound_to(&p)
    .write(dir)?;
    let note = match was {
        Some(w) if w != p.id => format!(" (was {w})"),
        _ => String::new(),
    };
    ctx.out(
        format!("Bound {} to project {}{note}", dir.display(), describe(&p)),
        json!({"project": p.id, "previous": old.project_id}),
    );
    Ok(())
}

/// The project named `name` of the owner the CLI acts for (or the binding's team).
fn by_name(ctx: &Ctx, binding: Option<&Binding>, name: &str, create: bool) -> Result<Project> {
    let team = binding.and_then(|b| b.team.as_deref());
    let owner = match team {
        // A team of the user's own: a name never reaches another tenant's projects, an
        // administrator's included (they act on those by id).
        Some(t) => super::people::my_team_id(ctx, t)?,
        None => acting_owner(ctx)?,
    };
    let mine = all_projects(ctx, &format!("&owner={}", enc(&owner)))?;
    if let Some(p) = mine.into_iter().find(|p| p.name == name) {
        return Ok(p);
    }
    let elsewhere: Vec<String> = all_projects(ctx, "")?
        .into_iter()
        .filter(|p| p.name == name)
        .map(|p| format!("  {} ({})", p.id, p.owner))
        .collect();
    if create && elsewhere.is_empty() {
        let mut body = json!({"name": name, "options": {"bot": true}});
        if team.is_some() {
            body["teamId"] = json!(owner);
        }
        return ctx.call_as("POST", "/projects", Some(&body));
    }
    if elsewhere.is_empty() {
        bail!("no project named {name} is yours: run `botbox push` first");
    }
    bail!(
        "no project named {name} is yours; other owners you work with have one:\n{}\n\
         name it: --project <id> for once, `botbox bind <id>` for this folder, or \
         `botbox switch-team <team>` to act for that team",
        elsewhere.join("\n")
    )
}

/// `botbox project list [--all]`: the projects the caller reaches (every tenant's with
/// `all`), by owner then name, each with its owner and id.
pub fn list(ctx: &Ctx, action: crate::commands::ProjectAction) -> Result<()> {
    let crate::commands::ProjectAction::List { all } = action;
    let mut projects = all_projects(ctx, if all { "&owner=all" } else { "" })?;
    projects.sort_by(|a, b| (a.owner.to_string(), &a.name).cmp(&(b.owner.to_string(), &b.name)));
    let lines: Vec<String> = projects
        .iter()
        .map(|p| format!("{:<24} {:<32} {}", p.name, p.owner.to_string(), p.id))
        .collect();
    let scope = if all {
        "every tenant's projects"
    } else {
        "the projects you reach"
    };
    ctx.out(
        format!(
            "{scope} ({})\n{}",
            projects.len(),
            super::listing(lines, "No projects.")
        ),
        serde_json::to_value(&projects)?,
    );
    Ok(())
}
