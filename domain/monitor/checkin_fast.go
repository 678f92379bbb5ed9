package monitor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// The check-in in two round trips (docs/monitors.md, "Two paths"). The
// general path (CheckIn's transaction of bun) sends its statements one by
// one: BEGIN, the monitor, the run it closes, the state, the run, the
// state again, COMMIT — seven round trips, each a wake-up of the server
// and of Postgres, which on a small machine cost more than the statements.
// A check-in of a monitor that exists — almost every one — needs none of
// the answers in between to form the next statement, so this path sends
//
//  1. BEGIN; the project's key lock; lock the monitor; lock the run it
//     closes; lock its state — the general path's locks in its order
//     (project, monitor, run, state: the sweep's order too), each statement with a fresh snapshot (READ
//     COMMITTED), so the reads see what they would have seen one by one;
//  2. the writes of the same decision (apply, with a writer that queues
//     them) and COMMIT,
//
// as two pipelines of statements every connection has prepared. A
// check-in this path does not store — an unknown monitor without a
// monitor_config, a monitor_config that changes the monitor, a refusal
// other than the rate limit, an incident to open, count on or close — is
// rolled back after the first trip and decided again by the general path
// from the start. A monitor its monitor_config creates is the general
// path's too (it counts the project's monitors under their cap); a
// monitor's first state in an environment is made in the second trip.
// TestCheckInPathsAgree holds the two alike.

// errSlowPath hands a check-in to the general path.
var errSlowPath = errors.New("monitors: check-in needs the general path")

// The first trip's reads: by project and slug, since the monitor's id is
// not known before its row comes back; the environment is the check-in's,
// or the monitor's when it names none (checkInEnv).
const (
	// lockProjectKeySQL is a check-in's first lock (docs/monitors.md,
	// "Locks"): the project's row FOR KEY SHARE, the lock its run's and
	// state's foreign keys take anyway — taken first, not last, so that
	// the sweep (the project's row FOR UPDATE, then runs and states) and a
	// check-in (then monitor, run, state) lock in one order.
	lockProjectKeySQL = `SELECT 1 FROM ` + domain.AllProjects + ` WHERE id = $1 FOR KEY SHARE`
	fastMonitorSQL    = `SELECT ` + monitorColumns + ` FROM monitors WHERE project_id = $1 AND slug = $2 FOR UPDATE`
	fastRunColumns    = `c.id, c.monitor_id, c.environment, c.checkin_id, c.status, c.source, c.started_at, c.finished_at, c.duration_ms,
		c.expected_at, c.exit_code, c.release, c.output`
	fastPartnerByIDSQL = `SELECT ` + fastRunColumns + ` FROM monitor_checkins c JOIN monitors m ON m.id = c.monitor_id
		WHERE m.project_id = $1 AND m.slug = $2 AND c.checkin_id = $3 FOR UPDATE OF c`
	fastPartnerPingSQL = `SELECT ` + fastRunColumns + ` FROM monitor_checkins c JOIN monitors m ON m.id = c.monitor_id
		WHERE m.project_id = $1 AND m.slug = $2 AND c.environment = COALESCE(NULLIF($3, ''), m.environment) AND c.source = 'ping'
		AND c.status = 'in_progress' ORDER BY c.started_at DESC LIMIT 1 FOR UPDATE OF c`
	fastStateSQL = `SELECT s.monitor_id, s.environment, s.project_id, s.last_checkin_at, s.last_status, s.last_duration_ms, s.expected_at,
		s.due_at, s.failures, s.oks, s.ok_times, s.incident_id, s.window_start, s.window_count
		FROM monitor_states s JOIN monitors m ON m.id = s.monitor_id
		WHERE m.project_id = $1 AND m.slug = $2 AND s.environment = COALESCE(NULLIF($3, ''), m.environment) FOR UPDATE OF s`
)

// A state's first row, made by its monitor's first check-in in an
// environment.
const fastInsertStateSQL = `INSERT INTO monitor_states (monitor_id, environment, project_id) VALUES ($1, $2, $3)`

