-- A stored event (about 1.5 kB of JSON) is a little over the size at which
-- Postgres compresses a row's values, so every event was compressed with
-- pglz on insert: about a tenth of the database's work under a busy feed.
-- lz4 compresses about as well at a fraction of the cost. Rows already
-- stored keep their compression; Postgres reads both.
--
-- lz4 needs a server built with it (every PGDG and Debian package is); on
-- one that is not, the column keeps the default and the migration still
-- applies.
DO $$
BEGIN
    ALTER TABLE feed_events ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available in this server; feed_events.payload keeps the default compression';
END
$$;
