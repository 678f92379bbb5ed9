package retention

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
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
)

// CleanupArgs is the periodic clean-up. Unique while it waits or runs, so a
// slow clean-up is never joined by a second one (docs/retention.md, "How
// clean-up works").
type CleanupArgs struct{}

// Kind implements river.JobArgs.
func (CleanupArgs) Kind() string { return "retention_cleanup" }

// InsertOpts keeps one clean-up at a time: a periodic insert while one is
// queued or running is skipped.
func (CleanupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
		rivertype.JobStateRetryable, rivertype.JobStateScheduled}}}
}

// Removed is what a clean-up deleted.
type Removed struct {
	Events    int64 `json:"events" bun:"events"`
	Sampled   int64 `json:"sampled" bun:"sampled"`
	Incidents int64 `json:"incidents" bun:"incidents"`
	LogChunks int64 `json:"log_chunks" bun:"log_chunks"`
	LogBytes  int64 `json:"log_bytes" bun:"log_bytes"`
	Audit     int64 `json:"audit" bun:"audit"`
}

func (r *Removed) add(o Removed) {
	r.Events += o.Events
	r.Sampled += o.Sampled
	r.Incidents += o.Incidents
	r.LogChunks += o.LogChunks
	r.LogBytes += o.LogBytes
	r.Audit += o.Audit
}

// Zero reports whether nothing was removed.
func (r Removed) Zero() bool { return r == Removed{} }

// String is the operator's one-line summary.
func (r Removed) String() string {
	return fmt.Sprintf("%d events past their age, %d events sampled away, %d incidents, %d log chunks (%d bytes), %d audit entries",
		r.Events, r.Sampled, r.Incidents, r.LogChunks, r.LogBytes, r.Audit)
}

// ScopeReport is what one clean-up removed from a project (or, with no
// project, from an organisation's audit log).
type ScopeReport struct {
	OrgSlug     string `json:"org"`
	ProjectSlug string `json:"project,omitempty"`
	Removed
}

// Report is one whole clean-up.
type Report struct {
	Started  time.Time     `json:"started_at"`
	Finished time.Time     `json:"finished_at"`
	Scopes   []ScopeReport `json:"scopes"`
	Total    Removed       `json:"total"`
}

// Cleanup enforces every organisation's policy once. Each batch deletes at
// most BatchSize rows in a statement of its own (one short transaction)
// that also adds what it removed to the scope's row of retention_cleanups;
// nothing is locked but the rows deleted, so neither the ingest nor the
// queue waits. Every decision is derived from the data (ages, counts,
// statuses), so a clean-up stopped anywhere — a crash, a timeout, ctx —
// is finished by the next one.
func (r *Service) Cleanup(ctx context.Context) (Report, error) {
	now := r.now()
	rep := Report{Started: now}
	var orgs []struct {
		ID   uuid.UUID `bun:"id"`
		Slug string    `bun:"slug"`
	}
	// An organisation or project being deleted is left to its erasure
	// (docs/erasure.md), which removes all of it.
	if err := r.s.DB.NewRaw(`SELECT id, slug FROM organizations o
		WHERE NOT EXISTS (SELECT 1 FROM organization_erasures e WHERE e.org_id = o.id) ORDER BY id`).Scan(ctx, &orgs); err != nil {
		return rep, fmt.Errorf("retention: organisations: %w", err)
	}
	for _, o := range orgs {
		org, _, err := r.rows(ctx, r.s.DB, o.ID, nil)
		if err != nil {
			return rep, err
		}
		pol := r.effective(org, nil)
		rm, err := r.cleanAudit(ctx, o.ID, pol, now)
		rep.Total.add(rm)
		if !rm.Zero() {
			rep.Scopes = append(rep.Scopes, ScopeReport{OrgSlug: o.Slug, Removed: rm})
		}
		if err != nil {
			return rep, err
		}
		var projects []struct {
			ID   uuid.UUID `bun:"id"`
			Slug string    `bun:"slug"`
		}
		if err := r.s.DB.NewRaw(`SELECT id, slug FROM `+domain.LiveProjects+` p WHERE org_id = ? ORDER BY id`, o.ID).Scan(ctx, &projects); err != nil {
			return rep, fmt.Errorf("retention: projects: %w", err)
		}
		for _, p := range projects {
			_, proj, err := r.rows(ctx, r.s.DB, o.ID, &p.ID)
			if err != nil {
				return rep, err
			}
			rm, err := r.cleanProject(ctx, o.ID, p.ID, r.effective(org, proj), now)
			rep.Total.add(rm)
			if !rm.Zero() {
				rep.Scopes = append(rep.Scopes, ScopeReport{OrgSlug: o.Slug, ProjectSlug: p.Slug, Removed: rm})
			}
			if err != nil {
				return rep, err
			}
		}
	}
	// The budget's daily counts are kept for a month (the Feed page reads today's).
	if _, err := r.s.DB.NewRaw(`DELETE FROM feed_daily_usage WHERE day < ?::date`, now.Add(-31*Day).Format(time.DateOnly)).Exec(ctx); err != nil {
		return rep, fmt.Errorf("retention: daily usage: %w", err)
	}
	rep.Finished = r.now()
	return rep, nil
}

