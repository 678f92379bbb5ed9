package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain/erasure"
)

// eraseSweepEvery is how often tombstones without an erase job are looked for.
const eraseSweepEvery = 15 * time.Minute

// EraseSweepWorker inserts the erase job of every tombstone that lost its
// own (discarded after its retries, say), so that a deletion always ends.
type EraseSweepWorker struct {
	river.WorkerDefaults[erasure.SweepArgs]
	erasure *erasure.Service
	log     *slog.Logger
}

// Timeout bounds one sweep.
func (w *EraseSweepWorker) Timeout(*river.Job[erasure.SweepArgs]) time.Duration {
	return time.Minute
}

// Work sweeps.
func (w *EraseSweepWorker) Work(ctx context.Context, _ *river.Job[erasure.SweepArgs]) error {
	n, err := w.erasure.Sweep(ctx)
	if err == nil && n > 0 {
		w.log.Info("erasures still to do", "count", n)
	}
	return err
}
