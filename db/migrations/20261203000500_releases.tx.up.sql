-- Releases (docs/releases.md): what a project's events say they
-- were built from, per environment. The ingest upserts one row per release
-- per stored group (event counts, first and last seen, incidents first
-- seen in it); a deploy script may declare a release with its commit
-- before or after its first event. environment '' is a declaration for
-- every environment: its commit applies wherever the version is seen.
CREATE TABLE releases (
    project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment   text NOT NULL,
    version       text NOT NULL,
    first_seen    timestamptz,
    last_seen     timestamptz,
    event_count   bigint NOT NULL DEFAULT 0 CHECK (event_count >= 0),
    new_incidents bigint NOT NULL DEFAULT 0 CHECK (new_incidents >= 0),
    -- commit_sha is a declared commit; a version that names its commit is
    -- read at use time (release.CommitOf) and not copied here.
    commit_sha    text,
    deployed_at   timestamptz,
    declared_at   timestamptz,
    PRIMARY KEY (project_id, environment, version)
);
-- The Releases page: a project's releases, most recently seen first.
CREATE INDEX releases_project_last_seen_idx ON releases (project_id, last_seen DESC NULLS LAST);

-- The release an incident's first events came from.
ALTER TABLE incidents ADD COLUMN first_release text NOT NULL DEFAULT '';
