package monitor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/monitor"
	"anvil/domain/retention"
)

// TestCreateRefusesBadInputNamingTheField: a bad schedule or timezone is a
// 422-kind refusal naming the field, and nothing is stored.
func TestCreateRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	for _, tc := range []struct {
		in    monitor.Input
		field string
	}{
		{monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "crontab", Value: "0 25 * * *"}}, "schedule.value"},
		{monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "crontab", Value: "0 2 * * *"}, Timezone: strp("Europe/Atlantis")}, "timezone"},
		{monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "interval", Value: "3", Unit: "eon"}}, "schedule.unit"},
		{monitor.Input{Slug: strp("Backup Job"), Schedule: &monitor.Schedule{Type: "interval", Value: "3", Unit: "hour"}}, "slug"},
		{monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "interval", Value: "3", Unit: "hour"}, MaxRuntime: intp(0)}, "max_runtime"},
	} {
		_, err := b.mon.Create(ctx, b.Owner, b.Proj.ID, tc.in)
		var de *domain.Error
		if !errors.As(err, &de) || !errors.Is(err, domain.ErrInvalid) || len(de.Fields) == 0 || de.Fields[0].Field != tc.field {
			t.Errorf("%s: %v, want an invalid %s", tc.field, err, tc.field)
		}
	}
	if n := b.CountRows(t, "monitors", "true"); n != 0 {
		t.Fatalf("%d monitors stored after refusals", n)
	}
	m, err := b.mon.Create(ctx, b.Owner, b.Proj.ID, monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "crontab", Value: "0 2 * * *"},
		Timezone: strp("Europe/Berlin")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.PingURL, "https://anvil.example/api/monitors/anv_png_") || !strings.HasSuffix(m.PingURL, "/backup") {
		t.Fatalf("ping url %q", m.PingURL)
	}
	if _, err := b.mon.Create(ctx, b.Owner, b.Proj.ID, monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "interval", Value: "1", Unit: "day"}}); errCode(err) != "monitor_exists" {
		t.Fatalf("second backup: %v", err)
	}
}

// TestCheckInsOpenAndCloseOneIncident: an in_progress closed by its ok
// records the duration; an error opens one incident, a second error counts
// on it, two oks (recovery threshold 2) close it by anvil with evidence.
func TestCheckInsOpenAndCloseOneIncident(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "interval", Value: "1", Unit: "hour"}, RecoveryThreshold: intp(2), MaxRuntime: intp(30)}
	id := uuid.New()
	b.checkIn(t, monitor.CheckInInput{Slug: "nightly", CheckInID: &id, Status: monitor.StatusInProgress, Config: cfg, Release: "shop@1"})
	b.Clock.Advance(3 * time.Second)
	res := b.checkIn(t, monitor.CheckInInput{Slug: "nightly", CheckInID: &id, Status: monitor.StatusOK})
	runs, err := b.mon.Runs(context.Background(), res.MonitorID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != "ok" || runs[0].DurationMS == nil || *runs[0].DurationMS != 3000 || runs[0].Release != "shop@1" {
		t.Fatalf("runs %+v", runs)
	}
	if st, _, _, _ := b.incidentOf(t, "nightly"); st != "" {
		t.Fatalf("an incident after an ok: %s", st)
	}
	code := 3
	b.Clock.Advance(time.Hour)
	b.checkIn(t, monitor.CheckInInput{Slug: "nightly", Status: monitor.StatusError, Duration: f64(12), ExitCode: &code})
	st, title, evs, n := b.incidentOf(t, "nightly")
	if st != domain.IncidentTriaged || title != "nightly failed: exit 3" || evs != 1 || n != 1 {
		t.Fatalf("incident %s %q %d (%d)", st, title, evs, n)
	}
	b.Clock.Advance(time.Hour)
	b.checkIn(t, monitor.CheckInInput{Slug: "nightly", Status: monitor.StatusError})
	if _, _, evs, n := b.incidentOf(t, "nightly"); evs != 2 || n != 1 {
		t.Fatalf("second error: %d events, %d incidents", evs, n)
	}
	b.Clock.Advance(time.Hour)
	b.checkIn(t, monitor.CheckInInput{Slug: "nightly", Status: monitor.StatusOK})
	if st, _, _, _ := b.incidentOf(t, "nightly"); st != domain.IncidentTriaged {
		t.Fatalf("closed after one ok of two: %s", st)
	}
	b.Clock.Advance(time.Hour)
	b.checkIn(t, monitor.CheckInInput{Slug: "nightly", Status: monitor.StatusOK})
	if st, _, _, _ := b.incidentOf(t, "nightly"); st != domain.IncidentClosed {
		t.Fatalf("not closed after two oks: %s", st)
	}
	var inc uuid.UUID
	if err := b.DB.Bun.NewRaw(`SELECT id FROM incidents WHERE fingerprint LIKE 'monitor:%'`).Scan(context.Background(), &inc); err != nil {
		t.Fatal(err)
	}
	from, to, actor, actorID, reason := b.LastTransition(t, inc)
	if from != domain.IncidentTriaged || to != domain.IncidentClosed || actor != domain.ActorSystem || actorID != "anvil" || !strings.HasPrefix(reason, "recovered: ok at ") || !strings.Contains(reason, " and ") {
		t.Fatalf("close transition %s→%s by %s/%s: %q", from, to, actor, actorID, reason)
	}
	// A new failure reopens the same incident (a regression), never a second one.
	b.Clock.Advance(time.Hour)
	b.checkIn(t, monitor.CheckInInput{Slug: "nightly", Status: monitor.StatusError})
	if st, _, _, n := b.incidentOf(t, "nightly"); st != domain.IncidentTriaged || n != 1 {
		t.Fatalf("after a new failure: %s, %d incidents", st, n)
	}
}

