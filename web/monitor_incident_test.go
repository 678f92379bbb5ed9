package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A monitor's incident is the monitor's page on the incident page
// (docs/monitors.md, "Incidents"): a link to the monitor with its schedule
// in words, its last runs instead of an exception and its frames, and the
// history's reopen reason in the monitor's words.
func TestMonitorIncidentPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := &monitorFix{newSentryFix(t, b)}
	st, out := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/monitors", map[string]any{"slug": "backup",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "timezone": "Europe/Berlin",
		"failure_issue_threshold": 2, "recovery_threshold": 1})
	if st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("create: %d %v", st, out)
	}
	// Two errors open it, an ok closes it, two errors reopen it.
	for i, s := range []string{"error", "error", "ok", "error", "error"} {
		if _, err := f.services.Monitors.CheckIn(context.Background(), uuidOf(t, f.projectID), monitorCheckIn("backup", s, float64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := f.monitorIncident(t, "backup"); st != "TRIAGED" {
		t.Fatalf("not reopened: %q", st)
	}
	var id string
	if err := f.db.Bun.NewRaw(`SELECT i.id::text FROM incidents i JOIN monitors m ON i.fingerprint = 'monitor:' || m.id::text WHERE m.slug = 'backup'`).
		Scan(context.Background(), &id); err != nil {
		t.Fatal(err)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/incidents/" + id)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("incident page: %d", res.StatusCode)
	}
	link := `href="/projects/` + f.projectID + `/monitors/backup"`
	for _, want := range []string{`data-testid="incident-monitor"`, link, `data-testid="monitor-schedule">· daily at 02:00 (0 2 * * *, Europe/Berlin)<`,
		`data-testid="monitor-run" data-status="error"`, `data-testid="monitor-run" data-status="ok"`, "took 5.0 s", `<time datetime="`,
		"opened: backup failed — failed 2 times in a row", "reopened: backup failed — failed 2 times in a row"} {
		if !strings.Contains(body, want) {
			t.Errorf("the incident page lacks %s", want)
		}
	}
	if n := strings.Count(body, `data-testid="monitor-run"`); n != 5 {
		t.Errorf("%d runs listed, want 5", n)
	}
	for _, unwanted := range []string{`data-testid="exception"`, "regression: a new event", `data-testid="frames`, "check_in_id"} {
		if strings.Contains(body, unwanted) {
			t.Errorf("the incident page shows %s", unwanted)
		}
	}
	if res, _ := br.get("/projects/" + f.projectID + "/monitors/backup"); res.StatusCode != http.StatusOK {
		t.Errorf("the monitor link leads to %d", res.StatusCode)
	}
}

// A missed cron job is not a bug in the repository: under an auto (or
// approve) binding a monitor's incident stays triaged, queues no repair,
// offers no approve button, and an approve posted anyway is refused.
func TestMonitorIncidentIgnoresRepairPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := &monitorFix{newSentryFix(t, b, "production=auto", "*=auto")}
	st, out := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/monitors", map[string]any{"slug": "nightly",
		"schedule": map[string]any{"type": "crontab", "value": "0 2 * * *"}, "failure_issue_threshold": 1, "recovery_threshold": 1})
	if st != http.StatusCreated && st != http.StatusOK {
		t.Fatalf("create: %d %v", st, out)
	}
	if _, err := f.services.Monitors.CheckIn(context.Background(), uuidOf(t, f.projectID), monitorCheckIn("nightly", "error", 1)); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.monitorIncident(t, "nightly"); st != "TRIAGED" {
		t.Fatalf("a monitor's incident under auto is %q, want TRIAGED", st)
	}
	var id string
	var repairs int
	if err := f.db.Bun.NewRaw(`SELECT i.id::text, (SELECT count(*) FROM project_runs r WHERE r.incident_id = i.id)
		FROM incidents i JOIN monitors m ON i.fingerprint = 'monitor:' || m.id::text WHERE m.slug = 'nightly'`).Scan(context.Background(), &id, &repairs); err != nil {
		t.Fatal(err)
	}
	if repairs != 0 {
		t.Fatalf("%d repair runs for a monitor's incident", repairs)
	}
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, body := br.get("/incidents/" + id)
	if strings.Contains(body, `data-testid="decide-approve"`) || !strings.Contains(body, `data-testid="decide-ignore"`) {
		t.Fatalf("the monitor's incident page offers approve, or no decision at all:\n%s", body)
	}
	st, out = f.api(t, f.owner.Token, "POST", "/api/private/incidents/"+id+"/decisions", map[string]any{"decision": "approve"})
	if st != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out), "monitor_incident") {
		t.Fatalf("approve of a monitor's incident: %d %v", st, out)
	}
}
