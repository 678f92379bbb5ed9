// Package erasure deletes projects and organisations (docs/erasure.md): a
// tombstone in one short transaction, then erase jobs that remove the rows
// in bounded batches. It sits above the capability packages whose state a
// deletion stops (run, feed, webhook, card) and is built by the wiring.
package erasure

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

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/feed"
	"anvil/domain/internal/dbutil"
	"anvil/domain/run"
	"anvil/domain/webhook"
)

// Service deletes projects and organisations and purges people
// (docs/erasure.md). A deletion is two steps: a tombstone, one short
// transaction after which the object is gone from every page, list, token
// and webhook; then an erase job that removes its rows in bounded batches,
// each its own short transaction, the object's own row last. Every step
// deletes what is still there, so a job that crashed or timed out finishes
// the work when it runs again.
type Service struct {
	s        *domain.Store
	queue    *run.Queue
	feed     *feed.Feed
	webhooks *webhook.Webhooks
	// Batch is the most rows one transaction of an erase deletes (run log
	// chunks, which are large, a tenth of it).
	Batch int
	// Budget is how long one erase job works before it hands over to its
	// next attempt (a snooze), so that no job holds a worker for long.
	Budget time.Duration
}

// New builds the service.
func New(s *domain.Store, q *run.Queue, f *feed.Feed, w *webhook.Webhooks) *Service {
	return &Service{s: s, queue: q, feed: f, webhooks: w, Batch: 2000, Budget: 30 * time.Second}
}

// Audit kinds written by erasure; AuditProjectDeleted is the tombstone's.
const (
	// AuditProjectErased closes a project's erasure: what was removed.
	AuditProjectErased = "project.erased"
	erasureActor       = "anvil (erasure)"
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

// SweepArgs is the periodic job that inserts the erase job of every
// tombstone that has none (one discarded after its retries, say).
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "erase_sweep" }

// InsertOpts keeps one sweep waiting at a time.
func (SweepArgs) InsertOpts() river.InsertOpts { return eraseInsertOpts() }

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
	return domain.Invalid("confirmation_mismatch", "type the %s's slug %q to confirm its deletion", what, slug)
}

