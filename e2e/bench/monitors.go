package main

// The monitors' figures (docs/monitors.md): the missed-run sweep over 10,000
// monitors, in-process on the domain, and check-ins through the Sentry
// door's envelope against a real `anvil serve`.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"anvil/domain/monitor"
)

func init() {
	register("monitors/sweep", benchMonitorSweep)
	register("monitors/checkins", benchMonitorCheckIns)
}

const (
	sweepBenchProjects = 100
	sweepBenchPer      = 100 // monitors per project: 10,000 in all
)

// benchMonitorSweep times sweep passes over 10,000 monitors that have all
// checked in: none due, then 1 % and 10 % of them missing their run at
// once. The monitors and their states are written with SQL (set-up, not
// measured); the passes are the domain's Sweep, as the periodic job runs it.
func benchMonitorSweep(ctx context.Context, env *benchEnv) error {
	q, err := newQueueBench(ctx, env)
	if err != nil {
		return err
	}
	defer q.close()
	projects, err := q.projects(ctx, sweepBenchProjects)
	if err != nil {
		return err
	}
	base := time.Now().UTC().Truncate(time.Minute)
	// Every monitor: a 1-hour interval, margin 0; its last check-in at base,
	// so each is due at base + 1 h + its offset in seconds (up to 10,000 s).
	for i, pid := range projects {
		if _, err := q.db.Bun.NewRaw(`
			WITH m AS (INSERT INTO monitors (org_id, project_id, slug, schedule_type, schedule_value, schedule_unit, checkin_margin)
				SELECT ?, ?, 'job-' || g, 'interval', '1', 'hour', 0 FROM generate_series(1, ?) g RETURNING id, slug)
			INSERT INTO monitor_states (monitor_id, environment, project_id, last_checkin_at, last_status, expected_at, due_at)
			SELECT m.id, 'production', ?, ?::timestamptz, 'ok', ?::timestamptz + interval '1 hour' + make_interval(secs => ? * ? + substr(m.slug, 5)::int),
				?::timestamptz + interval '1 hour' + make_interval(secs => ? * ? + substr(m.slug, 5)::int) FROM m`,
			q.owner.OrgID, pid, sweepBenchPer, pid, base, base, i, sweepBenchPer, base, i, sweepBenchPer).Exec(ctx); err != nil {
			return fmt.Errorf("monitors: %w", err)
		}
	}
	mon := q.sv.Monitors
	pass := func(at time.Time) (time.Duration, monitor.SweepReport, error) {
		mon.Now = func() time.Time { return at }
		t0 := time.Now()
		rep, err := mon.Sweep(ctx)
		return time.Since(t0), rep, err
	}
	hour := base.Add(time.Hour)
	var idle []time.Duration
	for range 20 {
		d, rep, err := pass(hour.Add(-time.Second))
		if err != nil {
			return err
		}
		if rep.Missed != 0 {
			return fmt.Errorf("a pass before any deadline recorded %d missed runs", rep.Missed)
		}
		idle = append(idle, d)
	}
	idle = sortDurations(idle)
	env.report("monitors", "sweep_10000_none_due_p50_ms", ms(percentile(idle, 50)), 1000)
	for _, due := range []int{100, 1000} {
		at := hour.Add(time.Duration(due) * time.Second).Add(-time.Second) // due monitors: offsets 0 … due-1 past the previous pass
		d, rep, err := pass(at)
		if err != nil {
			return err
		}
		env.note("monitors", fmt.Sprintf("sweep_10000_%d_missed_recorded", due), float64(rep.Missed))
		if due <= 100 {
			env.report("monitors", fmt.Sprintf("sweep_10000_%d_due_ms", due), ms(d), 1000)
		} else {
			// Each missed run here opens an incident (threshold 1): the
			// pass's cost is that of the incidents, not of the check.
			env.note("monitors", fmt.Sprintf("sweep_10000_%d_due_ms", due), ms(d))
		}
	}
	return nil
}

const (
	checkinBenchSenders  = 8
	checkinBenchRequests = 200 // per sender: below the connection's 600/min
	checkinBenchReuse    = 5   // check-ins per monitor (below its 6/min)
)

// benchMonitorCheckIns posts single check-in envelopes (as sentry-go sends
// them) through the Sentry door: each monitor is created by its first
// check-in's monitor_config, then checks in again.
func benchMonitorCheckIns(ctx context.Context, env *benchEnv) error {
	f, err := env.newFeedFixture(ctx, "bench@monitors.test", checkinBenchSenders)
	if err != nil {
		return err
	}
	defer f.Stop()
	url := f.Server.URL + "/api/" + strconv.FormatInt(f.ProjectNumber, 10) + "/envelope/"
	bodies := make([][][]byte, checkinBenchSenders)
	for s := range bodies {
		bodies[s] = make([][]byte, checkinBenchRequests+1)
		for r := range bodies[s] {
			slug := fmt.Sprintf("job-%d-%d", s, r/checkinBenchReuse)
			item := fmt.Sprintf(`{"check_in_id":%q,"monitor_slug":%q,"status":"ok","duration":1.5,"environment":"production","release":"shop@1"`,
				uuid.NewString(), slug)
			if r%checkinBenchReuse == 0 {
				item += `,"monitor_config":{"schedule":{"type":"crontab","value":"*/5 * * * *"},"checkin_margin":2,"max_runtime":10,"timezone":"Europe/Berlin"}`
			}
			item += "}"
			bodies[s][r] = fmt.Appendf(nil, "{\"sent_at\":%q}\n{\"type\":\"check_in\",\"length\":%d}\n%s\n", time.Now().UTC().Format(time.RFC3339), len(item), item)
		}
	}
	load, err := f.Load(ctx, checkinBenchSenders, checkinBenchRequests, func(s, r int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(bodies[s][r]))
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=sentry.go/0.46.2, sentry_key="+f.Tokens[s])
		req.Header.Set("Content-Type", "application/x-sentry-envelope")
		return sentryBenchDo(f.Client, req, `{}`)
	})
	if err != nil {
		return err
	}
	env.note("monitors", "checkins", float64(checkinBenchSenders*checkinBenchRequests))
	env.note("monitors", "checkins_per_s", float64(int(load.PerSecond())))
	env.note("monitors", "checkin_p50_ms", ms(percentile(load.Latencies, 50)))
	env.report("monitors", "checkin_p99_ms", ms(percentile(load.Latencies, 99)), 20)
	noteCPU(env, "monitors", "checkin", load)
	return nil
}
