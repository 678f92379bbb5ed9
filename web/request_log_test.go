package web_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"anvil/web"
)

// With RequestLogLevel at debug (`anvil dev`), a request answered well
// writes no line to an info log; one answered with an error still does.
func TestRequestLogLevel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		level     slog.Level
		logged200 bool
	}{{slog.LevelInfo, true}, {slog.LevelDebug, false}} {
		logs := &lockedBuffer{}
		log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		opts := testOptions()
		opts.RequestLogLevel = c.level
		srv := httptest.NewServer(web.New(web.Deps{DB: b.db, Services: b.services, Keys: b.keys, Log: log, Options: opts}))
		for _, path := range []string{"/login", "/no/such/page"} {
			res, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		}
		srv.Close()
		out := logs.String()
		if got := strings.Contains(out, `"path":"/login","status":200`); got != c.logged200 {
			t.Errorf("level %v: the 200 is logged: %v, want %v\n%s", c.level, got, c.logged200, out)
		}
		if !strings.Contains(out, `"path":"/no/such/page","status":404`) {
			t.Errorf("level %v: the 404 is not logged\n%s", c.level, out)
		}
	}
}
