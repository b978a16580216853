//! Replays (`replays`): an environment's recorded conversations run again on a bot revision,
//! at most one running per project; and the recorded conversations they read, from the
//! transcripts (a conversation begins at an incoming line marked `starts`).

use super::{Db, DbError, DbResult, TranscriptRow, new_id};

/// The replays' store, reached with [`Db::replays`].
#[derive(Clone)]
pub struct Replays {
    db: Db,
}

impl Db {
    /// Projects' replays.
    pub fn replays(&self) -> Replays {
        Replays { db: self.clone() }
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ReplayRow {
    pub id: String,
    pub project_id: String,
    pub environment_id: String,
    pub bot_revision: String,
    pub cms_revision: Option<String>,
    /// `running`, `done` or `failed`.
    pub status: String,
    pub requested_by: String,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    pub conversations: i64,
    pub identical: i64,
    pub differing: i64,
    pub failed: i64,
    /// The per-conversation results as a JSON list.
    pub results: Option<String>,
    pub error: Option<String>,
}

const COLS: &str = "id, project_id, environment_id, bot_revision, cms_revision, status, \
     requested_by, created_at, finished_at, conversations, identical, differing, failed, \
     results, error";

/// A replay asked for.
#[derive(Debug, Clone)]
pub struct NewReplay<'a> {
    pub project_id: &'a str,
    pub environment_id: &'a str,
    pub bot_revision: &'a str,
    pub cms_revision: Option<&'a str>,
    pub requested_by: &'a str,
    pub at: i64,
}

/// How a replay ended.
#[derive(Debug, Clone, Default)]
pub struct ReplayEnd {
    /// `done` or `failed`.
    pub status: &'static str,
    pub conversations: i64,
    pub identical: i64,
    pub differing: i64,
    pub failed: i64,
    pub results: String,
    pub error: Option<String>,
    pub at: i64,
}

/// Where a recorded conversation begins: its user's first line of a session.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ConversationStart {
    /// Its first line's id.
    pub id: String,
    pub channel_id: String,
    pub user_id: String,
    pub created_at: i64,
}

/// Replays kept per project: starting one deletes the oldest beyond these.
pub const REPLAYS_KEPT: i64 = 20;

/// Transcript lines read per query while gathering conversations.
const LINES_PER_READ: i64 = 5_000;

