package domain

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"
)

// ReportStatusArgs posts a run's latest state to its forge as a commit
// status (domain/forgestatus, jobs.ReportStatusWorker). It is inserted in
// the transaction that changes the run, so no change goes unreported.
//
// Unique per run and public status while waiting or running: a burst of
// changes to one status coalesces, while a change to a new status always
// gets a job even when the previous one is still posting (River keeps
// running jobs unique too). Which one posts what is decided by the worker,
// which always posts the run's state as it is then.
type ReportStatusArgs struct {
	RunID  uuid.UUID `json:"run_id" river:"unique"`
	Status string    `json:"status" river:"unique"`
}

// Kind implements river.JobArgs.
func (ReportStatusArgs) Kind() string { return "report_status" }

// InsertOpts retries a forge that is down for about a day with River's
// back-off; rate limits snooze rather than count as attempts.
func (ReportStatusArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 12, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// enqueueStatusTx enqueues the status report of a run that has a commit.
// Whether the project has a forge is the worker's business: it knows it
// cheaply, and the change's transaction need not read the project.
func (q *Queue) enqueueStatusTx(ctx context.Context, tx bun.Tx, r *Run) error {
	if r.CommitSHA == nil {
		return nil
	}
	if err := q.s.insertJob(ctx, tx, ReportStatusArgs{RunID: r.ID, Status: r.Status()}); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

// enqueueStatusesTx enqueues the status reports of newly accepted runs in
// projects with a forge.
func (q *Queue) enqueueStatusesTx(ctx context.Context, tx bun.Tx, runs []*Run, projects map[uuid.UUID]*Project) error {
	var params []river.InsertManyParams
	for _, r := range runs {
		if p := projects[r.ProjectID]; r.CommitSHA != nil && p != nil && p.Provider != "" {
			params = append(params, river.InsertManyParams{Args: ReportStatusArgs{RunID: r.ID, Status: r.Status()}})
		}
	}
	if len(params) == 0 {
		return nil
	}
	if q.s.jobs == nil {
		return fmt.Errorf("domain: no job inserter configured for report_status")
	}
	if _, err := q.s.jobs.InsertManyTx(ctx, tx.Tx, params); err != nil {
		return fmt.Errorf("enqueue status reports: %w", err)
	}
	return nil
}
