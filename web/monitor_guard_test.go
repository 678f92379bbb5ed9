package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"anvil/web"
)

// checkInItem is one check_in envelope item with a monitor_config.
func checkInItem(slug, schedule string, margin int) string {
	p := fmt.Sprintf(`{"check_in_id":"%s","monitor_slug":%q,"status":"ok","monitor_config":{"schedule":{"type":"crontab","value":%q},"checkin_margin":%d}}`,
		hexID(), slug, schedule, margin)
	return fmt.Sprintf("{\"type\":\"check_in\",\"length\":%d}\n%s", len(p), p)
}

// A browser key is public: its check_in items are refused, each, with
// check_in_not_allowed in the outcomes, the monitor an admin made through
// the API keeps its schedule and margin, and the envelope's event is
// still stored.
func TestBrowserKeyCheckInRefused(t *testing.T) {
	t.Parallel()
	f := newBrowserFix(t, setup(t))
	mf := &monitorFix{f.sentryFix}
	path := "/api/private/projects/" + f.projectID + "/monitors"
	if st, m := f.api(t, f.owner.Token, "POST", path, map[string]any{"slug": "backup",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "checkin_margin": 5}); st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, m)
	}
	evID := hexID()
	r := sentrySend(t, f.srv.URL, f.sentryQuery(f.pubKey),
		envelope(`{}`, eventItem(sentryEvent(evID)), checkInItem("backup", "0 0 1 1 *", 40320)), "Origin", shopOrigin)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), evID) {
		t.Fatalf("envelope with an event: %d %s", r.Status, r.Raw)
	}
	// Check-ins alone: the first refusal is the answer.
	r = sentrySend(t, f.srv.URL, f.sentryQuery(f.pubKey), envelope(`{}`, checkInItem("backup", "0 0 1 1 *", 40320)), "Origin", shopOrigin)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), "check_in_not_allowed") {
		t.Fatalf("check-in alone: %d %s", r.Status, r.Raw)
	}
	m := mf.monitor(t, "backup")
	if s := m["schedule"].(map[string]any); s["value"] != "0 2 * * *" || m["checkin_margin"] != float64(5) {
		t.Fatalf("a browser key changed the monitor: %v", m)
	}
	if runs, _ := m["runs"].([]any); len(runs) != 0 {
		t.Fatalf("a browser key's check-in was recorded: %v", runs)
	}
	// A browser key never creates a monitor either.
	sentrySend(t, f.srv.URL, f.sentryQuery(f.pubKey), envelope(`{}`, checkInItem("fresh", "* * * * *", 1)), "Origin", shopOrigin)
	if st, _ := f.api(t, f.owner.Token, "GET", path+"/fresh", nil); st != http.StatusNotFound {
		t.Fatalf("a browser key made a monitor: %d", st)
	}
	var stored int
	if err := f.db.Bun.NewRaw(`SELECT count(*) FROM feed_events WHERE project_id = ?`, f.projectID).Scan(context.Background(), &stored); err != nil || stored != 1 {
		t.Fatalf("%d events stored (%v); want the envelope's one", stored, err)
	}
	var n int
	waitFor(t, "the check_in_not_allowed outcome", func() bool {
		return f.db.Bun.NewRaw(`SELECT sum(count) FROM feed_outcomes WHERE connection_id = ? AND reason_code = 'check_in_not_allowed'`, f.pubID).
			Scan(context.Background(), &n) == nil && n >= 3
	})
}

// A monitor made in the API keeps its settings against a server key's
// check-in too (the check-in itself is recorded); one a check-in made is
// changed by the next check-in's config, and the change is audited with
// the connection's name and the old and new schedule.
func TestCheckInConfigOnlyChangesWhatCheckInsMade(t *testing.T) {
	t.Parallel()
	f := &monitorFix{newSentryFix(t, setup(t))}
	path := "/api/private/projects/" + f.projectID + "/monitors"
	if st, m := f.api(t, f.owner.Token, "POST", path, map[string]any{"slug": "backup",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "checkin_margin": 5}); st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, m)
	}
	send := func(items ...string) feedResp {
		return sentrySend(t, f.srv.URL, f.envPath(), envelope(`{}`, items...), f.auth()...)
	}
	if r := send(checkInItem("backup", "0 0 1 1 *", 40320)); r.Status != http.StatusOK {
		t.Fatalf("check-in: %d %s", r.Status, r.Raw)
	}
	m := f.monitor(t, "backup")
	if s := m["schedule"].(map[string]any); s["value"] != "0 2 * * *" || m["checkin_margin"] != float64(5) || m["origin"] != "api" {
		t.Fatalf("a check-in changed an API monitor: %v", m)
	}
	if runs := f.runs(t, "backup"); len(runs) != 1 {
		t.Fatalf("%d runs; the check-in itself counts", len(runs))
	}
	// Made by a check-in: the next config changes it, audited.
	if r := send(checkInItem("nightly", "0 3 * * *", 5)); r.Status != http.StatusOK {
		t.Fatalf("create by check-in: %d %s", r.Status, r.Raw)
	}
	if r := send(checkInItem("nightly", "30 3 * * *", 10)); r.Status != http.StatusOK {
		t.Fatalf("change by check-in: %d %s", r.Status, r.Raw)
	}
	m = f.monitor(t, "nightly")
	if s := m["schedule"].(map[string]any); s["value"] != "30 3 * * *" || m["origin"] != "check_in" {
		t.Fatalf("a check-in's config did not change its own monitor: %v", m)
	}
	var actor, summary string
	if err := f.db.Bun.NewRaw(`SELECT actor_email, detail->>'summary' FROM audit_log WHERE kind = 'monitor.updated_by_check_in' AND target = 'nightly'`).
		Scan(context.Background(), &actor, &summary); err != nil {
		t.Fatalf("no audit line: %v", err)
	}
	if !strings.Contains(summary, "check-in from connection sentry-conn changed the schedule from crontab 0 3 * * * to crontab 30 3 * * *") ||
		!strings.Contains(summary, "check-in margin (minutes) from 5 to 10") || !strings.Contains(actor, "sentry-conn") {
		t.Fatalf("audit line: %q by %q", summary, actor)
	}
}

