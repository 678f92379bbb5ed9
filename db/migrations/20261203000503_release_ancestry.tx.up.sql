-- The ancestry cache (docs/releases.md, "Shipped"): whether a release's
-- commit contains a fix commit, answered once by git in the project's
-- mirror (a River job, never the ingest) and read from here after that.
-- 'unknown' is a commit the mirror lacked even after one fetch.
CREATE TABLE release_ancestry (
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    fix_sha     text NOT NULL,
    release_sha text NOT NULL,
    answer      text NOT NULL CHECK (answer IN ('yes', 'no', 'unknown')),
    checked_at  timestamptz NOT NULL,
    PRIMARY KEY (project_id, fix_sha, release_sha)
);

-- The questions the fix check could not answer from the cache: the
-- project's check_ancestry job answers them in the mirror and deletes them.
CREATE TABLE release_ancestry_questions (
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    fix_sha     text NOT NULL,
    release_sha text NOT NULL,
    PRIMARY KEY (project_id, fix_sha, release_sha)
);
