-- Retention windows of everything that grows with traffic. The pruner finds each kind's
-- expired rows oldest first by these indexes, a batch at a time.

-- Transcripts are pruned project by project (a project's window may differ from the
-- server's): (project_id, created_at) serves both, in place of the global time index.
DROP INDEX transcripts_created;
CREATE INDEX transcripts_project_created ON transcripts (project_id, created_at);
-- An administrator's window for one project's transcripts, in days: NULL follows the
-- server's `--transcript-retention`, 0 keeps them for ever.
ALTER TABLE projects ADD COLUMN transcript_retention_days BIGINT;

CREATE INDEX agent_runs_ended ON agent_runs (ended_at);
CREATE INDEX inbound_hook_receipts_created ON inbound_hook_receipts (created_at);
CREATE INDEX webhook_messages_created ON webhook_messages (created_at);
