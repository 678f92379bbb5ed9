package monitor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/event"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
)

// RatePerMinute is how many check-ins one monitor and environment may send
// in a minute, as Sentry limits them (docs/monitors.md, "Rate limit").
const RatePerMinute = 6

// MaxOutput is how much of a ping's body is kept as its run's output.
const MaxOutput = 10 << 10

// ErrRateLimited is a check-in over RatePerMinute; the doors answer 429
// (the Sentry door with the monitor category in X-Sentry-Rate-Limits).
var ErrRateLimited = &domain.Error{Kind: ErrRate, Code: "rate_limited",
	Message: fmt.Sprintf("more than %d check-ins of this monitor and environment within a minute; retry after 60 seconds", RatePerMinute)}

// ErrRate is the kind of ErrRateLimited (web/errors.go maps it to 429).
var ErrRate = errors.New("rate limited")

// IsRateLimited reports whether err is a check-in over the rate limit.
func IsRateLimited(err error) bool { return errors.Is(err, ErrRate) }

// CheckInInput is one check-in, from an SDK's check_in item or a ping.
type CheckInInput struct {
	Slug        string
	CheckInID   *uuid.UUID // pairs an in_progress with its ok/error
	Status      string     // in_progress | ok | error
	Duration    *float64   // seconds, as the SDKs send it
	Environment string
	Release     string
	Config      *Input // Sentry's monitor_config: creates the monitor, or updates one check-ins made
	ExitCode    *int
	Output      string
	Source      string // sentry | ping
	// Connection is the feed connection the check-in came through (the
	// audit line of a change it makes names it); nil for a ping.
	Connection *Connection
}

// Connection names the feed connection a check-in came through.
type Connection struct {
	ID   uuid.UUID
	Name string
}

// CheckInResult says what a check-in recorded.
type CheckInResult struct {
	MonitorID uuid.UUID
	RunID     uuid.UUID
	Status    string
}

// state is a monitor's state in one environment.
type state struct {
	MonitorID   uuid.UUID   `bun:"monitor_id"`
	Env         string      `bun:"environment"`
	ProjectID   uuid.UUID   `bun:"project_id"`
	LastCheckin *time.Time  `bun:"last_checkin_at"`
	LastStatus  string      `bun:"last_status"`
	LastDurMS   *int64      `bun:"last_duration_ms"`
	ExpectedAt  *time.Time  `bun:"expected_at"`
	DueAt       *time.Time  `bun:"due_at"`
	Failures    int         `bun:"failures"`
	OKs         int         `bun:"oks"`
	OKTimes     []time.Time `bun:"ok_times,array"`
	IncidentID  *uuid.UUID  `bun:"incident_id"`
	WindowStart *time.Time  `bun:"window_start"`
	WindowCount int         `bun:"window_count"`
}

const stateColumns = `monitor_id, environment, project_id, last_checkin_at, last_status, last_duration_ms, expected_at, due_at, failures, oks,
	ok_times, incident_id, window_start, window_count`

