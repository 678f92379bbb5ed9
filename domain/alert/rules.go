package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/run"
)

// Rule is one kind of alert of a project: on or off, and to which
// destinations (nil: every destination of the organisation, now and later).
type Rule struct {
	Kind         string      `json:"kind"`
	Enabled      bool        `json:"enabled"`
	Destinations []uuid.UUID `json:"destinations"`
}

// orgRules is one process's copy of an organisation's destinations and
// its projects' rules, read when an alert is caused.
type orgRules struct {
	read  time.Time
	dests []uuid.UUID
	rules map[uuid.UUID]map[string]Rule // project → kind → rule (missing: default)
}

func (a *Service) forget(orgID uuid.UUID) {
	a.mu.Lock()
	delete(a.cache, orgID)
	a.mu.Unlock()
}

// snapshotSQL reads an organisation's destinations and rules as one JSON
// text, so that any connection — a pgx one inside the feed's transaction,
// database/sql elsewhere — reads it alike.
const snapshotSQL = `SELECT json_build_object(
	'dests', COALESCE((SELECT json_agg(id ORDER BY id) FROM alert_destinations WHERE org_id = $1), '[]'),
	'rules', COALESCE((SELECT json_agg(json_build_object('project_id', r.project_id, 'kind', r.kind, 'enabled', r.enabled,
		'destination_ids', r.destination_ids)) FROM alert_rules r JOIN ` + domain.LiveProjects + ` p ON p.id = r.project_id WHERE p.org_id = $1), '[]'))::text`

// rulesOf returns the organisation's destinations and rules, from the
// cache when fresh, else read with read (the caller's transaction). A
// stale copy at worst sends (or skips) an alert within TTL of a change
// made in another process; changes made in this one drop it at once.
func (a *Service) rulesOf(ctx context.Context, read domain.AlertRead, orgID uuid.UUID) (*orgRules, error) {
	a.mu.Lock()
	o := a.cache[orgID]
	a.mu.Unlock()
	if o != nil && time.Since(o.read) < a.TTL {
		return o, nil
	}
	raw, err := read(ctx, snapshotSQL, orgID.String())
	if err != nil {
		return nil, fmt.Errorf("alerts: read destinations and rules: %w", err)
	}
	var snap struct {
		Dests []uuid.UUID `json:"dests"`
		Rules []struct {
			ProjectID uuid.UUID   `json:"project_id"`
			Kind      string      `json:"kind"`
			Enabled   bool        `json:"enabled"`
			Dests     []uuid.UUID `json:"destination_ids"`
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(raw), &snap); err != nil {
		return nil, fmt.Errorf("alerts: decode destinations and rules: %w", err)
	}
	o = &orgRules{read: time.Now(), dests: snap.Dests, rules: map[uuid.UUID]map[string]Rule{}}
	for _, r := range snap.Rules {
		if o.rules[r.ProjectID] == nil {
			o.rules[r.ProjectID] = map[string]Rule{}
		}
		o.rules[r.ProjectID][r.Kind] = Rule{Kind: r.Kind, Enabled: r.Enabled, Destinations: r.Dests}
	}
	a.mu.Lock()
	a.cache[orgID] = o
	a.mu.Unlock()
	return o, nil
}

// poolRead reads on the pool (callers that hold no connection).
func (a *Service) poolRead(ctx context.Context, q string, args ...any) (v string, err error) {
	err = a.s.DB.DB.QueryRowContext(ctx, q, args...).Scan(&v)
	return v, err
}

// rule is a project's rule of kind, the default when none is stored.
func (o *orgRules) rule(projectID uuid.UUID, kind string) Rule {
	if r, ok := o.rules[projectID][kind]; ok {
		return r
	}
	return Rule{Kind: kind, Enabled: true}
}

// to is the destinations a rule sends to.
func (o *orgRules) to(r Rule) []uuid.UUID {
	if !r.Enabled {
		return nil
	}
	if r.Destinations == nil {
		return o.dests
	}
	var out []uuid.UUID
	for _, d := range r.Destinations {
		if slices.Contains(o.dests, d) {
			out = append(out, d)
		}
	}
	return out
}

// Jobs is the base's hook: a delivery job per (cause, destination) its rule
// names. Without destinations it costs one map lookup (after the first read).
func (a *Service) Jobs(ctx context.Context, read domain.AlertRead, causes []domain.AlertCause) ([]river.InsertManyParams, error) {
	var out []river.InsertManyParams
	for _, c := range causes {
		o, err := a.rulesOf(ctx, read, c.OrgID)
		if err != nil {
			return nil, err
		}
		for _, d := range o.to(o.rule(c.ProjectID, c.Kind)) {
			out = append(out, river.InsertManyParams{Args: DeliverArgs{DestinationID: d, Alert: c.Kind, OrgID: c.OrgID,
				ProjectID: c.ProjectID, IncidentID: c.IncidentID, RunID: c.RunID, MessageID: "msg_" + uuid.NewString()}})
		}
	}
	return out, nil
}

// Rules returns a project's rules, every kind.
func (a *Service) Rules(ctx context.Context, p *domain.Principal, projectID uuid.UUID) ([]Rule, error) {
	if err := a.ownProject(ctx, p, projectID); err != nil {
		return nil, err
	}
	o, err := a.readRules(ctx, p.OrgID)
	if err != nil {
		return nil, err
	}
	out := make([]Rule, 0, len(domain.AlertKinds))
	for _, k := range domain.AlertKinds {
		out = append(out, o.rule(projectID, k))
	}
	return out, nil
}

// readRules reads afresh (pages and the API show the truth).
func (a *Service) readRules(ctx context.Context, orgID uuid.UUID) (*orgRules, error) {
	a.forget(orgID)
	return a.rulesOf(ctx, a.poolRead, orgID)
}

func (a *Service) ownProject(ctx context.Context, p *domain.Principal, projectID uuid.UUID) error {
	n, err := a.s.DB.NewSelect().Table("projects").Where("id = ? AND org_id = ?", projectID, p.OrgID).Count(ctx)
	if err != nil {
		return fmt.Errorf("alerts: find project: %w", err)
	}
	if n == 0 {
		return domain.NotFound("project")
	}
	return nil
}

// PutRules replaces the rules of the kinds given; kinds left out keep theirs.
func (a *Service) PutRules(ctx context.Context, p *domain.Principal, projectID uuid.UUID, rules []Rule) ([]Rule, error) {
	if err := admin(p); err != nil {
		return nil, err
	}
	if err := a.ownProject(ctx, p, projectID); err != nil {
		return nil, err
	}
	o, err := a.readRules(ctx, p.OrgID)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range rules {
		if !slices.Contains(domain.AlertKinds, r.Kind) {
			return nil, domain.Invalid("invalid_kind", "unknown alert kind %q; the kinds are %v", r.Kind, domain.AlertKinds)
		}
		if seen[r.Kind] {
			return nil, domain.Invalid("invalid_kind", "alert kind %q given twice", r.Kind)
		}
		seen[r.Kind] = true
		for _, d := range r.Destinations {
			if !slices.Contains(o.dests, d) {
				return nil, domain.Invalid("invalid_destination", "destination %s is not one of this organisation's", d)
			}
		}
	}
	err = a.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for _, r := range rules {
			var dests any
			if r.Destinations != nil {
				dests = pgUUIDs(r.Destinations)
			}
			if _, err := tx.NewRaw(`INSERT INTO alert_rules (project_id, kind, enabled, destination_ids) VALUES (?, ?, ?, ?::uuid[])
				ON CONFLICT (project_id, kind) DO UPDATE SET enabled = EXCLUDED.enabled, destination_ids = EXCLUDED.destination_ids`,
				projectID, r.Kind, r.Enabled, dests).Exec(ctx); err != nil {
				return fmt.Errorf("alerts: put rule: %w", err)
			}
		}
		return domain.RecordAudit(ctx, tx, p, "alert_rules.updated", projectID.String(), map[string]any{"rules": rules})
	})
	if err != nil {
		return nil, err
	}
	return a.Rules(ctx, p, projectID)
}

