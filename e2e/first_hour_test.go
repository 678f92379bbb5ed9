//go:build e2e

package e2e

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
)

// At 420 px what a new team first sees keeps its words whole: the cache
// card's Clear button on one line, an invitation's "expires 2026-12-13"
// with its space; and after "Send a test alert" the deliveries table shows
// the answer without a reload.
func TestFirstHourAt420(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": "https://git.example.com/acme/shop.git", "default_branch": "main", "run_command": "true",
	})
	inv := apiJSON(t, s, "POST", "/api/private/invitations", map[string]any{"email": "colleague@acme.test", "role": "member"})
	link, _ := inv["url"].(string)
	if link == "" {
		t.Fatalf("invitation: %v", inv)
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(rcv.Close)
	apiJSON(t, s, "POST", "/api/private/alerts/destinations", map[string]any{"name": "team hook", "kind": "webhook", "url": rcv.URL + "/hook"})

	page := loggedIn(t, s)
	must(t, page.SetViewportSize(420, 900), "viewport")
	gotoPage(t, page, s.URL+"/projects/shop")
	must(t, expect.Locator(testID(page, "cache-clear")).ToBeVisible(), "the cache card's Clear")
	wrapped(t, page, "cache card at 420 px", "[data-testid=cache-clear]", 1)
	screenshot(t, page, "cache-card-420")

	gotoPage(t, page, s.URL+"/settings/alerts")
	must(t, testID(page, "send-test-alert").Click(), "send a test alert")
	// No reload: the deliveries refetch themselves until the answer is in.
	must(t, expect.Locator(page.Locator("[data-testid=alert-delivery-status]:has-text('delivered')")).ToHaveCount(1), "the test's delivery shows without a reload")
	screenshot(t, page, "alert-test-420")

	guest := newPage(t)
	must(t, guest.SetViewportSize(420, 900), "viewport")
	gotoPage(t, guest, link)
	must(t, expect.Locator(guest.GetByText(regexp.MustCompile(`This invitation expires \S`))).ToBeVisible(), "expires, a space, the date")
	screenshot(t, guest, "invitation-420")
}
