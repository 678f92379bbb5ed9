package monitor

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/card"
)

// The sweep (docs/monitors.md, "Missed and timed-out runs"): a periodic
// River job, run by any number of worker processes, finds the runs whose
// deadline passed — a state whose expected run plus margin is past
// (due_at), an in_progress run older than the monitor's maximum runtime
// (timeout_at) — and records each exactly once. A claim is the project's
// row lock (Store.WithProject) followed by reading what is still due FOR
// UPDATE — the state and run rows every check-in locks too: a second sweep
// (or a check-in) that waited for them finds the deadline already moved on
// (due_at advanced, status no longer in_progress) and records nothing.

// SweepEvery is how often the sweep runs: a deadline is found within this
// (plus the job's own latency), well inside the 30 s the issue allows.
const SweepEvery = 10 * time.Second

// maxMissedPerPass bounds the missed runs one state records in one pass
// (a server down for days catches up over a few passes).
const maxMissedPerPass = 50

// maxClaimsPerProject bounds the runs timed out and the states claimed in
// one project's pass, so that its lock is held briefly whatever is due;
// the rest are the next pass's, SweepEvery later.
const maxClaimsPerProject = 200

// SweepReport says what one pass recorded.
type SweepReport struct {
	Missed   int
	TimedOut int
	Projects int
}

// Sweep runs one pass over every project with something due.
func (ms *Service) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	now := ms.Now()
	var projects []uuid.UUID
	if err := ms.s.DB.NewRaw(`SELECT s.project_id FROM monitor_states s JOIN monitors m ON m.id = s.monitor_id
			WHERE s.due_at <= ? AND NOT m.paused
		UNION SELECT c.project_id FROM monitor_checkins c JOIN monitors m ON m.id = c.monitor_id
			WHERE c.status = 'in_progress' AND c.timeout_at <= ? AND NOT m.paused`, now, now).Scan(ctx, &projects); err != nil {
		return rep, fmt.Errorf("monitors: sweep: find due: %w", err)
	}
	for _, pid := range projects {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		var missed, timedOut int
		err := retryDeadlock(func() (err error) {
			missed, timedOut, err = ms.sweepProject(ctx, pid, now)
			return err
		})
		if err != nil {
			return rep, err
		}
		rep.Missed += missed
		rep.TimedOut += timedOut
		rep.Projects++
	}
	return rep, nil
}

