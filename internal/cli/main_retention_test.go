package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"anvil/db"
	"anvil/db/testdb"
)

// TestAdminRetentionNow: the operator's clean-up runs at once, says what it
// removed, and asks for --now.
func TestAdminRetentionNow(t *testing.T) {
	t.Parallel()
	url := testdb.URLFor(testdb.Name(t))
	env := []string{"ANVIL_DATABASE_URL=" + url, "ANVIL_SECRET_KEY=" + testKey, "ANVIL_EVENT_RETENTION=30d"}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "owner@acme.test"); code != 0 {
		t.Fatalf("bootstrap: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, env, "", "admin", "retention"); code != 2 || !strings.Contains(stderr, "--now is required") {
		t.Fatalf("without --now: %d %s", code, stderr)
	}
	ctx := context.Background()
	d, err := db.Open(ctx, url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.SQL.ExecContext(ctx, `INSERT INTO audit_log (org_id, at, actor_email, kind)
		SELECT id, now() - interval '2 years', 'x@acme.test', 'old.thing' FROM organizations`); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := anvil(t, env, "", "admin", "retention", "--now")
	if code != 0 || !strings.Contains(out, "acme: 0 events past their age, 0 events sampled away, 0 incidents, 0 log chunks (0 bytes), 1 audit entries") ||
		!strings.Contains(out, "removed in all:") {
		t.Fatalf("retention --now: %d %q %s", code, out, stderr)
	}
	code, out, _ = anvil(t, env, "", "admin", "retention", "--now", "--json")
	var rep map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep["total"] == nil {
		t.Fatalf("retention --now --json: %d %q", code, out)
	}
	if code, _, stderr := anvil(t, append(env, "ANVIL_EVENT_RETENTION=90 days"), "", "admin", "retention", "--now"); code != 2 || !strings.Contains(stderr, "ANVIL_EVENT_RETENTION") {
		t.Fatalf("a bad ANVIL_EVENT_RETENTION: %d %s", code, stderr)
	}
}
