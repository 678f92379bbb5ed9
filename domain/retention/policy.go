// Package retention decides what anvil keeps and for how long (// docs/retention.md): the organisation's policy with per-project overrides,
// the clean-up that enforces it in bounded batches (cleanup.go), and the
// daily event budget counted at the feed's doors (budget.go).
//
// It writes its own SQL against the tables it cleans and imports of the
// base package only the Store, the errors, the Principal and the audit.
package retention

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
)

// Day is the unit of the policies' longest durations.
const Day = 24 * time.Hour

// The documented defaults (docs/retention.md, "What is kept").
const (
	DefaultEvents    = 90 * Day
	DefaultLogs      = 30 * Day
	DefaultLogRuns   = 200
	DefaultIncidents = 180 * Day
	DefaultAudit     = 365 * Day
	DefaultFirst     = 10
	DefaultLast      = 100
	// maxDuration bounds every duration a policy may hold.
	maxDuration = 3650 * Day
	maxCount    = 100_000
	maxBudget   = 1_000_000_000_000
)

// AuditChanged is the audit kind of a policy change.
const AuditChanged = "retention.changed"

// Policy is a policy in force: every field set.
type Policy struct {
	Events    time.Duration
	Logs      time.Duration
	LogRuns   int
	Incidents time.Duration
	Audit     time.Duration
	First     int
	Last      int
	// DailyEventBudget is the events a project may send per UTC day; 0 is
	// no budget.
	DailyEventBudget int64
}

// Samples is events_per_incident: how many of an incident's first and most
// recent events are kept in full.
type Samples struct {
	First *int `json:"first"`
	Last  *int `json:"last"`
}

// Document is a policy as the API reads and writes it. In the
// organisation's document every field but daily_event_budget is set (null
// budget: none); in a project's, a null field inherits the organisation's
// value, and a daily_event_budget of 0 is "no budget for this project".
type Document struct {
	Events            *string  `json:"events"`
	Logs              *string  `json:"logs"`
	LogRuns           *int     `json:"log_runs"`
	Incidents         *string  `json:"incidents"`
	Audit             *string  `json:"audit"`
	EventsPerIncident *Samples `json:"events_per_incident"`
	DailyEventBudget  *int64   `json:"daily_event_budget"`
}

// ProjectDocument is a project's overrides and the policy in force for it.
type ProjectDocument struct {
	ProjectID uuid.UUID `json:"project_id"`
	Document
	Effective Document `json:"effective"`
}

// OrgDocument is the organisation's policy and the operator's hard maximum
// for events (ANVIL_EVENT_RETENTION).
type OrgDocument struct {
	Document
	MaxEvents string `json:"max_events"`
}

// Service is the retention capability on one store.
type Service struct {
	s *domain.Store
	// clock is the clean-up's and the budget's (SetNow).
	clock atomic.Pointer[func() time.Time]
	// MaxEvents is ANVIL_EVENT_RETENTION: the default events retention and
	// the most any policy may set.
	MaxEvents time.Duration
	// BatchSize is how many rows one clean-up transaction deletes.
	BatchSize int
	// SampleGrace is how old an event must be before it may be sampled
	// away (docs/retention.md, "Events per incident").
	SampleGrace time.Duration
	// Share is the share of the time a clean-up spends deleting: after a
	// batch that took d it rests d·(1−Share)/Share, so on a machine the
	// ingest shares it takes at most that share of the database's time
	// (1: no rest; docs/retention.md, "Pacing").
	Share float64

	// ExpireArtifacts, when set (wiring: sourcemap.Service.Expire), removes
	// a project's source-map uploads whose release has sent no event since
	// cutoff — the project's events retention (docs/sourcemap.md).
	ExpireArtifacts func(ctx context.Context, projectID uuid.UUID, cutoff time.Time) error
	// ExpireReleases, when set (wiring: release.Releases.Expire), removes a
	// project's releases and the fix chain's ancestry rows older than
	// cutoff — the project's events retention (docs/releases.md).
	ExpireReleases func(ctx context.Context, projectID uuid.UUID, cutoff time.Time) error

	budget *Budget
	// afterBatch, when set (tests), runs after every committed batch.
	afterBatch func()
	// beforeFinish, when set (tests), runs in a project's finish between
	// its re-read of the policy and its write of the sampling mark.
	beforeFinish func()
}

