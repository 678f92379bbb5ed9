package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"anvil/domain"
	"anvil/domain/event"
	"anvil/domain/internal/dbutil"
	"anvil/domain/run"
)

// Incidents is the incident store as people and the repair worker see it:
// the inbox, an incident's page, the decisions and the repair lifecycle
// (incident_decisions.go). Grouping events into incidents is the ingest's
// (feed_ingest.go).
type Incidents struct {
	s     *domain.Store
	queue *run.Queue
}

// NewIncidents builds the service and registers its terminal hook on the
// queue, so a repair run that ends without a pull request moves its
// incident in the same transaction that terminalizes the run. Build it once
// per queue.
func NewIncidents(s *domain.Store, q *run.Queue) *Incidents {
	in := &Incidents{s: s, queue: q}
	q.OnTerminal(in.runTerminal)
	return in
}

// Incident is one row of the incident store.
type Incident struct {
	bun.BaseModel    `bun:"table:incidents"`
	ID               uuid.UUID  `bun:"id,pk,type:uuid"`
	OrgID            uuid.UUID  `bun:"org_id,type:uuid"`
	ProjectID        uuid.UUID  `bun:"project_id,type:uuid"`
	Environment      string     `bun:"environment"`
	Fingerprint      string     `bun:"fingerprint"`
	Title            string     `bun:"title"`
	ExceptionType    string     `bun:"exception_type"`
	Status           string     `bun:"status"`
	EventCount       int64      `bun:"event_count"`
	FirstSeen        time.Time  `bun:"first_seen"`
	LastSeen         time.Time  `bun:"last_seen"`
	LatestEventID    string     `bun:"latest_event_id"`
	Release          string     `bun:"release"`
	PRURL            string     `bun:"pr_url"`
	RepairRunID      *uuid.UUID `bun:"repair_run_id,type:uuid"`
	NeedsHumanReason string     `bun:"needs_human_reason"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`
	// Number is the incident's per-project number (a trigger gives it;
	// docs/releases.md, "Short ids").
	Number int64 `bun:"number,nullzero"`
	// FirstRelease is the release its first events came from.
	FirstRelease string `bun:"first_release"`
	// Level, Culprit and SearchText follow the latest stored event (a
	// trigger keeps them: db/migrations/20261204004000_incident_search):
	// its level, its culprit frame ("charge (CheckoutService.java:88)"),
	// and the lower-cased text the inbox's search reads.
	Level      string `bun:"level"`
	Culprit    string `bun:"culprit"`
	SearchText string `bun:"search_text"`
	// ProjectSlug is read with the incident where its short id is shown.
	ProjectSlug string `bun:"project_slug,scanonly"`
	Fix
}

// IncidentView is an incident as it leaves the domain (docs/contracts/private-api.md).
type IncidentView struct {
	ID               uuid.UUID  `json:"id"`
	ProjectID        uuid.UUID  `json:"project_id"`
	ProjectName      string     `json:"project_name,omitempty"`
	Status           string     `json:"status"`
	Title            string     `json:"title"`
	ExceptionType    string     `json:"exception_type"`
	Environment      string     `json:"environment"`
	EventCount       int64      `json:"event_count"`
	FirstSeen        time.Time  `json:"first_seen"`
	LastSeen         time.Time  `json:"last_seen"`
	Release          string     `json:"release"`
	PRURL            string     `json:"pr_url"`
	RepairRunID      *uuid.UUID `json:"repair_run_id"`
	NeedsHumanReason string     `json:"needs_human_reason"`
	// Level and Culprit are the latest event's level and culprit frame.
	Level   string `json:"level"`
	Culprit string `json:"culprit"`
	// ShortID is "<SLUG>-<number>" (SHOP-12), accepted wherever an id is.
	ShortID string `json:"short_id"`
	Number  int64  `json:"number"`
	// Fix is the fix chain (docs/releases.md); null until a fix is known.
	Fix *FixView `json:"fix"`
	// Monitor: a cron monitor opened it; no code repair is ever run for it.
	Monitor bool `json:"monitor,omitempty"`
}

