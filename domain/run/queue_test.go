package run_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	runs "anvil/domain/run"
)

func TestFortyConcurrentTriggersAcceptExactlyTwenty(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.Project(t, "busy")
	var ok, full, other atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := b.Queue.AcceptManual(context.Background(), b.Owner, p.ID, "")
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, domain.ErrQueueFull):
				full.Add(1)
			default:
				other.Add(1)
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != 20 || full.Load() != 20 || other.Load() != 0 {
		t.Fatalf("accepted %d, refused %d, errors %d; want 20/20/0", ok.Load(), full.Load(), other.Load())
	}
	v, err := b.Queue.View(context.Background(), b.Owner.OrgID, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Active == nil || v.Active.Status != runs.StatusQueued || len(v.Queued) != 19 {
		t.Fatalf("queue view: active %+v, %d queued", v.Active, len(v.Queued))
	}
	var last int64
	for _, r := range v.Queued {
		if r.Status != runs.StatusQueued || r.Position == nil || *r.Position <= last {
			t.Fatalf("queued run out of order: %+v", r)
		}
		last = *r.Position
	}
	// The full queue's refusal is a specific error.
	_, err = b.Queue.AcceptManual(context.Background(), b.Owner, p.ID, "")
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != "project_queue_full" {
		t.Fatalf("41st trigger: %v", err)
	}
}

func TestQueueLifecycleAndTransitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "life")
	r1, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "feature/x")
	r3, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	if r1.State != runs.StateExecutable || r2.State != runs.StatePending || r2.Branch != "feature/x" {
		t.Fatalf("states after accept: %s %s", r1.State, r2.State)
	}
	if *r1.Position >= *r2.Position || *r2.Position >= *r3.Position {
		t.Fatal("positions not increasing")
	}
	// Illegal moves are errors, never silent writes.
	if _, err := b.Queue.ReportTerminal(ctx, r2.ID, runs.TerminalReport{State: runs.StatePassed}); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("terminal report of a pending run: %v", err)
	}
	if _, _, err := b.Queue.Claim(ctx, r2.ID, "x"); !errors.Is(err, runs.ErrNotExecutable) {
		t.Fatalf("claim of a pending run: %v", err)
	}
	if err := b.Queue.Canceling(ctx, r1.ID); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("canceling without a request: %v", err)
	}
	if b.Run(t, r2.ID).State != runs.StatePending {
		t.Fatal("a refused move changed the run")
	}
	// Claim → starting (position cleared), start → running, backfill, pass.
	run, proj, err := b.Queue.Claim(ctx, r1.ID, "worker-1")
	if err != nil || run.State != runs.StateStarting || run.Position != nil || proj.ID != p.ID {
		t.Fatalf("claim: %v %+v", err, run)
	}
	if _, _, err := b.Queue.Claim(ctx, r1.ID, "worker-2"); !errors.Is(err, runs.ErrNotExecutable) {
		t.Fatalf("double claim: %v", err)
	}
	if st, err := b.Queue.Start(ctx, r1.ID, true); err != nil || st != runs.StateRunning {
		t.Fatalf("start: %s %v", st, err)
	}
	sha := "0123456789abcdef0123456789abcdef01234567"
	if err := b.Queue.BackfillCommit(ctx, r1.ID, sha); err != nil {
		t.Fatal(err)
	}
	if err := b.Queue.BackfillCommit(ctx, r1.ID, "not-a-sha"); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("bad sha: %v", err)
	}
	// r2 is not promoted while r1 is active.
	if b.Run(t, r2.ID).State != runs.StatePending {
		t.Fatal("promoted while a run is active")
	}
	code := 0
	done, err := b.Queue.ReportTerminal(ctx, r1.ID, runs.TerminalReport{State: runs.StatePassed, ExitCode: &code})
	if err != nil || done.Status() != runs.StatusPassed || *done.CommitSHA != sha {
		t.Fatalf("terminal: %v %+v", err, done)
	}
	if _, err := b.Queue.ReportTerminal(ctx, r1.ID, runs.TerminalReport{State: runs.StateFailed}); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("second terminal report: %v", err)
	}
	// Promotion took the smallest position.
	if b.Run(t, r2.ID).State != runs.StateExecutable || b.Run(t, r3.ID).State != runs.StatePending {
		t.Fatal("FIFO promotion")
	}
	// Cancel a queued run: canceled at once, position cleared.
	c3, err := b.Queue.RequestCancel(ctx, b.Owner, r3.ID)
	if err != nil || c3.Status() != runs.StatusCanceled || c3.Position != nil {
		t.Fatalf("cancel queued: %v %+v", err, c3)
	}
	// Cancel an active run: cancel_requested → canceling → canceled, then promotion.
	r4, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	if _, _, err := b.Queue.Claim(ctx, r2.ID, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Queue.Start(ctx, r2.ID, true); err != nil {
		t.Fatal(err)
	}
	c2, err := b.Queue.RequestCancel(ctx, b.Owner, r2.ID)
	if err != nil || c2.Status() != runs.StatusCancelRequested {
		t.Fatalf("cancel active: %v %+v", err, c2)
	}
	if st, _ := b.Queue.Heartbeat(ctx, r2.ID); st != runs.StateCancelRequested {
		t.Fatalf("heartbeat does not tell the executor: %s", st)
	}
	if b.Run(t, r4.ID).State != runs.StatePending {
		t.Fatal("promoted before the canceled run's teardown")
	}
	if err := b.Queue.Canceling(ctx, r2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Queue.ReportTerminal(ctx, r2.ID, runs.TerminalReport{State: runs.StateCanceled}); err != nil {
		t.Fatal(err)
	}
	if b.Run(t, r4.ID).State != runs.StateExecutable {
		t.Fatal("no promotion after the canceled run's terminal report")
	}
	if _, err := b.Queue.RequestCancel(ctx, b.Owner, r2.ID); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("cancel of a finished run: %v", err)
	}
	// Cancel of the executable (promoted, unclaimed) run promotes nothing
	// else but frees the slot.
	if _, err := b.Queue.RequestCancel(ctx, b.Owner, r4.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Queue.Claim(ctx, r4.ID, "late"); !errors.Is(err, runs.ErrNotExecutable) {
		t.Fatalf("claim after cancel: %v", err)
	}
	v, _ := b.Queue.View(ctx, b.Owner.OrgID, p.ID)
	if v.Active != nil || len(v.Queued) != 0 {
		t.Fatalf("queue not empty: %+v", v)
	}
}

func TestOtherOrganisationsSeeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "mine")
	r, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	res, err := b.Accounts.Bootstrap(ctx, "globex", "x@globex.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := b.Accounts.Authenticate(ctx, res.Token)
	if _, err := b.Queue.AcceptManual(ctx, other, p.ID, ""); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("foreign accept: %v", err)
	}
	if _, err := b.Queue.RequestCancel(ctx, other, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("foreign cancel: %v", err)
	}
	if _, err := b.Queue.RunGet(ctx, other.OrgID, r.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("foreign get: %v", err)
	}
	if _, err := b.Queue.View(ctx, other.OrgID, p.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("foreign queue: %v", err)
	}
}

