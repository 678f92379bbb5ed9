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

// The real OpenTelemetry Node SDK from npm, unmodified and configured by
// environment variables alone, reports a recorded exception through the
// OTLP door over JSON and over protobuf, from two services: one incident
// of both (the same exception groups per project), with the JavaScript
// frames, the span's ids and the environment.
func TestOTLPNodeSDK(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	conn := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "node-otel"})
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/staging", map[string]any{"repair_policy": "observe"})
	token := conn["token"].(string)

	send := func(encoding, service string) (ids struct{ TraceID, SpanID string }) {
		t.Helper()
		cmd := exec.Command("node", filepath.Join("otel-node", "send.mjs"))
		cmd.Env = append(cmd.Environ(), "OTLP_ENCODING="+encoding, "OTEL_SERVICE_NAME="+service,
			"OTEL_EXPORTER_OTLP_ENDPOINT="+s.URL+"/api/otlp",
			"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20"+token,
			"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=staging,service.version=shop@3.1.0")
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			var stderr []byte
			if errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("node (%s): %v\n%s\n%s", encoding, err, out, stderr)
		}
		if err := json.Unmarshal(out, &ids); err != nil || len(ids.TraceID) != 32 || len(ids.SpanID) != 16 {
			t.Fatalf("node printed %q (%v)", out, err)
		}
		return ids
	}
	jsonIDs := send("json", "checkout-node")
	send("proto", "billing-node")

	var inc map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for inc == nil {
		list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
		items, _ := list["incidents"].([]any)
		for _, it := range items {
			if in := it.(map[string]any); in["exception_type"] == "TypeError" && in["event_count"] == 2.0 {
				inc = in
			}
		}
		if inc == nil && time.Now().After(deadline) {
			t.Fatalf("incidents %v", items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.HasPrefix(inc["title"].(string), "TypeError: Cannot read properties of null") || inc["environment"] != "staging" || inc["release"] != "shop@3.1.0" {
		t.Fatalf("incident %v", inc)
	}
	list := apiJSON(t, s, "GET", "/api/private/incidents/"+inc["id"].(string)+"/events", nil)
	var raw []byte
	for _, e := range list["events"].([]any) {
		ev := apiJSON(t, s, "GET", "/api/private/incidents/"+inc["id"].(string)+"/events/"+e.(map[string]any)["event_id"].(string), nil)
		b, _ := json.Marshal(ev)
		raw = append(raw, b...)
	}
	for _, want := range []string{`"function":"chargeCart"`, `send.mjs`, `"trace_id":"` + jsonIDs.TraceID + `"`, `"span_id":"` + jsonIDs.SpanID + `"`,
		`"checkout-node"`, `"billing-node"`} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("events lack %s: %s", want, raw)
		}
	}
}