// tryCheckInFast records in in two round trips, or returns errSlowPath
// having changed nothing. The caller collects the live notices
// (Store.PublishAfter) and counts the check-in.
func (ms *Service) tryCheckInFast(ctx context.Context, projectID uuid.UUID, in CheckInInput) (*CheckInResult, error) {
	if _, err := checkInEnv(&Monitor{}, in); err != nil {
		return nil, errSlowPath // the general path words the refusal
	}
	named := strings.TrimSpace(in.Environment)
	conn, err := ms.s.Pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("monitors: acquire connection: %w", err)
	}
	// Release destroys a connection left inside a transaction: a check-in
	// that fails half-way is rolled back by the disconnect.
	defer conn.Release()
	c := conn.Conn()

	var (
		m       *Monitor
		partner *Run
		st      *state
	)
	pid := dbutil.PgUUID(projectID)
	reads := &pgx.Batch{}
	reads.Queue("BEGIN")
	reads.Queue(lockProjectKeySQL, pid)
	reads.Queue(fastMonitorSQL, pid, in.Slug).Query(func(r pgx.Rows) (err error) { m, err = scanMonitor(r); return err })
	if needsPartner(in) {
		var q *pgx.QueuedQuery
		switch {
		case in.CheckInID != nil:
			q = reads.Queue(fastPartnerByIDSQL, pid, in.Slug, dbutil.PgUUID(*in.CheckInID))
		case in.Source == "ping":
			q = reads.Queue(fastPartnerPingSQL, pid, in.Slug, named)
		}
		if q != nil {
			q.Query(func(r pgx.Rows) (err error) { partner, err = scanRun(r); return err })
		}
	}
	reads.Queue(fastStateSQL, pid, in.Slug, named).Query(func(r pgx.Rows) (err error) { st, err = scanState(r); return err })
	if err := c.SendBatch(ctx, reads).Close(); err != nil {
		return nil, fmt.Errorf("monitors: lock the check-in's rows: %w", err)
	}

	w := &batchWriter{b: &pgx.Batch{}}
	if m == nil {
		// Not found, or made by its first check-in's monitor_config: the
		// general path, which counts the project's monitors under their
		// cap (docs/monitors.md, "Bounds"). Once per monitor.
		return nil, rollBack(ctx, c, errSlowPath)
	}
	m.fill()
	if in.Config != nil && m.Origin == OriginCheckIn {
		cfg := *in.Config
		cfg.Slug, cfg.Paused = nil, nil
		was := *m
		if err := cfg.apply(m, false); err != nil || !sameSettings(&was, m) {
			return nil, rollBack(ctx, c, errSlowPath) // a refusal, or a change to save and audit
		}
	}
	env, err := checkInEnv(m, in)
	if err != nil {
		return nil, rollBack(ctx, c, errSlowPath)
	}
	if st == nil {
		// The first check-in in this environment: its state, as lockState
		// makes it. Only a check-in makes one, under the monitor's lock, so
		// none can appear meanwhile.
		st = &state{MonitorID: m.ID, Env: env, ProjectID: m.ProjectID}
		w.b.Queue(fastInsertStateSQL, dbutil.PgUUID(m.ID), env, dbutil.PgUUID(m.ProjectID))
	}
	res, err := ms.apply(ctx, w, m, st, partner, env, in)
	if err != nil {
		// errSlowPath, or the rate limit: the general path would refuse it
		// from the same locked state.
		return nil, rollBack(ctx, c, err)
	}
	w.b.Queue("COMMIT")
	if err := c.SendBatch(ctx, w.b).Close(); err != nil {
		if dbutil.IsUnique(err, "monitors_slug_key") {
			return nil, rollBack(ctx, c, errSlowPath)
		}
		return nil, fmt.Errorf("monitors: store the check-in: %w", err)
	}
	return res, nil
}

// rollBack ends the first trip's transaction and returns err.
func rollBack(ctx context.Context, c *pgx.Conn, err error) error {
	if _, rerr := c.Exec(ctx, "ROLLBACK"); rerr != nil {
		return fmt.Errorf("monitors: roll back: %w", rerr)
	}
	return err
}

// batchWriter queues the writes for the second trip; a move of the
// incident is the general path's (its alerts, repairs and card go through
// bun's transaction).
type batchWriter struct{ b *pgx.Batch }

func (w *batchWriter) exec(_ context.Context, sql string, args ...any) error {
	w.b.Queue(sql, args...)
	return nil
}

func (w *batchWriter) record(_ context.Context, m *Monitor, st *state, o outcome) error {
	if st.count(m, o) {
		return errSlowPath
	}
	return nil
}

// db is nil: the check-in runs under Store.PublishAfter, where notices are
// collected, never sent through a connection (domain.Notify).
func (w *batchWriter) db() bun.IDB { return nil }

// scanMonitor reads fastMonitorSQL's row, nil for none.
func scanMonitor(rows dbutil.RowSource) (*Monitor, error) {
	if !rows.Next() {
		return nil, rows.Err()
	}
	m := new(Monitor)
	if err := rows.Scan(&m.ID, &m.OrgID, &m.ProjectID, &m.Slug, &m.ScheduleType, &m.ScheduleValue, &m.ScheduleUnit, &m.Timezone,
		&m.CheckinMargin, &m.MaxRuntime, &m.FailureThreshold, &m.RecoveryThreshold, &m.Environment, &m.Paused, &m.Origin, &m.PingLookup,
		&m.CreatedAt, &m.UpdatedAt); err != nil {
		return nil, fmt.Errorf("monitors: read the monitor: %w", err)
	}
	return m, rows.Err()
}

// scanRun reads a run of fastRunColumns, nil for none.
func scanRun(rows dbutil.RowSource) (*Run, error) {
	if !rows.Next() {
		return nil, rows.Err()
	}
	r := new(Run)
	if err := rows.Scan(&r.ID, &r.MonitorID, &r.Environment, &r.CheckInID, &r.Status, &r.Source, &r.StartedAt, &r.FinishedAt,
		&r.DurationMS, &r.ExpectedAt, &r.ExitCode, &r.Release, &r.Output); err != nil {
		return nil, fmt.Errorf("monitors: read the run: %w", err)
	}
	return r, rows.Err()
}

// scanState reads fastStateSQL's row, nil for none.
func scanState(rows dbutil.RowSource) (*state, error) {
	if !rows.Next() {
		return nil, rows.Err()
	}
	st := new(state)
	if err := rows.Scan(&st.MonitorID, &st.Env, &st.ProjectID, &st.LastCheckin, &st.LastStatus, &st.LastDurMS, &st.ExpectedAt,
		&st.DueAt, &st.Failures, &st.OKs, &st.OKTimes, &st.IncidentID, &st.WindowStart, &st.WindowCount); err != nil {
		return nil, fmt.Errorf("monitors: read the state: %w", err)
	}
	return st, rows.Err()
}
