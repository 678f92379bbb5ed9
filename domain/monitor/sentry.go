package monitor

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// The Sentry SDKs' check_in envelope item (sentry-go CaptureCheckIn,
// @sentry/node captureCheckIn/withMonitor, sentry-python monitor), as
// Sentry's relay reads it: docs/monitors.md, "From the Sentry SDKs".
type sentryCheckIn struct {
	CheckInID     string   `json:"check_in_id"`
	MonitorSlug   string   `json:"monitor_slug"`
	Status        string   `json:"status"`
	Duration      *float64 `json:"duration"`
	Release       string   `json:"release"`
	Environment   string   `json:"environment"`
	MonitorConfig *Input   `json:"monitor_config"`
}

// ParseCheckIn reads one check_in item's payload. The slug is made a slug
// as Sentry does (lower case, other characters become "-").
func ParseCheckIn(payload []byte) (CheckInInput, error) {
	var ci sentryCheckIn
	if err := json.Unmarshal(payload, &ci); err != nil {
		return CheckInInput{}, fmt.Errorf("the check_in item is not a JSON object of Sentry's shape: %w", err)
	}
	in := CheckInInput{Slug: Slugify(ci.MonitorSlug), Status: ci.Status, Duration: ci.Duration, Release: ci.Release,
		Environment: ci.Environment, Config: ci.MonitorConfig, Source: "sentry"}
	if in.Slug == "" {
		return CheckInInput{}, fmt.Errorf("the check_in item has no monitor_slug")
	}
	if ci.CheckInID != "" {
		id, err := uuid.Parse(ci.CheckInID)
		if err != nil {
			return CheckInInput{}, fmt.Errorf("check_in_id %q is not a UUID", ci.CheckInID)
		}
		in.CheckInID = &id
	}
	if len(in.Release) > 200 {
		in.Release = in.Release[:200]
	}
	return in, nil
}

// Slugify makes s a monitor slug: lower case letters, digits, - and _.
func Slugify(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-_")
	if len(out) > 50 {
		out = out[:50]
	}
	return out
}
