//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/playwright-community/playwright-go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestAlertsJourney: an admin adds a signed webhook destination, copies the
// secret shown once, sends a test alert, and sees it delivered in the log;
// the receiver verifies the signature with the Standard Webhooks library.
func TestAlertsJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var (
		mu       sync.Mutex
		secret   string
		bodies   []map[string]any
		verified []error
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		verified = append(verified, err)
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		bodies = append(bodies, m)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)

	page := loggedIn(t, s)
	must(t, testID(page, "nav").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "Alerts"}).Click(), "open alerts")
	must(t, expect.Page(page).ToHaveURL(urlPath(s, "/settings/alerts")), "alerts page")
	must(t, page.Locator("#alert-name").Fill("team hook"), "name")
	_, err := page.Locator("#alert-kind").SelectOption(playwright.SelectOptionValues{Values: &[]string{"webhook"}})
	must(t, err, "kind")
	must(t, page.Locator("#alert-url").Fill(rcv.URL+"/hooks/anvil"), "url")
	must(t, testID(page, "add-destination").Click(), "add the destination")
	must(t, expect.Locator(testID(page, "new-alert-secret-value")).ToContainText("whsec_"), "the secret, once")
	sec, err := testID(page, "new-alert-secret-value").TextContent()
	must(t, err, "read the secret")
	mu.Lock()
	secret = sec
	mu.Unlock()
	must(t, expect.Locator(testID(page, "alert-destination")).ToContainText("team hook"), "the destination listed")
	screenshot(t, page, "alert-destination")

	must(t, testID(page, "send-test-alert").Click(), "send a test alert")
	must(t, expect.Page(page).ToHaveURL(urlPath(s, "/settings/alerts")), "back on the alerts page")
	must(t, expect.Locator(testID(page, "new-alert-secret")).ToHaveCount(0), "the secret is not shown again")
	// The worker delivers in the background; the log refetches itself
	// until the test's line is in it, without a reload.
	must(t, expect.Locator(page.Locator("[data-testid=alert-delivery-status]:has-text('delivered')")).ToHaveCount(1), "the test alert delivered, in the log")
	must(t, expect.Locator(testID(page, "alert-delivery")).ToContainText("204"), "the status code in the log")
	screenshot(t, page, "alert-delivered")
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 || verified[0] != nil || bodies[0]["type"] != "test" {
		t.Fatalf("received %v (verified: %v)", bodies, verified)
	}
}
