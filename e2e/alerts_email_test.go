//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"anvil/domain/mail/mailtest"
)

// TestEmailAlertJourney: on a server with an SMTP server (a real one on
// loopback), an admin adds an e-mail destination with two recipients,
// sends a test alert, and sees it delivered with the server's answer;
// the SMTP server received it, to both.
func TestEmailAlertJourney(t *testing.T) {
	t.Parallel()
	smtp := mailtest.Start(t, mailtest.Options{})
	s := startServer(t, "ANVIL_SMTP_URL="+smtp.URL(), "ANVIL_MAIL_FROM=Anvil <anvil@example.com>")

	page := loggedIn(t, s)
	_, err := page.Goto(s.URL + "/settings/alerts")
	must(t, err, "open alerts")
	must(t, page.Locator("#alert-name").Fill("on-call mail"), "name")
	_, err = page.Locator("#alert-kind").SelectOption(playwright.SelectOptionValues{Values: &[]string{"email"}})
	must(t, err, "kind")
	must(t, page.Locator("#alert-recipients").Fill("ops@acme.test, dev@acme.test"), "recipients")
	must(t, testID(page, "add-destination").Click(), "add the destination")
	must(t, expect.Locator(testID(page, "alert-destination")).ToContainText("ops@acme.test, dev@acme.test"), "the destination listed")
	must(t, testID(page, "send-test-alert").Click(), "send a test alert")
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := page.Locator("[data-testid=alert-delivery-status]:has-text('delivered')").Count()
		must(t, err, "count deliveries")
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the test alert never showed as delivered in the log")
		}
		time.Sleep(300 * time.Millisecond)
		_, err = page.Reload()
		must(t, err, "reload")
	}
	must(t, expect.Locator(testID(page, "alert-delivery-answer")).ToContainText("250"), "the SMTP answer in the log")
	screenshot(t, page, "alert-email-delivered")
	got := smtp.Messages()
	if len(got) != 1 || strings.Join(got[0].To, ",") != "ops@acme.test,dev@acme.test" || !strings.HasPrefix(got[0].Header("Subject"), "[anvil] Test alert") {
		t.Fatalf("the SMTP server received %+v", got)
	}
}
