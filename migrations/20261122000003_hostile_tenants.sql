-- Issue 12 (hostile tenants): an account can be disabled; a disabled account's tokens are
-- revoked and it cannot log in again until enabled.
ALTER TABLE users ADD COLUMN disabled BIGINT NOT NULL DEFAULT 0;
