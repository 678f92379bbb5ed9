-- Commit statuses reported to the forge. One row per run: the last
-- report, what is being retried, and the lease that keeps one poster per run
-- at a time so a slow post never lands after a newer one.
ALTER TABLE project_runs ADD COLUMN canceled_by uuid;

CREATE TABLE run_forge_reports (
    run_id          uuid PRIMARY KEY REFERENCES project_runs (id) ON DELETE CASCADE,
    provider        text NOT NULL,
    anvil_status    text NOT NULL DEFAULT '',
    state           text NOT NULL DEFAULT '',
    description     text NOT NULL DEFAULT '',
    reported_at     timestamptz,
    error           text NOT NULL DEFAULT '',
    next_attempt_at timestamptz,
    lease_until     timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Pull- and merge-request runs (trigger pull_request), and why a delivery
-- was ignored, kept in the ledger beside its outcome.
ALTER TABLE project_runs DROP CONSTRAINT project_runs_trigger_check;
ALTER TABLE project_runs ADD CONSTRAINT project_runs_trigger_check
    CHECK (trigger IN ('manual', 'webhook', 'repair', 'pull_request'));
ALTER TABLE project_webhook_deliveries ADD COLUMN reason text NOT NULL DEFAULT '';
