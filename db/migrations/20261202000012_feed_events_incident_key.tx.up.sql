-- The events → incidents foreign key was checked once per stored event, at
-- commit (a lookup and a row lock on the incident for every row): about a
-- tenth of the database's work under a busy feed, for a fact the ingest
-- already holds — it points events only at incidents it has just created or
-- locked in the same transaction (see migration 9 for the others).
--
-- What the key also did, deleting an incident's events with it (when a
-- project or organisation is deleted), a statement-level trigger does now,
-- once per statement rather than once per row.
ALTER TABLE feed_events DROP CONSTRAINT feed_events_incident_id_fkey;

CREATE FUNCTION feed_events_follow_incidents() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM feed_events e USING gone g WHERE e.incident_id = g.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER incidents_delete_events AFTER DELETE ON incidents
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION feed_events_follow_incidents();
