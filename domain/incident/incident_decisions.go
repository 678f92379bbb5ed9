package incident

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/internal/dbutil"
	"anvil/domain/run"
)

// The lifecycle (docs/architecture.md, "Incident lifecycle") in one table: every legal move and which
// kind of actor may make it. Anything not listed is refused. The ingest
// (feed_ingest.go) makes the system and policy moves of new and regressed
// incidents in bulk; they are listed here too so the table is the whole
// truth.
//
// Decisions: reopen goes to TRIAGED and stays there — a person who reopens
// an incident wants to look at it again, and repairing it is a separate,
// explicit approval. close and ignore are allowed from every other status,
// including while a repair runs: the run finishes, and its outcome no longer
// moves the incident (the pull request link is still kept).
var lifecycle = map[string]map[string][]string{
	domain.IncidentObserved: {
		domain.IncidentTriaged: {domain.ActorSystem},
	},
	domain.IncidentTriaged: {
		domain.IncidentWaitingApproval: {domain.ActorPolicy},
		domain.IncidentQueued:          {domain.ActorPolicy, domain.ActorPerson},
	},
	domain.IncidentWaitingApproval: {domain.IncidentQueued: {domain.ActorPerson}},
	domain.IncidentNeedsHuman:      {domain.IncidentQueued: {domain.ActorPerson}},
	domain.IncidentQueued: {
		domain.IncidentRunning:    {domain.ActorRepair},
		domain.IncidentNeedsHuman: {domain.ActorRepair},
	},
	domain.IncidentRunning: {
		domain.IncidentPROpen:     {domain.ActorRepair},
		domain.IncidentNeedsHuman: {domain.ActorRepair},
	},
	// The repair's pull request closed without a merge (docs/releases.md);
	// a fix that failed in a release that contains it reopens.
	domain.IncidentPROpen: {
		domain.IncidentNeedsHuman: {domain.ActorSystem},
		domain.IncidentTriaged:    {domain.ActorSystem},
	},
	domain.IncidentClosed: {
		domain.IncidentTriaged: {domain.ActorPerson, domain.ActorSystem}, // reopen, regression
	},
	domain.IncidentIgnored: {
		domain.IncidentTriaged: {domain.ActorPerson}, // reopen
	},
}

func init() {
	// close and ignore: from every status but their own.
	for _, from := range domain.IncidentStatuses {
		m := lifecycle[from]
		if m == nil {
			m = map[string][]string{}
			lifecycle[from] = m
		}
		for _, to := range []string{domain.IncidentClosed, domain.IncidentIgnored} {
			if from != to {
				m[to] = append(m[to], domain.ActorPerson)
			}
		}
		// A fix proven in production closes its incident ("anvil",
		// docs/releases.md) from wherever it waits, except ignored.
		if from != domain.IncidentClosed && from != domain.IncidentIgnored {
			m[domain.IncidentClosed] = append(m[domain.IncidentClosed], domain.ActorSystem)
		}
	}
}

// CanMove reports whether actor may move an incident from → to.
func CanMove(from, to, actor string) bool {
	for _, a := range lifecycle[from][to] {
		if a == actor {
			return true
		}
	}
	return false
}

// Decisions a person can take in the inbox, and the status each leads to.
const (
	DecisionApprove = "approve"
	DecisionIgnore  = "ignore"
	DecisionClose   = "close"
	DecisionReopen  = "reopen"
)

var decisionTarget = map[string]string{
	DecisionApprove: domain.IncidentQueued,
	DecisionIgnore:  domain.IncidentIgnored,
	DecisionClose:   domain.IncidentClosed,
	DecisionReopen:  domain.IncidentTriaged,
}

// DecisionsFor lists the decisions open to a person for an incident in
// status, in display order (the inbox shows exactly these buttons).
func DecisionsFor(status string) []string {
	var out []string
	for _, d := range []string{DecisionApprove, DecisionReopen, DecisionClose, DecisionIgnore} {
		if CanMove(status, decisionTarget[d], domain.ActorPerson) {
			out = append(out, d)
		}
	}
	return out
}

// DecisionsOf lists the decisions open to a person for the incident v: those
// of its status, without approve for a cron monitor's incident (no code
// repair is run for a missed job).
func DecisionsOf(v IncidentView) []string {
	ds := DecisionsFor(v.Status)
	if !v.Monitor {
		return ds
	}
	out := ds[:0:0]
	for _, d := range ds {
		if d != DecisionApprove {
			out = append(out, d)
		}
	}
	return out
}

