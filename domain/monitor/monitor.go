package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/incident"
	"anvil/domain/internal/dbutil"
	"anvil/domain/internal/tokens"
)

// PingKeyPrefix starts every ping key: anv_png_ + 32 base62 characters,
// stored as its first 16 characters and a SHA-256 like every token.
const PingKeyPrefix = "anv_png_"

// Defaults of a monitor's settings, as Sentry's (minutes).
const (
	DefaultMargin     = 1
	DefaultMaxRuntime = 30
	maxMinutes        = 40320 // 28 days
	maxThreshold      = 720
	DefaultEnv        = "production"
)

// DefaultPerProject is how many monitors a project may have unless
// ANVIL_MONITORS_PER_PROJECT says otherwise (docs/monitors.md, "Bounds").
const DefaultPerProject = 1000

// Origins of a monitor's settings (docs/monitors.md, "What a check-in may
// change"): a check-in's monitor_config changes only OriginCheckIn's.
const (
	OriginCheckIn = "check_in"
	OriginAPI     = "api"
	OriginCockpit = "cockpit"
)

// Service is the monitors of every project.
type Service struct {
	s         *domain.Store
	incidents *incident.Incidents
	// Now is the clock of check-ins and the sweep (tests move it).
	Now func() time.Time
	// PublicURL prefixes ping URLs (ANVIL_PUBLIC_URL).
	PublicURL string
	usage     usage
	// generalOnly sends every check-in down the general path (tests hold
	// the two-round-trip path to it; checkin_fast.go).
	generalOnly bool
	// fast counts the check-ins the two-round-trip path stored.
	fast atomic.Int64
	// PerProject caps a project's monitors (ANVIL_MONITORS_PER_PROJECT).
	PerProject int
}

// New builds the service; in dispatches repairs of incidents a monitor's
// binding queues.
func New(s *domain.Store, in *incident.Incidents, publicURL string) *Service {
	return &Service{s: s, incidents: in, Now: func() time.Time { return s.Now() }, PublicURL: strings.TrimRight(publicURL, "/"),
		PerProject: DefaultPerProject}
}

// Monitor is one monitor as the API shows it (Sentry's monitor_config names).
type Monitor struct {
	ID                uuid.UUID `json:"id" bun:"id"`
	OrgID             uuid.UUID `json:"-" bun:"org_id"`
	ProjectID         uuid.UUID `json:"project_id" bun:"project_id"`
	Slug              string    `json:"slug" bun:"slug"`
	Schedule          Schedule  `json:"schedule" bun:"-"`
	ScheduleType      string    `json:"-" bun:"schedule_type"`
	ScheduleValue     string    `json:"-" bun:"schedule_value"`
	ScheduleUnit      string    `json:"-" bun:"schedule_unit"`
	Timezone          string    `json:"timezone" bun:"timezone"`
	CheckinMargin     int       `json:"checkin_margin" bun:"checkin_margin"`
	MaxRuntime        int       `json:"max_runtime" bun:"max_runtime"`
	FailureThreshold  int       `json:"failure_issue_threshold" bun:"failure_threshold"`
	RecoveryThreshold int       `json:"recovery_threshold" bun:"recovery_threshold"`
	Environment       string    `json:"environment" bun:"environment"`
	Paused            bool      `json:"paused" bun:"paused"`
	// Origin is who made or last edited the settings: check_in, api or cockpit.
	Origin     string    `json:"origin" bun:"origin"`
	PingLookup *string   `json:"-" bun:"ping_lookup"`
	CreatedAt  time.Time `json:"created_at" bun:"created_at"`
	UpdatedAt  time.Time `json:"updated_at" bun:"updated_at"`
	// PingKey is the key's first characters ("anv_png_AbCdEfGh…"), or "" when revoked.
	PingKey string `json:"ping_key" bun:"-"`
	// PingURL is set only in the answer that made the key (shown once).
	PingURL string `json:"ping_url,omitempty" bun:"-"`
	// Runs are the latest runs, newest first, when listed.
	Runs []Run `json:"runs,omitempty" bun:"-"`
	// NextExpectedAt is the next run expected (the earliest of its
	// environments; null before the first check-in and while paused).
	NextExpectedAt *time.Time `json:"next_expected_at" bun:"-"`
	// LastDurationMS is the last finished run's duration.
	LastDurationMS *int64 `json:"last_duration_ms" bun:"-"`
}

