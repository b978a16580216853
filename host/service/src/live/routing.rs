//! Writes that change where a channel's messages go. Each one forgets the routes this
//! process cached (and, for a project's deletion, its ready revisions) right after the write,
//! so the next message reads the new state: the API cannot make such a change and forget to
//! drop the cache, because it has no other way to make it. Another replica's cache expires on
//! its own within a second. The canaries' writes (`canary.rs`) follow the same rule.

use super::Live;
use botbox_store::{ChannelFields, DbResult, DeploymentRow};

impl Live {
    /// Moves the environments on a later deployment back to `d` (ending a canary of a later
    /// version, by `by`); their names.
    pub async fn rollback_to(&self, d: &DeploymentRow, by: &str) -> DbResult<Vec<String>> {
        let moved = self.db.rollback_environments(d, by).await?;
        self.routes_changed();
        Ok(moved)
    }

    /// Points deployment `version` at other revisions.
    pub async fn update_deployment(
        &self,
        project_id: &str,
        version: &str,
        bot_revision: &str,
        nlu_revision: Option<&str>,
        cms_revision: Option<&str>,
    ) -> DbResult<()> {
        self.db
            .update_deployment(
                project_id,
                version,
                bot_revision,
                nlu_revision,
                cms_revision,
            )
            .await?;
        self.routes_changed();
        Ok(())
    }

    pub async fn delete_deployment(&self, project_id: &str, version: &str) -> DbResult<()> {
        self.db.delete_deployment(project_id, version).await?;
        self.routes_changed();
        Ok(())
    }

    /// Runs environment `id` on deployment `version`; false when its running canary runs
    /// that version (a promotion's job: the environment is left as it was).
    pub async fn set_environment_version(
        &self,
        project_id: &str,
        id: &str,
        version: &str,
    ) -> DbResult<bool> {
        let moved = self
            .db
            .set_environment_version(project_id, id, version)
            .await?;
        self.routes_changed();
        Ok(moved)
    }

    /// Deletes an environment with its channels and sessions (transcripts are kept).
    pub async fn delete_environment(&self, project_id: &str, id: &str) -> DbResult<()> {
        self.db.delete_environment(project_id, id).await?;
        self.db
            .canaries()
            .end_for_environment(id, botbox_store::now_ms())
            .await?;
        self.routes_changed();
        Ok(())
    }

    pub async fn update_channel(
        &self,
        project_id: &str,
        id: &str,
        f: &ChannelFields,
    ) -> DbResult<()> {
        self.db.update_channel(project_id, id, f).await?;
        self.routes_changed();
        Ok(())
    }

    pub async fn delete_channel(&self, project_id: &str, id: &str) -> DbResult<()> {
        self.db.delete_channel(project_id, id).await?;
        self.routes_changed();
        Ok(())
    }

    /// Deletes a project and everything below it; its webhooks stop at once.
    pub async fn delete_project(&self, project_id: &str) -> DbResult<()> {
        self.db.delete_project(project_id).await?;
        self.forget_projects(&[project_id.to_owned()]);
        Ok(())
    }
}
