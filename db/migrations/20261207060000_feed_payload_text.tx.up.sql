-- A stored event's payload as text: the bytes anvil encoded, checked by
-- nobody a second time (docs/feed.md, "The write path and its costs").
-- Under a storm the feed's speed is that of one COPY after another, and
-- json's check of each payload — Postgres lexing every byte anvil had just
-- decoded, checked, scrubbed and encoded itself — was about a sixth of
-- that COPY's work. The encoder is held to encoding/json by its tests and
-- fuzzers, the ingest's tests read every stored payload back as JSON, and
-- the slow paths (the general store, monitors, reprocessing) still cast
-- what they write to json first. Readers cast the payload to json where
-- they take fields of it; the inbox's search trigger reads it into its
-- jsonb variable by its text, as PL/pgSQL converts what has no cast.
--
-- The rewrite keeps rows and indexes; the column's compression is set
-- again (migration 20261202000011), as a type change may not keep it.
ALTER TABLE feed_events ALTER COLUMN payload TYPE text USING payload::text;

DO $$
BEGIN
    ALTER TABLE feed_events ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available in this server; feed_events.payload keeps the default compression';
END
$$;
