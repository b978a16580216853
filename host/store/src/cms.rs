//! CMS revisions: a project's published content documents, immutable, numbered in order.
//! Every lookup is keyed by the project id too, so an id from another project never matches.

use super::{Db, DbError, DbResult, Page, now_ms};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CmsRevisionRow {
    pub id: String,
    pub project_id: String,
    pub seq: i64,
    /// The content as JSON (`{"pages": …, "faqs": …}`).
    pub document: String,
    pub changelog: String,
    /// The user (or workspace key) that published it.
    pub published_by: String,
    pub created_at: i64,
}

/// A revision without its document, for lists.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CmsRevisionInfo {
    pub id: String,
    pub seq: i64,
    pub changelog: String,
    pub published_by: String,
    pub created_at: i64,
}

const COLS: &str = "id, project_id, seq, document, changelog, published_by, created_at";

impl Db {
    /// Stores a CMS revision as the project's newest (`cms_latest_revision`), in one
    /// transaction.
    pub async fn insert_cms_revision(
        &self,
        project_id: &str,
        id: &str,
        document: &str,
        changelog: &str,
        published_by: &str,
    ) -> DbResult<CmsRevisionRow> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO cms_revisions (id, project_id, seq, document, changelog, published_by, created_at) \
             SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6 FROM cms_revisions WHERE project_id = $2",
        )
        .bind(id)
        .bind(project_id)
        .bind(document)
        .bind(changelog)
        .bind(published_by)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(DbError::from_sqlx)?;
        sqlx::query("UPDATE projects SET cms_latest_revision = $1, updated_at = $2 WHERE id = $3")
            .bind(id)
            .bind(now)
            .bind(project_id)
            .execute(&mut *tx)
            .await?;
        let row: CmsRevisionRow =
            sqlx::query_as(&format!("SELECT {COLS} FROM cms_revisions WHERE id = $1"))
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
        tx.commit().await.map_err(DbError::from_sqlx)?;
        Ok(row)
    }

    pub async fn cms_revision(
        &self,
        project_id: &str,
        id: &str,
    ) -> DbResult<Option<CmsRevisionRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLS} FROM cms_revisions WHERE project_id = $1 AND id = $2"
        ))
        .bind(project_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The project's CMS revisions, newest first.
    pub async fn list_cms_revisions(
        &self,
        project_id: &str,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<CmsRevisionInfo>> {
        let filter = ("project_id = $1", &[project_id][..]);
        let cols = "id, seq, changelog, published_by, created_at";
        self.page(cols, "cms_revisions", filter, "seq DESC", (limit, offset))
            .await
    }
}