// moveSpec is one move to apply.
type moveSpec struct {
	to        string
	actor     string
	actorID   string
	reason    string
	repairRun *uuid.UUID // set repair_run_id
	prURL     *string    // set pr_url
}

// move applies one lifecycle move to a locked incident: it checks the
// table, writes the status (and what goes with it), records the transition
// with its actor and time, publishes an "incident" live event and enqueues
// the project's card refresh — all in tx.
func (in *Incidents) move(ctx context.Context, tx bun.Tx, inc *Incident, m moveSpec) error {
	if !CanMove(inc.Status, m.to, m.actor) {
		return refusal(inc.Status, m.to)
	}
	from := inc.Status
	now := in.s.Now()
	inc.Status, inc.UpdatedAt = m.to, now
	cols := []string{"status", "updated_at", "needs_human_reason"}
	inc.NeedsHumanReason = ""
	if m.to == domain.IncidentNeedsHuman {
		inc.NeedsHumanReason = m.reason
	}
	if m.repairRun != nil {
		inc.RepairRunID = m.repairRun
		inc.PRURL = ""
		cols = append(cols, "repair_run_id", "pr_url")
	}
	if m.prURL != nil {
		inc.PRURL = *m.prURL
		cols = append(cols, "pr_url")
	}
	if _, err := tx.NewUpdate().Model(inc).Column(cols...).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("incidents: move %s: %w", inc.ID, err)
	}
	if _, err := tx.NewRaw(`INSERT INTO incident_transitions (incident_id, from_status, to_status, actor_kind, actor_id, reason, at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, inc.ID, from, m.to, m.actor, m.actorID, m.reason, now).Exec(ctx); err != nil {
		return fmt.Errorf("incidents: record transition of %s: %w", inc.ID, err)
	}
	if err := in.s.EnqueueAlerts(ctx, tx, moveAlertCause(inc, m.to)); err != nil {
		return err
	}
	return in.changed(ctx, tx, inc)
}

// changed publishes an incident's change and enqueues its project's card
// refresh in tx.
func (in *Incidents) changed(ctx context.Context, tx bun.Tx, inc *Incident) error {
	b, _ := json.Marshal(map[string]any{"kind": "incident", "org_id": inc.OrgID, "project_id": inc.ProjectID,
		"incident_id": inc.ID, "status": inc.Status})
	if err := domain.Notify(ctx, tx, string(b)); err != nil {
		return fmt.Errorf("incidents: notify: %w", err)
	}
	return card.EnqueueRefresh(ctx, in.s, tx, inc.ProjectID)
}

// refusal is the 409 of a move the table does not allow, worded for people.
func refusal(from, to string) error {
	verb := map[string]string{domain.IncidentQueued: "approve", domain.IncidentIgnored: "ignore", domain.IncidentClosed: "close", domain.IncidentTriaged: "reopen"}[to]
	if verb == "" {
		return domain.Conflict("invalid_transition", "an incident cannot go from %s to %s", from, to)
	}
	return domain.Conflict("invalid_decision", "cannot %s an incident that is %s", verb, from)
}

// lockIncident locks an incident row of a project whose lock the caller
// holds (order: project, then incident).
func lockIncident(ctx context.Context, tx bun.Tx, id uuid.UUID) (*Incident, error) {
	inc := new(Incident)
	err := tx.NewSelect().Model(inc).Where("id = ?", id).For("UPDATE").Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("incident")
	}
	if err != nil {
		return nil, fmt.Errorf("incidents: lock %s: %w", id, err)
	}
	return inc, nil
}

// withIncident locks the incident's project, then the incident.
func (in *Incidents) withIncident(ctx context.Context, orgID *uuid.UUID, id uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) error) error {
	var projectID uuid.UUID
	q := in.s.DB.NewSelect().Table("incidents").Column("project_id").Where("id = ?", id)
	if orgID != nil {
		q = q.Where("org_id = ?", *orgID)
	}
	if err := q.Scan(ctx, &projectID); err != nil {
		if dbutil.IsNoRows(err) {
			return domain.NotFound("incident")
		}
		return fmt.Errorf("incidents: find %s: %w", id, err)
	}
	return in.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		inc, err := lockIncident(ctx, tx, id)
		if err != nil {
			return err
		}
		return fn(ctx, tx, p, inc)
	})
}

// Decide applies a person's decision. Unknown decisions are 422; decisions
// the lifecycle refuses are 409 invalid_decision with the reason; approve
// also refuses a project without a repair command and a full queue (409,
// nothing changes). Approval accepts the repair run into the project's
// queue in the same transaction that moves the incident to QUEUED.
func (in *Incidents) Decide(ctx context.Context, pr *domain.Principal, id uuid.UUID, decision string) (*Incident, error) {
	return in.DecideIn(ctx, pr, id, decision, false)
}

// DecideIn is Decide with a close's choice "closed in the current
// release" (inCurrentRelease): the incident remembers the release of its
// latest event, and events from older releases do not reopen it
// (docs/releases.md). An incident whose events carry no release cannot be
// closed so (422 no_release); the option with another decision is 422.
func (in *Incidents) DecideIn(ctx context.Context, pr *domain.Principal, id uuid.UUID, decision string, inCurrentRelease bool) (*Incident, error) {
	decision = strings.ToLower(strings.TrimSpace(decision))
	if inCurrentRelease && decision != DecisionClose {
		return nil, domain.Invalid("invalid_option", "in_current_release goes only with the decision close")
	}
	to, ok := decisionTarget[decision]
	if !ok {
		return nil, domain.Invalid("unknown_decision", "decision must be one of approve, ignore, close, reopen")
	}
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return nil, err
	}
	var out *Incident
	err := in.withIncident(ctx, &pr.OrgID, id, func(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) error {
		if !CanMove(inc.Status, to, domain.ActorPerson) {
			return refusal(inc.Status, to)
		}
		if decision == DecisionApprove && inc.IsMonitor() {
			return domain.Invalid("monitor_incident", "a cron monitor's incident is not a bug in the repository: no code repair is run for it; fix the job, and its next good runs close the incident")
		}
		m := moveSpec{to: to, actor: domain.ActorPerson, actorID: pr.UserID.String(), reason: decision}
		if inCurrentRelease {
			if inc.Release == "" {
				return domain.Invalid("no_release", "the incident's events carry no release, so it cannot be closed in the current release")
			}
			now := in.s.Now()
			inc.Fix.ClosedRelease, inc.Fix.JudgedAt = inc.Release, &now
			m.reason = "close in the current release " + inc.Release
			if err := in.saveFix(ctx, tx, inc); err != nil {
				return err
			}
		} else if decision == DecisionReopen {
			inc.Fix.ClosedRelease = ""
			if err := in.saveFix(ctx, tx, inc); err != nil {
				return err
			}
		}
		if decision == DecisionApprove {
			runID, err := in.acceptRepair(ctx, tx, p, inc)
			if err != nil {
				return err
			}
			m.repairRun = &runID
		}
		out = inc
		pending := inc.RepairRunID
		if err := in.move(ctx, tx, inc, m); err != nil {
			return err
		}
		// Closing or ignoring an incident withdraws its repair run while it
		// still waits in the queue (the incident has moved first, so the
		// run's end does not move it again).
		if pending != nil && (decision == DecisionClose || decision == DecisionIgnore) {
			reason := run.ReasonIncidentClosed
			if decision == DecisionIgnore {
				reason = run.ReasonIncidentIgnored
			}
			if _, err := in.queue.CancelQueuedTx(ctx, tx, p, *pending, reason); err != nil {
				return fmt.Errorf("withdraw repair run: %w", err)
			}
		}
		return nil
	})
	return out, err
}

// acceptRepair queues a repair run of inc into p's queue (caller holds the
// locks).
func (in *Incidents) acceptRepair(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) (uuid.UUID, error) {
	if strings.TrimSpace(p.RepairCommand) == "" {
		return uuid.Nil, domain.Conflict("no_repair_command", "project %s has no repair command; set one in the project's settings before approving a repair", p.Name)
	}
	id := inc.ID
	r, err := in.queue.AcceptTx(ctx, tx, p, run.AcceptSpec{Trigger: run.TriggerRepair, Branch: p.DefaultBranch, IncidentID: &id})
	if errors.Is(err, domain.ErrQueueFull) {
		return uuid.Nil, &domain.Error{Kind: domain.ErrQueueFull, Code: "project_queue_full",
			Message: fmt.Sprintf("the project's queue already holds %d runs; wait for some to finish, then approve again", run.MaxQueued)}
	}
	if err != nil {
		return uuid.Nil, err
	}
	return r.ID, nil
}

// BulkResult is the outcome of a bulk decision: each incident is decided
// on its own, so one refusal does not undo the others.
type BulkResult struct {
	Done    []uuid.UUID   `json:"done"`
	Refused []BulkRefusal `json:"refused"`
}

// BulkRefusal names an incident a bulk decision left alone, and why.
type BulkRefusal struct {
	ID      uuid.UUID `json:"id"`
	Message string    `json:"message"`
}

// DecideMany applies ignore or close to many incidents (the inbox's bulk
// actions). Approve and reopen stay one at a time on purpose: each queues
// or reconsiders work a person should look at.
func (in *Incidents) DecideMany(ctx context.Context, pr *domain.Principal, ids []uuid.UUID, decision string) (BulkResult, error) {
	res := BulkResult{Done: []uuid.UUID{}, Refused: []BulkRefusal{}}
	decision = strings.ToLower(strings.TrimSpace(decision))
	if decision != DecisionIgnore && decision != DecisionClose {
		return res, domain.Invalid("unknown_decision", "bulk decisions are ignore or close")
	}
	if len(ids) == 0 {
		return res, domain.Invalid("no_incidents", "select at least one incident")
	}
	if len(ids) > 200 {
		return res, domain.Invalid("too_many_incidents", "at most 200 incidents at once")
	}
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return res, err
	}
	for _, id := range ids {
		_, err := in.Decide(ctx, pr, id, decision)
		var de *domain.Error
		switch {
		case err == nil:
			res.Done = append(res.Done, id)
		case errors.As(err, &de):
			res.Refused = append(res.Refused, BulkRefusal{ID: id, Message: de.Message})
		default:
			return res, err
		}
	}
	return res, nil
}

// DispatchRepair accepts the repair run of an incident the `auto` policy
// queued (DispatchRepairArgs). It is idempotent: an incident that is no
// longer QUEUED, or already has an unfinished repair run, is left alone. A
// project without a repair command or with a full queue cannot take the
// run: the incident goes to NEEDS_HUMAN with that reason.
func (in *Incidents) DispatchRepair(ctx context.Context, incidentID uuid.UUID) error {
	err := in.withIncident(ctx, nil, incidentID, func(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) error {
		if inc.Status != domain.IncidentQueued {
			return nil
		}
		var open bool
		if err := tx.NewRaw(`SELECT EXISTS (SELECT 1 FROM project_runs WHERE incident_id = ?
			AND state NOT IN ('passed', 'failed', 'canceled'))`, inc.ID).Scan(ctx, &open); err != nil {
			return fmt.Errorf("incidents: open repair of %s: %w", inc.ID, err)
		}
		if open {
			return nil
		}
		runID, err := in.acceptRepair(ctx, tx, p, inc)
		var de *domain.Error
		if errors.As(err, &de) {
			return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentNeedsHuman, actor: domain.ActorRepair, reason: de.Message})
		}
		if err != nil {
			return err
		}
		inc.RepairRunID, inc.PRURL, inc.UpdatedAt = &runID, "", in.s.Now()
		if _, err := tx.NewUpdate().Model(inc).Column("repair_run_id", "pr_url", "updated_at").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("incidents: link repair run: %w", err)
		}
		return in.changed(ctx, tx, inc)
	})
	if errors.Is(err, domain.ErrNotFound) {
		return nil // the incident (or its project) was deleted meanwhile
	}
	return err
}

// withRepair runs fn on the incident of a repair run, under the locks, when
// the incident still belongs to that run.
func (in *Incidents) withRepair(ctx context.Context, run *run.Run, fn func(ctx context.Context, tx bun.Tx, inc *Incident) error) error {
	if run.IncidentID == nil {
		return nil
	}
	err := in.withIncident(ctx, nil, *run.IncidentID, func(ctx context.Context, tx bun.Tx, p *domain.Project, inc *Incident) error {
		if inc.RepairRunID == nil || *inc.RepairRunID != run.ID {
			return nil // a later approval owns the incident now
		}
		return fn(ctx, tx, inc)
	})
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	return err
}

// RepairStarted records that the repair run is working on its incident
// (QUEUED → RUNNING). An incident a person closed or ignored meanwhile
// stays where it is.
func (in *Incidents) RepairStarted(ctx context.Context, run *run.Run) error {
	return in.withRepair(ctx, run, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		if inc.Status != domain.IncidentQueued {
			return nil
		}
		return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentRunning, actor: domain.ActorRepair, actorID: run.ID.String(), reason: "repair run started"})
	})
}

// RepairPROpened records the pull request (RUNNING → PR_OPEN with its URL).
// The URL is kept even when the incident was closed meanwhile.
func (in *Incidents) RepairPROpened(ctx context.Context, run *run.Run, url string) error {
	return in.withRepair(ctx, run, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		if inc.Status != domain.IncidentRunning && inc.Status != domain.IncidentQueued {
			inc.PRURL = url
			if _, err := tx.NewUpdate().Model(inc).Column("pr_url").WherePK().Exec(ctx); err != nil {
				return err
			}
			return in.changed(ctx, tx, inc)
		}
		if inc.Status == domain.IncidentQueued { // started was not recorded (a retry); record both steps
			if err := in.move(ctx, tx, inc, moveSpec{to: domain.IncidentRunning, actor: domain.ActorRepair, actorID: run.ID.String(), reason: "repair run started"}); err != nil {
				return err
			}
		}
		return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentPROpen, actor: domain.ActorRepair, actorID: run.ID.String(), reason: "pull request opened", prURL: &url})
	})
}

// RepairNeedsHuman records that the repair could not finish the job, with
// the reason a person will read (QUEUED|RUNNING → NEEDS_HUMAN).
func (in *Incidents) RepairNeedsHuman(ctx context.Context, run *run.Run, reason string) error {
	return in.withRepair(ctx, run, func(ctx context.Context, tx bun.Tx, inc *Incident) error {
		if inc.Status != domain.IncidentQueued && inc.Status != domain.IncidentRunning {
			return nil
		}
		return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentNeedsHuman, actor: domain.ActorRepair, actorID: run.ID.String(), reason: reason})
	})
}

// runTerminal is the queue's terminal hook: a repair run that ends while
// its incident still waits on it (canceled, lost, a checkout that failed,
// or a run that passed without opening a pull request) hands the incident
// to a person, in the transaction that terminalizes the run. The repair
// handler has already moved the incident for the outcomes it knows.
func (in *Incidents) runTerminal(ctx context.Context, tx bun.Tx, r *run.Run) error {
	if r.Trigger != run.TriggerRepair || r.IncidentID == nil {
		return nil
	}
	inc, err := lockIncident(ctx, tx, *r.IncidentID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if inc.RepairRunID == nil || *inc.RepairRunID != r.ID || (inc.Status != domain.IncidentQueued && inc.Status != domain.IncidentRunning) {
		return nil
	}
	return in.move(ctx, tx, inc, moveSpec{to: domain.IncidentNeedsHuman, actor: domain.ActorRepair, actorID: r.ID.String(), reason: terminalReason(r)})
}

// terminalReason words a repair run's end for the incident page.
func terminalReason(r *run.Run) string {
	reason := ""
	if r.FailureReason != nil {
		reason = *r.FailureReason
	}
	switch {
	case r.State == run.StateCanceled:
		return "the repair run was canceled"
	case r.State == run.StatePassed:
		return "the repair run finished without opening a pull request"
	case reason == run.ReasonExitCode && r.ExitCode != nil:
		return fmt.Sprintf("the repair command failed with exit code %d", *r.ExitCode)
	case reason == run.ReasonRepairNoOp:
		return "the repair command changed nothing"
	case reason == run.ReasonRunnerLost:
		return "the repair run's runner was lost"
	case reason == run.ReasonTimeout:
		return "the repair run timed out"
	case reason == run.ReasonCheckout:
		return "the repository could not be checked out for the repair"
	case reason != "":
		return "the repair run failed: " + reason
	}
	return "the repair run failed"
}

// moveAlertCause is the alert of an incident's lifecycle move, if any.
func moveAlertCause(inc *Incident, to string) []domain.AlertCause {
	kind := map[string]string{domain.IncidentWaitingApproval: domain.AlertIncidentApproval, domain.IncidentPROpen: domain.AlertRepairPROpened,
		domain.IncidentNeedsHuman: domain.AlertRepairNeedsHuman}[to]
	if kind == "" {
		return nil
	}
	return []domain.AlertCause{{Kind: kind, OrgID: inc.OrgID, ProjectID: inc.ProjectID, IncidentID: inc.ID}}
}
