package web_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/getsentry/sentry-go"
	"github.com/google/uuid"

	"anvil/domain/monitor"
)

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func monitorCheckIn(slug, status string, seconds float64) monitor.CheckInInput {
	return monitor.CheckInInput{Slug: slug, Status: status, Duration: &seconds, Source: "sentry"}
}

// monitorFix is a project with a Sentry connection, and the API's view of
// its monitors.
type monitorFix struct{ *sentryFix }

func (f *monitorFix) monitor(t *testing.T, slug string) map[string]any {
	t.Helper()
	st, m := f.api(t, f.owner.Token, "GET", "/api/private/projects/"+f.projectID+"/monitors/"+slug, nil)
	if st != http.StatusOK {
		t.Fatalf("monitor %s: %d %v", slug, st, m)
	}
	return m
}

func (f *monitorFix) runs(t *testing.T, slug string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range f.monitor(t, slug)["runs"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

// monitorIncident is the status and title of the monitor's incident.
func (f *monitorFix) monitorIncident(t *testing.T, slug string) (status, title string) {
	t.Helper()
	var rows []struct {
		Status string `bun:"status"`
		Title  string `bun:"title"`
	}
	if err := f.db.Bun.NewRaw(`SELECT i.status, i.title FROM incidents i JOIN monitors m ON i.fingerprint = 'monitor:' || m.id::text WHERE m.slug = ?`,
		slug).Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) > 1 {
		t.Fatalf("%d incidents of %s", len(rows), slug)
	}
	if len(rows) == 0 {
		return "", ""
	}
	return rows[0].Status, rows[0].Title
}

// The real sentry-go, unmodified: CaptureCheckIn with a MonitorConfig
// creates the monitor; an in_progress closed by its ok records the
// duration; an error opens an incident; two oks (recovery threshold 2)
// close it.
func TestMonitorSentryGoCheckIns(t *testing.T) {
	t.Parallel()
	f := &monitorFix{newSentryFix(t, setup(t))}
	hub := f.hub(t, sentry.ClientOptions{Environment: "production", Release: "shop@1.0.0"})
	cfg := &sentry.MonitorConfig{Schedule: sentry.IntervalSchedule(1, sentry.MonitorScheduleUnitHour), CheckInMargin: 5, MaxRuntime: 30,
		Timezone: "Europe/Berlin", FailureIssueThreshold: 1, RecoveryThreshold: 2}
	send := func(ci *sentry.CheckIn, c *sentry.MonitorConfig) *sentry.EventID {
		t.Helper()
		id := hub.CaptureCheckIn(ci, c)
		if id == nil {
			t.Fatal("CaptureCheckIn dropped the check-in")
		}
		if !hub.Flush(10 * time.Second) {
			t.Fatal("Flush timed out")
		}
		return id
	}
	id := send(&sentry.CheckIn{MonitorSlug: "nightly-backup", Status: sentry.CheckInStatusInProgress}, cfg)
	send(&sentry.CheckIn{ID: *id, MonitorSlug: "nightly-backup", Status: sentry.CheckInStatusOK, Duration: 2 * time.Second}, cfg)
	m := f.monitor(t, "nightly-backup")
	sch := m["schedule"].(map[string]any)
	if sch["type"] != "interval" || sch["value"] != float64(1) || sch["unit"] != "hour" || m["timezone"] != "Europe/Berlin" ||
		m["checkin_margin"] != float64(5) || m["max_runtime"] != float64(30) || m["recovery_threshold"] != float64(2) || m["environment"] != "production" {
		t.Fatalf("monitor %v", m)
	}
	runs := f.runs(t, "nightly-backup")
	if len(runs) != 1 || runs[0]["status"] != "ok" || runs[0]["duration_ms"] != float64(2000) || runs[0]["release"] != "shop@1.0.0" || runs[0]["check_in_id"] != dashed(string(*id)) {
		t.Fatalf("runs %v", runs)
	}
	send(&sentry.CheckIn{MonitorSlug: "nightly-backup", Status: sentry.CheckInStatusError, Duration: time.Second}, cfg)
	if st, title := f.monitorIncident(t, "nightly-backup"); st != "TRIAGED" || title != "nightly-backup failed" {
		t.Fatalf("after the error: %q %q", st, title)
	}
	send(&sentry.CheckIn{MonitorSlug: "nightly-backup", Status: sentry.CheckInStatusOK, Duration: time.Second}, nil)
	if st, _ := f.monitorIncident(t, "nightly-backup"); st != "TRIAGED" {
		t.Fatalf("closed after one ok: %q", st)
	}
	send(&sentry.CheckIn{MonitorSlug: "nightly-backup", Status: sentry.CheckInStatusOK, Duration: time.Second}, nil)
	if st, _ := f.monitorIncident(t, "nightly-backup"); st != "CLOSED" {
		t.Fatalf("not closed after two oks: %q", st)
	}
	if runs := f.runs(t, "nightly-backup"); len(runs) != 4 {
		t.Fatalf("%d runs", len(runs))
	}
	// Check-ins count apart from events in the day's usage.
	if err := f.services.Monitors.FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	var events, checkins int
	if err := f.db.Bun.NewRaw(`SELECT events, checkins FROM feed_daily_usage WHERE project_id = ?`, f.projectID).Scan(context.Background(), &events, &checkins); err != nil || checkins != 5 {
		t.Fatalf("daily usage: %d events, %d check-ins (%v)", events, checkins, err)
	}
}

// The Sentry door limits check-ins as Sentry does: the seventh of a
// monitor and environment within a minute is 429 with the monitor
// category in X-Sentry-Rate-Limits.
func TestMonitorCheckInRateLimit(t *testing.T) {
	t.Parallel()
	f := &monitorFix{newSentryFix(t, setup(t))}
	var body bytes.Buffer
	body.WriteString(`{}` + "\n")
	for range 7 {
		item := `{"monitor_slug":"tick","status":"ok","monitor_config":{"schedule":{"type":"crontab","value":"* * * * *"}}}`
		fmt.Fprintf(&body, "{\"type\":\"check_in\",\"length\":%d}\n%s\n", len(item), item)
	}
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/api/%d/envelope/?sentry_key=%s", f.srv.URL, f.number, f.key), &body)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(res.Header.Get("X-Sentry-Rate-Limits"), ":monitor:") {
		t.Fatalf("%d %q", res.StatusCode, res.Header.Get("X-Sentry-Rate-Limits"))
	}
	if runs := f.runs(t, "tick"); len(runs) != 6 {
		t.Fatalf("%d runs stored", len(runs))
	}
}