impl Replays {
    /// Starts a replay: [`DbError::Conflict`] while another of the project's runs (the
    /// unique partial index decides, in every replica). The project's replays beyond the
    /// newest [`REPLAYS_KEPT`] go.
    pub async fn start(&self, r: &NewReplay<'_>) -> DbResult<ReplayRow> {
        let id = new_id();
        let _turn = self.db.write_turn().await;
        sqlx::query(
            "INSERT INTO replays (id, project_id, environment_id, bot_revision, cms_revision, \
             status, requested_by, created_at) VALUES ($1, $2, $3, $4, $5, 'running', $6, $7)",
        )
        .bind(&id)
        .bind(r.project_id)
        .bind(r.environment_id)
        .bind(r.bot_revision)
        .bind(r.cms_revision)
        .bind(r.requested_by)
        .bind(r.at)
        .execute(&self.db.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        // Only the newest REPLAYS_KEPT of a project are kept.
        sqlx::query(
            "DELETE FROM replays WHERE project_id = $1 AND status <> 'running' AND id NOT IN \
             (SELECT id FROM replays WHERE project_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2)",
        )
        .bind(r.project_id)
        .bind(REPLAYS_KEPT)
        .execute(&self.db.pool)
        .await?;
        drop(_turn);
        self.get(r.project_id, &id)
            .await?
            .ok_or(DbError::Sqlx(sqlx::Error::RowNotFound))
    }

    /// The project's replay `id`.
    pub async fn get(&self, project_id: &str, id: &str) -> DbResult<Option<ReplayRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {COLS} FROM replays WHERE project_id = $1 AND id = $2"
        ))
        .bind(project_id)
        .bind(id)
        .fetch_optional(&self.db.pool)
        .await?)
    }

    /// Ends a running replay with its results.
    pub async fn finish(&self, id: &str, end: &ReplayEnd) -> DbResult<()> {
        let _turn = self.db.write_turn().await;
        sqlx::query(
            "UPDATE replays SET status = $2, conversations = $3, identical = $4, differing = $5, \
             failed = $6, results = $7, error = $8, finished_at = $9 \
             WHERE id = $1 AND status = 'running'",
        )
        .bind(id)
        .bind(end.status)
        .bind(end.conversations)
        .bind(end.identical)
        .bind(end.differing)
        .bind(end.failed)
        .bind(&end.results)
        .bind(end.error.as_deref())
        .bind(end.at)
        .execute(&self.db.pool)
        .await?;
        Ok(())
    }

    /// Ends the project's replays marked running since before `before` (the process that
    /// ran them stopped): a replay takes seconds, so one that old will not finish.
    pub async fn fail_abandoned(&self, project_id: &str, before: i64, at: i64) -> DbResult<u64> {
        let _turn = self.db.write_turn().await;
        let done = sqlx::query(
            "UPDATE replays SET status = 'failed', error = 'the server stopped during the replay', \
             finished_at = $3 WHERE project_id = $1 AND status = 'running' AND created_at < $2",
        )
        .bind(project_id)
        .bind(before)
        .bind(at)
        .execute(&self.db.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// The latest `last` conversation starts of environment `env` within `[since, until]`,
    /// newest first.
    pub async fn starts(
        &self,
        env: &str,
        (since, until): (i64, i64),
        last: i64,
    ) -> DbResult<Vec<ConversationStart>> {
        Ok(sqlx::query_as(
            "SELECT id, channel_id, user_id, created_at FROM transcripts \
             WHERE environment_id = $1 AND starts IS NOT NULL AND created_at >= $2 \
             AND created_at <= $3 ORDER BY created_at DESC, id DESC LIMIT $4",
        )
        .bind(env)
        .bind(since)
        .bind(until)
        .bind(last)
        .fetch_all(&self.db.pool)
        .await?)
    }

    /// The transcript lines (with their replay records) of the users in `users` (channel,
    /// user) in environment `env_name` of `project` timed from `since` to `until`, read a
    /// page at a time so that other users' lines are never held. A user's lines are in the
    /// order of their ids (time-ordered in the process that wrote them): their times can
    /// put a step's replies after the user's next message when groups commit close together.
    pub async fn lines_of(
        &self,
        (project, env_name): (&str, &str),
        users: &std::collections::HashSet<(String, String)>,
        (since, until): (i64, i64),
    ) -> DbResult<Vec<ReplayLine>> {
        let mut out = vec![];
        let mut after = (since - 1, String::new());
        loop {
            let page: Vec<ReplayLine> = sqlx::query_as(
                "SELECT id, environment_name, channel_id, user_id, direction, message, flow, \
                 intent, state, created_at, step_us, dep_version, replay, starts, outcome \
                 FROM transcripts WHERE project_id = $1 AND environment_name = $2 \
                 AND (created_at > $3 OR (created_at = $3 AND id > $4)) AND created_at <= $5 \
                 ORDER BY created_at, id LIMIT $6",
            )
            .bind(project)
            .bind(env_name)
            .bind(after.0)
            .bind(&after.1)
            .bind(until)
            .bind(LINES_PER_READ)
            .fetch_all(&self.db.pool)
            .await?;
            let full = page.len() as i64 == LINES_PER_READ;
            if let Some(l) = page.last() {
                after = (l.line.created_at, l.line.id.clone());
            }
            out.extend(
                page.into_iter().filter(|l| {
                    users.contains(&(l.line.channel_id.clone(), l.line.user_id.clone()))
                }),
            );
            if !full {
                return Ok(out);
            }
        }
    }
}

/// A transcript line with what replaying it needs.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ReplayLine {
    #[sqlx(flatten)]
    pub line: TranscriptRow,
    pub replay: Option<String>,
    pub starts: Option<i64>,
    pub outcome: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_replay_runs_at_a_time_per_project() {
        let (_dir, db) = crate::test_sqlite().await;
        let replays = db.replays();
        let ask = |project| NewReplay {
            project_id: project,
            environment_id: "e",
            bot_revision: "r",
            cms_revision: None,
            requested_by: "alice",
            at: 10,
        };
        let first = replays.start(&ask("p")).await.unwrap();
        assert_eq!(first.status, "running");
        assert!(matches!(
            replays.start(&ask("p")).await,
            Err(DbError::Conflict)
        ));
        // Another project's replay runs beside it.
        replays.start(&ask("q")).await.unwrap();
        let end = ReplayEnd {
            status: "done",
            conversations: 3,
            identical: 3,
            results: "[]".into(),
            at: 20,
            ..ReplayEnd::default()
        };
        replays.finish(&first.id, &end).await.unwrap();
        let done = replays.get("p", &first.id).await.unwrap().unwrap();
        assert_eq!((done.status.as_str(), done.identical), ("done", 3));
        assert!(replays.get("q", &first.id).await.unwrap().is_none());
        let second = replays.start(&ask("p")).await.unwrap();
        // A replay left running by a stopped process is failed by the next start's check.
        assert_eq!(replays.fail_abandoned("p", 11, 30).await.unwrap(), 1);
        let abandoned = replays.get("p", &second.id).await.unwrap().unwrap();
        assert_eq!(abandoned.status, "failed");
        // Only the newest REPLAYS_KEPT stay.
        for at in 100..100 + REPLAYS_KEPT {
            let r = replays.start(&NewReplay { at, ..ask("p") }).await.unwrap();
            replays
                .finish(
                    &r.id,
                    &ReplayEnd {
                        status: "done",
                        ..ReplayEnd::default()
                    },
                )
                .await
                .unwrap();
        }
        assert!(replays.get("p", &first.id).await.unwrap().is_none());
        let (kept,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM replays WHERE project_id = 'p'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(kept, REPLAYS_KEPT);
    }
}
