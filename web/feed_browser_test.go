package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"anvil/web"
)

// browserFix is a sentryFix (a project with a server connection, its DSN)
// plus a browser connection of the same project.
type browserFix struct {
	*sentryFix
	pubKey  string
	pubID   string
	pubDSN  string
	allowed string
}

const shopOrigin = "https://shop.example"

func newBrowserFix(t *testing.T, b *testBundle) *browserFix {
	t.Helper()
	s := newSentryFix(t, b)
	st, c := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+s.projectID+"/connections",
		map[string]any{"name": "shop-web", "kind": "browser", "allowed_origins": []string{"HTTPS://Shop.Example.", "https://*.cdn.example"}})
	if st != http.StatusCreated {
		t.Fatalf("browser connection: %d %v", st, c)
	}
	return &browserFix{sentryFix: s, pubKey: c["token"].(string), pubID: c["connection_id"].(string), pubDSN: c["dsn"].(string), allowed: shopOrigin}
}

func (f *browserFix) sentryQuery(key string) string {
	return f.envPath() + "?sentry_version=7&sentry_client=sentry.javascript.browser%2F11.12.0&sentry_key=" + key
}

// POST …/connections with kind browser: the token, its DSN, the normalised
// list; listed again whenever asked; PATCH changes the list; bad entries are
// 422 invalid_origin naming the entry and change nothing.
func TestBrowserConnectionsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newBrowserFix(t, b)
	if !strings.HasPrefix(f.pubKey, "anv_pub_") || len(f.pubKey) != 8+32 {
		t.Fatalf("token %q", f.pubKey)
	}
	if !strings.HasPrefix(f.pubDSN, "http://"+f.pubKey+"@anvil.test/") {
		t.Fatalf("dsn %q", f.pubDSN)
	}
	base := "/api/private/projects/" + f.projectID + "/connections"
	st, list := b.api(t, b.owner.Token, "GET", base, nil)
	if st != 200 {
		t.Fatalf("list: %d", st)
	}
	var pub, srv map[string]any
	for _, c := range list["connections"].([]any) {
		m := c.(map[string]any)
		switch m["kind"] {
		case "browser":
			pub = m
		case "server":
			srv = m
		}
	}
	if pub == nil || pub["token"] != f.pubKey || pub["dsn"] != f.pubDSN {
		t.Fatalf("browser connection as listed: %v", pub)
	}
	if got, _ := json.Marshal(pub["allowed_origins"]); string(got) != `["https://shop.example","https://*.cdn.example"]` {
		t.Fatalf("allowed_origins %s", got)
	}
	if srv == nil || srv["token"] != nil || srv["dsn"] != nil || f.count(t, `SELECT count(*) FROM feed_connections WHERE kind = 'server' AND token_enc <> ''`) != 0 {
		t.Fatalf("a server token must be shown once and never kept: %v", srv)
	}

	for _, tc := range []struct {
		body map[string]any
		code string
		st   int
	}{
		{map[string]any{"name": "x", "kind": "browser", "allowed_origins": []string{"https://ok.example", "https://shop.example/path"}}, "invalid_origin", 422},
		{map[string]any{"name": "x", "kind": "browser", "allowed_origins": []string{"*"}}, "invalid_origin", 422},
		{map[string]any{"name": "x", "kind": "server", "allowed_origins": []string{"https://ok.example"}}, "invalid_origin", 422},
		{map[string]any{"name": "x", "kind": "phone"}, "invalid_kind", 422},
	} {
		st, out := b.api(t, b.owner.Token, "POST", base, tc.body)
		if st != tc.st || out["error"] != tc.code {
			t.Fatalf("%v: %d %v", tc.body, st, out)
		}
	}
	if st, out := b.api(t, b.owner.Token, "POST", base, map[string]any{"name": "x", "kind": "browser", "allowed_origins": []string{"https://shop.example/path"}}); !strings.Contains(out["message"].(string), `"https://shop.example/path"`) {
		t.Fatalf("the message must name the entry: %d %v", st, out)
	}
	// Kind defaults to server; a browser connection with no list exists
	// but refuses every browser.
	st, c := b.api(t, b.owner.Token, "POST", base, map[string]any{"name": "plain"})
	if st != 201 || c["kind"] != "server" || !strings.HasPrefix(c["token"].(string), "anv_srv_") {
		t.Fatalf("default kind: %d %v", st, c)
	}
	st, c = b.api(t, b.owner.Token, "POST", base, map[string]any{"name": "later", "kind": "browser"})
	if st != 201 || c["kind"] != "browser" || len(c["allowed_origins"].([]any)) != 0 {
		t.Fatalf("empty list: %d %v", st, c)
	}

	// PATCH: a bad entry changes nothing; a good list replaces the old one.
	path := base + "/" + f.pubID
	if st, out := b.api(t, b.owner.Token, "PATCH", path, map[string]any{"allowed_origins": []string{"https://new.example", "ftp//x"}}); st != 422 || out["error"] != "invalid_origin" {
		t.Fatalf("bad patch: %d %v", st, out)
	}
	if r := sentrySend(t, f.srv.URL, f.sentryQuery(f.pubKey), envelope(`{}`, eventItem(sentryEvent(hexID()))), "Origin", shopOrigin); r.Status != 200 {
		t.Fatalf("after the refused patch the old list still holds: %d %s", r.Status, r.Raw)
	}
	st, out := b.api(t, b.owner.Token, "PATCH", path, map[string]any{"allowed_origins": []string{"https://new.example"}})
	if st != 200 || out["token"] != f.pubKey {
		t.Fatalf("patch: %d %v", st, out)
	}
	if r := sentrySend(t, f.srv.URL, f.sentryQuery(f.pubKey), envelope(`{}`, eventItem(sentryEvent(hexID()))), "Origin", shopOrigin); r.Status != 403 {
		t.Fatalf("the new list takes effect at once: %d %s", r.Status, r.Raw)
	}
	if st, out := b.api(t, b.owner.Token, "PATCH", base+"/"+f.connID, map[string]any{"allowed_origins": []string{"https://x.example"}}); st != 422 {
		t.Fatalf("a server connection has no list: %d %v", st, out)
	}
	owner, _ := b.accounts.Authenticate(context.Background(), b.owner.Token)
	if _, err := b.accounts.AddMember(context.Background(), owner, "viewer@acme.test", testPassword, "viewer"); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.api(t, viewerToken(t, b), "PATCH", path, map[string]any{"allowed_origins": []string{}}); st != 403 {
		t.Fatalf("a viewer may not change the list: %d", st)
	}
	if st, _ := b.api(t, b.owner.Token, "PATCH", base+"/"+newID(), map[string]any{"allowed_origins": []string{}}); st != 404 {
		t.Fatalf("unknown connection: %d", st)
	}
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "owner@globex.test", testPassword)
	if st, _ := b.api(t, other.Token, "PATCH", path, map[string]any{"allowed_origins": []string{}}); st != 404 {
		t.Fatalf("another organisation: %d", st)
	}
}

