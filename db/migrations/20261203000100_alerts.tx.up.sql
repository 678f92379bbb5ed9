-- Alerts: destinations per organisation, rules per project and a
-- delivery log. A destination's URL and (for signed webhooks) its Standard
-- Webhooks secret are sealed with the keyring like every other secret.
CREATE TABLE alert_destinations (
    id            uuid PRIMARY KEY,
    org_id        uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name          text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('webhook', 'slack')),
    url_enc       text NOT NULL,
    url_hint      text NOT NULL,
    secret_enc    text NOT NULL DEFAULT '',
    failing_since timestamptz,
    last_success  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name)
);

-- A project without a row for a kind has the rule on, for every
-- destination of its organisation. destination_ids NULL is "every
-- destination", so a destination added later receives the rule too.
CREATE TABLE alert_rules (
    project_id      uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    kind            text NOT NULL,
    enabled         boolean NOT NULL,
    destination_ids uuid[],
    PRIMARY KEY (project_id, kind)
);

-- One row per attempt to deliver (or fold) an alert.
CREATE TABLE alert_deliveries (
    id             bigserial PRIMARY KEY,
    destination_id uuid NOT NULL REFERENCES alert_destinations (id) ON DELETE CASCADE,
    message_id     text NOT NULL,
    kind           text NOT NULL,
    status         text NOT NULL CHECK (status IN ('sending', 'delivered', 'failed', 'folded', 'digested')),
    status_code    int,
    latency_ms     int,
    error          text NOT NULL DEFAULT '',
    attempt        int NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_deliveries_destination_idx ON alert_deliveries (destination_id, created_at DESC);
