//! Projects and what hangs off them: bot revisions, drafts, deployment versions, environments
//! and channels. Every lookup below a project is keyed by the project id too, so an id from
//! another project never matches.

use super::{Db, DbError, DbResult, Page, new_id, now_ms};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ProjectRow {
    pub id: String,
    pub owner_id: String,
    pub name: String,
    pub label: Option<String>,
    pub description: Option<String>,
    pub options: String,
    pub bot_latest_revision: Option<String>,
    pub nlu_latest_revision: Option<String>,
    pub cms_latest_revision: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RevisionRow {
    pub id: String,
    pub project_id: String,
    pub seq: i64,
    pub version: String,
    pub source: String,
    pub compiled: String,
    pub created_at: i64,
    /// The validation warnings found at push, as a JSON list of strings.
    pub warnings: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DraftRow {
    pub draft_id: String,
    pub body: String,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeploymentRow {
    pub id: String,
    pub project_id: String,
    pub seq: i64,
    pub version: String,
    pub bot_revision: String,
    pub nlu_revision: Option<String>,
    pub cms_revision: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Who created it (a user's name, or a key with its owner); none before this was kept.
    pub deployed_by: Option<String>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EnvironmentRow {
    pub id: String,
    pub project_id: String,
    pub name: String,
    pub slug: String,
    pub deployment_version: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChannelRow {
    pub id: String,
    pub project_id: String,
    pub environment_id: String,
    pub name: String,
    pub kind: String,
    pub url: String,
    pub rpm_limit: Option<i64>,
    pub agent_id: Option<String>,
    pub options: String,
    pub created_at: i64,
}

const PROJECT_COLS: &str = "id, owner_id, name, label, description, options, bot_latest_revision, \
     nlu_latest_revision, cms_latest_revision, created_at, updated_at";
const REVISION_COLS: &str = "id, project_id, seq, version, source, compiled, created_at, warnings";
const DEPLOYMENT_COLS: &str = "id, project_id, seq, version, bot_revision, nlu_revision, \
     cms_revision, created_at, updated_at, deployed_by";
const ENV_COLS: &str = "id, project_id, name, slug, deployment_version, created_at";
const CHANNEL_COLS: &str = "id, project_id, environment_id, name, kind, url, rpm_limit, agent_id, \
     options, created_at";

/// A new project's fields.
#[derive(Debug, Clone)]
pub struct NewProject {
    pub owner_id: String,
    pub name: String,
    pub label: Option<String>,
    pub description: Option<String>,
    pub options: String,
}

/// A new or updated channel's fields.
#[derive(Debug, Clone)]
pub struct ChannelFields {
    pub name: String,
    pub kind: String,
    pub url: String,
    pub rpm_limit: Option<i64>,
    pub agent_id: Option<String>,
    pub options: String,
}

impl Db {
    pub async fn insert_project(&self, p: &NewProject) -> DbResult<ProjectRow> {
        let now = now_ms();
        let row = ProjectRow {
            id: new_id(),
            owner_id: p.owner_id.clone(),
            name: p.name.clone(),
            label: p.label.clone(),
            description: p.description.clone(),
            options: p.options.clone(),
            bot_latest_revision: None,
            nlu_latest_revision: None,
            cms_latest_revision: None,
            created_at: now,
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO projects (id, owner_id, name, label, description, options, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&row.id)
        .bind(&row.owner_id)
        .bind(&row.name)
        .bind(&row.label)
        .bind(&row.description)
        .bind(&row.options)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(row)
    }

    pub async fn project(&self, id: &str) -> DbResult<Option<ProjectRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {PROJECT_COLS} FROM projects WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Projects of one owner (`Some`), or of everyone (`None`), newest first.
    /// Projects newest first: of the given owners, or every project (`None`: an
    /// administrator's view of all tenants).
    pub async fn list_projects(
        &self,
        owners: Option<&[&str]>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<ProjectRow>> {
        let keys: &[&str] = owners.unwrap_or(&[]);
        let filter = match owners {
            None => String::new(),
            // No owner at all: nothing (an impossible id keeps the query's shape).
            Some([]) => "owner_id IS NULL".to_owned(),
            Some(o) => format!(
                "owner_id IN ({})",
                (1..=o.len())
                    .map(|i| format!("${i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let order = "created_at DESC, id";
        self.page(
            PROJECT_COLS,
            "projects",
            (&filter, keys),
            order,
            (limit, offset),
        )
        .await
    }

    pub async fn update_project(
        &self,
        id: &str,
        name: &str,
        label: Option<&str>,
        description: Option<&str>,
        options: &str,
    ) -> DbResult<()> {
        sqlx::query(
            "UPDATE projects SET name = $1, label = $2, description = $3, options = $4, updated_at = $5 WHERE id = $6",
        )
        .bind(name)
        .bind(label)
        .bind(description)
        .bind(options)
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(())
    }

    /// Stores a new revision with its validation `warnings` (a JSON list) and makes it the
    /// project's latest, in one transaction; a project without a description takes the bot's
    /// (`desc`). The
    /// sequence number is computed by the INSERT itself, so the transaction starts as a
    /// write (SQLite cannot upgrade a read snapshot that another writer has moved past).
    pub async fn insert_revision(
        &self,
        project_id: &str,
        id: &str,
        version: &str,
        source: &str,
        compiled: &str,
        (warnings, desc, pushed_by): (&str, Option<&str>, &str),
    ) -> DbResult<RevisionRow> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO bot_revisions (id, project_id, seq, version, source, compiled, created_at, warnings, pushed_by) \
             SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, $7, $8 FROM bot_revisions WHERE project_id = $2",
        )
        .bind(id)
        .bind(project_id)
        .bind(version)
        .bind(source)
        .bind(compiled)
        .bind(now)
        .bind(warnings)
        .bind(pushed_by)
        .execute(&mut *tx)
        .await
        .map_err(DbError::from_sqlx)?;
        sqlx::query(
            "UPDATE projects SET bot_latest_revision = $1, updated_at = $2, \
             description = COALESCE(NULLIF(description, ''), $4) WHERE id = $3",
        )
        .bind(id)
        .bind(now)
        .bind(project_id)
        .bind(desc.filter(|d| !d.trim().is_empty()))
        .execute(&mut *tx)
        .await?;
        let row: RevisionRow = sqlx::query_as(&format!(
            "SELECT {REVISION_COLS} FROM bot_revisions WHERE id = $1"
        ))
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await.map_err(DbError::from_sqlx)?;
        Ok(row)
    }

    pub async fn latest_revision(&self, project_id: &str) -> DbResult<Option<RevisionRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {REVISION_COLS} FROM bot_revisions WHERE project_id = $1 ORDER BY seq DESC LIMIT 1"
        ))
        .bind(project_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Replaces a revision's stored compiled form with one recompiled from its source (the
    /// stored one was of another format). The source, and so the revision, is unchanged.
    pub async fn store_recompiled(
        &self,
        project_id: &str,
        id: &str,
        compiled: &str,
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query("UPDATE bot_revisions SET compiled = $1 WHERE project_id = $2 AND id = $3")
            .bind(compiled)
            .bind(project_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn revision(&self, project_id: &str, id: &str) -> DbResult<Option<RevisionRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {REVISION_COLS} FROM bot_revisions WHERE project_id = $1 AND id = $2"
        ))
        .bind(project_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn revision_versions(&self, project_id: &str) -> DbResult<Vec<String>> {
        let rows: Vec<(String,)> =
            sqlx::query_as("SELECT version FROM bot_revisions WHERE project_id = $1")
                .bind(project_id)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    pub async fn draft(&self, project_id: &str) -> DbResult<Option<DraftRow>> {
        Ok(
            sqlx::query_as("SELECT draft_id, body FROM drafts WHERE project_id = $1")
                .bind(project_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Creates or replaces the project's draft; returns its id (kept across updates).
    pub async fn put_draft(&self, project_id: &str, body: &str) -> DbResult<String> {
        sqlx::query(
            "INSERT INTO drafts (project_id, draft_id, body, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (project_id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
        )
        .bind(project_id)
        .bind(new_id())
        .bind(body)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        let (id,): (String,) = sqlx::query_as("SELECT draft_id FROM drafts WHERE project_id = $1")
            .bind(project_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(id)
    }

    pub async fn delete_draft(&self, project_id: &str) -> DbResult<()> {
        sqlx::query("DELETE FROM drafts WHERE project_id = $1")
            .bind(project_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn insert_deployment(
        &self,
        project_id: &str,
        version: &str,
        bot_revision: &str,
        nlu_revision: Option<&str>,
        cms_revision: Option<&str>,
        deployed_by: &str,
    ) -> DbResult<DeploymentRow> {
        let now = now_ms();
        let id = new_id();
        // One statement: the sequence number comes with the insert (see insert_revision).
        sqlx::query(
            "INSERT INTO deployments (id, project_id, seq, version, bot_revision, nlu_revision, cms_revision, created_at, updated_at, deployed_by) \
             SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3, $4, $5, $6, $7, $7, $8 FROM deployments WHERE project_id = $2",
        )
        .bind(&id)
        .bind(project_id)
        .bind(version)
        .bind(bot_revision)
        .bind(nlu_revision)
        .bind(cms_revision)
        .bind(now)
        .bind(deployed_by)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(sqlx::query_as(&format!(
            "SELECT {DEPLOYMENT_COLS} FROM deployments WHERE id = $1"
        ))
        .bind(&id)
        .fetch_one(&self.pool)
        .await?)
    }

    pub async fn deployment(
        &self,
        project_id: &str,
        version: &str,
    ) -> DbResult<Option<DeploymentRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {DEPLOYMENT_COLS} FROM deployments WHERE project_id = $1 AND version = $2"
        ))
        .bind(project_id)
        .bind(version)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn latest_deployment(&self, project_id: &str) -> DbResult<Option<DeploymentRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {DEPLOYMENT_COLS} FROM deployments WHERE project_id = $1 ORDER BY seq DESC LIMIT 1"
        ))
        .bind(project_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn list_deployments(
        &self,
        project_id: &str,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<DeploymentRow>> {
        let filter = ("project_id = $1", &[project_id][..]);
        self.page(
            DEPLOYMENT_COLS,
            "deployments",
            filter,
            "seq DESC",
            (limit, offset),
        )
        .await
    }

    pub async fn update_deployment(
        &self,
        project_id: &str,
        version: &str,
        bot_revision: &str,
        nlu_revision: Option<&str>,
        cms_revision: Option<&str>,
    ) -> DbResult<()> {
        sqlx::query(
            "UPDATE deployments SET bot_revision = $1, nlu_revision = $2, cms_revision = $3, updated_at = $4 \
             WHERE project_id = $5 AND version = $6",
        )
        .bind(bot_revision)
        .bind(nlu_revision)
        .bind(cms_revision)
        .bind(now_ms())
        .bind(project_id)
        .bind(version)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn delete_deployment(&self, project_id: &str, version: &str) -> DbResult<()> {
        sqlx::query("DELETE FROM deployments WHERE project_id = $1 AND version = $2")
            .bind(project_id)
            .bind(version)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Environments of a project that use a deployment version.
    pub async fn environments_using(
        &self,
        project_id: &str,
        version: &str,
    ) -> DbResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT name FROM environments WHERE project_id = $1 AND deployment_version = $2 ORDER BY name",
        )
        .bind(project_id)
        .bind(version)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    pub async fn insert_environment(
        &self,
        project_id: &str,
        name: &str,
        slug: &str,
        deployment_version: &str,
    ) -> DbResult<EnvironmentRow> {
        let row = EnvironmentRow {
            id: new_id(),
            project_id: project_id.to_owned(),
            name: name.to_owned(),
            slug: slug.to_owned(),
            deployment_version: deployment_version.to_owned(),
            created_at: now_ms(),
        };
        sqlx::query(&format!(
            "INSERT INTO environments ({ENV_COLS}) VALUES ($1, $2, $3, $4, $5, $6)"
        ))
        .bind(&row.id)
        .bind(&row.project_id)
        .bind(&row.name)
        .bind(&row.slug)
        .bind(&row.deployment_version)
        .bind(row.created_at)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(row)
    }

    pub async fn environment(
        &self,
        project_id: &str,
        id: &str,
    ) -> DbResult<Option<EnvironmentRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ENV_COLS} FROM environments WHERE project_id = $1 AND id = $2"
        ))
        .bind(project_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn list_environments(
        &self,
        project_id: &str,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<EnvironmentRow>> {
        let filter = ("project_id = $1", &[project_id][..]);
        self.page(
            ENV_COLS,
            "environments",
            filter,
            "created_at, id",
            (limit, offset),
        )
        .await
    }

    pub async fn set_environment_version(
        &self,
        project_id: &str,
        id: &str,
        version: &str,
    ) -> DbResult<bool> {
        // Not to the version its running canary runs: that is a promotion (the canary's
        // figures would compare a version with itself).
        let r = sqlx::query(
            "UPDATE environments SET deployment_version = $1 WHERE project_id = $2 AND id = $3 \
             AND NOT EXISTS (SELECT 1 FROM canaries c WHERE c.environment_id = $3 \
             AND c.ended_at IS NULL AND c.dep_version = $1)",
        )
        .bind(version)
        .bind(project_id)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    /// Deletes an environment with its channels and their sessions.
    pub async fn delete_environment(&self, project_id: &str, id: &str) -> DbResult<()> {
        let mut tx = self.pool.begin().await?;
        for table in ["sessions", "misunderstood", "replays"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE environment_id = $1"))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM channels WHERE project_id = $1 AND environment_id = $2")
            .bind(project_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM environments WHERE project_id = $1 AND id = $2")
            .bind(project_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn insert_channel(
        &self,
        project_id: &str,
        environment_id: &str,
        f: &ChannelFields,
    ) -> DbResult<ChannelRow> {
        let row = ChannelRow {
            id: new_id(),
            project_id: project_id.to_owned(),
            environment_id: environment_id.to_owned(),
            name: f.name.clone(),
            kind: f.kind.clone(),
            url: f.url.clone(),
            rpm_limit: f.rpm_limit,
            agent_id: f.agent_id.clone(),
            options: f.options.clone(),
            created_at: now_ms(),
        };
        sqlx::query(&format!(
            "INSERT INTO channels ({CHANNEL_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(&row.id)
        .bind(&row.project_id)
        .bind(&row.environment_id)
        .bind(&row.name)
        .bind(&row.kind)
        .bind(&row.url)
        .bind(row.rpm_limit)
        .bind(&row.agent_id)
        .bind(&row.options)
        .bind(row.created_at)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(row)
    }

    pub async fn channel(
        &self,
        project_id: &str,
        environment_id: &str,
        id: &str,
    ) -> DbResult<Option<ChannelRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {CHANNEL_COLS} FROM channels WHERE project_id = $1 AND environment_id = $2 AND id = $3"
        ))
        .bind(project_id)
        .bind(environment_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn list_channels(
        &self,
        project_id: &str,
        environment_id: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<ChannelRow>> {
        let env = environment_id.unwrap_or("");
        let filter = (
            "project_id = $1 AND ($2 = '' OR environment_id = $2)",
            &[project_id, env][..],
        );
        self.page(
            CHANNEL_COLS,
            "channels",
            filter,
            "created_at, id",
            (limit, offset),
        )
        .await
    }

    pub async fn update_channel(
        &self,
        project_id: &str,
        id: &str,
        f: &ChannelFields,
    ) -> DbResult<()> {
        sqlx::query(
            "UPDATE channels SET name = $1, kind = $2, url = $3, rpm_limit = $4, agent_id = $5, options = $6 \
             WHERE project_id = $7 AND id = $8",
        )
        .bind(&f.name)
        .bind(&f.kind)
        .bind(&f.url)
        .bind(f.rpm_limit)
        .bind(&f.agent_id)
        .bind(&f.options)
        .bind(project_id)
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(())
    }

    pub async fn delete_channel(&self, project_id: &str, id: &str) -> DbResult<()> {
        sqlx::query("DELETE FROM channels WHERE project_id = $1 AND id = $2")
            .bind(project_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A channel by its id alone: the webhook receiver's lookup.
    pub async fn channel_by_id(&self, id: &str) -> DbResult<Option<ChannelRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {CHANNEL_COLS} FROM channels WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn count_owned_projects(&self, owner_id: &str) -> DbResult<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM projects WHERE owner_id = $1")
            .bind(owner_id)
            .fetch_one(&self.pool)
            .await?;
        Ok(n)
    }
}

/// The statements that delete a project and everything below it, children first, each bound
/// to the project id as `$1`.
const DELETE_PROJECT: &[&str] = &[
    "DELETE FROM outbox WHERE channel_id IN (SELECT id FROM channels WHERE project_id = $1)",
    "DELETE FROM schedules WHERE channel_id IN (SELECT id FROM channels WHERE project_id = $1)",
    "DELETE FROM inbound_seen WHERE channel_id IN (SELECT id FROM channels WHERE project_id = $1)",
    "DELETE FROM sessions WHERE environment_id IN (SELECT id FROM environments WHERE project_id = $1)",
    "DELETE FROM transcripts WHERE project_id = $1",
    "DELETE FROM rollups WHERE project_id = $1",
    "DELETE FROM agent_steers WHERE run_id IN (SELECT r.id FROM agent_runs r JOIN environments e ON e.id = r.environment_id WHERE e.project_id = $1)",
    "DELETE FROM agent_run_chunks WHERE run_id IN (SELECT r.id FROM agent_runs r JOIN environments e ON e.id = r.environment_id WHERE e.project_id = $1)",
    "DELETE FROM agent_runs WHERE environment_id IN (SELECT id FROM environments WHERE project_id = $1)",
    "DELETE FROM agent_messages WHERE conversation_id IN (SELECT c.id FROM agent_conversations c JOIN environments e ON e.id = c.environment_id WHERE e.project_id = $1)",
    "DELETE FROM agent_conversations WHERE environment_id IN (SELECT id FROM environments WHERE project_id = $1)",
    "DELETE FROM api_keys WHERE project_id = $1",
    "DELETE FROM channels WHERE project_id = $1",
    "DELETE FROM canaries WHERE project_id = $1",
    "DELETE FROM misunderstood WHERE project_id = $1",
    "DELETE FROM replays WHERE project_id = $1",
    "DELETE FROM environments WHERE project_id = $1",
    "DELETE FROM deployments WHERE project_id = $1",
    "DELETE FROM drafts WHERE project_id = $1",
    "DELETE FROM bot_revisions WHERE project_id = $1",
    "DELETE FROM cms_revisions WHERE project_id = $1",
    "DELETE FROM nlu_training_data WHERE nlu_id IN (SELECT id FROM nlus WHERE project_id = $1)",
    "DELETE FROM nlu_models WHERE project_id = $1",
    "DELETE FROM nlus WHERE project_id = $1",
    "DELETE FROM projects WHERE id = $1",
];

/// A revision without its documents, for lists.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RevisionInfo {
    pub id: String,
    pub version: String,
    pub created_at: i64,
    /// The validation warnings found at push, as a JSON list of strings.
    pub warnings: Option<String>,
    pub pushed_by: Option<String>,
}

impl Db {
    /// Deletes a project with everything below it (revisions, deployments, environments,
    /// channels with their sessions, outbox and schedules, transcripts, keys, agent
    /// conversations, NLUs and their models), in one transaction.
    pub async fn delete_project(&self, project_id: &str) -> DbResult<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        for stmt in DELETE_PROJECT {
            sqlx::query(stmt).bind(project_id).execute(&mut *tx).await?;
        }
        tx.commit().await.map_err(DbError::from_sqlx)?;
        Ok(())
    }

    /// The project's bot revisions, newest first.
    pub async fn list_revisions(
        &self,
        project_id: &str,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<RevisionInfo>> {
        let filter = ("project_id = $1", &[project_id][..]);
        let cols = "id, version, created_at, warnings, pushed_by";
        self.page(cols, "bot_revisions", filter, "seq DESC", (limit, offset))
            .await
    }

    /// The caller's project named `name` (names are unique per owner).
    pub async fn project_by_name(
        &self,
        owner_id: &str,
        name: &str,
    ) -> DbResult<Option<ProjectRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {PROJECT_COLS} FROM projects WHERE owner_id = $1 AND name = $2"
        ))
        .bind(owner_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The projects named `name` among `owners`' (oldest first).
    pub async fn projects_named(&self, owners: &[&str], name: &str) -> DbResult<Vec<ProjectRow>> {
        if owners.is_empty() {
            return Ok(vec![]);
        }
        let list = (2..owners.len() + 2)
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {PROJECT_COLS} FROM projects WHERE name = $1 AND owner_id IN ({list}) ORDER BY created_at, id"
        );
        let mut q = sqlx::query_as(&sql).bind(name);
        for o in owners {
            q = q.bind(*o);
        }
        Ok(q.fetch_all(&self.pool).await?)
    }
}

impl Db {
    /// How many projects an owner has, and how many of them have a bot.
    pub async fn owner_project_counts(&self, owner_id: &str) -> DbResult<(i64, i64)> {
        let (projects, bots): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), COUNT(bot_latest_revision) FROM projects WHERE owner_id = $1",
        )
        .bind(owner_id)
        .fetch_one(&self.pool)
        .await?;
        Ok((projects, bots))
    }
}

impl Db {
    pub async fn deployment_by_id(&self, id: &str) -> DbResult<Option<DeploymentRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {DEPLOYMENT_COLS} FROM deployments WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Rolls a project back to deployment `d`: every environment on a newer deployment version
    /// moves to `d`'s version. Returns the names of the environments moved.
    pub async fn rollback_environments(
        &self,
        d: &DeploymentRow,
        by: &str,
    ) -> DbResult<Vec<String>> {
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        let moved: Vec<(String,)> = sqlx::query_as(
            "SELECT name FROM environments WHERE project_id = $1 AND deployment_version IN \
             (SELECT version FROM deployments WHERE project_id = $1 AND seq > $2) ORDER BY name",
        )
        .bind(&d.project_id)
        .bind(d.seq)
        .fetch_all(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE environments SET deployment_version = $1 WHERE project_id = $2 AND deployment_version IN \
             (SELECT version FROM deployments WHERE project_id = $2 AND seq > $3)",
        )
        .bind(&d.version)
        .bind(&d.project_id)
        .bind(d.seq)
        .execute(&mut *tx)
        .await?;
        // A canary of a version newer than the one rolled back to, or of that one (the
        // environments moved to it run it for everyone now), ends with it.
        sqlx::query(
            "UPDATE canaries SET ended_at = $1, outcome = 'aborted', reason = $2, ended_by = $3 \
             WHERE project_id = $4 AND ended_at IS NULL AND (dep_version = $6 OR dep_version IN \
             (SELECT version FROM deployments WHERE project_id = $4 AND seq > $5))",
        )
        .bind(now_ms())
        .bind(format!("the project was rolled back to {}", d.version))
        .bind(by)
        .bind(&d.project_id)
        .bind(d.seq)
        .bind(&d.version)
        .execute(&mut *tx)
        .await?;
        tx.commit().await.map_err(DbError::from_sqlx)?;
        Ok(moved.into_iter().map(|r| r.0).collect())
    }
}
