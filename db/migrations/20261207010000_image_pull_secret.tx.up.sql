-- A project's pull secret (docs/images.md, "Private registries"): the name
-- of one of its run secrets whose credentials pull run_image and
-- repair_image; '' pulls them anonymously. Only the name is kept here: the
-- value stays sealed in run_secrets.
ALTER TABLE projects
    ADD COLUMN image_pull_secret text NOT NULL DEFAULT '' CHECK (length(image_pull_secret) <= 64);
