-- A secret made by a form (an API token, a feed connection's token, a
-- webhook secret, a card producer's token) is shown once on the page the
-- form redirects to. Until that page is read it waits here: sealed under the
-- operator key with its session and slot as associated data, bound to the
-- session (gone with it), taken by DELETE … RETURNING on the first read, and
-- purged after a few minutes if nobody reads it. It never travels in a URL
-- or a cookie.
CREATE TABLE session_reveals (
    session_id bytea NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    slot       text NOT NULL CHECK (length(slot) BETWEEN 1 AND 200),
    sealed     text NOT NULL CHECK (sealed <> ''),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (session_id, slot)
);
CREATE INDEX session_reveals_expires ON session_reveals (expires_at);
