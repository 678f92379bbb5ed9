-- Pipelines from the repository (docs/pipelines.md): which file a run read
-- and why it was refused; its steps, each with its own status and times;
-- which step a log chunk belongs to (NULL: anvil's narration of the run);
-- the files a step kept (artifacts), in Postgres because the web process
-- that serves them may run on another machine than the worker that made
-- them. Steps and artifacts go with their run (ON DELETE CASCADE) and are
-- erased with its log by retention and erasure.
ALTER TABLE project_runs ADD COLUMN pipeline_file text;
ALTER TABLE project_runs ADD COLUMN pipeline_error text;
ALTER TABLE run_log_chunks ADD COLUMN step integer;

CREATE TABLE run_steps (
    run_id       uuid NOT NULL REFERENCES project_runs (id) ON DELETE CASCADE,
    idx          integer NOT NULL CHECK (idx >= 0),
    key          text NOT NULL,
    name         text NOT NULL,
    workflow     text NOT NULL DEFAULT '',
    matrix       jsonb NOT NULL DEFAULT '{}',
    image        text NOT NULL DEFAULT '',
    image_digest text NOT NULL DEFAULT '',
    status       text NOT NULL CHECK (status IN ('pending', 'running', 'passed', 'failed', 'skipped', 'canceled')),
    exit_code    integer,
    ignored      boolean NOT NULL DEFAULT false,
    detached     boolean NOT NULL DEFAULT false,
    reason       text NOT NULL DEFAULT '',
    needs        integer[] NOT NULL DEFAULT '{}',
    started_at   timestamptz,
    finished_at  timestamptz,
    PRIMARY KEY (run_id, idx),
    UNIQUE (run_id, key)
);

CREATE TABLE run_artifacts (
    run_id     uuid NOT NULL REFERENCES project_runs (id) ON DELETE CASCADE,
    path       text NOT NULL,
    step       text NOT NULL,
    size       bigint NOT NULL CHECK (size >= 0),
    sha256     text NOT NULL,
    body       bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, path)
);
