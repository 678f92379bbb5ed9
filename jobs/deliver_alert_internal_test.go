package jobs

import (
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain/alert"
)

// What River is told of each attempt: a 429's Retry-After is a snooze of
// that length, a 4xx cancels (no more attempts), a 5xx or a network error
// is an error River retries with NextRetry's back-off.
func TestDeliverAlertOutcomes(t *testing.T) {
	t.Parallel()
	var snooze *river.JobSnoozeError
	if err := outcome(alert.Outcome{Retry: errors.New("HTTP 429"), RetryAfter: 7 * time.Second}); !errors.As(err, &snooze) || snooze.Duration != 7*time.Second {
		t.Fatalf("429: %v", err)
	}
	var cancel *river.JobCancelError
	if err := outcome(alert.Outcome{Stop: errors.New("HTTP 404")}); !errors.As(err, &cancel) {
		t.Fatalf("404: %v", err)
	}
	if err := outcome(alert.Outcome{Retry: errors.New("HTTP 503")}); err == nil || errors.As(err, &cancel) || errors.As(err, &snooze) {
		t.Fatalf("503: %v", err)
	}
	if err := outcome(alert.Outcome{Done: true}); err != nil {
		t.Fatalf("done: %v", err)
	}
	// The back-off grows to 30 minutes, and the attempts outlast 24 h.
	total := time.Duration(0)
	for a := 1; a < alert.MaxAttempts; a++ {
		total += alert.Backoff(a)
	}
	if alert.Backoff(1) != 5*time.Second || alert.Backoff(30) != 30*time.Minute || total < alert.RetryFor {
		t.Fatalf("back-off %s, %s; all attempts span %s", alert.Backoff(1), alert.Backoff(30), total)
	}
}