// TestInterleavedProjects runs triggers, executors and cancels concurrently
// on many projects and checks the invariants on committed data.
func TestInterleavedProjects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const nProjects = 6
	projects := make([]*domain.Project, nProjects)
	for i := range projects {
		projects[i] = b.Project(t, fmt.Sprintf("p%d", i))
	}
	var mu sync.Mutex
	starts := map[uuid.UUID][]int64{} // project → positions in claim order
	var wg sync.WaitGroup
	for _, p := range projects {
		p := p
		var triggersDone atomic.Bool
		// Triggers.
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer triggersDone.Store(true)
			for i := 0; i < 40; i++ {
				r, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
				if errors.Is(err, domain.ErrQueueFull) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if rand.IntN(4) == 0 {
					_, _ = b.Queue.RequestCancel(ctx, b.Owner, r.ID)
				}
			}
		}()
		// An executor for this project.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				done := triggersDone.Load()
				var id uuid.UUID
				var pos int64 // the run's position, read with it: its acceptor may not have recorded it yet
				err := b.DB.Bun.NewRaw(`SELECT id, position FROM project_runs WHERE project_id = ? AND state = 'executable'`, p.ID).Scan(ctx, &id, &pos)
				if err != nil {
					if done {
						return // nothing executable once every trigger is in: the queue is drained
					}
					continue
				}
				_, _, err = b.Queue.Claim(ctx, id, "exec")
				if errors.Is(err, runs.ErrNotExecutable) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				starts[p.ID] = append(starts[p.ID], pos)
				mu.Unlock()
				_, _ = b.Queue.Start(ctx, id, true)
				_, _ = b.Queue.Heartbeat(ctx, id)
				code := rand.IntN(2)
				state := runs.StatePassed
				if code != 0 {
					state = runs.StateFailed
				}
				if _, err := b.Queue.ReportTerminal(ctx, id, runs.TerminalReport{State: state, ExitCode: &code}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		// A watcher of the invariants.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				var active, queued int
				if err := b.DB.Bun.NewRaw(`SELECT
					count(*) FILTER (WHERE state IN ('executable','starting','running','cancel_requested','canceling')),
					count(*) FILTER (WHERE position IS NOT NULL)
					FROM project_runs WHERE project_id = ?`, p.ID).Scan(ctx, &active, &queued); err != nil {
					t.Error(err)
					return
				}
				if active > 1 || queued > runs.MaxQueued {
					t.Errorf("project %s: %d active, %d queued", p.Slug, active, queued)
				}
			}
		}()
	}
	wg.Wait()
	for pid, ps := range starts {
		for i := 1; i < len(ps); i++ {
			if ps[i] <= ps[i-1] {
				t.Fatalf("project %s: starts out of acceptance order: %v", pid, ps)
			}
		}
	}
	if len(starts) != nProjects {
		t.Fatalf("only %d projects ran anything", len(starts))
	}
}

// TestStartCheckedBackfills holds StartChecked to Start plus BackfillCommit
// in one transaction: the commit is recorded with the start, even when a
// cancel was requested meanwhile, and a bad commit changes nothing.
func TestStartCheckedBackfills(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	sha := "89abcdef0123456789abcdef0123456789abcdef"

	p := b.Project(t, "checked")
	r, err := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Queue.Claim(ctx, r.ID, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Queue.StartChecked(ctx, r.ID, true, "not-a-sha"); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("bad sha: %v", err)
	}
	if got := b.Run(t, r.ID); got.State != runs.StateStarting || got.CommitSHA != nil {
		t.Fatalf("a refused start changed the run: %s %v", got.State, got.CommitSHA)
	}
	if st, err := b.Queue.StartChecked(ctx, r.ID, true, sha); err != nil || st != runs.StateRunning {
		t.Fatalf("start: %s %v", st, err)
	}
	if got := b.Run(t, r.ID); got.State != runs.StateRunning || got.CommitSHA == nil || *got.CommitSHA != sha || got.StartedAt == nil {
		t.Fatalf("after start: %s %v", got.State, got.CommitSHA)
	}

	// A cancel requested between claim and start: no start, but the commit.
	q := b.Project(t, "checked-cancel")
	c, err := b.Queue.AcceptManual(ctx, b.Owner, q.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Queue.Claim(ctx, c.ID, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Queue.RequestCancel(ctx, b.Owner, c.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Queue.StartChecked(ctx, c.ID, true, sha); err != nil || st != runs.StateCancelRequested {
		t.Fatalf("start after a cancel request: %s %v", st, err)
	}
	if got := b.Run(t, c.ID); got.State != runs.StateCancelRequested || got.StartedAt != nil || got.CommitSHA == nil || *got.CommitSHA != sha {
		t.Fatalf("after start: %s %v %v", got.State, got.StartedAt, got.CommitSHA)
	}
}
