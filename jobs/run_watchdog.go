package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/run"
)

// RunWatchdogWorker re-syncs the read model where it fell behind. It is a
// periodic job, so only River's leader runs it — which is fine for a
// catch-up that is never urgent, and why lost runners are recovered by
// every worker's LostRunnerSweeper instead.
type RunWatchdogWorker struct {
	river.WorkerDefaults[domain.WatchdogArgs]
	queue *run.Queue
	log   *slog.Logger
}

// Timeout bounds one pass.
func (w *RunWatchdogWorker) Timeout(*river.Job[domain.WatchdogArgs]) time.Duration {
	return time.Minute
}

// Work runs one pass.
func (w *RunWatchdogWorker) Work(ctx context.Context, _ *river.Job[domain.WatchdogArgs]) error {
	n, err := w.queue.SweepUnsynced(ctx, 5*time.Second)
	if n > 0 {
		w.log.Info("run watchdog", "resynced", n)
	}
	return err
}

// watchdogInterval is how often the leader re-syncs the read model.
func watchdogInterval(timeout time.Duration) time.Duration {
	iv := timeout / 5
	if iv < time.Second {
		iv = time.Second
	}
	if iv > 15*time.Second {
		iv = 15 * time.Second
	}
	return iv
}
