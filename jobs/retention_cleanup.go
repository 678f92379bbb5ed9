package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain/retention"
)

// RetentionCleanupEvery is how often the clean-up runs (docs/retention.md).
const RetentionCleanupEvery = 15 * time.Minute

// RetentionCleanupWorker enforces the retention policies (docs/retention.md,
// "How clean-up works").
type RetentionCleanupWorker struct {
	river.WorkerDefaults[retention.CleanupArgs]
	retention *retention.Service
	log       *slog.Logger
}

// Timeout bounds one clean-up; one that runs out is retried and, deciding
// only from the data, goes on where the last one stopped.
func (w *RetentionCleanupWorker) Timeout(*river.Job[retention.CleanupArgs]) time.Duration {
	return time.Hour
}

// Work runs one clean-up.
func (w *RetentionCleanupWorker) Work(ctx context.Context, _ *river.Job[retention.CleanupArgs]) error {
	rep, err := w.retention.Cleanup(ctx)
	if !rep.Total.Zero() && w.log != nil {
		w.log.Info("retention clean-up", "removed", rep.Total.String(), "duration", time.Since(rep.Started))
	}
	return err
}
