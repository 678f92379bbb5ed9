-- Queue positions come from one sequence instead of a counter on the
-- project row. A position is a per-project ordering token (seed 000 §4):
-- monotonically increasing within a project, never renumbered, gaps
-- allowed. Every value is drawn while the project's row lock is held, so a
-- later acceptance into a project always draws a larger value; and
-- acceptance no longer rewrites the (wide) project row, once per run.
CREATE SEQUENCE run_positions AS bigint;
SELECT setval('run_positions', GREATEST(1, (SELECT COALESCE(max(next_position), 0) FROM projects)),
              (SELECT COALESCE(max(next_position), 0) FROM projects) > 0);
ALTER TABLE projects DROP COLUMN next_position;
