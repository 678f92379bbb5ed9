// Package domaintest is the harness of the domain's capability packages'
// tests: a fresh database cloned from the migrated template, a store with a
// settable clock, an organisation with its owner, a started queue and, for
// the incident and feed tests, a project with a feed connection.
package domaintest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/account"
	"anvil/domain/card"
	"anvil/domain/feed"
	"anvil/domain/incident"
	"anvil/domain/project"
	"anvil/domain/run"
	"anvil/domain/secret"
)

// Clock is a settable clock for Store.Now: the one fake clock of the
// domain's tests (domaintest's bundles start it at the wall clock's time,
// difftest's at its Epoch).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a clock that starts at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Bundle is one test's database and services.
type Bundle struct {
	DB       *db.DB
	Store    *domain.Store
	Accounts *account.Accounts
	Projects *project.Projects
	Queue    *run.Queue
	Clock    *Clock
	Owner    *domain.Principal
	River    *river.Client[*sql.Tx]
}

// Setup builds a Bundle on a fresh database: the organisation "acme" and
// its owner, a store whose clock the test moves, an inserting River client.
func Setup(t testing.TB) *Bundle {
	t.Helper()
	d := testdb.New(t)
	keys, err := secret.NewKeyring(make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := domain.NewStore(d.Bun, keys, nil)
	store.Pool = d.Pool
	c := NewClock(time.Now().UTC())
	store.Now = c.Now
	client, err := river.NewClient(riverdatabasesql.New(d.SQL), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store.UseJobs(client)
	StartStore(t, store)
	b := &Bundle{DB: d, Store: store, Accounts: account.NewAccounts(store), Projects: project.NewProjects(store),
		Queue: NewQueue(t, store), Clock: c, River: client}
	res, err := b.Accounts.Bootstrap(context.Background(), "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	b.Owner, err = b.Accounts.Authenticate(context.Background(), res.Token)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Strp is &s.
func Strp(s string) *string { return &s }

// StartStore starts the store's machinery, stopped when the test ends.
func StartStore(t testing.TB, s *domain.Store) {
	t.Helper()
	s.Start(context.Background())
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// NewQueue builds a queue that accepts, stopped when the test ends.
func NewQueue(t testing.TB, s *domain.Store) *run.Queue {
	t.Helper()
	q := run.NewQueue(s, time.Minute)
	q.StartAccepting(context.Background())
	t.Cleanup(func() {
		if err := q.StopAccepting(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return q
}

// NewFeed builds a started feed, stopped when the test ends. It folds its
// incident deltas before it answers (SyncFold), so tests read exact counts
// at once; the tests of folding itself build theirs with feed.NewFeed.
func NewFeed(t testing.TB, s *domain.Store) *feed.Feed {
	t.Helper()
	f := feed.NewFeed(s)
	f.SyncFold = true
	f.Start(context.Background())
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f
}

// Project creates a project of the owner's organisation.
func (b *Bundle) Project(t testing.TB, slug string) *domain.Project {
	t.Helper()
	p, err := b.Projects.Create(context.Background(), b.Owner, project.ProjectInput{Slug: Strp(slug), RepoURL: Strp("https://git.example/" + slug + ".git"),
		DefaultBranch: Strp("main"), RunCommand: Strp("make test")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Run reads a run.
func (b *Bundle) Run(t testing.TB, id uuid.UUID) *run.Run {
	t.Helper()
	r, err := b.Queue.RunByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// IncidentBundle adds the incident store, cards and the feed to Bundle,
// with the project "shop" bound to environment production.
type IncidentBundle struct {
	*Bundle
	Incidents *incident.Incidents
	Cards     *card.Cards
	Feed      *feed.Feed
	Proj      *domain.Project
	Sender    *feed.FeedSender
}

// SetupIncidents builds an IncidentBundle whose binding has policy.
func SetupIncidents(t testing.TB, policy string) *IncidentBundle {
	t.Helper()
	b := Setup(t)
	ib := &IncidentBundle{Bundle: b, Incidents: incident.NewIncidents(b.Store, b.Queue), Cards: card.NewCards(b.Store), Feed: NewFeed(t, b.Store)}
	ib.Feed.OnQueued = ib.Incidents.RequestRepairs
	ctx := context.Background()
	p, err := b.Projects.Create(ctx, b.Owner, project.ProjectInput{Slug: Strp("shop"), RepoURL: Strp("https://git.example/shop.git"),
		DefaultBranch: Strp("main"), RunCommand: Strp("make test"), RepairCommand: Strp("./fix.sh")})
	if err != nil {
		t.Fatal(err)
	}
	ib.Proj = p
	if _, err := ib.Feed.PutBinding(ctx, b.Owner, p.ID, "production", policy); err != nil {
		t.Fatal(err)
	}
	_, tok, err := ib.Feed.CreateConnection(ctx, b.Owner, p.ID, "api")
	if err != nil {
		t.Fatal(err)
	}
	if ib.Sender, err = ib.Feed.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	return ib
}

// Send ingests one event with the given title and returns its incident.
func (ib *IncidentBundle) Send(t testing.TB, title string) *incident.Incident {
	t.Helper()
	id := uuid.NewString()
	res, err := ib.Feed.Ingest(context.Background(), ib.Sender, "127.0.0.1", []json.RawMessage{FeedEvent(id, title)})
	if err != nil || len(res.Accepted) != 1 {
		t.Fatalf("ingest: %v %+v", err, res)
	}
	var incID uuid.UUID
	if err := ib.DB.Bun.NewRaw(`SELECT incident_id FROM feed_events WHERE event_id_key = ?`, id).Scan(context.Background(), &incID); err != nil {
		t.Fatal(err)
	}
	return ib.Incident(t, incID)
}

// Incident reads an incident.
func (ib *IncidentBundle) Incident(t testing.TB, id uuid.UUID) *incident.Incident {
	t.Helper()
	inc, err := ib.Incidents.Get(context.Background(), ib.Owner.OrgID, id)
	if err != nil {
		t.Fatal(err)
	}
	return inc
}

// Force puts an incident into a status directly (fixtures for the table).
func (ib *IncidentBundle) Force(t testing.TB, id uuid.UUID, status string) {
	t.Helper()
	if _, err := ib.DB.Bun.NewRaw(`UPDATE incidents SET status = ? WHERE id = ?`, status, id).Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// LastTransition reads an incident's last recorded transition.
func (ib *IncidentBundle) LastTransition(t testing.TB, id uuid.UUID) (from, to, actor, actorID, reason string) {
	t.Helper()
	var f *string
	err := ib.DB.Bun.QueryRowContext(context.Background(), `SELECT from_status, to_status, actor_kind, actor_id, reason
		FROM incident_transitions WHERE incident_id = ? ORDER BY id DESC LIMIT 1`, id).Scan(&f, &to, &actor, &actorID, &reason)
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		from = *f
	}
	return
}

// Jobs counts the available jobs of a kind.
func (ib *IncidentBundle) Jobs(t testing.TB, kind string) int {
	t.Helper()
	var n int
	if err := ib.DB.Bun.NewRaw(`SELECT count(*) FROM river_job WHERE kind = ? AND state = 'available'`, kind).Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// CardChanges reads the project's row of card_changes.
func (ib *IncidentBundle) CardChanges(t testing.TB) (version, refreshed int64, queued bool) {
	t.Helper()
	if err := ib.DB.Bun.NewRaw(`SELECT version, refreshed, queued FROM card_changes WHERE project_id = ?`, ib.Proj.ID).
		Scan(context.Background(), &version, &refreshed, &queued); err != nil {
		t.Fatal(err)
	}
	return
}

// FeedEvent is a valid event of environment production with the given id
// and title (its exception type derives from the title).
func FeedEvent(id, title string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"schema_version": "1.0", "event_id": id, "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": title, "level": "error", "environment": "production", "service": "api", "sdk": map[string]any{"name": "t"},
		"exception": map[string]any{"type": "E" + title, "message": "boom"}})
	return raw
}

// ErrCode is the code of a *domain.Error, else the error's text ("" for nil).
func ErrCode(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Code
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// CountRows counts the rows of table that match where.
func (b *Bundle) CountRows(t testing.TB, table string, where string, args ...any) int {
	t.Helper()
	n, err := b.DB.Bun.NewSelect().Table(table).Where(where, args...).Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}
