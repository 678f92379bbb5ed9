package run_test

import (
	"context"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"anvil/domain/run"
)

func TestSyncStatusTransitions(t *testing.T) {
	t.Parallel()
	all := []string{run.SyncNeedsCreate, run.SyncCurrent, run.SyncNeedsUpdate, run.SyncNeedsTerminalUpdate, run.SyncDone}
	allowed := map[[2]string]bool{
		{"needs_create", "current"}: true, {"needs_create", "needs_update"}: true, {"needs_create", "needs_terminal_update"}: true,
		{"current", "needs_update"}: true, {"current", "needs_terminal_update"}: true,
		{"needs_update", "current"}: true, {"needs_update", "needs_terminal_update"}: true,
		{"needs_terminal_update", "done"}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := run.SyncTransitionAllowed(from, to); got != allowed[[2]string{from, to}] {
				t.Errorf("%s → %s: allowed=%v, want %v", from, to, got, allowed[[2]string{from, to}])
			}
		}
	}
}

// indexRow reads run_index as a comparable string.
func indexRow(t *testing.T, b *testBundle, r *run.Run) string {
	t.Helper()
	var status, sha, reason string
	var code int
	var started, finished time.Time
	err := b.DB.Bun.NewRaw(`SELECT status, COALESCE(commit_sha, ''), COALESCE(exit_code, -1), COALESCE(failure_reason, ''),
		COALESCE(started_at, 'epoch'), COALESCE(finished_at, 'epoch') FROM run_index WHERE run_id = ?`, r.ID).
		Scan(context.Background(), &status, &sha, &code, &reason, &started, &finished)
	if err != nil {
		return "missing: " + err.Error()
	}
	return status + "|" + sha + "|" + itoa(code) + "|" + reason + "|" + started.UTC().Format(time.RFC3339Nano) + "|" + finished.UTC().Format(time.RFC3339Nano)
}

