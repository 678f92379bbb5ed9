// Package difftest is the harness of the differential tests
// (domain/feed/feed_differential_test.go,
// domain/run/acceptance_differential_test.go): one script of inputs runs
// against two fresh databases — one whose services take their fast paths
// (falling back to the general ones where they must), one whose services
// are told to take the general path always — and the two databases must
// then hold the same rows (docs/architecture.md, "The differential tests").
//
// The switches to the general path are test-only seams
// (Feed.TakeGeneralPath in domain/feed/export_test.go,
// Queue.TakeGeneralPath in domain/run/run_export_test.go) that only their
// own package's test binary sees, so the test hands them in as a Seam.
//
// Both bundles run on the same fake clock, started at the same instant, so
// every time the domain writes from its clock is compared exactly; the
// times the database or River write from the wall clock are compared by
// presence.
package difftest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/alert"
	"anvil/domain/event"
	"anvil/domain/internal/domaintest"
	"anvil/domain/secret"
	"anvil/domain/wiring"
	"anvil/internal/dbdiff"
)

// Epoch is where both clocks start: far from the wall clock, so that a
// time written from the store's clock is never taken for one written by
// the database.
var Epoch = time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

// Bundle is one of the two databases of a differential test and the
// services on it, wired as serve wires them.
type Bundle struct {
	Name  string // "fast" or "general"
	DB    *db.DB
	SV    *wiring.Services
	Clock *domaintest.Clock // the store's Now; it starts at Epoch
	Owner *domain.Principal
	// Lookups counts the feed's groups by the path they looked their
	// incidents up on: [0] fast, [1] general (a fallback, in the fast
	// bundle); the feed test's Seam counts them (Feed.SetAfterLookup).
	Lookups [2]atomic.Int64

	commits *commitCounter
	// log is every answer the script got, in script order: the two
	// databases must also have answered alike.
	log []string
}

// Seam is what the test does to a bundle's services before its script
// runs: general says to send them down their general paths (the test
// package's TakeGeneralPath seams); it may also install observers.
type Seam func(b *Bundle, general bool)

// setup builds a bundle; general asks seam to send every group down the
// general path.
func setup(t *testing.T, general bool, seam Seam) *Bundle {
	t.Helper()
	ctx := context.Background()
	d := testdb.New(t)
	// The services' pgx pool counts the transactions the fast paths commit
	// (the general paths commit through database/sql, not through it).
	commits := &commitCounter{}
	cfg := d.Pool.Config()
	cfg.ConnConfig.Tracer = commits
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keys, err := secret.NewKeyring(make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing works the jobs, so the alert destination's host need not
	// resolve: allowing private destinations skips the check at create.
	sv := wiring.NewServices(&db.DB{Pool: pool, SQL: d.SQL, Bun: d.Bun}, keys, nil,
		wiring.Options{PublicURL: "http://anvil.test", AlertsAllowPrivate: true})
	c := domaintest.NewClock(Epoch)
	sv.Store.Now = c.Now
	// The fast path's counts are deltas, folded after the commit: fold
	// before answering, so both paths' incidents compare at every step.
	sv.Feed.SyncFold = true
	b := &Bundle{Name: "fast", DB: d, SV: sv, Clock: c, commits: commits}
	if general {
		b.Name = "general"
	}
	seam(b, general)
	if _, err := sv.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sv.Stop(context.Background()); err != nil {
			t.Errorf("stop the services: %v", err)
		}
	})
	res, err := sv.Accounts.Bootstrap(ctx, "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if b.Owner, err = sv.Accounts.Authenticate(ctx, res.Token); err != nil {
		t.Fatal(err)
	}
	// A destination that every alert rule sends to (rules are on by
	// default): the alerts a path enqueues are compared as River jobs.
	if _, _, err := sv.Alerts.Create(ctx, b.Owner, alert.Input{Name: domaintest.Strp("ops"), Kind: domaintest.Strp(alert.KindWebhook),
		URL: domaintest.Strp("https://alerts.example/hook")}); err != nil {
		t.Fatal(err)
	}
	return b
}

// Step advances the clock to the script's next instant.
func (b *Bundle) Step() { b.Clock.Advance(time.Second) }

// Record appends an answer to the bundle's log: the two bundles' logs
// must be equal.
func (b *Bundle) Record(format string, args ...any) {
	b.log = append(b.log, fmt.Sprintf(format, args...))
}

// Exec runs a statement of the script's own (a fixture both databases get).
func (b *Bundle) Exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := b.DB.Bun.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Parallel runs fns at once and waits for them all.
func Parallel(fns ...func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn()
		}()
	}
	close(start)
	wg.Wait()
}

