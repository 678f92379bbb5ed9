package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// upsertIndexSQL is the idempotent reconciliation of
// docs/architecture.md ("Runs and the read model"): an
// upsert of the current truth by run_id. A non-terminal upsert never
// regresses a terminal row (status, started_at, finished_at, exit_code and
// failure_reason keep their terminal values), and commit_sha is never
// overwritten with NULL.
const upsertIndexSQL = `
INSERT INTO run_index AS ri (run_id, project_id, org_id, status, trigger, branch, commit_sha, exit_code,
                             failure_reason, queued_at, started_at, finished_at, synced_at, number)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?)
ON CONFLICT (run_id) DO UPDATE SET
    status         = CASE WHEN ri.status IN ('passed', 'failed', 'canceled') AND EXCLUDED.status NOT IN ('passed', 'failed', 'canceled')
                          THEN ri.status ELSE EXCLUDED.status END,
    started_at     = CASE WHEN ri.status IN ('passed', 'failed', 'canceled') AND EXCLUDED.status NOT IN ('passed', 'failed', 'canceled')
                          THEN ri.started_at ELSE COALESCE(EXCLUDED.started_at, ri.started_at) END,
    finished_at    = CASE WHEN ri.status IN ('passed', 'failed', 'canceled') AND EXCLUDED.status NOT IN ('passed', 'failed', 'canceled')
                          THEN ri.finished_at ELSE EXCLUDED.finished_at END,
    exit_code      = CASE WHEN ri.status IN ('passed', 'failed', 'canceled') AND EXCLUDED.status NOT IN ('passed', 'failed', 'canceled')
                          THEN ri.exit_code ELSE EXCLUDED.exit_code END,
    failure_reason = CASE WHEN ri.status IN ('passed', 'failed', 'canceled') AND EXCLUDED.status NOT IN ('passed', 'failed', 'canceled')
                          THEN ri.failure_reason ELSE EXCLUDED.failure_reason END,
    commit_sha     = COALESCE(EXCLUDED.commit_sha, ri.commit_sha),
    branch         = EXCLUDED.branch,
    synced_at      = now()`

// UpsertIndex writes one snapshot of a run into run_index. Exported for the
// tests that replay, reorder and duplicate snapshots.
func UpsertIndex(ctx context.Context, db bun.IDB, r *Run) error {
	_, err := db.NewRaw(upsertIndexSQL, r.ID, r.ProjectID, r.OrgID, r.Status(), r.Trigger, r.Branch, r.CommitSHA,
		r.ExitCode, r.FailureReason, r.QueuedAt, r.StartedAt, r.FinishedAt, r.Number).Exec(ctx)
	if err != nil {
		return fmt.Errorf("upsert run_index %s: %w", r.ID, err)
	}
	return nil
}

// Reconcile upserts the run's current truth into run_index and moves its
// d1_sync_status (needs_create/needs_update → current, needs_terminal_update
// → done), under the project lock like every other queue write. It reports
// whether the run still needs another pass (never, unless a change raced).
func (q *Queue) Reconcile(ctx context.Context, runID uuid.UUID) (pending bool, err error) {
	err = q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		if r.SyncStatus == SyncDone || r.SyncStatus == SyncCurrent {
			return nil
		}
		if err := UpsertIndex(ctx, tx, r); err != nil {
			return err
		}
		next, ok := syncAfterReconcile(r.SyncStatus)
		if !ok || !SyncTransitionAllowed(r.SyncStatus, next) {
			return fmt.Errorf("reconcile %s: no move from %s", r.ID, r.SyncStatus)
		}
		if _, err := tx.NewRaw(`UPDATE project_runs SET d1_sync_status = ? WHERE id = ?`, next, r.ID).Exec(ctx); err != nil {
			return err
		}
		// Lists read run_index: tell them it moved.
		return q.publish(ctx, tx, r)
	})
	if err != nil {
		return false, err
	}
	var status string
	if err := q.s.DB.NewRaw(`SELECT d1_sync_status FROM project_runs WHERE id = ?`, runID).Scan(ctx, &status); err != nil {
		return false, err
	}
	return status != SyncCurrent && status != SyncDone, nil
}

// WatchdogReport says what one sweep for lost runners did.
type WatchdogReport struct {
	Lost       int
	CheckedAt  time.Time
	LostRunIDs []uuid.UUID
}

