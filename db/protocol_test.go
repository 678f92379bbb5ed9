package db

import "testing"

// TestPlainRead: only reads that take no row locks keep pgx's statement
// cache; writes and locking reads carry fresh values and go over the
// simple protocol.
func TestPlainRead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		query string
		plain bool
	}{
		{`SELECT * FROM projects WHERE org_id = 'x' ORDER BY slug`, true},
		{"\n\t\tselect p.* FROM projects p", true},
		{`(SELECT 1) UNION (SELECT 2)`, true},
		{`SELECT "project"."id" FROM "projects" AS "project" WHERE (id = 'x') FOR UPDATE`, false},
		{`SELECT id FROM incidents ORDER BY id FOR NO KEY UPDATE`, false},
		{`SELECT 1 FROM projects FOR SHARE`, false},
		{`SELECT 1 FROM projects FOR KEY SHARE`, false},
		{`INSERT INTO runs VALUES (1) RETURNING id`, false},
		{`WITH run AS (INSERT INTO runs VALUES (1) RETURNING id) SELECT * FROM run`, false},
		{`UPDATE projects SET name = 'a' RETURNING id`, false},
		{`SEL`, false},
	} {
		if got := plainRead(c.query); got != c.plain {
			t.Errorf("plainRead(%q) = %v, want %v", c.query, got, c.plain)
		}
	}
}
