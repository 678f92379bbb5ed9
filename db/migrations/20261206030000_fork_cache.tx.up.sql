-- Whether a run of a fork's code gets a read-only copy of the project's
-- cache (docs/caches.md, "What a fork's copy exposes"). On by default, as
-- before: a project whose builds leave anything in /cache that a fork must
-- not read turns it off.
ALTER TABLE projects ADD COLUMN fork_cache boolean NOT NULL DEFAULT true;
