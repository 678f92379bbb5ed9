package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
)

// RunWatchdogWorker recovers runs whose runner was lost and re-syncs the
// read model where it fell behind.
type RunWatchdogWorker struct {
	river.WorkerDefaults[domain.WatchdogArgs]
	queue *domain.Queue
	log   *slog.Logger
}

// Timeout bounds one pass.
func (w *RunWatchdogWorker) Timeout(*river.Job[domain.WatchdogArgs]) time.Duration {
	return time.Minute
}

// Work runs one pass.
func (w *RunWatchdogWorker) Work(ctx context.Context, _ *river.Job[domain.WatchdogArgs]) error {
	rep, err := w.queue.Watchdog(ctx)
	if rep.Lost > 0 || rep.Resynced > 0 {
		w.log.Info("run watchdog", "lost", rep.Lost, "resynced", rep.Resynced)
	}
	return err
}

// watchdogInterval checks several times per timeout, so that a lost runner
// is recovered within about 1.2 × ANVIL_HEARTBEAT_TIMEOUT.
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
