-- Foreign keys that every acceptance and every stored event would check
-- against one hot parent row, and that say nothing the schema does not
-- already say another way.
--
-- A foreign key check locks the parent row FOR KEY SHARE. When many
-- concurrent transactions insert children of one parent — every run of an
-- organisation, every event of a project — Postgres records the sharers of
-- that row in a MultiXact, and the writers queue behind it. The checks are
-- also per row: a batch of a thousand events made three thousand lookups.
--
-- What remains is enough: a run belongs to its project (ON DELETE CASCADE)
-- and the project to its organisation; an event belongs to its incident
-- (CASCADE), the incident to its project and organisation. The domain
-- copies org_id and project_id from the row it already holds.
ALTER TABLE project_runs DROP CONSTRAINT project_runs_org_id_fkey;
ALTER TABLE feed_events DROP CONSTRAINT feed_events_org_id_fkey;
ALTER TABLE feed_events DROP CONSTRAINT feed_events_project_id_fkey;
