package domain

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// Incident statuses: docs/architecture.md, "Incident lifecycle".
const (
	IncidentObserved        = "OBSERVED"
	IncidentTriaged         = "TRIAGED"
	IncidentWaitingApproval = "WAITING_APPROVAL"
	IncidentQueued          = "QUEUED"
	IncidentRunning         = "RUNNING"
	IncidentPROpen          = "PR_OPEN"
	IncidentNeedsHuman      = "NEEDS_HUMAN"
	IncidentClosed          = "CLOSED"
	IncidentIgnored         = "IGNORED"
)

// Actors of an incident transition.
const (
	ActorPerson = "person"
	ActorPolicy = "policy"
	ActorRepair = "repair"
	ActorSystem = "system"
)

// PolicyTarget is where a triaged incident goes under a binding's repair
// policy: observe stays TRIAGED, approve waits for a person, auto is queued
// for repair at once. off never gets here (its events are not stored).
func PolicyTarget(policy string) string {
	switch policy {
	case PolicyApprove:
		return IncidentWaitingApproval
	case PolicyAuto:
		return IncidentQueued
	}
	return IncidentTriaged
}

// RefreshCardArgs replaces a project's production card from the incident
// store (docs/architecture.md, "Incidents and cards"). Not unique by River: card_changes.queued keeps one job
// per project responsible at a time (a burst of changes is one refresh),
// and a unique job that already existed when a change enqueued could start
// before that change committed and never read it (see EnqueueCardRefresh).
type RefreshCardArgs struct {
	ProjectID uuid.UUID `json:"project_id"`
}

// Kind implements river.JobArgs.
func (RefreshCardArgs) Kind() string { return "refresh_card" }

// InsertOpts retries a refresh the database refused.
func (RefreshCardArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 10} }
