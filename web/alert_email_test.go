package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"anvil/domain/mail/mailtest"
)

// E-mail destinations over HTTP, as an admin makes them: through the API
// (recipients checked, the answer names them) and through the settings
// page's form (one field, addresses split on commas); the test button
// enqueues a delivery. On a server without SMTP both refuse, and the page
// says why.
func TestEmailDestinationOverHTTP(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{TLS: true, User: "anvil", Password: "smtp-password-42"})
	dopts := testDomainOptions()
	dopts.Mail = srv.Config(t, 0)
	b := setupFull(t, testOptions(), dopts)
	tok := b.owner.Token

	code, out := b.api(t, tok, "POST", "/api/private/alerts/destinations",
		map[string]any{"name": "on-call", "kind": "email", "recipients": []string{"ops@acme.test", "dev@acme.test"}})
	if code != http.StatusCreated || out["kind"] != "email" || len(out["recipients"].([]any)) != 2 {
		t.Fatalf("create: %d %v", code, out)
	}
	id := out["destination_id"].(string)
	for _, bad := range []map[string]any{
		{"name": "x", "kind": "email", "recipients": []string{}},
		{"name": "x", "kind": "email", "recipients": []string{"not an address"}},
		{"name": "x", "kind": "email", "recipients": []string{"a@acme.test\r\nBcc: evil@evil.test"}},
		{"name": "x", "kind": "email"},
	} {
		if code, out := b.api(t, tok, "POST", "/api/private/alerts/destinations", bad); code != http.StatusUnprocessableEntity {
			t.Errorf("%v: %d %v", bad, code, out)
		}
	}
	if code, out := b.api(t, tok, "POST", "/api/private/alerts/destinations/"+id+"/test", nil); code != http.StatusAccepted {
		t.Fatalf("test: %d %v", code, out)
	}
	var n int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'deliver_alert'`).Scan(context.Background(), &n); err != nil || n != 1 {
		t.Fatalf("deliveries enqueued: %d %v", n, err)
	}

	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/settings/alerts")
	if !strings.Contains(page, `value="email"`) || !strings.Contains(page, `data-testid="alert-recipients"`) || !strings.Contains(page, "ops@acme.test, dev@acme.test") {
		t.Fatal("the page offers no e-mail destination or hides the recipients")
	}
	csrf := br.csrf("/settings/alerts")
	res, body := br.post("/settings/alerts", url.Values{"_csrf": {csrf}, "name": {"team"}, "kind": {"email"}, "url": {""},
		"recipients": {"lead@acme.test, qa@acme.test;\nsre@acme.test"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("form: %d %s", res.StatusCode, body)
	}
	_, page = br.get("/settings/alerts")
	if !strings.Contains(page, "lead@acme.test, qa@acme.test, sre@acme.test") {
		t.Fatal("the form's destination is not listed with its recipients")
	}
	res, body = br.post("/settings/alerts", url.Values{"_csrf": {csrf}, "name": {"bad"}, "kind": {"email"}, "recipients": {"nobody"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "is not an e-mail address") || !strings.Contains(body, `value="nobody"`) {
		t.Fatalf("refused form: %d", res.StatusCode)
	}
	if strings.Contains(page, "smtp-password-42") || strings.Contains(body, "smtp-password-42") {
		t.Fatal("a page shows the SMTP password")
	}
}

func TestEmailDestinationWithoutSMTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	code, out := b.api(t, b.owner.Token, "POST", "/api/private/alerts/destinations",
		map[string]any{"name": "on-call", "kind": "email", "recipients": []string{"ops@acme.test"}})
	if code != http.StatusUnprocessableEntity || out["error"] != "mail_not_configured" {
		t.Fatalf("%d %v", code, out)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, page := br.get("/settings/alerts"); !strings.Contains(page, "the server has no SMTP") {
		t.Fatal("the page does not say why e-mail is not offered")
	}
}

// An invitation on a server with SMTP: the link is still in the answer,
// the mail is a job whose arguments do not hold the token, and the list
// says the mail is on its way.
func TestInvitationMailEnqueued(t *testing.T) {
	t.Parallel()
	srv := mailtest.Start(t, mailtest.Options{})
	dopts := testDomainOptions()
	dopts.Mail = srv.Config(t, 0)
	b := setupFull(t, testOptions(), dopts)
	code, out := b.api(t, b.owner.Token, "POST", "/api/private/invitations", map[string]any{"email": "new@acme.test", "role": "member"})
	if code != http.StatusCreated {
		t.Fatalf("%d %v", code, out)
	}
	link := out["url"].(string)
	token := link[strings.LastIndex(link, "/")+1:]
	if !strings.HasPrefix(link, "http://anvil.test/invite/anv_inv_") {
		t.Fatalf("link %q", link)
	}
	var args string
	if err := b.db.Bun.NewRaw(`SELECT args::text FROM river_job WHERE kind = 'mail_invitation'`).Scan(context.Background(), &args); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(args, token) || strings.Contains(args, token[len("anv_inv_"):]) {
		t.Fatalf("the job's arguments hold the token: %s", args)
	}
	_, list := b.api(t, b.owner.Token, "GET", "/api/private/invitations", nil)
	inv := list["invitations"].([]any)[0].(map[string]any)
	if inv["mail_status"] != "sending" {
		t.Fatalf("invitation %v", inv)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, page := br.get("/settings/members"); !strings.Contains(page, `data-testid="invitation-mail">mail on its way<`) {
		t.Fatal("the members page does not say the invitation's mail is on its way")
	}
}
