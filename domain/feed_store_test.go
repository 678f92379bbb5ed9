package domain_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"anvil/domain"
)

// The races of a group's storage with other processes: an incident created
// or deleted by someone else between the group's lookup and its locks.
// Another Feed on the same store stands in for the other process (its own
// store queue, its own connection). Both storage paths are driven: the
// fast one by a group of new events, the general one by a group that holds
// a resend; each with a few events (the fast path INSERTs them) and with
// more than domain.MaxInsertedEvents (it COPYs them).

// raceBundle is a project, and another process ingesting for it.
type raceBundle struct {
	*incidentBundle
	other *domain.Feed
}

func setupRace(t *testing.T) *raceBundle {
	t.Helper()
	rb := &raceBundle{incidentBundle: setupIncidents(t, domain.PolicyObserve)}
	rb.other = newFeed(t, rb.store)
	return rb
}

// onLookup runs hook once, right after the next lookup of a group on the
// path asked for.
func (rb *raceBundle) onLookup(t *testing.T, general bool, hook func(t *testing.T, rb *raceBundle)) {
	var once sync.Once
	rb.feed.SetAfterLookup(func(g bool) {
		if g == general {
			once.Do(func() { hook(t, rb) })
		}
	})
}

// ingest sends raws through the bundle's feed.
func (rb *raceBundle) ingest(raws ...json.RawMessage) (domain.IngestResult, error) {
	return rb.feed.Ingest(context.Background(), rb.sender, "127.0.0.1", raws)
}

// sendOther stores one event through the other process, at once.
func (rb *raceBundle) sendOther(t *testing.T, title string) {
	res, err := rb.other.Ingest(context.Background(), rb.sender, "127.0.0.1", []json.RawMessage{feedEvent(uuid.NewString(), title)})
	if err != nil || len(res.Accepted) != 1 {
		t.Errorf("the other process's ingest: %v %+v", err, res)
	}
}

// incidentOf is the incident an event was stored under, with its count
// and transitions.
func (rb *raceBundle) incidentOf(t *testing.T, eventID string) (id uuid.UUID, count, transitions int) {
	t.Helper()
	err := rb.db.Bun.QueryRowContext(context.Background(), `SELECT i.id, i.event_count,
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
	if err := rb.db.Bun.QueryRowContext(context.Background(), `SELECT count(*) FROM feed_events e
		WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = e.incident_id)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d events point at no incident", n)
	}
}

// groupSizes are the numbers of new events the race tests send in one
// group: a few, INSERTed on the fast path, and more, COPYed.
var groupSizes = map[string]int{"inserted": 1, "copied": domain.MaxInsertedEvents + 1}

// newEvents are n new events of one fault.
func newEvents(n int, title string) []json.RawMessage {
	evs := make([]json.RawMessage, n)
	for i := range evs {
		evs[i] = feedEvent(uuid.NewString(), title)
	}
	return evs
}

func TestIncidentCreatedElsewhereMeanwhile(t *testing.T) {
	t.Parallel()
	for _, general := range []bool{false, true} {
		for size, n := range groupSizes {
			name := map[bool]string{false: "fast path", true: "general path"}[general] + ", " + size
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testIncidentCreatedElsewhere(t, general, n)
			})
		}
	}
}

func testIncidentCreatedElsewhere(t *testing.T, general bool, n int) {
	rb := setupRace(t)
	rb.onLookup(t, general, func(t *testing.T, rb *raceBundle) { rb.sendOther(t, "race") })
	known := uuid.NewString()
	batch := newEvents(n, "race")
	if general { // a resend sends the group down the general path
		if _, err := rb.feed.Ingest(context.Background(), rb.sender, "127.0.0.1", []json.RawMessage{feedEvent(known, "known")}); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, feedEvent(known, "known"))
	}
	res, err := rb.ingest(batch...)
	if err != nil || len(res.Accepted) != len(batch) {
		t.Fatalf("ingest: %v %+v", err, res)
	}
	_, count, transitions := rb.incidentOf(t, eventID(t, batch[0]))
	if count != n+1 || transitions != 2 {
		t.Fatalf("the incident counts %d events and %d transitions; want %d (the other's and ours) and 2 (one creation)", count, transitions, n+1)
	}
	var incidents int
	if err := rb.db.Bun.QueryRowContext(context.Background(), `SELECT count(*) FROM incidents WHERE project_id = ?`, rb.proj.ID).Scan(&incidents); err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{false: 1, true: 2}[general]; incidents != want {
		t.Fatalf("%d incidents; want %d", incidents, want)
	}
	rb.noOrphans(t)
}

func TestIncidentDeletedElsewhereMeanwhile(t *testing.T) {
	t.Parallel()
	deleteAll := func(t *testing.T, rb *raceBundle) {
		if _, err := rb.db.Bun.ExecContext(context.Background(), `DELETE FROM incidents WHERE project_id = ?`, rb.proj.ID); err != nil {
			t.Error(err)
		}
	}

	for size, n := range groupSizes {
		t.Run("fast path, "+size, func(t *testing.T) {
			t.Parallel()
			rb := setupRace(t)
			doomed := rb.send(t, "doomed")
			rb.onLookup(t, false, deleteAll)
			batch := newEvents(n, "doomed")
			if res, err := rb.ingest(batch...); err != nil || len(res.Accepted) != n {
				t.Fatalf("ingest: %v %+v", err, res)
			}
			inc, count, _ := rb.incidentOf(t, eventID(t, batch[0]))
			if inc == doomed.ID || count != n {
				t.Fatalf("the events went to incident %s (deleted: %s) counting %d; want a new incident counting %d", inc, doomed.ID, count, n)
			}
			rb.noOrphans(t)
		})

		t.Run("general path, "+size, func(t *testing.T) {
			t.Parallel()
			testIncidentDeletedGeneral(t, deleteAll, n)
		})
	}
}

// eventID is the event_id of a raw event.
func eventID(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var ev struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.EventID
}

func testIncidentDeletedGeneral(t *testing.T, deleteAll func(*testing.T, *raceBundle), n int) {
	rb := setupRace(t)
	rb.onLookup(t, true, deleteAll)
	resent := uuid.NewString()
	if _, err := rb.ingest(feedEvent(resent, "doomed")); err != nil {
		t.Fatal(err)
	}
	fresh := newEvents(n, "doomed")
	id := eventID(t, fresh[0])
	batch := append([]json.RawMessage{feedEvent(resent, "doomed")}, fresh...)
	res, err := rb.ingest(batch...)
	if !errors.Is(err, domain.ErrFeedStore) || len(res.Accepted) != 0 {
		t.Fatalf("a group whose incident vanished: %v %+v; want ErrFeedStore and nothing accepted", err, res)
	}
	var stored int
	if err := rb.db.Bun.QueryRowContext(context.Background(), `SELECT count(*) FROM feed_events WHERE project_id = ?`, rb.proj.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatalf("%d events stored by the failed group", stored)
	}
	// The sender resends on the 503: both events land on a new incident.
	if res, err := rb.ingest(batch...); err != nil || len(res.Accepted) != n+1 {
		t.Fatalf("resend: %v %+v", err, res)
	}
	if _, count, _ := rb.incidentOf(t, id); count != n+1 {
		t.Fatalf("the new incident counts %d; want %d", count, n+1)
	}
	rb.noOrphans(t)
}
