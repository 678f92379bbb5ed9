//go:build e2e

package e2e

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"

	"anvil/jobs/jobstest"
)

// TestEveryScreenFits: every screen a team lives in — the dashboard, the
// inbox, an incident, an event, a run, the run history, a project, its Feed
// page, a monitor and the settings pages — at 420×900 and at 1400×1000:
// nothing scrolls sideways (document.documentElement.scrollWidth ≤
// innerWidth), the navigation is reachable (through its menu on the phone),
// no page throws or logs a console error, every relative time carries the
// viewer's local time on hover (static/app.js rewrote the server's UTC
// text), and a screenshot of each is written to e2e/out. With
// ANVIL_SCREENSHOTS=<dir> (`make screenshots`), the README's screenshots
// are written there too.
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
	sendFeedEvent(t, s.URL, conn["token"].(string), raw)
	incs := apiJSON(t, s, "GET", "/api/private/incidents", nil)["incidents"].([]any)
	if len(incs) != 1 {
		t.Fatalf("incidents: %v", incs)
	}
	incID := incs[0].(map[string]any)["id"].(string)
	// The settings pages with something on them: a run secret, an alert
	// destination (with its "Send a test alert" button) and a cron monitor.
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/secrets/NPM_TOKEN", map[string]any{"value": "npm_abcdefgh"})
	apiJSON(t, s, "POST", "/api/private/alerts/destinations", map[string]any{
		"name": "on-call", "kind": "webhook", "url": "http://127.0.0.1:9/hooks/anvil/alerts-for-the-on-call-rotation-of-the-shop-team"})
	apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/monitors", map[string]any{"slug": "nightly-backup-of-the-orders-database",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "failure_threshold": 1})
	// The run ends before its page is measured (and photographed).
	runID := run["run_id"].(string)
	deadline := time.Now().Add(60 * time.Second)
	for apiJSON(t, s, "GET", "/api/private/runs/"+runID, nil)["finished_at"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("the run did not finish within 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	screens := []struct{ name, path string }{
		{"dashboard", "/"},
		{"inbox", "/inbox"},
		{"incident", "/incidents/" + incID},
		{"event", "/incidents/" + incID + "/events/" + eventID},
		{"run", "/runs/" + runID},
		{"run-history", "/projects/shop/runs"},
		{"projects", "/projects"},
		{"project", "/projects/shop"},
		{"project-new", "/projects/new"},
		{"project-settings", "/projects/shop/edit"},
		{"feed", "/projects/shop/feed"},
		{"secrets", "/projects/shop/secrets"},
		{"webhooks", "/projects/shop/webhooks"},
		{"monitors", "/projects/shop/monitors"},
		{"monitor", "/projects/shop/monitors/nightly-backup-of-the-orders-database"},
		{"releases", "/projects/shop/releases"},
		{"settings", "/settings"},
		{"members", "/settings/members"},
		{"alerts", "/settings/alerts"},
		{"retention", "/settings/retention"},
		{"account", "/settings/account"},
		{"audit", "/settings/audit"},
	}
	page := loggedIn(t, s)
	watch := watchConsole(t, page)
	for _, vp := range []struct{ w, h int }{{420, 900}, {1400, 1000}} {
		must(t, page.SetViewportSize(vp.w, vp.h), "viewport")
		for _, sc := range screens {
			if status := gotoPage(t, page, s.URL+sc.path); status != http.StatusOK {
				t.Fatalf("%s at %d px: status %d", sc.name, vp.w, status)
			}
			for _, e := range watch.take() {
				t.Errorf("%s at %d px: %s", sc.name, vp.w, e)
			}
			utc, err := page.Evaluate(`() => [...document.querySelectorAll("time[data-local-time]")]
				.filter(e => !e.title || / UTC$/.test(e.title) && /^\d{4}-\d\d-\d\d /.test(e.title)).map(e => e.textContent + " [" + e.title + "]")`)
			must(t, err, "hover times of "+sc.name)
			if l, _ := utc.([]any); len(l) > 0 {
				t.Errorf("%s at %d px: times without the local time on hover: %v", sc.name, vp.w, l)
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
			if vp.w >= 1024 && readmeScreens[sc.name] {
				readmeScreenshot(t, page, sc.name)
			}
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

// readmeScreens are the screens the README shows ("Your first project in
// five minutes"), photographed at 1400×1000.
var readmeScreens = map[string]bool{"dashboard": true, "inbox": true, "incident": true, "run": true, "feed": true}

// readmeScreenshot writes <ANVIL_SCREENSHOTS>/<name>.png when that variable
// names a folder (relative to the repository's root): the viewport at
// device scale 1, cut to the page's content below the navigation bar and at
// most 680 px tall, so that each file stays small (< 150 KB).
func readmeScreenshot(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	dir := os.Getenv("ANVIL_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir) // the test runs in e2e/
	}
	must(t, os.MkdirAll(dir, 0o755), "screenshot folder")
	box, err := page.Locator("main").BoundingBox()
	must(t, err, "the main element of "+name)
	height := math.Min(box.Height, 680)
	path := filepath.Join(dir, name+".png")
	_, err = page.Screenshot(playwright.PageScreenshotOptions{
		Path:       playwright.String(path),
		Clip:       &playwright.Rect{X: box.X, Y: box.Y, Width: box.Width, Height: height},
		Animations: playwright.ScreenshotAnimationsDisabled,
		Caret:      playwright.ScreenshotCaretHide,
		Scale:      playwright.ScreenshotScaleCss,
	})
	must(t, err, "screenshot "+name)
	fi, err := os.Stat(path)
	must(t, err, "the screenshot "+path)
	if fi.Size() > 150<<10 {
		t.Errorf("%s: %d bytes, over 150 KB", path, fi.Size())
	}
}
