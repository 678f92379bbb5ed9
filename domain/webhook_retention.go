package domain

import (
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// WebhookRetentionArgs is the periodic job that deletes ledger rows older
// than DeliveryRetention (72 h, docs/contracts/webhooks.md, "The ledger").
type WebhookRetentionArgs struct{}

// Kind implements river.JobArgs.
func (WebhookRetentionArgs) Kind() string { return "webhook_retention" }

// InsertOpts keeps one sweep waiting at a time: sweeps are idempotent, so a
// second one queued behind the first would only repeat it.
func (WebhookRetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}
