-- A repair run's change, kept as a patch ("nothing a person did
-- is lost"): written when the repair command changed the working tree,
-- before anything is pushed, so the change survives a push or a pull
-- request that fails (or a project without a forge) and its run page can
-- always show and offer it. Masked with the run's secrets like its log.
CREATE TABLE run_patches (
    run_id     uuid PRIMARY KEY REFERENCES project_runs (id) ON DELETE CASCADE,
    patch      text NOT NULL,
    truncated  boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);
