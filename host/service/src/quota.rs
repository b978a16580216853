//! The storage quota (`--storage-quota-mb`): whether a tenant stores more than the operator
//! allows. Writes that add storage (bot and CMS revisions, tasks' artifacts) ask first and
//! are refused with both figures; a channel's message is never refused for it, so no
//! provider message is lost to a quota.

use crate::error::ServiceError;
use crate::live::Live;
use botbox_store::DbError;

/// A tenant at or past its quota: what it stores and the quota, in bytes.
pub struct OverQuota {
    pub used: i64,
    pub quota: i64,
}

/// Whether tenant `owner` is at or past the quota (never without one).
pub async fn over(live: &Live, owner: &str) -> Result<Option<OverQuota>, DbError> {
    let Some(quota) = live.cfg.storage_quota_bytes else {
        return Ok(None);
    };
    let used = live.db.over_quota(owner, quota).await?;
    Ok(used.map(|used| OverQuota { used, quota }))
}

/// Refuses a new revision of tenant `owner` once its storage reaches the quota, naming both
/// figures (and logged at warn for the operator).
pub async fn check(live: &Live, owner: &str) -> Result<(), ServiceError> {
    let Some(OverQuota { used, quota }) = over(live, owner).await? else {
        return Ok(());
    };
    tracing::warn!(
        tenant = owner,
        used,
        quota,
        "storage quota reached: a push was refused"
    );
    Err(ServiceError::QuotaReached(format!(
        "storage quota reached: this account stores {used} bytes of its {quota} \
         (GET /storage says what); shorten the transcript retention or ask the operator"
    )))
}
