package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/feed"
	"anvil/domain/project"
	"anvil/domain/retention"
	"anvil/domain/secret"
	"anvil/domain/wiring"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func strp(s string) *string { return &s }
func intp(n int) *int       { return &n }

type testBundle struct {
	db     *db.DB
	sv     *wiring.Services
	ret    *retention.Service
	owner  *domain.Principal
	proj   *domain.Project
	sender *feed.FeedSender
	now    time.Time
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	ctx := context.Background()
	d := testdb.New(t)
	keys, err := secret.NewKeyring(make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	sv := wiring.NewServices(d, keys, nil, wiring.Options{})
	sv.Feed.SyncFold = true // counts are read right after ingests
	if _, err := sv.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sv.Stop(context.Background()); err != nil {
			t.Errorf("stop the services: %v", err)
		}
	})
	b := &testBundle{db: d, sv: sv, ret: sv.Retention, now: time.Now().UTC()}
	b.ret.SetNow(func() time.Time { return b.now })
	b.ret.Share = 1 // these tests are about what is kept; pacing has its own test
	res, err := sv.Accounts.Bootstrap(ctx, "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if b.owner, err = sv.Accounts.Authenticate(ctx, res.Token); err != nil {
		t.Fatal(err)
	}
	if b.proj, err = sv.Projects.Create(ctx, b.owner, project.ProjectInput{Slug: strp("shop"), RepoURL: strp("https://git.example/shop.git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test")}); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Feed.PutBinding(ctx, b.owner, b.proj.ID, "production", domain.PolicyObserve); err != nil {
		t.Fatal(err)
	}
	_, tok, err := sv.Feed.CreateConnection(ctx, b.owner, b.proj.ID, "api")
	if err != nil {
		t.Fatal(err)
	}
	if b.sender, err = sv.Feed.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	return b
}

func feedEvent(id, title string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": id, "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": title, "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "E" + title, "message": "boom"}})
	return raw
}

// send stores n events of the incident title, received at the given times
// (one per event; the incident's last_seen follows the newest), and
// returns their ids.
func (b *testBundle) send(t *testing.T, title string, at ...time.Time) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, len(at))
	raws := make([]json.RawMessage, len(at))
	for i := range at {
		ids[i] = uuid.NewString()
		raws[i] = feedEvent(ids[i], title)
	}
	res, err := b.sv.Feed.Ingest(ctx, b.sender, "127.0.0.1", raws)
	if err != nil || len(res.Accepted) != len(raws) {
		t.Fatalf("ingest: %v %+v", err, res)
	}
	for i, id := range ids {
		b.exec(t, `UPDATE feed_events SET received_at = ? WHERE event_id_key = ?`, at[i], id)
	}
	b.exec(t, `UPDATE incidents i SET last_seen = m.t, first_seen = LEAST(i.first_seen, m.f)
		FROM (SELECT incident_id, max(received_at) t, min(received_at) f FROM feed_events GROUP BY 1) m WHERE m.incident_id = i.id`)
	return ids
}

