package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/incident"
)

// RefreshCardWorker replaces a project's production card from the incident
// store. It is a job of its own so that a card that cannot be written never
// fails the ingest, the decision or the repair that asked for it.
type RefreshCardWorker struct {
	river.WorkerDefaults[domain.RefreshCardArgs]
	cards *card.Cards
}

// Timeout bounds one refresh (a single statement).
func (w *RefreshCardWorker) Timeout(*river.Job[domain.RefreshCardArgs]) time.Duration {
	return 30 * time.Second
}

// Work refreshes the card.
func (w *RefreshCardWorker) Work(ctx context.Context, job *river.Job[domain.RefreshCardArgs]) error {
	return w.cards.Refresh(ctx, job.Args.ProjectID)
}

// RefreshCardAgainWorker is the follow-up refresh (see
// domain.RefreshCardAgainArgs).
type RefreshCardAgainWorker struct {
	river.WorkerDefaults[domain.RefreshCardAgainArgs]
	cards *card.Cards
}

// Work refreshes the card.
func (w *RefreshCardAgainWorker) Work(ctx context.Context, job *river.Job[domain.RefreshCardAgainArgs]) error {
	return w.cards.Refresh(ctx, job.Args.ProjectID)
}

// DispatchRepairWorker accepts the repair run of an incident the `auto`
// policy queued.
type DispatchRepairWorker struct {
	river.WorkerDefaults[domain.DispatchRepairArgs]
	incidents *incident.Incidents
}

// Work dispatches the repair.
func (w *DispatchRepairWorker) Work(ctx context.Context, job *river.Job[domain.DispatchRepairArgs]) error {
	return w.incidents.DispatchRepair(ctx, job.Args.IncidentID)
}
