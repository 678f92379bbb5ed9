-- Production cards (seed 004, "The portfolio dashboard's production card";
-- DESIGN.md §5) and the indexes the inbox, the incident page and the
-- dashboard read through.
--
-- One card per project, replaced whole. The row is created by the first
-- refresh; it is the project's dashboard configuration: config_id names it
-- in the external ingest's URL, and once external is set the token (stored
-- as its 16-character lookup prefix plus SHA-256) belongs to the producer
-- that owns the card from then on.
CREATE TABLE project_cards (
    project_id   uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    org_id       uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    config_id    uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    source       text NOT NULL DEFAULT 'anvil-feed',
    incidents    jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(incidents) = 'array'),
    external     boolean NOT NULL DEFAULT false,
    token_prefix text UNIQUE,
    token_hash   bytea,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (NOT external OR (token_prefix IS NOT NULL AND token_hash IS NOT NULL))
);

-- The inbox filtered by project, newest first.
CREATE INDEX incidents_project_last_seen_idx ON incidents (project_id, last_seen DESC);
-- The terminal hook finds the incident of a repair run.
CREATE INDEX incidents_repair_run_idx ON incidents (repair_run_id) WHERE repair_run_id IS NOT NULL;
-- The dashboard's 24-hour sparkline counts a project's recent events.
CREATE INDEX feed_events_project_received_idx ON feed_events (project_id, received_at);
-- A repair run of an incident that is still open (dispatch idempotency).
CREATE INDEX project_runs_incident_idx ON project_runs (incident_id) WHERE incident_id IS NOT NULL;
