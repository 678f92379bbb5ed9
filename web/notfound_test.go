package web_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/db/testdb"
	"anvil/web"
)

// Unknown paths are a clean 404 for everybody (a page, JSON under /api/);
// known pages still send anonymous visitors to the login.
func TestUnknownPathsAreNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	anon := b.browser(t)
	for _, tc := range []struct {
		method, path string
		json         bool
	}{
		{"GET", "/no/such/page", false},
		{"POST", "/no/such/page", false},
		{"GET", "/projects/x/y/z", false},
		{"GET", "/api/private/no/such", true},
		{"POST", "/api/private/nothing", true},
		{"GET", "/api/private", true},
		// Files under /static/, never a listing of them.
		{"GET", "/static/", false},
		{"GET", "/static/src/", false},
	} {
		req, _ := http.NewRequest(tc.method, b.srv.URL+tc.path, nil)
		status, body := do(t, anon.c, req)
		if status != http.StatusNotFound {
			t.Errorf("anonymous %s %s = %d, want 404", tc.method, tc.path, status)
			continue
		}
		if tc.json && body["error"] != "not_found" {
			t.Errorf("%s %s: body %v, want {\"error\":\"not_found\"}", tc.method, tc.path, body)
		}
		if !tc.json && !strings.Contains(body["_body"].(string), `data-testid="error-page"`) {
			t.Errorf("%s %s: not the error page: %.200s", tc.method, tc.path, body["_body"])
		}
	}
	res, _ := anon.get("/settings")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Errorf("anonymous GET /settings = %d %q, want 303 to the login", res.StatusCode, res.Header.Get("Location"))
	}

	// A signed-in visitor gets the same 404, inside the navigation.
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	res, body := br.get("/no/such/page")
	if res.StatusCode != http.StatusNotFound || !strings.Contains(body, `data-testid="nav"`) {
		t.Errorf("signed-in GET /no/such/page = %d (nav shown: %v)", res.StatusCode, strings.Contains(body, `data-testid="nav"`))
	}
}

// lockedBuffer collects a logger's output for a test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A browser that goes away while its request waits on the database is no
// error: the request is logged (status 499) below the error level.
func TestClientGoneIsNoError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(web.New(web.Deps{DB: b.db, Services: b.services, Keys: b.keys, Log: log, Options: testOptions()}))
	defer srv.Close()
	br := b.browser(t)
	br.base = srv.URL
	br.login("owner@acme.test", testPassword)

	// Hold the session lookup: the sessions table is locked by another
	// connection until the client has gone.
	ctx := context.Background()
	dbName := b.db.Pool.Config().ConnConfig.Database
	admin, err := pgx.Connect(ctx, testdb.URLFor(dbName))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	reqCtx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(reqCtx, "GET", srv.URL+"/projects", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := br.c.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	waitFor(t, "the session lookup to wait for the lock", func() bool {
		var n int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, dbName).Scan(&n)
		return n > 0
	})
	cancel()
	<-done
	waitFor(t, "the request to be logged", func() bool { return strings.Contains(logs.String(), `"path":"/projects"`) })
	if _, err := tx.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"status":499`) {
		t.Errorf("the request is not logged with status 499:\n%s", logs.String())
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) {
			t.Errorf("logged above info: %s", line)
		}
	}
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
