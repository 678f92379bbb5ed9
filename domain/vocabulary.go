package domain

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The shared vocabulary of the capability packages: incident statuses,
// actors, repair policies and the spelling of names (slugs, branches,
// environments). Run states and reasons are domain/run's.

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

// PolicyForLevel is the policy an event of level meets: under auto, an
// event at warning or below (warning, info, debug) never starts a repair on
// its own — a log line is not a crash — so it waits for a person as under
// approve, who may still approve it (docs/contracts/feed.md, "Levels and
// repairs"). Every other policy and level is left as it is.
func PolicyForLevel(policy, level string) string {
	if policy == PolicyAuto && (level == "warning" || level == "info" || level == "debug") {
		return PolicyApprove
	}
	return policy
}

// Repair policies of a binding (docs/architecture.md, "Incident lifecycle").
const (
	PolicyOff     = "off"     // events refused as binding_disabled
	PolicyObserve = "observe" // incidents, no repair
	PolicyApprove = "approve" // repair waits for a person
	PolicyAuto    = "auto"    // repair queued at once
)

// IncidentStatuses lists the nine statuses in lifecycle order (the inbox's
// counts and filter follow it).
var IncidentStatuses = []string{IncidentObserved, IncidentTriaged, IncidentWaitingApproval, IncidentQueued, IncidentRunning,
	IncidentPROpen, IncidentNeedsHuman, IncidentClosed, IncidentIgnored}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// environmentRE is the event's rule for an environment label (see
// event.Validate), so that every binding can match some event.
var environmentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

var branchRE = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,255}$`)

// ValidSlug reports whether s is a slug: an organisation's or a project's
// name in addresses.
func ValidSlug(s string) bool { return slugRE.MatchString(s) }

// ValidEnvironment reports whether s is an environment label as events
// spell it (lower-case).
func ValidEnvironment(s string) bool { return environmentRE.MatchString(s) }

// ValidBranch reports whether s is spelled like a branch name; callers
// also refuse ".." and a leading "-".
func ValidBranch(s string) bool { return branchRE.MatchString(s) }

var windowRE = regexp.MustCompile(`^([0-9]{1,7})([dhms])$`)

// ParseWindow reads a duration written as the API writes them ("90d",
// "24h", "30m", "45s"; the form of docs/retention.md), for settings outside
// retention (a project's fix_verification_window).
func ParseWindow(s string) (time.Duration, bool) {
	m := windowRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	unit := map[string]time.Duration{"d": 24 * time.Hour, "h": time.Hour, "m": time.Minute, "s": time.Second}[m[2]]
	return time.Duration(n) * unit, true
}

// FormatWindow writes d in the largest unit that divides it — one day as
// "24h", the default's spelling.
func FormatWindow(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s > 86400 && s%86400 == 0:
		return strconv.FormatInt(s/86400, 10) + "d"
	case s > 0 && s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s > 0 && s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}
