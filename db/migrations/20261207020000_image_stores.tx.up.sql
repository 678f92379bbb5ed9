-- The workers' image stores (docs/images.md, "The store"): each worker
-- process reports its store (ANVIL_WORK_DIR/images on its host) every few
-- seconds, so any process — a web-only one too — shows every store, and a
-- clear requested anywhere reaches every worker. id is stable for a store
-- (its host and directory): two processes sharing one store report one row.
-- cleared_through is the clear request the store last carried out (its
-- requested_at); a request later than it is pending. The store is the
-- host's, shared by every organisation: figures only, never which images.
CREATE TABLE image_stores (
    id              text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 1024),
    host            text NOT NULL CHECK (length(host) <= 255),
    images          integer NOT NULL DEFAULT 0 CHECK (images >= 0),
    bytes           bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    cap_bytes       bigint NOT NULL DEFAULT 0 CHECK (cap_bytes >= 0),
    updated_at      timestamptz NOT NULL,
    cleared_through timestamptz
);
CREATE INDEX image_stores_updated_at ON image_stores (updated_at);

-- The last clear requested: one row at most (every store carries it out).
CREATE TABLE image_store_clear (
    one          boolean PRIMARY KEY DEFAULT true CHECK (one),
    requested_at timestamptz NOT NULL,
    requested_by uuid REFERENCES users (id) ON DELETE SET NULL
);
