package incident

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// The fix chain's steps on an incident (docs/releases.md). Each is
// recorded on the incident (its fix_* columns) and as a transition whose
// from and to are the same status — progress, not a new state — except
// where the lifecycle moves: a pull request closed without a merge
// (PR_OPEN → NEEDS_HUMAN), a proven fix (→ CLOSED by "anvil"), a fix that
// failed (→ TRIAGED, then the policy). domain/release decides; this file
// writes, under the project's and the incident's locks.

// ActorAnvil is the actor id of the moves anvil makes on evidence.
const ActorAnvil = "anvil"

// fixColumns are the columns of Fix, for updates.
var fixColumns = []string{"fix_commit_sha", "fix_source", "fix_pr_number", "fix_pr_url", "fix_merged_at", "fix_release",
	"fix_shipped_at", "fix_verify_until", "fix_verified_at", "fix_release_base", "fix_waiting", "fix_recurred_release",
	"fix_recurred_at", "fix_old_release", "fix_old_events", "fix_judged_at", "closed_release", "updated_at"}

// note records progress on a locked incident: its fix columns and a
// transition from its status to itself, then the live event.
func (in *Incidents) note(ctx context.Context, tx bun.Tx, inc *Incident, actorID, reason string) error {
	now := in.s.Now()
	inc.UpdatedAt = now
	if _, err := tx.NewUpdate().Model(inc).Column(fixColumns...).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("incidents: record fix of %s: %w", inc.ID, err)
	}
	if reason == "" {
		return nil
	}
	if _, err := tx.NewRaw(`INSERT INTO incident_transitions (incident_id, from_status, to_status, actor_kind, actor_id, reason, at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, inc.ID, inc.Status, inc.Status, domain.ActorSystem, actorID, reason, now).Exec(ctx); err != nil {
		return fmt.Errorf("incidents: record fix step of %s: %w", inc.ID, err)
	}
	return in.changed(ctx, tx, inc)
}

// saveFix writes the fix columns of a locked incident without a transition.
func (in *Incidents) saveFix(ctx context.Context, tx bun.Tx, inc *Incident) error {
	return in.note(ctx, tx, inc, "", "")
}

// prIncidents are the incidents of a project whose repair opened pull
// request number (its URL ends in /<number>; url, when the forge sent it,
// must match exactly if the incident's does not end so).
func (in *Incidents) prIncidents(ctx context.Context, projectID uuid.UUID, number int, url string) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	err := in.s.DB.NewRaw(`SELECT id FROM incidents WHERE project_id = ? AND pr_url <> ''
		AND (pr_url = ? OR substring(pr_url FROM '/([0-9]+)/*$') = ?)`, projectID, url, fmt.Sprint(number)).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("incidents: by pull request %d: %w", number, err)
	}
	return ids, nil
}

// onProject runs fn on each incident of ids under the project's lock.
func (in *Incidents) onProject(ctx context.Context, ids []uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) error) error {
	for _, id := range ids {
		err := in.withIncident(ctx, nil, id, fn)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			return err
		}
	}
	return nil
}

// FixMerged records that the repair pull request number of a project was
// merged as commit sha: the incident waits for a release that contains it
// ("fix merged in !N, waiting for a release"). A delivery of the same
// merge again changes nothing. It returns how many incidents it matched.
func (in *Incidents) FixMerged(ctx context.Context, projectID uuid.UUID, number int, url, sha, forge string, at time.Time) (int, error) {
	ids, err := in.prIncidents(ctx, projectID, number, url)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return len(ids), in.onProject(ctx, ids, func(ctx context.Context, tx bun.Tx, _ *domain.Project, inc *Incident) error {
		if inc.Fix.CommitSHA == sha || inc.Fix.newerThan(at) {
			return nil
		}
		inc.Fix = Fix{CommitSHA: sha, Source: "merge", PRNumber: number, PRURL: firstOf(url, inc.PRURL), MergedAt: &at,
			ClosedRelease: inc.Fix.ClosedRelease, OldEvents: 0}
		return in.note(ctx, tx, inc, "forge:"+forge, fmt.Sprintf("fix merged in !%d (%s), waiting for a release", number, short(sha)))
	})
}

// FixPRClosed records that the repair pull request number was closed
// without a merge: an incident still waiting on it goes to a person
// (PR_OPEN → NEEDS_HUMAN). Others are left alone.
func (in *Incidents) FixPRClosed(ctx context.Context, projectID uuid.UUID, number int, url, forge string) (int, error) {
	ids, err := in.prIncidents(ctx, projectID, number, url)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return len(ids), in.onProject(ctx, ids, func(ctx context.Context, tx bun.Tx, _ *domain.Project, inc *Incident) error {
		if inc.Status != domain.IncidentPROpen {
			return nil
		}
		return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentNeedsHuman, actor: domain.ActorSystem, actorID: "forge:" + forge,
			reason: "repair pull request closed without merging"})
	})
}

// FixCommitted records a commit pushed to the default branch whose message
// names the incident (number) of the project: "Fixes SHOP-12". The same
// commit again changes nothing. It reports whether the incident exists.
func (in *Incidents) FixCommitted(ctx context.Context, projectID uuid.UUID, number int64, sha, keyword, forge string, at time.Time) (bool, error) {
	var id uuid.UUID
	err := in.s.DB.NewRaw(`SELECT id FROM incidents WHERE project_id = ? AND number = ?`, projectID, number).Scan(ctx, &id)
	if dbutil.IsNoRows(err) {
		return false, nil // the message names no incident of this project
	}
	if err != nil {
		return false, fmt.Errorf("incidents: by number %d: %w", number, err)
	}
	return true, in.onProject(ctx, []uuid.UUID{id}, func(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) error {
		if inc.Fix.CommitSHA == sha || inc.Fix.newerThan(at) {
			return nil
		}
		inc.Fix = Fix{CommitSHA: sha, Source: "push", MergedAt: &at, ClosedRelease: inc.Fix.ClosedRelease}
		return in.note(ctx, tx, inc, "forge:"+forge, fmt.Sprintf("fix committed in %s (%q %s), waiting for a release", short(sha), keyword,
			ShortID(p.Slug, number)))
	})
}

// newerThan reports whether the incident's fix is newer than a fix made
// at at: an older commit, or a delivery replayed after a newer fix was
// recorded, never replaces it (docs/releases.md).
func (f Fix) newerThan(at time.Time) bool {
	return f.CommitSHA != "" && f.MergedAt != nil && f.MergedAt.After(at)
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// withFix runs fn on an incident under the locks when its fix is still
// commit sha (a later fix owns the chain otherwise).
func (in *Incidents) withFix(ctx context.Context, id uuid.UUID, sha string, fn func(ctx context.Context, tx bun.Tx, inc *Incident) error) error {
	return in.onProject(ctx, []uuid.UUID{id}, func(ctx context.Context, tx bun.Tx, _ *domain.Project, inc *Incident) error {
		if inc.Fix.CommitSHA != sha {
			return nil
		}
		return fn(ctx, tx, inc)
	})
}

// FixShipped records that release, which contains the fix sha, served its
// first event at at: the verification window starts (until at+window).
// base is the release's event count when this was seen, so that the
// evidence counts the events it served since; source says where the
// release came from ("declared by a member" …), as the evidence names it.
func (in *Incidents) FixShipped(ctx context.Context, id uuid.UUID, sha, release, source string, at time.Time, window time.Duration, base int64) error {
	return in.withFix(ctx, id, sha, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		if inc.Fix.ShippedAt != nil {
			return nil
		}
		until := at.Add(window)
		inc.Fix.Release, inc.Fix.ShippedAt, inc.Fix.VerifyUntil, inc.Fix.ReleaseBase, inc.Fix.Waiting = release, &at, &until, base, ""
		inc.Fix.RecurredIn, inc.Fix.RecurredAt, inc.Fix.VerifiedAt = "", nil, nil
		return in.note(ctx, tx, inc, ActorAnvil, fmt.Sprintf("fix from %s shipped in %s (%s) at %s; verifying until %s",
			FixRef(inc.Fix.PRNumber, sha), release, source, at.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)))
	})
}

// FixWaiting records why an ended window has not closed the incident
// (no traffic from a release with the fix); recorded once per reason.
func (in *Incidents) FixWaiting(ctx context.Context, id uuid.UUID, sha, why string) error {
	return in.withFix(ctx, id, sha, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		if inc.Fix.Waiting == why || !inc.Fix.Verifying() {
			return nil
		}
		inc.Fix.Waiting = why
		return in.note(ctx, tx, inc, ActorAnvil, why)
	})
}

// FixVerified closes an incident whose fix held through its window, by
// "anvil", with the evidence as the transition's reason. An incident a
// person closed or ignored meanwhile keeps its status; the proof is noted.
func (in *Incidents) FixVerified(ctx context.Context, id uuid.UUID, sha, evidence string) error {
	return in.withFix(ctx, id, sha, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		if !inc.Fix.Verifying() {
			return nil
		}
		now := in.s.Now()
		inc.Fix.VerifiedAt, inc.Fix.Waiting = &now, ""
		if !CanMove(inc.Status, domain.IncidentClosed, domain.ActorSystem) {
			return in.note(ctx, tx, inc, ActorAnvil, evidence)
		}
		if err := in.saveFix(ctx, tx, inc); err != nil {
			return err
		}
		return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentClosed, actor: domain.ActorSystem, actorID: ActorAnvil, reason: evidence})
	})
}

// FixRecurred reopens an incident whose fix failed: an event of it came
// from release, which contains the fix. A CLOSED or PR_OPEN incident
// reopens (→ TRIAGED, where a person decides on another repair); one open
// otherwise keeps its status. Either way the transition says why and the
// fix_failed alert goes out.
func (in *Incidents) FixRecurred(ctx context.Context, id uuid.UUID, sha, release, reason string, judged time.Time) error {
	return in.withFix(ctx, id, sha, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		now := in.s.Now()
		inc.Fix.RecurredIn, inc.Fix.RecurredAt, inc.Fix.Waiting, inc.Fix.JudgedAt = release, &now, "", &judged
		inc.Fix.ClosedRelease = ""
		if err := in.s.EnqueueAlerts(ctx, tx, []domain.AlertCause{{Kind: domain.AlertFixFailed, OrgID: inc.OrgID, ProjectID: inc.ProjectID, IncidentID: inc.ID}}); err != nil {
			return err
		}
		if !CanMove(inc.Status, domain.IncidentTriaged, domain.ActorSystem) {
			return in.note(ctx, tx, inc, ActorAnvil, reason)
		}
		if err := in.saveFix(ctx, tx, inc); err != nil {
			return err
		}
		return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentTriaged, actor: domain.ActorSystem, actorID: ActorAnvil, reason: reason})
	})
}

// FixJudged records events judged not to be a recurrence: n of them came
// from release, which does not contain the fix ("seen in R, before the
// fix"; n may be 0 when only the watermark moves). A release seen before
// the fix for the first time is noted in the transitions once.
func (in *Incidents) FixJudged(ctx context.Context, id uuid.UUID, sha, release string, n int64, judged time.Time) error {
	return in.withFix(ctx, id, sha, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		inc.Fix.JudgedAt = &judged
		reason := ""
		if n > 0 {
			if inc.Fix.OldRelease != release {
				reason = "seen in " + release + ", before the fix; not reopened"
			}
			inc.Fix.OldRelease, inc.Fix.OldEvents = release, inc.Fix.OldEvents+n
		}
		return in.note(ctx, tx, inc, ActorAnvil, reason)
	})
}

// FixByHand records a fix a person names on the incident page or in the API
// (docs/releases.md, "A fix recorded by hand"): the commit sha, and the
// pull request it was merged in when known. It is a person's word, so it
// replaces any fix recorded before; the same commit again changes nothing.
// Members may record; the step is a transition by the person and audited.
func (in *Incidents) FixByHand(ctx context.Context, pr *domain.Principal, id uuid.UUID, sha string, prNumber int, prURL string) (*Incident, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return nil, err
	}
	var out *Incident
	err := in.withIncident(ctx, &pr.OrgID, id, func(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) error {
		out = inc
		if inc.Fix.CommitSHA == sha {
			return nil
		}
		now := in.s.Now()
		inc.Fix = Fix{CommitSHA: sha, Source: "manual", PRNumber: prNumber, PRURL: prURL, MergedAt: &now, ClosedRelease: inc.Fix.ClosedRelease,
			// The chain keeps what the last fix proved: a recurrence after a
			// verified fix stays on the record until this one ships.
			OldRelease: inc.Fix.OldRelease, OldEvents: inc.Fix.OldEvents}
		if err := in.saveFix(ctx, tx, inc); err != nil {
			return err
		}
		reason := fmt.Sprintf("fix recorded by hand: %s, waiting for a release", short(sha))
		if prNumber > 0 {
			reason = fmt.Sprintf("fix recorded by hand: !%d (%s), waiting for a release", prNumber, short(sha))
		}
		if _, err := tx.NewRaw(`INSERT INTO incident_transitions (incident_id, from_status, to_status, actor_kind, actor_id, reason, at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, inc.ID, inc.Status, inc.Status, domain.ActorPerson, pr.UserID.String(), reason, now).Exec(ctx); err != nil {
			return fmt.Errorf("incidents: record fix of %s: %w", inc.ID, err)
		}
		if err := domain.RecordAudit(ctx, tx, pr, "incident.fix_recorded", ShortID(p.Slug, inc.Number),
			map[string]any{"commit_sha": sha, "pr_url": prURL}); err != nil {
			return err
		}
		return in.changed(ctx, tx, inc)
	})
	return out, err
}