func (b *testBundle) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := b.db.Bun.NewRaw(q, args...).Exec(context.Background()); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (b *testBundle) count(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := b.db.Bun.NewRaw(q, args...).Scan(context.Background(), &n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// stored is the set of event ids stored.
func (b *testBundle) stored(t *testing.T) map[string]bool {
	t.Helper()
	var ids []string
	if err := b.db.Bun.NewRaw(`SELECT event_id_key FROM feed_events`).Scan(context.Background(), &ids); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func (b *testBundle) cleanup(t *testing.T) retention.Report {
	t.Helper()
	rep, err := b.ret.Cleanup(context.Background())
	if err != nil {
		t.Fatalf("clean-up: %v", err)
	}
	return rep
}

func times(start time.Time, step time.Duration, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = start.Add(time.Duration(i) * step)
	}
	return out
}

// TestEventsPastTheirAge: events older than the policy's age are deleted,
// younger ones stay, and the incident's count never changes.
func TestEventsPastTheirAge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.send(t, "old fault", times(b.now.Add(-100*retention.Day), time.Minute, 3)...)
	young := b.send(t, "old fault", times(b.now.Add(-80*retention.Day), time.Minute, 2)...)
	rep := b.cleanup(t)
	got := b.stored(t)
	for _, id := range old {
		if got[id] {
			t.Errorf("event %s is 100 days old and still stored", id)
		}
	}
	for _, id := range young {
		if !got[id] {
			t.Errorf("event %s is 80 days old and was deleted", id)
		}
	}
	if rep.Total.Events != 3 || len(rep.Scopes) != 1 || rep.Scopes[0].ProjectSlug != "shop" {
		t.Errorf("report = %+v; want 3 events of shop", rep)
	}
	if n := b.count(t, `SELECT event_count FROM incidents`); n != 5 {
		t.Errorf("incident count = %d after the clean-up; want 5 (counts never change)", n)
	}
	// A project's policy shortens it; the operator's maximum bounds it.
	if _, err := b.ret.PutProjectPolicy(context.Background(), b.owner, b.proj.ID, retention.Document{Events: strp("30d")}); err != nil {
		t.Fatal(err)
	}
	if rep := b.cleanup(t); rep.Total.Events != 2 {
		t.Errorf("with events 30d the clean-up removed %d; want the 2 of 80 days", rep.Total.Events)
	}
	stats, _, err := b.ret.Stats(context.Background(), b.owner)
	if err != nil || len(stats) != 1 || stats[0].Events != 0 || stats[0].LastCleanup == nil || stats[0].LastCleanup.Events != 2 {
		t.Fatalf("stats = %+v, %v; want no event stored and a last clean-up of 2", stats, err)
	}
}

// TestSamplesPerIncident: of an incident's events the first and the most
// recent are kept, the others sampled away once past the grace; the count
// stays and the incident says how many went.
func TestSamplesPerIncident(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{
		EventsPerIncident: &retention.Samples{First: intp(2), Last: intp(3)}}); err != nil {
		t.Fatal(err)
	}
	ids := b.send(t, "busy fault", times(b.now.Add(-3*retention.Day), time.Minute, 12)...)
	rep := b.cleanup(t)
	if rep.Total.Sampled != 7 {
		t.Errorf("sampled %d; want 7", rep.Total.Sampled)
	}
	got := b.stored(t)
	for i, id := range ids {
		if want := i < 2 || i >= 9; got[id] != want {
			t.Errorf("event %d stored = %v; want %v", i, got[id], want)
		}
	}
	var incID uuid.UUID
	if err := b.db.Bun.NewRaw(`SELECT id FROM incidents`).Scan(ctx, &incID); err != nil {
		t.Fatal(err)
	}
	if n, err := b.ret.SampledAway(ctx, incID); err != nil || n != 7 {
		t.Errorf("sampled away = %d, %v; want 7", n, err)
	}
	if n := b.count(t, `SELECT event_count FROM incidents`); n != 12 {
		t.Errorf("event_count = %d; want 12", n)
	}
	// Events inside the grace (a day) stay, whatever the sample says.
	fresh := b.send(t, "busy fault", times(b.now.Add(-time.Hour), time.Second, 5)...)
	rep = b.cleanup(t)
	got = b.stored(t)
	for _, id := range fresh {
		if !got[id] {
			t.Errorf("event %s is an hour old and was sampled away", id)
		}
	}
	// The last 3 are now fresh ones: the older last ones go.
	if rep.Total.Sampled != 3 || len(got) != 7 {
		t.Errorf("second clean-up sampled %d, %d stored; want 3 and 7 (2 first + 5 fresh)", rep.Total.Sampled, len(got))
	}
	// A day later the fresh ones are past the grace.
	b.now = b.now.Add(2 * retention.Day)
	if rep := b.cleanup(t); rep.Total.Sampled != 2 {
		t.Errorf("third clean-up sampled %d; want 2", rep.Total.Sampled)
	}
	if n, _ := b.ret.SampledAway(ctx, incID); n != 12 {
		t.Errorf("sampled away = %d; want 12", n)
	}
	if n := b.count(t, `SELECT event_count FROM incidents`); n != 17 {
		t.Errorf("event_count = %d; want 17", n)
	}
}

