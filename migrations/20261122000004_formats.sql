-- Issue 13 (stored data that survives upgrades): the version of the stored form of outbox
-- rows (url, headers, body) and schedules (message). Rows written before the column existed
-- are format 1, the form they have. A process reads only rows of formats it knows, so a row
-- written by a newer botbox during a rolling upgrade waits for a process that knows it.
-- Compiled bots and sessions carry their format inside their JSON (`format`).
ALTER TABLE outbox ADD COLUMN format BIGINT NOT NULL DEFAULT 1;
ALTER TABLE schedules ADD COLUMN format BIGINT NOT NULL DEFAULT 1;
