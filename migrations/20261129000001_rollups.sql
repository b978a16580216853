-- Analytics rollups: per closed hour (span_ms 3600000) and closed day (86400000) of an
-- environment, counts by metric and label (see the store's rollups module). `environment`
-- is the environment's name for transcript metrics and its id for `error`, as each source
-- keys it; `tests` is 1 for the console's test traffic.
CREATE TABLE rollups (
    project_id  TEXT NOT NULL,
    environment TEXT NOT NULL,
    span_ms     BIGINT NOT NULL,
    start       BIGINT NOT NULL,
    tests       BIGINT NOT NULL,
    metric      TEXT NOT NULL,
    label       TEXT NOT NULL,
    n           BIGINT NOT NULL,
    PRIMARY KEY (project_id, environment, span_ms, start, tests, metric, label)
);

-- Up to where rollups hold (one row, id 1): the start of the first hour not rolled up.
CREATE TABLE rollup_progress (
    id           BIGINT PRIMARY KEY,
    rolled_until BIGINT NOT NULL
);
