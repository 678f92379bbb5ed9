package cli

import (
	"strings"
	"testing"

	"anvil/db/testdb"
	"anvil/domain/mail/mailtest"
)

// With ANVIL_SMTP_URL, the operator's reset link is mailed to its person
// too — and still printed; a bad SMTP configuration is refused (exit 2)
// without echoing its password.
func TestAdminResetPasswordMailsTheLink(t *testing.T) {
	t.Parallel()
	// A local relay without TLS or password (the binary could not trust
	// the test server's own certificate authority).
	srv := mailtest.Start(t, mailtest.Options{})
	env := []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(testdb.Name(t)), "ANVIL_SECRET_KEY=" + testKey,
		"ANVIL_PUBLIC_URL=https://anvil.example.com/", "ANVIL_SMTP_URL=" + srv.URL(), "ANVIL_MAIL_FROM=Anvil <anvil@example.com>"}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, stderr)
	}
	if code, _, stderr := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "owner@acme.test"); code != 0 {
		t.Fatalf("bootstrap: %d %s", code, stderr)
	}
	code, out, stderr := anvil(t, env, "", "admin", "reset-password", "--email", "owner@acme.test")
	link := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(link, "https://anvil.example.com/reset/anv_rst_") || !strings.Contains(stderr, "the link was mailed to owner@acme.test") {
		t.Fatalf("reset: %d %q %s", code, out, stderr)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || msgs[0].To[0] != "owner@acme.test" {
		t.Fatalf("received %+v", msgs)
	}
	if txt, err := msgs[0].Body("text/plain"); err != nil || !strings.Contains(txt, link) {
		t.Fatalf("mail %q %v", txt, err)
	}

	bad := append(env[:len(env)-2:len(env)-2], "ANVIL_SMTP_URL=smtp://anvil:smtp-pw-9@mail.example.com/path", "ANVIL_MAIL_FROM=a@example.com")
	code, _, stderr = anvil(t, bad, "", "serve")
	if code != 2 || !strings.Contains(stderr, "ANVIL_SMTP_URL takes no path") || strings.Contains(stderr, "smtp-pw-9") {
		t.Fatalf("bad SMTP URL: %d %s", code, stderr)
	}
}
