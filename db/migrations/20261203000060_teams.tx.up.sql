-- Teams: invitations, operator password resets, the audit log, and when a
-- member was last seen.
ALTER TABLE memberships ADD COLUMN last_seen_at timestamptz;

-- An invitation is stored only as the SHA-256 of its one-time token: the
-- link exists in plaintext once, in the answer that created it.
CREATE TABLE invitations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email       text NOT NULL,
    role        text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    token_hash  bytea NOT NULL UNIQUE,
    invited_by  uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    used_by     uuid REFERENCES users (id) ON DELETE SET NULL,
    revoked_at  timestamptz
);
CREATE INDEX invitations_org_idx ON invitations (org_id, created_at DESC);

-- A reset link of `anvil admin reset-password`, stored as a hash, used once.
CREATE TABLE password_resets (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);

-- Who did what, per organisation; written in the transaction of the change.
-- actor_email is kept as text so that an entry outlives its actor.
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    org_id      uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    at          timestamptz NOT NULL DEFAULT now(),
    actor_id    uuid,
    actor_email text NOT NULL,
    kind        text NOT NULL,
    target      text NOT NULL DEFAULT '',
    detail      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_org_idx ON audit_log (org_id, id DESC);
CREATE INDEX audit_log_org_kind_idx ON audit_log (org_id, kind, id DESC);