// MonitorFingerprintPrefix starts the fingerprint of a cron monitor's
// incident ("monitor:<id>", domain/monitor).
const MonitorFingerprintPrefix = "monitor:"

// IsMonitor reports whether a cron monitor opened the incident. A missed
// or failed job is not a bug in the repository: such an incident ignores
// its binding's repair policy and is never approved for a code repair
// (docs/monitors.md, "Incidents").
func (i *Incident) IsMonitor() bool {
	return strings.HasPrefix(i.Fingerprint, MonitorFingerprintPrefix)
}

// ShortID is the incident's short id, "<SLUG>-<number>" (SHOP-12); ""
// when the project's slug was not read with it.
func ShortID(slug string, number int64) string {
	if slug == "" || number == 0 {
		return ""
	}
	return strings.ToUpper(slug) + "-" + strconv.FormatInt(number, 10)
}

// ParseShortID splits a short id into the project's slug and the number;
// ok is false for anything that is not one.
func ParseShortID(s string) (slug string, number int64, ok bool) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 || i == len(s)-1 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(s[i+1:], 10, 64)
	slug = strings.ToLower(s[:i])
	if err != nil || n <= 0 || !domain.ValidSlug(slug) {
		return "", 0, false
	}
	return slug, n, true
}

// View renders the incident for the outside.
func (i *Incident) View() IncidentView {
	return IncidentView{ID: i.ID, ProjectID: i.ProjectID, Status: i.Status, Title: i.Title, ExceptionType: i.ExceptionType,
		Environment: i.Environment, EventCount: i.EventCount, FirstSeen: i.FirstSeen.UTC(), LastSeen: i.LastSeen.UTC(),
		Release: i.Release, PRURL: i.PRURL, RepairRunID: i.RepairRunID, NeedsHumanReason: i.NeedsHumanReason,
		ShortID: ShortID(i.ProjectSlug, i.Number), Number: i.Number, Fix: i.Fix.view(), Level: i.Level, Culprit: i.Culprit,
		Monitor: i.IsMonitor()}
}

func validIncidentStatus(s string) bool {
	for _, v := range domain.IncidentStatuses {
		if v == s {
			return true
		}
	}
	return false
}

// FilterVerifying is the inbox's "verifying" filter: incidents whose fix
// shipped and whose window is open or waiting (docs/releases.md). It is a
// filter, not a status: the nine statuses are seed 004's.
const FilterVerifying = "VERIFYING"

// FilterUnresolved is the inbox's "unresolved" filter, where the inbox
// opens: every status but CLOSED and IGNORED, which wait behind their own
// filters. FilterAll is every status.
const (
	FilterUnresolved = "UNRESOLVED"
	FilterAll        = "ALL"
)

// unresolvedSQL selects the unresolved incidents.
const unresolvedSQL = "i.status NOT IN ('CLOSED', 'IGNORED')"

// verifyingSQL selects the verifying incidents.
const verifyingSQL = "i.fix_commit_sha <> '' AND i.fix_shipped_at IS NOT NULL AND i.fix_verified_at IS NULL AND i.fix_recurred_at IS NULL AND i.status NOT IN ('CLOSED', 'IGNORED')"

// InboxPageSize is how many incidents one inbox page holds.
const InboxPageSize = 50

// IncidentFilter narrows the inbox. Zero values mean "all".
type IncidentFilter struct {
	ProjectID   uuid.UUID
	Status      string
	Environment string
	Page        int // 0-based
	Limit       int // default InboxPageSize, at most 200
	// Search (inbox_search.go): free text over titles and the latest
	// event's message, the latest event's level, the incident's release.
	Query   string
	Level   string
	Release string
}

// IncidentPage is one page of the inbox.
type IncidentPage struct {
	Incidents []IncidentView
	// Counts are per status under the project and environment filters
	// (not the status filter, so the tabs show what each would hold).
	Counts map[string]int
	// Unresolved is how many of them are neither CLOSED nor IGNORED.
	Unresolved   int
	Environments []string
	HasMore      bool
}

