-- A network a project allows its runs (docs/network.md): the hosts its runs
-- may reach through anvil's egress proxy, and those its repair runs may
-- reach. Empty (the default) keeps runs offline, as they always were.
ALTER TABLE projects
    ADD COLUMN network_allow text[] NOT NULL DEFAULT '{}',
    ADD COLUMN repair_network_allow text[] NOT NULL DEFAULT '{}';

-- Which runs receive a secret: runs, repairs or both. Every secret saved
-- before scopes existed reached both kinds of run, and keeps doing so.
ALTER TABLE run_secrets ADD COLUMN scope text NOT NULL DEFAULT 'both'
    CHECK (scope IN ('runs', 'repairs', 'both'));

-- Every connection a run made through its proxy (docs/network.md,
-- "Connections"): one row each, up to a bound per run; beyond it, repeats of
-- a destination and verdict are folded into one row and counted. Erased with
-- the run (domain/erasure) and with its log (retention).
CREATE TABLE run_connections (
    run_id       uuid NOT NULL REFERENCES project_runs (id) ON DELETE CASCADE,
    seq          integer NOT NULL,
    host         text NOT NULL,
    port         integer NOT NULL,
    verdict      text NOT NULL CHECK (verdict IN ('allowed', 'refused', 'failed')),
    reason       text NOT NULL DEFAULT '',
    method       text NOT NULL DEFAULT '',
    bytes_up     bigint NOT NULL DEFAULT 0,
    bytes_down   bigint NOT NULL DEFAULT 0,
    duration_ms  bigint NOT NULL DEFAULT 0,
    count        integer NOT NULL DEFAULT 1,
    started_at   timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);
