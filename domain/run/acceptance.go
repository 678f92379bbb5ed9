package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/groupcommit"
)

// Acceptance is the hot path of every trigger: manual runs, webhook
// deliveries and repair approvals. Its shape follows from what an accept
// costs: four short statements and a commit, each a round trip, on a
// machine where the round trips — not the rows — are the price. So the
// accepts that arrive together are decided together (group commit):
//
//   - one transaction locks every project of the group, in id order, with
//     SELECT … FOR UPDATE — the same row locks that serialize every other
//     change of a project's queue, so nothing else can interleave;
//   - one query reads the queues' state, one draws queue positions, one
//     reads the webhook ledger rows;
//   - each accept is decided in arrival order against that state, held in
//     memory for the rest of the group (so two accepts of one project in one
//     group count against the same cap, take consecutive positions, and two
//     copies of one delivery make one run);
//   - one statement inserts the runs and their run_index rows; one inserts
//     the execute_run jobs of runs promoted at once; one writes the ledger;
//     then the commit.
//
// Every caller gets its answer after that commit. If the group's
// transaction fails, each accept is retried alone, so one bad accept never
// fails another.

// queueState is a project's queue as an acceptance sees it under the lock.
type queueState struct {
	queued int  // runs holding a position: pending and executable
	active bool // a run holds the project's one slot
	heal   bool // pending runs exist with nothing active (see admit)
	// number is the project's largest run number, read under the lock: the
	// next accepted run takes number+1, so numbers are dense per project.
	number int64
}

// openStates are the states of runs that are not finished.
const openStates = `('pending', 'executable', 'starting', 'running', 'cancel_requested', 'canceling')`

// The group's statements take their values as parameters and keep one
// text each, so every connection prepares them once and Postgres plans them
// once: with the values written into the text, parsing and planning cost
// more than running them.

// lockProjectsSQL locks a group's projects ($1) in id order, reading what
// its decisions need.
const lockProjectsSQL = `SELECT id, org_id, default_branch, provider, branch_filters FROM ` + domain.LiveProjects + ` p WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`

// queueStateSQL reads the queue state of locked projects ($1).
const queueStateSQL = `SELECT project_id, count(*) FILTER (WHERE position IS NOT NULL) AS queued,
		COALESCE(bool_or(state <> 'pending'), false) AS active
	FROM project_runs WHERE project_id = ANY($1::uuid[]) AND state IN ` + openStates + `
	GROUP BY project_id`

// runNumbersSQL reads the largest run number of locked projects ($1). It is
// a statement of its own, sent after the locks are granted, so that it reads
// with a snapshot that sees every run committed before (READ COMMITTED);
// one subquery per project walks project_runs_number backwards to its first
// entry.
const runNumbersSQL = `SELECT p.id, COALESCE((SELECT max(r.number) FROM project_runs r WHERE r.project_id = p.id), 0)
	FROM unnest($1::uuid[]) AS p(id)`

// loadQueueStates reads the queue state of locked projects in one query,
// and their run numbers in another.
func loadQueueStates(ctx context.Context, tx bun.Tx, ids []uuid.UUID) (map[uuid.UUID]*queueState, error) {
	rows, err := tx.Tx.QueryContext(ctx, queueStateSQL, dbutil.PgUUIDs(ids))
	if err != nil {
		return nil, fmt.Errorf("read queue state: %w", err)
	}
	defer rows.Close()
	states, err := scanQueueStates(rows, ids)
	if err != nil {
		return nil, err
	}
	nrows, err := tx.Tx.QueryContext(ctx, runNumbersSQL, dbutil.PgUUIDs(ids))
	if err != nil {
		return nil, fmt.Errorf("read run numbers: %w", err)
	}
	defer nrows.Close()
	return states, scanRunNumbers(nrows, states)
}

// scanRunNumbers reads the rows of runNumbersSQL into states (which
// scanQueueStates made, one per project).
func scanRunNumbers(rows dbutil.RowSource, states map[uuid.UUID]*queueState) error {
	for rows.Next() {
		var id uuid.UUID
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return fmt.Errorf("read run numbers: %w", err)
		}
		if st := states[id]; st != nil {
			st.number = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read run numbers: %w", err)
	}
	return nil
}