// commitCounter is a pgx tracer that counts the batches that end in a
// COMMIT and succeed: the fast paths' transactions.
type commitCounter struct{ n atomic.Int64 }

type commitKey struct{}

func (c *commitCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (c *commitCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *commitCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if q := data.Batch.QueuedQueries; len(q) > 0 && q[len(q)-1].SQL == "COMMIT" {
		return context.WithValue(ctx, commitKey{}, true)
	}
	return ctx
}

func (c *commitCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (c *commitCounter) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	if ctx.Value(commitKey{}) != nil && data.Err == nil {
		c.n.Add(1)
	}
}

// EventID is the id of the script's event name: the same in both
// databases.
func EventID(name string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://anvil.test/differential/"+name)).String()
}

// tables are the tables the feed's store and acceptance write, and how
// their rows are named. Every other table is compared by its row count.
var tables = []dbdiff.Table{
	{Name: "feed_events", Key: []string{"org_id", "event_id_key"},
		JSON: map[string]string{"payload": "the stored event, kept as the text anvil encoded (docs/feed.md)"}},
	{Name: "incidents", Key: []string{"project_id", "environment", "fingerprint"},
		// Numbers come from a counter row (docs/releases.md, "Short ids"):
		// their order within a project is the creations'; an insert that
		// lost its ON CONFLICT spent a number, so gaps may differ.
		Ranks: []dbdiff.Rank{{Column: "number", Within: []string{"project_id"}}}},
	{Name: "incident_transitions", Key: []string{"incident_id", "id"},
		Ranks: []dbdiff.Rank{{Column: "id", Within: []string{"incident_id"}}}},
	{Name: "card_changes", Key: []string{"project_id"}},
	{Name: "project_runs", Key: []string{"project_id", "number"},
		// Positions are tokens drawn from a sequence: their order within
		// a project is the queue's (docs/architecture.md); a fast attempt
		// rolled back has drawn values the general path draws again.
		Ranks: []dbdiff.Rank{{Column: "position", Within: []string{"project_id"}}},
		Refs:  map[string]string{"job_id": "job"}},
	{Name: "run_index", Key: []string{"run_id"}},
	{Name: "project_webhook_deliveries", Key: []string{"project_id", "provider", "delivery_id"}},
	{Name: "river_job", Key: []string{"id"}, Refs: map[string]string{"id": "job"},
		Skip: map[string]string{"unique_key": "a hash of the args, whose UUIDs differ (the args are compared)"},
		// The feed coalesces card refreshes into rounds card.RefreshGap
		// apart on the wall clock, so how many refresh_card jobs a script
		// leaves depends on timing, not on the path; card_changes, which
		// says whether a refresh is owed, is compared whole.
		Where: "t.kind <> 'refresh_card'"},
}

// diffTime is how a timestamp is compared: one from the store's clock
// exactly (as its offset from Epoch), one from the wall clock (the
// database's now(), River's) by presence.
func diffTime(t time.Time) string {
	if d := t.Sub(Epoch); d > -24*time.Hour && d < 24*time.Hour {
		return "clock" + fmt.Sprintf("%+v", d)
	}
	return "wall clock"
}

// snapshot reads the bundle's database, every generated value labelled by
// what it names. events are the script's event names.
func (b *Bundle) snapshot(t *testing.T, events []string) *dbdiff.Snapshot {
	t.Helper()
	ctx := context.Background()
	l := dbdiff.NewLabels()
	for _, q := range []string{
		`SELECT id::text, 'org:' || slug FROM organizations`,
		`SELECT id::text, 'user:' || email FROM users`,
		`SELECT id::text, 'project:' || slug FROM ` + domain.AllProjects,
		`SELECT id::text, 'connection:' || name FROM feed_connections`,
		`SELECT id::text, 'destination:' || name FROM alert_destinations`,
		`SELECT i.id::text, 'incident:' || p.slug || '/' || i.environment || '/' || i.title
			FROM incidents i JOIN ` + domain.AllProjects + ` p ON p.id = i.project_id`,
		`SELECT r.id::text, 'run:' || p.slug || '#' || r.number FROM project_runs r JOIN ` + domain.AllProjects + ` p ON p.id = r.project_id`,
	} {
		if err := l.AddQuery(ctx, b.DB.SQL, "", q); err != nil {
			t.Fatal(err)
		}
	}
	l.Add("", uuid.Nil.String(), "nil uuid")
	for _, e := range events {
		id := EventID(e)
		l.Add("", id, "event:"+e)
		l.Add("", strings.ToUpper(id), "EVENT:"+e)
	}
	// A stored event's user.ip_hash is salted with its connection's id.
	var conns []struct {
		ID   uuid.UUID `bun:"id"`
		Name string    `bun:"name"`
	}
	if err := b.DB.Bun.NewRaw(`SELECT id, name FROM feed_connections`).Scan(ctx, &conns); err != nil {
		t.Fatal(err)
	}
	for _, c := range conns {
		l.Add("", event.IPHash("127.0.0.1", b.Clock.Now(), c.ID.String()), "ip_hash of connection:"+c.Name)
	}
	// A River job is named by its kind and its args (labelled); jobs alike
	// are told apart by their order.
	var jobs []struct {
		ID   int64  `bun:"id"`
		Kind string `bun:"kind"`
		Args string `bun:"args"`
	}
	if err := b.DB.Bun.NewRaw(`SELECT id, kind, args::text AS args FROM river_job WHERE kind <> 'refresh_card' ORDER BY id`).Scan(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, j := range jobs {
		var args any
		if err := json.Unmarshal([]byte(j.Args), &args); err != nil {
			t.Fatal(err)
		}
		n := 0
		norm, _ := json.Marshal(l.Value(args, &n))
		label := j.Kind + " " + string(norm)
		seen[label]++
		if seen[label] > 1 {
			label += fmt.Sprintf(" (#%d)", seen[label])
		}
		l.Add("job", fmt.Sprint(j.ID), label)
	}
	s, err := dbdiff.Take(ctx, b.DB.SQL, l, dbdiff.Options{Time: diffTime}, tables...)
	if err != nil {
		t.Fatal(err)
	}
	// The only UUIDs nothing names are the alerts' random message ids.
	for col := range s.Unlabelled {
		if col != "river_job.args" {
			t.Errorf("%s: %d UUIDs that name nothing the script made (%s)", b.Name, s.Unlabelled[col], col)
		}
	}
	return s
}

// Run runs script against a fast and a general bundle, in parallel, and
// compares what they answered and what they stored. seam sends the
// general bundle's services down their general paths. minFast is how many
// transactions the fast paths must at least have committed in the fast
// bundle (the general one must commit none), so that the comparison is
// not between two general paths. script returns the names of its events
// (EventID), so that their ids are compared by name.
func Run(t *testing.T, minFast int64, seam Seam, script func(t *testing.T, b *Bundle) []string) {
	t.Helper()
	type result struct {
		snap    *dbdiff.Snapshot
		log     []string
		commits int64
		lookups [2]int64
	}
	var res [2]result
	t.Run("paths", func(t *testing.T) {
		for i, general := range []bool{false, true} {
			t.Run(map[bool]string{false: "fast", true: "general"}[general], func(t *testing.T) {
				t.Parallel()
				b := setup(t, general, seam)
				events := script(t, b)
				// Flush the machinery (card refresh requests, live
				// events) before reading what it wrote.
				if err := b.SV.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				res[i] = result{snap: b.snapshot(t, events), log: b.log, commits: b.commits.n.Load(),
					lookups: [2]int64{b.Lookups[0].Load(), b.Lookups[1].Load()}}
			})
		}
	})
	if t.Failed() {
		return
	}
	fast, general := res[0], res[1]
	t.Logf("the fast paths committed %d transactions; the general bundle's %d", fast.commits, general.commits)
	if n := fast.lookups[0] + fast.lookups[1]; n > 0 {
		t.Logf("feed groups: the fast bundle's tried the fast path %d times and took the general path %d times; the general bundle's took it %d times",
			fast.lookups[0], fast.lookups[1], general.lookups[1])
	}
	if general.lookups[0] != 0 {
		t.Errorf("the general bundle's feed looked up %d groups on the fast path: the switch does not hold", general.lookups[0])
	}
	if general.commits != 0 {
		t.Errorf("the general bundle committed %d transactions on a fast path: the switch does not hold", general.commits)
	}
	if fast.commits < minFast {
		t.Errorf("the fast bundle committed %d transactions on a fast path, want at least %d: the script no longer exercises it", fast.commits, minFast)
	}
	if !slices.Equal(fast.log, general.log) {
		for i := range max(len(fast.log), len(general.log)) {
			var a, g string
			if i < len(fast.log) {
				a = fast.log[i]
			}
			if i < len(general.log) {
				g = general.log[i]
			}
			if a != g {
				t.Errorf("answer %d: fast %q, general %q", i, a, g)
			}
		}
	}
	diffs := dbdiff.Diff(fast.snap, general.snap, "fast", "general")
	for _, d := range diffs {
		t.Error(d)
	}
	if len(diffs) == 0 {
		n := 0
		for _, rows := range fast.snap.Rows {
			n += len(rows)
		}
		t.Logf("%d rows of %d tables alike", n, len(fast.snap.Rows))
	}
}
