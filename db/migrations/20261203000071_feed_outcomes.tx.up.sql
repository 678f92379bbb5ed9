-- Outcomes of the feed's doors per connection and hour:
-- how many events were accepted, how many refused by reason code, and the
-- last refusal's message. The ingest counts in memory and a flusher adds its
-- counts here about once a second in one statement, so no request pays a
-- write of its own. reason_code '' holds the accepted count.
CREATE TABLE feed_outcomes (
    connection_id uuid NOT NULL REFERENCES feed_connections (id) ON DELETE CASCADE,
    hour          timestamptz NOT NULL,
    reason_code   text NOT NULL,
    count         bigint NOT NULL CHECK (count >= 0),
    last_message  text NOT NULL DEFAULT '',
    last_at       timestamptz NOT NULL,
    PRIMARY KEY (connection_id, hour, reason_code)
);
CREATE INDEX feed_outcomes_hour_idx ON feed_outcomes (hour);
