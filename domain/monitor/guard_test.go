package monitor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/monitor"
)

// The project's cap holds however monitors are made: check-ins' configs
// past it are refused too_many_monitors and make nothing; the API's create
// likewise.
func TestMonitorsPerProjectCap(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	b.mon.PerProject = 3
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "crontab", Value: "0 * * * *"}}
	for i := range 5 {
		_, err := b.mon.CheckIn(context.Background(), b.Proj.ID, monitor.CheckInInput{Slug: fmt.Sprintf("job-%d", i), Status: monitor.StatusOK,
			Config: cfg, Source: "sentry"})
		if want := i >= 3; (err != nil) != want || want && errCode(err) != "too_many_monitors" {
			t.Fatalf("check-in %d: %v", i, err)
		}
	}
	slug := "by-api"
	_, err := b.mon.Create(context.Background(), b.Owner, b.Proj.ID, monitor.Input{Slug: &slug, Schedule: cfg.Schedule})
	if errCode(err) != "too_many_monitors" {
		t.Fatalf("API create past the cap: %v", err)
	}
	var n int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM monitors WHERE project_id = ?`, b.Proj.ID).Scan(context.Background(), &n); err != nil || n != 3 {
		t.Fatalf("%d monitors (%v)", n, err)
	}
}

// A 10 KB crontab line and a long timezone are refused by their length,
// with the field named, and nothing is made.
func TestScheduleTextBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	long := "0 2 * * *" + strings.Repeat(" ", 10<<10)
	tz := strings.Repeat("Europe/Berlin", 6)
	for _, cfg := range []*monitor.Input{{Schedule: &monitor.Schedule{Type: "crontab", Value: long}},
		{Schedule: &monitor.Schedule{Type: "crontab", Value: "0 2 * * *"}, Timezone: &tz}} {
		_, err := b.mon.CheckIn(context.Background(), b.Proj.ID, monitor.CheckInInput{Slug: "long", Status: monitor.StatusOK, Config: cfg, Source: "sentry"})
		if err == nil || !strings.Contains(fmt.Sprint(err), "above") {
			t.Fatalf("%v", err)
		}
	}
	var n int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM monitors`).Scan(context.Background(), &n); err != nil || n != 0 {
		t.Fatalf("%d monitors (%v)", n, err)
	}
}

// A failed run's event names its monitor, status and source, never its
// check_in_id (one value per run: a tag no incident page should rank).
func TestMonitorEventHasNoCheckInIDTag(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	id := uuid.New()
	b.checkIn(t, monitor.CheckInInput{Slug: "nightly", CheckInID: &id, Status: monitor.StatusError,
		Config: &monitor.Input{Schedule: &monitor.Schedule{Type: "crontab", Value: "0 3 * * *"}}})
	var raw string
	if err := b.DB.Bun.NewRaw(`SELECT payload::json->>'tags' FROM feed_events WHERE project_id = ?`, b.Proj.ID).Scan(context.Background(), &raw); err != nil {
		t.Fatal(err)
	}
	var tags map[string]string
	if err := json.Unmarshal([]byte(raw), &tags); err != nil {
		t.Fatal(err)
	}
	if tags["monitor.slug"] != "nightly" || tags["monitor.status"] != "error" {
		t.Fatalf("tags %v", tags)
	}
	if _, ok := tags["check_in_id"]; ok {
		t.Fatalf("check_in_id is a tag: %v", tags)
	}
}
