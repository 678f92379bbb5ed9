package monitor

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/card"
	"anvil/domain/event"
	"anvil/domain/incident"
	"anvil/domain/internal/dbutil"
)

// A failing monitor's incident (docs/monitors.md, "Incidents"): one per
// monitor and environment — its fingerprint is "monitor:<id>", so the
// incidents' group key (project, environment, fingerprint) holds it to
// one —, in the ordinary inbox, its failed runs as its events, moved
// through domain/incident's doors (Created, Regressed, Recovered) like
// the feed's incidents: the same lifecycle, card and alert rules; the
// binding's repair policy is not theirs (monitorPolicy).

// outcome is a finished run to count against the thresholds.
type outcome struct {
	status string // ok, error, timeout, missed
	title  string // the incident's title for a failure
	at     time.Time
	run    Run
}

// record counts o on st and opens, reopens or closes the incident.
func (ms *Service) record(ctx context.Context, tx bun.Tx, m *Monitor, st *state, o outcome) error {
	if !st.count(m, o) {
		return nil
	}
	if o.status == StatusOK {
		return ms.recoverIncident(ctx, tx, m, st)
	}
	return ms.failIncident(ctx, tx, m, st, o)
}

// count counts o on st against the thresholds and reports whether the
// incident moves: a failure at the failure threshold opens, reopens or
// counts on it; a good run at the recovery threshold closes it. The
// check-in's two-round-trip path (checkin_fast.go) stores what changes
// nothing else and leaves the rest to record.
func (st *state) count(m *Monitor, o outcome) bool {
	if o.status == StatusOK {
		st.Failures = 0
		st.OKs++
		st.OKTimes = append(st.OKTimes, o.at)
		if n := m.RecoveryThreshold; len(st.OKTimes) > n {
			st.OKTimes = st.OKTimes[len(st.OKTimes)-n:]
		}
		return st.IncidentID != nil && st.OKs >= m.RecoveryThreshold
	}
	st.OKs, st.OKTimes = 0, nil
	st.Failures++
	return st.Failures >= m.FailureThreshold
}

// monitorPolicy is the policy every monitor's incident lands under,
// whatever its environment's binding says: a missed or failed job is not a
// bug in the repository, so no code repair is queued or awaits approval for
// it (docs/monitors.md, "Incidents"), and a monitor without a binding is
// observed all the same.
const monitorPolicy = domain.PolicyObserve

// failIncident opens the monitor's incident, reopens it when closed, or
// counts the failure on it, with the run as its newest event.
func (ms *Service) failIncident(ctx context.Context, tx bun.Tx, m *Monitor, st *state, o outcome) error {
	if o.title == "" {
		o.title = m.Slug + " failed"
	}
	fp := "monitor:" + m.ID.String()
	var cur struct {
		ID     uuid.UUID `bun:"id"`
		Status string    `bun:"status"`
	}
	err := tx.NewRaw(`SELECT id, status FROM incidents WHERE project_id = ? AND environment = ? AND fingerprint = ? FOR UPDATE`,
		m.ProjectID, st.Env, fp).Scan(ctx, &cur)
	if err != nil && !dbutil.IsNoRows(err) {
		return fmt.Errorf("monitors: find the incident: %w", err)
	}
	eventID := hex.EncodeToString(uuidBytes(uuid.New()))
	var trs []incident.Transition
	switch {
	case dbutil.IsNoRows(err):
		policy := monitorPolicy
		cur.ID = uuid.New()
		if _, err := tx.NewRaw(`INSERT INTO incidents (id, org_id, project_id, environment, fingerprint, title, exception_type, status,
			event_count, first_seen, last_seen, latest_event_id, release, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 'CronMonitor', ?, 1, ?, ?, ?, ?, ?, ?)`,
			cur.ID, m.OrgID, m.ProjectID, st.Env, fp, o.title, domain.PolicyTarget(policy), o.at, o.at, eventID, o.run.Release, o.at, o.at).Exec(ctx); err != nil {
			return fmt.Errorf("monitors: open the incident: %w", err)
		}
		trs = incident.Created(cur.ID, st.Env, policy)
		trs[0].Reason = "opened: " + failReason(st, o)
	case cur.Status == domain.IncidentClosed:
		policy := monitorPolicy
		if _, err := tx.NewRaw(`UPDATE incidents SET status = ?, title = ?, event_count = event_count + 1, last_seen = ?, latest_event_id = ?,
			updated_at = ? WHERE id = ?`, domain.PolicyTarget(policy), o.title, o.at, eventID, o.at, cur.ID).Exec(ctx); err != nil {
			return fmt.Errorf("monitors: reopen the incident: %w", err)
		}
		trs = incident.Regressed(cur.ID, st.Env, policy)
		trs[0].Reason = "reopened: " + failReason(st, o)
	default:
		if _, err := tx.NewRaw(`UPDATE incidents SET event_count = event_count + 1, last_seen = ?, latest_event_id = ?, updated_at = ? WHERE id = ?`,
			o.at, eventID, o.at, cur.ID).Exec(ctx); err != nil {
			return fmt.Errorf("monitors: count on the incident: %w", err)
		}
	}
	st.IncidentID = &cur.ID
	if err := ms.insertEvent(ctx, tx, m, st.Env, cur.ID, fp, eventID, o); err != nil {
		return err
	}
	return ms.moved(ctx, tx, m, trs, o.at)
}