// lockState reads (creating it at the first check-in) and locks the state.
// The state exists after a monitor's first check-in in the environment, so
// it is read first and made only when missing: one round trip on the hot
// path, not two (docs/monitors.md, "Locks").
func lockState(ctx context.Context, tx bun.Tx, m *Monitor, env string) (*state, error) {
	st := new(state)
	err := tx.NewRaw(`SELECT `+stateColumns+` FROM monitor_states WHERE monitor_id = ? AND environment = ? FOR UPDATE`, m.ID, env).Scan(ctx, st)
	if err == nil {
		return st, nil
	}
	if !dbutil.IsNoRows(err) {
		return nil, fmt.Errorf("monitors: lock state: %w", err)
	}
	if _, err := tx.NewRaw(`INSERT INTO monitor_states (monitor_id, environment, project_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		m.ID, env, m.ProjectID).Exec(ctx); err != nil {
		return nil, fmt.Errorf("monitors: state: %w", err)
	}
	if err := tx.NewRaw(`SELECT `+stateColumns+` FROM monitor_states WHERE monitor_id = ? AND environment = ? FOR UPDATE`, m.ID, env).Scan(ctx, st); err != nil {
		return nil, fmt.Errorf("monitors: lock state: %w", err)
	}
	return st, nil
}

// saveStateSQL writes a state back; its arguments are saveArgs.
const saveStateSQL = `UPDATE monitor_states SET last_checkin_at = $1, last_status = $2, last_duration_ms = $3, expected_at = $4, due_at = $5,
	failures = $6, oks = $7, ok_times = $8, incident_id = $9, window_start = $10, window_count = $11 WHERE monitor_id = $12 AND environment = $13`

func (st *state) saveArgs() []any {
	if st.OKTimes == nil {
		st.OKTimes = []time.Time{}
	}
	return []any{st.LastCheckin, st.LastStatus, dbutil.PgInt8(st.LastDurMS), st.ExpectedAt, st.DueAt, st.Failures, st.OKs, st.OKTimes,
		dbutil.PgUUIDPtr(st.IncidentID), st.WindowStart, st.WindowCount, dbutil.PgUUID(st.MonitorID), st.Env}
}

func (st *state) save(ctx context.Context, tx bun.Tx) error {
	if _, err := tx.Tx.ExecContext(ctx, saveStateSQL, st.saveArgs()...); err != nil {
		return fmt.Errorf("monitors: save state: %w", err)
	}
	return nil
}

// expect plans the next run after t (nothing while paused).
func (st *state) expect(m *Monitor, t time.Time) {
	if m.Paused {
		st.ExpectedAt, st.DueAt = nil, nil
		return
	}
	e := m.plan().next(t)
	d := e.Add(time.Duration(m.CheckinMargin) * time.Minute)
	st.ExpectedAt, st.DueAt = &e, &d
}

// CheckIn records one check-in of a project's monitor — the Sentry door's
// check_in item, a ping — in one transaction that locks the monitor's row:
// a monitor's check-ins are serial, a project's many monitors check in side
// by side (docs/monitors.md, "Locks"). A monitor_config creates the
// monitor, or updates one that check-ins made and nobody edited since
// (docs/monitors.md, "What a check-in may change"); without one, an
// unknown slug is not found.
func (ms *Service) CheckIn(ctx context.Context, projectID uuid.UUID, in CheckInInput) (*CheckInResult, error) {
	if ms.s.Pool != nil && !ms.generalOnly {
		var res *CheckInResult
		err := ms.s.PublishAfter(ctx, func(ctx context.Context) (err error) {
			res, err = ms.tryCheckInFast(ctx, projectID, in)
			return err
		})
		// A deadlock there (none is expected: docs/monitors.md, "Locks")
		// is retried once, by the general path.
		if !errors.Is(err, errSlowPath) && !isDeadlock(err) {
			if err == nil {
				ms.fast.Add(1)
				ms.usage.add(projectID, ms.Now())
			}
			return res, err
		}
	}
	var res *CheckInResult
	var projectOf uuid.UUID
	err := retryDeadlock(func() error { return ms.checkInGeneral(ctx, projectID, in, &res, &projectOf) })
	if err == nil {
		ms.usage.add(projectOf, ms.Now())
	}
	return res, err
}

// retryDeadlock runs fn again once when Postgres broke a deadlock by
// failing it. The check-in and the sweep lock in one order, so none is
// expected; one retry keeps a check-in from answering 503 (and an SDK's
// "… || curl …/fail" from recording a false failure) should another
// writer of these rows ever take them in another (docs/monitors.md, "Locks").
func retryDeadlock(fn func() error) error {
	err := fn()
	if isDeadlock(err) {
		err = fn()
	}
	return err
}

// isDeadlock reports whether err is Postgres's 40P01.
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// checkInGeneral is the general path's transaction.
func (ms *Service) checkInGeneral(ctx context.Context, projectID uuid.UUID, in CheckInInput, out **CheckInResult, projectOf *uuid.UUID) error {
	return ms.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		fx := &effects{}
		ctx = context.WithValue(ctx, effectsKey{}, fx)
		if _, err := tx.Tx.ExecContext(ctx, lockProjectKeySQL, dbutil.PgUUID(projectID)); err != nil {
			return fmt.Errorf("monitors: lock the project: %w", err)
		}
		m, err := ms.bySlug(ctx, tx, projectID, in.Slug, true)
		if errors.Is(err, domain.ErrNotFound) && in.Config != nil {
			m, err = ms.create(ctx, tx, projectID, in)
		} else if err == nil && in.Config != nil && m.Origin == OriginCheckIn {
			err = ms.configure(ctx, tx, m, in)
		}
		if err != nil {
			return err
		}
		res, err := ms.checkInTx(ctx, tx, m, in)
		if err != nil {
			return err
		}
		// Last, so the project's hot row is held as briefly as possible
		// (the day's check-in count is written after the commit, usage.go).
		if fx.card {
			if err := card.EnqueueRefresh(ctx, ms.s, tx, m.ProjectID); err != nil {
				return err
			}
		}
		*out, *projectOf = res, m.ProjectID
		return nil
	})
}

// create makes the monitor a check-in's monitor_config describes; when a
// concurrent check-in made it first, it is that one, locked.
func (ms *Service) create(ctx context.Context, tx bun.Tx, projectID uuid.UUID, in CheckInInput) (*Monitor, error) {
	var pr struct {
		OrgID     uuid.UUID  `bun:"org_id"`
		DeletedAt *time.Time `bun:"deleted_at"`
	}
	if err := tx.NewRaw(`SELECT org_id, deleted_at FROM `+domain.AllProjects+` WHERE id = ?`, projectID).Scan(ctx, &pr); err != nil {
		if dbutil.IsNoRows(err) {
			return nil, domain.NotFound("project")
		}
		return nil, fmt.Errorf("monitors: project: %w", err)
	}
	if pr.DeletedAt != nil {
		return nil, domain.NotFound("project")
	}
	m := newMonitor()
	cfg := *in.Config
	cfg.Slug = &in.Slug
	if err := cfg.apply(m, true); err != nil {
		return nil, err
	}
	m.OrgID, m.ProjectID, m.Origin = pr.OrgID, projectID, OriginCheckIn
	if err := ms.underCap(ctx, tx, projectID); err != nil {
		// A concurrent check-in may have made this very monitor meanwhile.
		if m2, err2 := ms.bySlug(ctx, tx, projectID, in.Slug, true); err2 == nil {
			return m2, nil
		}
		return nil, err
	}
	if _, err := ms.insert(ctx, tx, m); err != nil {
		if errors.Is(err, domain.ErrConflict) {
			return ms.bySlug(ctx, tx, projectID, in.Slug, true)
		}
		return nil, err
	}
	return m, nil
}

// configure applies a check-in's monitor_config to m, a monitor check-ins
// made (locked): a change is saved and audited, naming the connection and
// each setting's old and new value (docs/monitors.md, "What a check-in may
// change").
func (ms *Service) configure(ctx context.Context, tx bun.Tx, m *Monitor, in CheckInInput) error {
	cfg := *in.Config
	cfg.Slug, cfg.Paused = nil, nil
	was := *m
	if err := cfg.apply(m, false); err != nil {
		return err
	}
	if sameSettings(&was, m) {
		return nil
	}
	if err := ms.save(ctx, tx, m); err != nil {
		return err
	}
	changes := settingChanges(&was, m)
	who := "a check-in"
	detail := map[string]any{"project_id": m.ProjectID, "changes": changes}
	if in.Connection != nil {
		who = fmt.Sprintf("check-in from connection %s", in.Connection.Name)
		detail["connection_id"] = in.Connection.ID
	}
	detail["summary"] = who + " changed " + strings.Join(changes, ", ")
	return domain.RecordAuditIn(ctx, tx, m.OrgID, nil, who, "monitor.updated_by_check_in", m.Slug, detail)
}

// settingChanges words each setting that differs: "the schedule from
// crontab 0 2 * * * to crontab 0 0 1 1 *".
func settingChanges(a, b *Monitor) []string {
	var out []string
	add := func(name string, from, to any) {
		if from != to {
			out = append(out, fmt.Sprintf("the %s from %v to %v", name, from, to))
		}
	}
	add("schedule", a.Schedule.String(), b.Schedule.String())
	add("timezone", a.Timezone, b.Timezone)
	add("check-in margin (minutes)", a.CheckinMargin, b.CheckinMargin)
	add("maximum runtime (minutes)", a.MaxRuntime, b.MaxRuntime)
	add("failure threshold", a.FailureThreshold, b.FailureThreshold)
	add("recovery threshold", a.RecoveryThreshold, b.RecoveryThreshold)
	add("environment", a.Environment, b.Environment)
	return out
}

// sameSettings reports whether a and b schedule and judge alike.
func sameSettings(a, b *Monitor) bool {
	return a.Schedule == b.Schedule && a.Timezone == b.Timezone && a.CheckinMargin == b.CheckinMargin && a.MaxRuntime == b.MaxRuntime &&
		a.FailureThreshold == b.FailureThreshold && a.RecoveryThreshold == b.RecoveryThreshold && a.Environment == b.Environment && a.Paused == b.Paused
}

// effects are what a check-in's transaction does once, at its end.
type effects struct{ card bool }

type effectsKey struct{}

// Ping is a check-in through a ping URL (docs/monitors.md, "Ping URLs"):
// kind is "" (ok), "start", "fail" or an exit code. A key that is not a
// live ping key of this slug is the same 404 as an unknown one.
func (ms *Service) Ping(ctx context.Context, key, slug, kind string, body []byte) (*CheckInResult, error) {
	lookup, hash, ok := tokens.Split(PingKeyPrefix, key)
	if !ok {
		return nil, domain.NotFound("monitor")
	}
	var row struct {
		ProjectID uuid.UUID `bun:"project_id"`
		Slug      string    `bun:"slug"`
		Hash      []byte    `bun:"ping_hash"`
	}
	err := ms.s.DB.NewRaw(`SELECT m.project_id, m.slug, m.ping_hash FROM monitors m JOIN `+domain.LiveProjects+` p ON p.id = m.project_id
		WHERE m.ping_lookup = ?`, lookup).Scan(ctx, &row)
	if dbutil.IsNoRows(err) || (err == nil && (!tokens.HashEqual(row.Hash, hash) || row.Slug != slug)) {
		return nil, domain.NotFound("monitor")
	}
	if err != nil {
		return nil, fmt.Errorf("monitors: ping key: %w", err)
	}
	in := CheckInInput{Slug: slug, Source: "ping", Status: StatusOK}
	switch kind {
	case "":
	case "start":
		in.Status = StatusInProgress
	case "fail":
		in.Status = StatusError
	default:
		code, ok := exitCode(kind)
		if !ok {
			return nil, domain.NotFound("ping path")
		}
		in.ExitCode = &code
		if code != 0 {
			in.Status = StatusError
		}
	}
	if len(body) > 0 {
		if len(body) > MaxOutput {
			body = body[:MaxOutput]
		}
		in.Output = event.ScrubText(string(body))
	}
	return ms.CheckIn(ctx, row.ProjectID, in)
}

// exitCode reads a ping path's exit code: 0–255, digits only.
func exitCode(s string) (int, bool) {
	if s == "" || len(s) > 3 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 255
}

// checkInTx records the check-in on m (locked) in tx: the general path
// (docs/monitors.md, "Two paths").
func (ms *Service) checkInTx(ctx context.Context, tx bun.Tx, m *Monitor, in CheckInInput) (*CheckInResult, error) {
	env, err := checkInEnv(m, in)
	if err != nil {
		return nil, err
	}
	// The run first, then the state: the sweep locks in the same order
	// (a run it times out, then its state), so the two never deadlock.
	var partner *Run
	if needsPartner(in) {
		if partner, err = findPartner(ctx, tx, m.ID, env, in); err != nil {
			return nil, err
		}
	}
	st, err := lockState(ctx, tx, m, env)
	if err != nil {
		return nil, err
	}
	return ms.apply(ctx, txWriter{ms, tx}, m, st, partner, env, in)
}

// checkInEnv is the check-in's environment (the monitor's when it names
// none), once the check-in's status and environment are known good.
func checkInEnv(m *Monitor, in CheckInInput) (string, error) {
	switch in.Status {
	case StatusInProgress, StatusOK, StatusError:
	default:
		return "", domain.Invalid("invalid_status", "status must be in_progress, ok or error, not %q", domain.ClipString(in.Status, 32))
	}
	env := strings.TrimSpace(in.Environment)
	if env == "" {
		env = m.Environment
	}
	if len(env) > 64 {
		return "", domain.Invalid("invalid_environment", "environment must be at most 64 characters")
	}
	return env, nil
}

// needsPartner reports whether the check-in may close (or repeat) a run
// in progress: everything but an in_progress without a check_in_id.
func needsPartner(in CheckInInput) bool { return in.Status != StatusInProgress || in.CheckInID != nil }

// writer takes a check-in's writes: the general path's runs them at once
// in its transaction; the two-round-trip path's queues them for its second
// trip and turns down what it cannot store (checkin_fast.go). Both run the
// same statements, prepared ($n) so that a connection plans each once.
type writer interface {
	exec(ctx context.Context, sql string, args ...any) error
	// record counts o on st and moves the incident when it must.
	record(ctx context.Context, m *Monitor, st *state, o outcome) error
	// db is where live notices go (collected until the commit).
	db() bun.IDB
}

// txWriter is the general path's writer.
type txWriter struct {
	ms *Service
	tx bun.Tx
}

func (w txWriter) exec(ctx context.Context, sql string, args ...any) error {
	_, err := w.tx.Tx.ExecContext(ctx, sql, args...)
	return err
}

func (w txWriter) record(ctx context.Context, m *Monitor, st *state, o outcome) error {
	return w.ms.record(ctx, w.tx, m, st, o)
}

func (w txWriter) db() bun.IDB { return w.tx }

// The check-in's writes.
const (
	insertStartedSQL = `INSERT INTO monitor_checkins (id, monitor_id, project_id, environment, checkin_id, status, source, started_at,
		timeout_at, release, output, received_at) VALUES ($1, $2, $3, $4, $5, 'in_progress', $6, $7, $8, $9, $10, $7)`
	insertFinishedSQL = `INSERT INTO monitor_checkins (id, monitor_id, project_id, environment, checkin_id, status, source, started_at,
		finished_at, duration_ms, exit_code, release, output, received_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $9)`
	closeRunSQL = `UPDATE monitor_checkins SET status = $1, finished_at = $2, duration_ms = $3, exit_code = $4, release = $5,
		output = CASE WHEN $6::text = '' THEN output ELSE $6 END WHERE id = $7`
	closeTimedOutSQL = `UPDATE monitor_checkins SET finished_at = $1, duration_ms = $2, exit_code = $3,
		output = CASE WHEN $4::text = '' THEN output ELSE $4 END WHERE id = $5`
)

// apply decides what the check-in records, given its monitor, the state
// and the run it closes (both locked), and hands the writes to w.
func (ms *Service) apply(ctx context.Context, w writer, m *Monitor, st *state, partner *Run, env string, in CheckInInput) (*CheckInResult, error) {
	now := ms.Now()
	if st.WindowStart != nil && now.Sub(*st.WindowStart) < time.Minute && now.Sub(*st.WindowStart) >= 0 {
		if st.WindowCount >= RatePerMinute {
			return nil, ErrRateLimited
		}
		st.WindowCount++
	} else {
		st.WindowStart, st.WindowCount = &now, 1
	}
	res := &CheckInResult{MonitorID: m.ID, Status: in.Status}
	if in.Status == StatusInProgress && partner != nil {
		// An in_progress sent again: nothing new.
		res.RunID = partner.ID
		return res, w.exec(ctx, saveStateSQL, st.saveArgs()...)
	}
	st.LastCheckin = &now
	exitCode := exitCodeArg(in.ExitCode)
	switch {
	case in.Status == StatusInProgress:
		id := uuid.New()
		timeout := now.Add(time.Duration(m.MaxRuntime) * time.Minute)
		if err := w.exec(ctx, insertStartedSQL, dbutil.PgUUID(id), dbutil.PgUUID(m.ID), dbutil.PgUUID(m.ProjectID), env,
			dbutil.PgUUIDPtr(in.CheckInID), in.Source, now, timeout, in.Release, in.Output); err != nil {
			return nil, fmt.Errorf("monitors: insert run: %w", err)
		}
		res.RunID = id
		st.LastStatus = StatusInProgress
		st.expect(m, now)
	case partner != nil && partner.Status != StatusInProgress:
		// Its run was closed already: timed out by the sweep (keep the
		// verdict, learn the duration) or a resend (nothing new).
		res.RunID, res.Status = partner.ID, partner.Status
		if partner.Status == StatusTimeout && partner.FinishedAt == nil {
			dur := durationOf(in.Duration, now.Sub(partner.StartedAt))
			durMS := dur.Milliseconds()
			if err := w.exec(ctx, closeTimedOutSQL, now, durMS, exitCode, in.Output, dbutil.PgUUID(partner.ID)); err != nil {
				return nil, fmt.Errorf("monitors: close a timed-out run: %w", err)
			}
			st.LastDurMS = &durMS
		}
	default:
		var started time.Time
		var dur time.Duration
		if partner != nil {
			started = partner.StartedAt
			dur = durationOf(in.Duration, now.Sub(started))
		} else {
			dur = durationOf(in.Duration, 0)
			started = now.Add(-dur)
		}
		status := in.Status
		title := ""
		maxRun := time.Duration(m.MaxRuntime) * time.Minute
		switch {
		case dur > maxRun:
			status = StatusTimeout
			title = fmt.Sprintf("%s ran %s, over its %s", m.Slug, humanDuration(dur), humanDuration(maxRun))
		case status == StatusError && in.ExitCode != nil:
			title = fmt.Sprintf("%s failed: exit %d", m.Slug, *in.ExitCode)
		case status == StatusError:
			title = m.Slug + " failed"
		}
		durMS := dur.Milliseconds()
		r := Run{MonitorID: m.ID, Environment: env, CheckInID: in.CheckInID, Status: status, Source: in.Source, StartedAt: started,
			FinishedAt: &now, DurationMS: &durMS, ExitCode: in.ExitCode, Release: in.Release, Output: in.Output}
		if partner != nil {
			r.ID = partner.ID
			if r.Release == "" {
				r.Release = partner.Release
			}
			if err := w.exec(ctx, closeRunSQL, status, now, durMS, exitCode, r.Release, in.Output, dbutil.PgUUID(partner.ID)); err != nil {
				return nil, fmt.Errorf("monitors: close run: %w", err)
			}
			if r.Output == "" {
				r.Output = partner.Output
			}
		} else {
			r.ID = uuid.New()
			if err := w.exec(ctx, insertFinishedSQL, dbutil.PgUUID(r.ID), dbutil.PgUUID(m.ID), dbutil.PgUUID(m.ProjectID), env,
				dbutil.PgUUIDPtr(in.CheckInID), status, in.Source, started, now, durMS, exitCode, in.Release, in.Output); err != nil {
				return nil, fmt.Errorf("monitors: insert run: %w", err)
			}
			st.expect(m, now)
		}
		res.RunID, res.Status = r.ID, status
		st.LastStatus, st.LastDurMS = status, &durMS
		if err := w.record(ctx, m, st, outcome{status: status, title: title, at: now, run: r}); err != nil {
			return nil, err
		}
	}
	if err := w.exec(ctx, saveStateSQL, st.saveArgs()...); err != nil {
		return nil, fmt.Errorf("monitors: save state: %w", err)
	}
	return res, domain.Notify(ctx, w.db(), liveNotice(m.OrgID, m.ProjectID))
}

// exitCodeArg is an exit code as a parameter, NULL for none.
func exitCodeArg(code *int) pgtype.Int4 {
	if code == nil {
		return pgtype.Int4{}
	}
	return pgtype.Int4{Int32: int32(*code), Valid: true}
}

// findPartner is the run an ok/error closes: the run with its check_in_id,
// or — for a ping, which has no id — the latest ping run still in progress.
func findPartner(ctx context.Context, tx bun.Tx, monitorID uuid.UUID, env string, in CheckInInput) (*Run, error) {
	r := new(Run)
	var err error
	const cols = `id, monitor_id, environment, checkin_id, status, source, started_at, finished_at, duration_ms, expected_at, exit_code, release, output`
	switch {
	case in.CheckInID != nil:
		err = tx.NewRaw(`SELECT `+cols+` FROM monitor_checkins WHERE monitor_id = ? AND checkin_id = ? FOR UPDATE`, monitorID, *in.CheckInID).Scan(ctx, r)
	case in.Source == "ping":
		err = tx.NewRaw(`SELECT `+cols+` FROM monitor_checkins WHERE monitor_id = ? AND environment = ? AND source = 'ping' AND status = 'in_progress'
			ORDER BY started_at DESC LIMIT 1 FOR UPDATE`, monitorID, env).Scan(ctx, r)
	default:
		return nil, nil
	}
	if dbutil.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("monitors: find the run: %w", err)
	}
	return r, nil
}

// durationOf is the SDK's duration (seconds) when it sent one, else d.
func durationOf(sent *float64, d time.Duration) time.Duration {
	if sent != nil && *sent >= 0 && *sent < 1e9 {
		return time.Duration(*sent * float64(time.Second))
	}
	if d < 0 {
		return 0
	}
	return d
}

// humanDuration is "47 min", "12 s", "2 h 5 min".
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	default:
		h := int(d.Hours())
		if m := int(d.Minutes()) % 60; m > 0 {
			return fmt.Sprintf("%d h %d min", h, m)
		}
		return fmt.Sprintf("%d h", h)
	}
}
