package run

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// Internal queue states. Only the queue service sees pending and executable;
// everything outside it reads both as the public "queued".
const (
	StatePending         = "pending"
	StateExecutable      = "executable"
	StateStarting        = "starting"
	StateRunning         = "running"
	StateCancelRequested = "cancel_requested"
	StateCanceling       = "canceling"
	StatePassed          = "passed"
	StateFailed          = "failed"
	StateCanceled        = "canceled"
)

// Public run statuses (docs/architecture.md, "Runs and the read model").
const (
	StatusQueued          = "queued"
	StatusStarting        = "starting"
	StatusRunning         = "running"
	StatusCancelRequested = "cancel_requested"
	StatusCanceling       = "canceling"
	StatusPassed          = "passed"
	StatusFailed          = "failed"
	StatusCanceled        = "canceled"
)

// Triggers.
const (
	TriggerManual  = "manual"
	TriggerWebhook = "webhook"
	TriggerRepair  = "repair"
	// TriggerPullRequest: a pull or merge request from a branch of the
	// project's own repository, pinned to its head commit.
	TriggerPullRequest = "pull_request"
)

// Failure reasons.
const (
	ReasonExitCode    = "exit_code"
	ReasonTimeout     = "timeout"
	ReasonRunnerLost  = "runner_lost"
	ReasonCheckout    = "checkout_failed"
	ReasonSandbox     = "sandbox_error"
	ReasonInfra       = "internal_error"
	ReasonRepairPush  = "repair_push_failed"
	ReasonRepairNoOp  = "no_change"
	ReasonRepairForge = "provider_error"
	// ReasonPipeline: the commit's pipeline file was refused before any
	// step ran (docs/pipelines.md).
	ReasonPipeline = "pipeline_invalid"
)

// MaxQueued is the per-project cap of accepted queued runs.
const MaxQueued = 20

// PublicStatus maps an internal state onto the public enum.
func PublicStatus(state string) string {
	if state == StatePending || state == StateExecutable {
		return StatusQueued
	}
	return state
}

// IsTerminal reports whether a state (or status) is final.
func IsTerminal(state string) bool {
	return state == StatePassed || state == StateFailed || state == StateCanceled
}

// isActive reports whether a state holds the project's one active slot.
func isActive(state string) bool {
	switch state {
	case StateExecutable, StateStarting, StateRunning, StateCancelRequested, StateCanceling:
		return true
	}
	return false
}

// transitions are the legal moves of the internal state machine.
var transitions = map[string][]string{
	StatePending:         {StateExecutable, StateCanceled},
	StateExecutable:      {StateStarting, StateCanceled, StateFailed},
	StateStarting:        {StateRunning, StateCancelRequested, StatePassed, StateFailed, StateCanceled},
	StateRunning:         {StateCancelRequested, StatePassed, StateFailed, StateCanceled},
	StateCancelRequested: {StateCanceling, StatePassed, StateFailed, StateCanceled},
	StateCanceling:       {StateCanceled, StatePassed, StateFailed},
}

// checkTransition refuses an illegal move: never a silent write.
func checkTransition(from, to string) error {
	for _, s := range transitions[from] {
		if s == to {
			return nil
		}
	}
	return domain.Conflict("illegal_transition", "a run cannot go from %s to %s", PublicStatus(from), PublicStatus(to))
}

