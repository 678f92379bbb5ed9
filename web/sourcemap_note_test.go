package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// The note about source maps is shown for frames that look minified only:
// never for a Node server's /srv/app/cart.js:3:21, from the feed or the
// OpenTelemetry door; a minified bundle's frames have it.
func TestSourceMapNoteOnlyForMinifiedFrames(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	nodeFrame := func(typ string) func(m map[string]any) {
		return func(m map[string]any) {
			m["title"] = typ + ": cart is null"
			m["sdk"] = map[string]any{"name": "sentry.javascript.node", "version": "8.0.0"}
			m["exception"] = map[string]any{"type": typ, "message": "cart is null",
				"stacktrace": []any{map[string]any{"file": "/srv/app/cart.js", "line": 3, "colno": 21, "function": "total", "in_app": true}}}
		}
	}
	if st, out := f.api(t, f.token, "POST", "/api/feed/events", ev(uuid.NewString(), nodeFrame("NodeTypeError"))); st != http.StatusAccepted {
		t.Fatalf("feed: %d %v", st, out)
	}
	bundle := func(m map[string]any) {
		m["title"] = "BundleTypeError: cart is null"
		m["exception"] = map[string]any{"type": "BundleTypeError", "message": "cart is null",
			"stacktrace": []any{map[string]any{"file": "https://shop.test/assets/app.3f9a1c2b.min.js", "line": 1, "colno": 4812, "function": "n", "in_app": true}}}
	}
	if st, out := f.api(t, f.token, "POST", "/api/feed/events", ev(uuid.NewString(), bundle)); st != http.StatusAccepted {
		t.Fatalf("feed: %d %v", st, out)
	}
	otel := `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"checkout"}},
 {"key":"deployment.environment.name","value":{"stringValue":"production"}},{"key":"telemetry.sdk.language","value":{"stringValue":"nodejs"}}]},"scopeSpans":[{"spans":[
 {"traceId":"5b8efff798038103d269b633813fc60d","spanId":"eee19b7ec3c1b175","name":"pay","events":[
  {"name":"exception","attributes":[{"key":"exception.type","value":{"stringValue":"OtelTypeError"}},{"key":"exception.message","value":{"stringValue":"cart is null"}},
   {"key":"exception.stacktrace","value":{"stringValue":"OtelTypeError: cart is null\n    at total (/srv/app/cart.js:3:21)\n    at Server.handle (/srv/app/server.js:40:5)\n"}}]}]}]}]}]}`
	if st, _, out := otlpPost(t, f.srv.URL+"/api/otlp/v1/traces", "application/json", f.token, []byte(otel)); st != 200 {
		t.Fatalf("otlp: %d %s", st, out)
	}
	var incs []struct {
		ID    string `bun:"id"`
		Title string `bun:"title"`
	}
	if err := f.db.Bun.NewRaw(`SELECT id::text, title FROM incidents WHERE project_id = ?`, f.projectID).Scan(context.Background(), &incs); err != nil || len(incs) != 3 {
		t.Fatalf("incidents %v %v", incs, err)
	}
	br := f.browser(t)
	br.login("owner@acme.test", testPassword)
	for _, inc := range incs {
		_, page := br.get("/incidents/" + inc.ID)
		if !strings.Contains(page, "/srv/app/cart.js") && !strings.Contains(page, "app.3f9a1c2b.min.js") {
			t.Fatalf("%s: the frame is not shown:\n%s", inc.Title, page)
		}
		note := strings.Contains(page, "These frames are minified")
		if want := strings.HasPrefix(inc.Title, "BundleTypeError"); note != want {
			t.Errorf("%s: the source-map note shown %v, want %v", inc.Title, note, want)
		}
	}
}
