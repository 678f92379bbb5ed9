package incident

import (
	"github.com/google/uuid"

	"anvil/domain"
)

// The doors of cron monitors (domain/monitor, docs/monitors.md): a failing
// monitor opens an incident like a first event (Created), reopens a closed
// one like a regression (Regressed), and a recovered monitor closes its
// incident with the evidence — the one move of an incident that anvil
// itself makes into CLOSED, recorded as the system with actor id "anvil".

// Recovered records a monitor's incident closed by anvil after the
// monitor's recovery threshold; evidence says which runs were good ("ok at
// 02:00 and 03:00").
func Recovered(id uuid.UUID, from, evidence string) []Transition {
	return []Transition{{Incident: id, From: strPtr(from), To: domain.IncidentClosed, Actor: domain.ActorSystem, ActorID: "anvil",
		Reason: "recovered: " + evidence}}
}

// Closable reports whether a recovered monitor closes an incident in
// status: everything but CLOSED (already) and IGNORED (a person's choice
// to stop hearing of it) — also while a repair runs, as a person may.
func Closable(status string) bool {
	return status != domain.IncidentClosed && status != domain.IncidentIgnored
}