// scanQueueStates reads the rows of queueStateSQL; a project without open
// runs has none, and an empty state.
func scanQueueStates(rows dbutil.RowSource, ids []uuid.UUID) (map[uuid.UUID]*queueState, error) {
	out := make(map[uuid.UUID]*queueState, len(ids))
	for _, id := range ids {
		out[id] = &queueState{}
	}
	for rows.Next() {
		var id uuid.UUID
		st := new(queueState)
		if err := rows.Scan(&id, &st.queued, &st.active); err != nil {
			return nil, fmt.Errorf("read queue state: %w", err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read queue state: %w", err)
	}
	return out, nil
}

// admit decides one acceptance against the in-memory state of p's queue
// and advances it. A run accepted into an idle queue is promoted at once
// (its job is inserted by insertRuns). Pending runs without an active one
// should not exist — every terminalization promotes in its own
// transaction — but if they do, st.heal asks for a promotion after the
// insert rather than stranding them.
func (q *Queue) admit(p *domain.Project, st *queueState, spec AcceptSpec, now time.Time, positions *positions) (*Run, error) {
	if st.queued >= MaxQueued {
		return nil, domain.ErrQueueFull
	}
	pos, err := positions.next()
	if err != nil {
		return nil, err
	}
	// The read model's create sync is done in the accepting transaction:
	// run_index lives in the same database as the runs, so
	// the queued row appears atomically with the run (needs_create →
	// current) and acceptance costs no job. Later changes reconcile through
	// reconcile_run jobs.
	if !SyncTransitionAllowed(SyncNeedsCreate, SyncCurrent) {
		return nil, fmt.Errorf("sync: create path not allowed")
	}
	r := &Run{ID: uuid.New(), ProjectID: p.ID, OrgID: p.OrgID, State: StatePending, Trigger: spec.Trigger,
		Branch: spec.Branch, CommitSHA: spec.CommitSHA, TriggeredBy: spec.TriggeredBy, Position: &pos,
		Provider: spec.Provider, DeliveryID: spec.DeliveryID, IncidentID: spec.IncidentID,
		SyncStatus: SyncCurrent, QueuedAt: now, UpdatedAt: now, Number: st.number + 1, RerunOf: spec.RerunOf,
		FromFork: spec.FromFork, Image: spec.Image, ImageDigest: spec.ImageDigest}
	st.number++
	switch {
	case !st.active && st.queued == 0:
		r.State, r.PromotedAt = StateExecutable, &now
		st.active = true
	case !st.active:
		st.heal = true
	}
	st.queued++
	return r, nil
}

// insertRuns writes admitted runs: the execute_run jobs of those promoted
// at once, then one statement for the runs and their queued run_index rows
// (a new run_id cannot conflict).
// Live events go out after the commit.
func (q *Queue) insertRuns(ctx context.Context, tx bun.Tx, runs []*Run, projects map[uuid.UUID]*domain.Project) error {
	if len(runs) == 0 {
		return nil
	}
	var params []river.InsertManyParams
	var promoted []*Run
	for _, r := range runs {
		if r.State == StateExecutable {
			params = append(params, river.InsertManyParams{Args: domain.ExecuteRunArgs{RunID: r.ID}})
			promoted = append(promoted, r)
		}
	}
	if len(params) > 0 {
		if q.s.Jobs() == nil {
			return fmt.Errorf("domain: no job inserter configured for execute_run")
		}
		res, err := q.s.Jobs().InsertManyTx(ctx, tx.Tx, params)
		if err != nil {
			return fmt.Errorf("enqueue executions: %w", err)
		}
		if len(res) != len(promoted) {
			return fmt.Errorf("enqueue executions: %d jobs for %d runs", len(res), len(promoted))
		}
		for i, r := range promoted {
			r.JobID = &res[i].Job.ID
		}
	}
	ins := insertRunsStmt(runs)
	if _, err := tx.Tx.ExecContext(ctx, ins.SQL, ins.Args...); err != nil {
		return fmt.Errorf("insert runs: %w", err)
	}
	if err := q.enqueueStatusesTx(ctx, tx, runs, projects); err != nil {
		return err
	}
	return q.publishRuns(ctx, tx, runs)
}

// publishRuns queues the live events of accepted runs; they are sent once
// the transaction commits.
func (q *Queue) publishRuns(ctx context.Context, tx bun.Tx, runs []*Run) error {
	for _, r := range runs {
		if err := q.publish(ctx, tx, r); err != nil {
			return err
		}
	}
	return nil
}

// insertRunsSQL inserts admitted runs (one array per column) and their
// queued run_index rows. It writes every column admit sets; the others keep
// their defaults (NULL, no log yet).
const insertRunsSQL = `WITH run AS (
		INSERT INTO project_runs (id, project_id, org_id, state, trigger, branch, commit_sha, position, triggered_by,
			provider, delivery_id, incident_id, job_id, d1_sync_status, queued_at, promoted_at, updated_at,
			number, rerun_of, from_fork, image, image_digest)
		SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
			$9::uuid[], $10::text[], $11::text[], $12::uuid[], $13::bigint[], $14::text[], $15::timestamptz[],
			$16::timestamptz[], $17::timestamptz[], $19::bigint[], $20::uuid[], $21::boolean[], $22::text[], $23::text[])
		RETURNING id, project_id, org_id, trigger, branch, commit_sha, queued_at, number)
	INSERT INTO run_index (run_id, project_id, org_id, status, trigger, branch, commit_sha, queued_at, number)
	SELECT id, project_id, org_id, $18, trigger, branch, commit_sha, queued_at, number FROM run`

// insertRunsStmt is insertRunsSQL with the runs' values.
func insertRunsStmt(runs []*Run) dbutil.Stmt {
	n := len(runs)
	var (
		ids, projects, orgs, triggeredBy, incidents = make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]pgtype.UUID, n), make([]pgtype.UUID, n)
		states, triggers, branches, syncs           = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		shas, providers, deliveries                 = make([]pgtype.Text, n), make([]pgtype.Text, n), make([]pgtype.Text, n)
		positions, jobs                             = make([]pgtype.Int8, n), make([]pgtype.Int8, n)
		numbers, reruns, forks                      = make([]int64, n), make([]pgtype.UUID, n), make([]bool, n)
		images, digests                             = make([]pgtype.Text, n), make([]pgtype.Text, n)
		queued, promoted, updated                   = make([]time.Time, n), make([]pgtype.Timestamptz, n), make([]time.Time, n)
	)
	for i, r := range runs {
		ids[i], projects[i], orgs[i] = dbutil.PgUUID(r.ID), dbutil.PgUUID(r.ProjectID), dbutil.PgUUID(r.OrgID)
		triggeredBy[i], incidents[i] = dbutil.PgUUIDPtr(r.TriggeredBy), dbutil.PgUUIDPtr(r.IncidentID)
		states[i], triggers[i], branches[i], syncs[i] = r.State, r.Trigger, r.Branch, r.SyncStatus
		shas[i], providers[i], deliveries[i] = dbutil.PgText(r.CommitSHA), dbutil.PgText(r.Provider), dbutil.PgText(r.DeliveryID)
		positions[i], jobs[i] = dbutil.PgInt8(r.Position), dbutil.PgInt8(r.JobID)
		queued[i], updated[i] = r.QueuedAt, r.UpdatedAt
		numbers[i], reruns[i], forks[i] = r.Number, dbutil.PgUUIDPtr(r.RerunOf), r.FromFork
		images[i], digests[i] = dbutil.PgText(r.Image), dbutil.PgText(r.ImageDigest)
		if r.PromotedAt != nil {
			promoted[i] = pgtype.Timestamptz{Time: *r.PromotedAt, Valid: true}
		}
	}
	return dbutil.Stmt{SQL: insertRunsSQL, Args: []any{ids, projects, orgs, states, triggers, branches, shas, positions, triggeredBy,
		providers, deliveries, incidents, jobs, syncs, queued, promoted, updated, StatusQueued,
		numbers, reruns, forks, images, digests}}
}

