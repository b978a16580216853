//! Accounts and access: password and token hashing, roles and their permissions.
//!
//! Permissions are named as the project API names them: `<action>_own_<resource>`
//! (the resource belongs to the caller's owner scope) and `<action>_any_<resource>` (any
//! owner). Roles are fixed in code and grant sets of permissions; users have a platform role,
//! team members a role in the team.
//!
//! Owner scope ([`Acting`], [`role_on`]): `_own_` covers the resources of the user or the
//! user's team. A login token reaches the user's own projects with the user's platform role
//! and each team's projects with the user's role in that team (checked live, so a removed
//! member loses them at once); a team token (`POST /tokens`, the CLI's switch-team) acts for
//! its team alone; a workspace key acts for its workspace (a team, or one user's own
//! namespace) with developer rights and never administers anything. Only a platform
//! administrator's login token has `_any_`: every tenant's projects.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use sha2::{Digest, Sha256};

/// What a permission allows to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Create,
    List,
    Read,
    Update,
    Delete,
}

/// What a permission is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Projects,
    Deployments,
    Environments,
    Channels,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::List => "list",
            Action::Read => "read",
            Action::Update => "update",
            Action::Delete => "delete",
        }
    }
}

impl Resource {
    pub fn name(self) -> &'static str {
        match self {
            Resource::Projects => "projects",
            Resource::Deployments => "deployments",
            Resource::Environments => "environments",
            Resource::Channels => "channels",
        }
    }
}

/// How far a caller's permission reaches for one action on one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reach {
    None,
    Own,
    Any,
}

/// A built-in role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Platform administrator: every `_any_` permission, and user management.
    Admin,
    /// Builds bots: every `_own_` permission. The default for new users and team members.
    Developer,
    /// Looks only: `list_own_*` and `read_own_*`.
    Viewer,
    /// A team's administrator: every `_own_` permission, and the team's membership.
    TeamAdmin,
}

pub const ROLE_NAMES: &[&str] = &["admin", "developer", "viewer", "teamAdmin"];
/// Roles a team member can hold.
pub const TEAM_ROLE_NAMES: &[&str] = &["teamAdmin", "developer", "viewer"];

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        Some(match s {
            "admin" => Role::Admin,
            "developer" => Role::Developer,
            "viewer" => Role::Viewer,
            "teamAdmin" => Role::TeamAdmin,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Developer => "developer",
            Role::Viewer => "viewer",
            Role::TeamAdmin => "teamAdmin",
        }
    }

    /// The reach this role grants for `action` on `resource`.
    pub fn reach(self, action: Action, _resource: Resource) -> Reach {
        match self {
            Role::Admin => Reach::Any,
            Role::Developer | Role::TeamAdmin => Reach::Own,
            Role::Viewer => match action {
                Action::List | Action::Read => Reach::Own,
                _ => Reach::None,
            },
        }
    }

    /// Every permission name this role grants, as the project API spells them.
    pub fn permissions(self) -> Vec<String> {
        let mut out = Vec::new();
        for r in [
            Resource::Projects,
            Resource::Deployments,
            Resource::Environments,
            Resource::Channels,
        ] {
            for a in [
                Action::Create,
                Action::List,
                Action::Read,
                Action::Update,
                Action::Delete,
            ] {
                match self.reach(a, r) {
                    Reach::None => {}
                    Reach::Own => out.push(format!("{}_own_{}", a.name(), r.name())),
                    Reach::Any => {
                        out.push(format!("{}_own_{}", a.name(), r.name()));
                        out.push(format!("{}_any_{}", a.name(), r.name()));
                    }
                }
            }
        }
        out
    }
}

/// What a credential acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acting {
    /// A login token: the user, and the teams they belong to.
    User,
    /// A team token: that team only, with the user's role in it.
    Team(String),
    /// A workspace key (`sk-ws-…`): the projects of its workspace (a team id, or a user id
    /// for a user's own namespace), with developer rights (a user's namespace: no more than
    /// that user's). No account, team or key administration, whatever the role of the
    /// person who created it.
    WorkspaceKey { workspace: String, key_id: String },
}

impl Acting {
    /// Whether a person holds the credential (a login or team token), as opposed to a key
    /// held by automation. Account, team and key administration require a person.
    pub fn is_person(&self) -> bool {
        !matches!(self, Acting::WorkspaceKey { .. })
    }
}

/// Who is asking, as [`role_on`] needs it: the user behind the credential, what it acts
/// for, and its live role (platform role for a login token, team role for a team token,
/// developer for a workspace key).
#[derive(Debug, Clone, Copy)]
pub struct Principal<'a> {
    pub user_id: &'a str,
    pub acting: &'a Acting,
    pub role: Role,
}

/// The role `who` holds over the resources of `owner_id` (a user or team id), or `None`
/// when it has no relation to that owner: callers answer 404 then, so a stranger learns
/// nothing about another tenant's resources. A team's role is read from storage on every
/// call: a removed member or a lowered role takes effect on the next request.
pub async fn role_on(
    db: &botbox_store::Db,
    who: Principal<'_>,
    owner_id: &str,
) -> botbox_store::DbResult<Option<Role>> {
    Ok(match who.acting {
        Acting::WorkspaceKey { workspace, .. } => (workspace == owner_id).then_some(who.role),
        Acting::Team(team) => (team == owner_id).then_some(who.role),
        Acting::User if who.role == Role::Admin => Some(Role::Admin),
        Acting::User if who.user_id == owner_id => Some(who.role),
        Acting::User => db
            .membership(owner_id, who.user_id)
            .await?
            .and_then(|r| Role::parse(&r)),
    })
}

