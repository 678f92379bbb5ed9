package domain_test

import (
	"context"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"anvil/domain"
)

func TestSyncStatusTransitions(t *testing.T) {
	t.Parallel()
	all := []string{domain.SyncNeedsCreate, domain.SyncCurrent, domain.SyncNeedsUpdate, domain.SyncNeedsTerminalUpdate, domain.SyncDone}
	allowed := map[[2]string]bool{
		{"needs_create", "current"}: true, {"needs_create", "needs_update"}: true, {"needs_create", "needs_terminal_update"}: true,
		{"current", "needs_update"}: true, {"current", "needs_terminal_update"}: true,
		{"needs_update", "current"}: true, {"needs_update", "needs_terminal_update"}: true,
		{"needs_terminal_update", "done"}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := domain.SyncTransitionAllowed(from, to); got != allowed[[2]string{from, to}] {
				t.Errorf("%s → %s: allowed=%v, want %v", from, to, got, allowed[[2]string{from, to}])
			}
		}
	}
}

// indexRow reads run_index as a comparable string.
func indexRow(t *testing.T, b *testBundle, r *domain.Run) string {
	t.Helper()
	var status, sha, reason string
	var code int
	var started, finished time.Time
	err := b.db.Bun.NewRaw(`SELECT status, COALESCE(commit_sha, ''), COALESCE(exit_code, -1), COALESCE(failure_reason, ''),
		COALESCE(started_at, 'epoch'), COALESCE(finished_at, 'epoch') FROM run_index WHERE run_id = ?`, r.ID).
		Scan(context.Background(), &status, &sha, &code, &reason, &started, &finished)
	if err != nil {
		return "missing: " + err.Error()
	}
	return status + "|" + sha + "|" + itoa(code) + "|" + reason + "|" + started.UTC().Format(time.RFC3339Nano) + "|" + finished.UTC().Format(time.RFC3339Nano)
}