// failReason is why a monitor opens or reopens its incident, in its own
// words, as the incident's history shows it: the run that failed ("nightly
// missed its 02:00 run") and, past one, the failures in a row that reached
// the failure threshold.
func failReason(st *state, o outcome) string {
	if st.Failures > 1 {
		return fmt.Sprintf("%s — failed %d times in a row", o.title, st.Failures)
	}
	return o.title
}

// recoverIncident closes the open incident once the recovery threshold of
// good runs is reached, by "anvil", with the runs as evidence.
func (ms *Service) recoverIncident(ctx context.Context, tx bun.Tx, m *Monitor, st *state) error {
	var status string
	err := tx.NewRaw(`SELECT status FROM incidents WHERE id = ? FOR UPDATE`, *st.IncidentID).Scan(ctx, &status)
	if dbutil.IsNoRows(err) {
		st.IncidentID = nil // deleted meanwhile (retention, a person)
		return nil
	}
	if err != nil {
		return fmt.Errorf("monitors: read the incident: %w", err)
	}
	id := *st.IncidentID
	if status == domain.IncidentClosed {
		// Closed already (by a person): nothing left to recover, and the
		// next good runs need not look again.
		st.IncidentID = nil
	}
	if !incident.Closable(status) {
		return nil
	}
	now := ms.Now()
	if _, err := tx.NewRaw(`UPDATE incidents SET status = ?, updated_at = ? WHERE id = ?`, domain.IncidentClosed, now, id).Exec(ctx); err != nil {
		return fmt.Errorf("monitors: close the incident: %w", err)
	}
	// Closed: the good runs after this one have nothing to close. (A
	// failure finds the incident again by its fingerprint and reopens it.)
	st.IncidentID = nil
	return ms.moved(ctx, tx, m, incident.Recovered(id, status, evidence(m, st.OKTimes)), now)
}