const (
	// DefaultBatch is how many rows one clean-up statement deletes: small
	// enough that one takes tens of milliseconds next to the ingest.
	DefaultBatch = 1000
	// DefaultShare is ANVIL_RETENTION_SHARE's default (docs/retention.md,
	// "Pacing": measured to keep the feed within a tenth of its rate).
	DefaultShare = 0.15
)

// New builds the retention service on s. The wiring (domain/wiring) builds
// it once and passes it to the web tier, the workers and the admin command,
// which must share one: its daily budget counts in memory.
func New(s *domain.Store) *Service {
	r := &Service{s: s, MaxEvents: DefaultEvents, BatchSize: DefaultBatch, SampleGrace: Day, Share: DefaultShare}
	r.SetNow(s.Now)
	r.budget = newBudget(r)
	return r
}

// SetNow replaces the service's clock (tests; safe while it runs).
func (r *Service) SetNow(now func() time.Time) { r.clock.Store(&now) }

// now is the service's clock in UTC.
func (r *Service) now() time.Time { return (*r.clock.Load())().UTC() }

// defaults is the policy of an organisation that has set nothing.
func (r *Service) defaults() Policy {
	return Policy{Events: r.MaxEvents, Logs: DefaultLogs, LogRuns: DefaultLogRuns, Incidents: DefaultIncidents,
		Audit: DefaultAudit, First: DefaultFirst, Last: DefaultLast}
}

// policyRow is a row of retention_policies.
type policyRow struct {
	ProjectID *uuid.UUID `bun:"project_id"`
	Events    *int64     `bun:"events_seconds"`
	Logs      *int64     `bun:"logs_seconds"`
	LogRuns   *int       `bun:"log_runs"`
	Incidents *int64     `bun:"incidents_seconds"`
	Audit     *int64     `bun:"audit_seconds"`
	First     *int       `bun:"events_first"`
	Last      *int       `bun:"events_last"`
	Budget    *int64     `bun:"daily_event_budget"`
}

// apply lays the row's set fields over p.
func (row *policyRow) apply(p *Policy) {
	dur := func(d *time.Duration, v *int64) {
		if v != nil {
			*d = time.Duration(*v) * time.Second
		}
	}
	dur(&p.Events, row.Events)
	dur(&p.Logs, row.Logs)
	dur(&p.Incidents, row.Incidents)
	dur(&p.Audit, row.Audit)
	if row.LogRuns != nil {
		p.LogRuns = *row.LogRuns
	}
	if row.First != nil {
		p.First = *row.First
	}
	if row.Last != nil {
		p.Last = *row.Last
	}
	if row.Budget != nil {
		p.DailyEventBudget = *row.Budget
	}
}

// rows reads the organisation's row and (projectID not nil) the project's.
func (r *Service) rows(ctx context.Context, db bun.IDB, orgID uuid.UUID, projectID *uuid.UUID) (org, proj *policyRow, err error) {
	var rs []policyRow
	q := `SELECT project_id, events_seconds, logs_seconds, log_runs, incidents_seconds, audit_seconds, events_first, events_last,
		daily_event_budget FROM retention_policies WHERE org_id = ? AND (project_id IS NULL OR project_id = ?)`
	if err := db.NewRaw(q, orgID, projectID).Scan(ctx, &rs); err != nil {
		return nil, nil, fmt.Errorf("retention: read policies: %w", err)
	}
	for i := range rs {
		if rs[i].ProjectID == nil {
			org = &rs[i]
		} else {
			proj = &rs[i]
		}
	}
	return org, proj, nil
}

// effective lays the organisation's and the project's rows over the
// defaults, and holds events to the operator's maximum.
func (r *Service) effective(org, proj *policyRow) Policy {
	p := r.defaults()
	if org != nil {
		org.apply(&p)
	}
	if proj != nil {
		proj.apply(&p)
	}
	if p.Events > r.MaxEvents {
		p.Events = r.MaxEvents
	}
	return p
}