func (m *Monitor) fill() {
	m.Schedule = Schedule{Type: m.ScheduleType, Value: m.ScheduleValue, Unit: m.ScheduleUnit}
	if m.PingLookup != nil {
		m.PingKey = *m.PingLookup + "…"
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
}

func (m *Monitor) plan() *plan {
	p, err := parsePlan(m.Schedule, m.Timezone)
	if err != nil {
		// Stored schedules were checked when saved; a zone that vanished
		// from tzdata falls back to UTC rather than stopping the sweep.
		p, _ = parsePlan(m.Schedule, "UTC")
	}
	return p
}

// Run is one check-in.
type Run struct {
	ID          uuid.UUID  `json:"id" bun:"id"`
	MonitorID   uuid.UUID  `json:"-" bun:"monitor_id"`
	Environment string     `json:"environment" bun:"environment"`
	CheckInID   *uuid.UUID `json:"check_in_id" bun:"checkin_id"`
	Status      string     `json:"status" bun:"status"`
	Source      string     `json:"source" bun:"source"`
	StartedAt   time.Time  `json:"started_at" bun:"started_at"`
	FinishedAt  *time.Time `json:"finished_at" bun:"finished_at"`
	DurationMS  *int64     `json:"duration_ms" bun:"duration_ms"`
	ExpectedAt  *time.Time `json:"expected_at,omitempty" bun:"expected_at"`
	ExitCode    *int       `json:"exit_code,omitempty" bun:"exit_code"`
	Release     string     `json:"release,omitempty" bun:"release"`
	Output      string     `json:"output,omitempty" bun:"output"`
}

// Statuses of a run.
const (
	StatusInProgress = "in_progress"
	StatusOK         = "ok"
	StatusError      = "error"
	StatusMissed     = "missed"
	StatusTimeout    = "timeout"
)

// UnmarshalJSON accepts a schedule value as Sentry's SDKs send it: a string for a
// crontab, a number for an interval.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	var raw struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
		Unit  string          `json:"unit"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	s.Type, s.Unit = raw.Type, raw.Unit
	v := strings.TrimSpace(string(raw.Value))
	if strings.HasPrefix(v, `"`) {
		var str string
		if err := json.Unmarshal(raw.Value, &str); err != nil {
			return err
		}
		s.Value = str
	} else if v != "" && v != "null" {
		s.Value = v
	}
	return nil
}

// Input is a monitor's settings as the API and monitor_config send them;
// nil leaves a setting as it is (or its default on create).
type Input struct {
	Slug              *string   `json:"slug"`
	Schedule          *Schedule `json:"schedule"`
	Timezone          *string   `json:"timezone"`
	CheckinMargin     *int      `json:"checkin_margin"`
	MaxRuntime        *int      `json:"max_runtime"`
	FailureThreshold  *int      `json:"failure_threshold"`
	FailureIssue      *int      `json:"failure_issue_threshold"`
	RecoveryThreshold *int      `json:"recovery_threshold"`
	Environment       *string   `json:"environment"`
	Paused            *bool     `json:"paused"`
	// Origin is where an edit comes from (OriginAPI when empty); never
	// read from JSON.
	Origin string `json:"-"`
}

// Bounds of a schedule's text, checked before anything parses it
// (docs/monitors.md, "Bounds"): a crontab line is a few dozen bytes, a
// zone name at most about thirty.
const (
	maxScheduleBytes = 256
	maxTimezoneBytes = 64
)

// settingsTouched reports whether the input changes anything a check-in's
// monitor_config could change (pausing is not such a setting).
func (in Input) settingsTouched() bool {
	return in.Schedule != nil || in.Timezone != nil || in.CheckinMargin != nil || in.MaxRuntime != nil || in.FailureThreshold != nil ||
		in.FailureIssue != nil || in.RecoveryThreshold != nil || in.Environment != nil
}

var slugRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,49}$`)

// apply checks in onto m; every refusal names its field.
func (in Input) apply(m *Monitor, creating bool) error {
	var fe domain.FieldErrors
	if in.Slug != nil {
		if !creating && *in.Slug != m.Slug {
			fe.Add("slug", "invalid_slug", "cannot change; create another monitor")
		} else if !slugRe.MatchString(*in.Slug) {
			fe.Add("slug", "invalid_slug", "must be 1–50 lower-case letters, digits, - or _, starting with a letter or digit")
		}
		m.Slug = *in.Slug
	} else if creating {
		fe.Add("slug", "invalid_slug", "is required")
	}
	if in.Schedule != nil {
		m.Schedule = *in.Schedule
		if len(m.Schedule.Value)+len(m.Schedule.Type)+len(m.Schedule.Unit) > maxScheduleBytes {
			fe.Add("schedule.value", "invalid_schedule", "is above %d bytes; a crontab line is a few dozen", maxScheduleBytes)
			return fe.Err()
		}
	} else if creating {
		fe.Add("schedule", "invalid_schedule", "is required: {type: \"crontab\", value: \"0 2 * * *\"} or {type: \"interval\", value: 1, unit: \"hour\"}")
	}
	if in.Timezone != nil {
		if len(*in.Timezone) > maxTimezoneBytes {
			fe.Add("timezone", "invalid_timezone", "is above %d bytes; give an IANA time zone such as Europe/Berlin", maxTimezoneBytes)
			return fe.Err()
		}
		m.Timezone = *in.Timezone
	}
	if m.Timezone == "" {
		m.Timezone = "UTC"
	}
	if in.Schedule != nil || in.Timezone != nil {
		if _, err := parsePlan(m.Schedule, m.Timezone); err != nil {
			var de *domain.Error
			if errors.As(err, &de) {
				fe = append(fe, de.Fields...)
			}
		}
	}
	minutes := func(field string, v *int, dst *int, min int) {
		if v == nil {
			return
		}
		if *v < min || *v > maxMinutes {
			fe.Add(field, "invalid_"+field, "must be a whole number of minutes between %d and %d", min, maxMinutes)
			return
		}
		*dst = *v
	}
	minutes("checkin_margin", in.CheckinMargin, &m.CheckinMargin, 0)
	minutes("max_runtime", in.MaxRuntime, &m.MaxRuntime, 1)
	threshold := func(field string, v *int, dst *int) {
		if v == nil {
			return
		}
		if *v < 1 || *v > maxThreshold {
			fe.Add(field, "invalid_threshold", "must be between 1 and %d consecutive check-ins", maxThreshold)
			return
		}
		*dst = *v
	}
	ft := in.FailureThreshold
	if ft == nil {
		ft = in.FailureIssue
	}
	threshold("failure_threshold", ft, &m.FailureThreshold)
	threshold("recovery_threshold", in.RecoveryThreshold, &m.RecoveryThreshold)
	if in.Environment != nil {
		env := strings.TrimSpace(*in.Environment)
		if env == "" || len(env) > 64 || strings.ContainsAny(env, "/\n\r\t") || env == "*" {
			fe.Add("environment", "invalid_environment", "must be 1–64 characters without slashes or line breaks")
		}
		m.Environment = env
	}
	if in.Paused != nil {
		m.Paused = *in.Paused
	}
	return fe.Err()
}

func newMonitor() *Monitor {
	return &Monitor{Timezone: "UTC", CheckinMargin: DefaultMargin, MaxRuntime: DefaultMaxRuntime, FailureThreshold: 1, RecoveryThreshold: 1, Environment: DefaultEnv}
}

// pingURL is the ping URL of a key and slug.
func (ms *Service) pingURL(key, slug string) string {
	return ms.PublicURL + "/api/monitors/" + key + "/" + slug
}

// Create makes a monitor with a fresh ping key, answered once in PingURL.
func (ms *Service) Create(ctx context.Context, p *domain.Principal, projectID uuid.UUID, in Input) (*Monitor, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return nil, err
	}
	m := newMonitor()
	if err := in.apply(m, true); err != nil {
		return nil, err
	}
	m.Origin = in.origin()
	var key string
	err := ms.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		if pr.OrgID != p.OrgID || pr.DeletedAt != nil {
			return domain.NotFound("project")
		}
		m.OrgID, m.ProjectID = pr.OrgID, pr.ID
		if err := ms.underCap(ctx, tx, pr.ID); err != nil {
			return err
		}
		var err error
		key, err = ms.insert(ctx, tx, m)
		if err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, p, "monitor.created", m.Slug, map[string]any{"project_id": pr.ID, "schedule": m.Schedule.String()})
	})
	if err != nil {
		return nil, err
	}
	m.PingURL = ms.pingURL(key, m.Slug)
	return m, nil
}

// origin is where an edit comes from: the API unless the cockpit says so.
func (in Input) origin() string {
	if in.Origin == OriginCockpit {
		return OriginCockpit
	}
	return OriginAPI
}

// ErrTooManyMonitors is a monitor past the project's cap.
func (ms *Service) tooMany() error {
	return &domain.Error{Kind: domain.ErrConflict, Code: "too_many_monitors",
		Message: fmt.Sprintf("the project has %d monitors, the most it may have (ANVIL_MONITORS_PER_PROJECT); delete one first", ms.PerProject)}
}

// underCap serializes the making of a project's monitors (a transaction
// advisory lock: nothing else waits on it, so it joins no lock order) and
// refuses one past the cap.
func (ms *Service) underCap(ctx context.Context, tx bun.Tx, projectID uuid.UUID) error {
	var n int
	if err := tx.NewRaw(`SELECT pg_advisory_xact_lock(hashtextextended('monitor-create:' || ?::text, 0))`, projectID).Scan(ctx, new(string)); err != nil {
		return fmt.Errorf("monitors: serialize creation: %w", err)
	}
	if err := tx.NewRaw(`SELECT count(*) FROM monitors WHERE project_id = ?`, projectID).Scan(ctx, &n); err != nil {
		return fmt.Errorf("monitors: count: %w", err)
	}
	if n >= ms.PerProject {
		return ms.tooMany()
	}
	return nil
}

// insert stores a new monitor with a new ping key and returns the key.
func (ms *Service) insert(ctx context.Context, tx bun.Tx, m *Monitor) (string, error) {
	key, lookup, hash := tokens.New(PingKeyPrefix)
	now := ms.Now()
	err := tx.NewRaw(`INSERT INTO monitors (org_id, project_id, slug, schedule_type, schedule_value, schedule_unit, timezone, checkin_margin,
		max_runtime, failure_threshold, recovery_threshold, environment, paused, origin, ping_lookup, ping_hash, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project_id, slug) DO NOTHING RETURNING id, created_at, updated_at`,
		m.OrgID, m.ProjectID, m.Slug, m.Schedule.Type, m.Schedule.Value, m.Schedule.Unit, m.Timezone, m.CheckinMargin, m.MaxRuntime,
		m.FailureThreshold, m.RecoveryThreshold, m.Environment, m.Paused, m.Origin, lookup, hash, now, now).Scan(ctx, &m.ID, &m.CreatedAt, &m.UpdatedAt)
	if dbutil.IsNoRows(err) {
		return "", &domain.Error{Kind: domain.ErrConflict, Code: "monitor_exists", Message: fmt.Sprintf("slug %q is taken: a monitor of this project has it", m.Slug),
			Fields: []domain.FieldError{{Field: "slug", Code: "monitor_exists", Problem: "is taken by another monitor of this project"}}}
	}
	if err != nil {
		return "", fmt.Errorf("monitors: insert %s: %w", m.Slug, err)
	}
	m.PingLookup = &lookup
	m.ScheduleType, m.ScheduleValue, m.ScheduleUnit = m.Schedule.Type, m.Schedule.Value, m.Schedule.Unit
	m.fill()
	return key, nil
}

const monitorColumns = `id, org_id, project_id, slug, schedule_type, schedule_value, schedule_unit, timezone, checkin_margin, max_runtime,
	failure_threshold, recovery_threshold, environment, paused, origin, ping_lookup, created_at, updated_at`

// visibleProject checks that the project is the caller's organisation's.
func (ms *Service) visibleProject(ctx context.Context, p *domain.Principal, projectID uuid.UUID) error {
	var n int
	if err := ms.s.DB.NewRaw(`SELECT count(*) FROM `+domain.LiveProjects+` p WHERE p.id = ? AND p.org_id = ?`, projectID, p.OrgID).Scan(ctx, &n); err != nil {
		return fmt.Errorf("monitors: project: %w", err)
	}
	if n == 0 {
		return domain.NotFound("project")
	}
	return nil
}

// List is the project's monitors with their latest runs (at most runs each).
func (ms *Service) List(ctx context.Context, p *domain.Principal, projectID uuid.UUID, runs int) ([]*Monitor, error) {
	if err := ms.visibleProject(ctx, p, projectID); err != nil {
		return nil, err
	}
	ms2 := []*Monitor{}
	if err := ms.s.DB.NewRaw(`SELECT `+monitorColumns+` FROM monitors WHERE project_id = ? ORDER BY slug`, projectID).Scan(ctx, &ms2); err != nil {
		return nil, fmt.Errorf("monitors: list: %w", err)
	}
	for _, m := range ms2 {
		m.fill()
	}
	if err := ms.withStates(ctx, ms2); err != nil {
		return nil, err
	}
	if runs > 0 && len(ms2) > 0 {
		ids := make([]uuid.UUID, len(ms2))
		byID := map[uuid.UUID]*Monitor{}
		for i, m := range ms2 {
			ids[i], byID[m.ID] = m.ID, m
		}
		var rs []Run
		if err := ms.s.DB.NewRaw(`SELECT r.* FROM unnest(?::uuid[]) AS m(id), LATERAL (
			SELECT id, monitor_id, environment, checkin_id, status, source, started_at, finished_at, duration_ms, expected_at, exit_code, release, ''::text AS output
			FROM monitor_checkins WHERE monitor_id = m.id ORDER BY started_at DESC LIMIT ?) r`, pgdialect.Array(uuidStrings(ids)), runs).Scan(ctx, &rs); err != nil {
			return nil, fmt.Errorf("monitors: runs: %w", err)
		}
		for _, r := range rs {
			m := byID[r.MonitorID]
			m.Runs = append(m.Runs, r.utc())
		}
	}
	return ms2, nil
}

func (r Run) utc() Run {
	r.StartedAt = r.StartedAt.UTC()
	if r.FinishedAt != nil {
		t := r.FinishedAt.UTC()
		r.FinishedAt = &t
	}
	if r.ExpectedAt != nil {
		t := r.ExpectedAt.UTC()
		r.ExpectedAt = &t
	}
	return r
}

// Get is one monitor of the project by slug.
func (ms *Service) Get(ctx context.Context, p *domain.Principal, projectID uuid.UUID, slug string) (*Monitor, error) {
	if err := ms.visibleProject(ctx, p, projectID); err != nil {
		return nil, err
	}
	m, err := ms.bySlug(ctx, ms.s.DB, projectID, slug, false)
	if err != nil {
		return nil, err
	}
	return m, ms.withStates(ctx, []*Monitor{m})
}

// withStates adds the next expected run and the last duration.
func (ms *Service) withStates(ctx context.Context, mons []*Monitor) error {
	if len(mons) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(mons))
	byID := map[uuid.UUID]*Monitor{}
	for i, m := range mons {
		ids[i], byID[m.ID] = m.ID, m
	}
	var rows []struct {
		ID   uuid.UUID  `bun:"monitor_id"`
		Next *time.Time `bun:"next"`
		Dur  *int64     `bun:"dur"`
	}
	if err := ms.s.DB.NewRaw(`SELECT monitor_id, min(expected_at) AS next,
		(array_agg(last_duration_ms ORDER BY last_checkin_at DESC NULLS LAST) FILTER (WHERE last_duration_ms IS NOT NULL))[1] AS dur
		FROM monitor_states WHERE monitor_id = ANY(?::uuid[]) GROUP BY monitor_id`, pgdialect.Array(uuidStrings(ids))).Scan(ctx, &rows); err != nil {
		return fmt.Errorf("monitors: states: %w", err)
	}
	for _, r := range rows {
		m := byID[r.ID]
		if r.Next != nil && !m.Paused {
			t := r.Next.UTC()
			m.NextExpectedAt = &t
		}
		m.LastDurationMS = r.Dur
	}
	return nil
}

func (ms *Service) bySlug(ctx context.Context, db bun.IDB, projectID uuid.UUID, slug string, lock bool) (*Monitor, error) {
	m := new(Monitor)
	q := `SELECT ` + monitorColumns + ` FROM monitors WHERE project_id = ? AND slug = ?`
	if lock {
		q += ` FOR UPDATE`
	}
	if err := db.NewRaw(q, projectID, slug).Scan(ctx, m); err != nil {
		if dbutil.IsNoRows(err) {
			return nil, domain.NotFound("monitor")
		}
		return nil, fmt.Errorf("monitors: get %s: %w", slug, err)
	}
	m.fill()
	return m, nil
}

// Runs is a monitor's latest runs (newest first), output included.
func (ms *Service) Runs(ctx context.Context, monitorID uuid.UUID, limit int) ([]Run, error) {
	rs := []Run{}
	if err := ms.s.DB.NewRaw(`SELECT id, monitor_id, environment, checkin_id, status, source, started_at, finished_at, duration_ms, expected_at,
		exit_code, release, output FROM monitor_checkins WHERE monitor_id = ? ORDER BY started_at DESC LIMIT ?`, monitorID, limit).Scan(ctx, &rs); err != nil {
		return nil, fmt.Errorf("monitors: runs: %w", err)
	}
	for i := range rs {
		rs[i] = rs[i].utc()
	}
	return rs, nil
}

// The roles of a monitor's changes (docs/monitors.md, "The cockpit"), in one
// place: Update enforces them and the monitor's page offers its forms by
// them, so a form a person sees is a form that works for them.
const (
	// PauseRole pauses and resumes a monitor.
	PauseRole = domain.RoleMember
	// SettingsRole changes its slug, schedule, timezone and environment
	// (the settings form), makes a new ping URL, creates and deletes.
	SettingsRole = domain.RoleAdmin
)

// CanPause reports whether p may pause and resume a project's monitors.
func CanPause(p *domain.Principal) bool { return p.AtLeast(PauseRole) }

// CanEditSettings reports whether p may use the settings form.
func CanEditSettings(p *domain.Principal) bool { return p.AtLeast(SettingsRole) }

// Update changes a monitor's settings (PATCH): the schedule, margins,
// thresholds, environment, paused. A new schedule or an unpause expects
// the next run from now.
func (ms *Service) Update(ctx context.Context, p *domain.Principal, projectID uuid.UUID, slug string, in Input) (*Monitor, error) {
	if err := domain.RequireRole(p, PauseRole); err != nil {
		return nil, err
	}
	if in.Slug != nil || in.Schedule != nil || in.Timezone != nil || in.Environment != nil {
		if err := domain.RequireRole(p, SettingsRole); err != nil {
			return nil, err
		}
	}
	var out *Monitor
	err := ms.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		if pr.OrgID != p.OrgID || pr.DeletedAt != nil {
			return domain.NotFound("project")
		}
		m, err := ms.bySlug(ctx, tx, projectID, slug, true)
		if err != nil {
			return err
		}
		if err := in.apply(m, false); err != nil {
			return err
		}
		if in.settingsTouched() {
			// Edited by a person: check-ins no longer change it.
			m.Origin = in.origin()
		}
		if err := ms.save(ctx, tx, m); err != nil {
			return err
		}
		out = m
		return domain.RecordAudit(ctx, tx, p, "monitor.updated", m.Slug, map[string]any{"project_id": pr.ID, "paused": m.Paused, "schedule": m.Schedule.String()})
	})
	return out, err
}

// save writes m's settings and re-plans its states: paused ones expect
// nothing, the others their next run from their last check-in or now.
func (ms *Service) save(ctx context.Context, tx bun.Tx, m *Monitor) error {
	now := ms.Now()
	if _, err := tx.NewRaw(`UPDATE monitors SET schedule_type = ?, schedule_value = ?, schedule_unit = ?, timezone = ?, checkin_margin = ?,
		max_runtime = ?, failure_threshold = ?, recovery_threshold = ?, environment = ?, paused = ?, origin = ?, updated_at = ? WHERE id = ?`,
		m.Schedule.Type, m.Schedule.Value, m.Schedule.Unit, m.Timezone, m.CheckinMargin, m.MaxRuntime, m.FailureThreshold,
		m.RecoveryThreshold, m.Environment, m.Paused, m.Origin, now, m.ID).Exec(ctx); err != nil {
		return fmt.Errorf("monitors: save %s: %w", m.Slug, err)
	}
	m.UpdatedAt = now
	m.ScheduleType, m.ScheduleValue, m.ScheduleUnit = m.Schedule.Type, m.Schedule.Value, m.Schedule.Unit
	var states []struct {
		Env  string     `bun:"environment"`
		Last *time.Time `bun:"last_checkin_at"`
	}
	if err := tx.NewRaw(`SELECT environment, last_checkin_at FROM monitor_states WHERE monitor_id = ? FOR UPDATE`, m.ID).Scan(ctx, &states); err != nil {
		return fmt.Errorf("monitors: states: %w", err)
	}
	pl := m.plan()
	for _, st := range states {
		var exp, due *time.Time
		if !m.Paused && st.Last != nil {
			e := pl.next(*st.Last)
			if e.Before(now) {
				e = pl.next(now)
			}
			d := e.Add(time.Duration(m.CheckinMargin) * time.Minute)
			exp, due = &e, &d
		}
		if _, err := tx.NewRaw(`UPDATE monitor_states SET expected_at = ?, due_at = ? WHERE monitor_id = ? AND environment = ?`,
			exp, due, m.ID, st.Env).Exec(ctx); err != nil {
			return fmt.Errorf("monitors: re-plan: %w", err)
		}
	}
	return domain.Notify(ctx, tx, liveNotice(m.OrgID, m.ProjectID))
}

// Delete removes a monitor with its runs (its incidents stay in the inbox).
func (ms *Service) Delete(ctx context.Context, p *domain.Principal, projectID uuid.UUID, slug string) error {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return err
	}
	return ms.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		if pr.OrgID != p.OrgID || pr.DeletedAt != nil {
			return domain.NotFound("project")
		}
		res, err := tx.NewRaw(`DELETE FROM monitors WHERE project_id = ? AND slug = ?`, projectID, slug).Exec(ctx)
		if err != nil {
			return fmt.Errorf("monitors: delete %s: %w", slug, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.NotFound("monitor")
		}
		if err := domain.Notify(ctx, tx, liveNotice(pr.OrgID, pr.ID)); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, p, "monitor.deleted", slug, map[string]any{"project_id": pr.ID})
	})
}

// RotatePingKey revokes a monitor's ping key and makes a new one, answered
// once in PingURL (the old URL is a 404 from now on).
func (ms *Service) RotatePingKey(ctx context.Context, p *domain.Principal, projectID uuid.UUID, slug string) (*Monitor, error) {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return nil, err
	}
	var out *Monitor
	err := ms.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		if pr.OrgID != p.OrgID || pr.DeletedAt != nil {
			return domain.NotFound("project")
		}
		m, err := ms.bySlug(ctx, tx, projectID, slug, true)
		if err != nil {
			return err
		}
		key, lookup, hash := tokens.New(PingKeyPrefix)
		if _, err := tx.NewRaw(`UPDATE monitors SET ping_lookup = ?, ping_hash = ?, updated_at = ? WHERE id = ?`, lookup, hash, ms.Now(), m.ID).Exec(ctx); err != nil {
			return fmt.Errorf("monitors: rotate: %w", err)
		}
		m.PingLookup = &lookup
		m.fill()
		m.PingURL = ms.pingURL(key, m.Slug)
		out = m
		return domain.RecordAudit(ctx, tx, p, "monitor.ping_key_rotated", m.Slug, map[string]any{"project_id": pr.ID})
	})
	return out, err
}

// RevokePingKey revokes a monitor's ping key without a new one.
func (ms *Service) RevokePingKey(ctx context.Context, p *domain.Principal, projectID uuid.UUID, slug string) error {
	if err := domain.RequireRole(p, domain.RoleAdmin); err != nil {
		return err
	}
	return ms.s.WithProject(ctx, projectID, func(ctx context.Context, tx bun.Tx, pr *domain.Project) error {
		if pr.OrgID != p.OrgID || pr.DeletedAt != nil {
			return domain.NotFound("project")
		}
		res, err := tx.NewRaw(`UPDATE monitors SET ping_lookup = NULL, ping_hash = NULL, updated_at = ? WHERE project_id = ? AND slug = ?`, ms.Now(), projectID, slug).Exec(ctx)
		if err != nil {
			return fmt.Errorf("monitors: revoke: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return domain.NotFound("monitor")
		}
		return domain.RecordAudit(ctx, tx, p, "monitor.ping_key_revoked", slug, map[string]any{"project_id": pr.ID})
	})
}

// liveNotice is the live event of a change of a project's monitors.
func liveNotice(org, project uuid.UUID) string {
	return fmt.Sprintf(`{"kind":"monitor","org_id":%q,"project_id":%q}`, org, project)
}

func itoa(n int) string { return strconv.Itoa(n) }

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
