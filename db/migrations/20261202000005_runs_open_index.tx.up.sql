-- The queue's hot query reads a project's open runs only; without this it
-- would scan the project's whole history.
CREATE INDEX project_runs_open ON project_runs (project_id)
    WHERE state IN ('pending', 'executable', 'starting', 'running', 'cancel_requested', 'canceling');
