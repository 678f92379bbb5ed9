-- Deliveries the public webhook route refused before (or without) writing
-- to the ledger: seed 000 §9 keeps the ledger for verified deliveries only,
-- so a forge that signs with the wrong secret would otherwise leave no trace
-- in the cockpit. Counted per project, provider, reason and hour (one upsert
-- per refusal, on one row per hour), for the webhook page's "refused in the
-- last 24 h"; rows older than the ledger's 72 h go with it. A request for a
-- project that does not exist counts nowhere.
CREATE TABLE webhook_refusals (
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    provider    text NOT NULL CHECK (provider IN ('github', 'gitlab', 'gitea')),
    reason      text NOT NULL CHECK (reason IN ('not_configured', 'missing_signature', 'invalid_signature',
                    'webhook_disabled', 'missing_delivery_id', 'invalid_delivery_id')),
    hour        timestamptz NOT NULL,
    refusals    bigint NOT NULL CHECK (refusals >= 1),
    last_at     timestamptz NOT NULL,
    -- the last refusal's explanation as the forge was told it (names headers,
    -- never a secret or a signature)
    last_detail text NOT NULL DEFAULT '' CHECK (length(last_detail) <= 200),
    PRIMARY KEY (project_id, provider, reason, hour)
);
CREATE INDEX webhook_refusals_hour ON webhook_refusals (hour);