// addRun stores a finished run with a log of one chunk.
func (b *testBundle) addRun(t *testing.T, number int, finished time.Time) uuid.UUID {
	t.Helper()
	id := uuid.New()
	b.exec(t, `INSERT INTO project_runs (id, project_id, org_id, state, trigger, branch, number, queued_at, finished_at, updated_at, d1_sync_status)
		VALUES (?, ?, ?, 'passed', 'manual', 'main', ?, ?, ?, ?, 'done')`, id, b.proj.ID, b.owner.OrgID, number, finished, finished, finished)
	b.exec(t, `INSERT INTO run_log_chunks (run_id, seq, body, created_at) VALUES (?, 1, 'hello', ?), (?, 2, 'world', ?)`, id, finished, id, finished)
	b.exec(t, `INSERT INTO run_connections (run_id, seq, host, port, verdict, started_at) VALUES (?, 1, 'registry.npmjs.org', 443, 'allowed', ?)`, id, finished)
	b.exec(t, `INSERT INTO run_artifacts (run_id, path, step, size, sha256, body) VALUES (?, 'dist/app', 'build', 5, 'x', 'hello')`, id)
	b.exec(t, `INSERT INTO run_services (run_id, name, seq, status, log, log_bytes) VALUES (?, 'db', 0, 'stopped', 'db is up', 8)`, id)
	return id
}

// TestLogsByAgeAndCount: a run's log goes when it is both older than the
// age and not among the last runs — whichever rule keeps more wins.
func TestLogsByAgeAndCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{LogRuns: intp(2), Logs: strp("30d")}); err != nil {
		t.Fatal(err)
	}
	var runs []uuid.UUID
	for i := 1; i <= 4; i++ {
		runs = append(runs, b.addRun(t, i, b.now.Add(-40*retention.Day)))
	}
	runs = append(runs, b.addRun(t, 5, b.now.Add(-retention.Day)))
	rep := b.cleanup(t)
	for i, id := range runs {
		n := b.count(t, `SELECT count(*) FROM run_log_chunks WHERE run_id = ?`, id)
		if want := map[bool]int64{true: 2, false: 0}[i >= 3]; n != want {
			t.Errorf("run %d has %d chunks; want %d (the last 2 runs keep theirs)", i+1, n, want)
		}
		// Its connections go with its log (docs/network.md).
		if n, want := b.count(t, `SELECT count(*) FROM run_connections WHERE run_id = ?`, id), map[bool]int64{true: 1, false: 0}[i >= 3]; n != want {
			t.Errorf("run %d has %d connections; want %d", i+1, n, want)
		}
		// So do its artifacts (docs/pipelines.md).
		if n, want := b.count(t, `SELECT count(*) FROM run_artifacts WHERE run_id = ?`, id), map[bool]int64{true: 1, false: 0}[i >= 3]; n != want {
			t.Errorf("run %d has %d artifacts; want %d", i+1, n, want)
		}
		// Its services keep their state, not the end of their logs
		// (docs/images.md, "Services").
		if n, want := b.count(t, `SELECT count(*) FROM run_services WHERE run_id = ? AND log <> ''`, id), map[bool]int64{true: 1, false: 0}[i >= 3]; n != want ||
			b.count(t, `SELECT count(*) FROM run_services WHERE run_id = ?`, id) != 1 {
			t.Errorf("run %d has %d service logs; want %d, and its service", i+1, n, want)
		}
	}
	if rep.Total.LogChunks != 6 || rep.Total.LogBytes < 30 {
		t.Errorf("report %+v; want 6 chunks of at least 30 bytes", rep.Total)
	}
	// With no run kept by count, age alone keeps the recent one.
	if _, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{LogRuns: intp(0), Logs: strp("30d")}); err != nil {
		t.Fatal(err)
	}
	b.cleanup(t)
	if n := b.count(t, `SELECT count(*) FROM run_log_chunks WHERE run_id = ?`, runs[4]); n != 2 {
		t.Errorf("the day-old run has %d chunks; want 2 (kept by age)", n)
	}
	if n := b.count(t, `SELECT count(*) FROM run_log_chunks`); n != 2 {
		t.Errorf("%d chunks stored; want 2", n)
	}
	if n := b.count(t, `SELECT count(*) FROM project_runs`); n != 5 {
		t.Errorf("%d runs; want 5 (only logs go)", n)
	}
}