// The private API: 201 with the ping URL; a bad schedule or timezone is
// 422 naming the field, and nothing is stored.
func TestMonitorAPI(t *testing.T) {
	t.Parallel()
	f := &monitorFix{newSentryFix(t, setup(t))}
	path := "/api/private/projects/" + f.projectID + "/monitors"
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"slug": "backup", "schedule": map[string]any{"type": "crontab", "value": "0 2 * *"}}, "schedule.value"},
		{map[string]any{"slug": "backup", "schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "timezone": "Berlin/Mitte"}, "timezone"},
		{map[string]any{"slug": "backup", "schedule": map[string]any{"type": "interval", "value": 2, "unit": "decade"}}, "schedule.unit"},
	} {
		st, out := f.api(t, f.owner.Token, "POST", path, tc.body)
		if st != http.StatusUnprocessableEntity || out["error"] != "invalid_schedule" && out["error"] != "invalid_timezone" || !strings.Contains(out["message"].(string), tc.field+" ") {
			t.Errorf("%s: %d %v", tc.field, st, out)
		}
	}
	st, m := f.api(t, f.owner.Token, "POST", path, map[string]any{"slug": "backup", "schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"},
		"timezone": "Europe/Berlin", "checkin_margin": 10, "max_runtime": 30, "failure_threshold": 2, "recovery_threshold": 2, "environment": "production"})
	if st != http.StatusCreated || !strings.HasPrefix(m["ping_url"].(string), "http://anvil.test/api/monitors/anv_png_") || m["failure_issue_threshold"] != float64(2) {
		t.Fatalf("create: %d %v", st, m)
	}
	st, l := f.api(t, f.owner.Token, "GET", path, nil)
	if st != http.StatusOK || len(l["monitors"].([]any)) != 1 || l["monitors"].([]any)[0].(map[string]any)["ping_url"] != nil {
		t.Fatalf("list (the ping URL is shown once): %d %v", st, l)
	}
	paused := true
	if st, m := f.api(t, f.owner.Token, "PATCH", path+"/backup", map[string]any{"paused": paused}); st != http.StatusOK || m["paused"] != true {
		t.Fatalf("pause: %d %v", st, m)
	}
	if st, _ := f.api(t, f.owner.Token, "DELETE", path+"/backup", nil); st != http.StatusNoContent {
		t.Fatalf("delete: %d", st)
	}
	if st, _ := f.api(t, f.owner.Token, "GET", path+"/backup", nil); st != http.StatusNotFound {
		t.Fatalf("after delete: %d", st)
	}
}