// healQueues promotes the projects that admit found stranded.
func (q *Queue) healQueues(ctx context.Context, tx bun.Tx, projects []*domain.Project, states map[uuid.UUID]*queueState) error {
	for _, p := range projects {
		if st := states[p.ID]; st != nil && st.heal {
			if err := q.promoteTx(ctx, tx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// acceptTx accepts one run into p's queue; the caller holds p's lock.
func (q *Queue) acceptTx(ctx context.Context, tx bun.Tx, p *domain.Project, spec AcceptSpec) (*Run, error) {
	states, err := loadQueueStates(ctx, tx, []uuid.UUID{p.ID})
	if err != nil {
		return nil, err
	}
	pos, err := drawPositions(ctx, tx, 1)
	if err != nil {
		return nil, err
	}
	r, err := q.admit(p, states[p.ID], spec, q.s.Now(), pos)
	if err != nil {
		return nil, err
	}
	if err := q.insertRuns(ctx, tx, []*Run{r}, map[uuid.UUID]*domain.Project{p.ID: p}); err != nil {
		return nil, err
	}
	return r, q.healQueues(ctx, tx, []*domain.Project{p}, states)
}

// acceptJob is one acceptance waiting for its group.
type acceptJob struct {
	projectID uuid.UUID
	orgID     uuid.UUID  // the caller's organisation; uuid.Nil: any (webhooks)
	spec      AcceptSpec // Branch "" means the project's default branch
	delivery  *deliveryJob

	run *Run
	err error
}

// The acceptances that arrive while others are being stored are grouped
// (groupcommit): one loop stores the groups, one after the other, each of
// at most maxAcceptGroup acceptances, lingering up to acceptLinger for the
// callers it has just answered. The linger is sized for callers that do a
// web request's work between two acceptances (a webhook's verification,
// say): at 500 µs most of them came back too late, and groups stayed half
// as large.
var acceptPolicy = groupcommit.Policy{Max: maxAcceptGroup, Linger: acceptLinger, Backoff: lingerBackoff}

const (
	maxAcceptGroup = 64
	acceptLinger   = 2 * time.Millisecond
	// lingerBackoff is how many groups go without lingering after a
	// linger in vain.
	lingerBackoff = 16
	// acceptTimeout bounds one group's transaction.
	acceptTimeout = 30 * time.Second
)

// errQueueStopped answers an acceptance after the queue has stopped (a
// shutdown) or before it started.
var errQueueStopped = errors.New("queue: not accepting runs (the service is stopped)")

// submit hands j to the group loop and waits for its answer.
func (q *Queue) submit(j *acceptJob) error {
	if err := q.comb.Submit(j); err != nil {
		return errQueueStopped
	}
	return j.err
}

// acceptGroup stores a group in one transaction; when that fails, each of
// its acceptances alone, so that each gets its own answer.
func (q *Queue) acceptGroup(group []*acceptJob) {
	if err := q.tryGroup(group); err != nil {
		if len(group) == 1 {
			group[0].reset()
			group[0].err = err
		} else {
			for _, j := range group {
				if err := q.tryGroup([]*acceptJob{j}); err != nil {
					j.reset()
					j.err = err
				}
			}
		}
	}
}

func (j *acceptJob) reset() {
	j.run, j.err = nil, nil
	if j.delivery != nil {
		j.delivery.res = DeliveryResult{}
	}
}

// tryGroup is one group's transaction. Per-acceptance refusals (not found,
// queue full, a disabled webhook) are answers, not failures: they write
// nothing and the group commits. The returned error is the transaction's.
// Groups go the two-round-trip way when they can (tryGroupFast).
func (q *Queue) tryGroup(group []*acceptJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), acceptTimeout)
	defer cancel()
	for _, j := range group {
		j.reset()
	}
	if q.s.Pool != nil && !q.generalOnly {
		if err := q.tryGroupFast(ctx, group); !errors.Is(err, errSlowPath) {
			return err
		}
	}
	// tryGroupFast resets what it decided before it hands a group on.
	return q.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		ids := groupProjects(group)
		var projects []*domain.Project
		if err := domain.SelectLiveProjects(tx, &projects).Where("id IN (?)", bun.List(ids)).OrderExpr("id").For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock projects: %w", err)
		}
		byID := make(map[uuid.UUID]*domain.Project, len(projects))
		for _, p := range projects {
			byID[p.ID] = p
		}
		states, err := loadQueueStates(ctx, tx, ids)
		if err != nil {
			return err
		}
		ledger, err := loadLedger(ctx, tx, group)
		if err != nil {
			return err
		}
		pos, err := drawPositions(ctx, tx, len(group))
		if err != nil {
			return err
		}
		now := q.s.Now()
		runs := q.decideGroup(group, byID, states, ledger, now, pos)
		if err := q.insertRuns(ctx, tx, runs, byID); err != nil {
			return err
		}
		if err := ledger.record(ctx, tx, now); err != nil {
			return err
		}
		if err := recordRedeliveries(ctx, tx, group, byID); err != nil {
			return err
		}
		if err := publishDeliveries(ctx, tx, group, byID); err != nil {
			return err
		}
		return q.healQueues(ctx, tx, projects, states)
	})
}

