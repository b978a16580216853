-- Issue 16 (NL Studio): project NLUs, their training data and their trained models.

-- An NLU of a project. Bots address it as `<owner account>:<name>`, so the name is unique per
-- owner (a user or a team), which also makes it unique in its project. `entities` is the
-- seed's entity map as JSON. `training` is `idle`, `training` or `failed` (with `error`).
CREATE TABLE nlus (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    name TEXT NOT NULL,
    lang TEXT NOT NULL,
    visibility TEXT NOT NULL,
    entities TEXT NOT NULL,
    training TEXT NOT NULL,
    training_error TEXT,
    training_started_at BIGINT,
    training_finished_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX nlus_owner_name ON nlus (owner_id, name);
CREATE INDEX nlus_project ON nlus (project_id);

-- Training sentences (the seed's TrainingData), in the order they were added.
CREATE TABLE nlu_training_data (
    id TEXT PRIMARY KEY,
    nlu_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    input TEXT NOT NULL,
    entities TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX nlu_training_data_nlu ON nlu_training_data (nlu_id, seq);

-- Trained models, one per NLU revision. `revision` is the project's NLU revision id
-- (`nluLatestRevision`); `seq` orders a project's revisions, so a deployment pinned to a
-- revision uses, for each NLU of its project, the newest model at or before it. `model` is the
-- serialised model (format `format`, see host/src/nlu/model.rs MODEL_FORMAT).
CREATE TABLE nlu_models (
    nlu_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    revision TEXT NOT NULL,
    seq BIGINT NOT NULL,
    format BIGINT NOT NULL,
    sentences BIGINT NOT NULL,
    model TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (nlu_id, revision)
);
CREATE UNIQUE INDEX nlu_models_project ON nlu_models (project_id, seq);
