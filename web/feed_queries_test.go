package web_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/uptrace/bun"
)

// queryCounter counts the queries bun sends while it is on.
type queryCounter struct {
	on atomic.Bool
	n  atomic.Int64
}

func (q *queryCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	if q.on.Load() {
		q.n.Add(1)
	}
	return ctx
}

func (q *queryCounter) AfterQuery(context.Context, *bun.QueryEvent) {}

// count runs f with the counter on and returns how many queries it sent.
func (q *queryCounter) count(f func()) int64 {
	q.n.Store(0)
	q.on.Store(true)
	f()
	q.on.Store(false)
	return q.n.Load()
}

// TestFeedPageQueriesDoNotGrowWithConnections: the Feed page and the
// connections API read a project's connections in a fixed number of
// queries, not one more for each browser connection (its DSN names the
// project, read once).
func TestFeedPageQueriesDoNotGrowWithConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	qc := &queryCounter{}
	b.db.Bun.AddQueryHook(qc) //nolint:staticcheck // the running server's own DB is hooked: WithQueryHook makes a clone it never uses
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	addBrowser := func(i int) {
		st, out := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/connections",
			map[string]any{"name": "web-" + strconv.Itoa(i), "kind": "browser", "allowed_origins": []string{"https://shop.example"}})
		if st != http.StatusCreated {
			t.Fatalf("browser connection: %d %v", st, out)
		}
	}
	// The fewest queries of three tries: the server's background work
	// (live events, sweeps) may add one to a try, never take one away.
	measure := func() (page, api int64) {
		page, api = 1<<30, 1<<30
		for range 3 {
			page = min(page, qc.count(func() {
				if res, _ := br.get("/projects/" + f.projectID + "/feed"); res.StatusCode != http.StatusOK {
					t.Fatalf("feed page: %d", res.StatusCode)
				}
			}))
			api = min(api, qc.count(func() {
				if st, _ := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+f.projectID+"/connections", nil); st != http.StatusOK {
					t.Fatalf("connections: %d", st)
				}
			}))
		}
		return page, api
	}
	addBrowser(0)
	page1, api1 := measure()
	for i := 1; i < 10; i++ {
		addBrowser(i)
	}
	page10, api10 := measure()
	if page10 != page1 || api10 != api1 {
		t.Fatalf("queries with 1 and 10 browser connections: page %d and %d, API %d and %d", page1, page10, api1, api10)
	}
}