/// Whether `role` may do `action` on `resource` at all (on an owner it has a relation to).
pub fn allows(role: Role, action: Action, resource: Resource) -> bool {
    role.reach(action, resource) != Reach::None
}

/// The shortest password any account may have, the first administrator's included.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Checks a password against the rule every account shares.
pub fn check_password(password: &str) -> Result<(), String> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(format!("at least {MIN_PASSWORD_CHARS} characters"));
    }
    Ok(())
}

/// An argon2id PHC string for a password.
pub fn hash_password(password: &str) -> String {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>()).expect("16 bytes encode");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 hashes any password")
        .to_string()
}

pub fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// The threads that hash passwords. argon2id with the default parameters takes 19 MiB and
/// tens of milliseconds per hash: 96 concurrent wrong-password logins on tokio's blocking
/// pool take 1.9 GB, and even capped, the 19 MiB blocks stay cached in the allocator arena
/// of every blocking thread that has hashed once (hundreds of MB). Here `threads` long-lived
/// threads do all the hashing (so at most that many arenas hold such blocks), up to `queue`
/// jobs wait their turn, and past that a caller is refused at once (the handler answers 503).
pub struct PasswordGate {
    jobs: std::sync::mpsc::SyncSender<Box<dyn FnOnce() + Send>>,
}

impl PasswordGate {
    pub fn new(threads: usize, queue: usize) -> PasswordGate {
        let (jobs, rx) = std::sync::mpsc::sync_channel::<Box<dyn FnOnce() + Send>>(queue);
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("botbox-password-{i}"))
                .spawn(move || {
                    loop {
                        let job = rx.lock().unwrap().recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                })
                .expect("starting a password thread");
        }
        PasswordGate { jobs }
    }

    /// Queues `job` for a password thread; `None` when too many jobs already wait.
    pub fn submit<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Option<tokio::sync::oneshot::Receiver<T>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .try_send(Box::new(move || {
                let _ = tx.send(job());
            }))
            .ok()?;
        Some(rx)
    }

    /// Runs `job` on a password thread; `None` when too many jobs already wait.
    pub async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        self.submit(job)?.await.ok()
    }
}

/// May a user with this platform role create a team? Creating a team makes the creator its
/// `teamAdmin`, with every `_own_` permission in the team's name: only a role that already
/// holds them for itself (developer, admin) may, so no role gains rights by it.
pub fn may_create_team(platform_role: Role) -> bool {
    platform_role.reach(Action::Create, Resource::Projects) != Reach::None
}

/// May a member holding `granter` in a team give `role` to someone? Only a role the granter
/// holds or one below it: a teamAdmin grants any team role, nobody else grants any.
pub fn may_grant(granter: Role, role: Role) -> bool {
    match granter {
        Role::Admin | Role::TeamAdmin => true,
        Role::Developer | Role::Viewer => {
            let _ = role;
            false
        }
    }
}

/// A new bearer token: `bbt_` and 40 random base62 characters (~238 bits).
pub fn new_token() -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut s = String::from("bbt_");
    for _ in 0..40 {
        s.push(ALPHABET[rand::random_range(0..ALPHABET.len())] as char);
    }
    s
}

/// How tokens are stored and looked up: SHA-256, hex. The token's entropy makes a slow hash
/// unnecessary, and a fast one lets the lookup be an index hit.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A password for the first admin account: 24 random base62 characters.
pub fn new_password() -> String {
    new_token()[4..28].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_only_themselves() {
        let h = hash_password("correct horse");
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("correct horsE", &h));
        assert!(!verify_password("x", "not a phc string"));
    }

    #[test]
    fn only_roles_that_create_may_create_teams() {
        assert!(may_create_team(Role::Developer));
        assert!(may_create_team(Role::Admin));
        assert!(!may_create_team(Role::Viewer));
        for r in [Role::Admin, Role::Developer, Role::Viewer, Role::TeamAdmin] {
            assert!(!may_grant(Role::Viewer, r));
            assert!(!may_grant(Role::Developer, r));
            assert!(may_grant(Role::TeamAdmin, r));
        }
    }

    #[tokio::test]
    async fn the_password_gate_refuses_work_past_its_threads_and_queue() {
        // One thread and room for one waiting job.
        let g = PasswordGate::new(1, 1);
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let first = g
            .submit(move || {
                let _ = started_tx.send(());
                held.recv().unwrap();
                1
            })
            .unwrap();
        started.await.unwrap();
        // The thread is busy: one job waits, the next is refused at once.
        let second = g.submit(|| 2).expect("room for one waiting job");
        assert!(g.submit(|| 3).is_none());
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap(), 1);
        assert_eq!(second.await.unwrap(), 2);
        assert_eq!(g.run(|| 4).await, Some(4));
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert_eq!(a.len(), 44);
        assert_eq!(token_hash(&a).len(), 64);
        assert_ne!(token_hash(&a), a);
    }

    #[test]
    fn role_permissions_follow_the_documented_names() {
        let dev = Role::Developer.permissions();
        assert!(dev.contains(&"create_own_projects".to_string()));
        assert!(!dev.iter().any(|p| p.contains("_any_")));
        let viewer = Role::Viewer.permissions();
        assert!(viewer.contains(&"read_own_channels".to_string()));
        assert!(!viewer.contains(&"create_own_channels".to_string()));
        assert!(
            Role::Admin
                .permissions()
                .contains(&"delete_any_deployments".to_string())
        );
        for n in ROLE_NAMES {
            assert_eq!(Role::parse(n).unwrap().name(), *n);
        }
    }
}
