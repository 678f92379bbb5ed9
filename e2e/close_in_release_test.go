//go:build e2e

package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestCloseInCurrentReleaseBrowser: a person closes an incident from its
// page with the box "in the current release" ticked (docs/releases.md);
// the page shows it closed in that release.
func TestCloseInCurrentReleaseBrowser(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := p["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": "NullPointerException in CheckoutService", "level": "error", "environment": "production", "service": "shop-api",
		"release": "shop@2.4.0", "sdk": map[string]any{"name": "t"}, "exception": map[string]any{"type": "NPE", "message": "cart is null"}})
	sendFeedEvent(t, s.URL, conn["token"].(string), raw)
	list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)["incidents"].([]any)
	if len(list) != 1 {
		t.Fatalf("incidents: %v", list)
	}
	id := list[0].(map[string]any)["id"].(string)

	page := loggedIn(t, s)
	gotoPage(t, page, s.URL+"/incidents/"+id)
	box := testID(page, "close-in-current-release")
	must(t, expect.Locator(testID(page, "close-form")).ToContainText("shop@2.4.0"), "the close form names the release")
	must(t, box.Check(), "tick in the current release")
	must(t, testID(page, "decide-close").Click(), "close")
	must(t, expect.Locator(testID(page, "incident-header")).ToHaveAttribute("data-status", "CLOSED"), "closed")
	must(t, expect.Locator(page.Locator("[data-testid=fix-step][data-step=closed_in_release]")).ToContainText("closed in release shop@2.4.0"),
		"the chain shows the release")
	inc := apiJSON(t, s, "GET", "/api/private/incidents/"+id, nil)["incident"].(map[string]any)
	if fix, _ := inc["fix"].(map[string]any); fix == nil || fix["closed_in_release"] != "shop@2.4.0" {
		t.Fatalf("the incident: %v", inc)
	}
}
