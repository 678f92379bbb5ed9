package run

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"

	"github.com/google/uuid"

	"anvil/domain"
)

// Artifact is a file a pipeline step kept (docs/pipelines.md,
// "Artifacts"). The bytes live in Postgres: the web process that serves
// them may run on another machine than the worker that made them.
type Artifact struct {
	Step   string `json:"step"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// SaveArtifact stores one file of a run; a path kept twice (two steps, or
// a step of each combination) keeps the last.
func (l *Logs) SaveArtifact(ctx context.Context, runID uuid.UUID, step, path string, body []byte) error {
	sum := sha256.Sum256(body)
	_, err := l.s.DB.NewRaw(`INSERT INTO run_artifacts (run_id, path, step, size, sha256, body) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, path) DO UPDATE SET step = EXCLUDED.step, size = EXCLUDED.size, sha256 = EXCLUDED.sha256,
		body = EXCLUDED.body, created_at = now()`, runID, path, step, len(body), hex.EncodeToString(sum[:]), body).Exec(ctx)
	return err
}

// Artifacts lists a run's kept files (the run read by the caller already).
func (l *Logs) Artifacts(ctx context.Context, runID uuid.UUID) ([]Artifact, error) {
	out := []Artifact{}
	err := l.s.DB.NewRaw(`SELECT step, path, size, sha256 FROM run_artifacts WHERE run_id = ? ORDER BY path`, runID).Scan(ctx, &out)
	return out, err
}

// ArtifactBody returns one kept file of a run of the organisation.
func (l *Logs) ArtifactBody(ctx context.Context, orgID, runID uuid.UUID, path string) (Artifact, []byte, error) {
	var row struct {
		Artifact
		Body []byte `bun:"body"`
	}
	err := l.s.DB.NewRaw(`SELECT a.step, a.path, a.size, a.sha256, a.body FROM run_artifacts a
		JOIN project_runs r ON r.id = a.run_id JOIN `+domain.LiveProjects+` p ON p.id = r.project_id
		WHERE a.run_id = ? AND r.org_id = ? AND a.path = ?`, runID, orgID, path).Scan(ctx, &row)
	if errors.Is(err, sql.ErrNoRows) {
		return Artifact{}, nil, domain.NotFound("artifact")
	}
	return row.Artifact, row.Body, err
}
