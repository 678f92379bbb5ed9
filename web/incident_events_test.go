package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getsentry/sentry-go"
)

// TestEventViewOfSentryGo: an event sent by the real sentry-go, with tags,
// breadcrumbs, a request, a user and a response status, opens whole — its
// API answer and its page show the tags, the breadcrumbs with their times,
// the request and the user (id and the pseudonymous address hash), the
// level, release, environment, service, SDK and the stack with file:line
// (no stray space); the incident page links it and shows the spread.
func TestEventViewOfSentryGo(t *testing.T) {
	t.Parallel()
	s := newSentryFix(t, setup(t))
	hub := s.hub(t, sentry.ClientOptions{Environment: "production", Release: "shop@2.0.1", ServerName: "shop-api"})
	at := time.Date(2026, 12, 3, 9, 30, 15, 0, time.UTC)
	hub.ConfigureScope(func(sc *sentry.Scope) {
		sc.SetTag("tier", "gold")
		sc.SetTag("region", "eu-west")
		sc.SetUser(sentry.User{ID: "u-4711", IPAddress: "203.0.113.7"})
		sc.AddBreadcrumb(&sentry.Breadcrumb{Category: "cart", Message: "add sku=A1", Timestamp: at}, 100)
		sc.AddBreadcrumb(&sentry.Breadcrumb{Category: "http", Message: "POST /api/checkout", Timestamp: at.Add(2 * time.Second)}, 100)
		sc.SetRequest(httptest.NewRequest("POST", "https://shop.example/api/checkout?step=pay", nil))
		sc.SetContext("response", sentry.Context{"status_code": 500})
	})
	id := hub.CaptureException(fmt.Errorf("charge: %w", cartError{}))
	if id == nil || !hub.Flush(10*time.Second) {
		t.Fatal("sentry-go did not deliver the event")
	}
	eventID := dashed(string(*id))
	var incidentID string
	if err := s.db.Bun.NewRaw(`SELECT incident_id::text FROM feed_events WHERE event_id_key = ?`, eventID).Scan(context.Background(), &incidentID); err != nil {
		t.Fatalf("event not stored: %v", err)
	}

	status, out := s.api(t, s.owner.Token, "GET", "/api/private/incidents/"+incidentID+"/events/"+eventID, nil)
	if status != http.StatusOK {
		t.Fatalf("event API: %d %v", status, out)
	}
	ev := out["event"].(map[string]any)
	tags := ev["tags"].(map[string]any)
	user := ev["user"].(map[string]any)
	req := ev["request"].(map[string]any)
	if tags["tier"] != "gold" || tags["region"] != "eu-west" || user["id"] != "u-4711" || user["ip_hash"] == nil || user["ip_hash"] == "" ||
		req["method"] != "POST" || !strings.HasPrefix(req["url"].(string), "https://shop.example/api/checkout") || req["status_code"] != float64(500) ||
		ev["level"] != "error" || ev["release"] != "shop@2.0.1" || ev["environment"] != "production" {
		t.Fatalf("event: %v", ev)
	}
	crumbs := out["breadcrumbs"].([]any)
	if len(crumbs) != 2 || crumbs[0].(map[string]any)["text"] != "cart: add sku=A1" || crumbs[0].(map[string]any)["at"] != "2026-12-03T09:30:15Z" ||
		crumbs[1].(map[string]any)["at"] != "2026-12-03T09:30:17Z" {
		t.Fatalf("breadcrumbs: %v", crumbs)
	}
	if sdk := ev["sdk"].(map[string]any); sdk["name"] == "" || sdk["runtime"] == nil {
		t.Fatalf("sdk: %v", sdk)
	}

	br := s.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/incidents/" + incidentID + "/events/" + eventID)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("event page: %d", res.StatusCode)
	}
	for _, want := range []string{
		`data-key="tier"`, ">gold<", `data-key="region"`,
		`data-testid="breadcrumb"`, "cart: add sku=A1", `datetime="2026-12-03T09:30:15Z"`, `datetime="2026-12-03T09:30:17Z"`,
		`data-testid="event-request-method">POST<`, "https://shop.example/api/checkout", `data-testid="event-request-status">500<`,
		`data-testid="event-user-id">u-4711<`, `data-testid="event-release">shop@2.0.1<`, `data-testid="event-environment">production<`,
		`data-testid="event-service">shop-api<`, `data-level="error"`, `data-testid="frame-location"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the event page lacks %s", want)
		}
	}
	hash := user["ip_hash"].(string)
	if !strings.Contains(body, hash) || strings.Contains(body, "203.0.113.7") {
		t.Errorf("the event page must show the address hash %s and never the address", hash)
	}
	if strings.Contains(body, ".go :") {
		t.Error("a frame reads file.go :line, with a stray space")
	}
	// The rendered text reads incident_events_test.go:123, in one piece.
	if !regexp.MustCompile(`data-testid="frame-location">[^<\s]+\.go:[0-9]+<`).MatchString(body) {
		t.Error("no frame reads file.go:line on the event page")
	}
	res, body = br.get("/incidents/" + incidentID)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `href="/incidents/`+incidentID+`/events/`+eventID+`"`) ||
		!strings.Contains(body, `data-testid="users-affected">1<`) || !strings.Contains(body, `data-testid="releases-affected">1<`) ||
		!strings.Contains(body, `data-testid="first-release">shop@2.0.1<`) || !strings.Contains(body, `data-value="gold" data-count="1"`) {
		t.Fatalf("incident page: %d %s", res.StatusCode, body)
	}
	if res, _ := br.get("/incidents/" + incidentID + "/events/" + strings.Repeat("0", 32)); res.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown event: %d", res.StatusCode)
	}
}

// TestIncidentEventsPageThroughAll: an incident's events page through all
// of them (API and page), the spread counts releases and users, and an
// event of another organisation is a 404.
func TestIncidentEventsPageThroughAll(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	var batch []any
	for i := 0; i < 60; i++ {
		batch = append(batch, ev(newID(), func(m map[string]any) {
			m["release"] = fmt.Sprintf("2026.9.%d", i%3)
			m["user"] = map[string]any{"id": fmt.Sprintf("u-%d", i%7)}
			m["tags"] = map[string]any{"tier": []string{"gold", "free"}[i%2]}
		}))
	}
	if r := f.send(t, "/api/feed/events/batch", f.token, batch[:50]); r.Status != 202 || len(r.Accept) != 50 {
		t.Fatalf("batch: %d %s", r.Status, r.Raw)
	}
	if r := f.send(t, "/api/feed/events/batch", f.token, batch[50:]); r.Status != 202 || len(r.Accept) != 10 {
		t.Fatalf("batch: %d %s", r.Status, r.Raw)
	}
	inc := f.incidents(t)[0].ID.String()
	seen := map[string]bool{}
	before := ""
	for pages := 0; ; pages++ {
		path := "/api/private/incidents/" + inc + "/events"
		if before != "" {
			path += "?before=" + before
		}
		status, out := f.api(t, f.owner.Token, "GET", path, nil)
		if status != 200 {
			t.Fatalf("events: %d %v", status, out)
		}
		for _, e := range out["events"].([]any) {
			seen[e.(map[string]any)["event_id"].(string)] = true
		}
		if out["next_before"] == nil {
			if pages != 1 {
				t.Fatalf("60 events in %d pages, want 2", pages+1)
			}
			break
		}
		before = out["next_before"].(string)
	}
	if len(seen) != 60 {
		t.Fatalf("paged through %d distinct events, want 60", len(seen))
	}
	if status, out := f.api(t, f.owner.Token, "GET", "/api/private/incidents/"+inc+"/events?before=nonsense", nil); status != 422 || out["error"] != "invalid_cursor" {
		t.Fatalf("bad cursor: %d %v", status, out)
	}
	status, sp := f.api(t, f.owner.Token, "GET", "/api/private/incidents/"+inc+"/spread", nil)
	if status != 200 || sp["releases_affected"] != float64(3) || sp["users_affected"] != float64(7) || sp["level"] != "error" {
		t.Fatalf("spread: %d %v", status, sp)
	}
	top := sp["top_tags"].([]any)[0].(map[string]any)
	if top["key"] != "tier" || top["total"] != float64(60) || len(top["values"].([]any)) != 2 {
		t.Fatalf("top tags: %v", sp["top_tags"])
	}

	br := f.browser(t)
	br.login("owner@acme.test", testPassword)
	_, body := br.get("/incidents/" + inc)
	if n := strings.Count(body, `data-testid="event-row"`); n != 50 || !strings.Contains(body, `data-testid="events-older"`) {
		t.Fatalf("first page of events: %d rows", n)
	}
	older := eventsOlderRE.FindStringSubmatch(body)
	if older == nil {
		t.Fatal("no link to older events")
	}
	_, body = br.get("/incidents/" + inc + "?events_before=" + older[1])
	if n := strings.Count(body, `data-testid="event-row"`); n != 10 || strings.Contains(body, `data-testid="events-older"`) {
		t.Fatalf("last page of events: %d rows", n)
	}

	other, _ := f.accounts.Bootstrap(context.Background(), "globex", "x@globex.test", testPassword)
	for id := range seen {
		if status, _ := f.api(t, other.Token, "GET", "/api/private/incidents/"+inc+"/events/"+id, nil); status != 404 {
			t.Fatalf("another org's event: %d", status)
		}
		break
	}
}

var eventsOlderRE = regexp.MustCompile(`href="/incidents/[^"?]+\?events_before=([^"]+)"`)

// TestQuietLevelsNeverRepairOnTheirOwn: under auto, an error is queued for
// repair at once, a warning (or info, debug) waits for a person — who may
// still approve it.
func TestQuietLevelsNeverRepairOnTheirOwn(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t), "live=auto")
	loud, quiet := newID(), newID()
	events := []any{
		ev(loud, func(m map[string]any) { m["environment"] = "live" }),
		ev(quiet, func(m map[string]any) {
			m["environment"], m["level"], m["title"] = "live", "warning", "disk almost full"
			m["exception"] = map[string]any{"type": "Message", "message": "disk almost full"}
		}),
	}
	if r := f.send(t, "/api/feed/events/batch", f.token, events); r.Status != 202 || len(r.Accept) != 2 {
		t.Fatalf("batch: %d %s", r.Status, r.Raw)
	}
	status := func(eventID string) (string, string) {
		var id, st string
		if err := f.db.Bun.NewRaw(`SELECT i.id::text, i.status FROM incidents i JOIN feed_events e ON e.incident_id = i.id WHERE e.event_id_key = ?`, eventID).
			Scan(context.Background(), &id, &st); err != nil {
			t.Fatal(err)
		}
		return id, st
	}
	if _, st := status(loud); st != "QUEUED" {
		t.Fatalf("an error under auto: %s, want QUEUED", st)
	}
	id, st := status(quiet)
	if st != "WAITING_APPROVAL" {
		t.Fatalf("a warning under auto: %s, want WAITING_APPROVAL", st)
	}
	if code, out := f.api(t, f.owner.Token, "POST", "/api/private/incidents/"+id+"/decisions", map[string]any{"decision": "approve"}); code != 200 || out["status"] != "QUEUED" {
		t.Fatalf("approve the warning: %d %v", code, out)
	}
}

// TestInboxSearch: free text over titles and the latest event's message,
// filters by level and release (in the URL), the counts follow the
// search, and a bad level is a 422 naming it.
func TestInboxSearch(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	events := []any{
		ev(newID(), func(m map[string]any) { m["title"] = "Cart total failed" }),
		ev(newID(), func(m map[string]any) {
			m["title"], m["level"], m["release"] = "Disk almost full", "warning", "2026.12.1"
			m["exception"] = map[string]any{"type": "Message", "message": "volume /var at 97% (100_% literal)"}
		}),
		ev(newID(), func(m map[string]any) {
			m["title"] = "Timeout talking to payments"
			m["exception"] = map[string]any{"type": "TimeoutError", "message": "upstream payments-api did not answer"}
		}),
	}
	if r := f.send(t, "/api/feed/events/batch", f.token, events); r.Status != 202 || len(r.Accept) != 3 {
		t.Fatalf("batch: %d %s", r.Status, r.Raw)
	}
	titles := func(q string) []string {
		status, out := f.api(t, f.owner.Token, "GET", "/api/private/incidents?"+q, nil)
		if status != 200 {
			t.Fatalf("%s: %d %v", q, status, out)
		}
		var ts []string
		for _, i := range out["incidents"].([]any) {
			ts = append(ts, i.(map[string]any)["title"].(string))
		}
		return ts
	}
	for q, want := range map[string]string{
		"q=CART":                        "[Cart total failed]",
		"q=payments-api":                "[Timeout talking to payments]",
		"q=100_%25":                     "[Disk almost full]",
		"q=%25":                         "[Disk almost full]",
		"level=warning":                 "[Disk almost full]",
		"release=2026.12.1":             "[Disk almost full]",
		"q=payments&level=warning":      "[]",
		"q=nothing-matches-this-at-all": "[]",
	} {
		if got := fmt.Sprint(titles(q)); got != want {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
	if status, out := f.api(t, f.owner.Token, "GET", "/api/private/incidents?level=loud", nil); status != 422 || out["error"] != "invalid_level" {
		t.Fatalf("bad level: %d %v", status, out)
	}
	br := f.browser(t)
	br.login("owner@acme.test", testPassword)
	_, body := br.get("/inbox?q=payments&status=TRIAGED")
	if strings.Count(body, `data-testid="incident-row"`) != 1 || !strings.Contains(body, `value="payments"`) ||
		!strings.Contains(body, `data-testid="count-all">All · 1<`) || !strings.Contains(body, "q=payments") {
		t.Fatalf("inbox page with a search: %s", body)
	}
}

// "Users affected" counts the events that name a user only: the address
// hash every event carries is the sender's, not a user.
func TestUsersAffectedCountsNamedUsersOnly(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	var batch []any
	for i := 0; i < 6; i++ {
		batch = append(batch, ev(newID(), func(m map[string]any) {
			if i < 2 {
				m["user"] = map[string]any{"id": fmt.Sprintf("u-%d", i)}
			}
		}))
	}
	if r := f.send(t, "/api/feed/events/batch", f.token, batch); r.Status != 202 || len(r.Accept) != 6 {
		t.Fatalf("batch: %d %s", r.Status, r.Raw)
	}
	inc := f.incidents(t)[0].ID.String()
	if status, sp := f.api(t, f.owner.Token, "GET", "/api/private/incidents/"+inc+"/spread", nil); status != 200 || sp["users_affected"] != float64(2) {
		t.Fatalf("spread: %d %v, want 2 users affected", status, sp)
	}
}