// The browser key at both doors: the seed's order 413 → 401 → 403 → 429;
// origin_not_allowed for an unlisted origin (or Referer), neither header
// admitted; a server key with an Origin still origin_refused.
func TestBrowserKeyDoors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newBrowserFix(t, b)
	env := func() []byte { return envelope(`{}`, eventItem(sentryEvent(hexID()))) }
	type call func(key string, hdr ...string) feedResp
	native := func(key string, hdr ...string) feedResp { return f.send(t, single, key, ev(newID()), hdr...) }
	sentryQ := func(key string, hdr ...string) feedResp {
		return sentrySend(t, f.srv.URL, f.sentryQuery(key), env(), hdr...)
	}
	sentryAuth := func(key string, hdr ...string) feedResp {
		return sentrySend(t, f.srv.URL, f.envPath(), env(), append([]string{"X-Sentry-Auth", "Sentry sentry_version=7, sentry_key=" + key}, hdr...)...)
	}
	for name, send := range map[string]call{"native": native, "sentry query": sentryQ, "sentry header": sentryAuth} {
		okStatus := 200
		if name == "native" {
			okStatus = 202
		}
		for _, tc := range []struct {
			what   string
			key    string
			hdr    []string
			status int
			code   string
		}{
			{"listed origin", f.pubKey, []string{"Origin", shopOrigin}, okStatus, ""},
			{"listed origin, other spelling", f.pubKey, []string{"Origin", "https://SHOP.example"}, okStatus, ""},
			{"wildcard label", f.pubKey, []string{"Origin", "https://img.cdn.example"}, okStatus, ""},
			{"neither header", f.pubKey, nil, okStatus, ""},
			{"listed referer", f.pubKey, []string{"Referer", shopOrigin + "/cart?x=1"}, okStatus, ""},
			{"unlisted origin", f.pubKey, []string{"Origin", "https://evil.example"}, 403, "origin_not_allowed"},
			{"unlisted referer", f.pubKey, []string{"Referer", "https://evil.example/page"}, 403, "origin_not_allowed"},
			{"null origin", f.pubKey, []string{"Origin", "null"}, 403, "origin_not_allowed"},
			{"origin wins over referer", f.pubKey, []string{"Origin", "https://evil.example", "Referer", shopOrigin + "/"}, 403, "origin_not_allowed"},
			{"server key with origin", f.key, []string{"Origin", shopOrigin}, 403, "origin_refused"},
			{"server key without", f.key, nil, okStatus, ""},
			{"unknown browser key with origin", "anv_pub_" + strings.Repeat("A", 32), []string{"Origin", shopOrigin}, 401, ""},
			{"wrong secret of a live prefix", f.pubKey[:16] + strings.Repeat("z", 24), []string{"Origin", "https://evil.example"}, 401, ""},
		} {
			r := send(tc.key, tc.hdr...)
			if r.Status != tc.status || (tc.code != "" && !strings.Contains(string(r.Raw), tc.code)) {
				t.Errorf("%s, %s: %d %s; want %d %s", name, tc.what, r.Status, r.Raw, tc.status, tc.code)
			}
		}
	}
	// 413 comes first, whatever the key and the origin.
	big := `{"x":"` + strings.Repeat("a", 300000) + `"}`
	if r := f.send(t, single, f.pubKey, big, "Origin", "https://evil.example"); r.Status != 413 {
		t.Fatalf("413 first: %d", r.Status)
	}
	// The refusal is in the outcomes with the refused origin (the recorder
	// flushes about once a second).
	var msg string
	waitFor(t, "the origin_not_allowed outcome", func() bool {
		return f.db.Bun.NewRaw(`SELECT last_message FROM feed_outcomes WHERE connection_id = ? AND reason_code = 'origin_not_allowed'`, f.pubID).
			Scan(context.Background(), &msg) == nil
	})
	if !strings.Contains(msg, "https://evil.example") {
		t.Fatalf("outcome message %q does not name the refused origin", msg)
	}
}

