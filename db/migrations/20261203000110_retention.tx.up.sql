-- Retention and quotas (docs/retention.md): what anvil keeps, for
-- how long, what each clean-up removed, and the daily event budget's count.

-- One row per organisation (project_id NULL) and one per project that
-- overrides it. In the organisation's row a NULL field is the documented
-- default; in a project's row it inherits the organisation's value.
-- Durations are whole seconds. daily_event_budget: NULL in the
-- organisation's row is "no budget"; in a project's row NULL inherits and
-- 0 is "no budget for this project".
CREATE TABLE retention_policies (
    org_id              uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    project_id          uuid REFERENCES projects (id) ON DELETE CASCADE,
    events_seconds      bigint CHECK (events_seconds > 0),
    logs_seconds        bigint CHECK (logs_seconds > 0),
    log_runs            integer CHECK (log_runs >= 0),
    incidents_seconds   bigint CHECK (incidents_seconds > 0),
    audit_seconds       bigint CHECK (audit_seconds > 0),
    events_first        integer CHECK (events_first >= 0),
    events_last         integer CHECK (events_last >= 0),
    daily_event_budget  bigint CHECK (daily_event_budget >= 0),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX retention_policies_org_key ON retention_policies (org_id) WHERE project_id IS NULL;
CREATE UNIQUE INDEX retention_policies_project_key ON retention_policies (project_id) WHERE project_id IS NOT NULL;

-- What the last clean-up of a project (or, project_id NULL, of an
-- organisation's audit log) removed. A clean-up adds to its row in the
-- transaction of each batch it deletes, so the figures survive a crash and
-- a resumed clean-up (finished_at still NULL) goes on counting in the same
-- row. sampled_until is how far the per-incident sampling got: incidents
-- with no event since are not looked at again (NULL: look at all).
CREATE TABLE retention_cleanups (
    org_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    project_id     uuid REFERENCES projects (id) ON DELETE CASCADE,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz,
    events         bigint NOT NULL DEFAULT 0,
    sampled        bigint NOT NULL DEFAULT 0,
    incidents      bigint NOT NULL DEFAULT 0,
    log_chunks     bigint NOT NULL DEFAULT 0,
    log_bytes      bigint NOT NULL DEFAULT 0,
    audit          bigint NOT NULL DEFAULT 0,
    sampled_until  timestamptz
);
CREATE UNIQUE INDEX retention_cleanups_org_key ON retention_cleanups (org_id) WHERE project_id IS NULL;
CREATE UNIQUE INDEX retention_cleanups_project_key ON retention_cleanups (project_id) WHERE project_id IS NOT NULL;

-- How many of an incident's events were sampled away (the incident page
-- says so; its event_count never changes).
CREATE TABLE incident_samples (
    incident_id uuid PRIMARY KEY REFERENCES incidents (id) ON DELETE CASCADE,
    sampled     bigint NOT NULL DEFAULT 0 CHECK (sampled >= 0)
);

-- Events that arrived per project and UTC day, for the daily budget and the
-- Feed page. Each process counts in memory and adds its counts here about
-- once a second, one statement for all its projects.
CREATE TABLE feed_daily_usage (
    project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    day        date NOT NULL,
    events     bigint NOT NULL DEFAULT 0 CHECK (events >= 0),
    PRIMARY KEY (project_id, day)
);