// curl, the real one, against the ping URL: ok, /start then /fail, /3, a
// POSTed body kept and scrubbed, HEAD, and a wrong key 404 — six
// check-ins, the most a monitor may send in a minute.
func TestMonitorPingWithCurl(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	f := &monitorFix{newSentryFix(t, setup(t))}
	st, m := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/monitors", map[string]any{"slug": "backup",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "failure_threshold": 1})
	if st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, m)
	}
	u, _ := url.Parse(m["ping_url"].(string))
	srv, _ := url.Parse(f.srv.URL)
	u.Host = srv.Host
	ping := u.String()
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(curl, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	if out := run("-fsS", ping); out != "OK\n" {
		t.Fatalf("ok: %q", out)
	}
	run("-fsS", ping+"/start")
	run("-fsS", ping+"/fail")
	if st, title := f.monitorIncident(t, "backup"); st != "TRIAGED" || title != "backup failed" {
		t.Fatalf("after /fail: %q %q", st, title)
	}
	run("-fsS", "-X", "POST", ping+"/3")
	run("-fsS", "-I", ping+"/0")
	cmd := exec.Command(curl, "-fsS", "--data-binary", "@-", ping+"/0")
	cmd.Stdin = strings.NewReader("pg_dump done: 3 tables\nDATABASE_URL=postgres://app:s3cretpass@db/prod\ntoken=ghp_0123456789abcdefghijklmnopqrstuvwxyz\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("curl with a body: %v %s", err, out)
	}
	code, err := exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", strings.Replace(ping, "anv_png_", "anv_png_x", 1)[:len(ping)]).Output()
	if err != nil || string(code) != "404" {
		t.Fatalf("a wrong key: %s %v", code, err)
	}
	code, _ = exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", ping+"/restart").Output()
	if string(code) != "404" {
		t.Fatalf("an unknown kind: %s", code)
	}
	runs := f.runs(t, "backup")
	var statuses []string
	for i := len(runs) - 1; i >= 0; i-- {
		statuses = append(statuses, runs[i]["status"].(string))
	}
	if got := strings.Join(statuses, ","); got != "ok,error,error,ok,ok" {
		t.Fatalf("runs %s", got)
	}
	if runs[1]["exit_code"] != float64(0) || runs[2]["exit_code"] != float64(3) || runs[3]["duration_ms"] == nil || runs[3]["source"] != "ping" {
		t.Fatalf("exit codes and the /start–/fail pair: %v / %v / %v", runs[1], runs[2], runs[3])
	}
	out := runs[0]["output"].(string)
	if !strings.Contains(out, "pg_dump done: 3 tables") || strings.Contains(out, "s3cretpass") || strings.Contains(out, "ghp_0123456789abcdefghijklmnopqrstuvwxyz") {
		t.Fatalf("output not kept or not scrubbed: %q", out)
	}
	if st, title := f.monitorIncident(t, "backup"); st != "CLOSED" || !strings.Contains(title, "backup failed") {
		t.Fatalf("after the oks: %q %q", st, title)
	}
}

