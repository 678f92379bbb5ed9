//go:build e2e

package e2e

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"
)

// wrappedJS lists the elements matching a selector whose text runs over
// more than one line: the tops of their text's line boxes differ by more
// than a few pixels (a button's padding is not a line).
const wrappedJS = `(sel) => [...document.querySelectorAll(sel)].filter((el) => {
	const tops = [];
	const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		if (!n.textContent.trim()) continue;
		const r = document.createRange();
		r.selectNodeContents(n);
		for (const b of r.getClientRects()) if (b.width > 0) tops.push(b.top);
	}
	return tops.length > 0 && Math.max(...tops) - Math.min(...tops) > 4;
}).map((el) => (el.getAttribute("data-testid") || el.tagName) + ": " + el.textContent.trim().replace(/\s+/g, " ").slice(0, 60))`

// wrapped reports each element of sel whose text wraps, as a test error.
func wrapped(t *testing.T, page playwright.Page, where, sel string, atLeast int) {
	t.Helper()
	n, err := page.Locator(sel).Count()
	must(t, err, "count "+sel)
	if n < atLeast {
		t.Fatalf("%s: %d of %s, want at least %d", where, n, sel, atLeast)
	}
	got, err := page.Evaluate(wrappedJS, sel)
	must(t, err, "measure "+sel)
	if l, _ := got.([]any); len(l) > 0 {
		t.Errorf("%s: wraps over two lines: %v", where, l)
	}
}

// The Feed page's connections table at 1280 px, with a browser connection
// (its key, origins and snippets beside a server connection): each
// connection's "Created", "Last used" and "Revoke" stay on one line. The
// incident's actions at 420 px and at 1280 px never break inside a word
// ("approv/e"): a button that does not fit goes to the next line whole.
func TestConnectionsAndIncidentActionsKeepTheirLines(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": "https://git.example.com/acme/shop.git", "default_branch": "main", "run_command": "true", "repair_command": "true",
	})
	pid := p["id"].(string)
	apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-web", "kind": "browser",
		"allowed_origins": []string{"https://shop.example", "https://checkout.shop.example"}})
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "approve"})
	ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "NullPointerException in CheckoutService.chargeTheCustomersDefaultPaymentMethod", "level": "error",
		"environment": "production", "service": "shop-api", "release": "2026.12.3-rc.1+build.0123456789abcdef",
		"sdk":       map[string]any{"name": "anvil-feed-java", "version": "0.1.0"},
		"exception": map[string]any{"type": "java.lang.NullPointerException", "message": "cart is null"}}
	raw, _ := json.Marshal(ev)
	sendFeedEvent(t, s.URL, conn["token"].(string), raw)
	incs := apiJSON(t, s, "GET", "/api/private/incidents", nil)["incidents"].([]any)
	if len(incs) != 1 {
		t.Fatalf("incidents: %v", incs)
	}
	incID := incs[0].(map[string]any)["id"].(string)

	page := loggedIn(t, s)
	must(t, page.SetViewportSize(1280, 900), "viewport")
	gotoPage(t, page, s.URL+"/projects/shop/feed")
	must(t, expect.Locator(testID(page, "browser-connection")).ToBeVisible(), "the browser connection's details")
	wrapped(t, page, "feed at 1280 px", "[data-testid=connection-created]", 2)
	wrapped(t, page, "feed at 1280 px", "[data-testid=connection-last-used]", 2)
	wrapped(t, page, "feed at 1280 px", "[data-testid=revoke-connection]", 2)
	screenshot(t, page, "feed-1280")

	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		gotoPage(t, page, s.URL+"/incidents/"+incID)
		must(t, expect.Locator(testID(page, "decide-approve")).ToBeVisible(), "the approve action")
		wrapped(t, page, "incident actions at "+strconv.Itoa(w)+" px", "[data-testid=incident-actions] button", 3)
		screenshot(t, page, "incident-actions-"+strconv.Itoa(w))
	}
}