// scope is the row of retention_cleanups a clean-up counts in.
type scope struct {
	orgID     uuid.UUID
	projectID *uuid.UUID
}

func (sc scope) where() (string, []any) {
	if sc.projectID == nil {
		return "org_id = ? AND project_id IS NULL", []any{sc.orgID}
	}
	return "project_id = ?", []any{*sc.projectID}
}

// begin opens the scope's record: a fresh one after a finished clean-up,
// the same one (its figures kept) after an unfinished one. It returns the
// record's sampling mark.
func (r *Service) begin(ctx context.Context, sc scope, now time.Time) (*time.Time, error) {
	conflict := "(project_id) WHERE project_id IS NOT NULL"
	if sc.projectID == nil {
		conflict = "(org_id) WHERE project_id IS NULL"
	}
	if _, err := r.s.DB.NewRaw(`INSERT INTO retention_cleanups (org_id, project_id, started_at) VALUES (?, ?, ?)
		ON CONFLICT `+conflict+` DO UPDATE SET started_at = EXCLUDED.started_at, finished_at = NULL,
			events = 0, sampled = 0, incidents = 0, log_chunks = 0, log_bytes = 0, audit = 0
		WHERE retention_cleanups.finished_at IS NOT NULL`, sc.orgID, sc.projectID, now).Exec(ctx); err != nil {
		return nil, fmt.Errorf("retention: begin: %w", err)
	}
	w, args := sc.where()
	var mark []*time.Time
	if err := r.s.DB.NewRaw(`SELECT sampled_until FROM retention_cleanups WHERE `+w, args...).Scan(ctx, &mark); err != nil {
		return nil, fmt.Errorf("retention: begin: %w", err)
	}
	if len(mark) == 0 {
		return nil, nil
	}
	return mark[0], nil
}

// finish closes the scope's record and returns what it holds. A project's
// clean-up moves its sampling mark to sampledUntil only if the policy it
// sampled by (used) is still the one in force: a PUT of the policy while
// it worked has reset the mark so that the new rule reaches every incident
// again, and writing the mark now would undo that reset.
// The policy is re-read under the organisation's row lock (FOR SHARE), which
// every policy PUT takes first (lockOrg), so the two cannot interleave: a
// PUT either committed before the re-read (the mark stays reset) or waits
// for this statement and resets the mark after it.
func (r *Service) finish(ctx context.Context, sc scope, sampledUntil *time.Time, used *Policy) (Removed, error) {
	w, args := sc.where()
	var rm Removed
	err := r.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if sc.projectID != nil && used != nil {
			if _, err := tx.NewRaw(`SELECT 1 FROM organizations WHERE id = ? FOR SHARE`, sc.orgID).Exec(ctx); err != nil {
				return err
			}
			org, proj, err := r.rows(ctx, tx, sc.orgID, sc.projectID)
			if err != nil {
				return err
			}
			if r.effective(org, proj) != *used {
				sampledUntil = nil
			}
			if r.beforeFinish != nil {
				r.beforeFinish()
			}
		}
		return tx.NewRaw(`UPDATE retention_cleanups SET finished_at = ?, sampled_until = COALESCE(?, sampled_until) WHERE `+w+`
			RETURNING events, sampled, incidents, log_chunks, log_bytes, audit`, append([]any{r.now(), sampledUntil}, args...)...).Scan(ctx, &rm)
	})
	if err != nil {
		return rm, fmt.Errorf("retention: finish: %w", err)
	}
	return rm, nil
}

// limitArg stands, in a batch's arguments, for the batch size.
type limitArg struct{}

