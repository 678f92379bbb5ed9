package project

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// maxStatusContext is the longest status context, in characters.
const maxStatusContext = 255

// statusContextProblem checks a project's status context: the name under
// which a forge shows anvil's commit status and branch protection requires
// it (domain.StatusContextOf). Forges take any text there, so the rule is
// anvil's own: not empty (leaving it out keeps the default), at most 255
// characters, and no control characters, which forges' pages cannot show.
func statusContextProblem(s string) (string, string) {
	if s == "" {
		return "missing_status_context", "must not be empty (leave it out for anvil/<slug>)"
	}
	if utf8.RuneCountInString(s) > maxStatusContext {
		return "too_long_status_context", fmt.Sprintf("must be at most %d characters", maxStatusContext)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "invalid_status_context", "must not contain control characters"
		}
	}
	return "", ""
}
