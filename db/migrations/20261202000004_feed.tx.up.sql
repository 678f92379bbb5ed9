-- The Anvil Feed (seed 004; DESIGN.md §5): connections, bindings, stored
-- events and the incident store they group into.

-- A connection is one sender's credential for one project. The token is
-- stored as its first 16 characters (the lookup key) plus its SHA-256, never
-- in plaintext; revoking sets revoked_at and the next request is a 401.
CREATE TABLE feed_connections (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id       uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    project_id   uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    prefix       text NOT NULL UNIQUE CHECK (length(prefix) = 16),
    hash         bytea NOT NULL CHECK (length(hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX feed_connections_project_idx ON feed_connections (project_id, created_at DESC);

-- A binding admits a project's events of one environment (or of every
-- environment, '*') and says what happens to their incidents.
CREATE TABLE feed_bindings (
    project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment   text NOT NULL CHECK (environment = '*' OR environment ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    repair_policy text NOT NULL CHECK (repair_policy IN ('off', 'observe', 'approve', 'auto')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project_id, environment)
);

-- The incident store: events of one project and environment with one
-- fingerprint are one incident. status is the lifecycle of DESIGN.md §5.
CREATE TABLE incidents (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    project_id         uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment        text NOT NULL,
    fingerprint        text NOT NULL,
    title              text NOT NULL,
    exception_type     text NOT NULL DEFAULT '',
    status             text NOT NULL CHECK (status IN ('OBSERVED', 'TRIAGED', 'WAITING_APPROVAL', 'QUEUED', 'RUNNING',
                                                       'PR_OPEN', 'NEEDS_HUMAN', 'CLOSED', 'IGNORED')),
    event_count        bigint NOT NULL DEFAULT 0 CHECK (event_count >= 0),
    first_seen         timestamptz NOT NULL,
    last_seen          timestamptz NOT NULL,
    latest_event_id    text NOT NULL DEFAULT '',
    release            text NOT NULL DEFAULT '',
    pr_url             text NOT NULL DEFAULT '',
    repair_run_id      uuid,
    needs_human_reason text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT incidents_group_key UNIQUE (project_id, environment, fingerprint)
);
-- The inbox: an organisation's incidents by last seen, optionally by status.
CREATE INDEX incidents_inbox_idx ON incidents (org_id, last_seen DESC);
CREATE INDEX incidents_inbox_status_idx ON incidents (org_id, status, last_seen DESC);

-- Every lifecycle step with its actor: a person, the binding's policy, the
-- repair worker or the system itself. from_status is NULL for the creation.
CREATE TABLE incident_transitions (
    id          bigserial PRIMARY KEY,
    incident_id uuid NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
    from_status text,
    to_status   text NOT NULL,
    actor_kind  text NOT NULL CHECK (actor_kind IN ('person', 'policy', 'repair', 'system')),
    actor_id    text NOT NULL DEFAULT '',
    reason      text NOT NULL DEFAULT '',
    at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX incident_transitions_incident_idx ON incident_transitions (incident_id, id);

-- Stored events, scrubbed. The dedupe key is (organisation, event_id) with
-- the id lower-cased: a resent event is stored and counted once, while the
-- same id from another organisation is its own event.
CREATE TABLE feed_events (
    org_id        uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    event_id_key  text NOT NULL,
    project_id    uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    connection_id uuid NOT NULL,
    environment   text NOT NULL,
    fingerprint   text NOT NULL,
    -- Deferred: the ingest learns which events are new (the dedupe insert)
    -- before it knows how many each incident gains, so it inserts the events
    -- first, pointing at incident ids it has already chosen.
    incident_id   uuid NOT NULL REFERENCES incidents (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    received_at   timestamptz NOT NULL,
    occurred_at   timestamptz NOT NULL,
    payload       jsonb NOT NULL,
    CONSTRAINT feed_events_dedupe_key UNIQUE (org_id, event_id_key)
);
-- An incident's events, newest first (the incident page, the 24 h chart).
CREATE INDEX feed_events_incident_idx ON feed_events (incident_id, received_at DESC);
