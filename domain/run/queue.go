package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/groupcommit"
	"anvil/domain/project"
)

// Queue is the authoritative per-project run queue, the one writer of queue
// state (docs/architecture.md, "One writer per project").
// Every method runs in one transaction that holds the project row lock;
// nothing else writes queue state.
type Queue struct {
	s                *domain.Store
	comb             *groupcommit.Combiner[*acceptJob]
	heartbeatTimeout time.Duration
	hooks            []TerminalHook
	latest           LatestResolver
	// generalOnly sends every group down the general path (tryGroup's bun
	// transaction), never tryGroupFast: a test seam for the differential
	// test that holds the fast path to its slow twin. Never set in
	// production.
	generalOnly bool
}

// TerminalHook is called inside the transaction that terminalizes a run
// (repair runs report their outcome to incidents through it).
type TerminalHook func(ctx context.Context, tx bun.Tx, r *Run) error

// NewQueue builds the service; heartbeatTimeout is how long an active run may
// go without a heartbeat before its runner is declared lost.
func NewQueue(s *domain.Store, heartbeatTimeout time.Duration) *Queue {
	if heartbeatTimeout <= 0 {
		heartbeatTimeout = 60 * time.Second
	}
	q := &Queue{s: s, heartbeatTimeout: heartbeatTimeout}
	q.comb = groupcommit.New(acceptPolicy, q.acceptGroup)
	return q
}

// StartAccepting starts the loop that stores acceptances in groups
// (Start is a run's own step).
func (q *Queue) StartAccepting(ctx context.Context) { q.comb.Start(ctx) }

// StopAccepting stores the acceptances still waiting, then refuses new
// ones.
func (q *Queue) StopAccepting(ctx context.Context) error {
	if err := q.comb.Stop(ctx); err != nil {
		return fmt.Errorf("queue: stop accepting: %w", err)
	}
	return nil
}

// OnTerminal registers a hook run when any run becomes terminal.
func (q *Queue) OnTerminal(h TerminalHook) { q.hooks = append(q.hooks, h) }

// HeartbeatTimeout is the configured timeout.
func (q *Queue) HeartbeatTimeout() time.Duration { return q.heartbeatTimeout }

// AcceptSpec describes a run to accept.
type AcceptSpec struct {
	Trigger     string
	Branch      string
	CommitSHA   *string
	TriggeredBy *uuid.UUID
	Provider    *string
	DeliveryID  *string
	IncidentID  *uuid.UUID
	RerunOf     *uuid.UUID
	// FromFork: the code comes from another repository; no secrets.
	FromFork bool
	// Image and ImageDigest pin a re-run to the bytes of the run it
	// repeats (docs/images.md).
	Image       *string
	ImageDigest *string
}

// runEvent is the live event published on every change of a run.
type runEvent struct {
	Kind      string    `json:"kind"`
	OrgID     uuid.UUID `json:"org_id"`
	ProjectID uuid.UUID `json:"project_id"`
	RunID     uuid.UUID `json:"run_id"`
	Status    string    `json:"status"`
}

func (q *Queue) publish(ctx context.Context, tx bun.Tx, r *Run) error {
	b, _ := json.Marshal(runEvent{Kind: "run", OrgID: r.OrgID, ProjectID: r.ProjectID, RunID: r.ID, Status: r.Status()})
	return domain.Notify(ctx, tx, string(b))
}

// changed records that a run's truth changed: the sync status moves as
// docs/architecture.md ("Runs and the read model") allows, reconciliation
// is enqueued, and a live event goes out — all in the caller's transaction.
func (q *Queue) changed(ctx context.Context, tx bun.Tx, r *Run, cols ...string) error {
	next, err := syncAfterChange(r.SyncStatus, IsTerminal(r.State))
	if err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	r.SyncStatus = next
	r.UpdatedAt = q.s.Now()
	cols = append(cols, "d1_sync_status", "updated_at")
	if _, err := tx.NewUpdate().Model(r).Column(cols...).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("update run %s: %w", r.ID, err)
	}
	if err := q.s.InsertJob(ctx, tx, domain.ReconcileRunArgs{RunID: r.ID, Target: next}); err != nil {
		return err
	}
	if err := q.enqueueStatusTx(ctx, tx, r); err != nil {
		return err
	}
	return q.publish(ctx, tx, r)
}

