-- `/v1` Idempotency-Key answers (reference §11), kept 24 h in the database so that a
-- retry reaching another replica, or this server after a restart, is answered the same
-- and runs nothing twice. `scope` is the key id, method, path and Idempotency-Key;
-- `status` is NULL while the first request runs; `body` is base64.
CREATE TABLE v1_idempotency (
    scope TEXT PRIMARY KEY,
    -- The request that holds the key (a random token): only it stores or frees the answer.
    owner TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status BIGINT,
    headers TEXT,
    body TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX v1_idempotency_created ON v1_idempotency (created_at);