// TestIncidentsLeftAlone: closed and ignored incidents with no event for
// the policy's age go with their events and transitions; open ones and
// recent ones stay.
func TestIncidentsLeftAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Events are kept longer than incidents here, so that the incidents
	// still hold events when they go.
	if _, err := b.ret.PutOrgPolicy(ctx, b.owner, retention.Document{Incidents: strp("60d")}); err != nil {
		t.Fatal(err)
	}
	b.send(t, "closed long ago", b.now.Add(-70*retention.Day), b.now.Add(-65*retention.Day))
	b.send(t, "ignored long ago", b.now.Add(-70*retention.Day))
	b.send(t, "closed lately", b.now.Add(-10*retention.Day))
	b.send(t, "open long ago", b.now.Add(-70*retention.Day))
	b.exec(t, `UPDATE incidents SET status = 'CLOSED' WHERE title IN ('closed long ago', 'closed lately')`)
	b.exec(t, `UPDATE incidents SET status = 'IGNORED' WHERE title = 'ignored long ago'`)
	rep := b.cleanup(t)
	var left []string
	if err := b.db.Bun.NewRaw(`SELECT title FROM incidents ORDER BY title`).Scan(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] != "closed lately" || left[1] != "open long ago" {
		t.Errorf("incidents left = %v; want closed lately, open long ago", left)
	}
	if rep.Total.Incidents != 2 || rep.Total.Events != 3 {
		t.Errorf("report %+v; want 2 incidents and their 3 events", rep.Total)
	}
	if n := b.count(t, `SELECT count(*) FROM incident_transitions t WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = t.incident_id)`); n != 0 {
		t.Errorf("%d transitions of deleted incidents left", n)
	}
	if n := b.count(t, `SELECT count(*) FROM feed_events`); n != 2 {
		t.Errorf("%d events stored; want 2", n)
	}
}

// TestAuditEntriesAge: entries older than the audit age go, per organisation.
func TestAuditEntriesAge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.count(t, `SELECT count(*) FROM audit_log`)
	b.exec(t, `INSERT INTO audit_log (org_id, at, actor_email, kind) VALUES (?, ?, 'x@acme.test', 'old.thing'), (?, ?, 'x@acme.test', 'old.thing')`,
		b.owner.OrgID, b.now.Add(-400*retention.Day), b.owner.OrgID, b.now.Add(-366*retention.Day))
	b.exec(t, `INSERT INTO audit_log (org_id, at, actor_email, kind) VALUES (?, ?, 'x@acme.test', 'recent.thing')`, b.owner.OrgID, b.now.Add(-300*retention.Day))
	rep := b.cleanup(t)
	if rep.Total.Audit != 2 {
		t.Errorf("removed %d audit entries; want 2", rep.Total.Audit)
	}
	if n := b.count(t, `SELECT count(*) FROM audit_log`); n != before+1 {
		t.Errorf("%d entries; want %d", n, before+1)
	}
	if _, last, err := b.ret.Stats(context.Background(), b.owner); err != nil || last == nil || last.Audit != 2 {
		t.Errorf("the organisation's last clean-up = %+v, %v; want 2 audit entries", last, err)
	}
}

// TestCleanupResumesAfterACrash: a clean-up stopped between two batches
// leaves a consistent state; the next one finishes the work and its
// record counts both.
func TestCleanupResumesAfterACrash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{
		EventsPerIncident: &retention.Samples{First: intp(1), Last: intp(1)}}); err != nil {
		t.Fatal(err)
	}
	old := b.send(t, "old", times(b.now.Add(-120*retention.Day), time.Minute, 9)...)
	busy := b.send(t, "busy", times(b.now.Add(-10*retention.Day), time.Minute, 8)...)
	b.ret.BatchSize = 2
	cctx, cancel := context.WithCancel(ctx)
	var batches atomic.Int32
	b.ret.SetAfterBatch(func() {
		if batches.Add(1) == 3 {
			cancel()
		}
	})
	if _, err := b.ret.Cleanup(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("clean-up stopped between batches: err = %v; want context.Canceled", err)
	}
	if mid := b.stored(t); len(mid) >= 17 || len(mid) <= 2 {
		t.Fatalf("%d of 17 events stored after the stop; want a clean-up half done", len(mid))
	}
	b.ret.SetAfterBatch(nil)
	b.cleanup(t)
	got := b.stored(t)
	want := map[string]bool{busy[0]: true, busy[7]: true}
	if len(got) != len(want) || !got[busy[0]] || !got[busy[7]] {
		t.Errorf("stored after the resumed clean-up = %v; want the busy incident's first and last", got)
	}
	for _, id := range old {
		if got[id] {
			t.Errorf("old event %s survived", id)
		}
	}
	var rec struct {
		Events   int64      `bun:"events"`
		Sampled  int64      `bun:"sampled"`
		Finished *time.Time `bun:"finished_at"`
	}
	if err := b.db.Bun.NewRaw(`SELECT events, sampled, finished_at FROM retention_cleanups WHERE project_id = ?`, b.proj.ID).Scan(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Events != 9 || rec.Sampled != 6 || rec.Finished == nil {
		t.Errorf("record = %+v; want 9 events and 6 sampled over both runs, finished", rec)
	}
	// Idempotent: once more removes nothing.
	if rep := b.cleanup(t); !rep.Total.Zero() {
		t.Errorf("a clean-up after a complete one removed %+v", rep.Total)
	}
}

