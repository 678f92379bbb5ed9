-- Browser connections (seed 004's stage B, docs/contracts/feed.md
-- "Browser connections"). A connection is a server's (anv_srv_ token, refused
-- with any Origin) or a browser's (anv_pub_ token, admitted from the origins
-- listed here). The token is stored as before: lookup prefix plus SHA-256.
-- An empty list refuses every browser: the connection exists but no page
-- can use it yet.
ALTER TABLE feed_connections
    ADD COLUMN kind text NOT NULL DEFAULT 'server' CHECK (kind IN ('server', 'browser')),
    ADD COLUMN allowed_origins text[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(allowed_origins) <= 100);

-- A browser token is public by nature (it ships in every page), so the
-- cockpit shows it whenever asked: it is kept sealed under ANVIL_SECRET_KEY
-- (AAD 'feed_connection:<id>:token') beside the lookup prefix and hash that
-- authenticate it. Server tokens are shown once and never kept ('').
ALTER TABLE feed_connections ADD COLUMN token_enc text NOT NULL DEFAULT '';