// groupProjects is the group's projects in lock order.
func groupProjects(group []*acceptJob) []uuid.UUID {
	ids := make([]uuid.UUID, 0, len(group))
	for _, j := range group {
		ids = append(ids, j.projectID)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return slices.Compact(ids)
}

// decideGroup decides each acceptance of the group in arrival order
// against the locked projects' state, and returns the runs to insert.
func (q *Queue) decideGroup(group []*acceptJob, byID map[uuid.UUID]*domain.Project, states map[uuid.UUID]*queueState, ledger groupLedger, now time.Time, pos *positions) []*Run {
	var runs []*Run
	for _, j := range group {
		p := byID[j.projectID]
		if p == nil || (j.orgID != uuid.Nil && p.OrgID != j.orgID) {
			j.err = domain.NotFound("project")
			continue
		}
		if j.delivery != nil {
			if r := q.decideDelivery(j, p, states[p.ID], ledger, now, pos); r != nil {
				runs = append(runs, r)
			}
			continue
		}
		spec := j.spec
		if spec.Branch == "" {
			spec.Branch = p.DefaultBranch
		}
		j.run, j.err = q.admit(p, states[p.ID], spec, now, pos)
		if j.run != nil {
			runs = append(runs, j.run)
		}
	}
	return runs
}

// positions are queue positions drawn for a group, in ascending order,
// while its projects' locks are held (see migration 10): each admitted run
// takes the next, so positions follow arrival order. Those left unused are
// gaps, which positions allow (docs/architecture.md).
type positions []int64

func (p *positions) next() (int64, error) {
	if len(*p) == 0 {
		return 0, fmt.Errorf("domain: no queue position left for this group")
	}
	v := (*p)[0]
	*p = (*p)[1:]
	return v, nil
}

// positionsSQL draws $1 positions.
const positionsSQL = `SELECT nextval('run_positions') FROM generate_series(1, $1::int)`

// drawPositions draws n positions; the caller holds the projects' locks.
func drawPositions(ctx context.Context, tx bun.Tx, n int) (*positions, error) {
	rows, err := tx.Tx.QueryContext(ctx, positionsSQL, n)
	if err != nil {
		return nil, fmt.Errorf("draw queue positions: %w", err)
	}
	defer rows.Close()
	return scanPositions(rows)
}

// scanPositions reads the rows of positionsSQL, in ascending order.
func scanPositions(rows dbutil.RowSource) (*positions, error) {
	var vs []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("draw queue positions: %w", err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("draw queue positions: %w", err)
	}
	slices.Sort(vs)
	p := positions(vs)
	return &p, nil
}
