package incident

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/event"
	"anvil/domain/internal/dbutil"
)

// What a person diagnoses an incident from, beside its page's summary: one
// stored event whole, the incident's spread over tags, releases and users,
// and its events a page at a time (docs/contracts/private-api.md, "Incident
// diagnosis"). Everything here reads the stored, scrubbed events.

// EventDetail is one stored event of an incident, whole.
type EventDetail struct {
	IncidentID uuid.UUID   `json:"incident_id"`
	ReceivedAt time.Time   `json:"received_at"`
	OccurredAt time.Time   `json:"occurred_at"`
	Event      event.Event `json:"event"`
	// Breadcrumbs are the event's breadcrumbs with their times split out
	// where the sender (or the Sentry door) gave one.
	Breadcrumbs []Breadcrumb `json:"breadcrumbs"`
	// Newer and Older are the neighbouring events' ids ("" at either end).
	Newer string `json:"newer_event_id"`
	Older string `json:"older_event_id"`
}

// Breadcrumb is one breadcrumb: its time when known, and its text.
type Breadcrumb struct {
	At   *time.Time `json:"at"`
	Text string     `json:"text"`
}

// SplitBreadcrumb reads a stored breadcrumb: the Sentry door writes a
// breadcrumb's time before its text ("2026-12-03T10:00:00.123Z http: GET
// /cart"); a breadcrumb without one is all text.
func SplitBreadcrumb(s string) Breadcrumb {
	if i := strings.IndexByte(s, ' '); i >= 20 && i <= 35 {
		if t, err := time.Parse(time.RFC3339Nano, s[:i]); err == nil {
			t = t.UTC()
			return Breadcrumb{At: &t, Text: s[i+1:]}
		}
	}
	return Breadcrumb{Text: s}
}

// Event reads one event of an incident by its event id (any case, with or
// without dashes as the sender spelled it).
func (in *Incidents) Event(ctx context.Context, orgID, incidentID uuid.UUID, eventID string) (*EventDetail, error) {
	if _, err := in.Get(ctx, orgID, incidentID); err != nil {
		return nil, err
	}
	// The key is a uuid (migration 20261207040000): any spelling of the
	// same UUID finds the event; what is no UUID is no stored event.
	key, err := uuid.Parse(strings.TrimSpace(eventID))
	if err != nil {
		return nil, domain.NotFound("event")
	}
	var row struct {
		Payload    json.RawMessage `bun:"payload"`
		ReceivedAt time.Time       `bun:"received_at"`
		OccurredAt time.Time       `bun:"occurred_at"`
	}
	err = in.s.DB.NewRaw(`SELECT payload, received_at, occurred_at FROM feed_events
		WHERE org_id = ? AND event_id_key = ? AND incident_id = ?`, orgID, key, incidentID).Scan(ctx, &row)
	if dbutil.IsNoRows(err) {
		return nil, domain.NotFound("event")
	}
	if err != nil {
		return nil, fmt.Errorf("incidents: event %s: %w", key, err)
	}
	d := &EventDetail{IncidentID: incidentID, ReceivedAt: row.ReceivedAt.UTC(), OccurredAt: row.OccurredAt.UTC(), Breadcrumbs: []Breadcrumb{}}
	if err := json.Unmarshal(row.Payload, &d.Event); err != nil {
		return nil, fmt.Errorf("incidents: event %s: decode: %w", key, err)
	}
	for _, b := range d.Event.Breadcrumbs {
		d.Breadcrumbs = append(d.Breadcrumbs, SplitBreadcrumb(b))
	}
	// The neighbours in the incident's list order (received_at, then key).
	err = in.s.DB.NewRaw(`SELECT
		COALESCE((SELECT payload::json->>'event_id' FROM feed_events WHERE incident_id = ?0 AND (received_at, event_id_key) > (?1, ?2)
			ORDER BY received_at, event_id_key LIMIT 1), '') AS newer,
		COALESCE((SELECT payload::json->>'event_id' FROM feed_events WHERE incident_id = ?0 AND (received_at, event_id_key) < (?1, ?2)
			ORDER BY received_at DESC, event_id_key DESC LIMIT 1), '') AS older`, incidentID, row.ReceivedAt, key).
		Scan(ctx, &d.Newer, &d.Older)
	if err != nil {
		return nil, fmt.Errorf("incidents: event %s: neighbours: %w", key, err)
	}
	return d, nil
}

