package domain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"anvil/domain/forge"
)

// Erasure deletes projects and organisations and purges people
// (docs/erasure.md). A deletion is two steps: a tombstone, one short
// transaction after which the object is gone from every page, list, token
// and webhook; then an erase job that removes its rows in bounded batches,
// each its own short transaction, the object's own row last. Every step
// deletes what is still there, so a job that crashed or timed out finishes
// the work when it runs again.
type Erasure struct {
	s        *Store
	queue    *Queue
	feed     *Feed
	webhooks *Webhooks
	// Batch is the most rows one transaction of an erase deletes (run log
	// chunks, which are large, a tenth of it).
	Batch int
	// Budget is how long one erase job works before it hands over to its
	// next attempt (a snooze), so that no job holds a worker for long.
	Budget time.Duration
}

// NewErasure builds the service.
func NewErasure(s *Store, q *Queue, f *Feed, w *Webhooks) *Erasure {
	return &Erasure{s: s, queue: q, feed: f, webhooks: w, Batch: 2000, Budget: 30 * time.Second}
}

// Audit kinds written by erasure; AuditProjectDeleted is the tombstone's.
const (
	// AuditProjectErased closes a project's erasure: what was removed.
	AuditProjectErased = "project.erased"
	// AuditUserPurged is written in every organisation a purged person
	// belonged to, with their pseudonym as the target.
	AuditUserPurged = "user.purged"
	erasureActor    = "anvil (erasure)"
)

// EraseProjectArgs is the job that removes a deleted project's rows.
type EraseProjectArgs struct {
	ProjectID uuid.UUID `json:"project_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (EraseProjectArgs) Kind() string { return "erase_project" }

// InsertOpts keeps one erase of a project at a time (the sweep may insert
// it again while it waits or runs) and retries for long: the work is
// idempotent and must finish.
func (EraseProjectArgs) InsertOpts() river.InsertOpts { return eraseInsertOpts() }

// EraseOrganizationArgs is the job that removes a deleted organisation.
type EraseOrganizationArgs struct {
	OrgID uuid.UUID `json:"org_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (EraseOrganizationArgs) Kind() string { return "erase_organization" }

// InsertOpts is EraseProjectArgs.InsertOpts: one erase at a time, long retries.
func (EraseOrganizationArgs) InsertOpts() river.InsertOpts { return eraseInsertOpts() }

// EraseSweepArgs is the periodic job that inserts the erase job of every
// tombstone that has none (one discarded after its retries, say).
type EraseSweepArgs struct{}

// Kind implements river.JobArgs.
func (EraseSweepArgs) Kind() string { return "erase_sweep" }

// InsertOpts keeps one sweep waiting at a time.
func (EraseSweepArgs) InsertOpts() river.InsertOpts { return eraseInsertOpts() }

func eraseInsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 50, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled,
	}}}
}

// pendingJobStates are the River job states that may still run; a finished
// job that names an erased object is River's own record and expires with it.
const pendingJobStates = `('available', 'scheduled', 'retryable', 'pending')`

// errConfirmation refuses a deletion whose typed confirmation is not the
// object's slug; nothing changes.
func errConfirmation(what, slug string) error {
	return Invalid("confirmation_mismatch", "type the %s's slug %q to confirm its deletion", what, slug)
}

// DeleteProject deletes a project (admins): confirm must be its slug. The
// project is tombstoned at once and erased in the background.
func (e *Erasure) DeleteProject(ctx context.Context, pr *Principal, id uuid.UUID, confirm string) (*Project, error) {
	if err := requireRole(pr, RoleAdmin); err != nil {
		return nil, err
	}
	var out *Project
	err := e.s.WithProject(ctx, id, func(ctx context.Context, tx bun.Tx, p *Project) error {
		if p.OrgID != pr.OrgID || p.DeletedAt != nil {
			return NotFound("project")
		}
		if strings.TrimSpace(confirm) != p.Slug {
			return errConfirmation("project", p.Slug)
		}
		uid := pr.UserID
		if err := e.tombstoneTx(ctx, tx, p, &uid); err != nil {
			return err
		}
		if err := recordAudit(ctx, tx, pr, AuditProjectDeleted, p.Slug, map[string]any{"project_id": p.ID.String(), "name": p.Name}); err != nil {
			return err
		}
		out = p
		return e.s.insertJob(ctx, tx, EraseProjectArgs{ProjectID: p.ID})
	})
	if err != nil {
		return nil, err
	}
	e.forget(id)
	return out, nil
}

