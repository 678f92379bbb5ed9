//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/playwright-community/playwright-go"
)

// TestInboxTriage: at 420 and 1280 px the inbox opens on the unresolved
// incidents (a closed one waits behind its filter), tells two
// ZeroDivisionErrors apart by level and culprit frame, finds one by its
// short id and another by a tag value; at 420 px the inbox's and the
// monitors' rows are labelled as the run history's are, and no page
// scrolls sideways.
func TestInboxTriage(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "make"})
	pid := p["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	send := func(title, level, function, file string, tags map[string]any) {
		ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
			"title": title, "level": level, "environment": "production", "service": "shop-api", "sdk": map[string]any{"name": "t"},
			"exception": map[string]any{"type": strings.SplitN(title, ":", 2)[0], "message": "division by zero", "stacktrace": []any{
				map[string]any{"file": file, "line": 41, "function": function, "in_app": true}}},
			"tags": tags}
		raw, _ := json.Marshal(ev)
		sendFeedEvent(t, s.URL, conn["token"].(string), raw)
	}
	send("ZeroDivisionError: division by zero", "error", "average", "app/stats.py", map[string]any{"customer": "globex"})
	send("ZeroDivisionError: division by zero", "fatal", "ratio", "app/billing/invoice.py", map[string]any{"customer": "initech"})
	send("KeyError: 'sku'", "warning", "lookup", "app/catalog.py", nil)
	var closedID, ratioShort string
	for _, i := range apiJSON(t, s, "GET", "/api/private/incidents", nil)["incidents"].([]any) {
		m := i.(map[string]any)
		switch m["culprit"] {
		case "lookup (app/catalog.py:41)":
			closedID = m["id"].(string)
		case "ratio (app/billing/invoice.py:41)":
			ratioShort = m["short_id"].(string)
		}
	}
	if closedID == "" || ratioShort == "" {
		t.Fatal("the incidents' culprits are missing from the API")
	}
	apiJSON(t, s, "POST", "/api/private/incidents/"+closedID+"/decisions", map[string]any{"decision": "close"})
	apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/monitors", map[string]any{"slug": "nightly-backup",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "failure_threshold": 1})
	monitors := apiJSON(t, s, "GET", "/api/private/projects/"+pid+"/monitors", nil)["monitors"].([]any)
	if len(monitors) != 1 {
		t.Fatalf("monitors: %v", monitors)
	}

	page := loggedIn(t, s)
	// A row's label as its cell's ::before shows it ("none" when hidden).
	// A live page may swap its rows (a monitor's live event arriving after
	// the page loaded): a cell swapped out between the locator and the
	// read has no computed style at all, "", so the read is made again.
	rowLabel := func(row playwright.Locator, label string) string {
		t.Helper()
		for try := 0; ; try++ {
			v, err := row.Locator(fmt.Sprintf("td[data-label=%q]", label)).First().Evaluate(
				`td => td.isConnected ? getComputedStyle(td, "::before").content : ""`, nil)
			must(t, err, "the label of "+label)
			if s := fmt.Sprint(v); s != "" || try == 20 {
				return s
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		if status := gotoPage(t, page, s.URL+"/inbox"); status != http.StatusOK {
			t.Fatalf("inbox at %d px: %d", w, status)
		}
		rows := testID(page, "incident-row")
		must(t, expect.Locator(rows).ToHaveCount(2), fmt.Sprintf("two unresolved rows at %d px", w))
		must(t, expect.Locator(testID(page, "count-unresolved")).ToHaveText("Unresolved · 2"), "the unresolved count")
		for _, want := range []string{"average (app/stats.py:41)", "ratio (app/billing/invoice.py:41)"} {
			must(t, expect.Locator(testID(page, "incident-culprit").Filter(playwright.LocatorFilterOptions{HasText: want})).ToBeVisible(),
				fmt.Sprintf("culprit %s at %d px", want, w))
		}
		must(t, expect.Locator(page.Locator(`[data-testid="incident-where"] [data-level="fatal"]`)).ToBeVisible(), "the fatal level")
		must(t, expect.Locator(page.Locator(`[data-testid="incident-where"] [data-level="error"]`)).ToBeVisible(), "the error level")
		label := rowLabel(rows.First(), "Status")
		if w < 640 && !strings.Contains(label, "Status") {
			t.Errorf("an inbox row at %d px has no labels: %q", w, label)
		}
		if w >= 640 && strings.Contains(label, "Status") {
			t.Errorf("an inbox row at %d px is labelled like a phone's: %q", w, label)
		}
		fits(t, page, fmt.Sprintf("the inbox at %d px", w))
		screenshot(t, page, fmt.Sprintf("inbox-triage-%d", w))

		// The closed one behind its filter; the short id and a tag value find theirs.
		gotoPage(t, page, s.URL+"/inbox?status=CLOSED")
		must(t, expect.Locator(testID(page, "incident-culprit")).ToHaveText("lookup (app/catalog.py:41)"), "the closed filter")
		gotoPage(t, page, s.URL+"/inbox")
		must(t, testID(page, "filter-q").Fill(ratioShort), "type the short id")
		must(t, testID(page, "filter-q").Press("Enter"), "search")
		must(t, page.WaitForURL(s.URL+"/inbox?*q="+url.QueryEscape(ratioShort)+"*"), "the search's URL")
		must(t, expect.Locator(testID(page, "incident-row")).ToHaveCount(1), "one row for the short id")
		must(t, expect.Locator(testID(page, "incident-culprit")).ToHaveText("ratio (app/billing/invoice.py:41)"), "the short id's incident")
		gotoPage(t, page, s.URL+"/inbox?q=globex")
		must(t, expect.Locator(testID(page, "incident-culprit")).ToHaveText("average (app/stats.py:41)"), "the tag value's incident")

		gotoPage(t, page, s.URL+"/projects/shop/monitors")
		mrow := testID(page, "monitor-row")
		must(t, expect.Locator(mrow).ToHaveCount(1), "the monitor row")
		label = rowLabel(mrow, "Schedule")
		if (w < 640) != strings.Contains(label, "Schedule") {
			t.Errorf("the monitor row's label at %d px: %q", w, label)
		}
		fits(t, page, fmt.Sprintf("the monitors at %d px", w))
		screenshot(t, page, fmt.Sprintf("monitors-rows-%d", w))
	}
}
