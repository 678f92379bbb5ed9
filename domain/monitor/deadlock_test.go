package monitor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"anvil/domain"
	"anvil/domain/internal/domaintest"
	"anvil/domain/monitor"
)

// Sweeps race check-ins at the deadline, round after round: a project's
// monitors are all due when the sweeps and their check-ins start together.
// Postgres counts every deadlock it breaks (pg_stat_database.deadlocks):
// none may happen, and no check-in or sweep may fail
// (docs/monitors.md, "Locks").
func TestSweepRacesCheckInsWithoutDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t, domain.PolicyObserve)
	ctx := context.Background()
	start := time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC)
	clk := domaintest.NewClock(start)
	b.Store.Now = clk.Now
	b.mon.Now = clk.Now
	const monitors = 8
	cfg := &monitor.Input{Schedule: &monitor.Schedule{Type: "crontab", Value: "* * * * *"}, CheckinMargin: intp(0), FailureThreshold: intp(50)}
	for i := range monitors {
		b.checkIn(t, monitor.CheckInInput{Slug: fmt.Sprintf("job-%d", i), Status: monitor.StatusOK, Config: cfg})
	}
	deadlocks := func() int64 {
		var n int64
		if err := b.DB.Bun.NewRaw(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := deadlocks()
	for round := range 20 {
		// Every monitor's run is now past its deadline.
		clk.Advance(time.Minute)
		var wg sync.WaitGroup
		errs := make(chan error, 4+monitors*2)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := b.mon.Sweep(ctx); err != nil {
					errs <- fmt.Errorf("sweep: %w", err)
				}
			}()
		}
		for i := range monitors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := b.mon.CheckIn(ctx, b.Proj.ID, monitor.CheckInInput{Slug: fmt.Sprintf("job-%d", i), Status: monitor.StatusError, Source: "ping"})
				if err != nil && !monitor.IsRateLimited(err) {
					errs <- fmt.Errorf("check-in job-%d: %w", i, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
	// The statistics reach pg_stat_database within a second or so.
	time.Sleep(1500 * time.Millisecond)
	if n := deadlocks() - before; n != 0 {
		t.Fatalf("%d deadlocks between sweeps and check-ins", n)
	}
}
