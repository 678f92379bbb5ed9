package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/feed"
)

// FoldDeltasWorker folds the incident deltas no process has folded yet —
// those of a web process that died between its commit and its fold
// (docs/feed.md, "The write path and its costs").
type FoldDeltasWorker struct {
	river.WorkerDefaults[domain.FoldDeltasArgs]
	feed *feed.Feed
	log  *slog.Logger
}

// Timeout bounds one fold.
func (w *FoldDeltasWorker) Timeout(*river.Job[domain.FoldDeltasArgs]) time.Duration {
	return time.Minute
}

// Work folds every delta stored.
func (w *FoldDeltasWorker) Work(ctx context.Context, _ *river.Job[domain.FoldDeltasArgs]) error {
	n, err := w.feed.FoldDeltas(ctx)
	if n > 0 {
		w.log.Debug("periodic fold", "deltas", n)
	}
	return err
}
