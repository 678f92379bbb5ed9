package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/forgestatus"
)

// ReportStatusWorker posts a run's latest state to its forge as a commit
// status. What it posts and when it stops is domain/forgestatus's; here
// only River's answer is chosen: a rate limit snoozes until the forge's
// time, a 5xx or network error retries with back-off, a refusal (4xx)
// stops. Nothing here touches the run.
type ReportStatusWorker struct {
	river.WorkerDefaults[domain.ReportStatusArgs]
	reporter *forgestatus.Reporter
}

// Timeout bounds one job: a few posts through the per-host semaphore.
func (w *ReportStatusWorker) Timeout(*river.Job[domain.ReportStatusArgs]) time.Duration {
	return 2 * time.Minute
}

// NextRetry backs off 2 s, 4 s, 8 s … up to 10 min, and tells the run page.
func (w *ReportStatusWorker) NextRetry(job *river.Job[domain.ReportStatusArgs]) time.Time {
	d := time.Second << min(job.Attempt, 10)
	if d > 10*time.Minute {
		d = 10 * time.Minute
	}
	at := time.Now().Add(d)
	w.reporter.RetryAt(context.Background(), job.Args.RunID, at)
	return at
}

// Work posts.
func (w *ReportStatusWorker) Work(ctx context.Context, job *river.Job[domain.ReportStatusArgs]) error {
	err := w.reporter.Report(ctx, job.Args.RunID)
	var pe *forgestatus.PostError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, forgestatus.ErrBusy):
		return river.JobSnooze(200 * time.Millisecond)
	case errors.As(err, &pe) && !pe.RetryAt.IsZero():
		return river.JobSnooze(max(time.Until(pe.RetryAt), 100*time.Millisecond))
	case errors.As(err, &pe) && !pe.Transient:
		w.reporter.GiveUp(ctx, job.Args.RunID)
		return river.JobCancel(err)
	}
	return err
}

// NewReportStatusWorker builds the worker on the process's reporter.
func NewReportStatusWorker(r *forgestatus.Reporter) *ReportStatusWorker {
	return &ReportStatusWorker{reporter: r}
}