// CORS on every answer of both doors: the preflight for any origin; the
// grant (that origin, never *) with Vary and the exposed headers on every
// answer to an allowed origin — accepted, refused per event, rate-limited,
// budget — and on nothing else.
func TestBrowserCORSHeaders(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	// Five items: the four events below and the bad body, which costs one
	// too (a browser key's request is charged to its address before
	// anything else is read).
	opts.FeedBrowserRatePerMin = 5
	b := setupWith(t, opts)
	f := newBrowserFix(t, b)

	doors := []string{single, batch, f.envPath(), strings.TrimSuffix(f.envPath(), "/"),
		"/api/" + strconv.FormatInt(f.number, 10) + "/store/"}
	for _, p := range doors {
		for _, origin := range []string{shopOrigin, "https://evil.example"} {
			req, _ := http.NewRequest("OPTIONS", f.srv.URL+p, nil)
			req.Header.Set("Origin", origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "content-type,x-sentry-auth")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			h := res.Header
			if res.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != origin || h.Get("Access-Control-Allow-Methods") != "POST" ||
				h.Get("Access-Control-Max-Age") == "" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "x-sentry-auth") ||
				!strings.Contains(h.Get("Access-Control-Allow-Headers"), "authorization") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "baggage") ||
				!strings.Contains(h.Get("Access-Control-Allow-Headers"), "sentry-trace") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "content-type") {
				t.Errorf("preflight %s from %s: %d %v", p, origin, res.StatusCode, h)
			}
		}
	}
	// Nothing else of anvil gains CORS.
	for _, p := range []string{"/api/private/projects", "/login", "/healthz"} {
		req, _ := http.NewRequest("OPTIONS", f.srv.URL+p, nil)
		req.Header.Set("Origin", shopOrigin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s gained CORS: %v", p, res.Header)
		}
	}

	granted := func(r feedResp, origin string) bool {
		return r.Header.Get("Access-Control-Allow-Origin") == origin && r.Header.Get("Access-Control-Allow-Origin") != "*" &&
			strings.Contains(strings.Join(r.Header.Values("Vary"), ","), "Origin") &&
			strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "X-Sentry-Rate-Limits") &&
			strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "Retry-After")
	}
	none := func(r feedResp) bool {
		return r.Header.Get("Access-Control-Allow-Origin") == "" && r.Header.Get("Access-Control-Expose-Headers") == ""
	}
	type answer struct {
		what   string
		r      feedResp
		status int
		grant  bool
	}
	sq := f.sentryQuery(f.pubKey)
	var answers []answer
	add := func(what string, r feedResp, status int, grant bool) {
		answers = append(answers, answer{what, r, status, grant})
	}
	// Allowed origin: accepted, refused per event, bad request.
	add("native accepted", f.send(t, single, f.pubKey, ev(newID()), "Origin", shopOrigin), 202, true)
	add("native event refused", f.send(t, single, f.pubKey, ev(newID(), func(m map[string]any) { m["environment"] = "nowhere" }), "Origin", shopOrigin), 202, true)
	add("sentry accepted", sentrySend(t, f.srv.URL, sq, envelope(`{}`, eventItem(sentryEvent(hexID()))), "Origin", shopOrigin), 200, true)
	add("sentry event refused", sentrySend(t, f.srv.URL, sq, envelope(`{}`, eventItem(sentryEvent(hexID(), func(m map[string]any) { m["environment"] = "nowhere" }))), "Origin", shopOrigin), 400, true)
	add("native bad body", f.send(t, batch, f.pubKey, `{`, "Origin", shopOrigin), 400, true)
	// The per-address limit (5 items here) is spent: 429 with the grant, so the
	// SDK reads Retry-After and X-Sentry-Rate-Limits.
	r := sentrySend(t, f.srv.URL, sq, envelope(`{}`, eventItem(sentryEvent(hexID()))), "Origin", shopOrigin)
	add("sentry rate limited", r, 429, true)
	if r.Header.Get("Retry-After") == "" || !strings.HasSuffix(r.Header.Get("X-Sentry-Rate-Limits"), "::organization") {
		t.Errorf("429 headers: %v", r.Header)
	}
	add("native rate limited", f.send(t, single, f.pubKey, ev(newID()), "Origin", shopOrigin), 429, true)
	// Not allowed: no grant.
	add("native unlisted", f.send(t, single, f.pubKey, ev(newID()), "Origin", "https://evil.example"), 403, false)
	add("sentry unlisted", sentrySend(t, f.srv.URL, sq, envelope(`{}`), "Origin", "https://evil.example"), 403, false)
	add("native unknown key", f.send(t, single, "anv_pub_"+strings.Repeat("B", 32), ev(newID()), "Origin", shopOrigin), 401, false)
	add("sentry unknown key", sentrySend(t, f.srv.URL, f.sentryQuery("anv_pub_"+strings.Repeat("B", 32)), envelope(`{}`), "Origin", shopOrigin), 401, false)
	add("native server key", f.send(t, single, f.token, ev(newID()), "Origin", shopOrigin), 403, false)
	add("sentry server key", sentrySend(t, f.srv.URL, f.sentryQuery(f.key), envelope(`{}`), "Origin", shopOrigin), 403, false)
	add("native no origin", f.send(t, single, f.token, ev(newID())), 202, false)
	// A 413 is decided before the key; an allowed origin may still read it.
	big := `{"x":"` + strings.Repeat("a", 300000) + `"}`
	add("native 413 allowed", f.send(t, single, f.pubKey, big, "Origin", shopOrigin), 413, true)
	add("sentry 413 allowed", sentrySend(t, f.srv.URL, sq, []byte(big), "Origin", shopOrigin), 413, true)
	add("native 413 unlisted", f.send(t, single, f.pubKey, big, "Origin", "https://evil.example"), 413, false)
	add("sentry 413 server key", sentrySend(t, f.srv.URL, f.sentryQuery(f.key), []byte(big), "Origin", shopOrigin), 413, false)
	for _, a := range answers {
		if a.r.Status != a.status {
			t.Errorf("%s: status %d, want %d: %s", a.what, a.r.Status, a.status, a.r.Raw)
		}
		if a.grant && !granted(a.r, shopOrigin) {
			t.Errorf("%s: no CORS grant: %v", a.what, a.r.Header)
		}
		if !a.grant && !none(a.r) {
			t.Errorf("%s: CORS granted to what is not allowed: %v", a.what, a.r.Header)
		}
	}
	// The limit is per address per connection: the server connection of
	// the same project is not touched by it.
	if r := f.send(t, single, f.token, ev(newID())); r.Status != 202 {
		t.Fatalf("server key after the browser limit: %d", r.Status)
	}
}

