//! The audit trail (`audit_log`): one row per change made through the API, and per change
//! botbox makes by itself. Append-only here: there is no update, and rows leave only by the
//! pruner's window ([`crate::Expired::AuditLog`]).

use super::step::Arg;
use super::{Db, DbResult, Page, new_row_id};

/// The audit trail's store, reached with [`Db::audit_log`].
#[derive(Clone)]
pub struct AuditLog {
    db: Db,
}

impl Db {
    /// The audit trail.
    pub fn audit_log(&self) -> AuditLog {
        AuditLog { db: self.clone() }
    }
}

/// An entry to record (its id is given on insert).
#[derive(Debug, Clone, Default)]
pub struct NewAuditEntry {
    pub at: i64,
    /// `user`, `key` or `system`.
    pub actor_kind: &'static str,
    pub actor_id: String,
    pub actor_name: String,
    /// A key's owner.
    pub actor_owner: Option<String>,
    pub address: String,
    pub action: String,
    pub resource_kind: String,
    pub resource_id: String,
    pub project_id: Option<String>,
    /// The owner of what was changed (a user or team id): who may read the entry.
    pub owner_id: Option<String>,
    /// `ok`, `refused`, `failed` or `error`.
    pub outcome: &'static str,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AuditRow {
    pub id: String,
    pub at: i64,
    pub actor_kind: String,
    pub actor_id: String,
    pub actor_name: String,
    pub actor_owner: Option<String>,
    pub address: String,
    pub action: String,
    pub resource_kind: String,
    pub resource_id: String,
    pub project_id: Option<String>,
    pub owner_id: Option<String>,
    pub outcome: String,
    pub detail: Option<String>,
}

const COLS: &str = "id, at, actor_kind, actor_id, actor_name, actor_owner, address, action, \
     resource_kind, resource_id, project_id, owner_id, outcome, detail";

/// Which entries a reader may see: all (an administrator), or those they made and those
/// about what `owners` own (the reader, and the teams they administer).
#[derive(Debug, Clone)]
pub enum AuditScope {
    All,
    Of { actor: String, owners: Vec<String> },
}

/// The filters of `GET /audit`, each optional.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub project_id: Option<String>,
    pub actor: Option<String>,
    pub action: Option<String>,
    /// Unix ms, inclusive.
    pub since: Option<i64>,
    /// Unix ms, exclusive.
    pub until: Option<i64>,
}

/// `s` with LIKE's wildcards (and the escape character) escaped by `\`.
fn like_escaped(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// Adds an argument; its placeholder.
fn arg(b: Arg<'static>, binds: &mut Vec<Arg<'static>>) -> String {
    binds.push(b);
    format!("${}", binds.len())
}

/// The filter (`WHERE`'s condition, empty for every row) of a scope and filter, with its
/// arguments in order.
fn clause(scope: &AuditScope, f: &AuditFilter) -> (String, Vec<Arg<'static>>) {
    let mut parts = Vec::new();
    let mut binds = Vec::new();
    if let AuditScope::Of { actor, owners } = scope {
        let mut any = vec![format!(
            "actor_id = {}",
            arg(Arg::from(actor.clone()), &mut binds)
        )];
        for o in owners {
            any.push(format!(
                "owner_id = {}",
                arg(Arg::from(o.clone()), &mut binds)
            ));
        }
        parts.push(format!("({})", any.join(" OR ")));
    }
    for (col, v) in [("project_id", &f.project_id), ("actor_id", &f.actor)] {
        if let Some(v) = v {
            parts.push(format!("{col} = {}", arg(Arg::from(v.clone()), &mut binds)));
        }
    }
    // An action, or a family of them: `canary` is `canary.start`, `canary.rollback`, ...
    if let Some(a) = &f.action {
        let exact = arg(Arg::from(a.clone()), &mut binds);
        let family = arg(Arg::from(format!("{}.%", like_escaped(a))), &mut binds);
        parts.push(format!(
            "(action = {exact} OR action LIKE {family} ESCAPE '\\')"
        ));
    }
    if let Some(s) = f.since {
        parts.push(format!("at >= {}", arg(Arg::from(s), &mut binds)));
    }
    if let Some(u) = f.until {
        parts.push(format!("at < {}", arg(Arg::from(u), &mut binds)));
    }
    (parts.join(" AND "), binds)
}

impl AuditLog {
    /// Appends one entry.
    pub async fn record(&self, e: &NewAuditEntry) -> DbResult<()> {
        // In SQLite's write turn, like every write: no meeting with the busy handler.
        let _turn = self.db.write_turn().await;
        sqlx::query(&format!(
            "INSERT INTO audit_log ({COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(new_row_id())
        .bind(e.at)
        .bind(e.actor_kind)
        .bind(&e.actor_id)
        .bind(&e.actor_name)
        .bind(&e.actor_owner)
        .bind(&e.address)
        .bind(&e.action)
        .bind(&e.resource_kind)
        .bind(&e.resource_id)
        .bind(&e.project_id)
        .bind(&e.owner_id)
        .bind(e.outcome)
        .bind(&e.detail)
        .execute(&self.db.pool)
        .await?;
        Ok(())
    }

    /// The entries `scope` may see that match `f`, newest first.
    pub async fn list(
        &self,
        scope: &AuditScope,
        f: &AuditFilter,
        paging: (i64, i64),
    ) -> DbResult<Page<AuditRow>> {
        let (filter, args) = clause(scope, f);
        self.db
            .page_with(
                COLS,
                "audit_log",
                (&filter, &args),
                "at DESC, id DESC",
                paging,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_their_own_actions_and_what_their_owners_own() {
        let scope = AuditScope::Of {
            actor: "u1".into(),
            owners: vec!["u1".into(), "t1".into()],
        };
        let f = AuditFilter {
            action: Some("bot.push".into()),
            since: Some(5),
            ..Default::default()
        };
        let (sql, binds) = clause(&scope, &f);
        assert_eq!(
            sql,
            "(actor_id = $1 OR owner_id = $2 OR owner_id = $3) \
             AND (action = $4 OR action LIKE $5 ESCAPE '\\') AND at >= $6"
        );
        assert_eq!(binds.len(), 6);
        assert_eq!(like_escaped("a_b%c"), r"a\_b\%c");
        assert_eq!(clause(&AuditScope::All, &AuditFilter::default()).0, "");
    }
}
