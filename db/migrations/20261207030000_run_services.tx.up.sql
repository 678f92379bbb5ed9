-- A run's services (docs/images.md, "Services"): each service a workflow's
-- pod started, with its image, ports, status and times, and the end of its
-- log (masked as the run's log is, at most its last 64 KiB; log_bytes is
-- how much it wrote in all), so that the run's page and API show a
-- service's state and output on their own. They go with their run (ON
-- DELETE CASCADE); retention empties their logs with the run's log and
-- erasure deletes them with the run.
CREATE TABLE run_services (
    run_id       uuid NOT NULL REFERENCES project_runs (id) ON DELETE CASCADE,
    workflow     text NOT NULL DEFAULT '',
    name         text NOT NULL,
    seq          integer NOT NULL CHECK (seq >= 0),
    image        text NOT NULL DEFAULT '',
    image_digest text NOT NULL DEFAULT '',
    ports        integer[] NOT NULL DEFAULT '{}',
    status       text NOT NULL CHECK (status IN ('starting', 'ready', 'failed', 'stopped', 'canceled')),
    reason       text NOT NULL DEFAULT '',
    log          text NOT NULL DEFAULT '' CHECK (octet_length(log) <= 65536),
    log_bytes    bigint NOT NULL DEFAULT 0 CHECK (log_bytes >= 0),
    started_at   timestamptz,
    ready_at     timestamptz,
    finished_at  timestamptz,
    PRIMARY KEY (run_id, workflow, name)
);
