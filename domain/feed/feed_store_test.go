package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
	"anvil/domain/feed"
)

// The races of a group's storage with other processes: an incident created
// or deleted by someone else between the group's lookup and its locks.
// Another Feed on the same store stands in for the other process (its own
// store queue, its own connection). Both storage paths are driven: the
// fast one by a group of new events, the general one by a group that holds
// a resend.

// raceBundle is a project, and another process ingesting for it.
type raceBundle struct {
	*incidentBundle
	other *feed.Feed
}

func setupRace(t *testing.T) *raceBundle {
	t.Helper()
	rb := &raceBundle{incidentBundle: setupIncidents(t, domain.PolicyObserve)}
	rb.other = newFeed(t, rb.Store)
	return rb
}

// onLookup runs hook once, right after the next lookup of a group on the
// path asked for.
func (rb *raceBundle) onLookup(t *testing.T, general bool, hook func(t *testing.T, rb *raceBundle)) {
	var once sync.Once
	rb.Feed.SetAfterLookup(func(g bool) {
		if g == general {
			once.Do(func() { hook(t, rb) })
		}
	})
}

// ingest sends raws through the bundle's feed.
func (rb *raceBundle) ingest(raws ...json.RawMessage) (feed.IngestResult, error) {
	return rb.Feed.Ingest(context.Background(), rb.Sender, "127.0.0.1", raws)
}

// sendOther stores one event through the other process, at once.
func (rb *raceBundle) sendOther(t *testing.T, title string) {
	res, err := rb.other.Ingest(context.Background(), rb.Sender, "127.0.0.1", []json.RawMessage{feedEvent(uuid.NewString(), title)})
	if err != nil || len(res.Accepted) != 1 {
		t.Errorf("the other process's ingest: %v %+v", err, res)
	}
}

// incidentOf is the incident an event was stored under, with its count
// and transitions.
func (rb *raceBundle) incidentOf(t *testing.T, eventID string) (id uuid.UUID, count, transitions int) {
	t.Helper()
	err := rb.DB.Bun.QueryRowContext(context.Background(), `SELECT i.id, i.event_count,
		(SELECT count(*) FROM incident_transitions tr WHERE tr.incident_id = i.id)
		FROM feed_events e JOIN incidents i ON i.id = e.incident_id WHERE e.event_id_key = ?`, eventID).Scan(&id, &count, &transitions)
	if err != nil {
		t.Fatalf("event %s and its incident: %v", eventID, err)
	}
	return id, count, transitions
}

// noOrphans fails if an event points at no incident.
func (rb *raceBundle) noOrphans(t *testing.T) {
	t.Helper()
	var n int
	if err := rb.DB.Bun.QueryRowContext(context.Background(), `SELECT count(*) FROM feed_events e
		WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = e.incident_id)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d events point at no incident", n)
	}
}

func TestIncidentCreatedElsewhereMeanwhile(t *testing.T) {
	t.Parallel()
	for _, general := range []bool{false, true} {
		name := map[bool]string{false: "fast path", true: "general path"}[general]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rb := setupRace(t)
			rb.onLookup(t, general, func(t *testing.T, rb *raceBundle) { rb.sendOther(t, "race") })
			known := uuid.NewString()
			batch := []json.RawMessage{feedEvent(uuid.NewString(), "race")}
			if general { // a resend sends the group down the general path
				if _, err := rb.Feed.Ingest(context.Background(), rb.Sender, "127.0.0.1", []json.RawMessage{feedEvent(known, "known")}); err != nil {
					t.Fatal(err)
				}
				batch = append(batch, feedEvent(known, "known"))
			}
			res, err := rb.ingest(batch...)
			if err != nil || len(res.Accepted) != len(batch) {
				t.Fatalf("ingest: %v %+v", err, res)
			}
			var ev struct {
				EventID string `json:"event_id"`
			}
			_ = json.Unmarshal(batch[0], &ev)
			_, count, transitions := rb.incidentOf(t, ev.EventID)
			if count != 2 || transitions != 2 {
				t.Fatalf("the incident counts %d events and %d transitions; want 2 (the other's and ours) and 2 (one creation)", count, transitions)
			}
			var incidents int
			if err := rb.DB.Bun.QueryRowContext(context.Background(), `SELECT count(*) FROM incidents WHERE project_id = ?`, rb.Proj.ID).Scan(&incidents); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 1, true: 2}[general]; incidents != want {
				t.Fatalf("%d incidents; want %d", incidents, want)
			}
			rb.noOrphans(t)
		})
	}
}

func TestIncidentDeletedElsewhereMeanwhile(t *testing.T) {
	t.Parallel()
	deleteAll := func(t *testing.T, rb *raceBundle) {
		if _, err := rb.DB.Bun.ExecContext(context.Background(), `DELETE FROM incidents WHERE project_id = ?`, rb.Proj.ID); err != nil {
			t.Error(err)
		}
	}

	t.Run("fast path", func(t *testing.T) {
		t.Parallel()
		rb := setupRace(t)
		doomed := rb.Send(t, "doomed")
		rb.onLookup(t, false, deleteAll)
		id := uuid.NewString()
		if res, err := rb.ingest(feedEvent(id, "doomed")); err != nil || len(res.Accepted) != 1 {
			t.Fatalf("ingest: %v %+v", err, res)
		}
		inc, count, _ := rb.incidentOf(t, id)
		if inc == doomed.ID || count != 1 {
			t.Fatalf("the event went to incident %s (deleted: %s) counting %d; want a new incident counting 1", inc, doomed.ID, count)
		}
		rb.noOrphans(t)
	})

	t.Run("general path", func(t *testing.T) {
		t.Parallel()
		rb := setupRace(t)
		rb.onLookup(t, true, deleteAll)
		resent := uuid.NewString()
		if _, err := rb.ingest(feedEvent(resent, "doomed")); err != nil {
			t.Fatal(err)
		}
		id := uuid.NewString()
		batch := []json.RawMessage{feedEvent(resent, "doomed"), feedEvent(id, "doomed")}
		res, err := rb.ingest(batch...)
		if !errors.Is(err, feed.ErrFeedStore) || len(res.Accepted) != 0 {
			t.Fatalf("a group whose incident vanished: %v %+v; want ErrFeedStore and nothing accepted", err, res)
		}
		var stored int
		if err := rb.DB.Bun.QueryRowContext(context.Background(), `SELECT count(*) FROM feed_events WHERE project_id = ?`, rb.Proj.ID).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != 0 {
			t.Fatalf("%d events stored by the failed group", stored)
		}
		// The sender resends on the 503: both events land on a new incident.
		if res, err := rb.ingest(batch...); err != nil || len(res.Accepted) != 2 {
			t.Fatalf("resend: %v %+v", err, res)
		}
		if _, count, _ := rb.incidentOf(t, id); count != 2 {
			t.Fatalf("the new incident counts %d; want 2", count)
		}
		rb.noOrphans(t)
	})
}
