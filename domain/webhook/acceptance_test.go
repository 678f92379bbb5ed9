package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/forge"
	"anvil/domain/run"
)

// TestAcceptanceGroupsKeepEveryRule fires manual triggers and webhook
// deliveries of several projects at once, so that they are decided in
// shared groups, and checks that each got the answer it would have got
// alone: the cap per project, one run per delivery id, a disabled webhook
// refused with nothing recorded, an unknown project not found — and that a
// delivery whose row the database refuses fails alone, the others of its
// group committed.
func TestAcceptanceGroupsKeepEveryRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	hooked, off, manual := b.Project(t, "hooked"), b.Project(t, "off"), b.Project(t, "manual")
	w, _ := b.webhook(t, hooked, "github")
	wOff, _ := b.webhook(t, off, "gitea")
	if _, err := wOff.SetEnabled(ctx, b.Owner, off.ID, "gitea", false); err != nil {
		t.Fatal(err)
	}

	type call struct {
		name string
		do   func() (any, error)
	}
	var calls []call
	for i := range 5 { // five copies of one delivery
		calls = append(calls, call{fmt.Sprintf("copy%d", i), func() (any, error) {
			return deliver(ctx, w, hooked.ID, "github", push(forge.GitHub, "same", "main", shaA))
		}})
	}
	for i := range 3 { // three distinct deliveries
		id := fmt.Sprintf("distinct-%d", i)
		calls = append(calls, call{id, func() (any, error) { return deliver(ctx, w, hooked.ID, "github", push(forge.GitHub, id, "main", shaA)) }})
	}
	calls = append(calls, call{"too-long", func() (any, error) {
		return deliver(ctx, w, hooked.ID, "github", push(forge.GitHub, strings.Repeat("x", 201), "main", shaA))
	}})
	for i := range 4 {
		id := fmt.Sprintf("off-%d", i)
		calls = append(calls, call{id, func() (any, error) { return deliver(ctx, wOff, off.ID, "gitea", push(forge.Gitea, id, "main", shaA)) }})
	}
	for i := range 25 {
		calls = append(calls, call{fmt.Sprintf("manual%d", i), func() (any, error) { return b.Queue.AcceptManual(ctx, b.Owner, manual.ID, "") }})
	}
	calls = append(calls, call{"unknown", func() (any, error) { return b.Queue.AcceptManual(ctx, b.Owner, uuid.New(), "") }})

	results, errs := make([]any, len(calls)), make([]error, len(calls))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = c.do()
		}()
	}
	close(start)
	wg.Wait()

	var runID *uuid.UUID
	replays, full, accepted := 0, 0, 0
	for i, c := range calls {
		err := errs[i]
		switch {
		case strings.HasPrefix(c.name, "copy"):
			res := results[i].(run.DeliveryResult)
			if err != nil || res.Outcome != forge.OutcomeAccepted || res.RunID == nil || (runID != nil && *res.RunID != *runID) {
				t.Fatalf("%s: %v %+v", c.name, err, res)
			}
			runID = res.RunID
			if res.Replayed {
				replays++
			}
		case strings.HasPrefix(c.name, "distinct"):
			if res := results[i].(run.DeliveryResult); err != nil || res.Outcome != forge.OutcomeAccepted || res.Replayed {
				t.Fatalf("%s: %v %+v", c.name, err, res)
			}
		case c.name == "too-long":
			if err == nil {
				t.Fatal("a delivery id of 201 characters was recorded")
			}
		case strings.HasPrefix(c.name, "off"):
			if !errors.Is(err, domain.ErrWebhookDisabled) {
				t.Fatalf("%s: %v %+v, want the disabled webhook's refusal", c.name, err, results[i])
			}
		case strings.HasPrefix(c.name, "manual"):
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, domain.ErrQueueFull):
				full++
			default:
				t.Fatalf("%s: %v", c.name, err)
			}
		case c.name == "unknown":
			if !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("unknown project: %v", err)
			}
		}
	}
	if replays != 4 || accepted != run.MaxQueued || full != 25-run.MaxQueued {
		t.Fatalf("%d replays, %d accepted, %d refused as full", replays, accepted, full)
	}
	if n := countRows(t, b, "project_runs", "project_id = ?", hooked.ID); n != 4 {
		t.Fatalf("%d runs of the webhook project, want 4 (one per delivery id)", n)
	}
	if n := countRows(t, b, "project_webhook_deliveries", "project_id = ? AND delivery_id = 'same' AND attempts = 5", hooked.ID); n != 1 {
		t.Fatal("the five copies are not one ledger row with five attempts")
	}
	if n := countRows(t, b, "project_webhook_deliveries", "project_id = ?", off.ID) + countRows(t, b, "project_runs", "project_id = ?", off.ID); n != 0 {
		t.Fatalf("a disabled webhook recorded %d rows", n)
	}
	// The manual project's queue: twenty distinct positions (tokens drawn
	// from one sequence, so not 1..20), one run executable, and the read
	// model holds every run.
	var positions []int64
	if err := b.DB.Bun.NewRaw(`SELECT position FROM project_runs WHERE project_id = ? ORDER BY position`, manual.ID).Scan(ctx, &positions); err != nil {
		t.Fatal(err)
	}
	if len(positions) != run.MaxQueued {
		t.Fatalf("%d positions, want %d", len(positions), run.MaxQueued)
	}
	for i := 1; i < len(positions); i++ {
		if positions[i] <= positions[i-1] {
			t.Fatalf("positions %v are not distinct and increasing", positions)
		}
	}
	for _, p := range []*domain.Project{hooked, manual} {
		if n := countRows(t, b, "project_runs", "project_id = ? AND state = 'executable' AND job_id IS NOT NULL", p.ID); n != 1 {
			t.Fatalf("%s: %d executable runs with their job, want 1", p.Slug, n)
		}
		if a, r := countRows(t, b, "project_runs", "project_id = ?", p.ID), countRows(t, b, "run_index", "project_id = ?", p.ID); a != r {
			t.Fatalf("%s: %d runs but %d run_index rows", p.Slug, a, r)
		}
	}
}