// Effective is the policy in force for a project of the organisation.
func (r *Service) Effective(ctx context.Context, orgID, projectID uuid.UUID) (Policy, error) {
	org, proj, err := r.rows(ctx, r.s.DB, orgID, &projectID)
	if err != nil {
		return Policy{}, err
	}
	return r.effective(org, proj), nil
}

// document is the wire form of a policy in force.
func document(p Policy) Document {
	d := Document{Events: strp(FormatDuration(p.Events)), Logs: strp(FormatDuration(p.Logs)), LogRuns: intp(p.LogRuns),
		Incidents: strp(FormatDuration(p.Incidents)), Audit: strp(FormatDuration(p.Audit)),
		EventsPerIncident: &Samples{First: intp(p.First), Last: intp(p.Last)}}
	if p.DailyEventBudget > 0 {
		d.DailyEventBudget = &p.DailyEventBudget
	}
	return d
}

// overrides is the wire form of a project's row (nil fields inherit).
func overrides(row *policyRow) Document {
	var d Document
	if row == nil {
		return d
	}
	fmtp := func(v *int64) *string {
		if v == nil {
			return nil
		}
		return strp(FormatDuration(time.Duration(*v) * time.Second))
	}
	d.Events, d.Logs, d.Incidents, d.Audit = fmtp(row.Events), fmtp(row.Logs), fmtp(row.Incidents), fmtp(row.Audit)
	d.LogRuns, d.DailyEventBudget = row.LogRuns, row.Budget
	if row.First != nil || row.Last != nil {
		d.EventsPerIncident = &Samples{First: row.First, Last: row.Last}
	}
	return d
}

// OrgPolicy is the organisation's policy (any member may read it).
func (r *Service) OrgPolicy(ctx context.Context, p *domain.Principal) (OrgDocument, error) {
	org, _, err := r.rows(ctx, r.s.DB, p.OrgID, nil)
	if err != nil {
		return OrgDocument{}, err
	}
	return OrgDocument{Document: document(r.effective(org, nil)), MaxEvents: FormatDuration(r.MaxEvents)}, nil
}

// ProjectPolicy is a project's overrides and the policy in force for it.
func (r *Service) ProjectPolicy(ctx context.Context, p *domain.Principal, projectID uuid.UUID) (ProjectDocument, error) {
	if err := r.ownProject(ctx, p.OrgID, projectID); err != nil {
		return ProjectDocument{}, err
	}
	org, proj, err := r.rows(ctx, r.s.DB, p.OrgID, &projectID)
	if err != nil {
		return ProjectDocument{}, err
	}
	return ProjectDocument{ProjectID: projectID, Document: overrides(proj), Effective: document(r.effective(org, proj))}, nil
}

func (r *Service) ownProject(ctx context.Context, orgID, projectID uuid.UUID) error {
	var ok bool
	if err := r.s.DB.NewRaw(`SELECT EXISTS (SELECT 1 FROM `+domain.LiveProjects+` p WHERE id = ? AND org_id = ?)`, projectID, orgID).Scan(ctx, &ok); err != nil {
		return fmt.Errorf("retention: project: %w", err)
	}
	if !ok {
		return domain.NotFound("project")
	}
	return nil
}

