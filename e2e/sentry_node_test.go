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

// The real @sentry/node's withMonitor, unmodified, against a real anvil:
// the monitor is created from its config, its runs are recorded with
// durations, the failing run opens an incident and the two good ones
// (recovery threshold 2) close it by anvil.
func TestSentryNodeWithMonitor(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "node"})
	cmd := exec.Command("node", filepath.Join("sentry-node", "monitor.mjs"))
	cmd.Env = append(cmd.Environ(), "SENTRY_DSN="+conn["dsn"].(string))
	if out, err := cmd.Output(); err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s\n%s", err, out, stderr)
	}
	m := apiJSON(t, s, "GET", "/api/private/projects/"+pid+"/monitors/invoice-export", nil)
	sch, _ := m["schedule"].(map[string]any)
	if sch["type"] != "crontab" || sch["value"] != "*/5 * * * *" || m["timezone"] != "America/New_York" || m["recovery_threshold"] != float64(2) || m["max_runtime"] != float64(10) {
		t.Fatalf("monitor %v", m)
	}
	runs, _ := m["runs"].([]any)
	var got []string
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i].(map[string]any)
		d, _ := r["duration_ms"].(float64)
		if d <= 0 || r["check_in_id"] == nil {
			t.Fatalf("run without a duration or check-in id: %v", r)
		}
		got = append(got, r["status"].(string))
	}
	if strings.Join(got, ",") != "error,ok,ok" {
		t.Fatalf("runs %v", got)
	}
	if d := runs[1].(map[string]any)["duration_ms"].(float64); d < 1100 {
		t.Fatalf("the 1.2 s run took %v ms", d)
	}
	list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
	items, _ := list["incidents"].([]any)
	if len(items) != 1 {
		t.Fatalf("incidents %v", items)
	}
	inc := items[0].(map[string]any)
	if inc["status"] != "CLOSED" || inc["title"] != "invoice-export failed" || inc["environment"] != "production" {
		t.Fatalf("incident %v", inc)
	}
	detail := apiJSON(t, s, "GET", "/api/private/incidents/"+inc["id"].(string), nil)
	raw, _ := json.Marshal(detail)
	if !strings.Contains(string(raw), `"anvil"`) || !strings.Contains(string(raw), "recovered: ok at ") {
		t.Fatalf("the close is not anvil's with evidence: %s", raw)
	}
}
