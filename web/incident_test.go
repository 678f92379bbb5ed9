package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// feedEvent posts one event with the connection token and returns its id.
func (b *testBundle) feedEvent(t *testing.T, token, title string) string {
	t.Helper()
	id := uuid.NewString()
	ev := map[string]any{"schema_version": "1.0", "event_id": id, "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": title, "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "NullPointerException", "message": "cart is null",
			"stacktrace": []any{map[string]any{"file": "Checkout.java", "line": 88, "function": "charge", "in_app": true}}},
		"user": map[string]any{"id": "u-4711"}, "tags": map[string]any{"tier": "gold"}, "breadcrumbs": []any{"cart.add"}, "release": "2026.9.3"}
	status, out := b.api(t, token, "POST", "/api/feed/events", ev)
	if status != http.StatusAccepted {
		t.Fatalf("feed: %d %v", status, out)
	}
	return id
}

// incidentProject makes a project with a repair command, a connection and
// an approve binding; it returns the project id and the connection token.
func (b *testBundle) incidentProject(t *testing.T) (string, string) {
	t.Helper()
	p := validProject("shop")
	p["repair_command"] = "./fix.sh"
	status, out := b.api(t, b.owner.Token, "POST", "/api/private/projects", p)
	if status != http.StatusCreated {
		t.Fatalf("project: %d %v", status, out)
	}
	pid := out["id"].(string)
	_, conn := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "api"})
	if status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "approve"}); status != 200 {
		t.Fatalf("binding: %d %v", status, out)
	}
	return pid, conn["token"].(string)
}

func TestIncidentAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService")

	status, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents?project_id="+pid+"&status=WAITING_APPROVAL", nil)
	list, _ := out["incidents"].([]any)
	if status != 200 || len(list) != 1 {
		t.Fatalf("list: %d %v", status, out)
	}
	inc := list[0].(map[string]any)
	for _, k := range []string{"id", "project_id", "status", "title", "environment", "event_count", "first_seen", "last_seen", "pr_url"} {
		if _, ok := inc[k]; !ok {
			t.Errorf("incident lacks %s", k)
		}
	}
	id := inc["id"].(string)
	status, out = b.api(t, b.owner.Token, "GET", "/api/private/incidents/"+id, nil)
	if status != 200 || out["incident"].(map[string]any)["status"] != "WAITING_APPROVAL" || len(out["transitions"].([]any)) != 3 {
		t.Fatalf("get: %d %v", status, out)
	}
	cases := []struct {
		body   any
		status int
		code   string
		msg    string
	}{
		{map[string]any{"decision": "merge"}, 422, "unknown_decision", "approve, ignore, close, reopen"},
		{map[string]any{"decision": "reopen"}, 409, "invalid_decision", "cannot reopen an incident that is WAITING_APPROVAL"},
		{"{", 400, "invalid_json", ""},
		{map[string]any{"decision": "approve"}, 200, "", ""},
		{map[string]any{"decision": "approve"}, 409, "invalid_decision", "cannot approve an incident that is QUEUED"},
		{map[string]any{"decision": "close"}, 200, "", ""},
		{map[string]any{"decision": "close"}, 409, "invalid_decision", "cannot close an incident that is CLOSED"},
	}
	for _, c := range cases {
		status, out := b.api(t, b.owner.Token, "POST", "/api/private/incidents/"+id+"/decisions", c.body)
		if status != c.status || (c.code != "" && out["error"] != c.code) || !strings.Contains(toString(out["message"]), c.msg) {
			t.Fatalf("%v: %d %v", c.body, status, out)
		}
	}
	for _, bad := range []string{"?status=NOPE", "?project_id=x", "?environment=BAD%20ENV", "?page=x"} {
		if status, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents"+bad, nil); status != 422 {
			t.Fatalf("%s: %d %v", bad, status, out)
		}
	}
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "x@globex.test", testPassword)
	for _, c := range []struct{ m, p string }{{"GET", "/api/private/incidents/" + id}, {"POST", "/api/private/incidents/" + id + "/decisions"},
		{"GET", "/api/private/projects/" + pid + "/card"}, {"PUT", "/api/private/projects/" + pid + "/dashboard"}} {
		if status, _ := b.api(t, other.Token, c.m, c.p, map[string]any{"decision": "close", "external": true}); status != 404 {
			t.Errorf("%s %s by another org: %d", c.m, c.p, status)
		}
	}
	if status, out := b.api(t, other.Token, "GET", "/api/private/incidents", nil); status != 200 || len(out["incidents"].([]any)) != 0 {
		t.Fatalf("other org's inbox: %v", out)
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

func TestDashboardIngest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, _ := b.incidentProject(t)
	status, card := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/card", nil)
	if status != 200 || card["source"] != "anvil-feed" || len(card["incidents"].([]any)) != 0 {
		t.Fatalf("card: %d %v", status, card)
	}
	if status, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+pid+"/dashboard", map[string]any{}); status != 422 || out["error"] != "missing_external" {
		t.Fatalf("missing external: %d %v", status, out)
	}
	status, cfg := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+pid+"/dashboard", map[string]any{"external": true})
	tok, _ := cfg["token"].(string)
	if status != 200 || !strings.HasPrefix(tok, "anv_dsh_") || cfg["config_id"] == nil {
		t.Fatalf("external: %d %v", status, cfg)
	}
	url := "/api/ingest/dashboard/acme/" + cfg["config_id"].(string) + "/incidents"
	good := map[string]any{"incidents": []any{map[string]any{"id": "inc-1", "title": "Checkout down", "state": "INVESTIGATING", "since": "2026-09-16T10:11:12Z"}}}
	cases := []struct {
		name, url, tok string
		body           any
		status         int
		msg            string
	}{
		{"no token", url, "", good, 401, ""},
		{"wrong token", url, "anv_dsh_00000000000000000000000000000000", good, 401, ""},
		{"wrong tenant", strings.Replace(url, "/acme/", "/globex/", 1), tok, good, 401, ""},
		{"unknown config", "/api/ingest/dashboard/acme/" + uuid.NewString() + "/incidents", tok, good, 401, ""},
		{"bad state", url, tok, map[string]any{"incidents": []any{map[string]any{"id": "a", "title": "t", "state": "DOWN", "since": "2026-09-16T10:11:12Z"}}}, 422, "incidents[0].state must be one of OPEN, INVESTIGATING, MITIGATED, RESOLVED"},
		{"bad since", url, tok, map[string]any{"incidents": []any{map[string]any{"id": "a", "title": "t", "state": "OPEN", "since": "now"}}}, 422, "incidents[0].since must be an RFC 3339 time"},
		{"no list", url, tok, map[string]any{}, 422, `"incidents" is required`},
		{"not json", url, tok, "[", 400, ""},
		{"good", url, tok, good, 204, ""},
	}
	for _, c := range cases {
		status, out := b.api(t, c.tok, "PUT", c.url, c.body)
		if status != c.status || !strings.Contains(toString(out["message"]), c.msg) {
			t.Fatalf("%s: %d %v", c.name, status, out)
		}
	}
	_, card = b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/card", nil)
	incs := card["incidents"].([]any)
	if card["source"] != "external" || len(incs) != 1 || incs[0].(map[string]any)["state"] != "INVESTIGATING" {
		t.Fatalf("external card: %v", card)
	}
	// An empty list replaces the card too.
	if status, out := b.api(t, tok, "PUT", url, map[string]any{"incidents": []any{}}); status != 204 {
		t.Fatalf("empty: %d %v", status, out)
	}
	_, card = b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/card", nil)
	if len(card["incidents"].([]any)) != 0 {
		t.Fatalf("empty list not stored: %v", card)
	}
	// Handed back: the old token stops working.
	if status, cfg := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+pid+"/dashboard", map[string]any{"external": false}); status != 200 || cfg["token"] != nil {
		t.Fatalf("hand back: %d %v", status, cfg)
	}
	if status, _ := b.api(t, tok, "PUT", url, good); status != 401 {
		t.Fatalf("token after hand back: %d", status)
	}
}

