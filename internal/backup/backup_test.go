package backup

import (
	"slices"
	"strings"
	"testing"
)

// TestLibpqKeepsThePasswordOutOfArgv: the URL pg_dump gets in argv has no
// password and no pgx-only parameter; the password goes to PGPASSWORD.
func TestLibpqKeepsThePasswordOutOfArgv(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, conn, pw string }{
		{"postgres://anvil:s3cr%23t@db:5432/anvil?sslmode=require&pool_max_conns=20", "postgres://anvil@db:5432/anvil?sslmode=require", "s3cr#t"},
		{"postgresql://anvil@db/anvil?password=hunter2&application_name=x", "postgresql://anvil@db/anvil?application_name=x", "hunter2"},
		{"postgres://db/anvil", "postgres://db/anvil", ""},
	} {
		conn, env, err := Libpq(c.in)
		if err != nil || conn != c.conn {
			t.Errorf("Libpq(%q) = %q, %v; want %q", c.in, conn, err, c.conn)
		}
		if c.pw != "" && (!slices.Contains(env, "PGPASSWORD="+c.pw) || strings.Contains(conn, c.pw)) {
			t.Errorf("Libpq(%q): env %v, conn %q", c.in, env, conn)
		}
		if c.pw == "" && len(env) != 0 {
			t.Errorf("Libpq(%q): env %v", c.in, env)
		}
	}
	if _, _, err := Libpq("mysql://x"); err == nil {
		t.Error("a mysql URL was taken")
	}
}
