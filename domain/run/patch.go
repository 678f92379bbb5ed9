package run

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/mask"
)

// MaxPatchBytes bounds a kept repair patch; a longer one is cut (and says so).
const MaxPatchBytes = 1 << 20

// Patch is a repair run's change as a unified diff.
type Patch struct {
	Text      string
	Truncated bool
	// Ready: the run passed with this patch as its outcome (no forge to
	// propose it to): a person downloads or applies it.
	Ready bool
}

// PatchReadyWords is how the run list, the run page and the incident say
// a ready patch.
const PatchReadyWords = "patch ready — download or apply"

// MarkPatchReady records that the kept patch is the run's outcome.
func (w *LogWriter) MarkPatchReady(ctx context.Context) error {
	if _, err := w.l.s.DB.NewRaw(`UPDATE run_patches SET ready = true WHERE run_id = ?`, w.run.ID).Exec(ctx); err != nil {
		return fmt.Errorf("mark the patch of run %s ready: %w", w.run.ID, err)
	}
	return nil
}

// ReadyPatches tells which of runIDs passed with a ready patch.
func (l *Logs) ReadyPatches(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	if len(runIDs) == 0 {
		return out, nil
	}
	var ids []uuid.UUID
	if err := l.s.DB.NewRaw(`SELECT run_id FROM run_patches WHERE ready AND run_id = ANY(?)`, pgdialect.Array(runIDs)).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("ready patches: %w", err)
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// SavePatch keeps the repair run's change (a unified diff of its working
// tree against the checked-out commit) before anything is pushed, masked
// with the run's secrets as its log is: the run page shows it and offers
// it for download whatever became of the push or the pull request.
func (w *LogWriter) SavePatch(ctx context.Context, diff string) error {
	w.mu.Lock()
	values := w.values
	w.mu.Unlock()
	if len(values) > 0 {
		m := mask.New(values)
		diff = string(m.Write([]byte(diff))) + string(m.Flush())
	}
	truncated := false
	if len(diff) > MaxPatchBytes {
		diff, truncated = diff[:MaxPatchBytes]+"\n[anvil] the patch was cut here: it exceeded 1 MiB\n", true
	}
	_, err := w.l.s.DB.NewRaw(`INSERT INTO run_patches (run_id, patch, truncated) VALUES (?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET patch = EXCLUDED.patch, truncated = EXCLUDED.truncated, created_at = now()`,
		w.run.ID, diff, truncated).Exec(ctx)
	if err != nil {
		return fmt.Errorf("keep the patch of run %s: %w", w.run.ID, err)
	}
	return nil
}

// Patch reads a run's kept patch; nil when it has none.
func (l *Logs) Patch(ctx context.Context, orgID, runID uuid.UUID) (*Patch, error) {
	var p Patch
	err := l.s.DB.NewRaw(`SELECT p.patch, p.truncated, p.ready FROM run_patches p JOIN project_runs r ON r.id = p.run_id
		WHERE p.run_id = ? AND r.org_id = ?`, runID, orgID).Scan(ctx, &p.Text, &p.Truncated, &p.Ready)
	if dbutil.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the patch of run %s: %w", runID, err)
	}
	return &p, nil
}
