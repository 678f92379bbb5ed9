-- Webhooks (seed 000, Resolutions 7–11; DESIGN.md §4).
--
-- project_webhooks holds one row per project and provider: enablement, the
-- provider config and the verification material, sealed with AES-256-GCM
-- under the operator key (domain/secret). The associated data of each sealed
-- value binds it to its row ("webhook:<project>:<provider>:secret" and
-- ":signing_token"), so a value copied into another row does not open there.
-- No plaintext secret is ever stored.
CREATE TABLE project_webhooks (
    project_id        uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    provider          text NOT NULL CHECK (provider IN ('github', 'gitlab', 'gitea')),
    enabled           boolean NOT NULL,
    secret_enc        text NOT NULL CHECK (secret_enc <> ''),
    -- GitLab's optional Standard-Webhooks signing token; '' when not configured.
    signing_token_enc text NOT NULL DEFAULT '',
    config            jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (project_id, provider)
);

-- The delivery ledger: every verified delivery, with the outcome decided for
-- it. Duplicates replay the stored row; only queue_full is re-evaluated (the
-- 2026-03-22 addendum). Rows are written only under the project row lock.
CREATE TABLE project_webhook_deliveries (
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    provider    text NOT NULL CHECK (provider IN ('github', 'gitlab', 'gitea')),
    delivery_id text NOT NULL CHECK (length(delivery_id) BETWEEN 1 AND 200),
    outcome     text NOT NULL CHECK (outcome IN ('accepted', 'ignored_ping', 'ignored_event', 'ignored_branch', 'queue_full')),
    event       text NOT NULL,   -- the raw provider event name (header value)
    kind        text NOT NULL,   -- the normalized kind (push, tag, branch_delete, ping, other)
    ref         text NOT NULL DEFAULT '',
    branch      text NOT NULL DEFAULT '',
    commit_sha  text NOT NULL DEFAULT '',
    run_id      uuid,            -- set exactly when outcome = accepted
    received_at timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    attempts    integer NOT NULL DEFAULT 1 CHECK (attempts >= 1),
    PRIMARY KEY (project_id, provider, delivery_id),
    CHECK ((run_id IS NOT NULL) = (outcome = 'accepted'))
);
-- 72 h retention deletes by age.
CREATE INDEX project_webhook_deliveries_received ON project_webhook_deliveries (received_at);
-- The settings page and the API list a project's latest deliveries.
CREATE INDEX project_webhook_deliveries_latest ON project_webhook_deliveries (project_id, received_at DESC);
