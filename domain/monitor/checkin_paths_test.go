package monitor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/internal/domaintest"
	"anvil/domain/monitor"
)

// TestCheckInPathsAgree holds the two-round-trip check-in to the general
// path (docs/monitors.md, "Two paths"): one script of check-ins — a
// monitor created by its monitor_config, the same config again, a run
// started, resent and closed, pings, a failure that opens the incident and
// a good run that closes it, a config that changes the monitor, a new
// environment, the rate limit, refusals, a run over its maximum runtime —
// played on two databases at the same instants, one service taking both
// paths and one the general path alone, gives the same answers and the
// same rows: monitors, states, runs and incidents. The first service must
// have stored most of the script on the fast path.
func TestCheckInPathsAgree(t *testing.T) {
	t.Parallel()
	id1, id2, id3 := uuid.New(), uuid.New(), uuid.New()
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "crontab", Value: "0 * * * *"}, Timezone: strp("Europe/Berlin"),
		CheckinMargin: intp(5), MaxRuntime: intp(30)}
	changed := &monitor.Input{Schedule: &monitor.Schedule{Type: "crontab", Value: "0 * * * *"}, Timezone: strp("Europe/Berlin"),
		CheckinMargin: intp(10), MaxRuntime: intp(30)}
	type step struct {
		after time.Duration
		in    monitor.CheckInInput
	}
	script := []step{
		{0, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Duration: f64(2), Config: cfg, Release: "shop@1"}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Duration: f64(3), Config: cfg, Release: "shop@1"}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", CheckInID: &id1, Status: monitor.StatusInProgress, Release: "shop@2"}},
		{time.Second, monitor.CheckInInput{Slug: "hourly", CheckInID: &id1, Status: monitor.StatusInProgress}},
		{4 * time.Second, monitor.CheckInInput{Slug: "hourly", CheckInID: &id1, Status: monitor.StatusOK}},
		{time.Minute, monitor.CheckInInput{Slug: "hourly", CheckInID: &id1, Status: monitor.StatusOK}}, // a resend
		{time.Hour, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusError, ExitCode: intp(3), Output: "disk full"}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Duration: f64(1)}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Duration: f64(1)}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusInProgress, Source: "ping"}},
		{7 * time.Second, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Source: "ping", ExitCode: intp(0), Output: "done"}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Config: changed}},
		{time.Minute, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Environment: "staging"}},
		{time.Minute, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Environment: " staging "}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", CheckInID: &id2, Status: monitor.StatusInProgress}},
		{time.Hour, monitor.CheckInInput{Slug: "hourly", CheckInID: &id2, Status: monitor.StatusOK}}, // over max_runtime
		{time.Hour, monitor.CheckInInput{Slug: "hourly", CheckInID: &id3, Status: monitor.StatusOK, Duration: f64(5)}},
		{time.Hour, monitor.CheckInInput{Slug: "nobody", Status: monitor.StatusOK}},
		{0, monitor.CheckInInput{Slug: "hourly", Status: "done"}},
		{0, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Config: &monitor.Input{Timezone: strp("Mars/Olympus")}}},
	}
	for range monitor.RatePerMinute + 1 { // the seventh in a minute is refused
		script = append(script, step{time.Second, monitor.CheckInInput{Slug: "hourly", Status: monitor.StatusOK, Duration: f64(1)}})
	}

	play := func(general bool) (answers, rows []string, fast int64) {
		b := setup(t, domain.PolicyObserve)
		clk := domaintest.NewClock(time.Date(2026, 3, 28, 22, 0, 0, 0, time.UTC)) // over Berlin's spring change
		b.Store.Now = clk.Now
		if general {
			b.mon.TakeGeneralPath()
		}
		for i, s := range script {
			clk.Advance(s.after)
			in := s.in
			if in.Source == "" {
				in.Source = "sentry"
			}
			res, err := b.mon.CheckIn(context.Background(), b.Proj.ID, in)
			switch {
			case err != nil:
				answers = append(answers, fmt.Sprintf("%d: refused %s %v", i, errCode(err), monitor.IsRateLimited(err)))
			default:
				answers = append(answers, fmt.Sprintf("%d: %s", i, res.Status))
			}
		}
		ctx := context.Background()
		for _, q := range []string{
			`SELECT slug, schedule_type, schedule_value, timezone, checkin_margin, max_runtime, failure_threshold, recovery_threshold,
				environment, paused, ping_lookup LIKE 'anv_png_%' AS ping_key, length(ping_hash) AS hash FROM monitors`,
			`SELECT s.environment, s.last_checkin_at, s.last_status, s.last_duration_ms, s.expected_at, s.due_at, s.failures, s.oks,
				s.ok_times, s.incident_id IS NOT NULL AS incident, s.window_start, s.window_count FROM monitor_states s`,
			`SELECT environment, checkin_id, status, source, started_at, finished_at, duration_ms, expected_at, timeout_at, exit_code,
				release, output, received_at FROM monitor_checkins`,
			`SELECT environment, title, exception_type, status, event_count, first_seen, last_seen, release FROM incidents
				WHERE fingerprint LIKE 'monitor:%'`,
		} {
			var got []string
			if err := b.DB.Bun.NewRaw(`SELECT row_to_json(x)::text FROM (`+q+`) x`).Scan(ctx, &got); err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			rows = append(rows, got...)
		}
		return answers, rows, b.mon.FastCheckIns()
	}
	ansBoth, rowsBoth, fast := play(false)
	ansGeneral, rowsGeneral, none := play(true)
	if !slices.Equal(ansBoth, ansGeneral) {
		t.Errorf("answers differ:\n both paths: %q\n general:    %q", ansBoth, ansGeneral)
	}
	if !slices.Equal(rowsBoth, rowsGeneral) {
		t.Errorf("rows differ:\n both paths:\n  %s\n general:\n  %s", strings.Join(rowsBoth, "\n  "), strings.Join(rowsGeneral, "\n  "))
	}
	if none != 0 {
		t.Fatalf("the general-only service took the fast path %d times", none)
	}
	// Fast: the config repeated, the run started, resent and closed, its
	// resend, the second good run after the recovery, the two pings, the
	// staging check-in once its state exists, the timed-out run's start,
	// the standalone ok, six of the rate-limit burst.
	if fast < 12 {
		t.Fatalf("only %d of %d check-ins took the two-round-trip path", fast, len(script))
	}
	t.Logf("%d of %d check-ins took the two-round-trip path", fast, len(script))
}

