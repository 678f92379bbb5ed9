-- Short ids (docs/releases.md "Short ids"): every incident gets a
-- per-project number, shown as <SLUG>-<number> (SHOP-12). The numbers come
-- from a counter row per project, taken by a trigger, so every writer of
-- incidents (the feed's COPY path, its general path, any later door) gets
-- one without knowing of it. The counter is its own row, not the project's:
-- the project row is the queue's lock, and the feed's groups must never
-- wait on it. Gaps are allowed (an insert that loses ON CONFLICT spends a
-- number); a number is never reused.
CREATE TABLE incident_numbers (
    project_id uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    last       bigint NOT NULL
);

ALTER TABLE incidents ADD COLUMN number bigint;
UPDATE incidents i SET number = n.number
    FROM (SELECT id, row_number() OVER (PARTITION BY project_id ORDER BY created_at, id) AS number FROM incidents) n
    WHERE i.id = n.id;
INSERT INTO incident_numbers (project_id, last) SELECT project_id, max(number) FROM incidents GROUP BY project_id;

CREATE FUNCTION incident_number() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.number IS NULL THEN
        INSERT INTO incident_numbers AS n (project_id, last) VALUES (NEW.project_id, 1)
            ON CONFLICT (project_id) DO UPDATE SET last = n.last + 1
            RETURNING last INTO NEW.number;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER incidents_number BEFORE INSERT ON incidents FOR EACH ROW EXECUTE FUNCTION incident_number();

ALTER TABLE incidents ALTER COLUMN number SET NOT NULL,
    ADD CONSTRAINT incidents_project_number_key UNIQUE (project_id, number);