// TestCleanupUnderFeedLoad: batches delete while senders keep sending;
// no ingest fails and every old event goes.
func TestCleanupUnderFeedLoad(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		b.send(t, "old", times(b.now.Add(-100*retention.Day), time.Second, 50)...)
	}
	b.ret.BatchSize = 20
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, failed atomic.Int64
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				raws := []json.RawMessage{feedEvent(uuid.NewString(), "old"), feedEvent(uuid.NewString(), "new")}
				res, err := b.sv.Feed.Ingest(ctx, b.sender, "127.0.0.1", raws)
				if err != nil || len(res.Accepted) != 2 {
					failed.Add(1)
				}
				sent.Add(2)
			}
		}()
	}
	rep, err := b.ret.Cleanup(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if failed.Load() != 0 {
		t.Errorf("%d ingests failed during the clean-up", failed.Load())
	}
	if rep.Total.Events != 200 {
		t.Errorf("removed %d; want the 200 old events", rep.Total.Events)
	}
	if n := b.count(t, `SELECT count(*) FROM feed_events`); n != sent.Load() {
		t.Errorf("%d events stored; want the %d sent meanwhile", n, sent.Load())
	}
	if n := b.count(t, `SELECT sum(event_count) FROM incidents`); n != 200+sent.Load() {
		t.Errorf("counts sum to %d; want %d", n, 200+sent.Load())
	}
}

// TestDailyBudget: a request that would pass the day's budget is refused
// whole with the time to the next UTC midnight; the next day starts at 0.
func TestDailyBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.now = time.Date(2026, 3, 10, 23, 59, 0, 0, time.UTC)
	bud := b.ret.Budget()
	if rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 100); rf != nil {
		t.Fatalf("no budget set: refused %v", rf)
	}
	budget := int64(105)
	if _, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{DailyEventBudget: &budget}); err != nil {
		t.Fatal(err)
	}
	if rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 3); rf != nil {
		t.Fatalf("103 of 105: refused %v", rf)
	}
	rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 3)
	if rf == nil || rf.Budget != 105 || rf.Used != 103 || rf.RetryAfter != 60*time.Second ||
		!rf.ResetsAt.Equal(time.Date(2026, 3, 11, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("106 of 105: refusal = %+v; want budget 105, used 103, retry after 60 s", rf)
	}
	if rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 2); rf != nil {
		t.Fatalf("105 of 105: refused %v", rf)
	}
	if err := bud.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if used, lim, err := bud.Usage(ctx, b.owner.OrgID, b.proj.ID); err != nil || used != 105 || lim != 105 {
		t.Errorf("usage = %d of %d, %v; want 105 of 105", used, lim, err)
	}
	if rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 1); rf == nil {
		t.Fatal("106 of 105 after a flush: admitted")
	}
	b.now = b.now.Add(2 * time.Minute)
	if rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 105); rf != nil {
		t.Fatalf("a new day: refused %v", rf)
	}
	// 0 on the project: no budget even when the organisation sets one.
	orgBudget := int64(1)
	if _, err := b.ret.PutOrgPolicy(ctx, b.owner, retention.Document{DailyEventBudget: &orgBudget}); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{DailyEventBudget: &zero}); err != nil {
		t.Fatal(err)
	}
	if rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 1000); rf != nil {
		t.Fatalf("project budget 0 (none): refused %v", rf)
	}
}

