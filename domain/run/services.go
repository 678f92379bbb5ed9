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

// Service statuses (docs/images.md, "Services"): starting from its pull
// until its ports accept and its healthcheck passes (ready), failed when it
// never got ready or ended by itself while its workflow ran, stopped when
// the pod stopped it with its workflow, canceled when the run stopped
// before it got ready.
const (
	ServiceStarting = "starting"
	ServiceReady    = "ready"
	ServiceFailed   = "failed"
	ServiceStopped  = "stopped"
	ServiceCanceled = "canceled"
)

// MaxServiceLog bounds what is kept of one service's log: its last 64 KiB
// (docs/images.md, "Services"); the run's own log keeps a shorter end.
const MaxServiceLog = 64 << 10

// Service is one service of a run's workflow, as stored (table
// run_services) and as the API shows it (its log apart).
type Service struct {
	bun.BaseModel `bun:"table:run_services" json:"-"`
	RunID         uuid.UUID  `bun:"run_id,pk" json:"-"`
	Workflow      string     `bun:"workflow,pk" json:"workflow"`
	Name          string     `bun:"name,pk" json:"name"`
	Seq           int        `bun:"seq" json:"-"`
	Image         string     `bun:"image" json:"image"`
	ImageDigest   string     `bun:"image_digest" json:"image_digest"`
	Ports         []int      `bun:"ports,array" json:"ports"`
	Status        string     `bun:"status" json:"status"`
	Reason        string     `bun:"reason" json:"reason"`
	StartedAt     *time.Time `bun:"started_at" json:"started_at"`
	ReadyAt       *time.Time `bun:"ready_at" json:"ready_at"`
	FinishedAt    *time.Time `bun:"finished_at" json:"finished_at"`
	// Log is the end of the service's output, masked; LogBytes how much it
	// wrote in all.
	Log      string `bun:"log" json:"-"`
	LogBytes int64  `bun:"log_bytes" json:"-"`
}

// StartService records a service its workflow's pod is starting (again,
// for a run's later attempt: the row is replaced), and tells the run's page.
func (l *Logs) StartService(ctx context.Context, r *Run, s *Service) error {
	s.RunID = r.ID
	if s.Ports == nil {
		s.Ports = []int{}
	}
	s.Log = clipLog(s.Log)
	return l.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewRaw(`SELECT count(*) FROM run_services WHERE run_id = ? AND NOT (workflow = ? AND name = ?)`,
			r.ID, s.Workflow, s.Name).Scan(ctx, &s.Seq); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(s).On("CONFLICT (run_id, workflow, name) DO UPDATE").
			Set("seq = EXCLUDED.seq, image = EXCLUDED.image, image_digest = EXCLUDED.image_digest, ports = EXCLUDED.ports").
			Set("status = EXCLUDED.status, reason = EXCLUDED.reason, log = EXCLUDED.log, log_bytes = EXCLUDED.log_bytes").
			Set("started_at = EXCLUDED.started_at, ready_at = EXCLUDED.ready_at, finished_at = EXCLUDED.finished_at").
			Exec(ctx); err != nil {
			return err
		}
		return notifyRun(ctx, tx, r)
	})
}

// UpdateService stores a service's status, reason, digest, times and log,
// and tells the run's page.
func (l *Logs) UpdateService(ctx context.Context, r *Run, s *Service) error {
	s.Log = clipLog(s.Log)
	return l.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewUpdate().Model(s).Column("status", "reason", "image_digest", "ready_at", "finished_at", "log", "log_bytes").
			Where("run_id = ? AND workflow = ? AND name = ?", r.ID, s.Workflow, s.Name).Exec(ctx); err != nil {
			return err
		}
		return notifyRun(ctx, tx, r)
	})
}

// ServiceLog stores the end of a running service's log alone and tells
// the run's page with a "service" event: only its Services section fetches
// itself again, not the header and steps a "run" event refreshes.
func (l *Logs) ServiceLog(ctx context.Context, r *Run, s *Service) error {
	s.Log = clipLog(s.Log)
	return l.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewUpdate().Model(s).Column("log", "log_bytes").
			Where("run_id = ? AND workflow = ? AND name = ?", r.ID, s.Workflow, s.Name).Exec(ctx); err != nil {
			return err
		}
		ev, _ := json.Marshal(domain.LiveEvent{Kind: "service", OrgID: r.OrgID, ProjectID: r.ProjectID, RunID: r.ID})
		return domain.Notify(ctx, tx, string(ev))
	})
}

// clipLog keeps the last MaxServiceLog bytes of a log, from a line's start
// when it cuts (a cut line would read as a different one).
func clipLog(s string) string {
	if len(s) <= MaxServiceLog {
		return s
	}
	s = s[len(s)-MaxServiceLog:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	return strings.ToValidUTF8(s, "")
}

// ServicesOf returns the services of a run the caller has already read
// (RunGet checks the organisation), in the order they started, with their
// logs.
func (l *Logs) ServicesOf(ctx context.Context, runID uuid.UUID) ([]Service, error) {
	out := []Service{}
	err := l.s.DB.NewSelect().Model(&out).Where("run_id = ?", runID).Order("seq", "workflow", "name").Scan(ctx)
	return out, err
}

// ServiceText returns the kept log of the service named name of a run of
// the organisation; workflow picks one when two workflows of the run have
// a service of that name ("" otherwise).
func (l *Logs) ServiceText(ctx context.Context, orgID, runID uuid.UUID, name, workflow string, byWorkflow bool) (string, error) {
	var ok bool
	if err := l.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM project_runs r JOIN `+domain.LiveProjects+` p ON p.id = r.project_id
		WHERE r.id = ? AND r.org_id = ?)`, runID, orgID).Scan(ctx, &ok); err != nil {
		return "", err
	}
	if !ok {
		return "", domain.NotFound("run")
	}
	var rows []Service
	q := l.s.DB.NewSelect().Model(&rows).Column("workflow", "log").Where("run_id = ? AND name = ?", runID, name)
	if byWorkflow {
		q = q.Where("workflow = ?", workflow)
	}
	if err := q.Order("workflow").Scan(ctx); err != nil {
		return "", err
	}
	switch {
	case len(rows) == 0 && byWorkflow:
		return "", domain.NewError(domain.ErrNotFound, "service_not_found", "this run has no service %s in workflow %q", domain.ClipString(name, 64), domain.ClipString(workflow, 64))
	case len(rows) == 0:
		return "", domain.NewError(domain.ErrNotFound, "service_not_found", "this run has no service named %s", domain.ClipString(name, 64))
	case len(rows) > 1:
		ws := make([]string, len(rows))
		for i, r := range rows {
			ws[i] = r.Workflow
		}
		return "", domain.Invalid("service_ambiguous", "workflows %s each have a service named %s: add &workflow=NAME", strings.Join(ws, ", "), domain.ClipString(name, 64))
	}
	return rows[0].Log, nil
}
