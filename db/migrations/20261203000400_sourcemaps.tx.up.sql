-- Source maps (docs/sourcemap.md): the chunks sentry-cli sends
-- before it asks for an artifact bundle, the bundles assembled from them
-- (or uploaded plainly), their files, and the files' contents stored once
-- per project by SHA-1.

-- Chunks wait here, per organisation (the chunk-upload endpoint names no
-- project), until an assemble call takes them; what no call takes is
-- removed after a day by the retention clean-up.
CREATE TABLE sourcemap_chunks (
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    checksum    text NOT NULL,
    data        bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, checksum)
);

-- One bundle per upload; the same bundle uploaded again is the same row.
CREATE TABLE sourcemap_bundles (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    checksum    text NOT NULL,
    release     text NOT NULL DEFAULT '',
    dist        text NOT NULL DEFAULT '',
    debug_id    text NOT NULL DEFAULT '',
    via         text NOT NULL CHECK (via IN ('sentry-cli', 'upload')),
    files       integer NOT NULL,
    bytes       bigint NOT NULL,
    created_by  uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- last_used_at is when the bundle last mapped a frame (bumped at most
    -- hourly): retention keeps a bundle while its release still sends events.
    last_used_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, checksum)
);
CREATE INDEX sourcemap_bundles_release ON sourcemap_bundles (project_id, release, dist);

-- Contents, once per project and checksum (two bundles of one build share
-- their unchanged files).
CREATE TABLE sourcemap_blobs (
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    checksum    text NOT NULL,
    size        bigint NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (project_id, checksum)
);

CREATE TABLE sourcemap_files (
    bundle_id   uuid NOT NULL REFERENCES sourcemap_bundles (id) ON DELETE CASCADE,
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    url         text NOT NULL,
    kind        text NOT NULL,
    debug_id    text NOT NULL DEFAULT '',
    sourcemap   text NOT NULL DEFAULT '',
    blob        text NOT NULL,
    PRIMARY KEY (bundle_id, url)
);
CREATE INDEX sourcemap_files_debug_id ON sourcemap_files (project_id, debug_id) WHERE debug_id <> '';
CREATE INDEX sourcemap_files_url ON sourcemap_files (project_id, url);
