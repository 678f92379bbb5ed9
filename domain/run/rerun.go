package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// Rerun accepts a new run that repeats a finished one: the same branch and
// the same pinned commit (the one the run checked out, so a branch that
// moved meanwhile does not change what runs), recorded as rerun_of. A run
// of a fork's code stays one (no secrets). It goes through the queue's
// usual acceptance, so a full queue is ErrQueueFull.
func (q *Queue) Rerun(ctx context.Context, pr *domain.Principal, runID uuid.UUID) (*Run, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return nil, err
	}
	orig, err := q.RunGet(ctx, pr.OrgID, runID)
	if err != nil {
		return nil, err
	}
	switch {
	case !IsTerminal(orig.State):
		return nil, domain.Conflict("run_not_finished", "run #%d is still %s; re-run it once it has finished", orig.Number, PublicStatus(orig.State))
	case orig.Trigger == TriggerRepair:
		return nil, domain.Conflict("repair_rerun", "a repair run is repeated from its incident, not re-run")
	}
	uid := pr.UserID
	id := orig.ID
	j := &acceptJob{projectID: orig.ProjectID, orgID: pr.OrgID, spec: AcceptSpec{Trigger: TriggerManual, Branch: orig.Branch,
		CommitSHA: orig.CommitSHA, TriggeredBy: &uid, RerunOf: &id, FromFork: orig.FromFork,
		Image: orig.Image, ImageDigest: orig.ImageDigest}}
	err = q.submit(j)
	if errors.Is(err, domain.ErrQueueFull) {
		return nil, &domain.Error{Kind: domain.ErrQueueFull, Code: "project_queue_full",
			Message: fmt.Sprintf("the project's queue already holds %d runs; wait for some to finish or cancel them", MaxQueued)}
	}
	return j.run, err
}

// RunByNumber returns the project's run #n.
func (q *Queue) RunByNumber(ctx context.Context, orgID, projectID uuid.UUID, n int64) (*Run, error) {
	r := new(Run)
	err := q.s.DB.NewSelect().Model(r).Where("project_id = ? AND org_id = ? AND number = ?", projectID, orgID, n).
		Where("project_id NOT IN (SELECT id FROM "+domain.DeletedProjects+" p WHERE org_id = ?)", orgID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("run")
	}
	return r, err
}

// RunStory is who and what a run's page names beside it.
type RunStory struct {
	TriggeredBy   string // the person's email ("" when none, or gone)
	CanceledBy    string
	RerunOfNumber int64 // the number of the run it repeats (0: none)
	Place         int   // while queued: 1 for the next run to start
}

// Story reads what the run page says about r. People are named only while
// they are members of the run's organisation (emailsOf says why).
func (q *Queue) Story(ctx context.Context, r *Run) (RunStory, error) {
	var st RunStory
	// The run's organisation, its project tombstoned or not (a run page
	// of a deleted project is not reached; the run's story needs no filter).
	err := q.s.DB.NewRaw(`SELECT
			COALESCE((SELECT u.email FROM users u JOIN memberships m ON m.user_id = u.id
				AND m.org_id = (SELECT org_id FROM `+domain.AllProjects+` WHERE id = ?) WHERE u.id = ?), '') AS triggered_by,
			COALESCE((SELECT u.email FROM users u JOIN memberships m ON m.user_id = u.id
				AND m.org_id = (SELECT org_id FROM `+domain.AllProjects+` WHERE id = ?) WHERE u.id = ?), '') AS canceled_by,
			COALESCE((SELECT number FROM project_runs WHERE id = ?), 0) AS rerun_of_number,
			CASE WHEN ?::bigint IS NULL THEN 0 ELSE (SELECT count(*) FROM project_runs
				WHERE project_id = ? AND position IS NOT NULL AND position <= ?) END AS place`,
		r.ProjectID, r.TriggeredBy, r.ProjectID, r.CanceledBy, r.RerunOf, r.Position, r.ProjectID, r.Position).
		Scan(ctx, &st.TriggeredBy, &st.CanceledBy, &st.RerunOfNumber, &st.Place)
	return st, err
}
