package domain

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain/secret"
)

// JobInserter is what the domain needs of River: inserting a job inside the
// caller's transaction so the work exists exactly when the change commits.
type JobInserter interface {
	InsertTx(ctx context.Context, tx *sql.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	InsertManyTx(ctx context.Context, tx *sql.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// Store is the shared state of every domain service.
type Store struct {
	DB *bun.DB
	// Pool, when set, is the pgx pool under DB; acceptance groups use it to
	// send their statements together (acceptance_fast.go).
	Pool *pgxpool.Pool
	Keys *secret.Keyring
	Log  *slog.Logger
	Now  func() time.Time
	jobs JobInserter
	pub  publisher
	// alerts turns changes into alert deliveries (alert_hook.go); nil
	// sends none. fastJobs inserts them on the feed's fast path.
	alerts   AlertHook
	fastJobs FastJobInserter
}

// NewStore builds the shared state; UseJobs must be called before anything
// that enqueues work (River's client needs its workers, which need the
// services, so the client arrives last).
func NewStore(bdb *bun.DB, keys *secret.Keyring, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{DB: bdb, Keys: keys, Log: log, Now: func() time.Time { return time.Now().UTC() }}
}

// UseJobs sets the River client used to enqueue work in transactions.
func (s *Store) UseJobs(j JobInserter) { s.jobs = j }

// insertJob enqueues args in tx.
func (s *Store) insertJob(ctx context.Context, tx bun.Tx, args river.JobArgs, opts *river.InsertOpts) error {
	if s.jobs == nil {
		return fmt.Errorf("domain: no job inserter configured for %s", args.Kind())
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, args, opts); err != nil {
		return fmt.Errorf("domain: enqueue %s: %w", args.Kind(), err)
	}
	return nil
}

// inTx runs fn in a transaction. Live events that fn publishes with notify
// are sent once the transaction has committed (see publisher).
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return s.publishAfter(ctx, func(ctx context.Context) error { return s.DB.RunInTx(ctx, nil, fn) })
}

// publishAfter runs commit, a transaction (or its rest) through its COMMIT, with a ctx
// in which notify collects the live events, and publishes them once commit
// has returned without error.
func (s *Store) publishAfter(ctx context.Context, commit func(ctx context.Context) error) error {
	ev := &pendingEvents{}
	err := commit(context.WithValue(ctx, pendingEventsKey{}, ev))
	if err == nil && len(ev.payloads) > 0 {
		s.pub.publish(s, ev.payloads)
	}
	return err
}

// WithProject is THE helper for every per-project mutation: one transaction
// that first locks the project row (SELECT … FOR UPDATE), so a project's
// queue, webhooks and incidents change one writer at a time across every
// process. fn enqueues the work it implies with s.insertJob on the same tx.
// (Acceptance groups take the same row locks for several projects at once,
// in id order; see acceptance.go.)
func (s *Store) WithProject(ctx context.Context, projectID uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *Project) error) error {
	return s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		p := new(Project)
		err := tx.NewSelect().Model(p).Where("id = ?", projectID).For("UPDATE").Scan(ctx)
		if err != nil {
			if isNoRows(err) {
				return NotFound("project")
			}
			return fmt.Errorf("lock project %s: %w", projectID, err)
		}
		return fn(ctx, tx, p)
	})
}

// notify publishes a live event to every web and worker process through
// Postgres NOTIFY, once (and only if) the transaction commits.
//
// The NOTIFY is not sent inside the transaction: Postgres serializes the
// commits of notifying transactions behind one lock held across the WAL
// flush, which would cap every write path at one commit per fsync. Events
// are queued and sent after the commit, batched, by the store's publisher.
func notify(ctx context.Context, tx bun.IDB, payload string) error {
	if ev, ok := ctx.Value(pendingEventsKey{}).(*pendingEvents); ok {
		ev.payloads = append(ev.payloads, payload)
		return nil
	}
	_, err := tx.ExecContext(ctx, "SELECT pg_notify(?, ?)", EventsChannel, payload)
	return err
}

type pendingEventsKey struct{}

// pendingEvents collects one transaction's live events.
type pendingEvents struct{ payloads []string }

// publisher sends committed live events in batches from one goroutine that
// runs while there is something to send: one NOTIFY round at a time, at
// most one per publishGap, each sending a payload once however often it
// was queued (a busy project's groups all announce the same change). A
// lost event only delays a page's refresh (every consumer reads the truth
// on the next event or resync).
type publisher struct {
	mu      sync.Mutex
	queue   []string
	running bool
}

// maxPendingEvents bounds the queue when the database is unreachable.
const maxPendingEvents = 10000

// publishGap is the least time between two NOTIFY rounds. Every round is a
// transaction of its own and wakes every listening connection of the
// database; under a steady stream of feed groups the rounds would
// otherwise follow each other as fast as the database answers them.
const publishGap = 20 * time.Millisecond

func (p *publisher) publish(s *Store, payloads []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue)+len(payloads) > maxPendingEvents {
		return
	}
	p.queue = append(p.queue, payloads...)
	if !p.running {
		p.running = true
		go p.run(s)
	}
}

func (p *publisher) run(s *Store) {
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		if len(batch) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		began := time.Now()
		if err := s.sendEvents(distinct(batch)); err != nil {
			s.Log.Warn("live events: notify failed", "events", len(batch), "error", err)
		}
		time.Sleep(publishGap - time.Since(began))
	}
}

// distinct is payloads without repeats, in the order of their first
// occurrence.
func distinct(payloads []string) []string {
	seen := make(map[string]struct{}, len(payloads))
	out := payloads[:0]
	for _, p := range payloads {
		if _, ok := seen[p]; !ok {
			seen[p] = struct{}{}
			out = append(out, p)
		}
	}
	return out
}

// sendEvents sends a batch of payloads in one statement of its own.
func (s *Store) sendEvents(payloads []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.DB.ExecContext(ctx, "SELECT pg_notify(?, p) FROM unnest(?::text[]) AS p", EventsChannel, pgdialect.Array(payloads))
	return err
}

// EventsChannel is the NOTIFY channel of live events.
const EventsChannel = "anvil_events"