// lostRunsSQL finds the candidates of a sweep. Both branches name active
// states only, so Postgres answers them from the partial indexes of active
// runs (project_runs_live, project_runs_open): a sweep reads the handful
// of active runs and never the projects' history — every worker runs it
// about once a second.
const lostRunsSQL = `
	SELECT r.id FROM project_runs r
	WHERE r.state IN ('starting', 'running', 'cancel_requested', 'canceling') AND r.heartbeat_at < ?
	UNION ALL
	SELECT r.id FROM project_runs r
	LEFT JOIN river_job j ON j.id = r.job_id
	WHERE r.state = 'executable' AND r.promoted_at < ?
	  AND (j.id IS NULL OR j.state NOT IN ('available', 'scheduled', 'retryable', 'pending'))
	LIMIT 500`

// RecoverLostRunners declares lost runners (the recovery path of
// promotion, docs/architecture.md "Where each rule lives"): active runs without a heartbeat for the timeout, and
// executable runs that nothing claimed in that time while their execution
// job is no longer waiting in River, are terminalized by the service
// itself — failed with failure_reason runner_lost (canceled when a cancel
// was already under way) — and the next run is promoted.
//
// Every worker process calls it on its own ticker, so several may find the
// same run at once: each candidate is re-checked under the project lock,
// and only the first to get the lock terminalizes and promotes; the others
// find the run terminal and leave it alone.
func (q *Queue) RecoverLostRunners(ctx context.Context) (WatchdogReport, error) {
	now := q.s.Now()
	rep := WatchdogReport{CheckedAt: now}
	cutoff := now.Add(-q.heartbeatTimeout)
	var ids []uuid.UUID
	if err := q.s.DB.NewRaw(lostRunsSQL, cutoff, cutoff).Scan(ctx, &ids); err != nil {
		return rep, fmt.Errorf("watchdog: find lost runs: %w", err)
	}
	for _, id := range ids {
		lost := false
		err := q.withRun(ctx, id, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
			// Re-check under the lock: a heartbeat, a claim or another
			// worker's sweep may have won.
			switch {
			case r.State == StateExecutable:
				if r.PromotedAt == nil || !r.PromotedAt.Before(cutoff) {
					return nil
				}
				var waiting bool
				if r.JobID != nil {
					if err := tx.NewRaw(`SELECT EXISTS (SELECT 1 FROM river_job WHERE id = ? AND state IN ('available', 'scheduled', 'retryable', 'pending'))`, *r.JobID).Scan(ctx, &waiting); err != nil {
						return err
					}
				}
				if waiting {
					return nil
				}
			case isActive(r.State):
				if r.HeartbeatAt != nil && !r.HeartbeatAt.Before(cutoff) {
					return nil
				}
			default:
				return nil
			}
			state := StateFailed
			if r.State == StateCancelRequested || r.State == StateCanceling {
				state = StateCanceled
			}
			lost = true
			if err := q.terminalizeTx(ctx, tx, p, r, TerminalReport{State: state, FailureReason: ReasonRunnerLost}); err != nil {
				return err
			}
			// Its pods died with the worker (docs/images.md, "Services"):
			// their services say so rather than starting or ready forever.
			_, err := tx.NewRaw(`UPDATE run_services SET status = CASE status WHEN 'ready' THEN 'stopped' ELSE 'canceled' END,
				reason = 'the worker running the run was lost; its pod ended with it', finished_at = ?
				WHERE run_id = ? AND status IN ('starting', 'ready')`, now, r.ID).Exec(ctx)
			return err
		})
		if errors.Is(err, domain.ErrNotFound) {
			continue // deleted with its project meanwhile
		}
		if err != nil {
			return rep, fmt.Errorf("watchdog: recover run %s: %w", id, err)
		}
		if lost {
			rep.Lost++
			rep.LostRunIDs = append(rep.LostRunIDs, id)
			q.s.Log.Warn("runner lost; run terminalized by the watchdog", "run_id", id)
		}
	}
	return rep, nil
}

// SweepUnsynced re-enqueues reconciliation of runs whose read model has
// been behind for longer than age: a change that raced a running unique
// reconcile job of the same target could not enqueue its own.
func (q *Queue) SweepUnsynced(ctx context.Context, age time.Duration) (int, error) {
	var stale []struct {
		ID     uuid.UUID `bun:"id"`
		Status string    `bun:"d1_sync_status"`
	}
	if err := q.s.DB.NewRaw(`SELECT id, d1_sync_status FROM project_runs WHERE d1_sync_status NOT IN ('current', 'done') AND updated_at < ? LIMIT 1000`,
		q.s.Now().Add(-age)).Scan(ctx, &stale); err != nil {
		return 0, fmt.Errorf("sweep: find unsynced runs: %w", err)
	}
	if len(stale) == 0 {
		return 0, nil
	}
	err := q.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, r := range stale {
			if err := q.s.InsertJob(ctx, tx, domain.ReconcileRunArgs{RunID: r.ID, Target: r.Status}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(stale), nil
}
