package domain

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	livenotify "anvil/domain/internal/notify"
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
	// send their statements together (domain/run/acceptance_fast.go).
	Pool *pgxpool.Pool
	Keys *secret.Keyring
	Log  *slog.Logger
	Now  func() time.Time
	jobs JobInserter
	// pub sends committed live events after their commit (see notify).
	pub *livenotify.Publisher
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
	s := &Store{DB: bdb, Keys: keys, Log: log, Now: func() time.Time { return time.Now().UTC() }}
	s.pub = livenotify.New(s.sendEvents, log)
	return s
}

// Start starts the store's machinery (the live-event publisher). Events
// committed before Start wait for it.
func (s *Store) Start(ctx context.Context) { s.pub.Start(ctx) }

// Stop sends the live events still pending and stops the publisher; call
// it after everything that commits has stopped and before the pool closes.
func (s *Store) Stop(ctx context.Context) error {
	if err := s.pub.Stop(ctx); err != nil {
		return fmt.Errorf("store: stop the live-event publisher: %w", err)
	}
	return nil
}

// UseJobs sets the River client used to enqueue work in transactions.
func (s *Store) UseJobs(j JobInserter) { s.jobs = j }

// InsertJob enqueues args in tx.
func (s *Store) InsertJob(ctx context.Context, tx bun.Tx, args river.JobArgs) error {
	if s.jobs == nil {
		return fmt.Errorf("domain: no job inserter configured for %s", args.Kind())
	}
	if _, err := s.jobs.InsertTx(ctx, tx.Tx, args, nil); err != nil {
		return fmt.Errorf("domain: enqueue %s: %w", args.Kind(), err)
	}
	return nil
}

// InTx runs fn in a transaction. Live events that fn publishes with notify
// are sent once the transaction has committed (see publisher).
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return s.PublishAfter(ctx, func(ctx context.Context) error { return s.DB.RunInTx(ctx, nil, fn) })
}

// PublishAfter runs commit, a transaction (or its rest) through its COMMIT, with a ctx
// in which notify collects the live events, and publishes them once commit
// has returned without error.
func (s *Store) PublishAfter(ctx context.Context, commit func(ctx context.Context) error) error {
	ev := &pendingEvents{}
	err := commit(context.WithValue(ctx, pendingEventsKey{}, ev))
	if err == nil && len(ev.payloads) > 0 {
		s.pub.Publish(ev.payloads...)
	}
	return err
}

// WithProject is THE helper for every per-project mutation: one transaction
// that first locks the project row (SELECT … FOR UPDATE), so a project's
// queue, webhooks and incidents change one writer at a time across every
// process. fn enqueues the work it implies with s.InsertJob on the same tx.
// (Acceptance groups take the same row locks for several projects at once,
// in id order; see domain/run/acceptance.go.)
//
// A deleted project is not found (domain/tombstone.go): nothing changes a
// project that is being erased, except through WithAnyProject.
func (s *Store) WithProject(ctx context.Context, projectID uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *Project) error) error {
	return s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		p, err := s.lockProject(ctx, tx, projectID, LiveProjects)
		if err != nil {
			return err
		}
		return fn(ctx, tx, p)
	})
}

// WithAnyProject is WithProject for a project that may be deleted: the
// erasure's own transactions, and a run's transitions (a deleted project's
// executing run is stopped through the cancel path and still reports).
func (s *Store) WithAnyProject(ctx context.Context, projectID uuid.UUID, fn func(ctx context.Context, tx bun.Tx, p *Project) error) error {
	return s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		p, err := s.lockProject(ctx, tx, projectID, AllProjects)
		if err != nil {
			return err
		}
		return fn(ctx, tx, p)
	})
}

// Notify publishes a live event to every web and worker process through
// Postgres NOTIFY, once (and only if) the transaction commits.
//
// The NOTIFY is not sent inside the transaction: Postgres serializes the
// commits of notifying transactions behind one lock held across the WAL
// flush, which would cap every write path at one commit per fsync. Events
// are queued and sent after the commit, batched, by the store's publisher.
func Notify(ctx context.Context, tx bun.IDB, payload string) error {
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

// sendEvents sends a round of payloads in one statement of its own.
func (s *Store) sendEvents(ctx context.Context, payloads []string) error {
	_, err := s.DB.ExecContext(ctx, "SELECT pg_notify(?, p) FROM unnest(?::text[]) AS p", EventsChannel, pgdialect.Array(payloads))
	return err
}

// EventsChannel is the NOTIFY channel of live events.
const EventsChannel = "anvil_events"

// Jobs is the River client set by UseJobs (nil before), for capability
// packages that insert several jobs at once in their transaction.
func (s *Store) Jobs() JobInserter { return s.jobs }
