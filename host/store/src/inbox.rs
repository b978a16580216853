//! The misunderstood inbox (`misunderstood`, and the transcripts' `miss` column): a channel
//! user's text message whose step fell back carries its group's key on its incoming line;
//! a group is counted from those lines when asked (so it lives as long as they do), and what
//! an author decided about it (`labelled`, `dismissed`) is a row of its own.

use super::{Db, DbResult, Page, step::Arg};

/// The inbox's store, reached with [`Db::inbox`].
#[derive(Clone)]
pub struct Inbox {
    db: Db,
}

impl Db {
    /// The misunderstood inbox of every environment.
    pub fn inbox(&self) -> Inbox {
        Inbox { db: self.clone() }
    }
}

/// One group of the inbox: the lines of an environment that share a `miss` key.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboxGroup {
    pub miss: String,
    pub count: i64,
    pub first_seen: i64,
    pub last_seen: i64,
    /// The intent and flow the group's latest-sorting line fell to (none: no intent).
    pub intent: Option<String>,
    pub flow: Option<String>,
    pub sample_user: String,
    /// One of the group's messages, as transcripts store it.
    pub sample: String,
    /// `new`, `labelled` or `dismissed`.
    pub status: String,
    pub nlu_id: Option<String>,
    pub label: Option<String>,
}

/// What an author decided about a group.
#[derive(Debug, Clone)]
pub struct InboxDecision<'a> {
    pub project_id: &'a str,
    /// `labelled` or `dismissed`.
    pub status: &'a str,
    pub nlu_id: Option<&'a str>,
    pub intent: Option<&'a str>,
    pub by: &'a str,
    pub at: i64,
}

/// The groups of environment `$1`, with their decisions.
const GROUPS: &str = "(SELECT miss, COUNT(*) AS n, MIN(created_at) AS first_seen, \
     MAX(created_at) AS last_seen, MAX(intent) AS intent, MAX(flow) AS flow, \
     MAX(user_id) AS sample_user, MAX(message) AS sample \
     FROM transcripts WHERE environment_id = $1 AND miss IS NOT NULL GROUP BY miss) g \
     LEFT JOIN misunderstood m ON m.environment_id = $1 AND m.miss = g.miss";

const COLS: &str = "g.miss AS miss, g.n AS count, g.first_seen AS first_seen, \
     g.last_seen AS last_seen, g.intent AS intent, g.flow AS flow, g.sample_user AS sample_user, \
     g.sample AS sample, COALESCE(m.status, 'new') AS status, m.nlu_id AS nlu_id, \
     m.intent AS label";

/// Texts of a group read for labelling at most.
pub const LABEL_TEXTS_MAX: i64 = 1_000;

impl Inbox {
    /// A page of environment `env`'s groups (of one status, or all), most frequent first.
    pub async fn list(
        &self,
        env: &str,
        status: Option<&str>,
        (limit, offset): (i64, i64),
    ) -> DbResult<Page<InboxGroup>> {
        let mut args: Vec<Arg> = vec![env.into()];
        let filter = match status {
            Some(s) => {
                args.push(s.into());
                "COALESCE(m.status, 'new') = $2"
            }
            None => "",
        };
        let order = "g.n DESC, g.last_seen DESC, g.miss";
        self.db
            .page_with(COLS, GROUPS, (filter, &args), order, (limit, offset))
            .await
    }

    /// Environment `env`'s group `miss`, if any line of it is kept.
    pub async fn group(&self, env: &str, miss: &str) -> DbResult<Option<InboxGroup>> {
        let sql = format!("SELECT {COLS} FROM {GROUPS} WHERE g.miss = $2");
        Ok(sqlx::query_as(&sql)
            .bind(env)
            .bind(miss)
            .fetch_optional(&self.db.pool)
            .await?)
    }

    /// The distinct messages of a group, as transcripts store them (at most
    /// [`LABEL_TEXTS_MAX`]).
    pub async fn messages(&self, env: &str, miss: &str) -> DbResult<Vec<String>> {
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT message FROM transcripts WHERE environment_id = $1 AND miss = $2 \
             ORDER BY message LIMIT $3",
        )
        .bind(env)
        .bind(miss)
        .bind(LABEL_TEXTS_MAX)
        .fetch_all(&self.db.pool)
        .await?)
    }

    /// Records the decision about group `miss` of `env` (replacing an earlier one).
    pub async fn decide(&self, env: &str, miss: &str, d: &InboxDecision<'_>) -> DbResult<()> {
        let _turn = self.db.write_turn().await;
        sqlx::query(
            "INSERT INTO misunderstood (environment_id, miss, project_id, status, nlu_id, intent, \
             updated_by, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (environment_id, miss) DO UPDATE SET status = $4, nlu_id = $5, \
             intent = $6, updated_by = $7, updated_at = $8",
        )
        .bind(env)
        .bind(miss)
        .bind(d.project_id)
        .bind(d.status)
        .bind(d.nlu_id)
        .bind(d.intent)
        .bind(d.by)
        .bind(d.at)
        .execute(&self.db.pool)
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NewTranscript, StepWrite};

    fn line(user: &str, text: &str, miss: Option<&str>) -> NewTranscript {
        NewTranscript {
            project_id: "p".into(),
            environment_id: "e".into(),
            environment_name: "production".into(),
            channel_id: "c".into(),
            user_id: user.into(),
            direction: "in",
            message: format!(r#"{{"type":"text","content":"{text}"}}"#),
            flow: Some("main".into()),
            intent: None,
            state: None,
            step_us: Some(1),
            dep_version: Some("1.0.0".into()),
            outcome: Some(if miss.is_some() { "fallback" } else { "ok" }),
            replay: None,
            miss: miss.map(Into::into),
            starts: false,
        }
    }

    async fn write(db: &Db, user: &str, lines: Vec<NewTranscript>) {
        let w = StepWrite {
            session_id: format!("s-{user}"),
            environment_id: "e".into(),
            channel_id: "c".into(),
            user_id: user.into(),
            body: "{}".into(),
            transcripts: lines,
            ..StepWrite::default()
        };
        db.commit_step(w).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn groups_count_their_lines_and_keep_decisions() {
        let (_dir, db) = crate::test_sqlite().await;
        write(&db, "u1", vec![line("u1", "Hi there", Some("a"))]).await;
        write(&db, "u2", vec![line("u2", "hi  there", Some("a"))]).await;
        write(
            &db,
            "u3",
            vec![line("u3", "what?", Some("b")), line("u3", "ok", None)],
        )
        .await;
        let inbox = db.inbox();
        let all = inbox.list("e", None, (10, 0)).await.unwrap();
        assert_eq!(all.total, 2);
        let counts: Vec<_> = all
            .items
            .iter()
            .map(|g| (g.miss.as_str(), g.count))
            .collect();
        assert_eq!(counts, [("a", 2), ("b", 1)]);
        assert!(all.items.iter().all(|g| g.status == "new"));
        assert_eq!(inbox.messages("e", "a").await.unwrap().len(), 2);

        let d = InboxDecision {
            project_id: "p",
            status: "dismissed",
            nlu_id: None,
            intent: None,
            by: "alice",
            at: 5,
        };
        inbox.decide("e", "b", &d).await.unwrap();
        let new = inbox.list("e", Some("new"), (10, 0)).await.unwrap();
        assert_eq!(new.total, 1);
        assert_eq!(new.items[0].miss, "a");
        let b = inbox.group("e", "b").await.unwrap().unwrap();
        assert_eq!(b.status, "dismissed");
        assert!(inbox.group("other-env", "b").await.unwrap().is_none());
    }
}
