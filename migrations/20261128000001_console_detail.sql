-- What the console shows beside the conversations:
-- the time each incoming message's step took (microseconds, from asking for a CPU slot to
-- the step's answer; NULL on outgoing lines), for the analytics' latency percentiles;
ALTER TABLE transcripts ADD COLUMN step_us BIGINT;
-- the user a bot error happened to (NULL where a step has none), linking it to the
-- conversation;
ALTER TABLE bot_errors ADD COLUMN user_id TEXT;
-- a revision's validation warnings as found at push (a JSON list of strings).
ALTER TABLE bot_revisions ADD COLUMN warnings TEXT;