// PutOrgPolicy replaces the organisation's policy (admins). A field left
// out or null takes its default.
func (r *Service) PutOrgPolicy(ctx context.Context, p *domain.Principal, in Document) (OrgDocument, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return OrgDocument{}, err
	}
	row, err := r.check(in, false)
	if err != nil {
		return OrgDocument{}, err
	}
	if row.Budget != nil && *row.Budget == 0 {
		row.Budget = nil // the organisation's "none" is null
	}
	err = r.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockOrg(ctx, tx, p.OrgID); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`INSERT INTO retention_policies (org_id, project_id, events_seconds, logs_seconds, log_runs, incidents_seconds,
				audit_seconds, events_first, events_last, daily_event_budget, updated_at)
			VALUES (?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (org_id) WHERE project_id IS NULL DO UPDATE SET events_seconds = EXCLUDED.events_seconds,
				logs_seconds = EXCLUDED.logs_seconds, log_runs = EXCLUDED.log_runs, incidents_seconds = EXCLUDED.incidents_seconds,
				audit_seconds = EXCLUDED.audit_seconds, events_first = EXCLUDED.events_first, events_last = EXCLUDED.events_last,
				daily_event_budget = EXCLUDED.daily_event_budget, updated_at = EXCLUDED.updated_at`,
			p.OrgID, row.Events, row.Logs, row.LogRuns, row.Incidents, row.Audit, row.First, row.Last, row.Budget, r.now()).Exec(ctx); err != nil {
			return fmt.Errorf("retention: save the organisation's policy: %w", err)
		}
		// A changed sampling rule is applied to every incident again.
		if _, err := tx.NewRaw(`UPDATE retention_cleanups SET sampled_until = NULL WHERE org_id = ?`, p.OrgID).Exec(ctx); err != nil {
			return fmt.Errorf("retention: reset sampling: %w", err)
		}
		return domain.RecordAudit(ctx, tx, p, AuditChanged, "organization", auditDetail(overrides(&row)))
	})
	if err != nil {
		return OrgDocument{}, err
	}
	r.budget.forget()
	return r.OrgPolicy(ctx, p)
}

// PutProjectPolicy replaces a project's overrides (admins). A field left
// out or null inherits the organisation's value.
func (r *Service) PutProjectPolicy(ctx context.Context, p *domain.Principal, projectID uuid.UUID, in Document) (ProjectDocument, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return ProjectDocument{}, err
	}
	if err := r.ownProject(ctx, p.OrgID, projectID); err != nil {
		return ProjectDocument{}, err
	}
	row, err := r.check(in, true)
	if err != nil {
		return ProjectDocument{}, err
	}
	err = r.s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockOrg(ctx, tx, p.OrgID); err != nil {
			return err
		}
		if _, err := tx.NewRaw(`INSERT INTO retention_policies (org_id, project_id, events_seconds, logs_seconds, log_runs, incidents_seconds,
				events_first, events_last, daily_event_budget, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (project_id) WHERE project_id IS NOT NULL DO UPDATE SET events_seconds = EXCLUDED.events_seconds,
				logs_seconds = EXCLUDED.logs_seconds, log_runs = EXCLUDED.log_runs, incidents_seconds = EXCLUDED.incidents_seconds,
				events_first = EXCLUDED.events_first, events_last = EXCLUDED.events_last,
				daily_event_budget = EXCLUDED.daily_event_budget, updated_at = EXCLUDED.updated_at`,
			p.OrgID, projectID, row.Events, row.Logs, row.LogRuns, row.Incidents, row.First, row.Last, row.Budget, r.now()).Exec(ctx); err != nil {
			return fmt.Errorf("retention: save the project's policy: %w", err)
		}
		if _, err := tx.NewRaw(`UPDATE retention_cleanups SET sampled_until = NULL WHERE project_id = ?`, projectID).Exec(ctx); err != nil {
			return fmt.Errorf("retention: reset sampling: %w", err)
		}
		return domain.RecordAudit(ctx, tx, p, AuditChanged, "project:"+projectID.String(), auditDetail(overrides(&row)))
	})
	if err != nil {
		return ProjectDocument{}, err
	}
	r.budget.forget()
	return r.ProjectPolicy(ctx, p, projectID)
}

// lockOrg takes the organisation's row lock that a clean-up's finish waits
// for (FOR NO KEY UPDATE: it holds back finish's FOR SHARE, not the foreign
// key checks of inserts that name the organisation), so that a policy PUT
// and a clean-up's sampling mark never interleave (finish).
func lockOrg(ctx context.Context, tx bun.Tx, orgID uuid.UUID) error {
	if _, err := tx.NewRaw(`SELECT 1 FROM organizations WHERE id = ? FOR NO KEY UPDATE`, orgID).Exec(ctx); err != nil {
		return fmt.Errorf("retention: lock the organisation: %w", err)
	}
	return nil
}

