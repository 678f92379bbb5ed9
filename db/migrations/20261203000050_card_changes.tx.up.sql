-- A project's card changes (seed 004: the card and the inbox never
-- disagree). Every change that must reach the card bumps version in its
-- own transaction; a refresh reads version in the snapshot it writes the
-- card from, records it as refreshed, and reads the store again while
-- version moved meanwhile. queued says a refresh job is responsible for
-- catching up, so a change inserts a job only when none is, and no change
-- is lost to a job that read the store before the change committed.
CREATE TABLE card_changes (
    project_id uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    version    bigint NOT NULL DEFAULT 0,
    refreshed  bigint NOT NULL DEFAULT 0,
    queued     boolean NOT NULL DEFAULT false,
    changed_at timestamptz NOT NULL DEFAULT now()
);

-- Every existing card is refreshed once by the sweep.
INSERT INTO card_changes (project_id, version) SELECT id, 1 FROM projects;