// sweepProject records a project's missed and timed-out runs under its lock.
func (ms *Service) sweepProject(ctx context.Context, projectID uuid.UUID, now time.Time) (missed, timedOut int, err error) {
	err = ms.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		missed, timedOut = 0, 0
		if pr.DeletedAt != nil {
			return nil
		}
		// The card's change is counted once, at the end, after every row
		// lock: a check-in takes its run, state and then the card too.
		fx := &effects{}
		ctx = context.WithValue(ctx, effectsKey{}, fx)
		mons := map[uuid.UUID]*Monitor{}
		monitor := func(id uuid.UUID) (*Monitor, error) {
			if m, ok := mons[id]; ok {
				return m, nil
			}
			m := new(Monitor)
			if err := tx.NewRaw(`SELECT `+monitorColumns+` FROM monitors WHERE id = ?`, id).Scan(ctx, m); err != nil {
				return nil, fmt.Errorf("monitors: sweep: monitor: %w", err)
			}
			m.fill()
			mons[id] = m
			return m, nil
		}
		// Timeouts first: a run that hangs is reported as hanging, and
		// its state's streak counts it before any missed run after it.
		var runs []Run
		if err := tx.NewRaw(`SELECT c.id, c.monitor_id, c.environment, c.checkin_id, c.status, c.source, c.started_at, c.release, c.output
			FROM monitor_checkins c JOIN monitors m ON m.id = c.monitor_id
			WHERE c.project_id = ? AND c.status = 'in_progress' AND c.timeout_at <= ? AND NOT m.paused
			ORDER BY c.started_at LIMIT ? FOR UPDATE OF c`, projectID, now, maxClaimsPerProject).Scan(ctx, &runs); err != nil {
			return fmt.Errorf("monitors: sweep: claim timeouts: %w", err)
		}
		for _, r := range runs {
			m, err := monitor(r.MonitorID)
			if err != nil {
				return err
			}
			if _, err := tx.NewRaw(`UPDATE monitor_checkins SET status = 'timeout' WHERE id = ?`, r.ID).Exec(ctx); err != nil {
				return fmt.Errorf("monitors: sweep: time out: %w", err)
			}
			st, err := lockState(ctx, tx, m, r.Environment)
			if err != nil {
				return err
			}
			r.Status = StatusTimeout
			st.LastStatus = StatusTimeout
			maxRun := time.Duration(m.MaxRuntime) * time.Minute
			title := fmt.Sprintf("%s ran over its %s (started %s, still no result)", m.Slug, humanDuration(maxRun),
				r.StartedAt.In(m.plan().loc).Format("15:04"))
			if err := ms.record(ctx, tx, m, st, outcome{status: StatusTimeout, title: title, at: now, run: r}); err != nil {
				return err
			}
			if err := st.save(ctx, tx); err != nil {
				return err
			}
			timedOut++
		}
		// Missed runs: the states still due now that the lock is held.
		var states []*state
		if err := tx.NewRaw(`SELECT `+stateColumns+` FROM monitor_states s
			WHERE s.project_id = ? AND s.due_at <= ? AND NOT EXISTS (SELECT 1 FROM monitors m WHERE m.id = s.monitor_id AND m.paused)
			ORDER BY s.monitor_id, s.environment LIMIT ? FOR UPDATE`, projectID, now, maxClaimsPerProject).Scan(ctx, &states); err != nil {
			return fmt.Errorf("monitors: sweep: claim missed: %w", err)
		}
		for _, st := range states {
			m, err := monitor(st.MonitorID)
			if err != nil {
				return err
			}
			pl := m.plan()
			margin := time.Duration(m.CheckinMargin) * time.Minute
			for n := 0; st.DueAt != nil && !st.DueAt.After(now) && n < maxMissedPerPass; n++ {
				expected := *st.ExpectedAt
				r := Run{ID: uuid.New(), MonitorID: m.ID, Environment: st.Env, Status: StatusMissed, Source: "anvil", StartedAt: expected, ExpectedAt: &expected}
				if _, err := tx.NewRaw(`INSERT INTO monitor_checkins (id, monitor_id, project_id, environment, status, source, started_at, expected_at, received_at)
					VALUES (?, ?, ?, ?, 'missed', 'anvil', ?, ?, ?)`, r.ID, m.ID, m.ProjectID, st.Env, expected, expected, now).Exec(ctx); err != nil {
					return fmt.Errorf("monitors: sweep: record missed: %w", err)
				}
				next := pl.next(expected)
				due := next.Add(margin)
				st.ExpectedAt, st.DueAt = &next, &due
				st.LastStatus = StatusMissed
				title := fmt.Sprintf("%s missed its %s run", m.Slug, expected.In(pl.loc).Format("15:04"))
				if err := ms.record(ctx, tx, m, st, outcome{status: StatusMissed, title: title, at: now, run: r}); err != nil {
					return err
				}
				missed++
			}
			if err := st.save(ctx, tx); err != nil {
				return err
			}
		}
		if fx.card {
			if err := card.EnqueueRefresh(ctx, ms.s, tx, pr.ID); err != nil {
				return err
			}
		}
		if missed+timedOut > 0 {
			return domain.Notify(ctx, tx, liveNotice(pr.OrgID, pr.ID))
		}
		return nil
	})
	return missed, timedOut, err
}

// SweepArgs is the periodic sweep. Deliberately not unique: several
// sweeps may run at once in several processes, and the claims above keep
// each missed run recorded once; a sweep is cheap when nothing is due.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "monitor_sweep" }

// InsertOpts retries a sweep the database refused a few times; the next
// periodic one follows within SweepEvery anyway.
func (SweepArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 3} }
