-- The storm bound of alerts (docs/contracts/alerts.md, "Storms"): how many
-- alerts each destination was sent in each clock minute. One row per
-- destination and minute, counted up by one statement per delivery,
-- instead of counting the delivery log's rows of the last minute on every
-- delivery (which grew with the storm it bounds).
CREATE TABLE alert_minutes (
    destination_id uuid NOT NULL REFERENCES alert_destinations (id) ON DELETE CASCADE,
    minute         timestamptz NOT NULL,
    sent           int NOT NULL,
    PRIMARY KEY (destination_id, minute)
);
