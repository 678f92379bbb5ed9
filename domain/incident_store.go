package domain

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
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
// store (docs/architecture.md, "Incidents and cards"). Unique per project among unfinished jobs, so a burst of
// ingested batches coalesces into one refresh.
//
// The ingest does not insert it itself: Feed.refreshCard asks cardRefresher
// after the commit; decisions and repair statuses insert it in their own
// transaction (EnqueueCardRefresh).
type RefreshCardArgs struct {
	ProjectID uuid.UUID `json:"project_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (RefreshCardArgs) Kind() string { return "refresh_card" }

// InsertOpts makes the job unique per project while it waits or runs.
func (RefreshCardArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}
