package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain/erasure"
)

// EraseOrganizationWorker removes a deleted organisation: its projects,
// then its own rows (docs/erasure.md).
type EraseOrganizationWorker struct {
	river.WorkerDefaults[erasure.EraseOrganizationArgs]
	erasure *erasure.Service
	log     *slog.Logger
	// prune removes the repository mirrors and caches of projects that
	// are gone.
	prune func(context.Context)
}

// Timeout bounds one attempt beyond the erasure's own budget per pass.
func (w *EraseOrganizationWorker) Timeout(*river.Job[erasure.EraseOrganizationArgs]) time.Duration {
	return 5 * time.Minute
}

// Work runs one pass and snoozes until the organisation is gone.
func (w *EraseOrganizationWorker) Work(ctx context.Context, job *river.Job[erasure.EraseOrganizationArgs]) error {
	rep, err := w.erasure.EraseOrganization(ctx, job.Args.OrgID)
	if w.prune != nil {
		w.prune(ctx) // its projects are tombstoned by now
	}
	return eraseOutcome(w.log, "organization", job.Args.OrgID.String(), rep, err, erasure.ErrLiveOrganization)
}