// evidence is "ok at 02:00 and 03:00" in the monitor's timezone.
func evidence(m *Monitor, times []time.Time) string {
	loc := m.plan().loc
	parts := make([]string, len(times))
	for i, t := range times {
		parts[i] = t.In(loc).Format("15:04")
	}
	switch len(parts) {
	case 0:
		return "ok"
	case 1:
		return "ok at " + parts[0]
	}
	return "ok at " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// moved records trs and what they imply, as the feed does: the alerts,
// the repairs the policy queued, the card, the inbox's live notice.
func (ms *Service) moved(ctx context.Context, tx bun.Tx, m *Monitor, trs []incident.Transition, at time.Time) error {
	if len(trs) > 0 {
		st := incident.TransitionsStmt(trs, at)
		if _, err := tx.Tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return fmt.Errorf("monitors: record transitions: %w", err)
		}
		if err := ms.s.EnqueueAlerts(ctx, tx, alertCauses(m, trs)); err != nil {
			return err
		}
		if ids := incident.Queued(trs); len(ids) > 0 && ms.incidents != nil {
			if err := ms.incidents.RequestRepairs(ctx, tx, m.ProjectID, ids); err != nil {
				return fmt.Errorf("monitors: request repair: %w", err)
			}
		}
		if fx, ok := ctx.Value(effectsKey{}).(*effects); ok {
			fx.card = true // the check-in enqueues it at its end
		} else if err := card.EnqueueRefresh(ctx, ms.s, tx, m.ProjectID); err != nil {
			return err
		}
	}
	return domain.Notify(ctx, tx, fmt.Sprintf(`{"kind":"incident","org_id":%q,"project_id":%q}`, m.OrgID, m.ProjectID))
}

// alertCauses are the alerts of the moves, as the feed's
// (incident.AlertCauses).
func alertCauses(m *Monitor, trs []incident.Transition) []domain.AlertCause {
	return incident.AlertCauses(m.OrgID, m.ProjectID, trs)
}

// insertEvent stores the failed run as an event of the incident, in the
// feed's event shape, so the incident page, the repair's incident file and
// retention treat it like any event. Its connection is the monitor's id.
func (ms *Service) insertEvent(ctx context.Context, tx bun.Tx, m *Monitor, env string, incidentID uuid.UUID, fp, eventID string, o outcome) error {
	msg := o.title
	if o.run.Output != "" {
		msg += "\n\n" + o.run.Output
	}
	// No check_in_id: it differs on every run, so as a tag it would only
	// crowd the incident's tags; the run keeps it (docs/monitors.md,
	// "Incidents").
	tags := map[string]string{"monitor.slug": m.Slug, "monitor.status": o.status, "monitor.source": o.run.Source}
	if o.run.ExitCode != nil {
		tags["exit_code"] = itoa(*o.run.ExitCode)
	}
	ev := event.Event{SchemaVersion: "1.0", EventID: eventID, Timestamp: o.at.UTC(), Title: o.title, Level: "error", Environment: env,
		Service: m.Slug, SDK: event.SDK{Name: "anvil.monitor"}, Release: o.run.Release,
		Exception: &event.Exception{Type: "CronMonitor", Message: msg}, Tags: tags}
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("monitors: encode the event: %w", err)
	}
	if _, err := tx.NewRaw(`INSERT INTO feed_events (org_id, event_id_key, project_id, connection_id, environment, fingerprint, incident_id,
		received_at, occurred_at, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::json)`,
		m.OrgID, eventID, m.ProjectID, m.ID, env, fp, incidentID, ms.Now(), o.at, string(payload)).Exec(ctx); err != nil {
		return fmt.Errorf("monitors: store the event: %w", err)
	}
	return nil
}

func uuidBytes(u uuid.UUID) []byte { return u[:] }

// OfIncident is the monitor whose failures an incident gathers, with its
// latest runs (at most runs), or nil when the incident is not a monitor's
// — or its monitor was deleted since (docs/monitors.md, "Incidents"): the
// incident page then shows the monitor instead of an exception.
func (ms *Service) OfIncident(ctx context.Context, p *domain.Principal, projectID, incidentID uuid.UUID, runs int) (*Monitor, error) {
	if err := ms.visibleProject(ctx, p, projectID); err != nil {
		return nil, err
	}
	m := new(Monitor)
	err := ms.s.DB.NewRaw(`SELECT `+monitorColumns+` FROM monitors WHERE project_id = ?
		AND 'monitor:' || id::text = (SELECT fingerprint FROM incidents WHERE id = ? AND project_id = ?)`,
		projectID, incidentID, projectID).Scan(ctx, m)
	if dbutil.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("monitors: monitor of incident: %w", err)
	}
	m.fill()
	if m.Runs, err = ms.Runs(ctx, m.ID, runs); err != nil {
		return nil, err
	}
	return m, nil
}