// batch runs one deleting statement: ctes are common table expressions of
// which one, "gone", deletes and RETURNs a row per deleted row (with a
// column b of bytes when bytes is true); the same statement adds the count
// to column of the scope's record, so the record and the deletion commit
// together. It returns how many rows were deleted.
func (r *Service) batch(ctx context.Context, sc scope, column, ctes string, args []any, bytes bool) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	w, wargs := sc.where()
	set := column + " = " + column + " + n.c"
	agg := "count(*) AS c"
	if bytes {
		set += ", log_bytes = log_bytes + n.b"
		agg += ", COALESCE(sum(b), 0) AS b"
	}
	q := `WITH ` + ctes + `, n AS (SELECT ` + agg + ` FROM gone)
		UPDATE retention_cleanups SET ` + set + ` FROM n WHERE ` + w + ` RETURNING n.c`
	all := make([]any, 0, len(args)+len(wargs))
	for _, a := range args {
		if _, ok := a.(limitArg); ok {
			a = r.BatchSize
		}
		all = append(all, a)
	}
	var n int
	began := time.Now()
	if err := r.s.DB.NewRaw(q, append(all, wargs...)...).Scan(ctx, &n); err != nil {
		return 0, err
	}
	if r.afterBatch != nil {
		r.afterBatch()
	}
	if rest := restAfter(time.Since(began), r.Share); n > 0 && rest > 0 {
		t := time.NewTimer(rest)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return n, nil
}

// restAfter is the rest after a batch that took d, for the clean-up to
// spend share of its time deleting (docs/retention.md, "Pacing").
func restAfter(d time.Duration, share float64) time.Duration {
	if share <= 0 || share >= 1 {
		return 0
	}
	return time.Duration(float64(d) * (1 - share) / share)
}

// drain repeats a batch until it deletes less than a whole one.
func (r *Service) drain(ctx context.Context, sc scope, column, ctes string, args []any, bytes bool) error {
	for {
		n, err := r.batch(ctx, sc, column, ctes, args, bytes)
		if err != nil {
			return err
		}
		if n < r.BatchSize {
			return nil
		}
	}
}

// cleanAudit drops the organisation's audit entries past their age.
func (r *Service) cleanAudit(ctx context.Context, orgID uuid.UUID, pol Policy, now time.Time) (Removed, error) {
	sc := scope{orgID: orgID}
	if _, err := r.begin(ctx, sc, now); err != nil {
		return Removed{}, err
	}
	err := r.drain(ctx, sc, "audit", `gone AS (DELETE FROM audit_log WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM audit_log WHERE org_id = ? AND at < ? LIMIT ?)) RETURNING 1)`, []any{orgID, now.Add(-pol.Audit), limitArg{}}, false)
	if err != nil {
		return Removed{}, fmt.Errorf("retention: audit: %w", err)
	}
	return r.finish(ctx, sc, nil, nil)
}

// incidentChunk is how many incidents one event statement looks at.
const incidentChunk = 200

// cleanProject applies a project's policy: events past their age, closed
// or ignored incidents left alone past theirs (with their events), the
// per-incident samples, then run logs.
func (r *Service) cleanProject(ctx context.Context, orgID, projectID uuid.UUID, pol Policy, now time.Time) (Removed, error) {
	sc := scope{orgID: orgID, projectID: &projectID}
	mark, err := r.begin(ctx, sc, now)
	if err != nil {
		return Removed{}, err
	}
	if err := r.cleanEvents(ctx, sc, now.Add(-pol.Events)); err != nil {
		return Removed{}, fmt.Errorf("retention: events: %w", err)
	}
	if err := r.cleanCheckIns(ctx, sc, now.Add(-pol.Events)); err != nil {
		return Removed{}, fmt.Errorf("retention: check-ins: %w", err)
	}
	if err := r.cleanIncidents(ctx, sc, now.Add(-pol.Incidents)); err != nil {
		return Removed{}, fmt.Errorf("retention: incidents: %w", err)
	}
	bound := now.Add(-r.SampleGrace)
	if err := r.sample(ctx, sc, pol, mark, bound); err != nil {
		return Removed{}, fmt.Errorf("retention: samples: %w", err)
	}
	if err := r.cleanLogs(ctx, sc, pol, now.Add(-pol.Logs)); err != nil {
		return Removed{}, fmt.Errorf("retention: logs: %w", err)
	}
	if r.ExpireArtifacts != nil {
		if err := r.ExpireArtifacts(ctx, projectID, now.Add(-pol.Events)); err != nil {
			return Removed{}, fmt.Errorf("retention: source maps: %w", err)
		}
	}
	if r.ExpireReleases != nil {
		if err := r.ExpireReleases(ctx, projectID, now.Add(-pol.Events)); err != nil {
			return Removed{}, fmt.Errorf("retention: releases: %w", err)
		}
	}
	return r.finish(ctx, sc, &bound, &pol)
}

