package views

import "strconv"

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
const networkPresets = "@npm @pypi @go @crates @maven @rubygems @github @gitlab"
