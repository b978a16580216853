-- The project API's storage (issue 4). Portable SQL: the same file runs on SQLite and
-- PostgreSQL through sqlx's Any driver. Times are Unix milliseconds (BIGINT), JSON is TEXT,
-- booleans are not stored as such.

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role_id       TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE TABLE teams (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE team_members (
    team_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role_id TEXT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user ON team_members (user_id);

-- Bearer tokens, stored as SHA-256 of the token: the token itself is shown once.
CREATE TABLE tokens (
    hash       TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    label      TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    team_id    TEXT,
    role_id    TEXT NOT NULL,
    expire     BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX tokens_user ON tokens (user_id);

-- owner_id is a user id or a team id.
CREATE TABLE projects (
    id                  TEXT PRIMARY KEY,
    owner_id            TEXT NOT NULL,
    name                TEXT NOT NULL,
    label               TEXT,
    description         TEXT,
    options             TEXT NOT NULL,
    bot_latest_revision TEXT,
    nlu_latest_revision TEXT,
    cms_latest_revision TEXT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    UNIQUE (owner_id, name)
);

-- Immutable bot revisions with their compiled form, so a deployment never recompiles.
CREATE TABLE bot_revisions (
    id         TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    version    TEXT NOT NULL,
    source     TEXT NOT NULL,
    compiled   TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (project_id, version),
    UNIQUE (project_id, seq)
);

CREATE TABLE drafts (
    project_id TEXT PRIMARY KEY,
    draft_id   TEXT NOT NULL,
    body       TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE deployments (
    id           TEXT PRIMARY KEY,
    project_id   TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    version      TEXT NOT NULL,
    bot_revision TEXT NOT NULL,
    nlu_revision TEXT,
    cms_revision TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    UNIQUE (project_id, version),
    UNIQUE (project_id, seq)
);

CREATE TABLE environments (
    id                 TEXT PRIMARY KEY,
    project_id         TEXT NOT NULL,
    name               TEXT NOT NULL,
    slug               TEXT NOT NULL,
    deployment_version TEXT NOT NULL,
    created_at         BIGINT NOT NULL,
    UNIQUE (project_id, name),
    UNIQUE (project_id, slug)
);

CREATE TABLE channels (
    id             TEXT PRIMARY KEY,
    project_id     TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    name           TEXT NOT NULL,
    kind           TEXT NOT NULL,
    url            TEXT NOT NULL,
    rpm_limit      BIGINT,
    agent_id       TEXT,
    options        TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    UNIQUE (environment_id, name)
);
CREATE INDEX channels_env ON channels (environment_id);