// normalize validates f; bad values are specific 422s.
func (f *IncidentFilter) normalize() error {
	f.Status = strings.ToUpper(strings.TrimSpace(f.Status))
	if f.Status == FilterAll {
		f.Status = ""
	}
	if f.Status != "" && f.Status != FilterVerifying && f.Status != FilterUnresolved && !validIncidentStatus(f.Status) {
		return domain.Invalid("invalid_status", "status must be one of %s, %s, %s or %s", strings.Join(domain.IncidentStatuses, ", "),
			FilterUnresolved, FilterVerifying, FilterAll)
	}
	f.Environment = strings.ToLower(strings.TrimSpace(f.Environment))
	if f.Environment != "" && !domain.ValidEnvironment(f.Environment) {
		return domain.Invalid("invalid_environment", "environment must be a label such as production")
	}
	if err := f.normalizeSearch(); err != nil {
		return err
	}
	if f.Page < 0 {
		return domain.Invalid("invalid_page", "page must be 0 or more")
	}
	if f.Limit <= 0 {
		f.Limit = InboxPageSize
	}
	if f.Limit > 200 {
		return domain.Invalid("invalid_limit", "limit must be at most 200")
	}
	return nil
}

type incidentRow struct {
	Incident    `bun:",extend"`
	ProjectName string `bun:"project_name"`
}

// List returns one inbox page of the organisation's incidents, most recently
// seen first. It reads through incidents_inbox_idx (org, last_seen) or
// incidents_project_last_seen_idx, so the first page costs the same with
// ten or ten thousand incidents.
func (in *Incidents) List(ctx context.Context, orgID uuid.UUID, f IncidentFilter) (IncidentPage, error) {
	out := IncidentPage{Incidents: []IncidentView{}, Counts: map[string]int{}}
	if err := f.normalize(); err != nil {
		return out, err
	}
	gone, err := in.tombstoned(ctx, orgID)
	if err != nil {
		return out, err
	}
	where := func(q *bun.SelectQuery, withStatus bool) *bun.SelectQuery {
		q = q.Where("i.org_id = ?", orgID)
		if len(gone) > 0 {
			q = q.Where("i.project_id <> ALL(?)", pgdialect.Array(gone))
		}
		if f.ProjectID != uuid.Nil {
			q = q.Where("i.project_id = ?", f.ProjectID)
		}
		if f.Environment != "" {
			q = q.Where("i.environment = ?", f.Environment)
		}
		switch {
		case withStatus && f.Status == FilterVerifying:
			q = q.Where(verifyingSQL)
		case withStatus && f.Status == FilterUnresolved:
			q = q.Where(unresolvedSQL)
		case withStatus && f.Status != "":
			q = q.Where("i.status = ?", f.Status)
		}
		return f.searchWhere(q)
	}
	var rows []incidentRow
	// The tombstoned projects' incidents are left out by where() (gone);
	// the join only names each row's project, so it reads the table as is
	// (domain.AllProjects). Joining LiveProjects instead made the planner
	// guess one live project and start from projects: 18 ms, not 0.4 ms,
	// for the first page of 10,000 incidents (docs/figures.md).
	q := in.s.DB.NewSelect().TableExpr("incidents AS i").ColumnExpr("i.*, p.name AS project_name, p.slug AS project_slug").
		Join("JOIN " + domain.AllProjects + " AS p ON p.id = i.project_id")
	err = where(q, true).OrderExpr("i.last_seen DESC, i.id DESC").Limit(int64(f.Limit+1)).Offset(int64(f.Page*f.Limit)).Scan(ctx, &rows)
	if err != nil {
		return out, fmt.Errorf("incidents: list: %w", err)
	}
	if len(rows) > f.Limit {
		out.HasMore, rows = true, rows[:f.Limit]
	}
	for i := range rows {
		v := rows[i].View()
		v.ProjectName = rows[i].ProjectName
		out.Incidents = append(out.Incidents, v)
	}
	var counts []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	cq := in.s.DB.NewSelect().TableExpr("incidents AS i").ColumnExpr("i.status, count(*) AS n").GroupExpr("i.status")
	if err := where(cq, false).Scan(ctx, &counts); err != nil {
		return out, fmt.Errorf("incidents: counts: %w", err)
	}
	for _, c := range counts {
		out.Counts[c.Status] = c.N
	}
	var verifying int
	if err := where(in.s.DB.NewSelect().TableExpr("incidents AS i").ColumnExpr("count(*)").Where(verifyingSQL), false).Scan(ctx, &verifying); err != nil {
		return out, fmt.Errorf("incidents: verifying count: %w", err)
	}
	if verifying > 0 {
		out.Counts[FilterVerifying] = verifying
	}
	for _, c := range counts {
		if c.Status != domain.IncidentClosed && c.Status != domain.IncidentIgnored {
			out.Unresolved += c.N
		}
	}
	// The environments for the filter: a loose index scan over the group
	// key would be faster still, but DISTINCT over one org stays small.
	eq := in.s.DB.NewSelect().TableExpr("incidents AS i").ColumnExpr("DISTINCT i.environment").Where("i.org_id = ?", orgID)
	if len(gone) > 0 {
		eq = eq.Where("i.project_id <> ALL(?)", pgdialect.Array(gone))
	}
	if err := eq.OrderExpr("1").Limit(100).Scan(ctx, &out.Environments); err != nil {
		return out, fmt.Errorf("incidents: environments: %w", err)
	}
	return out, nil
}

