//! API keys: agent keys `sak_` (one environment) and workspace keys `sk-ws-`
//! (one team, or a user's own namespace). Prefix + 40 base62 characters; stored as SHA-256
//! (the token hash of `auth.rs`), shown once.

use crate::auth::token_hash;
use botbox_store::{ApiKeyRow, Db, DbResult, new_id, now_ms};

pub const AGENT_PREFIX: &str = "sak_";
pub const WORKSPACE_PREFIX: &str = "sk-ws-";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Agent,
    Workspace,
}

impl KeyKind {
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Agent => "agent",
            KeyKind::Workspace => "workspace",
        }
    }
    pub fn prefix(self) -> &'static str {
        match self {
            KeyKind::Agent => AGENT_PREFIX,
            KeyKind::Workspace => WORKSPACE_PREFIX,
        }
    }
    /// The kind a presented key claims by its prefix; `None` for anything else (rejected
    /// without a query).
    pub fn of(key: &str) -> Option<KeyKind> {
        let (kind, tail) = if let Some(t) = key.strip_prefix(AGENT_PREFIX) {
            (KeyKind::Agent, t)
        } else if let Some(t) = key.strip_prefix(WORKSPACE_PREFIX) {
            (KeyKind::Workspace, t)
        } else {
            return None;
        };
        (tail.len() == 40 && tail.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(kind)
    }
}

/// A new key of `kind`: the prefix and 40 random base62 characters (~238 bits).
pub fn new_key(kind: KeyKind) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut s = String::from(kind.prefix());
    for _ in 0..40 {
        s.push(ALPHABET[rand::random_range(0..ALPHABET.len())] as char);
    }
    s
}

/// What a list shows of a key: `sak_…` and its last four characters.
pub fn hint(key: &str) -> String {
    let kind = KeyKind::of(key).map_or("", |k| k.prefix());
    format!("{kind}…{}", &key[key.len().saturating_sub(4)..])
}

/// What a key is for, when creating one.
pub struct NewKey<'a> {
    pub kind: KeyKind,
    pub scope: &'a str,
    pub project_id: Option<&'a str>,
    pub owner_id: &'a str,
    pub name: &'a str,
    pub created_by: &'a str,
}

/// Creates and stores a key; returns the stored row and the key itself (shown once).
pub async fn create(db: &Db, k: NewKey<'_>) -> DbResult<(ApiKeyRow, String)> {
    let key = new_key(k.kind);
    let row = ApiKeyRow {
        id: format!("key_{}", new_id()),
        hash: token_hash(&key),
        kind: k.kind.name().into(),
        scope: k.scope.into(),
        project_id: k.project_id.map(str::to_owned),
        owner_id: k.owner_id.into(),
        name: k.name.into(),
        hint: hint(&key),
        created_at: now_ms(),
        created_by: k.created_by.into(),
        last_used_at: None,
        revoked_at: None,
    };
    db.insert_api_key(&row).await?;
    Ok((row, key))
}

/// The live key a bearer value names, if any: prefix checked first, then the hash looked up
/// (never cached, so a revocation is effective on the next request).
pub async fn authenticate(db: &Db, presented: &str) -> DbResult<Option<(KeyKind, ApiKeyRow)>> {
    let Some(kind) = KeyKind::of(presented) else {
        return Ok(None);
    };
    let Some(row) = db.live_api_key(&token_hash(presented)).await? else {
        return Ok(None);
    };
    if row.kind != kind.name() {
        return Ok(None);
    }
    Ok(Some((kind, row)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_their_prefix_and_are_recognised() {
        let a = new_key(KeyKind::Agent);
        let w = new_key(KeyKind::Workspace);
        assert!(a.starts_with("sak_") && a.len() == 44);
        assert!(w.starts_with("sk-ws-") && w.len() == 46);
        assert_eq!(KeyKind::of(&a), Some(KeyKind::Agent));
        assert_eq!(KeyKind::of(&w), Some(KeyKind::Workspace));
        assert_eq!(KeyKind::of("bbt_abc"), None);
        assert_eq!(KeyKind::of("sak_short"), None);
        assert_eq!(hint(&a), format!("sak_…{}", &a[40..]));
    }
}
