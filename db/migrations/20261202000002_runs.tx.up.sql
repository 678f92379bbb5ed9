-- Runs and their queue (seed 000, Resolutions 1–7). project_runs is the
-- authoritative state, written only by the domain queue service inside a
-- transaction holding the project row lock; run_index is the read model.
CREATE TABLE project_runs (
    id              uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    org_id          uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    -- internal queue state: pending and executable both read as public "queued"
    state           text NOT NULL CHECK (state IN ('pending', 'executable', 'starting', 'running',
                        'cancel_requested', 'canceling', 'passed', 'failed', 'canceled')),
    trigger         text NOT NULL CHECK (trigger IN ('manual', 'webhook', 'repair')),
    branch          text NOT NULL,
    commit_sha      text,
    -- queued-only FIFO token: monotonically increasing per project, never renumbered, NULL once not queued
    position        bigint,
    exit_code       integer,
    failure_reason  text,
    triggered_by    uuid REFERENCES users (id) ON DELETE SET NULL,
    provider        text,
    delivery_id     text,
    incident_id     uuid,
    job_id          bigint,
    executor        text,
    sandboxed       boolean,
    log_bytes       bigint NOT NULL DEFAULT 0,
    log_truncated   boolean NOT NULL DEFAULT false,
    d1_sync_status  text NOT NULL DEFAULT 'needs_create' CHECK (d1_sync_status IN
                        ('needs_create', 'current', 'needs_update', 'needs_terminal_update', 'done')),
    queued_at       timestamptz NOT NULL,
    promoted_at     timestamptz,
    claimed_at      timestamptz,
    started_at      timestamptz,
    heartbeat_at    timestamptz,
    finished_at     timestamptz,
    updated_at      timestamptz NOT NULL,
    CHECK ((position IS NOT NULL) = (state IN ('pending', 'executable')))
);
-- One active run per project, enforced by the database as well as the service.
CREATE UNIQUE INDEX project_runs_one_active ON project_runs (project_id)
    WHERE state IN ('executable', 'starting', 'running', 'cancel_requested', 'canceling');
CREATE UNIQUE INDEX project_runs_position ON project_runs (project_id, position) WHERE position IS NOT NULL;
CREATE INDEX project_runs_live ON project_runs (state, heartbeat_at)
    WHERE state IN ('executable', 'starting', 'running', 'cancel_requested', 'canceling');
CREATE INDEX project_runs_unsynced ON project_runs (updated_at) WHERE d1_sync_status NOT IN ('current', 'done');
CREATE INDEX project_runs_project ON project_runs (project_id, queued_at DESC);

-- The read model every list and dashboard reads (the seed's D1 run_index).
CREATE TABLE run_index (
    run_id          uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    org_id          uuid NOT NULL,
    status          text NOT NULL CHECK (status IN ('queued', 'starting', 'running', 'cancel_requested',
                        'canceling', 'passed', 'failed', 'canceled')),
    trigger         text NOT NULL,
    branch          text NOT NULL,
    commit_sha      text,
    exit_code       integer,
    failure_reason  text,
    queued_at       timestamptz NOT NULL,
    started_at      timestamptz,
    finished_at     timestamptz,
    synced_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX run_index_project ON run_index (project_id, queued_at DESC);
CREATE INDEX run_index_org ON run_index (org_id, queued_at DESC);

-- Run logs in ordered chunks.
CREATE TABLE run_log_chunks (
    run_id     uuid NOT NULL REFERENCES project_runs (id) ON DELETE CASCADE,
    seq        integer NOT NULL,
    body       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);
