-- Live conversations (issue 5): sessions, inbound dedupe, outbox, transcripts, schedules.

-- One session per (environment, channel, user). `version` is the optimistic-locking counter:
-- a step's result is stored only if nobody stored another one since it was read, so the
-- messages of one user are applied one at a time, across replicas too.
CREATE TABLE sessions (
    id             TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    channel_id     TEXT NOT NULL,
    user_id        TEXT NOT NULL,
    body           TEXT NOT NULL,
    version        BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);

-- Provider message ids already accepted, so a provider's retry does not run twice.
CREATE TABLE inbound_seen (
    channel_id  TEXT NOT NULL,
    provider_id TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (channel_id, provider_id)
);

-- Replies waiting for delivery to a provider. `status`: pending, sent or failed.
CREATE TABLE outbox (
    id          TEXT PRIMARY KEY,
    channel_id  TEXT NOT NULL,
    url         TEXT NOT NULL,
    headers     TEXT NOT NULL,
    body        TEXT NOT NULL,
    status      TEXT NOT NULL,
    attempts    BIGINT NOT NULL,
    next_at     BIGINT NOT NULL,
    last_error  TEXT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX outbox_due ON outbox (status, next_at);

-- Every incoming and outgoing message.
CREATE TABLE transcripts (
    id               TEXT PRIMARY KEY,
    project_id       TEXT NOT NULL,
    environment_id   TEXT NOT NULL,
    environment_name TEXT NOT NULL,
    channel_id       TEXT NOT NULL,
    user_id          TEXT NOT NULL,
    direction        TEXT NOT NULL,
    message          TEXT NOT NULL,
    flow             TEXT,
    intent           TEXT,
    state            TEXT,
    created_at       BIGINT NOT NULL
);
CREATE INDEX transcripts_env_time ON transcripts (project_id, environment_name, created_at);

-- Scheduled messages (the schedule action), fired as incoming commands.
CREATE TABLE schedules (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    channel_id  TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    message     TEXT NOT NULL,
    next_at     BIGINT NOT NULL,
    end_at      BIGINT,
    every_ms    BIGINT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_at);
