-- A fix recorded by hand on the incident page or the API (docs/releases.md,
-- "A fix recorded by hand"), for projects without a forge or webhooks.
ALTER TABLE incidents DROP CONSTRAINT incidents_fix_source_check;
ALTER TABLE incidents ADD CONSTRAINT incidents_fix_source_check CHECK (fix_source IN ('', 'merge', 'push', 'manual'));
