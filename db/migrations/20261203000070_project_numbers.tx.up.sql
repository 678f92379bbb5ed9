-- A project's number is the last path segment of a Sentry DSN:
-- the Python and JavaScript SDKs refuse a DSN whose project is not all
-- digits. It comes from a sequence, so it is assigned once and never reused,
-- not even after the project is deleted; existing projects are numbered in
-- the order they were created.
CREATE SEQUENCE project_number_seq AS bigint START 1;

ALTER TABLE projects ADD COLUMN number bigint;
UPDATE projects p SET number = n.number
    FROM (SELECT id, nextval('project_number_seq') AS number
          FROM (SELECT id FROM projects ORDER BY created_at, id) o) n
    WHERE p.id = n.id;
ALTER TABLE projects
    ALTER COLUMN number SET DEFAULT nextval('project_number_seq'),
    ALTER COLUMN number SET NOT NULL,
    ADD CONSTRAINT projects_number_positive CHECK (number > 0),
    ADD CONSTRAINT projects_number_key UNIQUE (number);
ALTER SEQUENCE project_number_seq OWNED BY projects.number;