// promoteTx promotes the smallest pending position when the project has no
// active run, inserting its execute_run job in the same transaction.
func (q *Queue) promoteTx(ctx context.Context, tx bun.Tx, p *domain.Project) error {
	next := new(Run)
	err := tx.NewRaw(`SELECT * FROM project_runs
		WHERE project_id = ? AND state = 'pending'
		  AND NOT EXISTS (SELECT 1 FROM project_runs a WHERE a.project_id = ? AND a.state IN ('executable', 'starting', 'running', 'cancel_requested', 'canceling'))
		ORDER BY position LIMIT 1`, p.ID, p.ID).Scan(ctx, next)
	if dbutil.IsNoRows(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find next run: %w", err)
	}
	if err := checkTransition(next.State, StateExecutable); err != nil {
		return err
	}
	res, err := q.s.Jobs().InsertTx(ctx, tx.Tx, domain.ExecuteRunArgs{RunID: next.ID}, nil)
	if err != nil {
		return fmt.Errorf("enqueue execution of %s: %w", next.ID, err)
	}
	now := q.s.Now()
	next.State, next.PromotedAt, next.JobID = StateExecutable, &now, &res.Job.ID
	next.UpdatedAt = now
	if _, err := tx.NewUpdate().Model(next).Column("state", "promoted_at", "job_id", "updated_at").WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("promote run %s: %w", next.ID, err)
	}
	return q.publish(ctx, tx, next)
}

// validSHA reports whether s is a full lower-case SHA-1 or SHA-256 commit id.
func validSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// AcceptManual queues a run of the project's branch (its default branch
// when empty) for a person or API client. A full queue is ErrQueueFull.
func (q *Queue) AcceptManual(ctx context.Context, pr *domain.Principal, projectID uuid.UUID, branch string) (*Run, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return nil, err
	}
	branch = strings.TrimSpace(branch)
	if branch != "" && (!domain.ValidBranch(branch) || strings.Contains(branch, "..") || strings.HasPrefix(branch, "-")) {
		return nil, domain.Invalid("invalid_branch", "branch %q is not a valid branch name", branch)
	}
	if branch != "" {
		if err := q.checkBranch(ctx, pr.OrgID, projectID, branch); err != nil {
			return nil, err
		}
	}
	uid := pr.UserID
	j := &acceptJob{projectID: projectID, orgID: pr.OrgID, spec: AcceptSpec{Trigger: TriggerManual, Branch: branch, TriggeredBy: &uid}}
	err := q.submit(j)
	if errors.Is(err, domain.ErrQueueFull) {
		return nil, &domain.Error{Kind: domain.ErrQueueFull, Code: "project_queue_full",
			Message: fmt.Sprintf("the project's queue already holds %d runs; wait for some to finish or cancel them", MaxQueued)}
	}
	return j.run, err
}

// AcceptTx accepts a run for a caller that already holds p's lock through
// Store.WithProject (repair approvals). Manual triggers and webhook
// deliveries are accepted in groups (acceptance.go), by the same rules.
func (q *Queue) AcceptTx(ctx context.Context, tx bun.Tx, p *domain.Project, spec AcceptSpec) (*Run, error) {
	if spec.CommitSHA != nil && !validSHA(*spec.CommitSHA) {
		return nil, domain.Invalid("invalid_commit_sha", "commit SHA must be 40 or 64 lower-case hex characters")
	}
	return q.acceptTx(ctx, tx, p, spec)
}

// withRun locks the run's project and loads the run.
func (q *Queue) withRun(ctx context.Context, runID uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error) error {
	var projectID uuid.UUID
	err := q.s.DB.NewRaw(`SELECT project_id FROM project_runs WHERE id = ?`, runID).Scan(ctx, &projectID)
	if dbutil.IsNoRows(err) {
		return domain.NotFound("run")
	}
	if err != nil {
		return fmt.Errorf("find run %s: %w", runID, err)
	}
	// A deleted project's run still moves: its cancel and its report.
	return q.s.WithAnyProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		r := new(Run)
		if err := tx.NewSelect().Model(r).Where("id = ?", runID).Scan(ctx); err != nil {
			if dbutil.IsNoRows(err) {
				return domain.NotFound("run")
			}
			return err
		}
		return fn(ctx, tx, p, r)
	})
}