// TestPolicyDocuments: defaults, inheritance, the operator's maximum,
// clear refusals that change nothing, the admin role and the audit entry.
func TestPolicyDocuments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	org, err := b.ret.OrgPolicy(ctx, b.owner)
	if err != nil {
		t.Fatal(err)
	}
	if *org.Events != "90d" || *org.Logs != "30d" || *org.LogRuns != 200 || *org.Incidents != "180d" || *org.Audit != "365d" ||
		*org.EventsPerIncident.First != 10 || *org.EventsPerIncident.Last != 100 || org.DailyEventBudget != nil || org.MaxEvents != "90d" {
		t.Errorf("defaults = %+v", org)
	}
	for _, tc := range []struct {
		doc  retention.Document
		code string
	}{
		{retention.Document{Events: strp("91d")}, "invalid_duration"},
		{retention.Document{Logs: strp("12 hours")}, "invalid_duration"},
		{retention.Document{Incidents: strp("0d")}, "invalid_duration"},
		{retention.Document{LogRuns: intp(-1)}, "invalid_count"},
		{retention.Document{EventsPerIncident: &retention.Samples{Last: intp(1_000_000)}}, "invalid_count"},
	} {
		if _, err := b.ret.PutOrgPolicy(ctx, b.owner, tc.doc); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%+v: err = %v; want invalid", tc.doc, err)
		} else if de := (*domain.Error)(nil); !errors.As(err, &de) || de.Code != tc.code {
			t.Errorf("%+v: code = %v; want %s", tc.doc, err, tc.code)
		}
	}
	if _, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{Audit: strp("30d")}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("audit on a project: err = %v; want invalid", err)
	}
	if n := b.count(t, `SELECT count(*) FROM retention_policies`); n != 0 {
		t.Errorf("refused documents stored %d rows", n)
	}
	if _, err := b.sv.Accounts.AddMember(ctx, b.owner, "member@acme.test", "correct horse battery", domain.RoleMember); err != nil {
		t.Fatal(err)
	}
	_, member, err := b.sv.Accounts.Login(ctx, "member@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ret.PutOrgPolicy(ctx, member, retention.Document{Events: strp("7d")}); !errors.Is(err, domain.ErrForbidden) {
		t.Errorf("a member's change: err = %v; want forbidden", err)
	}
	if _, err := b.ret.PutOrgPolicy(ctx, b.owner, retention.Document{Events: strp("14d"), Logs: strp("12h")}); err != nil {
		t.Fatal(err)
	}
	pd, err := b.ret.PutProjectPolicy(ctx, b.owner, b.proj.ID, retention.Document{Events: strp("45s"), EventsPerIncident: &retention.Samples{Last: intp(5)}})
	if err != nil {
		t.Fatal(err)
	}
	if *pd.Events != "45s" || pd.Logs != nil || *pd.Effective.Events != "45s" || *pd.Effective.Logs != "12h" ||
		*pd.Effective.EventsPerIncident.First != 10 || *pd.Effective.EventsPerIncident.Last != 5 {
		t.Errorf("project document = %+v, effective %+v", pd.Document, pd.Effective)
	}
	if n := b.count(t, `SELECT count(*) FROM audit_log WHERE kind = ?`, retention.AuditChanged); n != 2 {
		t.Errorf("%d audit entries of policy changes; want 2", n)
	}
	// The operator lowers the maximum: stored policies are held to it.
	b.ret.MaxEvents = 7 * retention.Day
	t.Cleanup(func() { b.ret.MaxEvents = retention.DefaultEvents })
	if pol, err := b.ret.Effective(ctx, b.owner.OrgID, uuid.New()); err != nil || pol.Events != 7*retention.Day {
		t.Errorf("effective events = %v, %v; want 7d", pol.Events, err)
	}
	for in, want := range map[string]time.Duration{"90d": 90 * retention.Day, "12h": 12 * time.Hour, "30m": 30 * time.Minute, "45s": 45 * time.Second} {
		if d, err := retention.ParseDuration(in); err != nil || d != want || retention.FormatDuration(d) != in {
			t.Errorf("%s: %v, %v", in, d, err)
		}
	}
}

