package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// A project's two network lists: set through the API in canonical form,
// shown by GET, a bad entry refused naming it (422, nothing changed), the
// audit saying the change in words; and through the edit form alike.
func TestProjectNetworkLists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated || fmt.Sprint(p["network_allow"]) != "[]" || fmt.Sprint(p["repair_network_allow"]) != "[]" {
		t.Fatalf("create: %d %v", status, p)
	}
	id := p["id"].(string)
	status, p = b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+id, map[string]any{
		"network_allow": []string{"@NPM", " Registry.Example.com:8443 ", "", "@npm"}, "repair_network_allow": []string{"api.anthropic.com"}})
	if status != http.StatusOK || fmt.Sprint(p["network_allow"]) != "[@npm registry.example.com:8443]" || fmt.Sprint(p["repair_network_allow"]) != "[api.anthropic.com]" {
		t.Fatalf("patch: %d %v", status, p)
	}
	for _, tc := range []struct {
		body map[string]any
		code string
		says string
	}{
		{map[string]any{"network_allow": []string{"ok.example", "https://evil.example/x"}}, "invalid_network_entry", `"https://evil.example/x"`},
		{map[string]any{"repair_network_allow": []string{"@openai"}}, "unknown_network_preset", `"@openai"`},
		{map[string]any{"network_allow": manyEntries(101)}, "too_many_network_entries", "more than 100"},
		{map[string]any{"network_allow": "registry.npmjs.org"}, "", ""},
	} {
		status, out := b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+id, tc.body)
		if tc.code == "" {
			if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
				t.Errorf("a string for a list: %d %v", status, out)
			}
			continue
		}
		if status != http.StatusUnprocessableEntity || out["error"] != tc.code || !strings.Contains(fmt.Sprint(out["message"]), tc.says) {
			t.Errorf("%v: %d %v", tc.body, status, out)
		}
	}
	_, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil)
	if fmt.Sprint(got["network_allow"]) != "[@npm registry.example.com:8443]" || fmt.Sprint(got["repair_network_allow"]) != "[api.anthropic.com]" {
		t.Fatalf("a refused change changed the lists: %v", got)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, audit := br.get("/settings/audit")
	if !strings.Contains(audit, "changed the network list of runs from") || !strings.Contains(audit, "none (offline)") ||
		!strings.Contains(audit, "@npm, registry.example.com:8443") {
		t.Fatalf("the audit page does not say the change:\n%s", audit)
	}

	// The edit form: one entry a line; a bad line is refused beside its
	// field with the form as typed.
	page := "/projects/" + id + "/edit"
	_, form := br.get(page)
	if !strings.Contains(form, "@npm\nregistry.example.com:8443</textarea>") || !strings.Contains(form, "@pypi") {
		t.Fatalf("the form does not show the lists:\n%s", form)
	}
	vals := url.Values{"_csrf": {br.csrf(page)}, "slug": {"shop"}, "name": {"Web shop"}, "repo_url": {"https://git.example/shop.git"},
		"default_branch": {"main"}, "run_command": {"make test"}, "network_allow": {"@npm\r\nfiles.example/path"}, "repair_network_allow": {""}}
	res, body := br.post(page, vals)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "files.example/path") || !strings.Contains(body, "without a scheme, a path") {
		t.Fatalf("a bad line: %d\n%s", res.StatusCode, body)
	}
	vals["network_allow"] = []string{"@npm\r\n\r\n*.corp.example:8080"}
	if res, body := br.post(page, vals); res.StatusCode != http.StatusOK && res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a good form: %d\n%s", res.StatusCode, body)
	}
	_, got = b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil)
	if fmt.Sprint(got["network_allow"]) != "[@npm *.corp.example:8080]" || fmt.Sprint(got["repair_network_allow"]) != "[]" {
		t.Fatalf("the form saved %v / %v", got["network_allow"], got["repair_network_allow"])
	}
}

func manyEntries(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("h%d.example", i)
	}
	return out
}