// Run is one run of a project's command: its authoritative row.
type Run struct {
	bun.BaseModel `bun:"table:project_runs"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	ProjectID     uuid.UUID  `bun:"project_id,type:uuid"`
	OrgID         uuid.UUID  `bun:"org_id,type:uuid"`
	State         string     `bun:"state"`
	Trigger       string     `bun:"trigger"`
	Branch        string     `bun:"branch"`
	CommitSHA     *string    `bun:"commit_sha"`
	Position      *int64     `bun:"position"`
	ExitCode      *int       `bun:"exit_code"`
	FailureReason *string    `bun:"failure_reason"`
	TriggeredBy   *uuid.UUID `bun:"triggered_by,type:uuid"`
	Provider      *string    `bun:"provider"`
	DeliveryID    *string    `bun:"delivery_id"`
	IncidentID    *uuid.UUID `bun:"incident_id,type:uuid"`
	CanceledBy    *uuid.UUID `bun:"canceled_by,type:uuid"`
	JobID         *int64     `bun:"job_id"`
	Executor      *string    `bun:"executor"`
	Sandboxed     *bool      `bun:"sandboxed"`
	LogBytes      int64      `bun:"log_bytes"`
	LogTruncated  bool       `bun:"log_truncated"`
	SyncStatus    string     `bun:"d1_sync_status"`
	QueuedAt      time.Time  `bun:"queued_at"`
	PromotedAt    *time.Time `bun:"promoted_at"`
	ClaimedAt     *time.Time `bun:"claimed_at"`
	StartedAt     *time.Time `bun:"started_at"`
	HeartbeatAt   *time.Time `bun:"heartbeat_at"`
	FinishedAt    *time.Time `bun:"finished_at"`
	UpdatedAt     time.Time  `bun:"updated_at"`
	// Number is the run's dense per-project number (#42), set at acceptance.
	Number  int64      `bun:"number"`
	RerunOf *uuid.UUID `bun:"rerun_of,type:uuid"`
	// FromFork marks code from another repository (a fork's pull request):
	// such a run never receives the project's secrets.
	FromFork bool `bun:"from_fork"`
	// Image is the image reference the run's command ran in, ImageDigest
	// the manifest digest it was resolved to (docs/images.md); nil: the
	// host's tools. A re-run inherits both: the same bytes.
	Image       *string `bun:"image"`
	ImageDigest *string `bun:"image_digest"`
	// PipelineFile is the pipeline file the run read (nil: the project's
	// command ran); PipelineError why that file was refused
	// (docs/pipelines.md).
	PipelineFile  *string `bun:"pipeline_file"`
	PipelineError *string `bun:"pipeline_error"`
}

// SecretsAllowed reports whether the run's command may see the project's
// secrets: every run but one of code from a fork.
func (r *Run) SecretsAllowed() bool { return !r.FromFork }

// Status is the run's public status.
func (r *Run) Status() string { return PublicStatus(r.State) }

// RunView is a run as it leaves the domain: public status only.
type RunView struct {
	RunID         uuid.UUID  `json:"run_id"`
	ProjectID     uuid.UUID  `json:"project_id"`
	Status        string     `json:"status"`
	Trigger       string     `json:"trigger"`
	Branch        string     `json:"branch"`
	CommitSHA     *string    `json:"commit_sha"`
	Position      *int64     `json:"position"`
	ExitCode      *int       `json:"exit_code"`
	FailureReason *string    `json:"failure_reason"`
	QueuedAt      time.Time  `json:"queued_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	Sandboxed     *bool      `json:"sandboxed,omitempty"`
	IncidentID    *uuid.UUID `json:"incident_id,omitempty"`
	Number        int64      `json:"number"`
	RerunOf       *uuid.UUID `json:"rerun_of,omitempty"`
	CanceledBy    *uuid.UUID `json:"canceled_by,omitempty"`
	FromFork      bool       `json:"from_fork,omitempty"`
	Image         *string    `json:"image"`
	ImageDigest   *string    `json:"image_digest"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// View renders the run for the outside.
func (r *Run) View() RunView {
	return RunView{RunID: r.ID, ProjectID: r.ProjectID, Status: r.Status(), Trigger: r.Trigger, Branch: r.Branch,
		CommitSHA: r.CommitSHA, Position: r.Position, ExitCode: r.ExitCode, FailureReason: r.FailureReason,
		QueuedAt: r.QueuedAt.UTC(), StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt),
		Sandboxed: r.Sandboxed, IncidentID: r.IncidentID, Number: r.Number, RerunOf: r.RerunOf,
		CanceledBy: r.CanceledBy, FromFork: r.FromFork, Image: r.Image, ImageDigest: r.ImageDigest}
}

// The d1_sync_status values (docs/architecture.md, "Runs and the read model").
const (
	SyncNeedsCreate         = "needs_create"
	SyncCurrent             = "current"
	SyncNeedsUpdate         = "needs_update"
	SyncNeedsTerminalUpdate = "needs_terminal_update"
	SyncDone                = "done"
)

// syncTransitions are exactly the allowed d1_sync_status moves.
var syncTransitions = map[string][]string{
	SyncNeedsCreate:         {SyncCurrent, SyncNeedsUpdate, SyncNeedsTerminalUpdate},
	SyncCurrent:             {SyncNeedsUpdate, SyncNeedsTerminalUpdate},
	SyncNeedsUpdate:         {SyncCurrent, SyncNeedsTerminalUpdate},
	SyncNeedsTerminalUpdate: {SyncDone},
}

// SyncTransitionAllowed reports whether from → to is an allowed move.
func SyncTransitionAllowed(from, to string) bool {
	for _, s := range syncTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// syncAfterChange is the status after the run's truth changed: a terminal
// change needs a terminal update, any other a metadata update. A status that
// already asks for exactly that stays; nothing leaves done, and a terminal
// run's truth does not change again.
func syncAfterChange(cur string, terminal bool) (string, error) {
	want := SyncNeedsUpdate
	if terminal {
		want = SyncNeedsTerminalUpdate
	}
	if cur == want {
		return cur, nil
	}
	if !SyncTransitionAllowed(cur, want) {
		return "", fmt.Errorf("sync: %s → %s is not allowed", cur, want)
	}
	return want, nil
}

// syncAfterReconcile is the status once the read model holds the truth.
func syncAfterReconcile(cur string) (string, bool) {
	switch cur {
	case SyncNeedsCreate, SyncNeedsUpdate:
		return SyncCurrent, true
	case SyncNeedsTerminalUpdate:
		return SyncDone, true
	}
	return cur, false
}