// ErrNotExecutable is the claim of a run that is no longer waiting for an
// executor (canceled meanwhile, or already claimed); the executor stops.
var ErrNotExecutable = errors.New("run is not executable")

// Claim hands an executable run to an executor (→ starting) and returns it
// with its project.
func (q *Queue) Claim(ctx context.Context, runID uuid.UUID, executor string) (*Run, *domain.Project, error) {
	var run *Run
	var proj *domain.Project
	err := q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		if r.State != StateExecutable {
			return fmt.Errorf("claim %s (%s): %w", r.ID, r.State, ErrNotExecutable)
		}
		now := q.s.Now()
		r.State, r.Position, r.ClaimedAt, r.HeartbeatAt, r.Executor = StateStarting, nil, &now, &now, &executor
		run, proj = r, p
		return q.changed(ctx, tx, r, "state", "position", "claimed_at", "heartbeat_at", "executor")
	})
	return run, proj, err
}

// Start records that the command runs (→ running).
func (q *Queue) Start(ctx context.Context, runID uuid.UUID, sandboxed bool) (string, error) {
	return q.start(ctx, runID, sandboxed, "")
}

// StartChecked is Start for a run whose checkout resolved commit: the
// commit of a manual run is backfilled (as BackfillCommit does) in the same
// transaction, one transaction fewer on every run's way to its command.
// The commit is recorded even when the run does not start (a cancel
// requested meanwhile); a pinned commit is never replaced.
func (q *Queue) StartChecked(ctx context.Context, runID uuid.UUID, sandboxed bool, commit string) (string, error) {
	if !validSHA(commit) {
		return "", domain.Invalid("invalid_commit_sha", "commit SHA must be 40 or 64 lower-case hex characters")
	}
	return q.start(ctx, runID, sandboxed, commit)
}

func (q *Queue) start(ctx context.Context, runID uuid.UUID, sandboxed bool, commit string) (string, error) {
	var state string
	err := q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		state = r.State
		var cols []string
		if commit != "" && r.CommitSHA == nil && !IsTerminal(r.State) {
			r.CommitSHA = &commit
			cols = append(cols, "commit_sha")
		}
		if r.State != StateStarting {
			if isActive(r.State) || IsTerminal(r.State) {
				// Cancel requested meanwhile, or lost: the executor reads the state.
				if len(cols) > 0 {
					return q.changed(ctx, tx, r, cols...)
				}
				return nil
			}
			return checkTransition(r.State, StateRunning)
		}
		now := q.s.Now()
		r.State, r.StartedAt, r.HeartbeatAt, r.Sandboxed = StateRunning, &now, &now, &sandboxed
		state = r.State
		return q.changed(ctx, tx, r, append(cols, "state", "started_at", "heartbeat_at", "sandboxed")...)
	})
	return state, err
}

// RecordImage records the image a run's command runs in and the digest it
// was resolved to, before the run starts (docs/images.md); a run that
// already holds a digest (a re-run) keeps it.
func (q *Queue) RecordImage(ctx context.Context, runID uuid.UUID, ref, digest string) error {
	if len(ref) > 512 || !validImageDigest(digest) {
		return domain.Invalid("invalid_image_digest", "an image digest is sha256: and 64 lower-case hex characters")
	}
	return q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		if r.ImageDigest != nil || IsTerminal(r.State) {
			return nil
		}
		r.Image, r.ImageDigest = &ref, &digest
		return q.changed(ctx, tx, r, "image", "image_digest")
	})
}

func validImageDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Heartbeat records that the executor is alive and returns the run's
// current state, so the executor learns of a cancel request or of having
// been declared lost.
func (q *Queue) Heartbeat(ctx context.Context, runID uuid.UUID) (string, error) {
	var state string
	err := q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		state = r.State
		if !isActive(r.State) || r.State == StateExecutable {
			return nil
		}
		_, err := tx.NewRaw(`UPDATE project_runs SET heartbeat_at = ? WHERE id = ?`, q.s.Now(), r.ID).Exec(ctx)
		return err
	})
	return state, err
}

