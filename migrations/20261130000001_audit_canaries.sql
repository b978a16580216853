-- The audit trail: every change made through the API (refused ones too) and botbox's own
-- (an automatic canary rollback), with who, from where, on what, and the outcome.
-- Append-only: no route updates or deletes a row; the pruner removes rows past the audit
-- window. `owner_id` is the owner (user or team) of what was changed, for who may read it.
CREATE TABLE audit_log (
    id            TEXT PRIMARY KEY,
    at            BIGINT NOT NULL,
    actor_kind    TEXT NOT NULL,
    actor_id      TEXT NOT NULL,
    actor_name    TEXT NOT NULL,
    actor_owner   TEXT,
    address       TEXT NOT NULL,
    action        TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id   TEXT NOT NULL,
    project_id    TEXT,
    owner_id      TEXT,
    outcome       TEXT NOT NULL,
    detail        TEXT
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_project ON audit_log (project_id, at);
CREATE INDEX audit_log_owner ON audit_log (owner_id, at);
CREATE INDEX audit_log_actor ON audit_log (actor_id, at);

-- Canaries: a second deployment version an environment runs for `share` % of its users.
-- At most one runs per environment (ended_at NULL); ended ones are kept as its history.
-- The counts are of incoming messages since `started_at`, counted up to `counted_until`.
CREATE TABLE canaries (
    id                TEXT PRIMARY KEY,
    project_id        TEXT NOT NULL,
    environment_id    TEXT NOT NULL,
    dep_version       TEXT NOT NULL,
    share             BIGINT NOT NULL,
    rollback          TEXT NOT NULL,
    started_at        BIGINT NOT NULL,
    started_by        TEXT NOT NULL,
    counted_until     BIGINT NOT NULL,
    canary_messages   BIGINT NOT NULL,
    canary_errors     BIGINT NOT NULL,
    canary_fallbacks  BIGINT NOT NULL,
    control_messages  BIGINT NOT NULL,
    control_errors    BIGINT NOT NULL,
    control_fallbacks BIGINT NOT NULL,
    ended_at          BIGINT,
    outcome           TEXT,
    reason            TEXT,
    ended_by          TEXT
);
CREATE UNIQUE INDEX canaries_running ON canaries (environment_id) WHERE ended_at IS NULL;
CREATE INDEX canaries_env ON canaries (environment_id, started_at);

-- On an incoming transcript line of a channel message: the deployment version that served
-- it, and how its step went (`ok`, `fallback`: no intent or a fallback intent matched,
-- `error`: the step failed or reported a bot error).
ALTER TABLE transcripts ADD COLUMN dep_version TEXT;
ALTER TABLE transcripts ADD COLUMN outcome TEXT;
-- Who made a revision and a deployment version (a user's name, or a key with its owner).
ALTER TABLE bot_revisions ADD COLUMN pushed_by TEXT;
ALTER TABLE deployments ADD COLUMN deployed_by TEXT;
