package domain

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

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
	DB   *bun.DB
	Keys *secret.Keyring
	Log  *slog.Logger
	Now  func() time.Time
	jobs JobInserter
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

// inTx runs fn in a transaction.
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return s.DB.RunInTx(ctx, nil, fn)
}

// WithProject is THE helper for every per-project mutation: one transaction
// that first locks the project row (SELECT … FOR UPDATE), so a project's
// queue, webhooks and incidents change one writer at a time across every
// process. fn enqueues the work it implies with s.insertJob on the same tx.
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

// notify publishes a live event to every web process through Postgres
// NOTIFY; it is delivered when (and only if) tx commits.
func notify(ctx context.Context, tx bun.IDB, payload string) error {
	_, err := tx.ExecContext(ctx, "SELECT pg_notify(?, ?)", EventsChannel, payload)
	return err
}

// EventsChannel is the NOTIFY channel of live events.
const EventsChannel = "anvil_events"
