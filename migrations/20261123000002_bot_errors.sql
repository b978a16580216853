-- Issue 18 item 13: bot errors recorded per environment and channel, for
-- GET /projects/{id}/errors (kata-cli's `errors`, the console, a future dashboard). Written in
-- the step's own commit, so an error is recorded exactly when the step's outcome is.
-- error_group: `step` (the step failed: limits, traps, too many responses) or `bot` (a user
-- error during a step that went on: an expression, an api call, a method, an NLU).
CREATE TABLE bot_errors (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    error_group TEXT NOT NULL,
    error_code TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX bot_errors_project ON bot_errors (project_id, created_at);
-- The hourly pruning of errors older than 30 days.
CREATE INDEX bot_errors_time ON bot_errors (created_at);
