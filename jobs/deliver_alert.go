package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain/alert"
)

// DeliverAlertWorker delivers one alert to one destination. Its jobs run
// on their own queue, so a slow or failing destination holds up no run.
type DeliverAlertWorker struct {
	river.WorkerDefaults[alert.DeliverArgs]
	alerts *alert.Service
}

// Timeout bounds one attempt (the HTTP client's own is 10 s).
func (w *DeliverAlertWorker) Timeout(*river.Job[alert.DeliverArgs]) time.Duration {
	return 30 * time.Second
}

// NextRetry backs off from 5 s to 30 min.
func (w *DeliverAlertWorker) NextRetry(j *river.Job[alert.DeliverArgs]) time.Time {
	return time.Now().Add(alert.Backoff(j.Attempt))
}

// Work makes one attempt.
func (w *DeliverAlertWorker) Work(ctx context.Context, j *river.Job[alert.DeliverArgs]) error {
	return outcome(w.alerts.Deliver(ctx, j.Args, j.Attempt, j.CreatedAt))
}

// AlertDigestWorker sends the "and N more" of a destination's folded minute.
type AlertDigestWorker struct {
	river.WorkerDefaults[alert.DigestArgs]
	alerts *alert.Service
}

// NextRetry backs off like deliveries.
func (w *AlertDigestWorker) NextRetry(j *river.Job[alert.DigestArgs]) time.Time {
	return time.Now().Add(alert.Backoff(j.Attempt))
}

// Work sends the digest.
func (w *AlertDigestWorker) Work(ctx context.Context, j *river.Job[alert.DigestArgs]) error {
	return outcome(w.alerts.Digest(ctx, j.Args.DestinationID, j.Attempt, j.CreatedAt))
}

// outcome tells River what became of an attempt: a Retry-After is a
// snooze, a permanent failure cancels the job.
func outcome(o alert.Outcome) error {
	switch {
	case o.Done:
		return nil
	case o.Stop != nil:
		return river.JobCancel(o.Stop)
	case o.RetryAfter > 0:
		return river.JobSnooze(o.RetryAfter)
	default:
		return o.Retry
	}
}