// tombstoned returns the organisation's deleted projects whose erasure is
// still under way (docs/erasure.md) — almost always none, so the inbox's
// queries carry the filter only then: as a NOT IN subquery on every page
// it cost the first page a third of its time.
func (in *Incidents) tombstoned(ctx context.Context, orgID uuid.UUID) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	err := in.s.DB.NewSelect().TableExpr(domain.DeletedProjects+" AS p").Column("id").Where("org_id = ?", orgID).Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("incidents: deleted projects: %w", err)
	}
	return ids, nil
}

// Get returns an incident of the organisation.
func (in *Incidents) Get(ctx context.Context, orgID, id uuid.UUID) (*Incident, error) {
	inc := new(Incident)
	err := in.s.DB.NewSelect().Model(inc).ColumnExpr("incident.*").
		ColumnExpr("(SELECT slug FROM "+domain.AllProjects+" WHERE id = incident.project_id) AS project_slug").
		Where("id = ? AND org_id = ?", id, orgID).
		Where("project_id NOT IN (SELECT id FROM "+domain.DeletedProjects+" p WHERE org_id = ?)", orgID).Scan(ctx)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("incident")
	}
	if err != nil {
		return nil, fmt.Errorf("incidents: get %s: %w", id, err)
	}
	return inc, nil
}

// Resolve turns what a caller wrote where an incident id goes — its id or
// its short id (SHOP-12, any case) — into the id, within the organisation.
// Anything else, and a short id of no incident, is a 404 like an unknown id.
func (in *Incidents) Resolve(ctx context.Context, orgID uuid.UUID, raw string) (uuid.UUID, error) {
	if id, err := uuid.Parse(raw); err == nil {
		return id, nil
	}
	slug, n, ok := ParseShortID(raw)
	if !ok {
		return uuid.Nil, domain.NotFound("incident")
	}
	var id uuid.UUID
	err := in.s.DB.NewRaw(`SELECT i.id FROM incidents i JOIN `+domain.LiveProjects+` p ON p.id = i.project_id
		WHERE p.org_id = ? AND p.slug = ? AND i.number = ?`, orgID, slug, n).Scan(ctx, &id)
	if dbutil.IsNoRows(err) {
		return uuid.Nil, domain.NotFound("incident")
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("incidents: resolve %s: %w", raw, err)
	}
	return id, nil
}

// IncidentEvent is one stored event of an incident, as its page lists it.
type IncidentEvent struct {
	EventID    string    `json:"event_id"`
	ReceivedAt time.Time `json:"received_at"`
	OccurredAt time.Time `json:"occurred_at"`
	Release    string    `json:"release"`
	Message    string    `json:"message"`
	Level      string    `json:"level,omitempty"`
	UserID     string    `json:"user_id,omitempty"`
}

