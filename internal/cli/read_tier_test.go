package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/db/testdb"
)

// TestFeedKeepsIngestingWithoutWorkers: `serve --role web` alone accepts
// events (stored before the 202, grouped into incidents at once); the work
// they imply — the production card's refresh — waits in River and is done
// when a worker comes back.
func TestFeedKeepsIngestingWithoutWorkers(t *testing.T) {
	t.Parallel()
	env := []string{"ANVIL_DATABASE_URL=" + testdb.URLFor(testdb.Name(t)), "ANVIL_SECRET_KEY=" + testKey,
		"ANVIL_FEED_ARMED=true", "ANVIL_SANDBOX=process", "ANVIL_WORK_DIR=" + t.TempDir()}
	if code, _, stderr := anvil(t, env, "", "migrate"); code != 0 {
		t.Fatal(stderr)
	}
	_, out, _ := anvil(t, env, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "o@acme.test")
	var boot map[string]string
	json.Unmarshal([]byte(out), &boot)
	token := boot["token"]

	_, web, _ := startAnvil(t, env, "serve", "--role", "web")
	base := "http://" + web
	p := apiCall(t, token, "POST", base+"/api/private/projects", map[string]any{"slug": "shop", "repo_url": "https://git.example/shop.git",
		"default_branch": "main", "run_command": "true"})
	pid := p["id"].(string)
	conn := apiCall(t, token, "POST", base+"/api/private/projects/"+pid+"/connections", map[string]any{"name": "prod"})
	apiCall(t, token, "PUT", base+"/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})

	id := uuid.NewString()
	ev, _ := json.Marshal(map[string]any{"event_id": id, "timestamp": time.Now().UTC().Format(time.RFC3339), "title": "boom",
		"level": "error", "environment": "production", "service": "shop", "sdk": map[string]any{"name": "test"},
		"exception": map[string]any{"type": "Boom"}})
	req, _ := http.NewRequest("POST", base+"/api/feed/events", bytes.NewReader(ev))
	req.Header.Set("Authorization", "Bearer "+conn["token"].(string))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var verdict map[string]any
	json.NewDecoder(res.Body).Decode(&verdict)
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted || len(verdict["accepted"].([]any)) != 1 {
		t.Fatalf("ingest without workers: %d %v", res.StatusCode, verdict)
	}
	// The incident exists at once: grouping is part of the ingest.
	inc := apiCall(t, token, "GET", base+"/api/private/incidents?project_id="+pid, nil)["incidents"].([]any)
	if len(inc) != 1 || inc[0].(map[string]any)["status"] != "TRIAGED" {
		t.Fatalf("incidents: %v", inc)
	}
	// The card's refresh waits: nothing works jobs in a web-only process.
	card := apiCall(t, token, "GET", base+"/api/private/projects/"+pid+"/card", nil)
	if items, _ := card["incidents"].([]any); len(items) != 0 {
		t.Fatalf("card refreshed without a worker: %v", card)
	}
	// A worker comes back and the card catches up.
	startAnvil(t, env, "worker")
	pollUntil(t, 30*time.Second, "the card to show the incident", func() bool {
		card := apiCall(t, token, "GET", base+"/api/private/projects/"+pid+"/card", nil)
		items, _ := card["incidents"].([]any)
		return len(items) == 1 && strings.EqualFold(items[0].(map[string]any)["state"].(string), "OPEN")
	})
}