// pgUUIDs spells ids as a Postgres array literal.
func pgUUIDs(ids []uuid.UUID) string {
	s := "{"
	for i, id := range ids {
		if i > 0 {
			s += ","
		}
		s += id.String()
	}
	return s + "}"
}

// runTerminal is the queue's terminal hook: a run on the default branch
// that failed, or passed after a failure, is an alert. Canceled runs say
// nothing about the branch.
func (a *Service) runTerminal(ctx context.Context, tx bun.Tx, r *run.Run) error {
	if r.State != run.StateFailed && r.State != run.StatePassed {
		return nil
	}
	read := func(ctx context.Context, q string, args ...any) (v string, err error) {
		err = tx.Tx.QueryRowContext(ctx, q, args...).Scan(&v)
		return v, err
	}
	o, err := a.rulesOf(ctx, read, r.OrgID)
	if err != nil || len(o.dests) == 0 {
		return err
	}
	var branch string
	if err := tx.NewRaw(`SELECT default_branch FROM `+domain.AllProjects+` WHERE id = ?`, r.ProjectID).Scan(ctx, &branch); err != nil {
		return fmt.Errorf("alerts: project branch: %w", err)
	}
	if r.Branch != branch || r.Trigger == run.TriggerRepair {
		return nil
	}
	var prev []string
	if err := tx.NewRaw(`SELECT state FROM project_runs WHERE project_id = ? AND branch = ? AND id <> ? AND state IN ('passed', 'failed')
		AND trigger <> ? ORDER BY finished_at DESC NULLS LAST LIMIT 1`, r.ProjectID, branch, r.ID, run.TriggerRepair).Scan(ctx, &prev); err != nil {
		return fmt.Errorf("alerts: previous run: %w", err)
	}
	kind := ""
	switch {
	case r.State == run.StateFailed:
		kind = domain.AlertRunFailed
	case len(prev) == 1 && prev[0] == run.StateFailed:
		kind = domain.AlertRunRecovered
	default:
		return nil
	}
	return a.s.EnqueueAlerts(ctx, tx, []domain.AlertCause{{Kind: kind, OrgID: r.OrgID, ProjectID: r.ProjectID, RunID: r.ID}})
}
