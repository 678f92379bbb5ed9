package run

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/project"
)

// LatestResolver finds the head commit of a project's default branch: the
// forge's API when the project has a provider, git ls-remote otherwise
// (wired in main: forgestatus.LatestCommit over the checkout's policy).
type LatestResolver func(ctx context.Context, p *domain.Project, token string) (string, error)

// SetLatestResolver sets how "run the latest commit" finds the commit.
func (q *Queue) SetLatestResolver(r LatestResolver) { q.latest = r }

// AcceptLatest queues a run of the project's default branch pinned to its
// head commit now, exactly as a webhook push would have: a missed push made
// good by hand. The commit is resolved before the queue is touched, so a
// forge that does not answer changes nothing.
func (q *Queue) AcceptLatest(ctx context.Context, pr *domain.Principal, projectID uuid.UUID) (*Run, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return nil, err
	}
	p, err := project.NewProjects(q.s).Get(ctx, pr.OrgID, projectID)
	if err != nil {
		return nil, err
	}
	if q.latest == nil {
		return nil, domain.Invalid("latest_unavailable", "this server cannot resolve the latest commit")
	}
	token, err := project.NewProjects(q.s).ProviderToken(p)
	if err != nil {
		return nil, fmt.Errorf("latest: provider token of %s: %w", p.ID, err)
	}
	sha, err := q.latest(ctx, p, token)
	if err != nil {
		return nil, domain.Invalid("latest_unresolved", "could not resolve the head of %q: %s", p.DefaultBranch, clipText(err.Error(), 300))
	}
	sha = strings.ToLower(strings.TrimSpace(sha))
	if !validSHA(sha) {
		return nil, domain.Invalid("latest_unresolved", "the head of %q is not a commit id", p.DefaultBranch)
	}
	uid := pr.UserID
	j := &acceptJob{projectID: projectID, orgID: pr.OrgID, spec: AcceptSpec{Trigger: TriggerManual, Branch: p.DefaultBranch,
		CommitSHA: &sha, TriggeredBy: &uid}}
	err = q.submit(j)
	if errors.Is(err, domain.ErrQueueFull) {
		return nil, &domain.Error{Kind: domain.ErrQueueFull, Code: "project_queue_full",
			Message: fmt.Sprintf("the project's queue already holds %d runs; wait for some to finish or cancel them", MaxQueued)}
	}
	return j.run, err
}

// ErrNoResolver is a resolver's answer when this process has no way to ask
// the repository (no forge, and git cannot be confined here): a named
// branch is then taken on trust, as before the check existed.
var ErrNoResolver = errors.New("no way to ask the repository")

// checkBranch refuses a branch the repository does not have before
// anything is queued: one question to the repository (the forge's branch
// endpoint, or git ls-remote), through the same resolver as "run the latest
// commit" (docs/contracts/private-api.md, "Run history").
func (q *Queue) checkBranch(ctx context.Context, orgID, projectID uuid.UUID, branch string) error {
	if q.latest == nil {
		return nil
	}
	p, err := project.NewProjects(q.s).Get(ctx, orgID, projectID)
	if err != nil {
		return err
	}
	token, err := project.NewProjects(q.s).ProviderToken(p)
	if err != nil {
		return fmt.Errorf("branch check: provider token of %s: %w", p.ID, err)
	}
	asked := *p
	asked.DefaultBranch = branch
	if _, err := q.latest(ctx, &asked, token); err != nil {
		if errors.Is(err, ErrNoResolver) {
			return nil
		}
		return domain.Invalid("unknown_branch", "the repository has no branch %q (%s)", branch, clipText(err.Error(), 300))
	}
	return nil
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