// 500 check-ins in one envelope: the first 100 are recorded, the rest
// refused each; one unreadable item and a 10 KB crontab line refuse only
// themselves; the envelope's event is stored.
func TestCheckInEnvelopeBounds(t *testing.T) {
	t.Parallel()
	f := &monitorFix{newSentryFix(t, setup(t))}
	items := []string{checkInItem("long", "0 2 * * "+strings.Repeat("*", 10<<10), 1), `{"type":"check_in","length":3}` + "\n" + `{x}`}
	for i := range 500 {
		items = append(items, checkInItem(fmt.Sprintf("job-%03d", i), "0 * * * *", 5))
	}
	evID := hexID()
	items = append(items, eventItem(sentryEvent(evID)))
	r := sentrySend(t, f.srv.URL, f.envPath(), envelope(`{}`, items...), f.auth()...)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Raw), evID) {
		t.Fatalf("envelope: %d %s", r.Status, r.Raw)
	}
	var runs, monitors, events int
	ctx := context.Background()
	if err := f.db.Bun.NewRaw(`SELECT (SELECT count(*) FROM monitor_checkins WHERE project_id = ?), (SELECT count(*) FROM monitors WHERE project_id = ?),
		(SELECT count(*) FROM feed_events WHERE project_id = ?)`, f.projectID, f.projectID, f.projectID).Scan(ctx, &runs, &monitors, &events); err != nil {
		t.Fatal(err)
	}
	// The first 100 items hold the two bad ones: 98 check-ins recorded.
	if runs != 98 || monitors != 98 || events != 1 {
		t.Fatalf("%d runs, %d monitors, %d events; want 98, 98, 1", runs, monitors, events)
	}
	codes := map[string]int{}
	waitFor(t, "the refusals in the outcomes", func() bool {
		var rows []struct {
			Code    string `bun:"reason_code"`
			Refused int    `bun:"n"`
		}
		if err := f.db.Bun.NewRaw(`SELECT o.reason_code, sum(o.count) AS n FROM feed_outcomes o JOIN feed_connections c ON c.id = o.connection_id
			WHERE c.project_id = ? AND c.name = 'sentry-conn' GROUP BY o.reason_code`, f.projectID).Scan(ctx, &rows); err != nil {
			return false
		}
		for _, r := range rows {
			codes[r.Code] = r.Refused
		}
		return codes["too_many_check_ins"] == 402
	})
	if codes["invalid_schedule"] != 1 || codes["bad_request"] != 1 {
		t.Fatalf("refusals %v", codes)
	}
	// The long line was refused by its length, before any parser saw it.
	r = sentrySend(t, f.srv.URL, f.envPath(), envelope(`{}`, checkInItem("long", strings.Repeat("1", 10<<10)+" * * * *", 1)), f.auth()...)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), "above 256 bytes") {
		t.Fatalf("10 KB crontab: %d %s", r.Status, r.Raw)
	}
}

