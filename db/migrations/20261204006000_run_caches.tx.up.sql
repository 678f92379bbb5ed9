-- A project's cache between runs (docs/caches.md): the directories live on
-- the workers; this row is what the project page shows of them and how a
-- clear reaches every worker. generation counts the clears: a worker erases
-- a cache written under an older generation before a run uses it. bytes and
-- used_at are what the last run that wrote the cache left. Erased with the
-- project (domain/erasure).
CREATE TABLE run_caches (
    project_id  uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    generation  bigint NOT NULL DEFAULT 0 CHECK (generation >= 0),
    bytes       bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    used_at     timestamptz,
    cleared_at  timestamptz,
    cleared_by  uuid REFERENCES users (id) ON DELETE SET NULL
);