// A run's connections: the API lists them in order (another
// organisation's run is a 404), the run page has its Network section, and
// the section's fragment is served alone for the live stream.
func TestRunConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated {
		t.Fatal(status)
	}
	status, r := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+p["id"].(string)+"/runs", nil)
	if status != http.StatusAccepted {
		t.Fatal(status, r)
	}
	runID := r["run_id"].(string)
	if _, err := b.db.Bun.NewRaw(`INSERT INTO run_connections (run_id, seq, host, port, verdict, reason, method, bytes_up, bytes_down, duration_ms, count, started_at) VALUES
		(?, 1, 'registry.npmjs.org', 443, 'allowed', '', 'CONNECT', 812, 4200000, 1250, 1, now()),
		(?, 2, 'example.org', 443, 'refused', 'not in this project''s network list: example.org:443', 'CONNECT', 0, 62, 0, 3, now())`,
		runID, runID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	status, out := b.api(t, b.owner.Token, "GET", "/api/private/runs/"+runID+"/connections", nil)
	conns, _ := out["connections"].([]any)
	if status != http.StatusOK || len(conns) != 2 {
		t.Fatalf("connections: %d %v", status, out)
	}
	first, second := conns[0].(map[string]any), conns[1].(map[string]any)
	if first["host"] != "registry.npmjs.org" || first["bytes_down"] != float64(4200000) || first["verdict"] != "allowed" ||
		second["verdict"] != "refused" || second["count"] != float64(3) || !strings.Contains(second["reason"].(string), "network list") {
		t.Fatalf("connections: %v", conns)
	}
	other, err := b.accounts.Bootstrap(ctx, "globex", "boss@globex.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/private/runs/" + runID + "/connections", "/api/private/runs/" + uuid.NewString() + "/connections"} {
		if status, _ := b.api(t, other.Token, "GET", path, nil); status != http.StatusNotFound {
			t.Fatalf("%s from another organisation: %d", path, status)
		}
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/runs/" + runID)
	for _, want := range []string{`data-testid="run-network"`, `hx-trigger="sse:connection"`, "registry.npmjs.org:443", "4.0 MiB", "× 3",
		"not in this project&#39;s network list: example.org:443"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	res, frag := br.get("/runs/" + runID + "/network")
	if res.StatusCode != http.StatusOK || !strings.Contains(frag, `data-verdict="refused"`) || strings.Contains(frag, "<html") {
		t.Fatalf("fragment: %d\n%s", res.StatusCode, frag)
	}
}

// Run secrets carry a scope: set with the value or alone, shown in the
// list, refused when it is none of runs, repairs and both.
func TestRunSecretScopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated {
		t.Fatal(status)
	}
	base := "/api/private/projects/" + p["id"].(string) + "/secrets/"
	if status, out := b.api(t, b.owner.Token, "PUT", base+"OLD_STYLE", map[string]any{"value": "0123456789abcdef"}); status != http.StatusCreated || out["scope"] != "both" {
		t.Fatalf("no scope: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "PUT", base+"MODEL_API_KEY", map[string]any{"value": "sk-0123456789abcdef", "scope": "repairs"}); status != http.StatusCreated || out["scope"] != "repairs" {
		t.Fatalf("repairs: %d %v", status, out)
	}
	if status, out := b.api(t, b.owner.Token, "PUT", base+"OLD_STYLE", map[string]any{"scope": "runs"}); status != http.StatusOK || out["scope"] != "runs" {
		t.Fatalf("scope alone: %d %v", status, out)
	}
	for _, body := range []map[string]any{{"scope": "everyone"}, {"scope": ""}, {"value": "0123456789abcdef", "scope": "sometimes"}} {
		if status, out := b.api(t, b.owner.Token, "PUT", base+"MODEL_API_KEY", body); status != http.StatusUnprocessableEntity || out["error"] != "invalid_secret_scope" {
			t.Fatalf("%v: %d %v", body, status, out)
		}
	}
	if status, out := b.api(t, b.owner.Token, "PUT", base+"NEW_ONE", map[string]any{"scope": "runs"}); status != http.StatusUnprocessableEntity || out["error"] != "missing_value" {
		t.Fatalf("a new secret without a value: %d %v", status, out)
	}
	_, out := b.api(t, b.owner.Token, "GET", base[:len(base)-1], nil)
	got := map[string]string{}
	for _, s := range out["secrets"].([]any) {
		m := s.(map[string]any)
		got[m["name"].(string)] = m["scope"].(string)
	}
	if got["OLD_STYLE"] != "runs" || got["MODEL_API_KEY"] != "repairs" || len(got) != 2 {
		t.Fatalf("list: %v", got)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, page := br.get("/projects/shop/secrets")
	if !strings.Contains(page, "repair runs only") || !strings.Contains(page, `name="scope"`) {
		t.Fatalf("the secrets page does not show scopes:\n%s", page)
	}
}

// A project may give runs of forks' code no copy of its cache: the API
// field (true unless set), the edit form's checkbox, and the audit.
func TestProjectForkCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	if status != http.StatusCreated || p["fork_cache"] != true {
		t.Fatalf("create: %d %v", status, p)
	}
	id := p["id"].(string)
	if status, p = b.api(t, b.owner.Token, "PATCH", "/api/private/projects/"+id, map[string]any{"fork_cache": false}); status != http.StatusOK || p["fork_cache"] != false {
		t.Fatalf("patch: %d %v", status, p)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	page := "/projects/" + id + "/edit"
	_, form := br.get(page)
	if !strings.Contains(form, `data-testid="fork-cache"`) || strings.Contains(form, `name="fork_cache" value="1" class="mt-0.5" checked`) {
		t.Fatalf("the form does not show the box unticked:\n%s", form)
	}
	vals := url.Values{"_csrf": {br.csrf(page)}, "slug": {"shop"}, "name": {"Web shop"}, "repo_url": {"https://git.example/shop.git"},
		"default_branch": {"main"}, "run_command": {"make test"}, "fork_cache_shown": {"1"}, "fork_cache": {"1"}}
	if res, body := br.post(page, vals); res.StatusCode != http.StatusOK && res.StatusCode != http.StatusSeeOther {
		t.Fatalf("tick: %d\n%s", res.StatusCode, body)
	}
	if _, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil); got["fork_cache"] != true {
		t.Fatalf("the ticked box saved %v", got["fork_cache"])
	}
	delete(vals, "fork_cache")
	vals["_csrf"] = []string{br.csrf(page)}
	if res, body := br.post(page, vals); res.StatusCode != http.StatusOK && res.StatusCode != http.StatusSeeOther {
		t.Fatalf("untick: %d\n%s", res.StatusCode, body)
	}
	if _, got := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+id, nil); got["fork_cache"] != false {
		t.Fatalf("the unticked box saved %v", got["fork_cache"])
	}
	if _, audit := br.get("/settings/audit"); !strings.Contains(audit, "cache for forks") {
		t.Fatalf("the audit page does not say the change:\n%s", audit)
	}
}
