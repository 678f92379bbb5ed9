package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/release"
	"anvil/jobs/sandbox"
)

// FixCheckEvery is how often the fix check runs (docs/releases.md: "at
// least once a minute").
const FixCheckEvery = 20 * time.Second

// FixCheckWorker runs one pass of the fix check: shipped fixes, events
// judged against them, windows that ended.
type FixCheckWorker struct {
	river.WorkerDefaults[domain.FixCheckArgs]
	fixes *release.Fixes
	log   *slog.Logger
}

// Timeout bounds one pass.
func (w *FixCheckWorker) Timeout(*river.Job[domain.FixCheckArgs]) time.Duration { return time.Minute }

// Work runs the pass.
func (w *FixCheckWorker) Work(ctx context.Context, _ *river.Job[domain.FixCheckArgs]) error {
	res, err := w.fixes.Check(ctx)
	if err == nil && w.log != nil && (res.Shipped+res.Recurred+res.Verified) > 0 {
		w.log.Info("fix check", "shipped", res.Shipped, "recurred", res.Recurred, "verified", res.Verified, "waiting", res.Waiting)
	}
	return err
}

// CheckAncestryWorker answers a project's ancestry questions in its
// repository's mirror (WorkRoot/mirrors/<project>), with git confined as a
// checkout is (jobs/sandbox.Git.Ancestry).
type CheckAncestryWorker struct {
	river.WorkerDefaults[domain.CheckAncestryArgs]
	fixes    *release.Fixes
	git      *sandbox.Git
	workRoot string
}

// Timeout bounds a fetch of the repository.
func (w *CheckAncestryWorker) Timeout(*river.Job[domain.CheckAncestryArgs]) time.Duration {
	return 10 * time.Minute
}

// Work answers the questions.
func (w *CheckAncestryWorker) Work(ctx context.Context, job *river.Job[domain.CheckAncestryArgs]) error {
	dir := MirrorDir(w.workRoot, job.Args.ProjectID)
	// One fetch per run, whatever the number of questions
	// (docs/releases.md, "Shipped").
	fetched := false
	_, err := w.fixes.AnswerQuestions(ctx, job.Args.ProjectID, func(ctx context.Context, p *domain.Project, token, fix, rel string) (string, error) {
		return w.git.AncestryFetched(ctx, p.RepoURL, token, dir, fix, rel, &fetched)
	})
	return err
}