// One client of a public key cannot use up its connection's minute: the
// client's address is charged first, so after its own bound is reached
// its further requests cost the connection nothing, and another visitor
// still gets through. The address is the right-most hop our proxy
// (127.0.0.0/8 in the tests) appended, whatever the client wrote left of
// it; IPv6 clients count by their /64.
func TestBrowserAddrBoundBeforeConnection(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.FeedRatePerMin, opts.FeedBrowserRatePerMin = 7, 3
	f := newBrowserFix(t, setupWith(t, opts))
	send := func(xff string) int {
		return sentrySend(t, f.srv.URL, f.sentryQuery(f.pubKey), envelope(`{}`, eventItem(sentryEvent(hexID()))),
			"Origin", shopOrigin, "X-Forwarded-For", xff).Status
	}
	for i := range 10 {
		// A forged left-most hop, fresh each time, changes nothing.
		st := send(fmt.Sprintf("192.0.2.%d, 198.51.100.7", i))
		if want := map[bool]int{true: 200, false: 429}[i < 3]; st != want {
			t.Fatalf("request %d of one client: %d, want %d", i, st, want)
		}
	}
	for i := range 4 {
		// Four addresses of one IPv6 /64: one client.
		st := send(fmt.Sprintf("2001:db8:7:7::%x", i+1))
		if want := map[bool]int{true: 200, false: 429}[i < 3]; st != want {
			t.Fatalf("request %d of one /64: %d, want %d", i, st, want)
		}
	}
	// The connection has spent 3 + 3 of its 7, not the 14 requests sent:
	// another visitor gets through; after it the connection's own bound.
	if st := send("203.0.113.9"); st != http.StatusOK {
		t.Fatalf("another visitor: %d", st)
	}
	if st := send("203.0.113.10"); st != http.StatusTooManyRequests {
		t.Fatalf("the connection's own bound: %d", st)
	}
}

// The ping key is a path secret: after pings — good, with a kind, to a
// path no route has, with a wrong key — the server's output names the
// route, never anv_png_ and its secret.
func TestPingKeyNotLogged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var out lockedBuffer
	srv := httptest.NewServer(web.New(web.Deps{DB: b.db, Services: b.services, Keys: b.keys, Options: testOptions(),
		Log: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))}))
	t.Cleanup(srv.Close)
	f := &monitorFix{newSentryFix(t, b)}
	st, m := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/monitors",
		map[string]any{"slug": "backup", "schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}})
	if st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, m)
	}
	ping := strings.Replace(m["ping_url"].(string), "http://anvil.test", srv.URL, 1)
	key := ping[strings.Index(ping, "anv_png_"):strings.LastIndex(ping, "/")]
	for _, u := range []string{ping, ping + "/start", ping + "/fail", ping + "/0", ping + "/nope/extra", strings.Replace(ping, key, key[:20]+"x", 1)} {
		res, err := http.Post(u, "text/plain", strings.NewReader("done"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	logged := out.String()
	if !strings.Contains(logged, "/api/monitors/:pingKey/:slug") {
		t.Fatalf("the route is not logged:\n%s", logged)
	}
	if strings.Contains(logged, key[len("anv_png_"):len("anv_png_")+8]) || regexp.MustCompile(`anv_png_[0-9A-Za-z]`).MatchString(logged) {
		t.Fatalf("the ping key is in the server's output:\n%s", logged)
	}
}

// The monitor page edits a monitor's settings and keeps its ping URL; once
// edited there, a check-in's monitor_config no longer changes it. The page
// shows the ping URL's usage lines.
func TestMonitorEditFromCockpit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := &monitorFix{newSentryFix(t, b)}
	send := func(items ...string) feedResp {
		return sentrySend(t, f.srv.URL, f.envPath(), envelope(`{}`, items...), f.auth()...)
	}
	if r := send(checkInItem("nightly", "0 3 * * *", 5)); r.Status != http.StatusOK {
		t.Fatalf("create by check-in: %d %s", r.Status, r.Raw)
	}
	key := f.monitor(t, "nightly")["ping_key"]
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	page := "/projects/shop/monitors/nightly"
	res, body := br.get(page)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="monitor-edit"`) || !strings.Contains(body, `data-testid="monitor-usage"`) ||
		!strings.Contains(body, "curl -fsS") {
		t.Fatalf("page: %d", res.StatusCode)
	}
	csrf := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if csrf == nil {
		t.Fatal("no csrf field")
	}
	form := url.Values{"_csrf": {csrf[1]}, "schedule_type": {"crontab"}, "schedule_value": {"15 4 * * *"}, "timezone": {"UTC"},
		"checkin_margin": {"20"}, "max_runtime": {"30"}, "failure_threshold": {"1"}, "recovery_threshold": {"1"}}
	if res, _ := br.post(page+"/edit", form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("edit: %d", res.StatusCode)
	}
	form.Set("schedule_value", "0 2 * *")
	if res, body := br.post(page+"/edit", form); res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "monitor-edit-error") ||
		!strings.Contains(body, `value="0 2 * *"`) {
		t.Fatalf("bad edit: %d", res.StatusCode)
	}
	if r := send(checkInItem("nightly", "0 0 1 1 *", 40320)); r.Status != http.StatusOK {
		t.Fatalf("check-in: %d %s", r.Status, r.Raw)
	}
	m := f.monitor(t, "nightly")
	if s := m["schedule"].(map[string]any); s["value"] != "15 4 * * *" || m["checkin_margin"] != float64(20) || m["origin"] != "cockpit" || m["ping_key"] != key {
		t.Fatalf("after the cockpit's edit and a check-in: %v", m)
	}
}