// IncidentTransition is one recorded lifecycle step.
type IncidentTransition struct {
	From      string    `json:"from"`
	To        string    `json:"to"`
	ActorKind string    `json:"actor_kind"`
	ActorID   string    `json:"actor_id"`
	Actor     string    `json:"actor"` // the person's email for person actors
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

// IncidentDetail is everything an incident's page shows.
type IncidentDetail struct {
	Incident    IncidentView         `json:"incident"`
	ProjectName string               `json:"project_name"`
	Latest      *event.Event         `json:"latest_event"`
	Events      []IncidentEvent      `json:"events"`
	Transitions []IncidentTransition `json:"transitions"`
	// Hourly counts the incident's events over the last 24 hours, oldest
	// hour first; the last bucket is the current hour.
	Hourly    [24]int      `json:"hourly"`
	RepairRun *run.RunView `json:"repair_run"`
	// Browsers and OperatingSystems an incident's recent events came from
	// (clients.go).
	Browsers         []ClientCount `json:"browsers"`
	OperatingSystems []ClientCount `json:"operating_systems"`
}

// Detail reads an incident's page: the latest event (scrubbed as stored),
// the 50 newest events, the transitions with their actors, the 24-hour
// histogram and the repair run.
func (in *Incidents) Detail(ctx context.Context, orgID, id uuid.UUID) (*IncidentDetail, error) {
	inc, err := in.Get(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	d := &IncidentDetail{Incident: inc.View(), Events: []IncidentEvent{}, Transitions: []IncidentTransition{}}
	if d.Browsers, d.OperatingSystems, err = in.clients(ctx, id); err != nil {
		return nil, err
	}
	if err := in.s.DB.NewRaw(`SELECT name FROM `+domain.AllProjects+` WHERE id = ?`, inc.ProjectID).Scan(ctx, &d.ProjectName); err != nil {
		return nil, fmt.Errorf("incidents: project name: %w", err)
	}
	var evs []struct {
		Payload    json.RawMessage `bun:"payload"`
		ReceivedAt time.Time       `bun:"received_at"`
		OccurredAt time.Time       `bun:"occurred_at"`
	}
	if err := in.s.DB.NewRaw(`SELECT payload, received_at, occurred_at FROM feed_events WHERE incident_id = ?
		ORDER BY received_at DESC LIMIT 50`, id).Scan(ctx, &evs); err != nil {
		return nil, fmt.Errorf("incidents: events: %w", err)
	}
	for i, e := range evs {
		var ev event.Event
		if err := json.Unmarshal(e.Payload, &ev); err != nil {
			continue
		}
		if i == 0 {
			d.Latest = &ev
		}
		row := IncidentEvent{EventID: ev.EventID, ReceivedAt: e.ReceivedAt.UTC(), OccurredAt: e.OccurredAt.UTC(), Release: ev.Release}
		if ev.Exception != nil {
			row.Message = ev.Exception.Message
		}
		d.Events = append(d.Events, row)
	}
	var trs []struct {
		From      *string   `bun:"from_status"`
		To        string    `bun:"to_status"`
		ActorKind string    `bun:"actor_kind"`
		ActorID   string    `bun:"actor_id"`
		Email     *string   `bun:"email"`
		Reason    string    `bun:"reason"`
		At        time.Time `bun:"at"`
	}
	if err := in.s.DB.NewRaw(`SELECT t.from_status, t.to_status, t.actor_kind, t.actor_id, u.email, t.reason, t.at
		FROM incident_transitions t
		LEFT JOIN users u ON t.actor_kind = 'person' AND u.id::text = t.actor_id
		WHERE t.incident_id = ? ORDER BY t.id`, id).Scan(ctx, &trs); err != nil {
		return nil, fmt.Errorf("incidents: transitions: %w", err)
	}
	for _, t := range trs {
		tr := IncidentTransition{To: t.To, ActorKind: t.ActorKind, ActorID: t.ActorID, Actor: t.ActorID, Reason: t.Reason, At: t.At.UTC()}
		if t.From != nil {
			tr.From = *t.From
		}
		if t.Email != nil {
			tr.Actor = *t.Email
		}
		d.Transitions = append(d.Transitions, tr)
	}
	now := in.s.Now()
	hist, err := in.hourly(ctx, "incident_id", id, now)
	if err != nil {
		return nil, err
	}
	d.Hourly = hist
	if inc.RepairRunID != nil {
		r, err := in.queue.RunGet(ctx, orgID, *inc.RepairRunID)
		if err == nil {
			v := r.View()
			d.RepairRun = &v
		}
	}
	return d, nil
}

// hourly counts events of one incident or project per hour over the 24
// hours ending now (the current hour last).
func (in *Incidents) hourly(ctx context.Context, col string, id uuid.UUID, now time.Time) ([24]int, error) {
	var out [24]int
	end := now.Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-24 * time.Hour)
	var rows []struct {
		H int `bun:"h"`
		N int `bun:"n"`
	}
	err := in.s.DB.NewRaw(`SELECT floor(extract(epoch FROM (received_at - ?)) / 3600)::int AS h, count(*) AS n
		FROM feed_events WHERE `+col+` = ? AND received_at >= ? AND received_at < ? GROUP BY 1`,
		start, id, start, end).Scan(ctx, &rows)
	if err != nil {
		return out, fmt.Errorf("incidents: hourly: %w", err)
	}
	for _, r := range rows {
		if r.H >= 0 && r.H < 24 {
			out[r.H] = r.N
		}
	}
	return out, nil
}

// ProjectHourly is the dashboard's sparkline: a project's events per hour
// over the last 24 hours.
func (in *Incidents) ProjectHourly(ctx context.Context, projectID uuid.UUID) ([24]int, error) {
	return in.hourly(ctx, "project_id", projectID, in.s.Now())
}

// RepairInput is what a repair command reads from ANVIL_INCIDENT_FILE: the
// incident and its latest event, both as stored (the event was scrubbed
// before it was stored, and nothing here adds what the ingest removed).
type RepairInput struct {
	Incident    IncidentView    `json:"incident"`
	LatestEvent json.RawMessage `json:"latest_event"`
}

// RepairInputFor returns the incident of a repair run and its input.
func (in *Incidents) RepairInputFor(ctx context.Context, run *run.Run) (*Incident, []byte, error) {
	if run.IncidentID == nil {
		return nil, nil, domain.Invalid("not_a_repair", "run %s has no incident", run.ID)
	}
	inc, err := in.Get(ctx, run.OrgID, *run.IncidentID)
	if err != nil {
		return nil, nil, err
	}
	ri := RepairInput{Incident: inc.View(), LatestEvent: json.RawMessage("null")}
	var payload string
	err = in.s.DB.NewRaw(`SELECT payload FROM feed_events WHERE incident_id = ? ORDER BY received_at DESC LIMIT 1`, inc.ID).Scan(ctx, &payload)
	if err != nil && !dbutil.IsNoRows(err) {
		return nil, nil, fmt.Errorf("incidents: latest event: %w", err)
	}
	if len(payload) > 0 {
		ri.LatestEvent = json.RawMessage(payload)
	}
	b, err := json.MarshalIndent(ri, "", "  ")
	return inc, b, err
}

// RequestRepairs is the ingest's Feed.OnQueued hook: one dispatch job per
// incident the `auto` policy moved to QUEUED, in the ingest's transaction.
func (in *Incidents) RequestRepairs(ctx context.Context, tx bun.Tx, projectID uuid.UUID, ids []uuid.UUID) error {
	if in.s.Jobs() == nil {
		return fmt.Errorf("domain: no job inserter configured")
	}
	params := make([]river.InsertManyParams, 0, len(ids))
	for _, id := range ids {
		params = append(params, river.InsertManyParams{Args: domain.DispatchRepairArgs{IncidentID: id}})
	}
	if _, err := in.s.Jobs().InsertManyTx(ctx, tx.Tx, params); err != nil {
		return fmt.Errorf("incidents: request repairs for %s: %w", projectID, err)
	}
	return nil
}
