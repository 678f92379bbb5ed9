package event

import "strings"

// ScrubText masks secrets in free text by the same rules as an event's free
// text (see Scrub), for text stored outside an event — a cron monitor's run
// output (docs/monitors.md, "Ping URLs"). Bytes that are not UTF-8 become
// U+FFFD first, so the patterns always read the whole text.
func ScrubText(s string) string {
	return scrubText(strings.ToValidUTF8(s, "\uFFFD"))
}
