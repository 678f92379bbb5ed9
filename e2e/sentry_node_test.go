//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The real @sentry/node from npm, unmodified, reports to a real anvil
// server through the Sentry-compatible door with the DSN the API hands out;
// the incidents appear with the title, type, frames, environment and release.
func TestSentryNodeSDK(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "node"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	dsn, _ := conn["dsn"].(string)
	if !strings.HasPrefix(dsn, "http://anv_srv_") {
		t.Fatalf("dsn %q", dsn)
	}

	cmd := exec.Command("node", filepath.Join("sentry-node", "send.mjs"))
	cmd.Env = append(cmd.Environ(), "SENTRY_DSN="+dsn)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s\n%s", err, out, stderr)
	}
	var ids struct{ ExceptionID, MessageID string }
	if err := json.Unmarshal(out, &ids); err != nil || len(ids.ExceptionID) != 32 {
		t.Fatalf("node printed %q (%v)", out, err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
		var exc, msg map[string]any
		items, _ := list["incidents"].([]any)
		for _, it := range items {
			in := it.(map[string]any)
			switch in["exception_type"] {
			case "TypeError":
				exc = in
			case "Message":
				msg = in
			}
		}
		if exc != nil && msg != nil {
			if !strings.HasPrefix(exc["title"].(string), "TypeError: Cannot read properties of null") || exc["environment"] != "production" || exc["release"] != "shop@2.0.0" {
				t.Fatalf("exception incident %v", exc)
			}
			if msg["title"] != "queue backlog above 1000" {
				t.Fatalf("message incident %v", msg)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("incidents %v", items)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