// EventsPage is a page of an incident's events, newest first, and the
// cursor of the next (older) page, "" on the last.
type EventsPage struct {
	Events []IncidentEvent `json:"events"`
	Next   string          `json:"next_before"`
}

// EventsPageSize is how many events one page of an incident's list holds.
const EventsPageSize = 50

// Events lists an incident's stored events newest first, a page at a time.
// before is the previous page's Next ("" for the first page); a cursor that
// is not one is a 422 invalid_cursor.
func (in *Incidents) Events(ctx context.Context, orgID, incidentID uuid.UUID, before string) (*EventsPage, error) {
	if _, err := in.Get(ctx, orgID, incidentID); err != nil {
		return nil, err
	}
	q := in.s.DB.NewSelect().Table("feed_events").Column("payload", "received_at", "occurred_at", "event_id_key").
		Where("incident_id = ?", incidentID)
	if before != "" {
		at, key, ok := parseEventCursor(before)
		if !ok {
			return nil, domain.Invalid("invalid_cursor", "before must be the next_before of a previous page")
		}
		q = q.Where("(received_at, event_id_key) < (?, ?)", at, key)
	}
	var rows []struct {
		Payload    json.RawMessage `bun:"payload"`
		ReceivedAt time.Time       `bun:"received_at"`
		OccurredAt time.Time       `bun:"occurred_at"`
		Key        uuid.UUID       `bun:"event_id_key"`
	}
	if err := q.OrderExpr("received_at DESC, event_id_key DESC").Limit(EventsPageSize+1).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("incidents: events of %s: %w", incidentID, err)
	}
	page := &EventsPage{Events: []IncidentEvent{}}
	if len(rows) > EventsPageSize {
		rows = rows[:EventsPageSize]
		last := rows[EventsPageSize-1]
		page.Next = strconv.FormatInt(last.ReceivedAt.UnixMicro(), 10) + "_" + last.Key.String()
	}
	for _, r := range rows {
		var ev event.Event
		if err := json.Unmarshal(r.Payload, &ev); err != nil {
			continue
		}
		row := IncidentEvent{EventID: ev.EventID, ReceivedAt: r.ReceivedAt.UTC(), OccurredAt: r.OccurredAt.UTC(), Release: ev.Release,
			Level: ev.Level, UserID: ev.User.ID}
		if ev.Exception != nil {
			row.Message = ev.Exception.Message
		}
		page.Events = append(page.Events, row)
	}
	return page, nil
}

// parseEventCursor reads "<received_at in Unix µs>_<event key>".
func parseEventCursor(s string) (time.Time, uuid.UUID, bool) {
	us, k, ok := strings.Cut(s, "_")
	if !ok {
		return time.Time{}, uuid.Nil, false
	}
	key, err := uuid.Parse(k)
	if err != nil {
		return time.Time{}, uuid.Nil, false
	}
	n, err := strconv.ParseInt(us, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, uuid.Nil, false
	}
	return time.UnixMicro(n).UTC(), key, true
}

// Spread is how an incident's events spread: the level of its latest event,
// its top tags with their values' shares, how many releases and users it
// touched, and the releases it was first and last seen in. The level,
// tags, releases and users are read from the newest SpreadSample events
// (Sampled says how many there were); the first and last releases are the
// incident's own, kept by the ingest over all its events.
type Spread struct {
	Level            string     `json:"level"`
	Tags             []TagCount `json:"top_tags"`
	Releases         int        `json:"releases_affected"`
	Users            int        `json:"users_affected"`
	FirstSeenRelease string     `json:"first_seen_release"`
	LastSeenRelease  string     `json:"last_seen_release"`
	Sampled          int        `json:"sampled_events"`
}

// TagCount is one tag key and its most frequent values.
type TagCount struct {
	Key    string       `json:"key"`
	Total  int          `json:"total"`
	Values []ValueCount `json:"values"`
}

// ValueCount is one tag value and how many events carry it.
type ValueCount struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

