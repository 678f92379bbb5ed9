package run

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// IndexedRun is a row of the read model.
type IndexedRun struct {
	bun.BaseModel `bun:"table:run_index"`
	RunID         uuid.UUID  `bun:"run_id,pk,type:uuid" json:"run_id"`
	ProjectID     uuid.UUID  `bun:"project_id,type:uuid" json:"project_id"`
	OrgID         uuid.UUID  `bun:"org_id,type:uuid" json:"-"`
	Status        string     `bun:"status" json:"status"`
	Trigger       string     `bun:"trigger" json:"trigger"`
	Branch        string     `bun:"branch" json:"branch"`
	CommitSHA     *string    `bun:"commit_sha" json:"commit_sha"`
	ExitCode      *int       `bun:"exit_code" json:"exit_code"`
	FailureReason *string    `bun:"failure_reason" json:"failure_reason"`
	QueuedAt      time.Time  `bun:"queued_at" json:"queued_at"`
	StartedAt     *time.Time `bun:"started_at" json:"started_at"`
	FinishedAt    *time.Time `bun:"finished_at" json:"finished_at"`
	Number        int64      `bun:"number" json:"number"`
}

// FinishedRuns lists a project's latest finished runs (passed, failed,
// canceled) from the read model. The project page shows its active and
// queued runs from the queue itself; listing them here as well showed them
// twice, with the read model's status a step behind (starting beside the
// active panel's running).
func (q *Queue) FinishedRuns(ctx context.Context, orgID, projectID uuid.UUID, limit int) ([]IndexedRun, error) {
	var out []IndexedRun
	err := q.s.DB.NewSelect().Model(&out).Where("org_id = ? AND project_id = ?", orgID, projectID).
		Where("status IN (?, ?, ?)", StatusPassed, StatusFailed, StatusCanceled).
		Order("queued_at DESC").Limit(int64(limit)).Scan(ctx)
	return out, err
}
