// Package notify is the paced publisher of live events: payloads queued by
// committed transactions are sent from one goroutine, one round at a time,
// at most one round per Gap, each payload once however often it was queued
// (a busy project's groups all announce the same change).
package notify

import (
	"context"
	"log/slog"
	"time"

	"anvil/domain/internal/coalesce"
)

// Gap is the least time between two rounds. Every round is a transaction
// of its own and wakes every listening connection of the database; under a
// steady stream of feed groups the rounds would otherwise follow each
// other as fast as the database answers them.
const Gap = 20 * time.Millisecond

// MaxPending bounds the queue when the database is unreachable. A lost
// event only delays a page's refresh (every consumer reads the truth on
// the next event or resync).
const MaxPending = 10000

// SendFunc sends one round's payloads, in one statement.
type SendFunc func(ctx context.Context, payloads []string) error

// Publisher sends queued payloads in paced rounds. Start it once; Stop it
// before the pool closes: Stop sends what is pending before it returns.
type Publisher struct {
	loop *coalesce.Loop[string]
}

// New builds a publisher that sends with send and logs a failed round on
// log.
func New(send SendFunc, log *slog.Logger) *Publisher {
	return &Publisher{loop: coalesce.New(Gap, MaxPending, func(ctx context.Context, payloads []string) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := send(sctx, payloads); err != nil {
			log.Warn("live events: notify failed", "events", len(payloads), "error", err)
		}
	})}
}

// Publish queues payloads; it never blocks.
func (p *Publisher) Publish(payloads ...string) { p.loop.Request(payloads...) }

// Start runs the publisher until Stop.
func (p *Publisher) Start(ctx context.Context) { p.loop.Start(ctx) }

// Flush returns once every payload queued before the call has been sent
// (or its round has failed), or when ctx ends.
func (p *Publisher) Flush(ctx context.Context) error { return p.loop.Flush(ctx) }

// Stop sends what is pending and ends the publisher; it returns when that
// round is done or ctx ends.
func (p *Publisher) Stop(ctx context.Context) error { return p.loop.Stop(ctx) }
