package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"anvil/domain"
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

// MaxCheckInsPerEnvelope is how many check_in items one envelope may
// record; the rest are refused, each (docs/monitors.md, "Bounds").
const MaxCheckInsPerEnvelope = 100

// Sender is who sent an envelope's check-ins: a feed connection of a
// project, a browser one or not.
type Sender struct {
	ProjectID uuid.UUID
	Conn      Connection
	// Browser is a public (anv_pub_) key: it ships in every page, so it
	// sends events and nothing else (docs/monitors.md, "What a public key
	// may do").
	Browser bool
}

// ItemRefusal is one check_in item not recorded: its place in the
// envelope, a stable code and a message. RateLimited marks the monitor's
// rate limit (the Sentry door answers it with its monitor category).
type ItemRefusal struct {
	Index       int
	Code        string
	Message     string
	RateLimited bool
}

// CheckInItems records an envelope's check_in items one by one: one item
// that cannot be read or is refused refuses that item only, never the
// others or the envelope's events. Past MaxCheckInsPerEnvelope, and from a
// browser key at all, items are refused without being read. err is a
// transient failure only (the door answers 503 and the SDK sends again).
func (ms *Service) CheckInItems(ctx context.Context, snd Sender, items [][]byte) (refused []ItemRefusal, err error) {
	for i, p := range items {
		switch {
		case snd.Browser:
			refused = append(refused, ItemRefusal{Index: i, Code: "check_in_not_allowed",
				Message: "a browser connection's key is public and sends events only; send check-ins with a server connection's DSN"})
			continue
		case i >= MaxCheckInsPerEnvelope:
			refused = append(refused, ItemRefusal{Index: i, Code: "too_many_check_ins",
				Message: fmt.Sprintf("an envelope records at most %d check_in items; send the rest in another", MaxCheckInsPerEnvelope)})
			continue
		}
		in, perr := ParseCheckIn(p)
		if perr != nil {
			refused = append(refused, ItemRefusal{Index: i, Code: "bad_request", Message: perr.Error()})
			continue
		}
		conn := snd.Conn
		in.Connection = &conn
		_, cerr := ms.CheckIn(ctx, snd.ProjectID, in)
		var de *domain.Error
		switch {
		case cerr == nil:
		case IsRateLimited(cerr):
			refused = append(refused, ItemRefusal{Index: i, Code: "rate_limited", Message: cerr.Error(), RateLimited: true})
		case errors.Is(cerr, domain.ErrNotFound):
			refused = append(refused, ItemRefusal{Index: i, Code: "monitor_not_found",
				Message: fmt.Sprintf("no monitor %q in this project; send a monitor_config to create it", in.Slug)})
		case errors.As(cerr, &de) && de.Kind != nil:
			msg := de.Message
			for _, f := range de.Fields {
				msg += fmt.Sprintf("; %s %s", f.Field, f.Problem)
			}
			refused = append(refused, ItemRefusal{Index: i, Code: de.Code, Message: msg})
		default:
			return refused, cerr
		}
	}
	return refused, nil
}