// TestRateLimit: the seventh check-in of a monitor and environment within
// a minute is refused and changes nothing; another environment has its own.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "interval", Value: "1", Unit: "minute"}}
	for range monitor.RatePerMinute {
		b.checkIn(t, monitor.CheckInInput{Slug: "tick", Status: monitor.StatusOK, Config: cfg})
	}
	_, err := b.mon.CheckIn(context.Background(), b.Proj.ID, monitor.CheckInInput{Slug: "tick", Status: monitor.StatusOK, Source: "sentry"})
	if !monitor.IsRateLimited(err) {
		t.Fatalf("seventh: %v", err)
	}
	if n := b.CountRows(t, "monitor_checkins", "true"); n != monitor.RatePerMinute {
		t.Fatalf("%d runs stored", n)
	}
	b.checkIn(t, monitor.CheckInInput{Slug: "tick", Status: monitor.StatusOK, Environment: "staging"})
	b.Clock.Advance(61 * time.Second)
	b.checkIn(t, monitor.CheckInInput{Slug: "tick", Status: monitor.StatusOK})
	if err := b.mon.FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	var used int
	if err := b.DB.Bun.NewRaw(`SELECT checkins FROM feed_daily_usage WHERE project_id = ?`, b.Proj.ID).Scan(context.Background(), &used); err != nil || used != 8 {
		t.Fatalf("daily check-ins %d (%v), want 8", used, err)
	}
}

// TestSweepFindsMissedAndTimedOutOnce: a monitor that never checked in is
// not late; a 1-minute interval is missed once its deadline passed, once
// however many sweeps race; a paused one is not checked; an in_progress run
// past its max runtime times out once.
func TestSweepFindsMissedAndTimedOutOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	if _, err := b.mon.Create(ctx, b.Owner, b.Proj.ID, monitor.Input{Slug: strp("never"), Schedule: &monitor.Schedule{Type: "interval", Value: "1", Unit: "minute"}}); err != nil {
		t.Fatal(err)
	}
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "interval", Value: "1", Unit: "minute"}, CheckinMargin: intp(0), MaxRuntime: intp(5)}
	b.checkIn(t, monitor.CheckInInput{Slug: "beat", Status: monitor.StatusOK, Config: cfg})
	b.checkIn(t, monitor.CheckInInput{Slug: "paused", Status: monitor.StatusOK, Config: cfg})
	paused := true
	if _, err := b.mon.Update(ctx, b.Owner, b.Proj.ID, "paused", monitor.Input{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	hang := uuid.New()
	b.checkIn(t, monitor.CheckInInput{Slug: "hang", CheckInID: &hang, Status: monitor.StatusInProgress, Config: &monitor.Input{
		Schedule: &monitor.Schedule{Type: "crontab", Value: "0 3 * * *"}, MaxRuntime: intp(1)}})

	b.Clock.Advance(59 * time.Second)
	if rep, err := b.mon.Sweep(ctx); err != nil || rep.Missed+rep.TimedOut != 0 {
		t.Fatalf("before the deadline: %+v %v", rep, err)
	}
	b.Clock.Advance(2 * time.Second)
	var wg sync.WaitGroup
	reps := make([]monitor.SweepReport, 8)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := b.mon.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			reps[i] = rep
		}()
	}
	wg.Wait()
	missed, timedOut := 0, 0
	for _, r := range reps {
		missed += r.Missed
		timedOut += r.TimedOut
	}
	if missed != 1 || timedOut != 1 {
		t.Fatalf("8 racing sweeps recorded %d missed and %d timed out, want 1 and 1", missed, timedOut)
	}
	if st, title, _, n := b.incidentOf(t, "beat"); st != domain.IncidentTriaged || n != 1 || !strings.HasPrefix(title, "beat missed its ") {
		t.Fatalf("beat's incident %s %q (%d)", st, title, n)
	}
	if st, title, _, _ := b.incidentOf(t, "hang"); st != domain.IncidentTriaged || !strings.HasPrefix(title, "hang ran over its 1 min") {
		t.Fatalf("hang's incident %s %q", st, title)
	}
	for _, slug := range []string{"never", "paused"} {
		if st, _, _, _ := b.incidentOf(t, slug); st != "" {
			t.Fatalf("%s has an incident: %s", slug, st)
		}
	}
	// The late ok of the timed-out run learns its duration, keeps its verdict.
	b.checkIn(t, monitor.CheckInInput{Slug: "hang", CheckInID: &hang, Status: monitor.StatusOK})
	if n := b.CountRows(t, "monitor_checkins", "status = 'timeout' AND duration_ms >= 61000"); n != 1 {
		t.Fatalf("timed-out run: %d", n)
	}
	// The next minute is the next missed run, on the same incident.
	b.Clock.Advance(time.Minute)
	if rep, err := b.mon.Sweep(ctx); err != nil || rep.Missed != 1 {
		t.Fatalf("next minute: %+v %v", rep, err)
	}
	if _, _, evs, n := b.incidentOf(t, "beat"); evs != 2 || n != 1 {
		t.Fatalf("beat: %d events on %d incidents", evs, n)
	}
}