// TestCheckInsCreateOneMonitorAtOnce: eight check-ins of a new slug, each
// with its monitor_config, arrive at once: one monitor is made (the
// two-round-trip path's losers find it through the general path), six
// runs are recorded and two are over the rate limit.
func TestCheckInsCreateOneMonitorAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "interval", Value: "10", Unit: "minute"}}
	burst := func(slug string) []error {
		errs := make([]error, 8)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = b.mon.CheckIn(context.Background(), b.Proj.ID, monitor.CheckInInput{Slug: slug, Status: monitor.StatusOK,
					Source: "sentry", Config: cfg})
			}()
		}
		close(start)
		wg.Wait()
		return errs
	}
	burst("warm-up") // the pool's connections, so that the burst's check-ins overlap
	errs := burst("burst")
	limited := 0
	for _, err := range errs {
		switch {
		case monitor.IsRateLimited(err):
			limited++
		case err != nil:
			t.Fatal(err)
		}
	}
	if n := b.CountRows(t, "monitors", "slug = 'burst'"); n != 1 {
		t.Fatalf("%d monitors", n)
	}
	if n := b.CountRows(t, "monitor_checkins", "monitor_id IN (SELECT id FROM monitors WHERE slug = 'burst')"); n != monitor.RatePerMinute || limited != 8-monitor.RatePerMinute {
		t.Fatalf("%d runs, %d refused", n, limited)
	}
}
