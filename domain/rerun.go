package domain

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Rerun accepts a new run that repeats a finished one: the same branch and
// the same pinned commit (the one the run checked out, so a branch that
// moved meanwhile does not change what runs), recorded as rerun_of. A run
// of a fork's code stays one (no secrets). It goes through the queue's
// usual acceptance, so a full queue is ErrQueueFull.
func (q *Queue) Rerun(ctx context.Context, pr *Principal, runID uuid.UUID) (*Run, error) {
	if err := requireRole(pr, RoleMember); err != nil {
		return nil, err
	}
	orig, err := q.RunGet(ctx, pr.OrgID, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case !IsTerminal(orig.State):
		return nil, Conflict("run_not_finished", "run #%d is still %s; re-run it once it has finished", orig.Number, PublicStatus(orig.State))
	case orig.Trigger == TriggerRepair:
		return nil, Conflict("repair_rerun", "a repair run is repeated from its incident, not re-run")
	}
	uid := pr.UserID
	id := orig.ID
	j := &acceptJob{projectID: orig.ProjectID, orgID: pr.OrgID, spec: AcceptSpec{Trigger: TriggerManual, Branch: orig.Branch,
		CommitSHA: orig.CommitSHA, TriggeredBy: &uid, RerunOf: &id, FromFork: orig.FromFork}}
	err = q.submit(j)
	if errors.Is(err, ErrQueueFull) {
		return nil, &Error{Kind: ErrQueueFull, Code: "project_queue_full",
			Message: fmt.Sprintf("the project's queue already holds %d runs; wait for some to finish or cancel them", MaxQueued)}
	}
	return j.run, err
}

// RunByNumber returns the project's run #n.
func (q *Queue) RunByNumber(ctx context.Context, orgID, projectID uuid.UUID, n int64) (*Run, error) {
	r := new(Run)
	err := q.s.DB.NewSelect().Model(r).Where("project_id = ? AND org_id = ? AND number = ?", projectID, orgID, n).Scan(ctx)
	if isNoRows(err) {
		return nil, NotFound("run")
	}
	return r, err
}
