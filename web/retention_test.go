package web_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/retention"
)

// TestRetentionAPI: the organisation's policy and a project's overrides
// through the private API: defaults, inheritance, clear 400s that change
// nothing, the admin role, unknown projects.
func TestRetentionAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	st, org := b.api(t, b.owner.Token, "GET", "/api/private/retention", nil)
	if st != 200 || org["events"] != "90d" || org["logs"] != "30d" || org["log_runs"] != 200.0 || org["incidents"] != "180d" ||
		org["audit"] != "365d" || org["daily_event_budget"] != nil || org["max_events"] != "90d" {
		t.Fatalf("GET retention: %d %v", st, org)
	}
	if epi, _ := org["events_per_incident"].(map[string]any); epi["first"] != 10.0 || epi["last"] != 100.0 {
		t.Fatalf("events_per_incident = %v", org["events_per_incident"])
	}
	st, out := b.api(t, b.owner.Token, "PUT", "/api/private/retention", map[string]any{"events": "3 months", "logs": "100d"})
	if st != 422 || out["error"] != "invalid_duration" || !strings.Contains(out["message"].(string), "events must be a whole number followed by d, h, m or s") {
		t.Fatalf("bad duration: %d %v", st, out)
	}
	if st, out := b.api(t, b.owner.Token, "PUT", "/api/private/retention", map[string]any{"events": "120d"}); st != 422 ||
		!strings.Contains(out["message"].(string), "at most 90d (ANVIL_EVENT_RETENTION") {
		t.Fatalf("above the maximum: %d %v", st, out)
	}
	if _, again := b.api(t, b.owner.Token, "GET", "/api/private/retention", nil); again["logs"] != "30d" {
		t.Fatalf("a refused PUT changed the policy: %v", again)
	}
	st, out = b.api(t, b.owner.Token, "PUT", "/api/private/retention", map[string]any{"events": "30d", "daily_event_budget": 1000})
	if st != 200 || out["events"] != "30d" || out["logs"] != "30d" || out["daily_event_budget"] != 1000.0 {
		t.Fatalf("PUT retention: %d %v", st, out)
	}
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	pid := p["id"].(string)
	st, out = b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+pid+"/retention",
		map[string]any{"logs": "12h", "events_per_incident": map[string]any{"last": 5}, "daily_event_budget": 0})
	if st != 200 || out["logs"] != "12h" || out["events"] != nil || out["daily_event_budget"] != 0.0 {
		t.Fatalf("PUT project retention: %d %v", st, out)
	}
	eff := out["effective"].(map[string]any)
	if eff["events"] != "30d" || eff["logs"] != "12h" || eff["daily_event_budget"] != nil ||
		eff["events_per_incident"].(map[string]any)["last"] != 5.0 || eff["events_per_incident"].(map[string]any)["first"] != 10.0 {
		t.Fatalf("effective = %v", eff)
	}
	if st, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+pid+"/retention", map[string]any{"audit": "30d"}); st != 422 || out["error"] != "invalid_scope" {
		t.Fatalf("audit on a project: %d %v", st, out)
	}
	if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/00000000-0000-0000-0000-000000000001/retention", nil); st != 404 {
		t.Fatalf("unknown project: %d", st)
	}
	// Members read, admins write.
	owner, err := b.accounts.Authenticate(ctx, b.owner.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.accounts.AddMember(ctx, owner, "dev@acme.test", testPassword, domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	_, dev, err := b.accounts.Login(ctx, "dev@acme.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := b.accounts.CreateToken(ctx, dev, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := b.api(t, tok, "GET", "/api/private/projects/"+pid+"/retention", nil); st != 200 {
		t.Fatalf("member reads: %d", st)
	}
	if st, _ := b.api(t, tok, "PUT", "/api/private/retention", map[string]any{"events": "1d"}); st != 403 {
		t.Fatalf("member writes: %d", st)
	}
	if n := b.countAudit(t, retention.AuditChanged); n != 2 {
		t.Fatalf("%d audit entries of retention changes; want 2", n)
	}
}

func (b *testBundle) countAudit(t *testing.T, kind string) int {
	t.Helper()
	var n int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM audit_log WHERE kind = ?`, kind).Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDailyBudgetAtBothDoors: after the parse, a request that would pass
// the project's daily budget is refused whole with 429, Retry-After until
// the next UTC midnight and a body naming the budget, at the native door
// and at the Sentry door (with Sentry's rate-limit header); the next day
// the budget is whole again.
func TestDailyBudgetAtBothDoors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC).UnixNano())
	b.services.Retention.SetNow(func() time.Time { return time.Unix(0, clock.Load()) })
	s := newSentryFix(t, b)
	if st, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+s.projectID+"/retention", map[string]any{"daily_event_budget": 3}); st != 200 {
		t.Fatalf("budget: %d %v", st, out)
	}
	batch := func(n int) []any {
		evs := make([]any, n)
		for i := range evs {
			evs[i] = ev(newID())
		}
		return evs
	}
	if r := s.send(t, "/api/feed/events/batch", s.token, batch(2)); r.Status != 202 {
		t.Fatalf("2 of 3: %d %s", r.Status, r.Raw)
	}
	r := s.send(t, "/api/feed/events/batch", s.token, batch(2))
	var body map[string]any
	json.Unmarshal(r.Raw, &body)
	if r.Status != 429 || r.Header.Get("Retry-After") != "3600" || body["error"] != "daily_event_budget" || body["daily_event_budget"] != 3.0 ||
		body["used_today"] != 2.0 || body["resets_at"] != "2026-12-04T00:00:00Z" || !strings.Contains(body["message"].(string), "daily event budget of 3 events") {
		t.Fatalf("4 of 3: %d %v %s", r.Status, r.Header, r.Raw)
	}
	// The parse comes first: a malformed body is a 400 whatever the budget.
	if r := s.send(t, "/api/feed/events", s.token, "{not json"); r.Status != 400 {
		t.Fatalf("malformed over budget: %d %s", r.Status, r.Raw)
	}
	if r := s.send(t, "/api/feed/events", s.token, ev(newID())); r.Status != 202 {
		t.Fatalf("3 of 3: %d %s", r.Status, r.Raw)
	}
	res := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(sentryEvent(hexID()))), s.auth()...)
	if res.Status != 429 || res.Header.Get("Retry-After") != "3600" || res.Header.Get("X-Sentry-Rate-Limits") != "3600::project:daily_event_budget" ||
		!strings.Contains(string(res.Raw), "daily_event_budget: ") {
		t.Fatalf("sentry over budget: %d %v %s", res.Status, res.Header, res.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, s.projectID); n != 3 {
		t.Fatalf("%d events stored; want 3", n)
	}
	// The Feed page says so.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, page := br.get("/projects/" + s.projectID + "/feed"); !strings.Contains(page, "Today (UTC): 3 events") || !strings.Contains(page, "of a daily budget of 3") {
		t.Fatalf("feed page: %s", page)
	}
	clock.Add(int64(time.Hour))
	if res := sentrySend(t, b.srv.URL, s.envPath(), envelope(`{}`, eventItem(sentryEvent(hexID()))), s.auth()...); res.Status != 200 {
		t.Fatalf("sentry the next day: %d %s", res.Status, res.Raw)
	}
	if r := s.send(t, "/api/feed/events/batch", s.token, batch(2)); r.Status != 202 {
		t.Fatalf("native the next day: %d %s", r.Status, r.Raw)
	}
}

// TestRetentionPage: the page shows the policy and each project's storage;
// a bad value is refused beside its form with the values as typed, a good
// one saved.
func TestRetentionPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("shop"))
	pid := p["id"].(string)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, page := br.get("/settings/retention")
	if res.StatusCode != 200 || !strings.Contains(page, `data-testid="retention-project"`) || !strings.Contains(page, "Last clean-up: none yet") ||
		!strings.Contains(page, "In force: events 90d (first 10 and last 100 per incident in full)") {
		t.Fatalf("page: %d %s", res.StatusCode, page)
	}
	csrf := br.csrf("/settings/retention")
	res, page = br.post("/settings/retention", url.Values{"_csrf": {csrf}, "events": {"forever"}, "logs": {"7d"}})
	if res.StatusCode != 422 || !strings.Contains(page, "events must be a whole number followed by d, h, m or s") || !strings.Contains(page, `value="forever"`) {
		t.Fatalf("bad form: %d %s", res.StatusCode, page)
	}
	// The problem stands beside its field, and only there.
	if !strings.Contains(page, `data-testid="org-events-error">must be a whole number followed by d, h, m or s`) ||
		strings.Contains(page, `data-testid="org-logs-error"`) || strings.Contains(page, `data-testid="p-`+pid+`-events-error"`) {
		t.Fatalf("field errors: %s", page)
	}
	if res, _ := br.post("/settings/retention/projects/"+pid, url.Values{"_csrf": {csrf}, "logs": {"7d"}, "daily_event_budget": {"500"}}); res.StatusCode != 303 {
		t.Fatalf("project form: %d", res.StatusCode)
	}
	_, page = br.get("/settings/retention")
	if !strings.Contains(page, "logs 7d or the last 200 runs") || !strings.Contains(page, "at most 500 events a day") {
		t.Fatalf("after saving: %s", page)
	}
	st, out := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+pid+"/retention", nil)
	if st != 200 || out["logs"] != "7d" || out["daily_event_budget"] != 500.0 || out["events"] != nil {
		t.Fatalf("saved overrides: %d %v", st, out)
	}

}

// TestIncidentPageSaysWhatWasSampledAway: the incident page tells how many
// of the incident's events retention did not keep in full.
func TestIncidentPageSaysWhatWasSampledAway(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	if r := f.send(t, "/api/feed/events", f.token, ev(newID())); r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	var id string
	if err := b.db.Bun.NewRaw(`SELECT id::text FROM incidents WHERE project_id = ?`, f.projectID).Scan(context.Background(), &id); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, page := br.get("/incidents/" + id); strings.Contains(page, "sampled-away") {
		t.Fatal("an incident with nothing sampled away says something was")
	}
	if _, err := b.db.Bun.NewRaw(`INSERT INTO incident_samples (incident_id, sampled) VALUES (?, 7)`, id).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, page := br.get("/incidents/" + id); !strings.Contains(page, "7 events (counted, not kept in full)") {
		t.Fatalf("incident page: %s", page)
	}
}
