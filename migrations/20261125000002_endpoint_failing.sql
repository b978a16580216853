-- Callback endpoints that fail (reference §8.4): messages in a row that failed through the
-- whole retry schedule, and since when (NULL: not failing). Three in a row disable it.
ALTER TABLE webhook_endpoints ADD COLUMN exhausted BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhook_endpoints ADD COLUMN failing_since BIGINT;