func truthRow(r *run.Run) string {
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
	p := b.Project(t, "sync")
	var snaps []*run.Run
	r, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	snaps = append(snaps, b.Run(t, r.ID))
	b.Clock.Advance(time.Second)
	b.Queue.Claim(ctx, r.ID, "w")
	snaps = append(snaps, b.Run(t, r.ID))
	b.Clock.Advance(time.Second)
	b.Queue.Start(ctx, r.ID, true)
	snaps = append(snaps, b.Run(t, r.ID))
	b.Queue.BackfillCommit(ctx, r.ID, "89abcdef0123456789abcdef0123456789abcdef")
	snaps = append(snaps, b.Run(t, r.ID))
	b.Clock.Advance(time.Second)
	code := 2
	if _, err := b.Queue.ReportTerminal(ctx, r.ID, run.TerminalReport{State: run.StateFailed, ExitCode: &code, FailureReason: run.ReasonExitCode}); err != nil {
		t.Fatal(err)
	}
	final := b.Run(t, r.ID)
	snaps = append(snaps, final)
	for round := 0; round < 30; round++ {
		if _, err := b.DB.Bun.NewRaw(`DELETE FROM run_index WHERE run_id = ?`, r.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		seq := append([]*run.Run{}, snaps...)
		for i := 0; i < 4; i++ { // duplicates
			seq = append(seq, snaps[rand.IntN(len(snaps))])
		}
		rand.Shuffle(len(seq), func(i, j int) { seq[i], seq[j] = seq[j], seq[i] })
		for _, s := range seq {
			if err := run.UpsertIndex(ctx, b.DB.Bun, s); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := indexRow(t, b, final), truthRow(final); got != want {
			t.Fatalf("round %d: run_index %q, truth %q", round, got, want)
		}
	}
	// A backfilled SHA is never replaced by NULL from an older snapshot.
	if err := run.UpsertIndex(ctx, b.DB.Bun, snaps[0]); err != nil {
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
	p := b.Project(t, "conv")
	r, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	reconcileMany := func() {
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := b.Queue.Reconcile(ctx, r.ID); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	check := func(stage, wantSync string) {
		t.Helper()
		cur := b.Run(t, r.ID)
		if got, want := indexRow(t, b, cur), truthRow(cur); got != want {
			t.Fatalf("%s: run_index %q, truth %q", stage, got, want)
		}
		if cur.SyncStatus != wantSync {
			t.Fatalf("%s: d1_sync_status %s, want %s", stage, cur.SyncStatus, wantSync)
		}
	}
	// Acceptance syncs the queued row in its own transaction (needs_create →
	// current); replays change nothing.
	check("accepted", run.SyncCurrent)
	reconcileMany()
	check("accepted, replayed", run.SyncCurrent)
	b.Queue.Claim(ctx, r.ID, "w")
	if cur := b.Run(t, r.ID); cur.SyncStatus != run.SyncNeedsUpdate {
		t.Fatalf("claimed: %s", cur.SyncStatus)
	}
	b.Queue.Start(ctx, r.ID, true)
	b.Queue.BackfillCommit(ctx, r.ID, "89abcdef0123456789abcdef0123456789abcdef")
	reconcileMany()
	check("running", run.SyncCurrent)
	code := 0
	b.Queue.ReportTerminal(ctx, r.ID, run.TerminalReport{State: run.StatePassed, ExitCode: &code})
	if cur := b.Run(t, r.ID); cur.SyncStatus != run.SyncNeedsTerminalUpdate {
		t.Fatalf("terminal: %s", cur.SyncStatus)
	}
	reconcileMany()
	check("terminal", run.SyncDone)
	reconcileMany()
	check("replayed after done", run.SyncDone)

	// A run canceled while queued: current → needs_terminal_update → done.
	r2, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	b.Queue.RequestCancel(ctx, b.Owner, r2.ID)
	if cur := b.Run(t, r2.ID); cur.SyncStatus != run.SyncNeedsTerminalUpdate {
		t.Fatalf("canceled while queued: %s", cur.SyncStatus)
	}
	r = r2
	reconcileMany()
	check("canceled while queued", run.SyncDone)
}

func TestWatchdogRecoversLostRunners(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.Project(t, "dog")
	r1, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	r2, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	b.Queue.Claim(ctx, r1.ID, "w")
	b.Queue.Start(ctx, r1.ID, true)
	// A service of its pod, ready: the pod dies with the worker.
	if _, err := b.DB.Bun.NewRaw(`INSERT INTO run_services (run_id, name, seq, status) VALUES (?, 'db', 0, 'ready')`, r1.ID).Exec(ctx); err != nil {
		t.Fatal(err)
	}

	// A fresh heartbeat keeps the run alive.
	b.Clock.Advance(50 * time.Second)
	b.Queue.Heartbeat(ctx, r1.ID)
	b.Clock.Advance(50 * time.Second)
	if rep, err := b.Queue.RecoverLostRunners(ctx); err != nil || rep.Lost != 0 {
		t.Fatalf("live run declared lost: %+v %v", rep, err)
	}
	// A stale heartbeat: runner_lost, and the next run is promoted.
	b.Clock.Advance(61 * time.Second)
	rep, err := b.Queue.RecoverLostRunners(ctx)
	if err != nil || rep.Lost != 1 {
		t.Fatalf("stale heartbeat: %+v %v", rep, err)
	}
	lost := b.Run(t, r1.ID)
	if lost.Status() != run.StatusFailed || lost.FailureReason == nil || *lost.FailureReason != run.ReasonRunnerLost {
		t.Fatalf("lost run: %s %v", lost.Status(), lost.FailureReason)
	}
	if b.Run(t, r2.ID).State != run.StateExecutable {
		t.Fatal("next run not promoted after runner loss")
	}
	var svc struct {
		Status string `bun:"status"`
		Reason string `bun:"reason"`
	}
	if err := b.DB.Bun.NewRaw(`SELECT status, reason FROM run_services WHERE run_id = ?`, r1.ID).Scan(ctx, &svc); err != nil ||
		svc.Status != run.ServiceStopped || !strings.Contains(svc.Reason, "worker running the run was lost") {
		t.Fatalf("the lost run's service: %+v %v", svc, err)
	}
	// The lost executor's late reports are refused; its heartbeat tells it.
	if st, _ := b.Queue.Heartbeat(ctx, r1.ID); st != run.StateFailed {
		t.Fatalf("late heartbeat: %s", st)
	}

	// An executable run whose job still waits in River is not lost …
	b.Clock.Advance(2 * time.Minute)
	if rep, _ := b.Queue.RecoverLostRunners(ctx); rep.Lost != 0 {
		t.Fatal("an executable run waiting for a worker slot was declared lost")
	}
	// … but one whose job is gone is recovered.
	if _, err := b.DB.Bun.NewRaw(`UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE id = ?`, *b.Run(t, r2.ID).JobID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	r3, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	if rep, _ := b.Queue.RecoverLostRunners(ctx); rep.Lost != 1 {
		t.Fatal("unclaimed executable run not recovered")
	}
	if got := b.Run(t, r2.ID); got.Status() != run.StatusFailed || *got.FailureReason != run.ReasonRunnerLost {
		t.Fatalf("unclaimed run: %s", got.Status())
	}
	if b.Run(t, r3.ID).State != run.StateExecutable {
		t.Fatal("no promotion after recovering the unclaimed run")
	}

	// A lost run that was being canceled ends canceled.
	b.Queue.Claim(ctx, r3.ID, "w")
	b.Queue.RequestCancel(ctx, b.Owner, r3.ID)
	b.Clock.Advance(2 * time.Minute)
	b.Queue.RecoverLostRunners(ctx)
	if got := b.Run(t, r3.ID); got.Status() != run.StatusCanceled || *got.FailureReason != run.ReasonRunnerLost {
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
	p := b.Project(t, "swept")
	r1, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	r2, _ := b.Queue.AcceptManual(ctx, b.Owner, p.ID, "")
	if _, _, err := b.Queue.Claim(ctx, r1.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Queue.Start(ctx, r1.ID, true); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	terminal := map[string]int{}
	b.Queue.OnTerminal(func(ctx context.Context, tx bun.Tx, r *run.Run) error {
		mu.Lock()
		terminal[r.ID.String()]++
		mu.Unlock()
		return nil
	})
	b.Clock.Advance(2 * time.Minute)

	const sweepers = 8
	start := make(chan struct{})
	reports := make([]run.WatchdogReport, sweepers)
	errs := make([]error, sweepers)
	var wg sync.WaitGroup
	for i := range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			reports[i], errs[i] = b.Queue.RecoverLostRunners(ctx)
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
	if got := b.Run(t, r1.ID); got.Status() != run.StatusFailed || *got.FailureReason != run.ReasonRunnerLost {
		t.Fatalf("lost run: %s %v", got.Status(), got.FailureReason)
	}
	if got := b.Run(t, r2.ID); got.State != run.StateExecutable {
		t.Fatalf("next run: %s, want executable", got.State)
	}
	var jobs int
	if err := b.DB.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = 'execute_run' AND args->>'run_id' = ?`, r2.ID.String()).Scan(ctx, &jobs); err != nil {
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
	p := b.Project(t, "history")
	// A history of finished runs, and statistics that know it.
	if _, err := b.DB.Bun.NewRaw(`INSERT INTO project_runs (id, project_id, org_id, state, trigger, branch, d1_sync_status, queued_at, finished_at, updated_at, number)
		SELECT gen_random_uuid(), ?, ?, 'passed', 'manual', 'main', 'done', now(), now(), now(), g FROM generate_series(1, 20000) g`, p.ID, p.OrgID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DB.Bun.NewRaw(`ANALYZE project_runs`).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var plan []string
	if err := b.DB.Bun.NewRaw(`EXPLAIN `+run.LostRunsSQL, time.Now(), time.Now()).Scan(ctx, &plan); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan on project_runs") || !activeIndexRE.MatchString(text) {
		t.Fatalf("the sweep does not read through the active runs' index:\n%s", text)
	}
}
