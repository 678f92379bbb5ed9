package domain_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"anvil/db"
	"anvil/db/testdb"
	"anvil/domain"
	"anvil/domain/secret"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// clock is a settable time source for the store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type testBundle struct {
	db       *db.DB
	store    *domain.Store
	accounts *domain.Accounts
	projects *domain.Projects
	queue    *domain.Queue
	clock    *clock
	owner    *domain.Principal
	river    *river.Client[*sql.Tx]
}

func setup(t *testing.T) *testBundle { return setupTB(t) }

// setupTB is setup for tests and benchmarks alike.
func setupTB(t testing.TB) *testBundle {
	t.Helper()
	d := testdb.New(t)
	keys, err := secret.NewKeyring(make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	store := domain.NewStore(d.Bun, keys, nil)
	store.Pool = d.Pool
	c := &clock{now: time.Now().UTC()}
	store.Now = c.Now
	client, err := river.NewClient(riverdatabasesql.New(d.SQL), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store.UseJobs(client)
	startStore(t, store)
	b := &testBundle{db: d, store: store, accounts: domain.NewAccounts(store), projects: domain.NewProjects(store),
		queue: newQueue(t, store), clock: c, river: client}
	res, err := b.accounts.Bootstrap(context.Background(), "acme", "owner@acme.test", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	b.owner, err = b.accounts.Authenticate(context.Background(), res.Token)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func strp(s string) *string { return &s }

// startStore starts a store's machinery and stops it (sending what it
// holds) when the test ends, before its database is dropped.
func startStore(t testing.TB, s *domain.Store) {
	t.Helper()
	s.Start(context.Background())
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// newQueue builds a queue that accepts, stopped when the test ends.
func newQueue(t testing.TB, s *domain.Store) *domain.Queue {
	t.Helper()
	q := domain.NewQueue(s, time.Minute)
	q.StartAccepting(context.Background())
	t.Cleanup(func() {
		if err := q.StopAccepting(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return q
}

// newFeed builds a started feed, stopped when the test ends.
func newFeed(t testing.TB, s *domain.Store) *domain.Feed {
	t.Helper()
	f := domain.NewFeed(s)
	f.Start(context.Background())
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f
}

func (b *testBundle) project(t testing.TB, slug string) *domain.Project {
	t.Helper()
	p, err := b.projects.Create(context.Background(), b.owner, domain.ProjectInput{Slug: strp(slug), RepoURL: strp("https://git.example/" + slug + ".git"),
		DefaultBranch: strp("main"), RunCommand: strp("make test")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (b *testBundle) run(t *testing.T, id uuid.UUID) *domain.Run {
	t.Helper()
	r, err := b.queue.RunByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
