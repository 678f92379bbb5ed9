package feed

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/event"
)

// ReprocessLatest is how many of an incident's latest events a re-process
// maps again (docs/sourcemap.md, "Re-processing").
const ReprocessLatest = 50

// RequestReprocess asks for the incident's latest events to be mapped
// again through the source maps uploaded since they arrived: a River job,
// inserted with the request's audit line.
func (f *Feed) RequestReprocess(ctx context.Context, p *domain.Principal, incidentID uuid.UUID) error {
	if err := domain.RequireWrite(p); err != nil {
		return err
	}
	return f.s.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var title string
		if err := tx.NewRaw(`SELECT title FROM incidents WHERE id = ? AND org_id = ?`, incidentID, p.OrgID).Scan(ctx, &title); err != nil {
			return domain.NotFound("incident")
		}
		if err := f.s.InsertJob(ctx, tx, domain.ReprocessEventsArgs{IncidentID: incidentID}); err != nil {
			return fmt.Errorf("feed: reprocess: %w", err)
		}
		return domain.RecordAudit(ctx, tx, p, "incident.reprocess", title, map[string]any{"incident_id": incidentID, "events": ReprocessLatest})
	})
}

// Reprocess maps the incident's latest events again: their frames that
// stayed as they came are symbolicated and scrubbed as at ingest, and the
// payload is replaced. Grouping is kept: an event stays in its incident
// with its fingerprint, whatever its frames now read. It answers how many
// events changed.
func (f *Feed) Reprocess(ctx context.Context, incidentID uuid.UUID) (int, error) {
	if f.Symbolicate == nil {
		return 0, nil
	}
	var rows []struct {
		OrgID     uuid.UUID       `bun:"org_id"`
		Key       uuid.UUID       `bun:"event_id_key"`
		ProjectID uuid.UUID       `bun:"project_id"`
		Payload   json.RawMessage `bun:"payload"`
	}
	if err := f.s.DB.NewRaw(`SELECT org_id, event_id_key, project_id, payload FROM feed_events
		WHERE incident_id = ? ORDER BY received_at DESC LIMIT ?`, incidentID, ReprocessLatest).Scan(ctx, &rows); err != nil {
		return 0, fmt.Errorf("feed: reprocess %s: %w", incidentID, err)
	}
	changed := 0
	for _, r := range rows {
		var ev event.Event
		if err := json.Unmarshal(r.Payload, &ev); err != nil || ev.Exception == nil {
			continue
		}
		again := false
		for i := range ev.Exception.Stacktrace {
			fr := &ev.Exception.Stacktrace[i]
			if fr.Colno <= 0 || fr.Line <= 0 {
				continue
			}
			if sy := fr.Symbolication; sy == nil || (sy.Raw == nil && sy.Unmapped != "") {
				fr.Symbolication = nil // as it came: map it again
				again = true
			}
		}
		if !again {
			continue
		}
		f.Symbolicate(ctx, r.ProjectID, &ev)
		if err := f.scrub(&ev); err != nil {
			continue // kept as it was: a payload is never stored unscrubbed
		}
		payload, err := json.Marshal(&ev)
		if err != nil {
			return changed, fmt.Errorf("feed: reprocess encode: %w", err)
		}
		if _, err := f.s.DB.NewRaw(`UPDATE feed_events SET payload = ?::json WHERE org_id = ? AND event_id_key = ?`,
			string(payload), r.OrgID, r.Key).Exec(ctx); err != nil {
			return changed, fmt.Errorf("feed: reprocess store: %w", err)
		}
		changed++
	}
	return changed, nil
}
