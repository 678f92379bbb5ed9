package run_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"anvil/domain"
	"anvil/domain/run"
)

// TestRunNumbersDenseUnderConcurrentAcceptance fires 40 manual triggers at
// one project at once: the 20 the queue accepts are numbered 1…20, no
// number twice and none skipped, on the two-round-trip path and on the
// general one alike (the same decisions, so the same numbers); the run's
// JSON and the read model carry the number, and numbering goes on after
// the queue drains a little.
func TestRunNumbersDenseUnderConcurrentAcceptance(t *testing.T) {
	t.Parallel()
	for _, general := range []bool{false, true} {
		name := map[bool]string{false: "fast path", true: "general path"}[general]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if general {
				b.Store.Pool = nil // tryGroup's transaction alone
			}
			ctx := context.Background()
			p := b.Project(t, "numbered")
			other := b.Project(t, "other")
			if _, err := b.Queue.AcceptManual(ctx, b.Owner, other.ID, ""); err != nil {
				t.Fatal(err)
			}

			runs := make([]*run.Run, 40)
			errs := make([]error, 40)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					runs[i], errs[i] = b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
				}()
			}
			close(start)
			wg.Wait()
			var numbers []int64
			for i, err := range errs {
				switch {
				case err == nil:
					numbers = append(numbers, runs[i].Number)
				case errors.Is(err, domain.ErrQueueFull):
				default:
					t.Fatal(err)
				}
			}
			slices.Sort(numbers)
			if len(numbers) != run.MaxQueued {
				t.Fatalf("%d accepted, want %d", len(numbers), run.MaxQueued)
			}
			for i, n := range numbers {
				if n != int64(i+1) {
					t.Fatalf("numbers %v, want 1…%d", numbers, run.MaxQueued)
				}
			}
			var stored []int64
			if err := b.DB.Bun.NewRaw(`SELECT number FROM project_runs WHERE project_id = ? ORDER BY number`, p.ID).Scan(ctx, &stored); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(stored, numbers) {
				t.Fatalf("stored numbers %v, want %v", stored, numbers)
			}
			if n := countRows(t, b, "run_index", "project_id = ? AND number BETWEEN 1 AND 20", p.ID); n != 20 {
				t.Fatalf("%d read-model rows carry their number, want 20", n)
			}
			// The other project's numbering is its own.
			if n := countRows(t, b, "project_runs", "project_id = ? AND number = 1", other.ID); n != 1 {
				t.Fatalf("the other project's first run is not #1")
			}

			// Room again: the next accepted run is #21.
			var queued *run.Run
			for _, r := range runs {
				if r != nil && r.Number == 20 {
					queued = r
				}
			}
			if _, err := b.Queue.RequestCancel(ctx, b.Owner, queued.ID); err != nil {
				t.Fatal(err)
			}
			next, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if next.Number != 21 || next.View().Number != 21 {
				t.Fatalf("next run #%d, want #21", next.Number)
			}
		})
	}
}