// TestDashboardIngestDefaultsSince: an external producer may leave since
// out; the incident then shows since the card first listed its id — the
// since already on the card for that id, else the time of the PUT.
func TestDashboardIngestDefaultsSince(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, _ := b.incidentProject(t)
	_, cfg := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+pid+"/dashboard", map[string]any{"external": true})
	tok, _ := cfg["token"].(string)
	url := "/api/ingest/dashboard/acme/" + cfg["config_id"].(string) + "/incidents"
	inc := func(id string, since ...string) map[string]any {
		m := map[string]any{"id": id, "title": "Incident " + id, "state": "OPEN"}
		if len(since) > 0 {
			m["since"] = since[0]
		}
		return m
	}
	put := func(incs ...map[string]any) {
		t.Helper()
		if status, out := b.api(t, tok, "PUT", url, map[string]any{"incidents": incs}); status != 204 {
			t.Fatalf("put: %d %v", status, out)
		}
	}
	sinces := func() map[string]string {
		t.Helper()
		_, card := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/card", nil)
		out := map[string]string{}
		for _, i := range card["incidents"].([]any) {
			m := i.(map[string]any)
			out[m["id"].(string)] = m["since"].(string)
		}
		return out
	}
	within := func(since string, from, to time.Time) bool {
		at, err := time.Parse(time.RFC3339, since)
		return err == nil && !at.Before(from.Truncate(time.Second)) && !at.After(to)
	}

	// New ids: a given since is kept, a missing one (left out or null) is now.
	before := time.Now()
	put(inc("given", "2026-09-16T10:11:12Z"), inc("absent"), map[string]any{"id": "null", "title": "t", "state": "OPEN", "since": nil})
	after := time.Now()
	first := sinces()
	if first["given"] != "2026-09-16T10:11:12Z" || !within(first["absent"], before, after) || !within(first["null"], before, after) {
		t.Fatalf("first put (between %s and %s): %v", before, after, first)
	}

	// Ids the card already lists keep their since; a new one gets now.
	before = time.Now()
	put(inc("given"), inc("absent"), inc("fresh"))
	after = time.Now()
	second := sinces()
	if second["given"] != "2026-09-16T10:11:12Z" || second["absent"] != first["absent"] || !within(second["fresh"], before, after) || len(second) != 3 {
		t.Fatalf("second put: %v, first was %v", second, first)
	}
	// A since given again replaces the stored one.
	put(inc("given", "2026-10-01T00:00:00Z"), inc("absent"))
	if third := sinces(); third["given"] != "2026-10-01T00:00:00Z" || third["absent"] != first["absent"] || len(third) != 2 {
		t.Fatalf("third put: %v", third)
	}

	// A malformed since is still refused (422; 400 for a JSON number), and
	// changes nothing.
	for _, bad := range []any{"now", "2026-09-16", "", 12} {
		want := 422
		if _, isNumber := bad.(int); isNumber {
			want = 400
		}
		status, out := b.api(t, tok, "PUT", url, map[string]any{"incidents": []any{inc("given"), map[string]any{"id": "x", "title": "t", "state": "OPEN", "since": bad}}})
		if status != want || !strings.Contains(toString(out["message"]), "since must be") {
			t.Fatalf("since %v: %d %v", bad, status, out)
		}
	}
	if got := sinces(); len(got) != 2 || got["given"] != "2026-10-01T00:00:00Z" {
		t.Fatalf("a refused body changed the card: %v", got)
	}
}

func TestInboxAndIncidentPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pid, feedTok := b.incidentProject(t)
	b.feedEvent(t, feedTok, "NullPointerException in CheckoutService")
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/inbox")
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="incident-row"`) || !strings.Contains(body, `sse-connect="/events"`) ||
		!strings.Contains(body, `hx-trigger="sse:incident"`) || !strings.Contains(body, `data-testid="decide-approve"`) {
		t.Fatalf("inbox: %d %s", res.StatusCode, body)
	}
	_, out := b.api(t, b.owner.Token, "GET", "/api/private/incidents", nil)
	id := out["incidents"].([]any)[0].(map[string]any)["id"].(string)
	res, body = br.get("/incidents/" + id)
	for _, want := range []string{"NullPointerException in CheckoutService", `data-in-app="true"`, "u-4711", "tier", "cart.add", "2026.9.3", `data-testid="hourly-chart"`, `data-to="WAITING_APPROVAL"`} {
		if !strings.Contains(body, want) {
			t.Errorf("incident page lacks %q", want)
		}
	}
	if res, _ := br.get("/incidents/" + uuid.NewString()); res.StatusCode != 404 {
		t.Fatalf("unknown incident: %d", res.StatusCode)
	}
	if res, _ := br.get("/inbox?status=NOPE"); res.StatusCode != 422 {
		t.Fatalf("bad filter: %d", res.StatusCode)
	}
	res, body = br.get("/")
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="project-card"`) || !strings.Contains(body, `hx-trigger="sse:card, sse:run"`) {
		t.Fatalf("dashboard: %d %s", res.StatusCode, body)
	}
	_ = pid
}
