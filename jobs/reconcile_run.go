package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/run"
)

// ReconcileRunWorker brings a run's run_index row up to date.
type ReconcileRunWorker struct {
	river.WorkerDefaults[domain.ReconcileRunArgs]
	queue *run.Queue
}

// Timeout bounds one reconciliation.
func (w *ReconcileRunWorker) Timeout(*river.Job[domain.ReconcileRunArgs]) time.Duration {
	return 30 * time.Second
}

// Work upserts the truth. A change that lands while this job runs cannot
// enqueue a second copy (the job is unique while running), so the worker
// goes round again until the run is in sync; the watchdog's sweep covers
// the last instant between this check and River completing the job.
func (w *ReconcileRunWorker) Work(ctx context.Context, job *river.Job[domain.ReconcileRunArgs]) error {
	for i := 0; i < 5; i++ {
		pending, err := w.queue.Reconcile(ctx, job.Args.RunID)
		if err != nil || !pending {
			return err
		}
	}
	return nil
}