// DeleteProject deletes a project (admins): confirm must be its slug. The
// project is tombstoned at once and erased in the background.
func (e *Service) DeleteProject(ctx context.Context, pr *domain.Principal, id uuid.UUID, confirm string) (*domain.Project, error) {
	if err := domain.RequireRole(pr, domain.RoleAdmin); err != nil {
		return nil, err
	}
	var out *domain.Project
	err := e.s.WithProject(ctx, id, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		if p.OrgID != pr.OrgID {
			return domain.NotFound("project")
		}
		if strings.TrimSpace(confirm) != p.Slug {
			return errConfirmation("project", p.Slug)
		}
		uid := pr.UserID
		if err := e.tombstoneTx(ctx, tx, p, &uid); err != nil {
			return err
		}
		if err := domain.RecordAudit(ctx, tx, pr, domain.AuditProjectDeleted, p.Slug, map[string]any{"project_id": p.ID.String(), "name": p.Name}); err != nil {
			return err
		}
		out = p
		return e.s.InsertJob(ctx, tx, EraseProjectArgs{ProjectID: p.ID})
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
func (e *Service) tombstoneTx(ctx context.Context, tx bun.Tx, p *domain.Project, by *uuid.UUID) error {
	now := e.s.Now()
	p.DeletedAt = &now
	if _, err := tx.NewRaw(`UPDATE projects SET deleted_at = ?, updated_at = ? WHERE id = ?`, now, now, p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("erasure: tombstone %s: %w", p.ID, err)
	}
	if err := e.queue.StopProjectTx(ctx, tx, p, by); err != nil {
		return fmt.Errorf("erasure: %w", err)
	}
	if _, err := tx.NewRaw(`UPDATE feed_connections SET revoked_at = ? WHERE project_id = ? AND revoked_at IS NULL`, now, p.ID).Exec(ctx); err != nil {
		return fmt.Errorf("erasure: revoke connections of %s: %w", p.ID, err)
	}
	// An external producer's token stops; open dashboards re-read their cards.
	return card.TombstoneTx(ctx, tx, p.OrgID, p.ID)
}

// forget drops what this process remembers of a deleted project's tokens
// and webhooks; other processes' copies live a second (feed tokens) or
// are refused under the project's lock (webhooks).
func (e *Service) forget(projectIDs ...uuid.UUID) {
	e.feed.ForgetSenders()
	for _, id := range projectIDs {
		e.webhooks.Forget(id)
	}
}

// DeleteOrganization deletes the principal's organisation (owners):
// confirm must be its slug. In one transaction its projects are
// tombstoned, every member's access ends (sessions, memberships, tokens,
// pending invitations) and the erase job is inserted. The organisation's own
// audit log is erased with it, so the deletion is logged by the server.
func (e *Service) DeleteOrganization(ctx context.Context, pr *domain.Principal, orgID uuid.UUID, confirm string) error {
	if err := domain.RequireRole(pr, domain.RoleOwner); err != nil {
		return err
	}
	if orgID != pr.OrgID {
		return domain.NotFound("organization")
	}
	var ids []uuid.UUID
	var slug string
	err := e.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewRaw(`SELECT slug FROM organizations WHERE id = ? FOR UPDATE`, orgID).Scan(ctx, &slug); err != nil {
			if dbutil.IsNoRows(err) {
				return domain.NotFound("organization")
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
		var projects []*domain.Project
		if err := domain.SelectLiveProjects(tx, &projects).Where("org_id = ?", orgID).OrderExpr("id").For("UPDATE").Scan(ctx); err != nil {
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
		return e.s.InsertJob(ctx, tx, EraseOrganizationArgs{OrgID: orgID})
	})
	if err != nil {
		return err
	}
	e.forget(ids...)
	e.s.Log.Info("organization deleted", "org_id", orgID, "slug", slug, "actor", pr.Email, "projects", len(ids))
	return nil
}

// Report is what one erase pass did.
type Report struct {
	// Done: the object is gone. Otherwise the pass ran out of its budget,
	// or Waiting says a run of it is still stopping; erase again later.
	Done    bool
	Waiting bool
	// Removed counts the rows deleted per table.
	Removed map[string]int64
}

func (r *Report) add(table string, n int64) {
	if n == 0 {
		return
	}
	if r.Removed == nil {
		r.Removed = map[string]int64{}
	}
	r.Removed[table] += n
}

// Total is every row the pass deleted.
func (r Report) Total() int64 {
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
	byCTID("incident_deltas", "project_id"),
	{table: "feed_events", sql: `WITH gone AS (DELETE FROM feed_events e USING (
		SELECT org_id, event_id_key FROM feed_events WHERE project_id = $1 LIMIT $2) d
		WHERE e.org_id = d.org_id AND e.event_id_key = d.event_id_key RETURNING 1) SELECT count(*) FROM gone`},
	{table: "incident_transitions", sql: `WITH gone AS (DELETE FROM incident_transitions WHERE id = ANY(ARRAY(
		SELECT t.id FROM incidents i JOIN incident_transitions t ON t.incident_id = i.id WHERE i.project_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "incident_samples", sql: `WITH gone AS (DELETE FROM incident_samples WHERE incident_id = ANY(ARRAY(
		SELECT s.incident_id FROM incidents i JOIN incident_samples s ON s.incident_id = i.id WHERE i.project_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "incidents", sql: `WITH gone AS (DELETE FROM incidents WHERE id = ANY(ARRAY(
		SELECT id FROM incidents WHERE project_id = $1 LIMIT $2)) RETURNING id),
		jobs AS (DELETE FROM river_job j USING gone WHERE j.state IN ` + pendingJobStates + ` AND j.args->>'incident_id' = gone.id::text)
		SELECT count(*) FROM gone`},
	{table: "run_log_chunks", small: true, sql: `WITH gone AS (DELETE FROM run_log_chunks c USING (
		SELECT l.run_id, l.seq FROM project_runs r JOIN run_log_chunks l ON l.run_id = r.id WHERE r.project_id = $1 LIMIT $2) d
		WHERE c.run_id = d.run_id AND c.seq = d.seq RETURNING 1) SELECT count(*) FROM gone`},
	// A run's pipeline steps and kept files (docs/pipelines.md); artifacts
	// may be large: a tenth of the batch.
	{table: "run_artifacts", small: true, sql: `WITH gone AS (DELETE FROM run_artifacts a USING (
		SELECT x.run_id, x.path FROM project_runs r JOIN run_artifacts x ON x.run_id = r.id WHERE r.project_id = $1 LIMIT $2) d
		WHERE a.run_id = d.run_id AND a.path = d.path RETURNING 1) SELECT count(*) FROM gone`},
	{table: "run_steps", sql: `WITH gone AS (DELETE FROM run_steps s USING (
		SELECT x.run_id, x.idx FROM project_runs r JOIN run_steps x ON x.run_id = r.id WHERE r.project_id = $1 LIMIT $2) d
		WHERE s.run_id = d.run_id AND s.idx = d.idx RETURNING 1) SELECT count(*) FROM gone`},
	// A run's services and the end of their logs (docs/images.md, "Services").
	{table: "run_services", small: true, sql: `WITH gone AS (DELETE FROM run_services s USING (
		SELECT x.run_id, x.workflow, x.name FROM project_runs r JOIN run_services x ON x.run_id = r.id WHERE r.project_id = $1 LIMIT $2) d
		WHERE s.run_id = d.run_id AND s.workflow = d.workflow AND s.name = d.name RETURNING 1) SELECT count(*) FROM gone`},
	{table: "run_connections", sql: `WITH gone AS (DELETE FROM run_connections c USING (
		SELECT x.run_id, x.seq FROM project_runs r JOIN run_connections x ON x.run_id = r.id WHERE r.project_id = $1 LIMIT $2) d
		WHERE c.run_id = d.run_id AND c.seq = d.seq RETURNING 1) SELECT count(*) FROM gone`},
	{table: "run_patches", sql: `WITH gone AS (DELETE FROM run_patches WHERE run_id = ANY(ARRAY(
		SELECT p.run_id FROM project_runs r JOIN run_patches p ON p.run_id = r.id WHERE r.project_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "run_forge_reports", sql: `WITH gone AS (DELETE FROM run_forge_reports WHERE run_id = ANY(ARRAY(
		SELECT f.run_id FROM project_runs r JOIN run_forge_reports f ON f.run_id = r.id WHERE r.project_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "project_runs", sql: `WITH gone AS (DELETE FROM project_runs WHERE id = ANY(ARRAY(
		SELECT id FROM project_runs WHERE project_id = $1 LIMIT $2)) RETURNING id),
		jobs AS (DELETE FROM river_job j USING gone WHERE j.state IN ` + pendingJobStates + ` AND j.args->>'run_id' = gone.id::text)
		SELECT count(*) FROM gone`},
	byCTID("run_index", "project_id"),
	// Releases and the fix chain's ancestry answers (docs/releases.md).
	byCTID("release_ancestry_questions", "project_id"),
	byCTID("release_ancestry", "project_id"),
	byCTID("releases", "project_id"),
	// Cron monitors (docs/monitors.md): runs, states, then the monitors.
	byCTID("monitor_checkins", "project_id"),
	byCTID("monitor_states", "project_id"),
	byCTID("monitors", "project_id"),
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
	// What the project page shows of its cache (docs/caches.md); the
	// directories on the workers go with the erase job (jobs/run_cache.go).
	{table: "run_caches", sql: `WITH gone AS (DELETE FROM run_caches WHERE project_id = $1 AND $2 > 0 RETURNING 1),
		jobs AS (DELETE FROM river_job j WHERE j.kind = 'clear_run_cache' AND j.state IN ` + pendingJobStates + ` AND j.args->>'project_id' = $1::text)
		SELECT count(*) FROM gone`},
	byCTID("alert_rules", "project_id"),
	byCTID("project_cards", "project_id"),
	byCTID("card_changes", "project_id"),
	// Retention's rows of the project (docs/retention.md): its policy, what
	// its last clean-up removed, its daily event counts.
	byCTID("feed_daily_usage", "project_id"),
	byCTID("retention_policies", "project_id"),
	byCTID("retention_cleanups", "project_id"),
	// Source maps (docs/sourcemap.md): files, then their bundles and the
	// contents they named.
	byCTID("sourcemap_files", "project_id"),
	byCTID("sourcemap_bundles", "project_id"),
	byCTID("sourcemap_blobs", "project_id"),
}

// orgSteps erase what an organisation holds beside its projects.
var orgSteps = []eraseStep{
	byCTID("audit_log", "org_id"),
	{table: "alert_deliveries", sql: `WITH gone AS (DELETE FROM alert_deliveries WHERE id = ANY(ARRAY(
		SELECT a.id FROM alert_destinations d JOIN alert_deliveries a ON a.destination_id = d.id WHERE d.org_id = $1 LIMIT $2))
		RETURNING 1) SELECT count(*) FROM gone`},
	{table: "alert_minutes", sql: `WITH gone AS (DELETE FROM alert_minutes m USING (
		SELECT a.destination_id, a.minute FROM alert_destinations d JOIN alert_minutes a ON a.destination_id = d.id WHERE d.org_id = $1 LIMIT $2) x
		WHERE m.destination_id = x.destination_id AND m.minute = x.minute RETURNING 1) SELECT count(*) FROM gone`},
	{table: "alert_destinations", sql: `WITH gone AS (DELETE FROM alert_destinations WHERE id = ANY(ARRAY(
		SELECT id FROM alert_destinations WHERE org_id = $1 LIMIT $2)) RETURNING id),
		jobs AS (DELETE FROM river_job j USING gone WHERE j.state IN ` + pendingJobStates + ` AND j.args->>'destination_id' = gone.id::text)
		SELECT count(*) FROM gone`},
	// The organisation's retention policy and its audit clean-up's figures
	// (its projects' rows went with them).
	byCTID("retention_policies", "org_id"),
	byCTID("retention_cleanups", "org_id"),
	// Chunks sentry-cli sent that no assemble call took (docs/sourcemap.md).
	byCTID("sourcemap_chunks", "org_id"),
	byCTID("invitations", "org_id"),
	byCTID("sessions", "org_id"),
	byCTID("api_tokens", "org_id"),
	byCTID("memberships", "org_id"),
}

// runSteps runs steps for id until each has nothing left or the deadline
// passes; it reports whether every step finished.
func (e *Service) runSteps(ctx context.Context, steps []eraseStep, id uuid.UUID, deadline time.Time, rep *Report) (bool, error) {
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
func (e *Service) EraseProject(ctx context.Context, id uuid.UUID) (Report, error) {
	var rep Report
	var org uuid.UUID
	var slug string
	var deleted *time.Time
	err := e.s.DB.DB.QueryRowContext(ctx, `SELECT org_id, slug, deleted_at FROM `+domain.AllProjects+` WHERE id = $1`, id).Scan(&org, &slug, &deleted)
	if dbutil.IsNoRows(err) {
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
	err = e.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewRaw(`DELETE FROM river_job WHERE state IN `+pendingJobStates+` AND args @> jsonb_build_object('project_id', ?::text)`,
			id.String()).Exec(ctx); err != nil {
			return fmt.Errorf("erasure: jobs of %s: %w", id, err)
		}
		res, err := tx.NewRaw(`DELETE FROM projects WHERE id IN (SELECT id FROM `+domain.DeletedProjects+` p WHERE id = ?)`, id).Exec(ctx)
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
		return domain.RecordAuditIn(ctx, tx, org, nil, erasureActor, AuditProjectErased, slug, detail)
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
func (e *Service) dropJobs(ctx context.Context, key string, id uuid.UUID) error {
	if _, err := e.s.DB.DB.ExecContext(ctx, `DELETE FROM river_job WHERE state IN `+pendingJobStates+` AND args @> jsonb_build_object($1::text, $2::text)`,
		key, id.String()); err != nil {
		return fmt.Errorf("erasure: jobs naming %s: %w", id, err)
	}
	return nil
}

// EraseOrganization is one pass of a deleted organisation's erasure (the
// erase_organization job): each project (tombstoned first if one slipped in
// meanwhile), then the organisation's own rows, then the organisation.
func (e *Service) EraseOrganization(ctx context.Context, orgID uuid.UUID) (Report, error) {
	var rep Report
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
	if err := e.s.DB.NewRaw(`SELECT id FROM `+domain.AllProjects+` WHERE org_id = ? ORDER BY id`, orgID).Scan(ctx, &ids); err != nil {
		return rep, fmt.Errorf("erasure: projects of %s: %w", orgID, err)
	}
	deadline := time.Now().Add(e.Budget)
	for _, id := range ids {
		// A project created while the organisation was being deleted.
		err := e.s.WithProject(ctx, id, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
			return e.tombstoneTx(ctx, tx, p, nil)
		})
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
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
	err = e.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
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
func (e *Service) Sweep(ctx context.Context) (int, error) {
	var projects, orgs []uuid.UUID
	if err := e.s.DB.NewRaw(`SELECT p.id FROM `+domain.DeletedProjects+` p
		WHERE NOT EXISTS (SELECT 1 FROM organization_erasures o WHERE o.org_id = p.org_id)`).Scan(ctx, &projects); err != nil {
		return 0, fmt.Errorf("erasure: sweep projects: %w", err)
	}
	if err := e.s.DB.NewRaw(`SELECT org_id FROM organization_erasures`).Scan(ctx, &orgs); err != nil {
		return 0, fmt.Errorf("erasure: sweep organizations: %w", err)
	}
	if len(projects)+len(orgs) == 0 {
		return 0, nil
	}
	err := e.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		for _, id := range projects {
			if err := e.s.InsertJob(ctx, tx, EraseProjectArgs{ProjectID: id}); err != nil {
				return err
			}
		}
		for _, id := range orgs {
			if err := e.s.InsertJob(ctx, tx, EraseOrganizationArgs{OrgID: id}); err != nil {
				return err
			}
		}
		return nil
	})
	return len(projects) + len(orgs), err
}
