//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestMonitorIncidentPage: a cron monitor's incident is the monitor's page
// at 420 and 1280 px (docs/monitors.md, "Incidents"): a link to the monitor
// with its schedule, its runs instead of an exception, the reopen reason in
// the monitor's words, nothing scrolling sideways, and the link leads to the
// monitor.
func TestMonitorIncidentPage(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "make"})
	pid := p["id"].(string)
	m := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/monitors", map[string]any{"slug": "nightly-backup",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "timezone": "Europe/Berlin",
		"failure_issue_threshold": 1, "recovery_threshold": 1})
	ping, _ := m["ping_url"].(string)
	if !strings.Contains(ping, "/api/monitors/anv_png_") {
		t.Fatalf("no ping URL: %v", m)
	}
	ping = s.URL + ping[strings.Index(ping, "/api/monitors/"):]
	// A good run, a failure opens the incident, a good run closes it, a
	// failure reopens it.
	for _, suffix := range []string{"", "/fail", "", "/fail"} {
		res, err := http.Post(ping+suffix, "text/plain", strings.NewReader("backup.sh: disk full"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("ping %q: %d", suffix, res.StatusCode)
		}
	}
	var id string
	for _, i := range apiJSON(t, s, "GET", "/api/private/incidents", nil)["incidents"].([]any) {
		if inc := i.(map[string]any); inc["title"] == "nightly-backup failed" {
			id = inc["id"].(string)
		}
	}
	if id == "" {
		t.Fatal("the monitor opened no incident")
	}

	page := loggedIn(t, s)
	for _, w := range []int{420, 1280} {
		must(t, page.SetViewportSize(w, 900), "viewport")
		if status := gotoPage(t, page, s.URL+"/incidents/"+id); status != http.StatusOK {
			t.Fatalf("the incident at %d px: %d", w, status)
		}
		must(t, expect.Locator(testID(page, "monitor-link")).ToHaveText("nightly-backup"), "the monitor's link")
		must(t, expect.Locator(testID(page, "monitor-schedule")).ToContainText("daily at 02:00 (0 2 * * *, Europe/Berlin)"), "the schedule")
		runs := testID(page, "monitor-run")
		must(t, expect.Locator(runs).ToHaveCount(4), fmt.Sprintf("four runs at %d px", w))
		must(t, expect.Locator(runs.First()).ToHaveAttribute("data-status", "error"), "the newest run first")
		must(t, expect.Locator(runs.First()).ToContainText("error"), "the run's status in words")
		must(t, expect.Locator(runs.First().Locator("time")).ToBeVisible(), "the run's time")
		must(t, expect.Locator(testID(page, "exception")).ToHaveCount(0), "no Exception box")
		must(t, expect.Locator(testID(page, "transitions")).ToContainText("reopened: nightly-backup failed"), "the reopen reason")
		must(t, expect.Locator(testID(page, "transitions")).Not().ToContainText("regression:"), "no raw regression reason")
		fits(t, page, fmt.Sprintf("the monitor's incident at %d px", w))
		screenshot(t, page, fmt.Sprintf("monitor-incident-%d", w))
	}
	must(t, testID(page, "monitor-link").Click(), "follow the monitor's link")
	must(t, page.WaitForURL(s.URL+"/projects/"+pid+"/monitors/nightly-backup"), "the monitor's page")
	must(t, expect.Locator(page.Locator(`[data-testid="monitor-run"][data-status="error"]`)).ToHaveCount(2), "the monitor's page lists its runs")
}
