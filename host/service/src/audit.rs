//! The audit trail's rules: who a change is attributed to ([`Actor`]), what an entry's
//! outcome is, who may read which entries ([`scope_for`]), and the one way entries are
//! written ([`record`]: a failure to write is logged and counted for the operator, never
//! turned into a failure of the change it records). Entries are written by the API's
//! audit layer for every change request, and here for botbox's own changes.

use crate::auth::{Acting, Principal, Role};
use botbox_store::{AuditScope, Db, NewAuditEntry, now_ms};

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// `user`, `key` or `system`.
    pub kind: &'static str,
    pub id: String,
    /// A user's name, a key's name (`key:<name>`), or `system`.
    pub name: String,
    /// A key's owner (team or user id).
    pub owner: Option<String>,
    /// A key's owner as people read it (`team acme`), when known.
    pub owner_name: Option<String>,
}

impl Actor {
    /// botbox itself (an automatic rollback).
    pub fn system() -> Actor {
        Actor {
            kind: "system",
            id: "system".into(),
            name: "system".into(),
            owner: None,
            owner_name: None,
        }
    }

    /// The actor behind a credential: a person (login or team token) or a workspace key
    /// (with its owner's name when the caller knows it).
    pub fn of(user_id: &str, username: &str, acting: &Acting, owner_name: Option<&str>) -> Actor {
        match acting {
            Acting::WorkspaceKey { workspace, key_id } => Actor {
                kind: "key",
                id: key_id.clone(),
                name: username.to_owned(),
                owner: Some(workspace.clone()),
                owner_name: owner_name.map(str::to_owned),
            },
            _ => Actor {
                kind: "user",
                id: user_id.to_owned(),
                name: username.to_owned(),
                owner: None,
                owner_name: None,
            },
        }
    }

    /// How the trail, a revision, a deployment or a CMS revision names who made it: the
    /// user's name, or `key:<name> (<owner>)` (the owner's name, else its id).
    pub fn label(&self) -> String {
        match (&self.owner_name, &self.owner) {
            (Some(o), _) | (None, Some(o)) => format!("{} ({o})", self.name),
            (None, None) => self.name.clone(),
        }
    }
}

/// An entry's outcome from its HTTP status: `ok`, `refused` (401, 403, 404: no right to
/// it), `failed` (other 4xx: bad input or a conflict) or `error` (5xx).
pub fn outcome(status: u16) -> &'static str {
    match status {
        200..=399 => "ok",
        401 | 403 | 404 => "refused",
        400..=499 => "failed",
        _ => "error",
    }
}

/// Which entries `who` may read: an administrator (by login) all; anyone else the entries
/// they made and those about their own resources and the teams they administer.
pub async fn scope_for(db: &Db, who: Principal<'_>) -> botbox_store::DbResult<AuditScope> {
    if who.role == Role::Admin && *who.acting == Acting::User {
        return Ok(AuditScope::All);
    }
    let mut owners = vec![who.user_id.to_owned()];
    for t in db.user_teams(who.user_id).await? {
        let admin_of = match who.acting {
            Acting::Team(id) => *id == t.id,
            _ => true,
        };
        if admin_of && Role::parse(&t.role_id) == Some(Role::TeamAdmin) {
            owners.push(t.id);
        }
    }
    Ok(AuditScope::Of {
        actor: who.user_id.to_owned(),
        owners,
    })
}

/// Appends an entry timed now. A failed write is logged and counted
/// (`botbox_audit_write_errors_total`): the change it records has happened.
pub async fn record(db: &Db, actor: &Actor, mut e: NewAuditEntry) {
    e.at = now_ms();
    e.actor_kind = actor.kind;
    e.actor_id = actor.id.clone();
    e.actor_name = actor.label();
    e.actor_owner = actor.owner.clone();
    if let Err(err) = db.audit_log().record(&e).await {
        metrics::counter!("botbox_audit_write_errors_total").increment(1);
        tracing::error!(action = %e.action, resource = %e.resource_id, error = %err,
            "could not record an audit entry");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_by_status() {
        assert_eq!(outcome(200), "ok");
        assert_eq!(outcome(204), "ok");
        assert_eq!(outcome(403), "refused");
        assert_eq!(outcome(404), "refused");
        assert_eq!(outcome(401), "refused");
        assert_eq!(outcome(400), "failed");
        assert_eq!(outcome(409), "failed");
        assert_eq!(outcome(500), "error");
    }

    #[test]
    fn a_key_is_named_with_its_owner() {
        let acting = Acting::WorkspaceKey {
            workspace: "t1".into(),
            key_id: "k1".into(),
        };
        let key = Actor::of("k1", "key:ci", &acting, Some("team acme"));
        assert_eq!(
            (key.kind, key.label().as_str()),
            ("key", "key:ci (team acme)")
        );
        let unnamed = Actor::of("k1", "key:ci", &acting, None);
        assert_eq!(unnamed.label(), "key:ci (t1)");
        assert_eq!(Actor::of("u1", "dev1", &Acting::User, None).label(), "dev1");
    }
}
