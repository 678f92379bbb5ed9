-- A stored event's payload as json, the text anvil encoded, rather than
-- jsonb (docs/feed.md, "The write path and its costs"). The ingest has
-- already decoded, checked, scrubbed and encoded every event; building
-- jsonb's tree from that text again was about a third of Postgres' work
-- per stored event under a storm, and jsonb's tree is also larger (about
-- 1,080 bytes against 930 for the README's event). json still refuses
-- anything that is not JSON, keeps the stored bytes exactly as written,
-- and answers the same -> and ->> operators. The readers that take
-- several fields of many events (an incident's spread and clients) parse
-- each event once with json_to_record.
--
-- The rewrite keeps rows and indexes; the column's compression is set
-- again (migration 20261202000011), as a type change may not keep it.
ALTER TABLE feed_events ALTER COLUMN payload TYPE json USING payload::json;

DO $$
BEGIN
    ALTER TABLE feed_events ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available in this server; feed_events.payload keeps the default compression';
END
$$;
