-- The fix chain of an incident (docs/releases.md): recorded on
-- the incident and in its transitions, never as new statuses. The nine
-- statuses and the card's mapping (seed 004) are unchanged.
ALTER TABLE incidents
    ADD COLUMN fix_commit_sha       text NOT NULL DEFAULT '',
    ADD COLUMN fix_source           text NOT NULL DEFAULT '' CHECK (fix_source IN ('', 'merge', 'push')),
    ADD COLUMN fix_pr_number        integer NOT NULL DEFAULT 0,
    ADD COLUMN fix_pr_url           text NOT NULL DEFAULT '',
    ADD COLUMN fix_merged_at        timestamptz,
    ADD COLUMN fix_release          text NOT NULL DEFAULT '',
    ADD COLUMN fix_shipped_at       timestamptz,
    ADD COLUMN fix_verify_until     timestamptz,
    ADD COLUMN fix_verified_at      timestamptz,
    ADD COLUMN fix_release_base     bigint NOT NULL DEFAULT 0,
    ADD COLUMN fix_waiting          text NOT NULL DEFAULT '',
    ADD COLUMN fix_recurred_release text NOT NULL DEFAULT '',
    ADD COLUMN fix_recurred_at      timestamptz,
    ADD COLUMN fix_old_release      text NOT NULL DEFAULT '',
    ADD COLUMN fix_old_events       bigint NOT NULL DEFAULT 0,
    -- events of the incident up to fix_judged_at have been judged against
    -- the fix (docs/releases.md, "Regressions that know releases").
    ADD COLUMN fix_judged_at        timestamptz,
    -- "closed in the current release": events from older releases do not
    -- reopen it (set by a person's close).
    ADD COLUMN closed_release       text NOT NULL DEFAULT '';

-- The fix check's work: incidents with a fix or a release-aware close.
CREATE INDEX incidents_fix_idx ON incidents (project_id, environment)
    WHERE fix_commit_sha <> '' OR closed_release <> '';

-- A project's verification window (default 24 h, at least 1 minute).
ALTER TABLE projects ADD COLUMN fix_verification_window bigint NOT NULL DEFAULT 86400
    CHECK (fix_verification_window >= 60);
