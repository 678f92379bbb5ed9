-- The context of a project's commit statuses: the name under which
-- the forge shows anvil's status and branch protection requires it. Set to
-- anvil/<slug> when the project is created and kept when the slug changes,
-- so that a rename never breaks a protection rule that names it.
ALTER TABLE projects ADD COLUMN status_context text NOT NULL DEFAULT ''
    CHECK (length(status_context) <= 255);
UPDATE projects SET status_context = 'anvil/' || slug;