// tombstoneTx hides p and stops everything of it, in the caller's
// transaction holding p's lock: queued runs are dropped, an executing one is
// asked to stop through the cancel path (its executor stops the sandbox and
// reports), feed connections are revoked and an external card producer's
// token dropped. by is who asked (nil: nobody in particular).
func (e *Erasure) tombstoneTx(ctx context.Context, tx bun.Tx, p *Project, by *uuid.UUID) error {
	now := e.s.Now()
	p.DeletedAt = &now
	if _, err := tx.NewRaw(`UPDATE projects SET deleted_at = ?, updated_at = ? WHERE id = ?`, now, now, p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("erasure: tombstone %s: %w", p.ID, err)
	}
	// Dropped, not promoted one after the other: nothing of the project runs
	// any more, and its rows are erased next (done: no reconcile is owed).
	if _, err := tx.NewRaw(`UPDATE project_runs SET state = 'canceled', position = NULL, finished_at = ?, failure_reason = ?,
			canceled_by = ?, updated_at = ?, d1_sync_status = 'done'
		WHERE project_id = ? AND state IN ('pending', 'executable')`, now, ReasonCanceledWhileQueued, by, now, p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("erasure: drop queued runs of %s: %w", p.ID, err)
	}
	var active []Run
	if err := tx.NewSelect().Model(&active).Where("project_id = ? AND state IN ('starting', 'running')", p.ID).Scan(ctx); err != nil {
		return fmt.Errorf("erasure: active runs of %s: %w", p.ID, err)
	}
	for i := range active {
		r := &active[i]
		r.State, r.CanceledBy = StateCancelRequested, by
		if err := e.queue.changed(ctx, tx, r, "state", "canceled_by"); err != nil {
			return err
		}
	}
	if _, err := tx.NewRaw(`UPDATE feed_connections SET revoked_at = ? WHERE project_id = ? AND revoked_at IS NULL`, now, p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("erasure: revoke connections of %s: %w", p.ID, err)
	}
	if _, err := tx.NewRaw(`UPDATE project_cards SET external = false, token_prefix = NULL, token_hash = NULL WHERE project_id = ?`, p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("erasure: card of %s: %w", p.ID, err)
	}
	// Open dashboards re-read their cards on a card event.
	return publishCard(ctx, tx, p.OrgID, p.ID)
}

// forget drops what this process remembers of a deleted project's tokens
// and webhooks; other processes' copies live a second (feed tokens) or
// are refused under the project's lock (webhooks).
func (e *Erasure) forget(projectIDs ...uuid.UUID) {
	e.feed.senders.Clear()
	for _, id := range projectIDs {
		for _, p := range []forge.Provider{forge.GitHub, forge.GitLab, forge.Gitea} {
			e.webhooks.seals.Delete(sealKey{id, p})
		}
	}
}