func truthRow(r *domain.Run) string {
	sha, reason, code := "", "", -1
	if r.CommitSHA != nil {
		sha = *r.CommitSHA
	}
	if r.FailureReason != nil {
		reason = *r.FailureReason
	}
	if r.ExitCode != nil {
		code = *r.ExitCode
	}
	ts := func(p *time.Time) string {
		if p == nil {
			return time.Unix(0, 0).UTC().Format(time.RFC3339Nano)
		}
		return p.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
	}
	return r.Status() + "|" + sha + "|" + itoa(code) + "|" + reason + "|" + ts(r.StartedAt) + "|" + ts(r.FinishedAt)
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestReconciliationReplayedReorderedDuplicated applies every snapshot of a
// run's life to run_index in random orders and with duplicates: the row
// always ends equal to the terminal truth, and a non-terminal snapshot never
// regresses it.
func TestReconciliationReplayedReorderedDuplicated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.project(t, "sync")
	var snaps []*domain.Run
	r, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	snaps = append(snaps, b.run(t, r.ID))
	b.clock.Advance(time.Second)
	b.queue.Claim(ctx, r.ID, "w")
	snaps = append(snaps, b.run(t, r.ID))
	b.clock.Advance(time.Second)
	b.queue.Start(ctx, r.ID, true)
	snaps = append(snaps, b.run(t, r.ID))
	b.queue.BackfillCommit(ctx, r.ID, "89abcdef0123456789abcdef0123456789abcdef")
	snaps = append(snaps, b.run(t, r.ID))
	b.clock.Advance(time.Second)
	code := 2
	if _, err := b.queue.ReportTerminal(ctx, r.ID, domain.TerminalReport{State: domain.StateFailed, ExitCode: &code, FailureReason: domain.ReasonExitCode}); err != nil {
		t.Fatal(err)
	}
	final := b.run(t, r.ID)
	snaps = append(snaps, final)
	for round := 0; round < 30; round++ {
		if _, err := b.db.Bun.NewRaw(`DELETE FROM run_index WHERE run_id = ?`, r.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		seq := append([]*domain.Run{}, snaps...)
		for i := 0; i < 4; i++ { // duplicates
			seq = append(seq, snaps[rand.IntN(len(snaps))])
		}
		rand.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
		for _, s := range seq {
			if err := domain.UpsertIndex(ctx, b.db.Bun, s); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := indexRow(t, b, final), truthRow(final); got != want {
			t.Fatalf("round %d: run_index %q, truth %q", round, got, want)
		}
	}
	// A backfilled SHA is never replaced by NULL from an older snapshot.
	if err := domain.UpsertIndex(ctx, b.db.Bun, snaps[0]); err != nil {
		t.Fatal(err)
	}
	if got := indexRow(t, b, final); got != truthRow(final) {
		t.Fatalf("an old queued snapshot regressed the row: %s", got)
	}
}

// TestReconcileJobsConvergeOnTruth runs the real reconciliation many times,
// concurrently and duplicated, at every stage of a run's life.
func TestReconcileJobsConvergeOnTruth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.project(t, "conv")
	r, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	reconcileMany := func() {
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := b.queue.Reconcile(ctx, r.ID); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	check := func(stage, wantSync string) {
		t.Helper()
		cur := b.run(t, r.ID)
		if got, want := indexRow(t, b, cur), truthRow(cur); got != want {
			t.Fatalf("%s: run_index %q, truth %q", stage, got, want)
		}
		if cur.SyncStatus != wantSync {
			t.Fatalf("%s: d1_sync_status %s, want %s", stage, cur.SyncStatus, wantSync)
		}
	}
	// Acceptance syncs the queued row in its own transaction (needs_create →
	// current); replays change nothing.
	check("accepted", domain.SyncCurrent)
	reconcileMany()
	check("accepted, replayed", domain.SyncCurrent)
	b.queue.Claim(ctx, r.ID, "w")
	if cur := b.run(t, r.ID); cur.SyncStatus != domain.SyncNeedsUpdate {
		t.Fatalf("claimed: %s", cur.SyncStatus)
	}
	b.queue.Start(ctx, r.ID, true)
	b.queue.BackfillCommit(ctx, r.ID, "89abcdef0123456789abcdef0123456789abcdef")
	reconcileMany()
	check("running", domain.SyncCurrent)
	code := 0
	b.queue.ReportTerminal(ctx, r.ID, domain.TerminalReport{State: domain.StatePassed, ExitCode: &code})
	if cur := b.run(t, r.ID); cur.SyncStatus != domain.SyncNeedsTerminalUpdate {
		t.Fatalf("terminal: %s", cur.SyncStatus)
	}
	reconcileMany()
	check("terminal", domain.SyncDone)
	reconcileMany()
	check("replayed after done", domain.SyncDone)

	// A run canceled while queued: current → needs_terminal_update → done.
	r2, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	b.queue.RequestCancel(ctx, b.owner, r2.ID)
	if cur := b.run(t, r2.ID); cur.SyncStatus != domain.SyncNeedsTerminalUpdate {
		t.Fatalf("canceled while queued: %s", cur.SyncStatus)
	}
	r = r2
	reconcileMany()
	check("canceled while queued", domain.SyncDone)
}

func TestWatchdogRecoversLostRunners(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.project(t, "dog")
	r1, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	r2, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	b.queue.Claim(ctx, r1.ID, "w")
	b.queue.Start(ctx, r1.ID, true)

	// A fresh heartbeat keeps the run alive.
	b.clock.Advance(50 * time.Second)
	b.queue.Heartbeat(ctx, r1.ID)
	b.clock.Advance(50 * time.Second)
	if rep, err := b.queue.RecoverLostRunners(ctx); err != nil || rep.Lost != 0 {
		t.Fatalf("live run declared lost: %+v %v", rep, err)
	}
	// A stale heartbeat: runner_lost, and the next run is promoted.
	b.clock.Advance(61 * time.Second)
	rep, err := b.queue.RecoverLostRunners(ctx)
	if err != nil || rep.Lost != 1 {
		t.Fatalf("stale heartbeat: %+v %v", rep, err)
	}
	lost := b.run(t, r1.ID)
	if lost.Status() != domain.StatusFailed || lost.FailureReason == nil || *lost.FailureReason != domain.ReasonRunnerLost {
		t.Fatalf("lost run: %s %v", lost.Status(), lost.FailureReason)
	}
	if b.run(t, r2.ID).State != domain.StateExecutable {
		t.Fatal("next run not promoted after runner loss")
	}
	// The lost executor's late reports are refused; its heartbeat tells it.
	if st, _ := b.queue.Heartbeat(ctx, r1.ID); st != domain.StateFailed {
		t.Fatalf("late heartbeat: %s", st)
	}

	// An executable run whose job still waits in River is not lost …
	b.clock.Advance(2 * time.Minute)
	if rep, _ := b.queue.RecoverLostRunners(ctx); rep.Lost != 0 {
		t.Fatal("an executable run waiting for a worker slot was declared lost")
	}
	// … but one whose job is gone is recovered.
	if _, err := b.db.Bun.NewRaw(`UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE id = ?`, *b.run(t, r2.ID).JobID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	r3, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	if rep, _ := b.queue.RecoverLostRunners(ctx); rep.Lost != 1 {
		t.Fatal("unclaimed executable run not recovered")
	}
	if got := b.run(t, r2.ID); got.Status() != domain.StatusFailed || *got.FailureReason != domain.ReasonRunnerLost {
		t.Fatalf("unclaimed run: %s", got.Status())
	}
	if b.run(t, r3.ID).State != domain.StateExecutable {
		t.Fatal("no promotion after recovering the unclaimed run")
	}

	// A lost run that was being canceled ends canceled.
	b.queue.Claim(ctx, r3.ID, "w")
	b.queue.RequestCancel(ctx, b.owner, r3.ID)
	b.clock.Advance(2 * time.Minute)
	b.queue.RecoverLostRunners(ctx)
	if got := b.run(t, r3.ID); got.Status() != domain.StatusCanceled || *got.FailureReason != domain.ReasonRunnerLost {
		t.Fatalf("lost cancel: %s", got.Status())
	}
}

// TestConcurrentSweepsTerminalizeOnce: every worker sweeps for lost runners,
// so several sweeps find the same stale run at once. Exactly one of them
// terminalizes it (one terminal transition, one runner_lost) and exactly
// one promotion follows (one execute_run job for the next run).
func TestConcurrentSweepsTerminalizeOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.project(t, "swept")
	r1, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	r2, _ := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	if _, _, err := b.queue.Claim(ctx, r1.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.queue.Start(ctx, r1.ID, true); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	terminal := map[string]int{}
	b.queue.OnTerminal(func(ctx context.Context, tx bun.Tx, r *domain.Run) error {
		mu.Lock()
		terminal[r.ID.String()]++
		mu.Unlock()
		return nil
	})
	b.clock.Advance(2 * time.Minute)

	const sweepers = 8
	start := make(chan struct{})
	reports := make([]domain.WatchdogReport, sweepers)
	errs := make([]error, sweepers)
	var wg sync.WaitGroup
	for i := range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			reports[i], errs[i] = b.queue.RecoverLostRunners(ctx)
		}()
	}
	close(start)
	wg.Wait()
	lost := 0
	for i := range sweepers {
		if errs[i] != nil {
			t.Fatalf("sweep %d: %v", i, errs[i])
		}
		lost += reports[i].Lost
	}
	if lost != 1 || terminal[r1.ID.String()] != 1 || len(terminal) != 1 {
		t.Fatalf("%d sweeps declared %d losses, terminal transitions %v; want exactly one", sweepers, lost, terminal)
	}
	if got := b.run(t, r1.ID); got.Status() != domain.StatusFailed || *got.FailureReason != domain.ReasonRunnerLost {
		t.Fatalf("lost run: %s %v", got.Status(), got.FailureReason)
	}
	if got := b.run(t, r2.ID); got.State != domain.StateExecutable {
		t.Fatalf("next run: %s, want executable", got.State)
	}
	var jobs int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'execute_run' AND args->>'run_id' = ?`, r2.ID.String()).Scan(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 {
		t.Fatalf("the next run was promoted with %d execute_run jobs, want 1", jobs)
	}
}

// activeIndexRE names the partial indexes that hold the active runs only.
var activeIndexRE = regexp.MustCompile(`(Index|Index Only) Scan (using|on) project_runs_(live|open|one_active)\b`)

// TestLostRunSweepReadsOnlyActiveRuns: the sweep runs about once a second in
// every worker, so it must not read a project's history: its plan uses the
// partial indexes of active runs, never a scan of project_runs.
func TestLostRunSweepReadsOnlyActiveRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.project(t, "history")
	// A history of finished runs, and statistics that know it.
	if _, err := b.db.Bun.NewRaw(`INSERT INTO project_runs (id, project_id, org_id, state, trigger, branch, d1_sync_status, queued_at, finished_at, updated_at, number)
		SELECT gen_random_uuid(), ?, ?, 'passed', 'manual', 'main', 'done', now(), now(), now(), g FROM generate_series(1, 20000) g`, p.ID, p.OrgID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Bun.NewRaw(`ANALYZE project_runs`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var plan []string
	if err := b.db.Bun.NewRaw(`EXPLAIN `+domain.LostRunsSQL, time.Now(), time.Now()).Scan(ctx, &plan); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan on project_runs") || !activeIndexRE.MatchString(text) {
		t.Fatalf("the sweep does not read through the active runs' index:\n%s", text)
	}
}