var _ = web.Options{}

// The Feed page: the form asks server or browser; a browser connection
// shows its DSN whenever the page is opened, the origins editor (a refused
// entry named on the page, nothing changed) and the two snippets.
func TestBrowserConnectionPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	page := "/projects/" + f.projectID + "/feed"
	_, body := br.get(page)
	if !strings.Contains(body, `data-testid="connection-kind"`) || !strings.Contains(body, `value="browser"`) {
		t.Fatal("the form does not ask server or browser")
	}
	csrf := br.csrf(page)
	res, _ := br.post(page+"/connections", map[string][]string{"_csrf": {csrf}, "name": {"shop-web"}, "kind": {"browser"},
		"allowed_origins": {"https://shop.example\nhttps://*.cdn.example"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", res.StatusCode)
	}
	var id, tok string
	if err := f.db.Bun.NewRaw(`SELECT id::text FROM feed_connections WHERE kind = 'browser' AND project_id = ?`, f.projectID).Scan(context.Background(), &id); err != nil {
		t.Fatal(err)
	}
	// Shown whenever asked: twice in a row.
	for i := 0; i < 2; i++ {
		_, body = br.get(page)
		tok = regexp.MustCompile(`anv_pub_[0-9A-Za-z]{32}`).FindString(body)
		for _, want := range []string{`data-testid="browser-dsn"`, "http://" + tok + "@anvil.test/", `data-testid="origins-editor"`,
			"https://shop.example\nhttps://*.cdn.example", `sentry-browser-npm-` + id, `sentry-browser-script-` + id, `import * as Sentry from &#34;@sentry/browser&#34;`} {
			if tok == "" || !strings.Contains(body, want) {
				t.Fatalf("visit %d: %q missing", i, want)
			}
		}
	}
	// A refused entry: 422 on the page naming it, the list unchanged.
	res, body = br.post(page+"/connections/"+id+"/origins", map[string][]string{"_csrf": {csrf}, "allowed_origins": {"https://ok.example\nhttps://shop.example/cart"}})
	if res.StatusCode != 422 || !strings.Contains(body, "https://shop.example/cart") || !strings.Contains(body, `data-testid="feed-error"`) {
		t.Fatalf("refused origins: %d", res.StatusCode)
	}
	if n := f.count(t, `SELECT cardinality(allowed_origins) FROM feed_connections WHERE id = '`+id+`'`); n != 2 {
		t.Fatalf("a refused edit changed the list: %d entries", n)
	}
	// Emptied: the page says every browser is refused.
	res, _ = br.post(page+"/connections/"+id+"/origins", map[string][]string{"_csrf": {csrf}, "allowed_origins": {""}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("empty the list: %d", res.StatusCode)
	}
	if _, body = br.get(page); !strings.Contains(body, `data-testid="no-origins"`) {
		t.Fatal("an empty list is not explained")
	}
}
