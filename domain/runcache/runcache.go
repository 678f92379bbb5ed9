// Package runcache keeps what the server knows of a project's cache between
// runs (docs/caches.md): the caches themselves are directories on the
// workers (jobs/sandbox, cache.go); the table run_caches holds, per project,
// its disk use and last use as the last writing run left them, and the
// generation — how many times the cache was cleared — through which a
// clear reaches every worker: each erases a cache of an older generation
// before a run uses it, and the ClearArgs job erases it at once on the
// worker that takes the job.
//
// It imports only the base domain; the table is erased with the project
// (domain/erasure).
package runcache

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/db"
	"anvil/domain"
)

// Status is what the project page and the API show of a project's cache.
type Status struct {
	// Bytes is the cache's disk use after the last run that wrote it (0
	// after a clear, until a run writes it again).
	Bytes int64 `json:"bytes"`
	// UsedAt is when a run last wrote it; nil: never since the last clear.
	UsedAt *time.Time `json:"used_at"`
	// ClearedAt is when it was last cleared; nil: never.
	ClearedAt *time.Time `json:"cleared_at"`
	// Generation counts the clears.
	Generation int64 `json:"generation"`
	// MaxBytes is the bound of every project's cache (ANVIL_RUN_CACHE_MB).
	MaxBytes int64 `json:"max_bytes"`
}

// ClearArgs erases a project's cache on the worker that takes the job; the
// other workers erase theirs when a run next uses it (its generation is
// older).
type ClearArgs struct {
	ProjectID  uuid.UUID `json:"project_id"`
	Generation int64     `json:"generation"`
}

// Kind is the job's name.
func (ClearArgs) Kind() string { return "clear_run_cache" }

// InsertOpts retries a clear that found the cache in use by a run.
func (ClearArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 10} }

// Service reads and clears projects' caches.
type Service struct {
	s *domain.Store
	// MaxBytes is the bound shown with a cache (the workers apply it).
	MaxBytes int64
}

// New builds the service.
func New(s *domain.Store, maxBytes int64) *Service { return &Service{s: s, MaxBytes: maxBytes} }

const statusSQL = `SELECT COALESCE(c.bytes, 0), c.used_at, c.cleared_at, COALESCE(c.generation, 0)
	FROM ` + domain.LiveProjects + ` p LEFT JOIN run_caches c ON c.project_id = p.id WHERE p.id = ? AND p.org_id = ?`

// Status returns the project's cache (anyone of its organisation).
func (sv *Service) Status(ctx context.Context, pr *domain.Principal, projectID uuid.UUID) (Status, error) {
	if err := domain.RequireRole(pr, domain.RoleViewer); err != nil {
		return Status{}, err
	}
	st := Status{MaxBytes: sv.MaxBytes}
	err := sv.s.DB.NewRaw(statusSQL, projectID, pr.OrgID).Scan(ctx, &st.Bytes, &st.UsedAt, &st.ClearedAt, &st.Generation)
	if db.IsNoRows(err) {
		return Status{}, domain.NotFound("project")
	}
	if err != nil {
		return Status{}, fmt.Errorf("runcache: status of %s: %w", projectID, err)
	}
	return st, nil
}

// Clear empties the project's cache (members and up: whoever may run the
// project may make its next run start cold): the next generation, in the
// project's transaction with its audit entry and the job that erases it.
func (sv *Service) Clear(ctx context.Context, pr *domain.Principal, projectID uuid.UUID) (Status, error) {
	if err := domain.RequireWrite(pr); err != nil {
		return Status{}, err
	}
	now := sv.s.Now().UTC()
	st := Status{MaxBytes: sv.MaxBytes, ClearedAt: &now}
	err := sv.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		if p.OrgID != pr.OrgID {
			return domain.NotFound("project")
		}
		var was int64
		if err := tx.NewRaw(`SELECT COALESCE((SELECT bytes FROM run_caches WHERE project_id = ?), 0)`, p.ID).Scan(ctx, &was); err != nil {
			return fmt.Errorf("runcache: clear: %w", err)
		}
		if err := tx.NewRaw(`INSERT INTO run_caches (project_id, generation, bytes, used_at, cleared_at, cleared_by) VALUES (?, 1, 0, NULL, ?, ?)
			ON CONFLICT (project_id) DO UPDATE SET generation = run_caches.generation + 1, bytes = 0, used_at = NULL,
			cleared_at = EXCLUDED.cleared_at, cleared_by = EXCLUDED.cleared_by RETURNING generation`,
			p.ID, now, pr.UserID).Scan(ctx, &st.Generation); err != nil {
			return fmt.Errorf("runcache: clear: %w", err)
		}
		if err := domain.RecordAudit(ctx, tx, pr, domain.AuditRunCacheCleared, p.Slug,
			map[string]any{"project_id": p.ID.String(), "bytes": was, "generation": st.Generation}); err != nil {
			return err
		}
		return sv.s.InsertJob(ctx, tx, ClearArgs{ProjectID: p.ID, Generation: st.Generation})
	})
	if err != nil {
		return Status{}, err
	}
	return st, nil
}

// Generation returns the project's clear count, for a worker about to give
// a run its cache (no principal: the executor runs what the queue handed it).
func (sv *Service) Generation(ctx context.Context, projectID uuid.UUID) (int64, error) {
	var g int64
	err := sv.s.DB.NewRaw(`SELECT COALESCE((SELECT generation FROM run_caches WHERE project_id = ?), 0)`, projectID).Scan(ctx, &g)
	if err != nil {
		return 0, fmt.Errorf("runcache: generation of %s: %w", projectID, err)
	}
	return g, nil
}

// Used records what a writing run of generation left in the cache; a clear
// since then wins (the figure is of a cache that is being erased).
func (sv *Service) Used(ctx context.Context, projectID uuid.UUID, generation, bytes int64) error {
	now := sv.s.Now().UTC()
	_, err := sv.s.DB.NewRaw(`INSERT INTO run_caches (project_id, generation, bytes, used_at)
		SELECT id, ?, ?, ? FROM `+domain.LiveProjects+` p WHERE p.id = ?
		ON CONFLICT (project_id) DO UPDATE SET bytes = EXCLUDED.bytes, used_at = EXCLUDED.used_at
		WHERE run_caches.generation = EXCLUDED.generation`, generation, bytes, now, projectID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("runcache: record the cache of %s: %w", projectID, err)
	}
	return nil
}
