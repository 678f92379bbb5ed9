//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/jobs/jobstest"
)

// rawCodes are status, reason, trigger and alert codes a page must never
// show as they are: the API keeps them, a person reads words.
var rawCodes = []string{"WAITING_APPROVAL", "NEEDS_HUMAN", "PR_OPEN", "TRIAGED", "OBSERVED", "VERIFYING", "IGNORED",
	"provider_error", "exit_code", "pull_request", "cancel_requested", "checkout_failed", "incident.waiting_approval", "incident.new"}

// TestStatusWordsEverywhere walks the pages that show statuses — the inbox
// with its counts, an incident waiting for approval, a failed run, the run
// list, the alerts' delivery log — and finds no raw code in their text.
func TestStatusWordsEverywhere(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": repo.URL, "default_branch": "main", "run_command": "exit 3", "repair_command": "true",
	})
	pid := p["id"].(string)
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "approve"})
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "NullPointerException in CheckoutService", "level": "error", "environment": "production", "service": "shop-api",
		"sdk": map[string]any{"name": "anvil-feed-java"}, "exception": map[string]any{"type": "java.lang.NullPointerException", "message": "cart is null"}})
	sendFeedEvent(t, s.URL, conn["token"].(string), raw)
	incs := apiJSON(t, s, "GET", "/api/private/incidents", nil)["incidents"].([]any)
	if len(incs) != 1 || incs[0].(map[string]any)["status"] != "WAITING_APPROVAL" {
		t.Fatalf("incidents: %v", incs)
	}
	incID := incs[0].(map[string]any)["id"].(string)
	run := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/runs", nil)
	runID := run["run_id"].(string)

	page := loggedIn(t, s)
	gotoPage(t, page, s.URL+"/runs/"+runID)
	must(t, expect.Locator(testID(page, "run-header")).ToHaveAttribute("data-status", "failed"), "the run failed")
	pages := map[string]string{
		"inbox":    "/incidents",
		"incident": "/incidents/" + incID,
		"run":      "/runs/" + runID,
		"runs":     "/projects/shop/runs",
		"project":  "/projects/shop",
	}
	for name, path := range pages {
		gotoPage(t, page, s.URL+path)
		text, err := page.Locator("main").InnerText()
		must(t, err, "the text of "+name)
		for _, code := range rawCodes {
			if strings.Contains(text, code) {
				t.Errorf("%s (%s) shows the code %s", name, path, code)
			}
		}
	}
	gotoPage(t, page, s.URL+"/incidents/"+incID)
	must(t, expect.Locator(testID(page, "incident-status")).ToHaveText("waiting for approval"), "the incident's status in words")
	gotoPage(t, page, s.URL+"/runs/"+runID)
	must(t, expect.Locator(testID(page, "run-failure-reason")).ToHaveText("the command failed"), "the run's reason in words")
}
