//! NL Studio storage: NLUs, their training sentences and their trained models (one per NLU
//! revision). Training status lives on the NLU row, so "one training at a time" is a
//! conditional UPDATE that any number of server tasks can race on.

use super::{Backend, Db, DbError, DbResult, Page, new_id, now_ms};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct NluRow {
    pub id: String,
    pub project_id: String,
    pub owner_id: String,
    pub name: String,
    pub lang: String,
    pub visibility: String,
    /// The entity map, JSON.
    pub entities: String,
    /// `idle`, `training` or `failed`.
    pub training: String,
    pub training_error: Option<String>,
    pub training_started_at: Option<i64>,
    pub training_finished_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const NLU_COLS: &str = "id, project_id, owner_id, name, lang, visibility, entities, training, \
     training_error, training_started_at, training_finished_at, created_at, updated_at";

/// What storing a training sentence did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainingStored {
    /// A new sentence.
    Added,
    /// The sentence was stored with other labels: it has the new ones now.
    Relabelled,
    /// The sentence was stored with these labels already: nothing changed.
    Unchanged,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TrainingRow {
    pub id: String,
    pub seq: i64,
    pub input: String,
    /// TrainingEntity[], JSON.
    pub entities: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A stored model: which revision, its format and its serialised form.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ModelRow {
    pub revision: String,
    pub format: i64,
    pub sentences: i64,
    pub model: String,
}

impl Db {
    pub async fn insert_nlu(
        &self,
        project_id: &str,
        owner_id: &str,
        name: &str,
        lang: &str,
        visibility: &str,
    ) -> DbResult<NluRow> {
        let now = now_ms();
        let id = new_id();
        let _turn = self.write_turn().await;
        sqlx::query(
            "INSERT INTO nlus (id, project_id, owner_id, name, lang, visibility, entities, training, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, '{}', 'idle', $7, $7)",
        )
        .bind(&id)
        .bind(project_id)
        .bind(owner_id)
        .bind(name)
        .bind(lang)
        .bind(visibility)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(DbError::from_sqlx)?;
        Ok(self.nlu_by_id(&id).await?.expect("just inserted"))
    }

    pub async fn nlu_by_id(&self, id: &str) -> DbResult<Option<NluRow>> {
        Ok(
            sqlx::query_as(&format!("SELECT {NLU_COLS} FROM nlus WHERE id = $1"))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// The NLU `name` of a project.
    pub async fn project_nlu(&self, project_id: &str, name: &str) -> DbResult<Option<NluRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {NLU_COLS} FROM nlus WHERE project_id = $1 AND name = $2"
        ))
        .bind(project_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The NLU an `nluId` (`<account>:<name>`) names, once the account is resolved to its id.
    pub async fn owner_nlu(&self, owner_id: &str, name: &str) -> DbResult<Option<NluRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {NLU_COLS} FROM nlus WHERE owner_id = $1 AND name = $2"
        ))
        .bind(owner_id)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn project_nlus(
        &self,
        project_id: &str,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<NluRow>> {
        let filter = ("project_id = $1", &[project_id][..]);
        self.page(NLU_COLS, "nlus", filter, "created_at, id", (limit, offset))
            .await
    }

    pub async fn update_nlu(
        &self,
        id: &str,
        lang: &str,
        visibility: &str,
        entities: &str,
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(
            "UPDATE nlus SET lang = $1, visibility = $2, entities = $3, updated_at = $4 WHERE id = $5",
        )
        .bind(lang)
        .bind(visibility)
        .bind(entities)
        .bind(now_ms())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn training_rows(
        &self,
        nlu_id: &str,
        limit: i64,
        offset: i64,
    ) -> DbResult<Page<TrainingRow>> {
        let cols = "id, seq, input, entities, created_at, updated_at";
        let filter = ("nlu_id = $1", &[nlu_id][..]);
        self.page(cols, "nlu_training_data", filter, "seq", (limit, offset))
            .await
    }

    /// Every training sentence of an NLU, in order (what a training run reads).
    pub async fn all_training_rows(&self, nlu_id: &str) -> DbResult<Vec<TrainingRow>> {
        Ok(sqlx::query_as(
            "SELECT id, seq, input, entities, created_at, updated_at FROM nlu_training_data \
             WHERE nlu_id = $1 ORDER BY seq",
        )
        .bind(nlu_id)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn training_row(&self, nlu_id: &str, id: &str) -> DbResult<Option<TrainingRow>> {
        Ok(sqlx::query_as(
            "SELECT id, seq, input, entities, created_at, updated_at FROM nlu_training_data \
             WHERE nlu_id = $1 AND id = $2",
        )
        .bind(nlu_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Stores training sentences `(input, entities JSON)` in one transaction, one row per
    /// input text: a sentence already stored with the same labels is left as it is, one
    /// stored with other labels takes the new ones, a new one is appended. A text given
    /// twice counts once, with its last labels. Answers each stored text's id and what
    /// happened to it, in the order of the texts' last mention; or, storing nothing, the
    /// number of sentences the NLU would hold when that is over `max_rows`.
    pub async fn add_training_rows(
        &self,
        nlu_id: &str,
        rows: &[(String, String)],
        max_rows: usize,
    ) -> DbResult<Result<Vec<(String, TrainingStored)>, usize>> {
        let now = now_ms();
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        if self.backend == Backend::Postgres {
            // One writer of an NLU's sentences at a time (SQLite has one writer anyway).
            sqlx::query("SELECT id FROM nlus WHERE id = $1 FOR UPDATE")
                .bind(nlu_id)
                .execute(&mut *tx)
                .await?;
        }
        let have: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT id, input, entities, seq FROM nlu_training_data WHERE nlu_id = $1 ORDER BY seq DESC",
        )
        .bind(nlu_id)
        .fetch_all(&mut *tx)
        .await?;
        let mut seq = have.first().map_or(0, |r| r.3);
        let stored = have.len();
        // The oldest row of a text (should there be several) is the one kept up to date.
        let by_input: std::collections::HashMap<String, (String, String)> = have
            .into_iter()
            .map(|(id, input, entities, _)| (input, (id, entities)))
            .collect();
        let mut seen = std::collections::HashSet::new();
        let mut last: Vec<&(String, String)> = rows
            .iter()
            .rev()
            .filter(|(input, _)| seen.insert(input))
            .collect();
        last.reverse();
        let new = last
            .iter()
            .filter(|(i, _)| !by_input.contains_key(i))
            .count();
        if stored + new > max_rows {
            return Ok(Err(stored + new));
        }
        let mut out = Vec::with_capacity(last.len());
        for (input, entities) in last {
            let done = match by_input.get(input) {
                Some((id, old)) if old == entities => (id.clone(), TrainingStored::Unchanged),
                Some((id, _)) => {
                    sqlx::query(
                        "UPDATE nlu_training_data SET entities = $1, updated_at = $2 \
                         WHERE nlu_id = $3 AND id = $4",
                    )
                    .bind(entities)
                    .bind(now)
                    .bind(nlu_id)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                    (id.clone(), TrainingStored::Relabelled)
                }
                None => {
                    seq += 1;
                    let id = new_id();
                    sqlx::query(
                        "INSERT INTO nlu_training_data (id, nlu_id, seq, input, entities, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $6)",
                    )
                    .bind(&id)
                    .bind(nlu_id)
                    .bind(seq)
                    .bind(input)
                    .bind(entities)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                    (id, TrainingStored::Added)
                }
            };
            out.push(done);
        }
        tx.commit().await.map_err(DbError::from_sqlx)?;
        Ok(Ok(out))
    }

    /// Deletes one training sentence; `false` when the NLU has no such sentence.
    pub async fn delete_training_row(&self, nlu_id: &str, id: &str) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query("DELETE FROM nlu_training_data WHERE nlu_id = $1 AND id = $2")
            .bind(nlu_id)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Changes one training sentence. `DbError::Conflict` when `input` is another sentence's
    /// text (a text is one sentence of its NLU).
    pub async fn update_training_row(
        &self,
        nlu_id: &str,
        id: &str,
        input: &str,
        entities: &str,
    ) -> DbResult<()> {
        let _turn = self.write_turn().await;
        // A sentence's text is its key: another sentence's text is refused (Conflict).
        let done = sqlx::query(
            "UPDATE nlu_training_data SET input = $1, entities = $2, updated_at = $3 WHERE nlu_id = $4 AND id = $5 \
             AND NOT EXISTS (SELECT 1 FROM nlu_training_data o WHERE o.nlu_id = $4 AND o.input = $1 AND o.id <> $5)",
        )
        .bind(input)
        .bind(entities)
        .bind(now_ms())
        .bind(nlu_id)
        .bind(id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Err(DbError::Conflict);
        }
        Ok(())
    }

    /// Marks the NLU as training, unless it already is: `false` means another training runs.
    pub async fn begin_training(&self, nlu_id: &str) -> DbResult<bool> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "UPDATE nlus SET training = 'training', training_error = NULL, training_started_at = $1, \
             training_finished_at = NULL WHERE id = $2 AND training <> 'training'",
        )
        .bind(now_ms())
        .bind(nlu_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores a trained model as the project's next NLU revision and makes it the latest, in
    /// one transaction: a reader sees the old model or the new one, never a half.
    pub async fn finish_training(
        &self,
        nlu: &NluRow,
        revision: &str,
        format: i64,
        sentences: i64,
        model: &str,
    ) -> DbResult<()> {
        let now = now_ms();
        let _turn = self.write_turn().await;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO nlu_models (nlu_id, project_id, revision, seq, format, sentences, model, created_at) \
             SELECT $1, $2, $3, COALESCE(MAX(seq), 0) + 1, $4, $5, $6, $7 FROM nlu_models WHERE project_id = $2",
        )
        .bind(&nlu.id)
        .bind(&nlu.project_id)
        .bind(revision)
        .bind(format)
        .bind(sentences)
        .bind(model)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(DbError::from_sqlx)?;
        sqlx::query("UPDATE projects SET nlu_latest_revision = $1, updated_at = $2 WHERE id = $3")
            .bind(revision)
            .bind(now)
            .bind(&nlu.project_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE nlus SET training = 'idle', training_error = NULL, training_finished_at = $1 WHERE id = $2",
        )
        .bind(now)
        .bind(&nlu.id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await.map_err(DbError::from_sqlx)?;
        Ok(())
    }

    /// A failed training: the error is kept, the model in use stays.
    pub async fn fail_training(&self, nlu_id: &str, error: &str) -> DbResult<()> {
        let _turn = self.write_turn().await;
        sqlx::query(
            "UPDATE nlus SET training = 'failed', training_error = $1, training_finished_at = $2 WHERE id = $3",
        )
        .bind(error)
        .bind(now_ms())
        .bind(nlu_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// At start-up: a training that was running when the server stopped will not finish.
    pub async fn fail_interrupted_trainings(&self) -> DbResult<u64> {
        let _turn = self.write_turn().await;
        let done = sqlx::query(
            "UPDATE nlus SET training = 'failed', training_error = 'interrupted: the server stopped during training; train again', \
             training_finished_at = $1 WHERE training = 'training'",
        )
        .bind(now_ms())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// The revision of the model a caller should use: the newest of the NLU, or, with a pin
    /// (a project NLU revision), the newest at or before that revision in the NLU's project.
    /// `None` when the NLU has no model (yet, or at the pin); else the revision and the
    /// sentences it was trained on.
    pub async fn nlu_model_revision(
        &self,
        nlu_id: &str,
        pin: Option<&str>,
    ) -> DbResult<Option<(String, i64)>> {
        let row: Option<(String, i64)> = match pin {
            None => {
                sqlx::query_as(
                    "SELECT revision, sentences FROM nlu_models WHERE nlu_id = $1 ORDER BY seq DESC LIMIT 1",
                )
                .bind(nlu_id)
                .fetch_optional(&self.pool)
                .await?
            }
            Some(pin) => {
                sqlx::query_as(
                    "SELECT m.revision, m.sentences FROM nlu_models m WHERE m.nlu_id = $1 AND m.seq <= \
                     (SELECT p.seq FROM nlu_models p WHERE p.project_id = m.project_id AND p.revision = $2) \
                     ORDER BY m.seq DESC LIMIT 1",
                )
                .bind(nlu_id)
                .bind(pin)
                .fetch_optional(&self.pool)
                .await?
            }
        };
        Ok(row)
    }

    pub async fn nlu_model(&self, nlu_id: &str, revision: &str) -> DbResult<Option<ModelRow>> {
        Ok(sqlx::query_as(
            "SELECT revision, format, sentences, model FROM nlu_models WHERE nlu_id = $1 AND revision = $2",
        )
        .bind(nlu_id)
        .bind(revision)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// The NLU revisions of a project, newest first.
    pub async fn nlu_revisions(&self, project_id: &str) -> DbResult<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT revision, created_at FROM nlu_models WHERE project_id = $1 ORDER BY seq DESC",
        )
        .bind(project_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Whether `revision` is an NLU revision of the project (a deployment may pin only those).
    pub async fn is_nlu_revision(&self, project_id: &str, revision: &str) -> DbResult<bool> {
        let row: Option<(i64,)> =
            sqlx::query_as("SELECT seq FROM nlu_models WHERE project_id = $1 AND revision = $2")
                .bind(project_id)
                .bind(revision)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }
}