// DeleteOrganization deletes the principal's organisation (owners):
// confirm must be its slug. In one transaction its projects are
// tombstoned, every member's access ends (sessions, memberships, tokens,
// pending invitations) and the erase job is inserted. The organisation's own
// audit log is erased with it, so the deletion is logged by the server.
func (e *Erasure) DeleteOrganization(ctx context.Context, pr *Principal, orgID uuid.UUID, confirm string) error {
	if err := requireRole(pr, RoleOwner); err != nil {
		return err
	}
	if orgID != pr.OrgID {
		return NotFound("organization")
	}
	var ids []uuid.UUID
	var slug string
	err := e.s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewRaw(`SELECT slug FROM organizations WHERE id = ? FOR UPDATE`, orgID).Scan(ctx, &slug); err != nil {
			if isNoRows(err) {
				return NotFound("organization")
			}
			return fmt.Errorf("erasure: lock organization: %w", err)
		}
		if strings.TrimSpace(confirm) != slug {
			return errConfirmation("organization", slug)
		}
		now := e.s.Now()
		if _, err := tx.NewRaw(`INSERT INTO organization_erasures (org_id, slug, requested_at, actor_email) VALUES (?, ?, ?, ?)
			ON CONFLICT (org_id) DO NOTHING`, orgID, slug, now, pr.Email).Exec(ctx); err != nil {
			return fmt.Errorf("erasure: mark organization: %w", err)
		}
		var projects []*Project
		if err := tx.NewSelect().Model(&projects).Where("org_id = ? AND deleted_at IS NULL", orgID).OrderExpr("id").For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("erasure: lock projects: %w", err)
		}
		uid := pr.UserID
		for _, p := range projects {
			if err := e.tombstoneTx(ctx, tx, p, &uid); err != nil {
				return err
			}
			ids = append(ids, p.ID)
		}
		for _, q := range []string{
			`DELETE FROM sessions WHERE org_id = ?`,
			`DELETE FROM memberships WHERE org_id = ?`,
			`UPDATE api_tokens SET revoked_at = ?1 WHERE org_id = ?0 AND revoked_at IS NULL`,
			`UPDATE invitations SET revoked_at = ?1 WHERE org_id = ?0 AND used_at IS NULL AND revoked_at IS NULL`,
		} {
			if _, err := tx.NewRaw(q, orgID, now).Exec(ctx); err != nil {
				return fmt.Errorf("erasure: end access to %s: %w", slug, err)
			}
		}
		return e.s.insertJob(ctx, tx, EraseOrganizationArgs{OrgID: orgID})
	})
	if err != nil {
		return err
	}
	e.forget(ids...)
	e.s.Log.Info("organization deleted", "org_id", orgID, "slug", slug, "actor", pr.Email, "projects", len(ids))
	return nil
}

// ErasureReport is what one erase pass did.
type ErasureReport struct {
	// Done: the object is gone. Otherwise the pass ran out of its budget,
	// or Waiting says a run of it is still stopping; erase again later.
	Done    bool
	Waiting bool
	// Removed counts the rows deleted per table.
	Removed map[string]int64
}

func (r *ErasureReport) add(table string, n int64) {
	if n == 0 {
		return
	}
	if r.Removed == nil {
		r.Removed = map[string]int64{}
	}
	r.Removed[table] += n
}

// Total is every row the pass deleted.
func (r ErasureReport) Total() int64 {
	var n int64
	for _, v := range r.Removed {
		n += v
	}
	return n
}

// eraseStep deletes at most $2 rows of table belonging to the object $1
// and answers how many it deleted (one statement, its own transaction).
type eraseStep struct {
	table string
	sql   string
	// small: a tenth of the batch (rows with large values).
	small bool
}

// byCTID is a step for a table with the object's id in column col.
func byCTID(table, col string) eraseStep {
	return eraseStep{table: table, sql: fmt.Sprintf(`WITH gone AS (DELETE FROM %[1]s WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM %[1]s WHERE %[2]s = $1 LIMIT $2)) RETURNING 1) SELECT count(*) FROM gone`, table, col)}
}

