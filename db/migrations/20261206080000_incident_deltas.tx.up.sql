-- An incident's count, last seen, latest event and release, and its
-- release's count, as deltas (docs/feed.md, "The write path and its costs"):
-- a group of batches appends one row per incident and release it counted on,
-- and a fold adds them to the incident and release rows shortly after, in
-- the transaction that deletes them — so no batch waits for another's lock
-- on the incident row of a storm's one fault, and a fold cut off half-way
-- counts nothing twice.
--
-- No foreign keys: a delta of an incident or project deleted meanwhile is
-- folded into nothing (the fold finds no row to update).
CREATE TABLE incident_deltas (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    incident_id     uuid NOT NULL,
    org_id          uuid NOT NULL,
    project_id      uuid NOT NULL,
    environment     text NOT NULL,
    n               bigint NOT NULL CHECK (n > 0),
    last_seen       timestamptz NOT NULL,
    latest_event_id text NOT NULL,
    release         text NOT NULL DEFAULT '',
    -- count_release: the release's event count is the fold's to add (false
    -- when the group counted its releases itself, with the incidents it
    -- created); browser: the events came through a browser connection.
    count_release   boolean NOT NULL,
    browser         boolean NOT NULL
);
