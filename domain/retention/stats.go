package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
)

// LastCleanup is what the last clean-up of a scope removed.
type LastCleanup struct {
	StartedAt  time.Time  `json:"started_at" bun:"started_at"`
	FinishedAt *time.Time `json:"finished_at" bun:"finished_at"`
	Removed
}

// ProjectStats is what a project stores and what its last clean-up removed.
type ProjectStats struct {
	ProjectID   uuid.UUID    `json:"project_id"`
	Slug        string       `json:"slug"`
	Name        string       `json:"name"`
	Events      int64        `json:"events"`
	OldestEvent *time.Time   `json:"oldest_event"`
	LogBytes    int64        `json:"log_bytes"`
	OldestLog   *time.Time   `json:"oldest_log"`
	LastCleanup *LastCleanup `json:"last_cleanup"`
	Overrides   Document     `json:"overrides"`
	Effective   Document     `json:"effective"`
	Policy      Policy       `json:"-"`
}

// Stats reads every project of the principal's organisation: stored events
// and log bytes (as stored, compressed), the oldest of each, the last
// clean-up, the overrides and the policy in force. The organisation's own
// last clean-up (its audit log) comes second.
func (r *Service) Stats(ctx context.Context, p *domain.Principal) ([]ProjectStats, *LastCleanup, error) {
	var projects []struct {
		ID   uuid.UUID `bun:"id"`
		Slug string    `bun:"slug"`
		Name string    `bun:"name"`
	}
	if err := r.s.DB.NewRaw(`SELECT id, slug, name FROM `+domain.LiveProjects+` p WHERE org_id = ? ORDER BY name, slug`, p.OrgID).Scan(ctx, &projects); err != nil {
		return nil, nil, fmt.Errorf("retention: projects: %w", err)
	}
	out := make([]ProjectStats, 0, len(projects))
	for _, pr := range projects {
		st := ProjectStats{ProjectID: pr.ID, Slug: pr.Slug, Name: pr.Name}
		// Through the incidents: feed_events is indexed by incident.
		if err := r.s.DB.NewRaw(`SELECT count(*), min(e.received_at) FROM incidents i JOIN feed_events e ON e.incident_id = i.id
			WHERE i.project_id = ?`, pr.ID).Scan(ctx, &st.Events, &st.OldestEvent); err != nil {
			return nil, nil, fmt.Errorf("retention: stored events: %w", err)
		}
		if err := r.s.DB.NewRaw(`SELECT COALESCE(sum(pg_column_size(c.body)), 0), min(c.created_at) FROM project_runs r
			JOIN run_log_chunks c ON c.run_id = r.id WHERE r.project_id = ?`, pr.ID).Scan(ctx, &st.LogBytes, &st.OldestLog); err != nil {
			return nil, nil, fmt.Errorf("retention: stored logs: %w", err)
		}
		var last []LastCleanup
		if err := r.s.DB.NewRaw(`SELECT started_at, finished_at, events, sampled, incidents, log_chunks, log_bytes, audit
			FROM retention_cleanups WHERE project_id = ?`, pr.ID).Scan(ctx, &last); err != nil {
			return nil, nil, fmt.Errorf("retention: last clean-up: %w", err)
		}
		if len(last) > 0 {
			st.LastCleanup = &last[0]
		}
		org, proj, err := r.rows(ctx, r.s.DB, p.OrgID, &pr.ID)
		if err != nil {
			return nil, nil, err
		}
		st.Policy = r.effective(org, proj)
		st.Overrides, st.Effective = overrides(proj), document(st.Policy)
		out = append(out, st)
	}
	var last []LastCleanup
	if err := r.s.DB.NewRaw(`SELECT started_at, finished_at, events, sampled, incidents, log_chunks, log_bytes, audit
		FROM retention_cleanups WHERE org_id = ? AND project_id IS NULL`, p.OrgID).Scan(ctx, &last); err != nil {
		return nil, nil, fmt.Errorf("retention: last clean-up: %w", err)
	}
	if len(last) > 0 {
		return out, &last[0], nil
	}
	return out, nil, nil
}

// SampledAway is how many of an incident's events were sampled away.
func (r *Service) SampledAway(ctx context.Context, incidentID uuid.UUID) (int64, error) {
	var n []int64
	if err := r.s.DB.NewRaw(`SELECT sampled FROM incident_samples WHERE incident_id = ?`, incidentID).Scan(ctx, &n); err != nil {
		return 0, fmt.Errorf("retention: sampled away: %w", err)
	}
	if len(n) == 0 {
		return 0, nil
	}
	return n[0], nil
}
