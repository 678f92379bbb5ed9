package cli

import (
	"regexp"
	"strings"
	"testing"

	"anvil/db/testdb"
)

func TestAdminResetPasswordPrintsAOneTimeLink(t *testing.T) {
	t.Parallel()
	env := []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(testdb.Name(t)), "ANVIL_SECRET_KEY=" + testKey,
		"ANVIL_PUBLIC_URL=https://anvil.example.com/"}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "owner@acme.test"); code != 0 {
		t.Fatalf("bootstrap: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, env, "", "admin", "reset-password"); code != 2 || !strings.Contains(stderr, "--email is required") {
		t.Fatalf("without --email: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, env, "", "admin", "reset-password", "--email", "nobody@acme.test"); code != 1 || !strings.Contains(stderr, "not found") {
		t.Fatalf("unknown email: %d %s", code, stderr)
	}
	code, out, stderr := anvil(t, env, "", "admin", "reset-password", "--email", "OWNER@acme.test")
	link := regexp.MustCompile(`^https://anvil\.example\.com/reset/anv_rst_[0-9A-Za-z]{32}\n$`)
	if code != 0 || !link.MatchString(out) || !strings.Contains(stderr, "works once") || !strings.Contains(stderr, "1 API token(s) of theirs were revoked") {
		t.Fatalf("reset: %d %q %s", code, out, stderr)
	}
	// Every reset makes a new link (the earlier one stops; domain tests walk
	// the link itself and the old password).
	_, again, _ := anvil(t, env, "", "admin", "reset-password", "--email", "owner@acme.test")
	if again == out {
		t.Fatal("a second reset printed the same link")
	}
}
