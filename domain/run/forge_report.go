package run

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// enqueueStatusTx enqueues the status report of a run that has a commit.
// Whether the project has a forge is the worker's business: it knows it
// cheaply, and the change's transaction need not read the project.
func (q *Queue) enqueueStatusTx(ctx context.Context, tx bun.Tx, r *Run) error {
	if r.CommitSHA == nil {
		return nil
	}
	if err := q.s.InsertJob(ctx, tx, domain.ReportStatusArgs{RunID: r.ID, Status: r.Status()}); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

// enqueueStatusesTx enqueues the status reports of newly accepted runs in
// projects with a forge.
func (q *Queue) enqueueStatusesTx(ctx context.Context, tx bun.Tx, runs []*Run, projects map[uuid.UUID]*domain.Project) error {
	var params []river.InsertManyParams
	for _, r := range runs {
		if p := projects[r.ProjectID]; r.CommitSHA != nil && p != nil && p.Provider != "" {
			params = append(params, river.InsertManyParams{Args: domain.ReportStatusArgs{RunID: r.ID, Status: r.Status()}})
		}
	}
	if len(params) == 0 {
		return nil
	}
	if q.s.Jobs() == nil {
		return fmt.Errorf("domain: no job inserter configured for report_status")
	}
	if _, err := q.s.Jobs().InsertManyTx(ctx, tx.Tx, params); err != nil {
		return fmt.Errorf("enqueue status reports: %w", err)
	}
	return nil
}
