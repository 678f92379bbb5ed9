-- The inbox tells incidents apart and finds them without reading their
-- events: each incident keeps its latest event's level, its culprit frame
-- ("charge (CheckoutService.java:88)": the first in-app frame of the
-- exception, the crash site first as the feed stores frames; else the
-- first frame) and one lower-cased search text — title, message, culprit
-- and tag values — searched through a trigram index, so a search's page
-- and its status counts cost index probes, not one read of a stored event
-- per incident (docs/architecture.md, "Incidents and cards").
CREATE EXTENSION IF NOT EXISTS pg_trgm;

ALTER TABLE incidents
    ADD COLUMN level       text NOT NULL DEFAULT '',
    ADD COLUMN culprit     text NOT NULL DEFAULT '',
    ADD COLUMN search_text text NOT NULL DEFAULT '';

-- The ingest stores an incident's events before it creates or updates the
-- incident (domain/feed/feed_store.go), so the latest event is there when
-- this runs: one probe of the dedupe key per incident a batch touches. An
-- incident whose latest event is not (yet) stored keeps what it had, its
-- search text following its title.
CREATE FUNCTION incidents_search_fields() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev jsonb;
    fr jsonb;
BEGIN
    SELECT e.payload INTO ev FROM feed_events e
        WHERE e.org_id = NEW.org_id AND e.event_id_key = lower(NEW.latest_event_id);
    IF ev IS NULL THEN
        IF TG_OP = 'UPDATE' AND NEW.title IS NOT DISTINCT FROM OLD.title THEN
            RETURN NEW;
        END IF;
        NEW.search_text := lower(concat_ws(' ', NEW.title, NEW.culprit));
        RETURN NEW;
    END IF;
    NEW.level := COALESCE(ev->>'level', '');
    SELECT f INTO fr
        FROM jsonb_array_elements(CASE WHEN jsonb_typeof(ev->'exception'->'stacktrace') = 'array'
                                       THEN ev->'exception'->'stacktrace' ELSE '[]'::jsonb END) WITH ORDINALITY AS x(f, n)
        ORDER BY (f->>'in_app') IS DISTINCT FROM 'true', n LIMIT 1;
    NEW.culprit := CASE WHEN fr IS NULL THEN '' ELSE concat_ws(' ',
        NULLIF(fr->>'function', ''),
        CASE WHEN COALESCE(fr->>'file', '') = '' THEN NULL
             WHEN COALESCE(fr->>'function', '') = '' THEN (fr->>'file') || COALESCE(':' || NULLIF(fr->>'line', '0'), '')
             ELSE '(' || (fr->>'file') || COALESCE(':' || NULLIF(fr->>'line', '0'), '') || ')' END) END;
    NEW.search_text := lower(concat_ws(' ', NEW.title, ev->'exception'->>'message', NEW.culprit,
        (SELECT string_agg(t.value, ' ') FROM jsonb_each_text(
            CASE WHEN jsonb_typeof(ev->'tags') = 'object' THEN ev->'tags' ELSE '{}'::jsonb END) AS t)));
    RETURN NEW;
END
$$;

CREATE TRIGGER incidents_search_fields BEFORE INSERT OR UPDATE OF latest_event_id, title ON incidents
    FOR EACH ROW EXECUTE FUNCTION incidents_search_fields();

UPDATE incidents SET latest_event_id = latest_event_id;

CREATE INDEX incidents_search_trgm_idx ON incidents USING gin (search_text gin_trgm_ops);
