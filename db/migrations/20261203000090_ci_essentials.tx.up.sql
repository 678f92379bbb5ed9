-- CI essentials: per-project run numbers, re-runs, who canceled,
-- the fork flag that withholds secrets, branch filters and run secrets.

-- A run's number (#42) is dense per project: assigned at acceptance under the
-- project's row lock as one more than the project's largest, so the accepted
-- runs of a project are numbered 1, 2, 3 … without gaps or duplicates
-- (refused triggers take none). Existing runs are numbered in queue order.
ALTER TABLE project_runs ADD COLUMN number bigint;
UPDATE project_runs r SET number = n.number
    FROM (SELECT id, row_number() OVER (PARTITION BY project_id ORDER BY queued_at, position NULLS LAST, id) AS number
          FROM project_runs) n
    WHERE r.id = n.id;
ALTER TABLE project_runs ALTER COLUMN number SET NOT NULL,
    ADD CONSTRAINT project_runs_number_positive CHECK (number > 0);
CREATE UNIQUE INDEX project_runs_number ON project_runs (project_id, number);

ALTER TABLE run_index ADD COLUMN number bigint;
UPDATE run_index ri SET number = r.number FROM project_runs r WHERE r.id = ri.run_id;

-- The run this one repeats (POST /api/private/runs/:id/rerun).
ALTER TABLE project_runs ADD COLUMN rerun_of uuid REFERENCES project_runs (id) ON DELETE SET NULL;
-- Who asked for the cancellation.
-- canceled_by itself came with the forge statuses' migration; a person who is
-- deleted leaves the run canceled by nobody.
ALTER TABLE project_runs ADD CONSTRAINT project_runs_canceled_by_fkey FOREIGN KEY (canceled_by) REFERENCES users (id) ON DELETE SET NULL;
-- Runs of code from a fork (a pull request from another repository) never
-- receive the project's secrets: the acceptance of such a run sets this.
ALTER TABLE project_runs ADD COLUMN from_fork boolean NOT NULL DEFAULT false;

-- Branch globs whose pushes become runs; empty means the default branch alone.
ALTER TABLE projects ADD COLUMN branch_filters text[] NOT NULL DEFAULT '{}';

-- Run secrets: sealed with the operator key (domain/secret), never shown again.
CREATE TABLE run_secrets (
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (name ~ '^[A-Z_][A-Z0-9_]{0,127}$'),
    sealed      text NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_by  uuid REFERENCES users (id) ON DELETE SET NULL,
    PRIMARY KEY (project_id, name)
);
