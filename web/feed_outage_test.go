package web_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/db/testdb"
)

// The store fails mid-stream — a table locked past the store timeout, a
// connection cut while its batch waits, every connection of the app killed
// at random while a sender loops (its folds of incident deltas among them)
// — and the sender resends the whole batch on every 503. At the end every
// event is stored exactly once and, once the folds have caught up, counted
// exactly once on its incident; no request was ever answered otherwise
// than 202 or 503.
func TestFeedStoreOutage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	b.feed.StoreTimeout = 500 * time.Millisecond
	// Folds as in production, after the answers: the chaos below kills
	// them too, and the counts must still be exact once they catch up.
	b.feed.SyncFold = false
	ctx := context.Background()
	dbName := b.db.Pool.Config().ConnConfig.Database
	admin, err := pgx.Connect(ctx, testdb.URLFor(dbName))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)

	var total atomic.Int64
	var unavailable atomic.Int64
	mkBatch := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			fp := i % 3
			out[i] = ev(newID(), func(m map[string]any) { m["exception"] = map[string]any{"type": fmt.Sprintf("E%d", fp)} })
		}
		total.Add(int64(n))
		return out
	}
	// deliver sends a batch until it is accepted, resending on 503.
	deliver := func(t *testing.T, body []any) {
		for attempt := 0; ; attempt++ {
			r := f.send(t, batch, f.token, body)
			switch r.Status {
			case 202:
				if len(r.Accept) != len(body) {
					t.Errorf("202 with %d accepted of %d: %s", len(r.Accept), len(body), r.Raw)
				}
				return
			case 503:
				unavailable.Add(1)
				if r.Header.Get("Retry-After") != "30" || len(r.Accept) != 0 || r.Rejects == nil {
					t.Errorf("503: Retry-After %q body %s", r.Header.Get("Retry-After"), r.Raw)
				}
			default:
				t.Errorf("status %d: %s", r.Status, r.Raw)
				return
			}
			if attempt > 200 {
				t.Error("gave up resending")
				return
			}
			time.Sleep(20 * time.Millisecond) // the sender's back-off, shortened from 30 s
		}
	}
	lockEvents := func() pgx.Tx {
		tx, err := admin.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE feed_events IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		return tx
	}

	t.Run("store slower than the timeout", func(t *testing.T) {
		tx := lockEvents()
		body := mkBatch(10)
		r := f.send(t, batch, f.token, body)
		tx.Rollback(ctx)
		if r.Status != 503 || r.Header.Get("Retry-After") != "30" || len(r.Accept) != 0 {
			t.Fatalf("locked store: %d %s", r.Status, r.Raw)
		}
		deliver(t, body)
	})

	t.Run("connection cut mid-batch", func(t *testing.T) {
		tx := lockEvents()
		b.feed.StoreTimeout = 10 * time.Second
		defer func() { b.feed.StoreTimeout = 500 * time.Millisecond }()
		body := append(mkBatch(9), ev("not-a-uuid"))
		done := make(chan feedResp, 1)
		go func() { done <- sendFeed(t, f.srv.URL, batch, f.token, body) }()
		// Wait until the batch is blocked inside its transaction, then cut it.
		var killed bool
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !killed; {
			// Inside a transaction pg_stat_activity is a snapshot taken at
			// its first read: clear it, or the waiter is never seen.
			if _, err := admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
				t.Fatal(err)
			}
			err := admin.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' LIMIT 1`).Scan(&killed)
			if err == pgx.ErrNoRows {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		tx.Rollback(ctx)
		if !killed {
			t.Fatal("the batch never waited on the lock")
		}
		r := <-done
		if r.Status != 503 || len(r.Accept) != 0 || len(r.Rejects) != 1 || r.Rejects[0]["reason_code"] != "schema_violation" {
			t.Fatalf("cut connection: %d %s", r.Status, r.Raw)
		}
		deliver(t, body[:9])
	})

	t.Run("connections killed while senders loop", func(t *testing.T) {
		stop := make(chan struct{})
		var chaos sync.WaitGroup
		chaos.Add(1)
		go func() {
			defer chaos.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(150 * time.Millisecond):
				}
				admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
			}
		}()
		var senders sync.WaitGroup
		for s := 0; s < 4; s++ {
			senders.Add(1)
			go func() {
				defer senders.Done()
				for i := 0; i < 25; i++ {
					deliver(t, mkBatch(20))
				}
			}()
		}
		senders.Wait()
		close(stop)
		chaos.Wait()
	})

	if unavailable.Load() == 0 {
		t.Fatal("the store never failed; the test tested nothing")
	}
	want := int(total.Load())
	if _, err := b.feed.FoldDeltas(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM incident_deltas`); n != 0 {
		t.Fatalf("%d deltas left after the last fold", n)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events`); n != want {
		t.Fatalf("%d events stored, want %d (each exactly once)", n, want)
	}
	if n := f.count(t, `SELECT coalesce(sum(event_count), 0)::int FROM incidents`); n != want {
		t.Fatalf("incidents count %d events, want %d", n, want)
	}
	if n := f.count(t, `SELECT count(*) FROM incidents`); n != 3 {
		t.Fatalf("%d incidents, want 3", n)
	}
	t.Logf("%d events delivered through %d 503s", want, unavailable.Load())
}