// BackfillCommit records the commit a manual run checked out; a pinned SHA
// is never replaced.
func (q *Queue) BackfillCommit(ctx context.Context, runID uuid.UUID, sha string) error {
	if !validSHA(sha) {
		return domain.Invalid("invalid_commit_sha", "commit SHA must be 40 or 64 lower-case hex characters")
	}
	return q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		if r.CommitSHA != nil || IsTerminal(r.State) {
			return nil
		}
		r.CommitSHA = &sha
		return q.changed(ctx, tx, r, "commit_sha")
	})
}

// Canceling records that the executor is stopping the run after a cancel
// request (cancel_requested → canceling).
func (q *Queue) Canceling(ctx context.Context, runID uuid.UUID) error {
	return q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		if r.State == StateCanceling {
			return nil
		}
		if err := checkTransition(r.State, StateCanceling); err != nil {
			return err
		}
		r.State = StateCanceling
		return q.changed(ctx, tx, r, "state")
	})
}

// TerminalReport is what an executor reports after teardown.
type TerminalReport struct {
	State         string // passed, failed or canceled
	ExitCode      *int
	FailureReason string
}

// ReportTerminal terminalizes a run after its teardown and promotes the next
// run, in one transaction. Reporting a run that is already terminal is a
// conflict the executor may ignore (the watchdog got there first).
func (q *Queue) ReportTerminal(ctx context.Context, runID uuid.UUID, rep TerminalReport) (*Run, error) {
	var out *Run
	err := q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		if !IsTerminal(rep.State) {
			return domain.Invalid("invalid_state", "a terminal report must be passed, failed or canceled")
		}
		if err := q.terminalizeTx(ctx, tx, p, r, rep); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

func (q *Queue) terminalizeTx(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run, rep TerminalReport) error {
	if err := checkTransition(r.State, rep.State); err != nil {
		return err
	}
	now := q.s.Now()
	r.State, r.Position, r.FinishedAt, r.ExitCode = rep.State, nil, &now, rep.ExitCode
	r.FailureReason = nil
	if rep.FailureReason != "" {
		reason := rep.FailureReason
		r.FailureReason = &reason
	}
	if err := q.changed(ctx, tx, r, "state", "position", "finished_at", "exit_code", "failure_reason", "canceled_by"); err != nil {
		return err
	}
	for _, h := range q.hooks {
		if err := h(ctx, tx, r); err != nil {
			return err
		}
	}
	return q.promoteTx(ctx, tx, p)
}

// RequestCancel cancels a run: a queued run at once (its position cleared),
// an active one by asking its executor (→ cancel_requested).
func (q *Queue) RequestCancel(ctx context.Context, pr *domain.Principal, runID uuid.UUID) (*Run, error) {
	if err := domain.RequireRole(pr, domain.RoleMember); err != nil {
		return nil, err
	}
	var out *Run
	err := q.withRun(ctx, runID, func(ctx context.Context, tx bun.Tx, p *domain.Project, r *Run) error {
		if r.OrgID != pr.OrgID {
			return domain.NotFound("run")
		}
		out = r
		switch r.State {
		case StatePending, StateExecutable:
			uid := pr.UserID
			r.CanceledBy = &uid
			return q.terminalizeTx(ctx, tx, p, r, TerminalReport{State: StateCanceled, FailureReason: ReasonCanceledWhileQueued})
		case StateStarting, StateRunning:
			uid := pr.UserID
			r.State, r.CanceledBy = StateCancelRequested, &uid
			return q.changed(ctx, tx, r, "state", "canceled_by")
		case StateCancelRequested, StateCanceling:
			return nil
		}
		return domain.Conflict("run_finished", "the run already finished (%s)", r.Status())
	})
	return out, err
}

// RunGet returns a run of the caller's organisation.
func (q *Queue) RunGet(ctx context.Context, orgID, runID uuid.UUID) (*Run, error) {
	r := new(Run)
	err := q.s.DB.NewSelect().Model(r).Where("id = ? AND org_id = ?", runID, orgID).
		Where("project_id NOT IN (SELECT id FROM "+domain.DeletedProjects+" p WHERE org_id = ?)", orgID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("run")
	}
	return r, err
}

// RunByID returns a run whatever its organisation (system callers only).
func (q *Queue) RunByID(ctx context.Context, runID uuid.UUID) (*Run, error) {
	r := new(Run)
	err := q.s.DB.NewSelect().Model(r).Where("id = ?", runID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("run")
	}
	return r, err
}

// QueueView is a project's queue as the service holds it.
type QueueView struct {
	Active *RunView  `json:"active"`
	Queued []RunView `json:"queued"`
}

// View returns the project's active run and its queued runs in position
// order, read from the authoritative rows.
func (q *Queue) View(ctx context.Context, orgID, projectID uuid.UUID) (QueueView, error) {
	out := QueueView{Queued: []RunView{}}
	var runs []Run
	err := q.s.DB.NewSelect().Model(&runs).
		Where("project_id = ? AND org_id = ?", projectID, orgID).
		Where("state IN ('pending', 'executable', 'starting', 'running', 'cancel_requested', 'canceling')").
		OrderExpr("position NULLS FIRST").Scan(ctx)
	if err != nil {
		return out, err
	}
	if len(runs) == 0 {
		if _, err := project.NewProjects(q.s).Get(ctx, orgID, projectID); err != nil {
			return out, err
		}
	}
	for i := range runs {
		v := runs[i].View()
		if isActive(runs[i].State) && out.Active == nil && runs[i].State != StatePending {
			out.Active = &v
			continue
		}
		out.Queued = append(out.Queued, v)
	}
	return out, nil
}

// CancelQueuedTx cancels a run that is still queued (pending or promoted
// but unclaimed) inside a caller's transaction holding p's lock, and
// promotes the next run. A run already executing is left alone: stopping it
// is a person's explicit cancel. It reports whether it canceled.
func (q *Queue) CancelQueuedTx(ctx context.Context, tx bun.Tx, p *domain.Project, runID uuid.UUID, reason string) (bool, error) {
	r := new(Run)
	if err := tx.NewSelect().Model(r).Where("id = ? AND project_id = ?", runID, p.ID).Scan(ctx); err != nil {
		if dbutil.IsNoRows(err) {
			return false, nil
		}
		return false, err
	}
	if r.State != StatePending && r.State != StateExecutable {
		return false, nil
	}
	return true, q.terminalizeTx(ctx, tx, p, r, TerminalReport{State: StateCanceled, FailureReason: reason})
}

// StopProjectTx stops every run of a project that is being deleted, in the
// caller's transaction holding p's lock (docs/erasure.md): queued runs are
// dropped — not promoted one after the other, and marked reconciled, since
// the project's rows are erased next — and an executing run is asked to
// stop through the cancel path (its executor stops the sandbox and
// reports). by is who asked (nil: nobody in particular).
func (q *Queue) StopProjectTx(ctx context.Context, tx bun.Tx, p *domain.Project, by *uuid.UUID) error {
	now := q.s.Now()
	if _, err := tx.NewRaw(`UPDATE project_runs SET state = 'canceled', position = NULL, finished_at = ?, failure_reason = ?,
			canceled_by = ?, updated_at = ?, d1_sync_status = 'done'
		WHERE project_id = ? AND state IN ('pending', 'executable')`, now, ReasonCanceledWhileQueued, by, now, p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("drop queued runs of %s: %w", p.ID, err)
	}
	var active []Run
	if err := tx.NewSelect().Model(&active).Where("project_id = ? AND state IN ('starting', 'running')", p.ID).Scan(ctx); err != nil {
		return fmt.Errorf("active runs of %s: %w", p.ID, err)
	}
	for i := range active {
		r := &active[i]
		r.State, r.CanceledBy = StateCancelRequested, by
		if err := q.changed(ctx, tx, r, "state", "canceled_by"); err != nil {
			return err
		}
	}
	return nil
}
