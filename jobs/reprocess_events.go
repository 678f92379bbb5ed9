package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/feed"
)

// ReprocessEventsWorker maps an incident's latest events again once their
// source maps exist (docs/sourcemap.md, "Re-processing").
type ReprocessEventsWorker struct {
	river.WorkerDefaults[domain.ReprocessEventsArgs]
	feed *feed.Feed
}

// Timeout bounds one re-process: at most feed.ReprocessLatest events, each
// within symbolication's own bounds.
func (w *ReprocessEventsWorker) Timeout(*river.Job[domain.ReprocessEventsArgs]) time.Duration {
	return 2 * time.Minute
}

// Work re-processes the incident's latest events.
func (w *ReprocessEventsWorker) Work(ctx context.Context, job *river.Job[domain.ReprocessEventsArgs]) error {
	_, err := w.feed.Reprocess(ctx, job.Args.IncidentID)
	return err
}
