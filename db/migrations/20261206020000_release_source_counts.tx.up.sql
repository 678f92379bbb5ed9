-- Per-source counts and first-seen times on a release's row
-- (docs/releases.md, "Sources and trust"). A browser key is public: its
-- events may name any release, so a release ships a fix only on a server
-- connection's first event (server_first_seen) or a deploy declared for
-- its environment, and only server events count as the events a release
-- with the fix served while it was verified.
ALTER TABLE releases
    ADD COLUMN server_first_seen   timestamptz,
    ADD COLUMN server_event_count  bigint NOT NULL DEFAULT 0 CHECK (server_event_count >= 0),
    ADD COLUMN browser_first_seen  timestamptz,
    ADD COLUMN browser_event_count bigint NOT NULL DEFAULT 0 CHECK (browser_event_count >= 0);
-- Rows seen before: one kind of connection only is that kind's; a row seen
-- from both cannot be split, and stays what it was (its server side holds
-- the whole), as it shipped and counted before.
UPDATE releases SET server_first_seen = first_seen, server_event_count = event_count WHERE seen_server;
UPDATE releases SET browser_first_seen = first_seen, browser_event_count = event_count WHERE seen_browser AND NOT seen_server;
