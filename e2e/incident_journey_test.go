//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/jobs/jobstest"
)

// TestIncidentJourney: an error arrives through the feed → the inbox shows
// it live → approve → the repair run's log streams → the pull request link
// appears → the dashboard card shows INVESTIGATING.
func TestIncidentJourney(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	repo := jobstest.GitRepo(t)

	// The provider: GitHub's pull-request endpoint, in this process.
	var mu sync.Mutex
	var prs []map[string]any
	forge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/repos/acme/shop/pulls" {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		prs = append(prs, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"number":1,"html_url":"https://github.example/acme/shop/pull/1"}`)
	}))
	t.Cleanup(forge.Close)

	repair := `echo "task: $ANVIL_TASK"; echo fixed >> README; for i in 1 2 3; do echo repairing $i; sleep 0.5; done`
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{
		"slug": "shop", "name": "Shop", "repo_url": repo.URL, "default_branch": "main", "run_command": "true", "repair_command": repair,
		"provider": "github", "provider_api_url": forge.URL, "provider_repo": "acme/shop", "provider_token": "ghp_e2e_token",
	})
	pid := p["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "approve"})

	page := loggedIn(t, s)
	gotoPage(t, page, s.URL+"/inbox")
	must(t, expect.Locator(testID(page, "empty-state")).ToBeVisible(), "empty inbox")

	// The curl example of the seed, sent from here.
	ev := map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "NullPointerException in CheckoutService", "level": "error", "environment": "production", "service": "shop-api",
		"sdk": map[string]any{"name": "anvil-feed-java", "version": "0.1.0"},
		"exception": map[string]any{"type": "java.lang.NullPointerException", "message": "cart is null",
			"stacktrace": []any{map[string]any{"file": "CheckoutService.java", "line": 88, "function": "charge", "in_app": true}}},
		"user": map[string]any{"id": "u-4711"}}
	raw, _ := json.Marshal(ev)
	sendFeedEvent(t, s.URL, conn["token"].(string), raw)

	row := page.Locator("[data-testid=incident-row]")
	must(t, expect.Locator(row).ToHaveAttribute("data-status", "WAITING_APPROVAL"), "the incident appears live")
	screenshot(t, page, "inbox")
	must(t, row.Locator("[data-testid=decide-approve]").Click(), "approve")
	must(t, expect.Locator(row).Not().ToHaveAttribute("data-status", "WAITING_APPROVAL"), "approved")

	must(t, row.Locator("[data-testid=incident-link]").Click(), "open the incident")
	must(t, expect.Locator(testID(page, "incident-title")).ToHaveText("NullPointerException in CheckoutService"), "incident page")
	must(t, expect.Locator(testID(page, "repair-log")).ToContainText("repairing 2"), "the repair log streams")
	screenshot(t, page, "repairing")
	must(t, expect.Locator(testID(page, "pr-link")).ToHaveAttribute("href", "https://github.example/acme/shop/pull/1"), "the PR link appears")
	must(t, expect.Locator(testID(page, "incident-header")).ToHaveAttribute("data-status", "PR_OPEN"), "PR_OPEN")
	screenshot(t, page, "pr-open")

	gotoPage(t, page, s.URL+"/")
	card := page.Locator("[data-testid=project-card][data-slug=shop] [data-testid=card-incident]")
	must(t, expect.Locator(card).ToHaveAttribute("data-state", "INVESTIGATING"), "the dashboard card shows INVESTIGATING")
	screenshot(t, page, "dashboard")

	mu.Lock()
	defer mu.Unlock()
	if len(prs) != 1 || prs[0]["base"] != "main" || prs[0]["head"] == "" {
		t.Fatalf("pull requests: %v", prs)
	}
}