// incidents walks a project's incidents matching cond in chunks, in id
// order (feed_events has no index by project: the incident index
// (incident_id, received_at) finds an incident's old events instead).
func (r *Service) incidents(ctx context.Context, projectID uuid.UUID, cond string, args []any, fn func([]uuid.UUID) error) error {
	after := uuid.Nil
	for {
		var ids []uuid.UUID
		q := `SELECT id FROM incidents WHERE project_id = ? AND id > ?` + cond + ` ORDER BY id LIMIT ?`
		if err := r.s.DB.NewRaw(q, append(append([]any{projectID, after}, args...), incidentChunk)...).Scan(ctx, &ids); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if err := fn(ids); err != nil {
			return err
		}
		if len(ids) < incidentChunk {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

const deleteOldEvents = `gone AS (DELETE FROM feed_events WHERE ctid = ANY(ARRAY(
	SELECT ctid FROM feed_events WHERE incident_id = ANY(?::uuid[]) AND received_at < ? LIMIT ?)) RETURNING 1)`

// cleanEvents deletes the project's events received before cutoff.
func (r *Service) cleanEvents(ctx context.Context, sc scope, cutoff time.Time) error {
	return r.incidents(ctx, *sc.projectID, "", nil, func(ids []uuid.UUID) error {
		return r.drain(ctx, sc, "events", deleteOldEvents, []any{pgArray(ids), cutoff, limitArg{}}, false)
	})
}

// cleanCheckIns deletes the project's cron-monitor runs received before
// cutoff — a monitor's check-ins age like events and count among them
// (docs/monitors.md, "Retention and erasure") —, never one still in
// progress: the sweep has yet to judge it.
func (r *Service) cleanCheckIns(ctx context.Context, sc scope, cutoff time.Time) error {
	return r.drain(ctx, sc, "events", `gone AS (DELETE FROM monitor_checkins WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM monitor_checkins WHERE project_id = ? AND received_at < ? AND status <> 'in_progress' LIMIT ?)) RETURNING 1)`,
		[]any{*sc.projectID, cutoff, limitArg{}}, false)
}

// cleanIncidents deletes closed and ignored incidents without an event
// since cutoff: their events first, in batches, then the incidents (their
// transitions and sample counts follow by foreign key). The delete checks
// status and last_seen again, so an incident an event reopened or touched
// meanwhile stays.
func (r *Service) cleanIncidents(ctx context.Context, sc scope, cutoff time.Time) error {
	const cond = ` AND status IN ('CLOSED', 'IGNORED') AND last_seen < ?`
	return r.incidents(ctx, *sc.projectID, cond, []any{cutoff}, func(ids []uuid.UUID) error {
		if err := r.drain(ctx, sc, "events", `gone AS (DELETE FROM feed_events WHERE ctid = ANY(ARRAY(
			SELECT e.ctid FROM feed_events e JOIN incidents i ON i.id = e.incident_id
			WHERE e.incident_id = ANY(?::uuid[]) AND i.status IN ('CLOSED', 'IGNORED') AND i.last_seen < ? LIMIT ?)) RETURNING 1)`,
			[]any{pgArray(ids), cutoff, limitArg{}}, false); err != nil {
			return err
		}
		_, err := r.batch(ctx, sc, "incidents", `gone AS (DELETE FROM incidents WHERE id = ANY(?::uuid[])`+cond+` RETURNING 1)`,
			[]any{pgArray(ids), cutoff}, false)
		return err
	})
}

// sample keeps, of each incident with more stored events than first+last,
// its first and its most recent events and deletes the others that are
// older than bound (the grace). Only incidents with an event since the
// last finished sampling's bound (mark) can have anything to delete.
func (r *Service) sample(ctx context.Context, sc scope, pol Policy, mark *time.Time, bound time.Time) error {
	cond, args := ` AND event_count > ?`, []any{pol.First + pol.Last}
	if mark != nil {
		cond += ` AND last_seen >= ?`
		args = append(args, *mark)
	}
	return r.incidents(ctx, *sc.projectID, cond, args, func(ids []uuid.UUID) error {
		for _, id := range ids {
			err := r.drain(ctx, sc, "sampled", `keep AS (
					(SELECT ctid FROM feed_events WHERE incident_id = ? ORDER BY received_at, event_id_key LIMIT ?)
					UNION ALL
					(SELECT ctid FROM feed_events WHERE incident_id = ? ORDER BY received_at DESC, event_id_key DESC LIMIT ?)),
				gone AS (DELETE FROM feed_events WHERE ctid = ANY(ARRAY(
					SELECT ctid FROM feed_events WHERE incident_id = ? AND received_at < ?
						AND ctid <> ALL(ARRAY(SELECT ctid FROM keep)) LIMIT ?)) RETURNING 1),
				counted AS (INSERT INTO incident_samples AS s (incident_id, sampled)
					SELECT ?, count(*) FROM gone HAVING count(*) > 0
					ON CONFLICT (incident_id) DO UPDATE SET sampled = s.sampled + EXCLUDED.sampled)`,
				[]any{id, pol.First, id, pol.Last, id, bound, limitArg{}, id}, false)
			if isForeignKey(err) {
				continue // the incident went meanwhile, with its events
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// cleanLogs deletes the chunks of finished runs' logs that are both older
// than cutoff and not among the project's last LogRuns runs: whichever of
// the two rules keeps more wins.
func (r *Service) cleanLogs(ctx context.Context, sc scope, pol Policy, cutoff time.Time) error {
	after := int64(-1)
	for {
		var runs []struct {
			ID     uuid.UUID `bun:"id"`
			Number int64     `bun:"number"`
		}
		if err := r.s.DB.NewRaw(`SELECT r.id, r.number FROM project_runs r
			WHERE r.project_id = ? AND r.number > ? AND r.finished_at < ? AND r.state IN ('passed', 'failed', 'canceled')
			  AND r.number <= COALESCE((SELECT number FROM project_runs WHERE project_id = ? ORDER BY number DESC OFFSET ? LIMIT 1), -1)
			  AND EXISTS (SELECT 1 FROM run_log_chunks c WHERE c.run_id = r.id)
			ORDER BY r.number LIMIT ?`, *sc.projectID, after, cutoff, *sc.projectID, pol.LogRuns, incidentChunk).Scan(ctx, &runs); err != nil {
			return err
		}
		if len(runs) == 0 {
			return nil
		}
		ids := make([]uuid.UUID, len(runs))
		for i, ru := range runs {
			ids[i] = ru.ID
		}
		// A run's connections (docs/network.md) go with its log, first:
		// the runs are chosen by the chunks they still have.
		if err := r.dropConnections(ctx, ids); err != nil {
			return err
		}
		// So do the files its steps kept (docs/pipelines.md, "Artifacts").
		if err := r.dropArtifacts(ctx, ids); err != nil {
			return err
		}
		// And the ends of its services' logs (docs/images.md, "Services"):
		// the rows stay, with their status and times, as the steps do.
		if _, err := r.s.DB.NewRaw(`UPDATE run_services SET log = '' WHERE run_id = ANY(?::uuid[]) AND log <> ''`, pgArray(ids)).Exec(ctx); err != nil {
			return err
		}
		if err := r.drain(ctx, sc, "log_chunks", `gone AS (DELETE FROM run_log_chunks WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM run_log_chunks WHERE run_id = ANY(?::uuid[]) LIMIT ?)) RETURNING pg_column_size(body) AS b)`,
			[]any{pgArray(ids), limitArg{}}, true); err != nil {
			return err
		}
		if len(runs) < incidentChunk {
			return nil
		}
		after = runs[len(runs)-1].Number
	}
}

// dropConnections deletes the connection records of runs, in batches.
func (r *Service) dropConnections(ctx context.Context, ids []uuid.UUID) error {
	for {
		res, err := r.s.DB.NewRaw(`DELETE FROM run_connections WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM run_connections WHERE run_id = ANY(?::uuid[]) LIMIT ?))`, pgArray(ids), r.BatchSize).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n < int64(r.BatchSize) {
			return nil
		}
	}
}

// dropArtifacts deletes the kept files of runs, a few at a time (each may
// be large).
func (r *Service) dropArtifacts(ctx context.Context, ids []uuid.UUID) error {
	for {
		res, err := r.s.DB.NewRaw(`DELETE FROM run_artifacts WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM run_artifacts WHERE run_id = ANY(?::uuid[]) LIMIT ?))`, pgArray(ids), max(r.BatchSize/10, 1)).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n < int64(max(r.BatchSize/10, 1)) {
			return nil
		}
	}
}

// pgArray is ids as one Postgres array argument.
func pgArray(ids []uuid.UUID) any { return pgdialect.Array(ids) }

func isForeignKey(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && strings.Contains(err.Error(), "23503")
}