// BenchmarkBudgetAdmit is the budget's cost per request on the feed's path:
// a lock and two map lookups (the budget and today's total are re-read at
// most every 5 s).
func BenchmarkBudgetAdmit(bm *testing.B) {
	b := setup(bm)
	budget := int64(1 << 39)
	if _, err := b.ret.PutProjectPolicy(context.Background(), b.owner, b.proj.ID, retention.Document{DailyEventBudget: &budget}); err != nil {
		bm.Fatal(err)
	}
	bud := b.ret.Budget()
	ctx := context.Background()
	bm.ReportAllocs()
	bm.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if rf := bud.Admit(ctx, b.owner.OrgID, b.proj.ID, 50); rf != nil {
				bm.Fatal(rf)
			}
		}
	})
}

// quietIncident stores an incident of 10 events three days old (past the
// grace) under a lenient sample (1 first, 5 last), and runs the clean-up
// that samples it and sets the project's mark past its last event: from
// then on only a reset of the mark brings the incident back to sampling.
func (b *testBundle) quietIncident(t *testing.T) {
	t.Helper()
	if _, err := b.ret.PutProjectPolicy(context.Background(), b.owner, b.proj.ID, retention.Document{
		EventsPerIncident: &retention.Samples{First: intp(1), Last: intp(5)}}); err != nil {
		t.Fatal(err)
	}
	b.send(t, "quiet", times(b.now.Add(-3*retention.Day), time.Minute, 10)...)
	if rep := b.cleanup(t); rep.Total.Sampled != 4 {
		t.Fatalf("first clean-up sampled %d; want 4", rep.Total.Sampled)
	}
}

// stricter is the policy PUT of the tests below: keep 1 first and 1 last.
func (b *testBundle) stricter(t *testing.T) {
	if _, err := b.ret.PutProjectPolicy(context.Background(), b.owner, b.proj.ID, retention.Document{
		EventsPerIncident: &retention.Samples{First: intp(1), Last: intp(1)}}); err != nil {
		t.Error(err)
	}
}

// resetStands checks that the PUT's reset of the mark stood through the
// clean-up it interleaved with, and that the next clean-up applies the
// stricter rule to the quiet incident.
func (b *testBundle) resetStands(t *testing.T) {
	t.Helper()
	if n := b.count(t, `SELECT count(*) FROM retention_cleanups WHERE project_id = ? AND sampled_until IS NOT NULL`, b.proj.ID); n != 0 {
		t.Fatal("the clean-up wrote its sampling mark over the policy change's reset")
	}
	if rep := b.cleanup(t); rep.Total.Sampled != 4 || len(b.stored(t)) != 2 {
		t.Fatalf("the clean-up after the change sampled %d, %d stored; want 4 and 2 (the stricter rule on the quiet incident)",
			rep.Total.Sampled, len(b.stored(t)))
	}
}

// TestPolicyChangeDuringCleanupWins: a policy PUT while a clean-up works on
// the project resets the sampling mark, and the clean-up, which sampled by
// the old policy, must not write its mark over that reset.
func TestPolicyChangeDuringCleanupWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.quietIncident(t)
	var once sync.Once
	b.ret.SetAfterBatch(func() {
		// Once the project's clean-up has begun (its record is open), the
		// policy changes under it.
		if b.count(t, `SELECT count(*) FROM retention_cleanups WHERE project_id = ? AND finished_at IS NULL`, b.proj.ID) == 1 {
			once.Do(func() { b.stricter(t) })
		}
	})
	b.cleanup(t)
	b.ret.SetAfterBatch(nil)
	b.resetStands(t)
}

// TestPolicyChangeWaitsForFinish: a PUT that arrives while a clean-up's
// finish has re-read the policy waits for it (the organisation's row lock)
// and then resets the mark, rather than committing between the re-read and
// the write of the mark.
func TestPolicyChangeWaitsForFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.quietIncident(t)
	done := make(chan struct{})
	var once sync.Once
	b.ret.SetBeforeFinish(func() {
		once.Do(func() {
			go func() { defer close(done); b.stricter(t) }()
			// Until the PUT is done or waits on a lock: either way it has
			// had every chance to commit before the mark is written.
			for {
				select {
				case <-done:
					return
				default:
				}
				if b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0 {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	})
	b.cleanup(t)
	<-done
	b.ret.SetBeforeFinish(nil)
	b.resetStands(t)
}
