-- The dedupe key's event half as a uuid (docs/feed.md, "The write path and
-- its costs"). Every door's event_id is a canonical UUID by contract (the
-- Sentry door dashes its 32 hex digits; a monitor's events carry 32 hex
-- digits), and Postgres reads each spelling, in any case, as the same 16
-- bytes: the key means what the lower-cased text meant, and its unique
-- index holds 16 bytes a key instead of 37. A key no door could have
-- written (none should exist) keeps a key of its own, derived from its text.
ALTER TABLE feed_events ALTER COLUMN event_id_key TYPE uuid USING
    CASE WHEN event_id_key ~ '^[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}$' THEN event_id_key::uuid
         ELSE md5(event_id_key)::uuid END;

-- The inbox's search fields find the latest event by its key.
CREATE OR REPLACE FUNCTION incidents_search_fields() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev jsonb;
    fr jsonb;
BEGIN
    -- Only a UUID (dashed, or 32 hex digits as a monitor writes it) can be
    -- an event's key; anything else is an event that is not stored.
    IF NEW.latest_event_id ~ '^[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}$' THEN
        SELECT e.payload INTO ev FROM feed_events e
            WHERE e.org_id = NEW.org_id AND e.event_id_key = NEW.latest_event_id::uuid;
    END IF;
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
