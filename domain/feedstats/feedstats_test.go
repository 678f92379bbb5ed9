package feedstats

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"anvil/db/testdb"
	"anvil/domain/event"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// connection inserts an organisation, a project and a connection.
func connection(t *testing.T, db bun.IDB) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var org, proj, conn uuid.UUID
	slug := "o" + uuid.NewString()[:8]
	if err := db.NewRaw(`INSERT INTO organizations (slug, name) VALUES (?, 'o') RETURNING id`, slug).Scan(ctx, &org); err != nil {
		t.Fatal(err)
	}
	if err := db.NewRaw(`INSERT INTO projects (org_id, slug, name, repo_url, default_branch, run_command) VALUES (?, 'p', 'p', 'file:///x', 'main', 'true') RETURNING id`, org).Scan(ctx, &proj); err != nil {
		t.Fatal(err)
	}
	prefix := uuid.NewString()[:16]
	if err := db.NewRaw(`INSERT INTO feed_connections (org_id, project_id, name, prefix, hash) VALUES (?, ?, 'c', ?, ?) RETURNING id`,
		org, proj, prefix, make([]byte, 32)).Scan(ctx, &conn); err != nil {
		t.Fatal(err)
	}
	return conn
}

func rej(code, msg string) event.Rejection { return event.Rejection{ReasonCode: code, Message: msg} }

func TestRecorderFlushAndSummaries(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := context.Background()
	a, b := connection(t, d.Bun), connection(t, d.Bun)
	clock := time.Date(2026, 12, 3, 10, 59, 0, 0, time.UTC)
	r := New(d.Bun, nil, time.Hour)
	r.now = func() time.Time { return clock }

	// Two hours' worth of counts, flushed in two statements; an unknown
	// connection is skipped rather than failing the flush.
	r.Record(a, 3, []event.Rejection{rej(event.NoBinding, "no binding for environment 'staging'")})
	r.Record(uuid.New(), 5, nil)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Minute) // the next hour
	r.Record(a, 2, []event.Rejection{rej(event.NoBinding, "no binding for environment 'qa'"), rej(event.SchemaViolation, "title is required")})
	r.Record(b, 0, nil) // nothing to count
	r.Record(a, 0, []event.Rejection{rej(event.NoBinding, "no binding for environment 'dev'")})
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(ctx); err != nil { // nothing pending: no statement
		t.Fatal(err)
	}
	sums, err := Summaries(ctx, d.Bun, []uuid.UUID{a, b}, clock)
	if err != nil {
		t.Fatal(err)
	}
	s := sums[a]
	if s == nil || s.Accepted != 5 || s.Refused[event.NoBinding] != 3 || s.Refused[event.SchemaViolation] != 1 || s.RefusedTotal() != 4 {
		t.Fatalf("summary %+v", s)
	}
	if s.LastReason != event.NoBinding || s.LastRefusal != "no binding for environment 'dev'" {
		t.Fatalf("last refusal %q %q", s.LastReason, s.LastRefusal)
	}
	if sums[b] != nil {
		t.Fatalf("b has %+v", sums[b])
	}
	var rows int
	if err := d.Bun.NewRaw(`SELECT count(*) FROM feed_outcomes`).Scan(ctx, &rows); err != nil || rows != 5 {
		t.Fatalf("%d rows (%v), want 5 buckets", rows, err)
	}

	// A day later the first hour has left the window.
	later, err := Summaries(ctx, d.Bun, []uuid.UUID{a}, clock.Add(23*time.Hour+29*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if s := later[a]; s == nil || s.Accepted != 2 || s.Refused[event.NoBinding] != 2 {
		t.Fatalf("a day later %+v", s)
	}
}

// Start and Stop: counts recorded from many goroutines all arrive, the
// last ones by Stop's final flush.
func TestRecorderLifecycle(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := context.Background()
	a := connection(t, d.Bun)
	r := New(d.Bun, nil, 5*time.Millisecond)
	r.Start()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				r.Record(a, 1, []event.Rejection{rej(event.BindingDisabled, "off")})
			}
		}()
	}
	wg.Wait()
	r.Stop()
	r.Stop()
	sums, err := Summaries(ctx, d.Bun, []uuid.UUID{a}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s := sums[a]; s == nil || s.Accepted != 800 || s.Refused[event.BindingDisabled] != 800 {
		t.Fatalf("%+v", s)
	}
}

// A failed flush keeps its counts for the next one.
func TestRecorderFlushFailureKeepsCounts(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := context.Background()
	a := connection(t, d.Bun)
	r := New(d.Bun, nil, time.Hour)
	r.Record(a, 4, nil)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.Flush(cancelled); err == nil {
		t.Fatal("a flush on a cancelled context succeeded")
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sums, err := Summaries(ctx, d.Bun, []uuid.UUID{a}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s := sums[a]; s == nil || s.Accepted != 4 {
		t.Fatalf("%+v", s)
	}
}