// auditDetail is the policy as set, for the audit entry (nil fields out).
func auditDetail(d Document) map[string]any {
	out := map[string]any{}
	put := func(k string, v *string) {
		if v != nil {
			out[k] = *v
		}
	}
	put("events", d.Events)
	put("logs", d.Logs)
	put("incidents", d.Incidents)
	put("audit", d.Audit)
	if d.LogRuns != nil {
		out["log_runs"] = *d.LogRuns
	}
	if d.EventsPerIncident != nil {
		if d.EventsPerIncident.First != nil {
			out["events_per_incident.first"] = *d.EventsPerIncident.First
		}
		if d.EventsPerIncident.Last != nil {
			out["events_per_incident.last"] = *d.EventsPerIncident.Last
		}
	}
	if d.DailyEventBudget != nil {
		out["daily_event_budget"] = *d.DailyEventBudget
	}
	return out
}

// check validates a document into a row, naming every refused field.
func (r *Service) check(in Document, project bool) (policyRow, error) {
	var row policyRow
	var fields []domain.FieldError
	bad := func(field, code, format string, args ...any) {
		fields = append(fields, domain.FieldError{Field: field, Code: code, Problem: fmt.Sprintf(format, args...)})
	}
	dur := func(field string, v *string, limit time.Duration, limitName string) *int64 {
		if v == nil {
			return nil
		}
		d, err := ParseDuration(*v)
		if err != nil {
			bad(field, "invalid_duration", "%v", err)
			return nil
		}
		if d > limit {
			bad(field, "invalid_duration", "must be at most %s%s", FormatDuration(limit), limitName)
			return nil
		}
		s := int64(d / time.Second)
		return &s
	}
	count := func(field string, v *int) *int {
		if v != nil && (*v < 0 || *v > maxCount) {
			bad(field, "invalid_count", "must be a whole number between 0 and %d", maxCount)
			return nil
		}
		return v
	}
	row.Events = dur("events", in.Events, r.MaxEvents, " (ANVIL_EVENT_RETENTION, the operator's maximum)")
	row.Logs = dur("logs", in.Logs, maxDuration, "")
	row.Incidents = dur("incidents", in.Incidents, maxDuration, "")
	if project && in.Audit != nil {
		bad("audit", "invalid_scope", "is the organisation's: audit entries are kept per organisation; set it on /api/private/retention")
	} else {
		row.Audit = dur("audit", in.Audit, maxDuration, "")
	}
	row.LogRuns = count("log_runs", in.LogRuns)
	if in.EventsPerIncident != nil {
		row.First = count("events_per_incident.first", in.EventsPerIncident.First)
		row.Last = count("events_per_incident.last", in.EventsPerIncident.Last)
	}
	if b := in.DailyEventBudget; b != nil {
		if *b < 0 || *b > maxBudget {
			bad("daily_event_budget", "invalid_budget", "must be null (none) or a whole number of events between 0 and %d", int64(maxBudget))
		} else {
			row.Budget = b
		}
	}
	if len(fields) > 0 {
		msgs := make([]string, len(fields))
		for i, f := range fields {
			msgs[i] = f.Field + " " + f.Problem
		}
		return row, &domain.Error{Kind: domain.ErrInvalid, Code: fields[0].Code, Message: strings.Join(msgs, "; "), Fields: fields}
	}
	return row, nil
}

var durationRE = regexp.MustCompile(`^([0-9]{1,7})([dhms])$`)

// errDuration is a duration not written as the API writes them.
var errDuration = errors.New(`must be a whole number followed by d, h, m or s, such as "90d", "12h", "30m" or "45s"`)

// ParseDuration reads "90d", "12h", "30m" or "45s" (more than zero).
func ParseDuration(s string) (time.Duration, error) {
	m := durationRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errDuration
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	if n == 0 {
		return 0, errors.New("must be more than zero")
	}
	unit := map[string]time.Duration{"d": Day, "h": time.Hour, "m": time.Minute, "s": time.Second}[m[2]]
	return time.Duration(n) * unit, nil
}

// FormatDuration writes d in the largest unit that divides it.
func FormatDuration(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s > 0 && s%86400 == 0:
		return strconv.FormatInt(s/86400, 10) + "d"
	case s > 0 && s%3600 == 0:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s > 0 && s%60 == 0:
		return strconv.FormatInt(s/60, 10) + "m"
	}
	return strconv.FormatInt(s, 10) + "s"
}

func strp(s string) *string { return &s }
func intp(n int) *int       { return &n }
