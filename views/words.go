package views

import (
	"strconv"
	"time"
)

// The cockpit says each kind of thing one way on every page
// (docs/cockpit.md, "Words"): a time relative to now with the exact local
// time on hover (TimeAgo), a duration as Duration writes it, a count with
// its noun (countOf), a status in words (StatusWords).

// Ago renders a time relative to now for people, "—" for the zero time:
// "just now", "5 min ago", "3 h ago", "in 10 min", "in 5 h"; further than
// two days either way, the date (the exact time is on hover, TimeAgo).
func Ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	future := d < 0
	if future {
		d = -d
	}
	var n string
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		n = strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 48*time.Hour:
		n = strconv.Itoa(int(d/time.Hour)) + " h"
	default:
		return t.UTC().Format("2006-01-02")
	}
	if future {
		return "in " + n
	}
	return n + " ago"
}

// Duration is how long something took: "0.4 s" below ten seconds, "12 s",
// "3 min 5 s", "2 h 5 min". static/app.js counts a running run's duration
// up in the same words.
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < 10*time.Second:
		return strconv.FormatFloat(float64(d/(100*time.Millisecond))/10, 'f', 1, 64) + " s"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min " + strconv.Itoa(int(d/time.Second)%60) + " s"
	}
	return strconv.Itoa(int(d/time.Hour)) + " h " + strconv.Itoa(int(d/time.Minute)%60) + " min"
}

// statusWords are the run and incident statuses as a person reads them;
// the codes stay in data-status attributes and on the API.
var statusWords = map[string]string{
	"cancel_requested": "cancel requested",
	"OBSERVED":         "observed",
	"TRIAGED":          "triaged",
	"WAITING_APPROVAL": "waiting for approval",
	"QUEUED":           "repair queued",
	"RUNNING":          "repairing",
	"PR_OPEN":          "fix proposed",
	"NEEDS_HUMAN":      "needs a person",
	"CLOSED":           "closed",
	"IGNORED":          "ignored",
	// The inbox's filter of incidents whose shipped fix is being watched.
	"VERIFYING": "verifying a fix",
	// Run failure reasons (the run page's Reason; the API keeps the codes).
	"exit_code":          "the command failed",
	"timeout":            "timed out",
	"runner_lost":        "runner lost",
	"checkout_failed":    "checkout failed",
	"sandbox_error":      "the sandbox failed",
	"internal_error":     "anvil failed",
	"repair_push_failed": "the push failed",
	"no_change":          "nothing changed",
	"provider_error":     "the forge refused the pull request",
	// Triggers.
	"pull_request": "pull request",
	// Alert kinds (the alerts page's delivery log; payloads keep the codes).
	"incident.new":                 "new incident",
	"incident.regressed":           "regression",
	"incident.waiting_approval":    "waiting for approval",
	"incident.fix_failed":          "fix failed",
	"repair.pr_opened":             "fix proposed",
	"repair.needs_human":           "needs a person",
	"run.default_branch_failed":    "default branch failed",
	"run.default_branch_recovered": "default branch recovered",
	"test":                         "test alert",
}

// StatusWords says a status code in words ("waiting for approval" for
// WAITING_APPROVAL, "needs a person" for NEEDS_HUMAN); any other code is
// shown with its underscores as spaces.
func StatusWords(code string) string {
	if w, ok := statusWords[code]; ok {
		return w
	}
	out := []byte(code)
	for i, c := range out {
		if c == '_' {
			out[i] = ' '
		}
	}
	return string(out)
}

// countOf is "1 event", "3 events".
func countOf(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// networkPresets names the network list's presets for the project form's
// help (netpolicy.Presets; views import nothing of the domain).
const networkPresets = "@npm @pypi @go @crates @maven @rubygems @github @gitlab @dockerhub @ghcr @quay @gcr"

// shortDigest is an image digest as a page shows it: sha256: and twelve
// hex digits (the whole digest is the element's title).
func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}
