-- Images (docs/images.md): a project's default image for runs without a
-- pipeline file (run_image) and for its repair runs (repair_image), '' for
-- the host's toolchain; a run records the reference it ran and the
-- manifest digest it was resolved to, so that a re-run uses the same bytes.
ALTER TABLE projects
    ADD COLUMN run_image text NOT NULL DEFAULT '' CHECK (length(run_image) <= 512),
    ADD COLUMN repair_image text NOT NULL DEFAULT '' CHECK (length(repair_image) <= 512);
ALTER TABLE project_runs
    ADD COLUMN image text CHECK (length(image) <= 512),
    ADD COLUMN image_digest text CHECK (image_digest ~ '^sha256:[a-f0-9]{64}$');
