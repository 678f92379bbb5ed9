//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/jobs/jobstest"
)

// TestEveryScreenFits (issue 30): every screen a team lives in — the
// dashboard, the inbox, an incident, an event, a run, the run history, a
// project, its Feed page and the settings pages — at 420×900 and at
// 1400×1000: nothing scrolls sideways (document.documentElement.scrollWidth
// ≤ innerWidth), the navigation is reachable (through its menu on the
// phone), and a screenshot of each is written to e2e/out.
func TestEveryScreenFits(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": repo.URL, "default_branch": "main",
		"run_command": "echo compiling a-rather-long-module-name-that-would-not-wrap-on-its-own/and/its/path.go; echo 'error: cart is null'; exit 1",
	})
	pid := p["id"].(string)
	run := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/runs", nil)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	eventID := uuid.NewString()
	ev := map[string]any{"schema_version": "1.0", "event_id": eventID, "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "NullPointerException in CheckoutService.chargeTheCustomersDefaultPaymentMethodWithoutRetrying", "level": "error",
		"environment": "production", "service": "shop-api", "release": "2026.12.3-rc.1+build.0123456789abcdef",
		"sdk": map[string]any{"name": "anvil-feed-java", "version": "0.1.0", "runtime": "jdk-25"},
		"exception": map[string]any{"type": "java.lang.NullPointerException", "message": "Cannot invoke \"Cart.total()\" because \"cart\" is null",
			"stacktrace": []any{map[string]any{"file": "src/main/java/shop/checkout/CheckoutServiceImplementation.java", "line": 88,
				"function": "chargeTheCustomersDefaultPaymentMethod", "context_code": "var sum = cart.total(); // a long line of code that goes on and on and on", "in_app": true}}},
		"request": map[string]any{"method": "POST", "url": "https://shop.example/api/checkout/with/a/rather/long/path?and=a&query=string&that=goes&on=and-on", "status_code": 500},
		"user":    map[string]any{"id": "u-4711"}, "breadcrumbs": []string{"cart.add sku=A1", "checkout.start"},
		"tags": map[string]any{"tier": "gold", "region": "eu-west-1"}}
	raw, _ := json.Marshal(ev)
	req, _ := http.NewRequest("POST", s.URL+"/api/feed/events", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+conn["token"].(string))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(t, err, "send the event")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("feed answered %d", res.StatusCode)
	}
	incs := apiJSON(t, s, "GET", "/api/private/incidents", nil)["incidents"].([]any)
	if len(incs) != 1 {
		t.Fatalf("incidents: %v", incs)
	}
	incID := incs[0].(map[string]any)["id"].(string)

	screens := []struct{ name, path string }{
		{"dashboard", "/"},
		{"inbox", "/inbox"},
		{"incident", "/incidents/" + incID},
		{"event", "/incidents/" + incID + "/events/" + eventID},
		{"run", "/runs/" + run["run_id"].(string)},
		{"run-history", "/projects/shop/runs"},
		{"project", "/projects/shop"},
		{"feed", "/projects/shop/feed"},
		{"settings", "/settings"},
		{"members", "/settings/members"},
		{"alerts", "/settings/alerts"},
		{"retention", "/settings/retention"},
		{"account", "/settings/account"},
		{"audit", "/settings/audit"},
	}
	page := loggedIn(t, s)
	for _, vp := range []struct{ w, h int }{{420, 900}, {1400, 1000}} {
		must(t, page.SetViewportSize(vp.w, vp.h), "viewport")
		for _, sc := range screens {
			if status := gotoPage(t, page, s.URL+sc.path); status != http.StatusOK {
				t.Fatalf("%s at %d px: status %d", sc.name, vp.w, status)
			}
			fits, err := page.Evaluate(`() => document.documentElement.scrollWidth <= window.innerWidth`)
			must(t, err, "measure "+sc.name)
			if fits != true {
				wide, _ := page.Evaluate(`() => [document.documentElement.scrollWidth, window.innerWidth,
					[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
						.slice(0, 5).map(e => e.tagName + "." + e.className + " " + (e.getAttribute("data-testid") || ""))]`)
				t.Errorf("%s scrolls sideways at %d px: %v", sc.name, vp.w, wide)
			}
			inbox := page.Locator("#nav-items a[href='/inbox']")
			if vp.w < 1024 {
				if ok, _ := inbox.IsVisible(); ok {
					t.Errorf("%s at %d px: the navigation is not folded", sc.name, vp.w)
				}
				must(t, testID(page, "nav-menu").Click(), "open the menu on "+sc.name)
			}
			must(t, expect.Locator(inbox).ToBeVisible(), "the navigation is reachable on "+sc.name)
			screenshot(t, page, sc.name+"-"+strconv.Itoa(vp.w))
		}
	}
	// Keyboard focus is visible: a focused link has an outline.
	gotoPage(t, page, s.URL+"/projects/shop")
	must(t, page.Keyboard().Press("Tab"), "tab")
	outline, err := page.Evaluate(`() => getComputedStyle(document.activeElement).outlineStyle`)
	must(t, err, "focus style")
	if outline == "none" {
		t.Errorf("the focused element has no visible outline")
	}
}
