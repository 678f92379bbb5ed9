-- Who made or last edited a monitor's settings (docs/monitors.md, "What a
-- check-in may change"): 'check_in' (a check-in's monitor_config made it and
-- only check-ins changed it since), 'api' or 'cockpit'. A check-in's
-- monitor_config changes only a 'check_in' monitor.
ALTER TABLE monitors ADD COLUMN origin text NOT NULL DEFAULT 'api' CHECK (origin IN ('check_in', 'api', 'cockpit'));

-- A monitor made through the API or the cockpit left a monitor.created line
-- in the audit log; the others were made by a check-in.
UPDATE monitors m SET origin = 'check_in' WHERE NOT EXISTS (
    SELECT 1 FROM audit_log a WHERE a.org_id = m.org_id AND a.kind IN ('monitor.created', 'monitor.updated')
        AND a.target = m.slug AND a.detail ->> 'project_id' = m.project_id::text);