// spreadKeys and spreadValues bound the tag distribution a page shows.
const (
	spreadKeys   = 6
	spreadValues = 4
)

// SpreadSample is how many of an incident's newest events its spread is
// read from: the page costs the same for an incident of ten events or of a
// million, and the newest events say best how it spreads now
// (docs/architecture.md, "Incidents and cards").
const SpreadSample = 1000

// The OpenTelemetry door's trace_id and span_id tags name one trace each:
// kept on the event (and its link to the trace), never a "top tag".
//
// spreadSQL reads the sample through feed_events_incident_idx (the
// incident's events, newest first) and counts in it; spreadTagsSQL does
// the top keys and their top values in the same sample, in SQL, so no
// more than spreadKeys × spreadValues rows leave the database.
const (
	spreadSQL = `WITH sample AS (
			SELECT r.level, r.release, r."user"->>'id' AS user_id
			FROM (SELECT payload FROM feed_events WHERE incident_id = ?0 ORDER BY received_at DESC LIMIT ?1) e,
			json_to_record(e.payload::json) AS r(level text, release text, "user" json))
		SELECT
			COALESCE((SELECT level FROM sample LIMIT 1), '') AS level,
			(SELECT count(DISTINCT NULLIF(release, '')) FROM sample) AS releases,
			(SELECT count(DISTINCT NULLIF(user_id, '')) FROM sample) AS users,
			(SELECT count(*) FROM sample) AS sampled`
	spreadTagsSQL = `WITH sample AS (
			SELECT r.tags
			FROM (SELECT payload FROM feed_events WHERE incident_id = ?0 ORDER BY received_at DESC LIMIT ?1) e,
			json_to_record(e.payload::json) AS r(tags json)),
		pairs AS (
			SELECT t.key, t.value, count(*) AS n
			FROM sample, json_each_text(COALESCE(sample.tags, '{}'::json)) AS t(key, value)
			WHERE t.key NOT IN ('trace_id', 'span_id')
			GROUP BY t.key, t.value),
		top_keys AS (
			SELECT key, sum(n)::int AS total FROM pairs GROUP BY key ORDER BY total DESC, key LIMIT ?2),
		ranked AS (
			SELECT p.key, p.value, p.n, k.total, row_number() OVER (PARTITION BY p.key ORDER BY p.n DESC, p.value) AS rank
			FROM pairs p JOIN top_keys k ON k.key = p.key)
		SELECT key, value, n, total FROM ranked WHERE rank <= ?3 ORDER BY total DESC, key, n DESC, value`
)

// Spread reads how an incident's newest stored events spread. Users are
// the distinct user ids of the events that name one: the address hash the
// ingest puts on every event is the sender's (a server's, for a back end),
// not a user, so an event without a user id counts none.
func (in *Incidents) Spread(ctx context.Context, orgID, incidentID uuid.UUID) (*Spread, error) {
	inc, err := in.Get(ctx, orgID, incidentID)
	if err != nil {
		return nil, err
	}
	sp := &Spread{Tags: []TagCount{}, FirstSeenRelease: inc.FirstRelease, LastSeenRelease: inc.Release}
	err = in.s.DB.NewRaw(spreadSQL, incidentID, SpreadSample).Scan(ctx, &sp.Level, &sp.Releases, &sp.Users, &sp.Sampled)
	if err != nil {
		return nil, fmt.Errorf("incidents: spread of %s: %w", incidentID, err)
	}
	var tags []struct {
		Key   string `bun:"key"`
		Value string `bun:"value"`
		N     int    `bun:"n"`
		Total int    `bun:"total"`
	}
	if err := in.s.DB.NewRaw(spreadTagsSQL, incidentID, SpreadSample, spreadKeys, spreadValues).Scan(ctx, &tags); err != nil {
		return nil, fmt.Errorf("incidents: tags of %s: %w", incidentID, err)
	}
	for _, t := range tags {
		if n := len(sp.Tags); n == 0 || sp.Tags[n-1].Key != t.Key {
			sp.Tags = append(sp.Tags, TagCount{Key: t.Key, Total: t.Total})
		}
		last := &sp.Tags[len(sp.Tags)-1]
		last.Values = append(last.Values, ValueCount{Value: t.Value, Count: t.N})
	}
	return sp, nil
}
