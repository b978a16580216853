//! Why a use case of the project API (publishing a revision, creating a project or an NLU)
//! did not happen, in words the person who can fix it reads. The API maps each kind to its
//! status; the service never speaks HTTP.

use botbox_store::DbError;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is invalid: what is wrong and where, one problem a line.
    #[error("{0}")]
    Invalid(String),
    /// It collides with what exists (a name or a version taken).
    #[error("{0}")]
    Conflict(String),
    /// The owner's storage quota is reached; nothing was written.
    #[error("{0}")]
    QuotaReached(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<DbError> for ServiceError {
    fn from(e: DbError) -> Self {
        ServiceError::Internal(e.into())
    }
}
