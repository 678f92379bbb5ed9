package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/erasure"
	"anvil/jobs/sandbox"
)

// eraseWait is how long an erase job waits for a deleted project's run
// to stop before it looks again.
const eraseWait = 2 * time.Second

// EraseProjectWorker removes a deleted project's rows in batches
// (docs/erasure.md).
type EraseProjectWorker struct {
	river.WorkerDefaults[erasure.EraseProjectArgs]
	erasure *erasure.Service
	log     *slog.Logger
	// prune removes the repository mirrors and caches of projects that
	// are gone.
	prune func(context.Context)
}

// Timeout bounds one attempt beyond the erasure's own budget per pass.
func (w *EraseProjectWorker) Timeout(*river.Job[erasure.EraseProjectArgs]) time.Duration {
	return 5 * time.Minute
}

// Work runs one pass; a pass that ran out of its budget, or waits for a
// run to stop, snoozes and goes on where it stopped.
func (w *EraseProjectWorker) Work(ctx context.Context, job *river.Job[erasure.EraseProjectArgs]) error {
	// The deleted project's mirrors and cache go at once, whatever its
	// rows wait for.
	if w.prune != nil {
		w.prune(ctx)
	}
	rep, err := w.erasure.EraseProject(ctx, job.Args.ProjectID)
	return eraseOutcome(w.log, "project", job.Args.ProjectID.String(), rep, err, erasure.ErrLiveProject)
}

// eraseOutcome tells River what became of an erase pass.
func eraseOutcome(log *slog.Logger, what, id string, rep erasure.Report, err, live error) error {
	switch {
	case errors.Is(err, live):
		return river.JobCancel(err)
	case err != nil:
		return err
	case rep.Waiting:
		return river.JobSnooze(eraseWait)
	case !rep.Done:
		return river.JobSnooze(time.Millisecond)
	}
	log.Info(what+" erased", "id", id, "rows", rep.Total())
	return nil
}

// gonePruner removes what this host keeps of projects that are not live any
// more: their repositories' mirrors (jobs/mirrors.go) and their caches
// (jobs/run_cache.go); a failure is logged, never the erasure's.
func gonePruner(s *domain.Store, workRoot string, caches *sandbox.Caches, log *slog.Logger) func(context.Context) {
	return func(ctx context.Context) {
		n, err := pruneMirrors(ctx, s, workRoot)
		if err != nil {
			log.Warn("mirrors of deleted projects not removed", "error", err)
		} else if n > 0 {
			log.Info("mirrors of deleted projects removed", "mirrors", n)
		}
		n, err = pruneCaches(ctx, s, caches)
		if err != nil {
			log.Warn("caches of deleted projects not removed", "error", err)
		} else if n > 0 {
			log.Info("caches of deleted projects removed", "caches", n)
		}
	}
}
