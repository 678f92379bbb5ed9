package run

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// Step statuses (docs/pipelines.md).
const (
	StepPending  = "pending"
	StepRunning  = "running"
	StepPassed   = "passed"
	StepFailed   = "failed"
	StepSkipped  = "skipped"
	StepCanceled = "canceled"
)

// Step is one step of a run's pipeline, as stored (table run_steps) and as
// the API shows it.
type Step struct {
	bun.BaseModel `bun:"table:run_steps" json:"-"`
	RunID         uuid.UUID         `bun:"run_id,pk" json:"-"`
	Index         int               `bun:"idx,pk" json:"index"`
	Key           string            `bun:"key" json:"key"`
	Name          string            `bun:"name" json:"name"`
	Workflow      string            `bun:"workflow" json:"workflow"`
	Matrix        map[string]string `bun:"matrix,type:jsonb" json:"matrix"`
	Image         string            `bun:"image" json:"image"`
	ImageDigest   string            `bun:"image_digest" json:"image_digest"`
	Status        string            `bun:"status" json:"status"`
	ExitCode      *int              `bun:"exit_code" json:"exit_code"`
	Ignored       bool              `bun:"ignored" json:"ignored"`
	Detached      bool              `bun:"detached" json:"detached"`
	Reason        string            `bun:"reason" json:"reason"`
	Needs         []int             `bun:"needs,array" json:"needs"`
	StartedAt     *time.Time        `bun:"started_at" json:"started_at"`
	FinishedAt    *time.Time        `bun:"finished_at" json:"finished_at"`
}

// Pipeline is what GET /api/private/runs/:id carries of the run's
// pipeline: the file it read (null: the project's command), why it was
// refused (null when it was not), its steps in order and the services its
// workflows' pods started (docs/images.md, "Services"), in the order they
// started.
type Pipeline struct {
	File     *string   `json:"file"`
	Error    *string   `json:"error"`
	Steps    []Step    `json:"steps"`
	Services []Service `json:"services"`
}

// SetPipeline records which file a run read and, for a refused file, why.
func (l *Logs) SetPipeline(ctx context.Context, r *Run, file, refusal string) error {
	_, err := l.s.DB.NewRaw(`UPDATE project_runs SET pipeline_file = NULLIF(?, ''), pipeline_error = NULLIF(?, '') WHERE id = ?`,
		file, refusal, r.ID).Exec(ctx)
	return err
}

// SetSteps stores a run's planned steps (all pending, or skipped with
// their reason), replacing what an earlier attempt stored (its services
// too: this attempt starts its own).
func (l *Logs) SetSteps(ctx context.Context, r *Run, steps []Step) error {
	return l.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewDelete().Model((*Step)(nil)).Where("run_id = ?", r.ID).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewDelete().Model((*Service)(nil)).Where("run_id = ?", r.ID).Exec(ctx); err != nil {
			return err
		}
		if len(steps) == 0 {
			return nil
		}
		for i := range steps {
			steps[i].RunID = r.ID
			if steps[i].Matrix == nil {
				steps[i].Matrix = map[string]string{}
			}
			if steps[i].Needs == nil {
				steps[i].Needs = []int{}
			}
		}
		if _, err := tx.NewInsert().Model(&steps).Exec(ctx); err != nil {
			return err
		}
		return notifyRun(ctx, tx, r)
	})
}

// UpdateStep stores a step's status, exit code, reason and times, and tells
// the run's page.
func (l *Logs) UpdateStep(ctx context.Context, r *Run, s *Step) error {
	return l.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewUpdate().Model(s).Column("status", "exit_code", "ignored", "reason", "image_digest", "started_at", "finished_at").
			Where("run_id = ? AND idx = ?", r.ID, s.Index).Exec(ctx); err != nil {
			return err
		}
		return notifyRun(ctx, tx, r)
	})
}

// notifyRun sends a "run" live event without a status: the run's page
// fetches its header and steps again; the executor's cancel watch ignores
// it (no cancel_requested in it).
func notifyRun(ctx context.Context, tx bun.Tx, r *Run) error {
	ev, _ := json.Marshal(domain.LiveEvent{Kind: "run", OrgID: r.OrgID, ProjectID: r.ProjectID, RunID: r.ID})
	return domain.Notify(ctx, tx, string(ev))
}

// PipelineOf returns the pipeline of a run the caller has already read
// (RunGet checks the organisation).
func (l *Logs) PipelineOf(ctx context.Context, runID uuid.UUID) (Pipeline, error) {
	p := Pipeline{Steps: []Step{}, Services: []Service{}}
	if err := l.s.DB.NewRaw(`SELECT pipeline_file, pipeline_error FROM project_runs WHERE id = ?`, runID).Scan(ctx, &p.File, &p.Error); err != nil {
		return p, err
	}
	if err := l.s.DB.NewSelect().Model(&p.Steps).Where("run_id = ?", runID).Order("idx").Scan(ctx); err != nil {
		return p, err
	}
	// Their logs are read on their own (ServiceText, ServicesOf).
	if err := l.s.DB.NewSelect().Model(&p.Services).ExcludeColumn("log").Where("run_id = ?", runID).Order("seq", "workflow", "name").Scan(ctx); err != nil {
		return p, err
	}
	return p, nil
}

// StepText returns the log of the steps named step (a step's key, or its
// name for every combination of its matrix) of a run of the organisation.
func (l *Logs) StepText(ctx context.Context, orgID, runID uuid.UUID, step string) (string, error) {
	var ok bool
	if err := l.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM project_runs r JOIN `+domain.LiveProjects+` p ON p.id = r.project_id
		WHERE r.id = ? AND r.org_id = ?)`, runID, orgID).Scan(ctx, &ok); err != nil {
		return "", err
	}
	if !ok {
		return "", domain.NotFound("run")
	}
	var idx []int
	if err := l.s.DB.NewRaw(`SELECT idx FROM run_steps WHERE run_id = ? AND (key = ? OR name = ?) ORDER BY idx`, runID, step, step).Scan(ctx, &idx); err != nil {
		return "", err
	}
	if len(idx) == 0 {
		return "", domain.NotFound("step")
	}
	var bodies []string
	if err := l.s.DB.NewRaw(`SELECT body FROM run_log_chunks WHERE run_id = ? AND step = ANY(?::int[]) ORDER BY seq`, runID, pgInts(idx)).Scan(ctx, &bodies); err != nil {
		return "", err
	}
	return strings.Join(bodies, ""), nil
}

func pgInts(v []int) string {
	b, _ := json.Marshal(v)
	return "{" + strings.Trim(string(b), "[]") + "}"
}

// StepLogs returns the logs of some steps of a run, by index (the run read
// by the caller already).
func (l *Logs) StepLogs(ctx context.Context, runID uuid.UUID, idx []int) (map[int]string, error) {
	out := map[int]string{}
	if len(idx) == 0 {
		return out, nil
	}
	var rows []struct {
		Step int    `bun:"step"`
		Body string `bun:"body"`
	}
	if err := l.s.DB.NewRaw(`SELECT step, body FROM run_log_chunks WHERE run_id = ? AND step = ANY(?::int[]) ORDER BY seq`, runID, pgInts(idx)).Scan(ctx, &rows); err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.Step] += r.Body
	}
	return out, nil
}
