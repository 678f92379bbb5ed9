//go:build e2e

package e2e

import (
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// shopSite is the shop's origin; which build it serves is switched
// between page loads, as a deploy would (the page's URL and its script's
// URL stay the same).
type shopSite struct {
	url          string
	app          atomic.Pointer[[]byte]
	dsn, release atomic.Pointer[string]
}

// deploy makes the site serve the build in dir as release.
func (site *shopSite) deploy(t *testing.T, dir, release string) {
	t.Helper()
	app, err := os.ReadFile(filepath.Join(dir, "dist", "assets", "app.js"))
	if err != nil {
		t.Fatal(err)
	}
	site.app.Store(&app)
	site.release.Store(&release)
}

// buildPage serves a minified build on an origin of its own: the page
// loads the real @sentry/browser (bundled at test time) and the build's
// dist/assets/app.js, starts the SDK with the browser key's DSN and the
// build's release, and calls into the build so that it throws from deep
// inside; the SDK captures it. Its answers are recorded as in shopPage.
func buildPage(t *testing.T, sdk []byte, dsn string) *shopSite {
	t.Helper()
	site := &shopSite{}
	site.dsn.Store(&dsn)
	page := `<!doctype html><html><head><meta charset="utf-8"><title>shop</title>
<script src="/sentry.bundle.js"></script><script src="/assets/app.js"></script></head><body><h1>shop</h1>
<script>
window.__answers = [];
const observed = (url, init) => fetch(url, init).then(
  (r) => { window.__answers.push({ status: r.status }); return r; },
  (e) => { window.__answers.push({ error: String(e) }); throw e; });
Sentry.init({ dsn: "` + html.EscapeString(dsn) + `", environment: "production", release: "RELEASE",
  transport: (options) => Sentry.makeFetchTransport(options, observed) });
try { shop.checkout({ carts: {}, current: "x" }); } catch (e) { Sentry.captureException(e); }
</script></body></html>`
	mux := http.NewServeMux()
	mux.HandleFunc("/sentry.bundle.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(sdk)
	})
	mux.HandleFunc("/assets/app.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(*site.app.Load())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.Replace(page, "RELEASE", html.EscapeString(*site.release.Load()), 1))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	site.url = "http://localhost:" + port
	return site
}

// The whole real pipeline: two esbuild builds of the same front-end
// (different minified names, two releases), each injected and uploaded
// with the real sentry-cli; a page with the real @sentry/browser in
// Chromium throws from deep in each minified build → ONE incident whose
// title and top in-app frame name src/cart.js, line 6, totalOf; its page
// shows the original frame with its context and the minified frame one
// click away.
func TestSourceMapsBrowser(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sdk := bundleSentryBrowser(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	pub := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-web", "kind": "browser"})
	dsn := pub["dsn"].(string)

	site := buildPage(t, sdk, dsn)
	apiJSON(t, s, "PATCH", "/api/private/projects/"+pid+"/connections/"+pub["connection_id"].(string), map[string]any{"allowed_origins": []string{site.url}})
	builds := []struct{ entry, release string }{{"src/app.js", "shop@1"}, {"src/app2.js", "shop@2"}}
	for i, bd := range builds {
		dir := buildShop(t, bd.entry, nil)
		uploadShop(t, s, dir, bd.release)
		site.deploy(t, dir, bd.release)
		page := newPage(t)
		if _, err := page.Goto(site.url + "/"); err != nil {
			t.Fatal(err)
		}
		for _, a := range answers(t, page, 1) {
			if fmt.Sprint(a.(map[string]any)["status"]) != "200" {
				t.Fatalf("build %d: the SDK did not read a success: %v", i+1, a)
			}
		}
	}

	var inc map[string]any
	deadline := time.Now().Add(15 * time.Second)
	for {
		list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
		items, _ := list["incidents"].([]any)
		if len(items) == 1 && items[0].(map[string]any)["event_count"] == float64(2) {
			inc = items[0].(map[string]any)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want ONE incident of 2 events, got %v", items)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if title, _ := inc["title"].(string); !strings.Contains(title, "Cannot read properties of undefined (reading 'items') at totalOf (src/cart.js:6)") {
		t.Fatalf("incident title %q", title)
	}
	d := apiJSON(t, s, "GET", "/api/private/incidents/"+inc["id"].(string), nil)
	frames := d["latest_event"].(map[string]any)["exception"].(map[string]any)["stacktrace"].([]any)
	var top map[string]any
	for _, f := range frames {
		if f.(map[string]any)["in_app"] == true {
			top = f.(map[string]any)
			break
		}
	}
	if top == nil || top["file"] != "src/cart.js" || top["line"] != float64(6) || top["function"] != "totalOf" {
		t.Fatalf("top in-app frame %v (frames %v)", top, frames)
	}

	page := newPage(t)
	gotoPage(t, page, s.URL+"/login")
	login(t, page, s, s.Password)
	gotoPage(t, page, s.URL+"/incidents/"+inc["id"].(string))
	must(t, expect.Locator(testID(page, "frame-function").First()).ToHaveText("totalOf"), "the original function")
	must(t, expect.Locator(testID(page, "frame-context").First()).ToContainText("for (const item of cart.items) {"), "the context as code")
	must(t, testID(page, "raw-frame").First().Locator("summary").Click(), "open the minified frame")
	must(t, expect.Locator(testID(page, "frame-mapping").First()).ToContainText("mapped by"), "which upload mapped it")
	screenshot(t, page, "incident-sourcemaps")
}
