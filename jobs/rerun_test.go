package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/run"
)

// TestRerunExecutesTheSameCommit: a re-run of a run pinned to an older
// commit checks that commit out again, although its branch has moved on.
func TestRerunExecutesTheSameCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	repo, old, head := gitRepo(t)
	p := b.project(t, "again", repo, "git rev-parse HEAD", 0)
	var first *run.Run
	if err := b.store.WithProject(ctx, p.ID, func(ctx context.Context, tx bun.Tx, proj *domain.Project) error {
		var err error
		first, err = b.queue.AcceptTx(ctx, tx, proj, run.AcceptSpec{Trigger: run.TriggerWebhook, Branch: "main", CommitSHA: &old})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r := b.waitTerminal(t, first.ID, 60*time.Second); r.Status() != run.StatusPassed {
		t.Fatalf("first run %s:\n%s", r.Status(), b.logText(t, first.ID))
	}
	again, err := b.queue.Rerun(ctx, b.owner, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := b.waitTerminal(t, again.ID, 60*time.Second)
	log := b.logText(t, again.ID)
	if got.Status() != run.StatusPassed || got.CommitSHA == nil || *got.CommitSHA != old || got.RerunOf == nil || *got.RerunOf != first.ID {
		t.Fatalf("re-run %s %v of %v:\n%s", got.Status(), got.CommitSHA, got.RerunOf, log)
	}
	if !strings.Contains(log, "\n"+old+"\n") || strings.Contains(log, head) {
		t.Fatalf("the re-run did not execute %s (the branch is at %s):\n%s", old, head, log)
	}
}
