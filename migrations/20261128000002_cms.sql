-- CMS revisions: immutable documents of a project's content (pages of forms of elements,
-- and FAQ tables), published in order; `projects.cms_latest_revision` names the newest and a
-- deployment version's `cms_revision` the one it runs.
CREATE TABLE cms_revisions (
    id           TEXT PRIMARY KEY,
    project_id   TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    document     TEXT NOT NULL,
    changelog    TEXT NOT NULL,
    published_by TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    UNIQUE (project_id, seq)
);
