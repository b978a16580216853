-- Issue 17 (Cases and tasks, seed 000): Cases bound to an agent (an environment), tasks with
-- their own conversation, human review, artifacts, outbound callbacks (Standard Webhooks)
-- and inbound hooks. TEXT/BIGINT only, as every migration (SQLite and PostgreSQL).

-- A Case of a workspace (a team, or a user's own namespace), bound to one environment.
-- `spec`: the Case's JSON (description, inputs, outputs, artifacts, review, timeoutSeconds).
CREATE TABLE cases (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX cases_name ON cases (workspace_id, name);

-- A task. `session`: the bot's session of the task's own conversation (written with the
-- status, so a step's outcome and the task's transition are one update). `next_message`:
-- what the worker sends the bot when it takes the task (the task message, or a reviewer's
-- requested changes). `lease_until`/`worker`: the worker holding an `in_progress` task; a
-- lease that passed means its worker died and another takes the task over.
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    case_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    status TEXT NOT NULL,
    inputs TEXT NOT NULL,
    outputs TEXT,
    error TEXT,
    review TEXT,
    session TEXT,
    next_message TEXT,
    attempts BIGINT NOT NULL,
    lease_until BIGINT NOT NULL,
    worker TEXT,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX tasks_status ON tasks (status, lease_until);
CREATE INDEX tasks_case ON tasks (case_id, created_at);

-- Every review decision (who, when, what, why), in order.
CREATE TABLE task_reviews (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    decision TEXT NOT NULL,
    comment TEXT,
    outputs TEXT,
    decided_by TEXT NOT NULL,
    decided_at BIGINT NOT NULL
);
CREATE INDEX task_reviews_task ON task_reviews (task_id, decided_at);

-- Artifacts a task produced (content base64; at most 1 MiB each).
CREATE TABLE task_artifacts (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    content TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX task_artifacts_task ON task_artifacts (task_id);

-- Callback endpoints of a workspace. No secret is stored: an endpoint's signing secret is
-- derived from the server's secret key, the endpoint id and `generation`; a rotation bumps
-- the generation and keeps the previous one valid until `previous_until`.
CREATE TABLE webhook_endpoints (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    url TEXT NOT NULL,
    event_types TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    disabled_reason TEXT,
    generation BIGINT NOT NULL,
    previous_until BIGINT,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints (workspace_id);

-- One event for one endpoint (`id` is the `webhook-id`, the same on every attempt).
CREATE TABLE webhook_messages (
    id TEXT PRIMARY KEY,
    endpoint_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    next_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX webhook_messages_due ON webhook_messages (status, next_at);
CREATE INDEX webhook_messages_endpoint ON webhook_messages (endpoint_id, created_at);

CREATE TABLE webhook_attempts (
    message_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    at BIGINT NOT NULL,
    status_code BIGINT,
    error TEXT,
    duration_ms BIGINT NOT NULL,
    PRIMARY KEY (message_id, attempt)
);

-- Inbound hooks: `POST /v1/hooks/{id}` signed with the hook's secret (derived like an
-- endpoint's) creates a task on `case_id`, its inputs read from the body by `mapping`.
CREATE TABLE inbound_hooks (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    case_id TEXT NOT NULL,
    mapping TEXT NOT NULL,
    generation BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX inbound_hooks_workspace ON inbound_hooks (workspace_id);

-- A delivered `webhook-id` and the task it created: a repeat answers the same task.
CREATE TABLE inbound_hook_receipts (
    hook_id TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (hook_id, webhook_id)
);
