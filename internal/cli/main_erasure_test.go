package cli

import (
	"database/sql"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"anvil/db/testdb"
)

func TestAdminPurgeUser(t *testing.T) {
	t.Parallel()
	url := testdb.URLFor(testdb.Name(t))
	env := []string{"ANVIL_DATABASE_URL=" + url, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_PUBLIC_URL=https://anvil.example.com/"}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, stderr)
	}
	for _, org := range []string{"acme", "beta"} {
		if code, _, stderr := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", org, "--email", org+"@example.test"); code != 0 {
			t.Fatalf("bootstrap: %d %s", code, stderr)
		}
	}
	if code, _, stderr := anvil(t, env, "", "admin", "purge-user"); code != 2 || !strings.Contains(stderr, "--email is required") {
		t.Fatalf("without --email: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, env, "", "admin", "purge-user", "--email", "nobody@example.test"); code != 1 || !strings.Contains(stderr, "not found") {
		t.Fatalf("unknown email: %d %s", code, stderr)
	}
	code, _, stderr := anvil(t, env, "", "admin", "purge-user", "--email", "beta@example.test")
	if code != 1 || !strings.Contains(stderr, `last owner of organisation "beta"`) {
		t.Fatalf("last owner: %d %s", code, stderr)
	}
	// acme's owner becomes beta's second owner: beta's first may go.
	d, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Exec(`INSERT INTO memberships (org_id, user_id, role)
		SELECT o.id, u.id, 'owner' FROM organizations o, users u WHERE o.slug = 'beta' AND u.email = 'acme@example.test'`); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := anvil(t, env, "", "admin", "purge-user", "--email", "BETA@example.test")
	if code != 0 || !strings.Contains(out, "purged BETA@example.test (now user-") || !strings.Contains(out, "memberships:      1 (beta)") ||
		!strings.Contains(out, "api tokens:       1") {
		t.Fatalf("purge: %d %q %s", code, out, stderr)
	}
	var left int
	if err := d.QueryRow(`SELECT count(*) FROM audit_log a WHERE a::text ILIKE '%beta@example.test%'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("audit entries still naming the purged person: %d %v", left, err)
	}
}
