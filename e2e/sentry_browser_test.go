//go:build e2e

package e2e

import (
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"
)

// bundleSentryBrowser bundles the real @sentry/browser (npm, unchanged) with
// esbuild into a temporary directory and returns the bundle's bytes. The
// bundle is made at test time and never committed (TOOLCHAIN.md: the npm
// package ships no ready bundle).
func bundleSentryBrowser(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sentry.bundle.js")
	cmd := exec.Command(filepath.Join(repoRoot, "node_modules", ".bin", "esbuild"), filepath.Join("sentry-browser", "entry.js"),
		"--bundle", "--minify", "--format=iife", "--outfile="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild (npm ci first): %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shopPage serves a test shop's page on its own origin: host (localhost or
// 127.0.0.1) and a port of its own, so every request the page makes to
// anvil is cross-origin. The page loads the bundle, starts the SDK with the
// DSN and — through makeFetchTransport's fetch argument, the one way to see
// the SDK's own requests — records every answer as the SDK reads it.
func shopPage(t *testing.T, host string, bundle []byte, dsn, marker string) string {
	t.Helper()
	page := `<!doctype html><html><head><meta charset="utf-8"><title>shop</title>
<script src="/sentry.bundle.js"></script></head><body><h1>shop</h1>
<script>
window.__answers = [];
const observed = (url, init) => fetch(url, init).then(
  (r) => { window.__answers.push({ status: r.status, rateLimits: r.headers.get("X-Sentry-Rate-Limits"), retryAfter: r.headers.get("Retry-After") }); return r; },
  (e) => { window.__answers.push({ error: String(e) }); throw e; });
Sentry.init({
  dsn: "` + html.EscapeString(dsn) + `",
  environment: "production",
  release: "shop-web@2.0.0",
  transport: (options) => Sentry.makeFetchTransport(options, observed),
});
function checkout(cart) { return cart.total(); }
try { checkout(undefined); } catch (e) { Sentry.captureException(e); }
setTimeout(() => { ` + marker + `(); }, 0);
</script></body></html>`
	mux := http.NewServeMux()
	mux.HandleFunc("/sentry.bundle.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(bundle)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	return "http://" + host + ":" + port
}

// answers waits for n answers the SDK read and returns them.
func answers(t *testing.T, page playwright.Page, n int) []any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := page.Evaluate(`() => window.__answers`)
		if err != nil {
			t.Fatal(err)
		}
		list, _ := v.([]any)
		if len(list) >= n {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SDK read %d answers, want %d: %v", len(list), n, list)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The real @sentry/browser in real Chromium, on a page of another origin:
// a captured and an uncaught exception become incidents with their titles,
// environment, release and browser; the SDK reads every answer (status 200,
// no CORS error). A page on an origin not in the list stores nothing and
// the refusal shows in the outcomes with that origin; a server key on the
// same page is still 403 origin_refused.
func TestSentryBrowserSDK(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	bundle := bundleSentryBrowser(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})

	// The shop is served from localhost, anvil from 127.0.0.1: two origins.
	bundleDSN := func(c map[string]any) string { return c["dsn"].(string) }
	pub := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-web", "kind": "browser"})
	shop := shopPage(t, "localhost", bundle, bundleDSN(pub), "undefinedFunctionCall")
	apiJSON(t, s, "PATCH", "/api/private/projects/"+pid+"/connections/"+pub["connection_id"].(string), map[string]any{"allowed_origins": []string{shop}})
	if !strings.HasPrefix(bundleDSN(pub), "http://anv_pub_") || strings.HasPrefix(shop, strings.TrimSuffix(s.URL, "/")) {
		t.Fatalf("dsn %q, shop %q, anvil %q", bundleDSN(pub), shop, s.URL)
	}

	page := newPage(t)
	if _, err := page.Goto(shop + "/"); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers(t, page, 2) {
		m := a.(map[string]any)
		if fmt.Sprint(m["status"]) != "200" || m["error"] != nil {
			t.Fatalf("the SDK did not read a success: %v", a)
		}
	}
	want := map[string]string{
		"TypeError":      "TypeError: Cannot read properties of undefined (reading 'total')",
		"ReferenceError": "ReferenceError: undefinedFunctionCall is not defined",
	}
	incidents := waitIncidents(t, s, pid, want)
	for typ, in := range incidents {
		if in["environment"] != "production" || in["release"] != "shop-web@2.0.0" {
			t.Fatalf("%s incident %v", typ, in)
		}
		detail := apiJSON(t, s, "GET", "/api/private/incidents/"+in["id"].(string), nil)
		bs, _ := detail["browsers"].([]any)
		oses, _ := detail["operating_systems"].([]any)
		if len(bs) != 1 || bs[0].(map[string]any)["name"] != "Chrome" || bs[0].(map[string]any)["count"] != float64(1) ||
			len(oses) != 1 || oses[0].(map[string]any)["name"] != "Linux" {
			t.Fatalf("%s: browsers %v, operating systems %v", typ, bs, oses)
		}
	}
	// The incident page names the browser and the OS with their counts.
	gotoPage(t, page, s.URL+"/login")
	login(t, page, s, s.Password)
	must(t, expect.Page(page).ToHaveURL(s.URL+"/"), "logged in")
	gotoPage(t, page, s.URL+"/incidents/"+incidents["TypeError"]["id"].(string))
	must(t, expect.Locator(testID(page, "incident-browsers")).ToContainText("Chrome"), "browsers on the incident page")
	must(t, expect.Locator(testID(page, "incident-oses")).ToContainText("Linux"), "operating systems on the incident page")
	screenshot(t, page, "incident-browsers")

	// A page on an origin that is not listed: the SDK's requests fail as
	// CORS failures, nothing is stored, the outcomes name the origin.
	evil := shopPage(t, "127.0.0.1", bundle, bundleDSN(pub), "evilOnlyFunction")
	page2 := newPage(t)
	if _, err := page2.Goto(evil + "/"); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers(t, page2, 2) {
		if a.(map[string]any)["error"] == nil {
			t.Fatalf("an unlisted origin read an answer: %v", a)
		}
	}
	feedShows(t, page, s.URL+"/projects/shop/feed", `[data-testid="connection-row"]:has-text("shop-web") [data-reason="origin_not_allowed"]`)
	must(t, expect.Locator(page.Locator(`[data-testid="connection-row"]:has-text("shop-web")`)).ToContainText(evil), "the refused origin")
	screenshot(t, page, "outcomes")

	// A server key on the same page: still 403 origin_refused.
	srv := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "leaked"})
	leaky := shopPage(t, "localhost", bundle, bundleDSN(srv), "leakedKeyFunction")
	page3 := newPage(t)
	if _, err := page3.Goto(leaky + "/"); err != nil {
		t.Fatal(err)
	}
	for _, a := range answers(t, page3, 2) {
		if a.(map[string]any)["error"] == nil {
			t.Fatalf("a page read the answer to a server key: %v", a)
		}
	}
	// The browser hides the refused answer from the page (no CORS grant);
	// the outcomes show it was origin_refused.
	feedShows(t, page, s.URL+"/projects/shop/feed", `[data-testid="connection-row"]:has-text("leaked") [data-reason="origin_refused"]`)
	// Only the listed page's two incidents exist.
	list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
	if items, _ := list["incidents"].([]any); len(items) != 2 {
		t.Fatalf("incidents %v", items)
	}
}

// feedShows reloads the Feed page until selector appears: the outcomes
// are flushed to the database about once a second.
func feedShows(t *testing.T, page playwright.Page, url, selector string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gotoPage(t, page, url)
		if n, _ := page.Locator(selector).Count(); n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Feed page never showed %s", selector)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitIncidents waits for incidents of the given exception types with the
// given titles.
func waitIncidents(t *testing.T, s *server, pid string, want map[string]string) map[string]map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := apiJSON(t, s, "GET", "/api/private/incidents?project_id="+pid, nil)
		got := map[string]map[string]any{}
		items, _ := list["incidents"].([]any)
		for _, it := range items {
			in := it.(map[string]any)
			if typ, _ := in["exception_type"].(string); want[typ] != "" {
				if in["title"] != want[typ] {
					t.Fatalf("%s incident titled %q, want %q", typ, in["title"], want[typ])
				}
				got[typ] = in
			}
		}
		if len(got) == len(want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("incidents %v", items)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A page that posts to the native feed with fetch and a browser key: the
// preflight (Authorization is not a simple header) and the POST succeed,
// and the page reads the answer.
func TestBrowserNativeFeedFetch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	proj := apiJSON(t, s, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop", "repo_url": "file:///nowhere",
		"default_branch": "main", "run_command": "true"})
	pid := proj["id"].(string)
	apiJSON(t, s, "PUT", "/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})
	mux := http.NewServeMux()
	var token string
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body><script>
window.__result = fetch(%q, {method: "POST", headers: {"Content-Type": "application/json", "Authorization": "Bearer " + %q},
  body: JSON.stringify({schema_version: "1.0", event_id: crypto.randomUUID(), timestamp: new Date().toISOString(),
    title: "TypeError: price is NaN", level: "error", environment: "production", service: "shop-web",
    sdk: {name: "anvil-feed-astro", version: "0.1.0"}, browser: navigator.userAgent,
    exception: {type: "TypeError", message: "price is NaN", stacktrace: [{file: location.origin + "/app.js", abs_path: location.origin + "/app.js", line: 1, colno: 77, function: "total", in_app: true}]}})})
  .then(async (r) => ({status: r.status, body: await r.json()}), (e) => ({error: String(e)}));
</script></body></html>`, s.URL+"/api/feed/events", token)
	})
	shopSrv := httptest.NewServer(mux)
	t.Cleanup(shopSrv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(shopSrv.URL, "http://"))
	shop := "http://localhost:" + port
	pub := apiJSON(t, s, "POST", "/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-web", "kind": "browser", "allowed_origins": []string{shop}})
	token = pub["token"].(string)

	page := newPage(t)
	if _, err := page.Goto(shop + "/"); err != nil {
		t.Fatal(err)
	}
	v, err := page.Evaluate(`() => window.__result`)
	if err != nil {
		t.Fatal(err)
	}
	res := v.(map[string]any)
	if fmt.Sprint(res["status"]) != "202" {
		t.Fatalf("native fetch: %v", res)
	}
	if acc, _ := res["body"].(map[string]any)["accepted"].([]any); len(acc) != 1 {
		t.Fatalf("native fetch body: %v", res)
	}
	in := waitIncidents(t, s, pid, map[string]string{"TypeError": "TypeError: price is NaN"})["TypeError"]
	detail := apiJSON(t, s, "GET", "/api/private/incidents/"+in["id"].(string), nil)
	if bs, _ := detail["browsers"].([]any); len(bs) != 1 || bs[0].(map[string]any)["name"] != "Chrome" {
		t.Fatalf("browsers %v", detail["browsers"])
	}
}
