package domain

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"
)

// Alert kinds: what a rule (domain/alert) may send out.
const (
	AlertIncidentNew       = "incident.new"
	AlertIncidentRegressed = "incident.regressed"
	AlertIncidentApproval  = "incident.waiting_approval"
	AlertRepairPROpened    = "repair.pr_opened"
	AlertRepairNeedsHuman  = "repair.needs_human"
	AlertRunFailed         = "run.default_branch_failed"
	AlertRunRecovered      = "run.default_branch_recovered"
	// AlertFixFailed: an incident recurred in a release that contains its
	// fix (docs/releases.md).
	AlertFixFailed = "incident.fix_failed"
)

// AlertKinds lists the kinds in the order pages and the API show them.
var AlertKinds = []string{AlertIncidentNew, AlertIncidentRegressed, AlertIncidentApproval, AlertRepairPROpened,
	AlertRepairNeedsHuman, AlertRunFailed, AlertRunRecovered, AlertFixFailed}

// AlertCause is a change that may be worth an alert. It carries ids only:
// the message is built from the rows when it is delivered.
type AlertCause struct {
	Kind       string
	OrgID      uuid.UUID
	ProjectID  uuid.UUID
	IncidentID uuid.UUID // incident kinds
	RunID      uuid.UUID // run kinds
}

// AlertHook turns causes into delivery jobs. The wiring sets it (domain/alert);
// the base only calls it inside the transaction of the change, so that a
// rolled-back change sends nothing.
type AlertHook interface {
	// Jobs returns the delivery jobs of causes, nil when no destination
	// wants them; it must be cheap when the organisation has none. What it
	// reads, it reads with read, in the caller's transaction: the caller
	// holds a connection of the pool, and waiting for a second one could
	// wait for ever when every connection is held so.
	Jobs(ctx context.Context, read AlertRead, causes []AlertCause) ([]river.InsertManyParams, error)
}

// AlertRead runs a query of one text value in the caller's transaction.
type AlertRead func(ctx context.Context, query string, args ...any) (string, error)

// UseAlerts sets the alert hook.
func (s *Store) UseAlerts(h AlertHook) { s.alerts = h }

// FastJobInserter inserts jobs in a transaction opened on a plain pgx
// connection (the feed's fast path); River's pgx driver over pgxTx.
type FastJobInserter interface {
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error
}

// UseFastJobs sets the inserter of the feed's fast path.
func (s *Store) UseFastJobs(j FastJobInserter) { s.fastJobs = j }

// EnqueueAlerts enqueues the alerts of causes in tx.
func (s *Store) EnqueueAlerts(ctx context.Context, tx bun.Tx, causes []AlertCause) error {
	read := func(ctx context.Context, q string, args ...any) (v string, err error) {
		err = tx.Tx.QueryRowContext(ctx, q, args...).Scan(&v)
		return v, err
	}
	params, err := s.alertJobs(ctx, read, causes)
	if err != nil || len(params) == 0 {
		return err
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx.Tx, params); err != nil {
		return fmt.Errorf("enqueue alerts: %w", err)
	}
	return nil
}

// ErrNoFastJobs says that alerts are due but no inserter for the fast
// path is set: the caller takes its general path.
var ErrNoFastJobs = errors.New("domain: alerts need the general path (no fast job inserter)")

// EnqueueAlertsFast is EnqueueAlerts in the transaction the feed's fast
// path holds open on c: one statement, only when a destination wants it.
func (s *Store) EnqueueAlertsFast(ctx context.Context, c *pgx.Conn, causes []AlertCause) error {
	read := func(ctx context.Context, q string, args ...any) (v string, err error) {
		err = c.QueryRow(ctx, q, args...).Scan(&v)
		return v, err
	}
	params, err := s.alertJobs(ctx, read, causes)
	if err != nil || len(params) == 0 {
		return err
	}
	if s.fastJobs == nil {
		return ErrNoFastJobs // the general path inserts through database/sql
	}
	if err := s.fastJobs.InsertManyTx(ctx, pgxTx{c}, params); err != nil {
		return fmt.Errorf("enqueue alerts: %w", err)
	}
	return nil
}

func (s *Store) alertJobs(ctx context.Context, read AlertRead, causes []AlertCause) ([]river.InsertManyParams, error) {
	if s.alerts == nil || len(causes) == 0 {
		return nil, nil
	}
	return s.alerts.Jobs(ctx, read, causes)
}

// pgxTx presents the transaction open on a connection as a pgx.Tx, for
// River's pgx driver; it never begins, commits or rolls back itself.
type pgxTx struct{ c *pgx.Conn }

func (t pgxTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, fmt.Errorf("pgxTx: nested transactions are not supported")
}
func (t pgxTx) Commit(context.Context) error   { return fmt.Errorf("pgxTx: the feed commits") }
func (t pgxTx) Rollback(context.Context) error { return fmt.Errorf("pgxTx: the feed rolls back") }
func (t pgxTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.c.CopyFrom(ctx, table, cols, src)
}
func (t pgxTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.c.SendBatch(ctx, b)
}
func (t pgxTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }
func (t pgxTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.c.Prepare(ctx, name, sql)
}
func (t pgxTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.c.Exec(ctx, sql, args...)
}
func (t pgxTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.c.Query(ctx, sql, args...)
}
func (t pgxTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.c.QueryRow(ctx, sql, args...)
}
func (t pgxTx) Conn() *pgx.Conn { return t.c }

// EnqueueJobsTx inserts jobs in tx (capability packages).
func (s *Store) EnqueueJobsTx(ctx context.Context, tx bun.Tx, params []river.InsertManyParams) error {
	if s.jobs == nil {
		return fmt.Errorf("domain: no job inserter configured")
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx.Tx, params); err != nil {
		return fmt.Errorf("domain: enqueue: %w", err)
	}
	return nil
}
