-- Issue 15 (the agent API under /v1): API keys, agent conversations with their UI messages,
-- chat runs with their chunk logs, and steers.

-- Agent keys (`sak_`, scope = an environment) and workspace keys (`sk-ws-`, scope = a team
-- or a user's own namespace). Only the SHA-256 of a key is stored.
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    project_id TEXT,
    owner_id TEXT NOT NULL,
    name TEXT NOT NULL,
    hint TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    last_used_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX api_keys_scope ON api_keys (kind, scope);

-- A conversation of an agent (an environment). `chat_id` is the AI SDK client's chat id.
CREATE TABLE agent_conversations (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    chat_id TEXT,
    created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX agent_conversations_chat ON agent_conversations (environment_id, chat_id);

-- The conversation's history as UI messages (JSON), in order.
CREATE TABLE agent_messages (
    conversation_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    run_id TEXT,
    PRIMARY KEY (conversation_id, id)
);

-- Chat runs. `lease_until`: a run whose process died (lease past) is ended as failed.
CREATE TABLE agent_runs (
    id TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    ended_at BIGINT,
    lease_until BIGINT NOT NULL
);
CREATE INDEX agent_runs_conversation ON agent_runs (conversation_id, status);
CREATE INDEX agent_runs_status ON agent_runs (status, lease_until);

-- The UI message stream of a run, one chunk (JSON, or the literal [DONE]) per row.
CREATE TABLE agent_run_chunks (
    run_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE agent_steers (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    message TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX agent_steers_run ON agent_steers (run_id);
