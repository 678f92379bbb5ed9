package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/account"
)

// PurgeSessionsWorker deletes expired browser sessions.
type PurgeSessionsWorker struct {
	river.WorkerDefaults[domain.PurgeSessionsArgs]
	accounts *account.Accounts
	log      *slog.Logger
}

// Timeout bounds one purge.
func (w *PurgeSessionsWorker) Timeout(*river.Job[domain.PurgeSessionsArgs]) time.Duration {
	return time.Minute
}

// Work deletes the sessions.
func (w *PurgeSessionsWorker) Work(ctx context.Context, _ *river.Job[domain.PurgeSessionsArgs]) error {
	n, err := w.accounts.PurgeExpiredSessions(ctx)
	if err == nil && n > 0 {
		w.log.Info("purged expired sessions", "count", n)
	}
	return err
}
