package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/webhook"
)

// WebhookRetentionWorker deletes delivery-ledger rows past their 72 h
// retention.
type WebhookRetentionWorker struct {
	river.WorkerDefaults[domain.WebhookRetentionArgs]
	webhooks *webhook.Webhooks
	log      *slog.Logger
}

// Timeout bounds one sweep; a sweep that runs out is retried and resumes
// where the last one got to, because it only deletes by age.
func (w *WebhookRetentionWorker) Timeout(*river.Job[domain.WebhookRetentionArgs]) time.Duration {
	return 5 * time.Minute
}

// Work deletes the expired rows.
func (w *WebhookRetentionWorker) Work(ctx context.Context, _ *river.Job[domain.WebhookRetentionArgs]) error {
	n, err := w.webhooks.DeleteExpiredDeliveries(ctx)
	if err == nil && n > 0 && w.log != nil {
		w.log.Info("deleted expired webhook deliveries", "count", n)
	}
	return err
}
