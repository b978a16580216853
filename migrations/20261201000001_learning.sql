-- Learning from production: the misunderstood inbox and replays.
--
-- A channel user's incoming line keeps what replaying its step needs (`replay`: the step's
-- clock, random seed, whether it started a session, and what its api calls answered, as
-- JSON) and, when the step fell back on a text message, its group in the misunderstood
-- inbox (`miss`: a hash of the normalised text). Both go with the line: the transcripts'
-- retention window keeps them, and the project's storage counts them.
-- JSON) and, when the step fell back on a text message, its group in the misunderstood
ALTER TABLE transcripts ADD COLUMN replay TEXT;
ALTER TABLE transcripts ADD COLUMN miss TEXT;
-- 1 on a channel user's incoming line whose step started from a new session: where a
-- conversation that can be replayed begins.
ALTER TABLE transcripts ADD COLUMN starts BIGINT;
-- Partial indexes: the lines without these cost them nothing.
CREATE INDEX transcripts_miss ON transcripts (environment_id, miss) WHERE miss IS NOT NULL;
CREATE INDEX transcripts_starts ON transcripts (environment_id, created_at) WHERE starts IS NOT NULL;

-- What an author decided about a group of the inbox (`new` groups have no row).
CREATE TABLE misunderstood (
    environment_id TEXT NOT NULL,
    miss           TEXT NOT NULL,
    project_id     TEXT NOT NULL,
    -- `labelled` or `dismissed`.
    status         TEXT NOT NULL,
    nlu_id         TEXT,
    intent         TEXT,
    updated_by     TEXT NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (environment_id, miss)
);
CREATE INDEX misunderstood_project ON misunderstood (project_id);

-- Replays of an environment's recorded conversations against a bot revision. At most one
-- runs per project (`running` rows). `results` is the JSON list of per-conversation results.
CREATE TABLE replays (
    id             TEXT PRIMARY KEY,
    project_id     TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    bot_revision   TEXT NOT NULL,
    cms_revision   TEXT,
    status         TEXT NOT NULL,
    requested_by   TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    finished_at    BIGINT,
    conversations  BIGINT NOT NULL DEFAULT 0,
    identical      BIGINT NOT NULL DEFAULT 0,
    differing      BIGINT NOT NULL DEFAULT 0,
    failed         BIGINT NOT NULL DEFAULT 0,
    results        TEXT,
    error          TEXT
);
CREATE INDEX replays_project ON replays (project_id, created_at);
CREATE UNIQUE INDEX replays_one_running ON replays (project_id) WHERE status = 'running';