// TestPingScrubsOutputAndRefusesWrongKeys: a ping's body is kept (10 KB)
// and scrubbed; another slug, a rotated key and a made-up key are 404.
func TestPingScrubsOutputAndRefusesWrongKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	m, err := b.mon.Create(ctx, b.Owner, b.Proj.ID, monitor.Input{Slug: strp("backup"), Schedule: &monitor.Schedule{Type: "crontab", Value: "0 2 * * *"}})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Split(strings.TrimPrefix(m.PingURL, "https://anvil.example/api/monitors/"), "/")[0]
	body := "dumped 3 tables\npassword=hunter2 Authorization: Bearer abcdefghijklmnop1234\n" + strings.Repeat("x", 20000)
	if _, err := b.mon.Ping(ctx, key, "backup", "start", nil); err != nil {
		t.Fatal(err)
	}
	b.Clock.Advance(5 * time.Second)
	if _, err := b.mon.Ping(ctx, key, "backup", "", []byte(body)); err != nil {
		t.Fatal(err)
	}
	runs, _ := b.mon.Runs(ctx, m.ID, 5)
	if len(runs) != 1 || runs[0].Status != "ok" || *runs[0].DurationMS != 5000 || len(runs[0].Output) > monitor.MaxOutput+64 ||
		strings.Contains(runs[0].Output, "hunter2") || strings.Contains(runs[0].Output, "abcdefghijklmnop1234") || !strings.Contains(runs[0].Output, "dumped 3 tables") {
		t.Fatalf("runs %+v", runs)
	}
	for _, tc := range []struct{ key, slug, kind string }{
		{key, "other", ""}, {"anv_png_" + strings.Repeat("A", 32), "backup", ""}, {"nonsense", "backup", ""}, {key, "backup", "256"}, {key, "backup", "stop"},
	} {
		if _, err := b.mon.Ping(ctx, tc.key, tc.slug, tc.kind, nil); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%+v: %v, want not found", tc, err)
		}
	}
	if _, err := b.mon.RotatePingKey(ctx, b.Owner, b.Proj.ID, "backup"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.mon.Ping(ctx, key, "backup", "", nil); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a rotated key: %v", err)
	}
}

// TestRetentionDeletesOldRuns: the retention clean-up deletes a project's
// runs past its events age, never one still in progress.
func TestRetentionDeletesOldRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "crontab", Value: "0 2 * * *"}, MaxRuntime: intp(monitorMaxMinutes)}
	b.checkIn(t, monitor.CheckInInput{Slug: "backup", Status: monitor.StatusOK, Config: cfg})
	id := uuid.New()
	b.checkIn(t, monitor.CheckInInput{Slug: "backup", Status: monitor.StatusInProgress, CheckInID: &id})
	b.Clock.Advance(100 * 24 * time.Hour) // past the default 90 days
	b.checkIn(t, monitor.CheckInInput{Slug: "backup", Status: monitor.StatusOK})
	if _, err := retention.New(b.Store).Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.CountRows(t, "monitor_checkins", "true"); n != 2 {
		t.Fatalf("%d runs left, want the new one and the one in progress", n)
	}
	if n := b.CountRows(t, "monitor_checkins", "status = 'in_progress'"); n != 1 {
		t.Fatalf("the run in progress went: %d", n)
	}
}

const monitorMaxMinutes = 40320
