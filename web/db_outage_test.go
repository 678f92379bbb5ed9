package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"anvil/db/testdb"
)

// outage drives the database out from under a running cockpit.
type outage struct {
	t     *testing.T
	admin *pgx.Conn
	name  string
}

func newOutage(t *testing.T, b *testBundle) *outage {
	t.Helper()
	ctx := context.Background()
	name := b.db.Pool.Config().ConnConfig.Database
	admin, err := pgx.Connect(ctx, testdb.URLFor("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{t: t, admin: admin, name: name}
	t.Cleanup(func() {
		o.allow(true)
		admin.Close(ctx)
	})
	return o
}

// terminate ends every backend of the test database and waits until each
// has exited, as a Postgres restart does.
func (o *outage) terminate() {
	o.t.Helper()
	if _, err := o.admin.Exec(context.Background(),
		`SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, o.name); err != nil {
		o.t.Fatal(err)
	}
}

// allow lets new connections to the test database in, or not.
func (o *outage) allow(yes bool) {
	o.t.Helper()
	if _, err := o.admin.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{o.name}.Sanitize()+` ALLOW_CONNECTIONS `+map[bool]string{true: "true", false: "false"}[yes]); err != nil {
		o.t.Fatal(err)
	}
}

// A call answers as if nothing had happened, or 503 with Retry-After;
// never 500.
func wantHealthyOr503(t *testing.T, what string, res *http.Response, healthy int) {
	t.Helper()
	switch {
	case res.StatusCode == healthy:
	case res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "":
	default:
		t.Errorf("%s: %d (Retry-After %q), want %d or 503 with Retry-After", what, res.StatusCode, res.Header.Get("Retry-After"), healthy)
	}
}

func want503(t *testing.T, what string, res *http.Response, body string, jsonBody bool) {
	t.Helper()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("%s: %d (Retry-After %q), want 503 with Retry-After: %.300s", what, res.StatusCode, res.Header.Get("Retry-After"), body)
		return
	}
	if jsonBody != strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Errorf("%s: Content-Type %q", what, res.Header.Get("Content-Type"))
	}
	if jsonBody && !strings.Contains(body, `"error":"unavailable"`) {
		t.Errorf("%s: body %s", what, body)
	}
	if !jsonBody && !strings.Contains(body, `data-testid="error-page"`) {
		t.Errorf("%s: not the error page: %.300s", what, body)
	}
}

// Every backend is terminated between two calls (a Postgres restart): the
// API, a page and a webhook delivery answer as usual or 503 with
// Retry-After, never 500. While the database refuses connections, all
// three answer 503 with Retry-After; once it is back, they recover.
func TestDatabaseRestartIsNever500(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := newOutage(t, b)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	hook := b.srv.URL + "/api/public/webhooks/" + uuid.NewString() + "/github"

	apiCall := func() (*http.Response, string) {
		req, _ := http.NewRequest("GET", b.srv.URL+"/api/private/projects", nil)
		req.Header.Set("Authorization", "Bearer "+b.owner.Token)
		return call(t, http.DefaultClient, req)
	}
	pageCall := func() (*http.Response, string) { return br.get("/projects") }
	hookCall := func() (*http.Response, string) {
		req, _ := http.NewRequest("POST", hook, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", uuid.NewString())
		return call(t, http.DefaultClient, req)
	}
	for _, c := range []struct {
		what    string
		call    func() (*http.Response, string)
		healthy int
		json    bool
	}{
		{"API", apiCall, http.StatusOK, true},
		{"page", pageCall, http.StatusOK, false},
		{"webhook", hookCall, http.StatusNotFound, true},
	} {
		for round := 0; round < 3; round++ {
			if res, body := c.call(); res.StatusCode != c.healthy {
				t.Fatalf("%s before the restart: %d %.300s", c.what, res.StatusCode, body)
			}
			o.terminate()
			res, _ := c.call()
			wantHealthyOr503(t, c.what+" right after the restart", res, c.healthy)
		}
		o.allow(false)
		o.terminate()
		res, body := c.call()
		want503(t, c.what+" while the database refuses connections", res, body, c.json)
		o.allow(true)
		if res, body := c.call(); res.StatusCode != c.healthy {
			t.Errorf("%s after the database is back: %d %.300s", c.what, res.StatusCode, body)
		}
	}
}

func call(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := res.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return res, sb.String()
}
