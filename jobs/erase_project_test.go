package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"anvil/domain/run"
)

// TestDeletingAProjectStopsItsRunningRun deletes a project while a run of
// it executes a long command: the run is canceled through the cancel path
// (its sandbox stopped), its queued run is dropped, and the erase job
// waits for the run to stop and then removes the project — long before
// the command would have ended by itself.
func TestDeletingAProjectStopsItsRunningRun(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	repo, _, _ := gitRepo(t)
	p := b.project(t, "doomed", repo, "echo started; sleep 120", 0)
	r, err := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the run to start", func() bool {
		return b.run(t, r.ID).State == run.StateRunning && strings.Contains(b.logText(t, r.ID), "started")
	})
	queued, err := b.queue.AcceptManual(ctx, b.owner, p.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.services.Erasure.DeleteProject(ctx, b.owner, p.ID, "doomed"); err != nil {
		t.Fatal(err)
	}
	if got := b.run(t, queued.ID); got.State != run.StateCanceled {
		t.Errorf("the queued run after the deletion: %s", got.State)
	}
	// Within a minute: half the command's own time, so the run was stopped.
	waitFor(t, 60*time.Second, "the project to be erased", func() bool {
		var n int
		if err := b.db.Bun.NewRaw(`SELECT count(*) FROM projects WHERE id = ?`, p.ID).Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	var runs int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM project_runs WHERE project_id = ?`, p.ID).Scan(ctx, &runs); err != nil || runs != 0 {
		t.Errorf("runs left: %d %v", runs, err)
	}
}
