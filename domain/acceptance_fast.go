package domain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/uptrace/bun"
)

// The group transaction in two round trips. Each statement of a group is
// short; what a group pays for is the round trips between them. So the
// statements travel together, as one simple-protocol message each way:
//
//  1. BEGIN; lock the projects; read their queues; draw queue positions;
//     read the ledger rows —
//     Postgres runs them in order, each with a fresh snapshot (READ
//     COMMITTED), so the reads see everything committed before the locks
//     were granted, exactly as if they had been sent one by one;
//  2. the runs, their read-model rows and positions; the ledger; COMMIT.
//
// The decision between the two is the same code as in tryGroup. A group
// that would promote a run (its execute_run job goes through River's
// transactional insert) or heal a stranded queue is rolled back after the
// first round trip and stored by tryGroup instead.

// errSlowPath asks for a group to be stored by tryGroup.
var errSlowPath = fmt.Errorf("domain: group needs the general path")

// tryGroupFast stores group in two round trips, or returns errSlowPath
// having changed nothing.
func (q *Queue) tryGroupFast(ctx context.Context, group []*acceptJob) error {
	db := q.s.DB
	ids := groupProjects(group)
	reads := []string{"BEGIN",
		formatSQL(db, `SELECT id, org_id, default_branch FROM projects WHERE id IN (?) ORDER BY id FOR UPDATE`, bun.In(ids)),
		formatSQL(db, queueStateSQL, bun.In(ids)),
		formatSQL(db, positionsSQL, len(group))}
	lq := ledgerQuery(group)
	if lq.n > 0 {
		reads = append(reads, formatSQL(db, ledgerSQL, lq.args()...))
	}
	conn, err := q.s.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	// Release destroys a connection left inside a transaction: a group that
	// fails half-way is rolled back by the disconnect.
	defer conn.Release()
	pc := conn.Conn().PgConn()
	tm := conn.Conn().TypeMap()
	res, err := pc.Exec(ctx, strings.Join(reads, ";\n")).ReadAll()
	if err != nil {
		return fmt.Errorf("lock and read the group: %w", err)
	}
	if len(res) != len(reads) {
		return fmt.Errorf("lock and read the group: %d results for %d statements", len(res), len(reads))
	}

	byID := map[uuid.UUID]*Project{}
	if err := scanRows(tm, res[1], func(scan func(...any) error) error {
		p := new(Project)
		if err := scan(&p.ID, &p.OrgID, &p.DefaultBranch); err != nil {
			return err
		}
		byID[p.ID] = p
		return nil
	}); err != nil {
		return fmt.Errorf("lock projects: %w", err)
	}
	states := make(map[uuid.UUID]*queueState, len(ids))
	for _, id := range ids {
		states[id] = &queueState{}
	}
	if err := scanRows(tm, res[2], func(scan func(...any) error) error {
		var id uuid.UUID
		st := new(queueState)
		if err := scan(&id, &st.queued, &st.active); err != nil {
			return err
		}
		states[id] = st
		return nil
	}); err != nil {
		return fmt.Errorf("read queue state: %w", err)
	}
	var drawn []int64
	if err := scanRows(tm, res[3], func(scan func(...any) error) error {
		var v int64
		if err := scan(&v); err != nil {
			return err
		}
		drawn = append(drawn, v)
		return nil
	}); err != nil {
		return fmt.Errorf("draw queue positions: %w", err)
	}
	slices.Sort(drawn)
	pos := positions(drawn)
	ledger := lq.entries
	if lq.n > 0 {
		if err := scanRows(tm, res[4], func(scan func(...any) error) error {
			var r ledgerRow
			if err := scan(&r.Ord, &r.Enabled, &r.Outcome, &r.RunID, &r.ReceivedAt); err != nil {
				return err
			}
			lq.apply(r)
			return nil
		}); err != nil {
			return fmt.Errorf("load webhooks and ledger: %w", err)
		}
	}

	now := q.s.Now()
	runs := q.decideGroup(group, byID, states, ledger, now, &pos)
	for _, r := range runs {
		if r.State == StateExecutable {
			return q.abandon(ctx, pc, group)
		}
	}
	for _, st := range states {
		if st.heal {
			return q.abandon(ctx, pc, group)
		}
	}

	return q.s.publishAfter(ctx, func(ectx context.Context) error {
		var writes []string
		if len(runs) > 0 {
			w, err := insertRunsSQL(db, runs)
			if err != nil {
				return err
			}
			writes = append(writes, w)
			if err := q.publishRuns(ectx, bun.Tx{}, runs); err != nil {
				return err
			}
		}
		writes = append(writes, ledger.recordSQL(db, now)...)
		if err := publishDeliveries(ectx, bun.Tx{}, group, byID); err != nil {
			return err
		}
		writes = append(writes, "COMMIT")
		if _, err := pc.Exec(ctx, strings.Join(writes, ";\n")).ReadAll(); err != nil {
			return fmt.Errorf("store the group: %w", err)
		}
		if pc.TxStatus() != 'I' {
			return fmt.Errorf("store the group: the transaction did not commit")
		}
		return nil
	})
}

// abandon rolls the first round trip back and hands the group on.
func (q *Queue) abandon(ctx context.Context, pc *pgconn.PgConn, group []*acceptJob) error {
	for _, j := range group {
		j.reset()
	}
	if _, err := pc.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		return fmt.Errorf("roll back the group: %w", err)
	}
	return errSlowPath
}

// formatSQL writes args into query the way bun does for every statement.
func formatSQL(db *bun.DB, query string, args ...any) string {
	b, err := db.NewRaw(query, args...).AppendQuery(db.QueryGen(), nil)
	if err != nil {
		// Only an argument bun cannot write fails here; the statement
		// then fails in Postgres with the error bun wrote into it.
		return query
	}
	return string(b)
}

// scanRows decodes the text rows of one simple-protocol result.
func scanRows(tm *pgtype.Map, r *pgconn.Result, row func(scan func(...any) error) error) error {
	if r.Err != nil {
		return r.Err
	}
	for _, vals := range r.Rows {
		scan := func(dst ...any) error {
			if len(dst) != len(vals) {
				return fmt.Errorf("%d columns, %d destinations", len(vals), len(dst))
			}
			for i, d := range dst {
				fd := r.FieldDescriptions[i]
				if err := tm.Scan(fd.DataTypeOID, fd.Format, vals[i], d); err != nil {
					return fmt.Errorf("column %s: %w", fd.Name, err)
				}
			}
			return nil
		}
		if err := row(scan); err != nil {
			return err
		}
	}
	return nil
}

// insertRunsSQL is the statement that inserts runs and their queued
// run_index rows (insertRunsSQLText), with every value written in.
func insertRunsSQL(db *bun.DB, runs []*Run) (string, error) {
	ins := db.NewInsert().Model(&runs).Returning(runReturning)
	b, err := db.NewRaw(insertRunsSQLText, ins, StatusQueued).AppendQuery(db.QueryGen(), nil)
	if err != nil {
		return "", fmt.Errorf("insert runs: %w", err)
	}
	return string(b), nil
}

// ledgerRow is one row of ledgerSQL.
type ledgerRow struct {
	Ord        int        `bun:"ord"`
	Enabled    bool       `bun:"enabled"`
	Outcome    *string    `bun:"outcome"`
	RunID      *uuid.UUID `bun:"run_id"`
	ReceivedAt *time.Time `bun:"received_at"`
}