// projectSteps erase a tombstoned project, children before parents, so that
// no cascade at the end deletes an unbounded number of rows at once. Runs and
// incidents take the River jobs that name them (and could still run) along.
var projectSteps = []eraseStep{
	{table: "feed_events", sql: `WITH gone AS (DELETE FROM feed_events e USING (
		SELECT org_id, event_id_key FROM feed_events WHERE project_id = $1 LIMIT $2) d
		WHERE e.org_id = d.org_id AND e.event_id_key = d.event_id_key RETURNING 1) SELECT count(*) FROM gone`},
	{table: "incident_transitions", sql: `WITH gone AS (DELETE FROM incident_transitions WHERE id = ANY(ARRAY(
		SELECT t.id FROM incidents i JOIN incident_transitions t ON t.incident_id = i.id WHERE i.project_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "incidents", sql: `WITH gone AS (DELETE FROM incidents WHERE id = ANY(ARRAY(
		SELECT id FROM incidents WHERE project_id = $1 LIMIT $2)) RETURNING id),
		jobs AS (DELETE FROM river_job j USING gone WHERE j.state IN ` + pendingJobStates + ` AND j.args->>'incident_id' = gone.id::text)
		SELECT count(*) FROM gone`},
	{table: "run_log_chunks", small: true, sql: `WITH gone AS (DELETE FROM run_log_chunks c USING (
		SELECT l.run_id, l.seq FROM project_runs r JOIN run_log_chunks l ON l.run_id = r.id WHERE r.project_id = $1 LIMIT $2) d
		WHERE c.run_id = d.run_id AND c.seq = d.seq RETURNING 1) SELECT count(*) FROM gone`},
	{table: "run_forge_reports", sql: `WITH gone AS (DELETE FROM run_forge_reports WHERE run_id = ANY(ARRAY(
		SELECT f.run_id FROM project_runs r JOIN run_forge_reports f ON f.run_id = r.id WHERE r.project_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "project_runs", sql: `WITH gone AS (DELETE FROM project_runs WHERE id = ANY(ARRAY(
		SELECT id FROM project_runs WHERE project_id = $1 LIMIT $2)) RETURNING id),
		jobs AS (DELETE FROM river_job j USING gone WHERE j.state IN ` + pendingJobStates + ` AND j.args->>'run_id' = gone.id::text)
		SELECT count(*) FROM gone`},
	byCTID("run_index", "project_id"),
	byCTID("project_webhook_deliveries", "project_id"),
	byCTID("webhook_refusals", "project_id"),
	{table: "feed_outcomes", sql: `WITH gone AS (DELETE FROM feed_outcomes o USING (
		SELECT f.connection_id, f.hour, f.reason_code FROM feed_connections c JOIN feed_outcomes f ON f.connection_id = c.id
		WHERE c.project_id = $1 LIMIT $2) d
		WHERE o.connection_id = d.connection_id AND o.hour = d.hour AND o.reason_code = d.reason_code RETURNING 1) SELECT count(*) FROM gone`},
	byCTID("feed_connections", "project_id"),
	byCTID("feed_bindings", "project_id"),
	byCTID("project_webhooks", "project_id"),
	byCTID("run_secrets", "project_id"),
	byCTID("alert_rules", "project_id"),
	byCTID("project_cards", "project_id"),
	byCTID("card_changes", "project_id"),
}

// orgSteps erase what an organisation holds beside its projects.
var orgSteps = []eraseStep{
	byCTID("audit_log", "org_id"),
	{table: "alert_deliveries", sql: `WITH gone AS (DELETE FROM alert_deliveries WHERE id = ANY(ARRAY(
		SELECT a.id FROM alert_destinations d JOIN alert_deliveries a ON a.destination_id = d.id WHERE d.org_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "alert_destinations", sql: `WITH gone AS (DELETE FROM alert_destinations WHERE id = ANY(ARRAY(
		SELECT id FROM alert_destinations WHERE org_id = $1 LIMIT $2)) RETURNING id),
		jobs AS (DELETE FROM river_job j USING gone WHERE j.state IN ` + pendingJobStates + ` AND j.args->>'destination_id' = gone.id::text)
		SELECT count(*) FROM gone`},
	byCTID("invitations", "org_id"),
	byCTID("sessions", "org_id"),
	byCTID("api_tokens", "org_id"),
	byCTID("memberships", "org_id"),
}

// runSteps runs steps for id until each has nothing left or the deadline
// passes; it reports whether every step finished.
func (e *Erasure) runSteps(ctx context.Context, steps []eraseStep, id uuid.UUID, deadline time.Time, rep *ErasureReport) (bool, error) {
	for _, st := range steps {
		limit := e.Batch
		if st.small {
			limit = max(1, e.Batch/10)
		}
		for {
			if time.Now().After(deadline) {
				return false, nil
			}
			var n int64
			if err := e.s.DB.DB.QueryRowContext(ctx, st.sql, id, limit).Scan(&n); err != nil {
				return false, fmt.Errorf("erasure: %s of %s: %w", st.table, id, err)
			}
			rep.add(st.table, n)
			if n < int64(limit) {
				break
			}
		}
	}
	return true, nil
}

// EraseProject is one pass of a deleted project's erasure (the
// erase_project job): it waits for an executing run to stop, then deletes
// the project's rows in batches and, last, the project row, closing with a
// "project.erased" audit entry. A live project is refused. Erasing a
// project that is already gone is done.
func (e *Erasure) EraseProject(ctx context.Context, id uuid.UUID) (ErasureReport, error) {
	var rep ErasureReport
	var org uuid.UUID
	var slug string
	var deleted *time.Time
	err := e.s.DB.DB.QueryRowContext(ctx, `SELECT org_id, slug, deleted_at FROM projects WHERE id = $1`, id).Scan(&org, &slug, &deleted)
	if isNoRows(err) {
		rep.Done = true
		return rep, e.dropJobs(ctx, "project_id", id)
	}
	if err != nil {
		return rep, fmt.Errorf("erasure: project %s: %w", id, err)
	}
	if deleted == nil {
		return rep, ErrLiveProject
	}
	var stopping int
	if err := e.s.DB.DB.QueryRowContext(ctx, `SELECT count(*) FROM project_runs WHERE project_id = $1
		AND state IN ('executable', 'starting', 'running', 'cancel_requested', 'canceling')`, id).Scan(&stopping); err != nil {
		return rep, fmt.Errorf("erasure: runs of %s: %w", id, err)
	}
	if stopping > 0 {
		// The executor stops the sandbox and reports; a lost one is the
		// watchdog's within its heartbeat timeout.
		rep.Waiting = true
		return rep, nil
	}
	done, err := e.runSteps(ctx, projectSteps, id, time.Now().Add(e.Budget), &rep)
	if err != nil || !done {
		return rep, err
	}
	err = e.s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`DELETE FROM river_job WHERE state IN `+pendingJobStates+` AND args @> jsonb_build_object('project_id', ?::text)`,
			id.String()).Exec(ctx); err != nil {
			return fmt.Errorf("erasure: jobs of %s: %w", id, err)
		}
		res, err := tx.NewRaw(`DELETE FROM projects WHERE id = ? AND deleted_at IS NOT NULL`, id).Exec(ctx)
		if err != nil {
			return fmt.Errorf("erasure: project row %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		rep.add("projects", 1)
		var orgGoing bool
		if err := tx.NewRaw(`SELECT EXISTS (SELECT 1 FROM organization_erasures WHERE org_id = ?)`, org).Scan(ctx, &orgGoing); err != nil {
			return err
		}
		if orgGoing {
			return nil
		}
		detail := map[string]any{"project_id": id.String()}
		for t, n := range rep.Removed {
			detail[t] = n
		}
		return recordAuditIn(ctx, tx, org, nil, erasureActor, AuditProjectErased, slug, detail)
	})
	if err != nil {
		return rep, err
	}
	rep.Done = true
	return rep, nil
}

// ErrLiveProject refuses to erase a project that was not deleted.
var ErrLiveProject = errors.New("erasure: the project was not deleted; only a deleted project is erased")

// dropJobs deletes the pending River jobs whose argument key names id.
func (e *Erasure) dropJobs(ctx context.Context, key string, id uuid.UUID) error {
	if _, err := e.s.DB.DB.ExecContext(ctx, `DELETE FROM river_job WHERE state IN `+pendingJobStates+` AND args @> jsonb_build_object($1::text, $2::text)`,
		key, id.String()); err != nil {
		return fmt.Errorf("erasure: jobs naming %s: %w", id, err)
	}
	return nil
}

// EraseOrganization is one pass of a deleted organisation's erasure (the
// erase_organization job): each project (tombstoned first if one slipped in
// meanwhile), then the organisation's own rows, then the organisation.
func (e *Erasure) EraseOrganization(ctx context.Context, orgID uuid.UUID) (ErasureReport, error) {
	var rep ErasureReport
	var marked, exists bool
	if err := e.s.DB.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM organization_erasures WHERE org_id = $1),
		EXISTS (SELECT 1 FROM organizations WHERE id = $1)`, orgID).Scan(&marked, &exists); err != nil {
		return rep, fmt.Errorf("erasure: organization %s: %w", orgID, err)
	}
	if !exists {
		rep.Done = true
		return rep, e.dropJobs(ctx, "org_id", orgID)
	}
	if !marked {
		return rep, ErrLiveOrganization
	}
	var ids []uuid.UUID
	if err := e.s.DB.NewRaw(`SELECT id FROM projects WHERE org_id = ? ORDER BY id`, orgID).Scan(ctx, &ids); err != nil {
		return rep, fmt.Errorf("erasure: projects of %s: %w", orgID, err)
	}
	deadline := time.Now().Add(e.Budget)
	for _, id := range ids {
		// A project created while the organisation was being deleted.
		err := e.s.WithProject(ctx, id, func(ctx context.Context, tx bun.Tx, p *Project) error {
			if p.DeletedAt != nil {
				return nil
			}
			return e.tombstoneTx(ctx, tx, p, nil)
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			return rep, err
		}
		e.forget(id)
		prep, err := e.EraseProject(ctx, id)
		for t, n := range prep.Removed {
			rep.add(t, n)
		}
		if err != nil || !prep.Done || time.Now().After(deadline) {
			rep.Waiting = prep.Waiting
			return rep, err
		}
	}
	done, err := e.runSteps(ctx, orgSteps, orgID, deadline, &rep)
	if err != nil || !done {
		return rep, err
	}
	err = e.s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`DELETE FROM river_job WHERE state IN `+pendingJobStates+` AND args @> jsonb_build_object('org_id', ?::text)`,
			orgID.String()).Exec(ctx); err != nil {
			return fmt.Errorf("erasure: jobs of %s: %w", orgID, err)
		}
		res, err := tx.NewRaw(`DELETE FROM organizations WHERE id = ?`, orgID).Exec(ctx)
		if err != nil {
			return fmt.Errorf("erasure: organization row %s: %w", orgID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			rep.add("organizations", 1)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.Done = true
	e.s.Log.Info("organization erased", "org_id", orgID, "rows", rep.Total())
	return rep, nil
}

// ErrLiveOrganization refuses to erase an organisation that was not deleted.
var ErrLiveOrganization = errors.New("erasure: the organization was not deleted; only a deleted organization is erased")

// Sweep inserts the erase job of every tombstone (a project deleted on its
// own, an organisation) whose job is gone; the jobs' uniqueness makes it a
// no-op for those that have one. It returns how many it asked for.
func (e *Erasure) Sweep(ctx context.Context) (int, error) {
	var projects, orgs []uuid.UUID
	if err := e.s.DB.NewRaw(`SELECT p.id FROM projects p WHERE p.deleted_at IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM organization_erasures o WHERE o.org_id = p.org_id)`).Scan(ctx, &projects); err != nil {
		return 0, fmt.Errorf("erasure: sweep projects: %w", err)
	}
	if err := e.s.DB.NewRaw(`SELECT org_id FROM organization_erasures`).Scan(ctx, &orgs); err != nil {
		return 0, fmt.Errorf("erasure: sweep organizations: %w", err)
	}
	if len(projects)+len(orgs) == 0 {
		return 0, nil
	}
	err := e.s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, id := range projects {
			if err := e.s.insertJob(ctx, tx, EraseProjectArgs{ProjectID: id}); err != nil {
				return err
			}
		}
		for _, id := range orgs {
			if err := e.s.insertJob(ctx, tx, EraseOrganizationArgs{OrgID: id}); err != nil {
				return err
			}
		}
		return nil
	})
	return len(projects) + len(orgs), err
}
