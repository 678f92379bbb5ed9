package feed_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"anvil/domain"
	"github.com/google/uuid"
)

// The incident deltas (deltas.go, docs/feed.md "The write path and its
// costs"): a group on the fast path appends its counts, and folds add them
// to the incidents after the commit.

// asyncBundle is an incident bundle whose feed folds as production does:
// after the answer, in its own rounds.
func asyncBundle(t *testing.T, policy string) *incidentBundle {
	t.Helper()
	ib := setupIncidents(t, policy)
	ib.Feed.SyncFold = false
	return ib
}

// ingestN sends n events of one fault in one batch.
func ingestN(t *testing.T, ib *incidentBundle, title string, n int) {
	t.Helper()
	raws := make([]json.RawMessage, n)
	for i := range raws {
		raws[i] = feedEvent(uuid.NewString(), title)
	}
	res, err := ib.Feed.Ingest(context.Background(), ib.Sender, "127.0.0.1", raws)
	if err != nil || len(res.Accepted) != n {
		t.Fatalf("ingest: %v %+v", err, res)
	}
}

// counts is the stored events, the incidents' counts and the deltas not
// folded yet.
func counts(t *testing.T, ib *incidentBundle) (events, counted, pending int) {
	t.Helper()
	if err := ib.DB.Bun.QueryRowContext(context.Background(), `SELECT (SELECT count(*) FROM feed_events),
		(SELECT coalesce(sum(event_count), 0) FROM incidents), (SELECT count(*) FROM incident_deltas)`).Scan(&events, &counted, &pending); err != nil {
		t.Fatal(err)
	}
	return events, counted, pending
}

// TestFoldFollowsWithinASecond: a batch on an existing incident leaves a
// delta, not a count; the process folds it by itself, and the incident as
// the inbox reads it counts every event within a second of the answer (a
// bound, polled; the fold comes FoldGap after the commit).
func TestFoldFollowsWithinASecond(t *testing.T) {
	t.Parallel()
	ib := asyncBundle(t, domain.PolicyObserve)
	first := ib.Send(t, "storm") // creates the incident, counted at once
	if first.EventCount != 1 {
		t.Fatalf("a new incident counts %d; want its first event", first.EventCount)
	}
	ingestN(t, ib, "storm", 20)
	answered := time.Now()
	for {
		if inc := ib.Incident(t, first.ID); inc.EventCount == 21 {
			break
		}
		if time.Since(answered) > time.Second {
			events, counted, pending := counts(t, ib)
			t.Fatalf("a second after the answer: %d events, %d counted, %d deltas pending", events, counted, pending)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, pending := counts(t, ib); pending != 0 {
		t.Fatalf("%d deltas left after the fold", pending)
	}
}

// TestRegressionReopensAtOnce: a closed incident that gets an event is
// reopened by the batch itself, before the answer — never left to a fold.
func TestRegressionReopensAtOnce(t *testing.T) {
	t.Parallel()
	ib := asyncBundle(t, domain.PolicyObserve)
	inc := ib.Send(t, "comeback")
	if _, err := ib.Incidents.Decide(context.Background(), ib.Owner, inc.ID, "close"); err != nil {
		t.Fatal(err)
	}
	ingestN(t, ib, "comeback", 3)
	if got := ib.Incident(t, inc.ID); got.Status == domain.IncidentClosed || got.EventCount != 4 {
		t.Fatalf("after the regression's answer: status %s count %d; want reopened with 4", got.Status, got.EventCount)
	}
}

// TestFoldCutOffCountsOnce kills the fold's connection half-way — after it
// deleted the deltas, before it added them — as a worker killed during a
// fold would leave it: Postgres rolls the fold back, the deltas are still
// there, and the next fold counts each event exactly once.
func TestFoldCutOffCountsOnce(t *testing.T) {
	t.Parallel()
	ib := asyncBundle(t, domain.PolicyObserve)
	ctx := context.Background()
	ib.Send(t, "cut") // the incident
	var mu sync.Mutex
	kill := true
	ib.Feed.SetDuringFold(func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		if !kill {
			return
		}
		// The fold's backend, idle in its transaction: killed as its
		// worker's death would end it.
		if _, err := ib.DB.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Error(err)
		}
	})
	for range 5 {
		ingestN(t, ib, "cut", 10)
	}
	if _, err := ib.Feed.FoldDeltas(ctx); err == nil {
		t.Fatal("the fold survived its connection's end")
	}
	events, counted, pending := counts(t, ib)
	if pending == 0 || counted >= events {
		t.Fatalf("after the cut: %d events, %d counted, %d deltas; want the deltas kept and nothing added", events, counted, pending)
	}
	mu.Lock()
	kill = false
	mu.Unlock()
	if _, err := ib.Feed.FoldDeltas(ctx); err != nil {
		t.Fatal(err)
	}
	if events, counted, pending := counts(t, ib); events != 51 || counted != 51 || pending != 0 {
		t.Fatalf("after the next fold: %d events, %d counted, %d deltas; want 51, 51, 0", events, counted, pending)
	}
}

// TestStormOfOneFaultCountsExactly: concurrent batches of one fault, one
// new, through two processes, with folds running meanwhile and a fold that
// is cut off — the incident counts every event exactly once, its latest
// event is one of the last batch's, and its release is counted too.
func TestStormOfOneFaultCountsExactly(t *testing.T) {
	t.Parallel()
	ib := asyncBundle(t, domain.PolicyObserve)
	other := newFeed(t, ib.Store)
	other.SyncFold = false
	ctx := context.Background()
	const senders, batches, per = 6, 8, 25
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := ib.Feed
			if s%2 == 1 {
				f = other
			}
			for range batches {
				raws := make([]json.RawMessage, per)
				for i := range raws {
					var m map[string]any
					_ = json.Unmarshal(feedEvent(uuid.NewString(), "one-fault"), &m)
					m["release"] = "v1"
					raws[i], _ = json.Marshal(m)
				}
				res, err := f.Ingest(ctx, ib.Sender, "127.0.0.1", raws)
				if err != nil || len(res.Accepted) != per {
					t.Errorf("ingest: %v %d accepted", err, len(res.Accepted))
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, err := ib.Feed.FoldDeltas(ctx); err != nil {
		t.Fatal(err)
	}
	const want = senders * batches * per
	var incidents, counted, releaseCount int
	if err := ib.DB.Bun.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(event_count), 0),
		(SELECT coalesce(sum(event_count), 0) FROM releases WHERE version = 'v1') FROM incidents`).Scan(&incidents, &counted, &releaseCount); err != nil {
		t.Fatal(err)
	}
	if incidents != 1 || counted != want || releaseCount != want {
		t.Fatalf("%d incidents counting %d, release counting %d; want 1 incident, %d and %d", incidents, counted, releaseCount, want, want)
	}
	var latestStored bool
	if err := ib.DB.Bun.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM incidents i JOIN feed_events e
		ON e.org_id = i.org_id AND e.event_id_key = i.latest_event_id::uuid AND e.incident_id = i.id)`).Scan(&latestStored); err != nil {
		t.Fatal(err)
	}
	if !latestStored {
		t.Fatal("the incident's latest event is none of its events")
	}
}
