package jobs_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"anvil/domain/run"
	"anvil/jobs"
	"anvil/jobs/sandbox"
)

// countingExecutor counts the commands the workers start.
type countingExecutor struct {
	sandbox.Executor
	runs atomic.Int32
}

func (c *countingExecutor) Run(ctx context.Context, spec sandbox.Spec, out io.Writer) (sandbox.Result, error) {
	c.runs.Add(1)
	return c.Executor.Run(ctx, spec, out)
}

func TestSweepInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ timeout, want time.Duration }{
		{60 * time.Second, time.Second},
		{5 * time.Second, time.Second},
		{2 * time.Second, 500 * time.Millisecond},
		{200 * time.Millisecond, 100 * time.Millisecond},
	} {
		if got := jobs.SweepInterval(c.timeout); got != c.want {
			t.Errorf("SweepInterval(%s) = %s, want %s", c.timeout, got, c.want)
		}
	}
}

// TestRescuedJobOfALostRunIsANoOp: a worker dies while its run executes;
// the sweeper declares the runner lost. The dead worker's execute_run job
// stays `running` in River until River's rescuer hands it out again — and
// that attempt, worked by the real worker, must end at once: no sandbox,
// no change of the run, no log line. A terminal run never executes again.
func TestRescuedJobOfALostRunIsANoOp(t *testing.T) {
	t.Parallel()
	exe := &countingExecutor{}
	b := setup(t, options{mode: "process", heartbeatTimeout: time.Second, idle: true,
		wrap: func(e sandbox.Executor) sandbox.Executor { exe.Executor = e; return exe }})
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	p := b.project(t, "rescued", repo, "echo executed", 0)
	r := accept(t, b, p)
	jobID := *b.run(t, r.ID).JobID

	// The dead worker: it fetched the job (River marked it running) and
	// claimed and started the run; then it vanished without a word.
	if _, err := b.db.Bun.NewRaw(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = ARRAY['dead-worker'] WHERE id = ?`, jobID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.queue.Claim(ctx, r.ID, "dead-worker"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.queue.Start(ctx, r.ID, false); err != nil {
		t.Fatal(err)
	}

	// This process's sweeper declares the runner lost.
	b.sweeper.Start(ctx)
	lost := b.waitTerminal(t, r.ID, 15*time.Second)
	if lost.Status() != run.StatusFailed || lost.FailureReason == nil || *lost.FailureReason != run.ReasonRunnerLost {
		t.Fatalf("lost run: %s %v", lost.Status(), lost.FailureReason)
	}
	logBefore := b.logText(t, r.ID)

	// River's rescuer returns the stuck job for another attempt (it makes
	// it retryable and the scheduler makes that available; here in one
	// step), and a real River client with the real workers works it.
	if _, err := b.db.Bun.NewRaw(`UPDATE river_job SET state = 'available', scheduled_at = now() WHERE id = ?`, jobID).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.river.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var state string
	var attempt int
	waitFor(t, 30*time.Second, "the rescued job to be worked", func() bool {
		_ = b.db.Bun.NewRaw(`SELECT state, attempt FROM river_job WHERE id = ?`, jobID).Scan(ctx, &state, &attempt)
		return state == "completed" || state == "discarded" || state == "retryable"
	})
	if state != "completed" || attempt != 2 {
		t.Fatalf("rescued job: %s after attempt %d, want completed after attempt 2", state, attempt)
	}
	if n := exe.runs.Load(); n != 0 {
		t.Fatalf("the rescued job started %d commands for a terminal run", n)
	}
	after := b.run(t, r.ID)
	if after.State != lost.State || *after.FailureReason != *lost.FailureReason || !after.FinishedAt.Equal(*lost.FinishedAt) ||
		!after.UpdatedAt.Equal(lost.UpdatedAt) || *after.Executor != "dead-worker" || after.ExitCode != nil {
		t.Fatalf("the rescued job changed the run:\nbefore %+v\nafter  %+v", lost, after)
	}
	if got := b.logText(t, r.ID); got != logBefore {
		t.Fatalf("the rescued job wrote to the run's log:\n%q\nwas\n%q", got, logBefore)
	}
}
