// Package incident is the incidents: the inbox, decisions and the lifecycle
// table, repair dispatch and outcomes, and the one writer of
// incident_transitions (the feed's store takes its moves from Created and
// Regressed). It imports the base domain, run (repairs are runs) and card.
package incident