// The cockpit: the Monitors page lists each monitor with its strip of runs,
// last duration and next expected run (UTC for the viewer's script, and the
// monitor's zone); creating one shows its ping URL once; the monitor's page
// has the server-rendered SVG chart and the runs; both have live fragments;
// pausing stops expecting runs.
func TestMonitorPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := &monitorFix{newSentryFix(t, b)}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	page := "/projects/shop/monitors"
	csrf := br.csrf(page)
	res, body := br.post(page, url.Values{"_csrf": {csrf}, "slug": {"backup"}, "schedule_type": {"crontab"}, "schedule_value": {"0 2 * * *"},
		"timezone": {"Europe/Berlin"}, "max_runtime": {"30"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != page {
		t.Fatalf("create: %d %s", res.StatusCode, body)
	}
	// The page the redirect leads to shows the ping URL once.
	if res, body = br.get(page); res.StatusCode != http.StatusOK || !strings.Contains(body, `data-testid="monitor-ping-url"`) || !strings.Contains(body, "/api/monitors/anv_png_") {
		t.Fatalf("after create: %d %s", res.StatusCode, body)
	}
	res, body = br.post(page, url.Values{"_csrf": {csrf}, "slug": {"bad"}, "schedule_type": {"crontab"}, "schedule_value": {"0 2 * *"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="monitor-error"`) || !strings.Contains(body, "schedule.value") {
		t.Fatalf("a bad schedule: %d", res.StatusCode)
	}
	for i, st := range []string{"ok", "error"} {
		if _, err := f.services.Monitors.CheckIn(context.Background(), uuidOf(t, f.projectID), monitorCheckIn("backup", st, float64(3-i))); err != nil {
			t.Fatal(err)
		}
	}
	_, body = br.get(page)
	for _, want := range []string{`data-testid="monitor-row" data-slug="backup" data-status="error"`, `data-testid="monitor-strip" data-ticks="2"`,
		`data-status="ok"`, `data-testid="monitor-duration">2.0 s<`, "(Europe/Berlin)", `<time datetime="`, `sse-connect="/events?project=`, `hx-trigger="sse:monitor"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the Monitors page lacks %s", want)
		}
	}
	if strings.Contains(body, "anv_png_") && strings.Contains(body, "/api/monitors/anv_png_") {
		t.Error("the Monitors page shows the ping URL again")
	}
	_, frag := br.get(page + "?fragment=1")
	if !strings.Contains(frag, `data-slug="backup"`) || strings.Contains(frag, "<html") {
		t.Errorf("fragment %s", frag)
	}
	_, body = br.get(page + "/backup")
	for _, want := range []string{`<svg viewBox="0 0 600 160"`, `data-testid="monitor-chart"`, `<rect x=`, `fill="#ef4444" data-status="error"`,
		`data-testid="monitor-run" data-status="error"`, `data-testid="monitor-pause"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the monitor page lacks %s", want)
		}
	}
	res, _ = br.post(page+"/backup/pause", url.Values{"_csrf": {csrf}, "paused": {"true"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("pause: %d", res.StatusCode)
	}
	_, body = br.get(page)
	if !strings.Contains(body, `data-testid="monitor-next">paused<`) {
		t.Error("a paused monitor still expects a run")
	}
}

// The monitor page offers each role exactly the forms its handlers take:
// a viewer none, a member pause and resume, an admin the settings form
// too. Every form a role sees answers it with a redirect, every form it
// does not see with 403.
func TestMonitorFormsMatchRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newSentryFix(t, b)
	if st, m := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/monitors", map[string]any{"slug": "backup",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}}); st != http.StatusCreated {
		t.Fatalf("create: %d %v", st, m)
	}
	page := "/projects/shop/monitors/backup"
	forms := []struct {
		testid, path string
		form         url.Values
	}{
		{`data-testid="monitor-pause"`, page + "/pause", url.Values{"paused": {"true"}}},
		{`data-testid="monitor-edit"`, page + "/edit", url.Values{"schedule_type": {"crontab"}, "schedule_value": {"0 3 * * *"},
			"timezone": {"UTC"}, "environment": {"production"}, "checkin_margin": {"7"}, "max_runtime": {"30"},
			"failure_threshold": {"1"}, "recovery_threshold": {"1"}}},
	}
	for _, role := range []struct {
		name  string
		shown []bool
	}{{"viewer", []bool{false, false}}, {"member", []bool{true, false}}, {"admin", []bool{true, true}}} {
		_, br := b.person(t, role.name)
		res, body := br.get(page)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: page %d", role.name, res.StatusCode)
		}
		csrf := csrfRE.FindStringSubmatch(body)[1]
		for i, fm := range forms {
			if shown := strings.Contains(body, fm.testid); shown != role.shown[i] {
				t.Fatalf("%s: %s shown %v", role.name, fm.testid, shown)
			}
			v := url.Values{"_csrf": {csrf}}
			for k, vs := range fm.form {
				v[k] = vs
			}
			res, out := br.post(fm.path, v)
			want := http.StatusForbidden
			if role.shown[i] {
				want = http.StatusSeeOther
			}
			if res.StatusCode != want {
				t.Fatalf("%s: %s answered %d, want %d: %.300s", role.name, fm.path, res.StatusCode, want, out)
			}
		}
		// Resumed for the next role's page.
		if _, err := f.services.Monitors.Update(context.Background(), ownerPrincipal(t, b), uuidOf(t, f.projectID), "backup",
			monitor.Input{Paused: new(bool)}); err != nil {
			t.Fatal(err)
		}
	}
}
