package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"anvil/domain"
	"anvil/domain/card"
)

// CardSweepWorker enqueues the card refreshes a crash may have lost.
type CardSweepWorker struct {
	river.WorkerDefaults[domain.CardSweepArgs]
	cards *card.Cards
	log   *slog.Logger
}

// cardSweepEvery is how often the sweep runs; it looks a little further back.
const cardSweepEvery = time.Minute

// Timeout bounds one sweep.
func (w *CardSweepWorker) Timeout(*river.Job[domain.CardSweepArgs]) time.Duration { return time.Minute }

// Work runs one sweep.
func (w *CardSweepWorker) Work(ctx context.Context, _ *river.Job[domain.CardSweepArgs]) error {
	n, err := w.cards.SweepStale(ctx, 3*cardSweepEvery)
	if n > 0 {
		w.log.Debug("card sweep", "refreshes", n)
	}
	return err
}
