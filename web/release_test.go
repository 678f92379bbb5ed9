package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// The releases API, the Releases page, short ids wherever an incident id
// goes, and the project's verification window (docs/releases.md).
func TestReleasesAndShortIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService") // release 2026.9.3

	status, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/shop/releases", nil)
	rs, _ := out["releases"].([]any)
	if status != 200 || len(rs) != 1 || rs[0].(map[string]any)["version"] != "2026.9.3" || rs[0].(map[string]any)["event_count"] != float64(1) {
		t.Fatalf("list: %d %v", status, out)
	}
	for _, c := range []struct {
		body   map[string]any
		status int
		code   string
	}{
		{map[string]any{"version": ""}, 422, "invalid_version"},
		{map[string]any{"version": "2026.9.3", "commit_sha": "nope"}, 422, "invalid_commit_sha"},
		{map[string]any{"version": "2026.9.3", "commit_sha": "3f9c1e2d4b", "environment": "production", "deployed_at": "2026-12-03T10:00:00Z"}, 201, ""},
	} {
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/releases", c.body)
		if status != c.status || (c.code != "" && out["error"] != c.code) {
			t.Fatalf("%v: %d %v", c.body, status, out)
		}
	}
	_, out = b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/releases", nil)
	if r := out["releases"].([]any)[0].(map[string]any); r["commit_sha"] != "3f9c1e2d4b" || r["commit_from"] != "declared" {
		t.Fatalf("declared: %v", r)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/projects/shop/releases")
	if !strings.Contains(page, `data-testid="release-row"`) || !strings.Contains(page, "3f9c1e2d4b") {
		t.Fatalf("page: %s", page)
	}

	// The incident by its short id, in the API and on its page.
	status, out = b.api(t, b.owner.Token, "GET", "/api/private/incidents/SHOP-1", nil)
	inc, _ := out["incident"].(map[string]any)
	if status != 200 || inc["short_id"] != "SHOP-1" {
		t.Fatalf("by short id: %d %v", status, out)
	}
	if status, _ := b.api(t, b.owner.Token, "POST", "/api/private/incidents/shop-1/decisions", map[string]any{"decision": "ignore"}); status != 200 {
		t.Fatalf("decision by short id: %d", status)
	}
	if status, _ := b.api(t, b.owner.Token, "GET", "/api/private/incidents/SHOP-9", nil); status != 404 {
		t.Fatalf("unknown short id: %d", status)
	}
	if _, page := br.get("/incidents/SHOP-1"); !strings.Contains(page, `data-testid="incident-short-id">SHOP-1<`) {
		t.Fatalf("incident page lacks its short id: %.600s", page)
	}
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "x@globex.test", testPassword)
	for _, c := range []struct{ m, p string }{{"GET", "/api/private/incidents/SHOP-1"}, {"GET", "/api/private/projects/" + pid + "/releases"},
		{"POST", "/api/private/projects/" + pid + "/releases"}} {
		if status, _ := b.api(t, other.Token, c.m, c.p, map[string]any{"version": "x"}); status != 404 {
			t.Errorf("%s %s by another org: %d", c.m, c.p, status)
		}
	}

	// The verification window: 24h by default, at least 1m.
	_, out = b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid, nil)
	if out["fix_verification_window"] != "24h" {
		t.Fatalf("default window: %v", out["fix_verification_window"])
	}
	for _, bad := range []string{"30s", "soon", "0m"} {
		if status, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+pid, map[string]any{"fix_verification_window": bad}); status != 422 ||
			!strings.Contains(toString(out["message"]), "fix_verification_window") {
			t.Fatalf("%s: %d %v", bad, status, out)
		}
	}
	if status, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+pid, map[string]any{"fix_verification_window": "30m"}); status != http.StatusOK ||
		out["fix_verification_window"] != "30m" {
		t.Fatalf("set window: %d %v", status, out)
	}
}
