-- Retention: the pruner deletes transcripts and dedupe records older than their windows,
-- a batch at a time, found by these indexes (oldest first).
CREATE INDEX transcripts_created ON transcripts (created_at);
CREATE INDEX inbound_seen_created ON inbound_seen (created_at);
