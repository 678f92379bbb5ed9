-- Erasure (docs/erasure.md). Deleting a project tombstones
-- it (deleted_at) in one short transaction: from then on no page, list, token
-- or webhook sees it, and the erase_project job removes its rows in batches,
-- the project row last. The slug is freed at the tombstone: the unique key
-- covers live projects only, so a new project may take it at once.
ALTER TABLE projects ADD COLUMN deleted_at timestamptz;
ALTER TABLE projects DROP CONSTRAINT projects_org_slug_key;
CREATE UNIQUE INDEX projects_org_slug_key ON projects (org_id, slug) WHERE deleted_at IS NULL;
CREATE INDEX projects_deleted_idx ON projects (deleted_at) WHERE deleted_at IS NOT NULL;

-- An organisation being erased: its members, sessions and tokens are gone at
-- the tombstone, its projects are tombstoned with it, and erase_organization
-- removes the rest; this row goes with the organisation's (cascade).
CREATE TABLE organization_erasures (
    org_id       uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    slug         text NOT NULL,
    requested_at timestamptz NOT NULL,
    actor_email  text NOT NULL
);

