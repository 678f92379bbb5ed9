package jobs_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"anvil/db/testdb"
	"anvil/domain/monitor"
	"anvil/domain/project"
	"anvil/domain/secret"
	"anvil/domain/wiring"
	"anvil/jobs"
)

// fakeClock is the monitors' clock: the test moves it past a deadline
// instead of waiting a minute.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// TestMonitorMissedOnceAcrossTwoWorkers: two worker processes — two River
// clients with their own services on one database, each working the sweep,
// the periodic one every 200 ms plus a burst of sweeps inserted at once so
// that both clients sweep at the same moments — find a 1-minute interval
// monitor's missed run within 30 s of its deadline, and record it once:
// one missed run, one incident with one event.
func TestMonitorMissedOnceAcrossTwoWorkers(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	keys, _ := secret.NewKeyring(make([]byte, 32), nil)
	clock := &fakeClock{t: time.Now().UTC().Truncate(time.Second)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var clients []*river.Client[*sql.Tx]
	var svs []*wiring.Services
	for range 2 {
		sv := wiring.NewServices(d, keys, nil, wiring.Options{})
		sv.Monitors.Now = clock.now
		workers := river.NewWorkers()
		river.AddWorker(workers, jobs.NewMonitorSweepWorker(sv.Monitors, nil))
		client, err := sv.Start(ctx, &river.Config{Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
			PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(200*time.Millisecond),
				func() (river.JobArgs, *river.InsertOpts) { return monitor.SweepArgs{}, nil }, nil)},
			FetchCooldown: 5 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond, TestOnly: true,
			// The sweep enqueues card refreshes, which these processes leave to others.
			SkipUnknownJobCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		clients, svs = append(clients, client), append(svs, sv)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		for i, c := range clients {
			_ = c.Stop(sctx)
			_ = svs[i].Stop(sctx)
		}
	})
	sv := svs[0]
	res, err := sv.Accounts.Bootstrap(ctx, "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := sv.Accounts.Authenticate(ctx, res.Token)
	p, err := sv.Projects.Create(ctx, owner, project.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test")})
	if err != nil {
		t.Fatal(err)
	}
	margin := 0
	if _, err := sv.Monitors.Create(ctx, owner, p.ID, monitor.Input{Slug: strp("heartbeat"),
		Schedule: &monitor.Schedule{Type: "interval", Value: "1", Unit: "minute"}, CheckinMargin: &margin}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Monitors.CheckIn(ctx, p.ID, monitor.CheckInInput{Slug: "heartbeat", Status: monitor.StatusOK, Source: "ping"}); err != nil {
		t.Fatal(err)
	}
	deadline := clock.now().Add(time.Minute)

	count := func(q string) int {
		var n int
		if err := d.Bun.NewRaw(q).Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Sweeps before the deadline find nothing.
	time.Sleep(500 * time.Millisecond)
	if n := count(`SELECT count(*) FROM monitor_checkins WHERE status = 'missed'`); n != 0 {
		t.Fatalf("%d missed runs before the deadline", n)
	}
	clock.set(deadline.Add(time.Second))
	passed := time.Now()
	burst := make([]river.InsertManyParams, 20)
	for i := range burst {
		burst[i] = river.InsertManyParams{Args: monitor.SweepArgs{}}
	}
	for _, c := range clients {
		if _, err := c.InsertMany(ctx, burst); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the missed run's incident", func() bool {
		return count(`SELECT count(*) FROM incidents WHERE fingerprint LIKE 'monitor:%'`) > 0
	})
	if took := time.Since(passed); took > 30*time.Second {
		t.Fatalf("the incident came %s after the deadline", took)
	}
	// Every sweep inserted so far finishes; still one missed run, one incident, one event.
	waitFor(t, 30*time.Second, "the sweeps to finish", func() bool {
		return count(`SELECT count(*) FROM river_job WHERE kind = 'monitor_sweep' AND state NOT IN ('completed', 'discarded', 'cancelled')`) == 0 &&
			count(`SELECT count(*) FROM river_job WHERE kind = 'monitor_sweep' AND state = 'completed'`) >= 40
	})
	var workedBy []string
	if err := d.Bun.NewRaw(`SELECT DISTINCT attempted_by[1] FROM river_job WHERE kind = 'monitor_sweep' AND state = 'completed'`).Scan(ctx, &workedBy); err != nil {
		t.Fatal(err)
	}
	if len(workedBy) < 2 {
		t.Fatalf("only %v worked the sweeps; both processes must", workedBy)
	}
	if n := count(`SELECT count(*) FROM monitor_checkins WHERE status = 'missed'`); n != 1 {
		t.Fatalf("%d missed runs recorded, want 1", n)
	}
	if n := count(`SELECT count(*) FROM incidents WHERE fingerprint LIKE 'monitor:%' AND event_count = 1 AND title LIKE 'heartbeat missed its %'`); n != 1 {
		t.Fatalf("%d incidents as expected", n)
	}
	if n := count(`SELECT count(*) FROM feed_events WHERE fingerprint LIKE 'monitor:%'`); n != 1 {
		t.Fatalf("%d events", n)
	}
}
