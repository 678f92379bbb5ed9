-- Cron monitors (docs/monitors.md): a monitor per project and
-- slug, its state per environment (where the missed-run sweep finds what is
-- due), and its check-ins (runs). Durations are whole minutes where Sentry's
-- monitor_config speaks in minutes (checkin_margin, max_runtime).
CREATE TABLE monitors (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    project_id         uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    slug               text NOT NULL,
    schedule_type      text NOT NULL CHECK (schedule_type IN ('crontab', 'interval')),
    schedule_value     text NOT NULL,
    schedule_unit      text NOT NULL DEFAULT '',
    timezone           text NOT NULL DEFAULT 'UTC',
    checkin_margin     integer NOT NULL DEFAULT 1 CHECK (checkin_margin >= 0),
    max_runtime        integer NOT NULL DEFAULT 30 CHECK (max_runtime >= 1),
    failure_threshold  integer NOT NULL DEFAULT 1 CHECK (failure_threshold >= 1),
    recovery_threshold integer NOT NULL DEFAULT 1 CHECK (recovery_threshold >= 1),
    environment        text NOT NULL DEFAULT 'production',
    paused             boolean NOT NULL DEFAULT false,
    -- The ping key (anv_png_…): its first 16 characters and its SHA-256,
    -- like every token; NULL once revoked.
    ping_lookup        text UNIQUE,
    ping_hash          bytea,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT monitors_slug_key UNIQUE (project_id, slug)
);

-- One row per monitor and environment that has checked in: the next run
-- expected, the streaks, the open incident and the rate window. due_at is
-- expected_at + checkin_margin; the sweep claims rows whose due_at passed.
CREATE TABLE monitor_states (
    monitor_id      uuid NOT NULL REFERENCES monitors (id) ON DELETE CASCADE,
    environment     text NOT NULL,
    project_id      uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    last_checkin_at timestamptz,
    last_status     text NOT NULL DEFAULT '',
    last_duration_ms bigint,
    expected_at     timestamptz,
    due_at          timestamptz,
    failures        integer NOT NULL DEFAULT 0,
    oks             integer NOT NULL DEFAULT 0,
    ok_times        timestamptz[] NOT NULL DEFAULT '{}',
    incident_id     uuid,
    window_start    timestamptz,
    window_count    integer NOT NULL DEFAULT 0,
    PRIMARY KEY (monitor_id, environment)
);
CREATE INDEX monitor_states_due_idx ON monitor_states (due_at) WHERE due_at IS NOT NULL;

-- Every run: a check-in from an SDK or the ping URL, or a run the sweep
-- found missed. checkin_id is the SDK's check_in_id (pairs in_progress with
-- its ok/error); timeout_at is when an in_progress run exceeds max_runtime.
CREATE TABLE monitor_checkins (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    monitor_id  uuid NOT NULL REFERENCES monitors (id) ON DELETE CASCADE,
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    environment text NOT NULL,
    checkin_id  uuid,
    status      text NOT NULL CHECK (status IN ('in_progress', 'ok', 'error', 'missed', 'timeout')),
    source      text NOT NULL CHECK (source IN ('sentry', 'ping', 'anvil')),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    duration_ms bigint,
    expected_at timestamptz,
    timeout_at  timestamptz,
    exit_code   integer,
    release     text NOT NULL DEFAULT '',
    output      text NOT NULL DEFAULT '',
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX monitor_checkins_monitor_idx ON monitor_checkins (monitor_id, environment, started_at DESC);
CREATE UNIQUE INDEX monitor_checkins_pair_idx ON monitor_checkins (monitor_id, checkin_id) WHERE checkin_id IS NOT NULL;
CREATE INDEX monitor_checkins_timeout_idx ON monitor_checkins (timeout_at) WHERE status = 'in_progress';
CREATE INDEX monitor_checkins_project_received_idx ON monitor_checkins (project_id, received_at);

-- The daily budget counts check-ins apart from events (docs/retention.md).
ALTER TABLE feed_daily_usage ADD COLUMN checkins bigint NOT NULL DEFAULT 0 CHECK (checkins >= 0);
