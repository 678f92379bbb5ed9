-- Where a release came from (docs/releases.md, "Sources and trust"). Only a
-- release a person or a deploy script declared, or one a server connection
-- sent events from, may ship a fix or count as the current release: a
-- browser key is public, so a release seen only from browsers is anyone's
-- claim. declared_by is the declaration's door ('member': the cockpit's
-- form; 'api': an API token, a deploy script; 'sentry_cli': the
-- Sentry-style release API); seen_server and seen_browser say which kinds of
-- connection sent its events.
ALTER TABLE releases
    ADD COLUMN declared_by  text NOT NULL DEFAULT '' CHECK (declared_by IN ('', 'member', 'api', 'sentry_cli')),
    ADD COLUMN seen_server  boolean NOT NULL DEFAULT false,
    ADD COLUMN seen_browser boolean NOT NULL DEFAULT false;
-- Declarations made before sources were recorded came through a member's
-- session or token: they keep their trust. Seen rows start untrusted until
-- the next event from a server connection (which kind sent them is unknown).
UPDATE releases SET declared_by = 'api' WHERE declared_at IS NOT NULL;

-- The questions are answered oldest fix first, and aged out with the cache.
ALTER TABLE release_ancestry_questions ADD COLUMN fix_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX release_ancestry_checked_idx ON release_ancestry (project_id, checked_at);
