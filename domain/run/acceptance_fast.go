package run

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
)

// The group transaction in two round trips. Each statement of a group is
// short; what a group pays for is the round trips between them. So the
// statements travel together, as one pipeline each way (pgx batches of
// statements every connection has prepared):
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
	ids := groupProjects(group)
	lq := ledgerQuery(group)
	conn, err := q.s.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	// Release destroys a connection left inside a transaction: a group that
	// fails half-way is rolled back by the disconnect.
	defer conn.Release()
	c := conn.Conn()

	var (
		byID   map[uuid.UUID]*domain.Project
		states map[uuid.UUID]*queueState
		pos    *positions
	)
	projectIDs := dbutil.PgUUIDs(ids)
	reads := &pgx.Batch{}
	reads.Queue("BEGIN")
	reads.Queue(lockProjectsSQL, projectIDs).Query(func(r pgx.Rows) (err error) { byID, err = scanLockedProjects(r); return err })
	reads.Queue(queueStateSQL, projectIDs).Query(func(r pgx.Rows) (err error) { states, err = scanQueueStates(r, ids); return err })
	reads.Queue(runNumbersSQL, projectIDs).Query(func(r pgx.Rows) error { return scanRunNumbers(r, states) })
	reads.Queue(positionsSQL, len(group)).Query(func(r pgx.Rows) (err error) { pos, err = scanPositions(r); return err })
	if len(lq.keys) > 0 {
		reads.Queue(ledgerSQL, lq.args()...).Query(func(r pgx.Rows) error { return lq.scan(r) })
	}
	if err := c.SendBatch(ctx, reads).Close(); err != nil {
		return fmt.Errorf("lock and read the group: %w", err)
	}

	now := q.s.Now()
	runs := q.decideGroup(group, byID, states, lq.entries, now, pos)
	for _, r := range runs {
		// A run promoted at once, or one whose commit status is reported
		// (a River job), needs River's transactional insert.
		if r.State == StateExecutable || (r.CommitSHA != nil && byID[r.ProjectID] != nil && byID[r.ProjectID].Provider != "") {
			return q.abandon(ctx, c, group)
		}
	}
	for _, st := range states {
		if st.heal {
			return q.abandon(ctx, c, group)
		}
	}

	return q.s.PublishAfter(ctx, func(ectx context.Context) error {
		writes := &pgx.Batch{}
		if len(runs) > 0 {
			ins := insertRunsStmt(runs)
			writes.Queue(ins.SQL, ins.Args...)
			if err := q.publishRuns(ectx, bun.Tx{}, runs); err != nil {
				return err
			}
		}
		for _, st := range lq.entries.recordStmts(now) {
			writes.Queue(st.SQL, st.Args...)
		}
		if err := publishDeliveries(ectx, bun.Tx{}, group, byID); err != nil {
			return err
		}
		writes.Queue("COMMIT")
		if err := c.SendBatch(ctx, writes).Close(); err != nil {
			return fmt.Errorf("store the group: %w", err)
		}
		if c.PgConn().TxStatus() != 'I' {
			return fmt.Errorf("store the group: the transaction did not commit")
		}
		return nil
	})
}

// scanLockedProjects reads the rows of lockProjectsSQL.
func scanLockedProjects(rows dbutil.RowSource) (map[uuid.UUID]*domain.Project, error) {
	out := map[uuid.UUID]*domain.Project{}
	for rows.Next() {
		p := new(domain.Project)
		if err := rows.Scan(&p.ID, &p.OrgID, &p.DefaultBranch, &p.Provider, &p.BranchFilters); err != nil {
			return nil, fmt.Errorf("lock projects: %w", err)
		}
		out[p.ID] = p
	}
	return out, rows.Err()
}

// abandon rolls the first round trip back and hands the group on.
func (q *Queue) abandon(ctx context.Context, c *pgx.Conn, group []*acceptJob) error {
	for _, j := range group {
		j.reset()
	}
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		return fmt.Errorf("roll back the group: %w", err)
	}
	return errSlowPath
}
