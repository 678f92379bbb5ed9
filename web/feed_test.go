package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"anvil/domain/event"
)

// feedFix is a project with a connection and bindings.
type feedFix struct {
	*testBundle
	projectID string
	token     string
	connID    string
}

// newFeedFix creates project "shop" with a connection and the bindings
// production=observe, staging-off=off (plus any given env=policy pairs).
func newFeedFix(t testing.TB, b *testBundle, bindings ...string) *feedFix {
	t.Helper()
	proj := validProject("shop")
	proj["repair_command"] = "./fix.sh" // approve and auto need one
	st, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", proj)
	if st != http.StatusCreated {
		t.Fatalf("project: %d %v", st, p)
	}
	f := &feedFix{testBundle: b, projectID: p["id"].(string)}
	st, c := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/connections", map[string]any{"name": "shop-api"})
	if st != http.StatusCreated {
		t.Fatalf("connection: %d %v", st, c)
	}
	f.token, f.connID = c["token"].(string), c["connection_id"].(string)
	bindings = append([]string{"production=observe", "quiet=off"}, bindings...)
	for _, kv := range bindings {
		env, pol, _ := strings.Cut(kv, "=")
		if st, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+f.projectID+"/bindings/"+env, map[string]any{"repair_policy": pol}); st != http.StatusOK {
			t.Fatalf("binding %s: %d %v", kv, st, out)
		}
	}
	return f
}

// ev is a minimal valid event; mods change it.
func ev(id string, mods ...func(m map[string]any)) map[string]any {
	m := map[string]any{"schema_version": "1.0", "event_id": id, "timestamp": "2026-09-16T10:11:12Z", "title": "NullPointerException in CheckoutService",
		"level": "error", "environment": "production", "service": "shop-api", "sdk": map[string]any{"name": "anvil-feed-java", "version": "0.1.0"},
		"exception": map[string]any{"type": "java.lang.NullPointerException", "message": "cart is null",
			"stacktrace": []any{map[string]any{"file": "CheckoutService.java", "line": 88, "function": "charge", "in_app": true}}},
		"release": "2026.9.3"}
	for _, f := range mods {
		f(m)
	}
	return m
}

func newID() string { return uuid.NewString() }

type feedResp struct {
	Status  int
	Header  http.Header
	Raw     []byte
	Accept  []string
	Rejects []map[string]any
}

// send posts body (a string is sent verbatim) to path with a token and headers.
func (f *feedFix) send(t *testing.T, path, token string, body any, hdr ...string) feedResp {
	t.Helper()
	return sendFeed(t, f.srv.URL, path, token, body, hdr...)
}

func sendFeed(t testing.TB, base, path, token string, body any, hdr ...string) feedResp {
	t.Helper()
	var raw []byte
	if s, ok := body.(string); ok {
		raw = []byte(s)
	} else {
		raw, _ = json.Marshal(body)
	}
	req, _ := http.NewRequest("POST", base+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := feedResp{Status: res.StatusCode, Header: res.Header}
	out.Raw, _ = io.ReadAll(res.Body)
	var v struct {
		Accepted []string         `json:"accepted"`
		Rejected []map[string]any `json:"rejected"`
	}
	if json.Unmarshal(out.Raw, &v) == nil {
		out.Accept, out.Rejects = v.Accepted, v.Rejected
	}
	return out
}

func (f *feedFix) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	var err error
	// A pooled connection killed by an outage test fails once; the next
	// attempt gets a fresh one.
	for attempt := 0; attempt < 5; attempt++ {
		if err = f.db.Bun.NewRaw(q, args...).Scan(context.Background(), &n); err == nil {
			return n
		}
	}
	t.Fatal(err)
	return 0
}

const single, batch = "/api/feed/events", "/api/feed/events/batch"

func TestFeedCheckOrder(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	big := `[` + strings.Repeat(" ", 262144) + `]`
	over51 := make([]any, 51)
	for i := range over51 {
		over51[i] = ev(newID())
	}
	cases := []struct {
		name   string
		path   string
		token  string
		body   any
		hdr    []string
		status int
		want   string
	}{
		{"oversized body without a token is 413", batch, "", big, nil, 413, `"reason_code":"payload_too_large"`},
		{"oversized body with a bad token and Origin is 413", batch, "anv_srv_0000000000000000000000000000000", big, []string{"Origin", "https://x"}, 413, `"event_id":null`},
		{"oversized body with a live token is 413", single, "live", big, []string{"Origin", "https://x"}, 413, `"accepted":[]`},
		{"no token is 401", single, "", ev(newID()), nil, 401, ""},
		{"Origin with an unknown token is 401, not 403", single, "anv_srv_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ev(newID()), []string{"Origin", "https://x"}, 401, ""},
		{"Origin with a malformed token is 401", single, "nope", ev(newID()), []string{"Origin", "https://x"}, 401, ""},
		{"Origin with a live token is 403", single, "live", ev(newID()), []string{"Origin", "https://shop.example"}, 403, `"origin_refused"`},
		{"Origin before parse: 403 on a broken body", single, "live", `{`, []string{"Origin", "null"}, 403, `"origin_refused"`},
		{"not JSON is 400", single, "live", `{"event_id":`, nil, 400, "not valid JSON"},
		{"neither object nor array is 400", batch, "live", `42`, nil, 400, "neither a JSON object nor a JSON array"},
		{"array on the single endpoint is 400", single, "live", []any{ev(newID())}, nil, 400, "one event object"},
		{"object on the batch endpoint is 400", batch, "live", ev(newID()), nil, 400, "JSON array"},
		{"51 events is 400", batch, "live", over51, nil, 400, "at most 50"},
		{"a good event is 202", single, "live", ev(newID()), nil, 202, `"rejected":[]`},
		{"an empty batch is 202", batch, "live", []any{}, nil, 202, `{"accepted":[],"rejected":[]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.token
			if tok == "live" {
				tok = f.token
			}
			r := f.send(t, tc.path, tok, tc.body, tc.hdr...)
			if r.Status != tc.status || !strings.Contains(string(r.Raw), tc.want) {
				t.Fatalf("got %d %s, want %d containing %s", r.Status, r.Raw, tc.status, tc.want)
			}
			if tc.status == 413 && (len(r.Accept) != 0 || len(r.Rejects) != 1 || r.Rejects[0]["event_id"] != nil) {
				t.Fatalf("413 body: %s", r.Raw)
			}
		})
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events`); n != 1 {
		t.Fatalf("%d events stored; only the one 202 single event should be", n)
	}
}

// Every token that does not resolve gets the same bare 401: status, headers
// and (empty) body are byte-identical.
func TestFeedBare401(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	st, c := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/connections", map[string]any{"name": "revoked one"})
	if st != 201 {
		t.Fatal(st, c)
	}
	revoked := c["token"].(string)
	if st, _ := f.api(t, f.owner.Token, "DELETE", "/api/private/connections/"+c["connection_id"].(string), nil); st != 204 {
		t.Fatal(st)
	}
	wrong := f.token[:16] + strings.Repeat("x", len(f.token)-16) // live prefix, wrong secret
	cases := map[string]func(*http.Request){
		"missing":        func(r *http.Request) {},
		"not bearer":     func(r *http.Request) { r.Header.Set("Authorization", "Basic "+f.token) },
		"malformed":      func(r *http.Request) { r.Header.Set("Authorization", "Bearer anv_srv_short") },
		"personal token": func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+f.owner.Token) },
		"unknown":        func(r *http.Request) { r.Header.Set("Authorization", "Bearer anv_srv_"+strings.Repeat("Z", 32)) },
		"wrong secret":   func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+wrong) },
		"revoked":        func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+revoked) },
	}
	var ref string
	for name, mod := range cases {
		req, _ := http.NewRequest("POST", f.srv.URL+single, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://evil.example") // never turns a 401 into a 403
		mod(req)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		res.Header.Del("Date")
		res.Header.Del("X-Request-Id")
		var hb bytes.Buffer
		res.Header.Write(&hb)
		got := fmt.Sprintf("%d\n%s\n%q", res.StatusCode, hb.String(), body)
		if res.StatusCode != 401 || len(body) != 0 {
			t.Fatalf("%s: %s", name, got)
		}
		if ref == "" {
			ref = got
		} else if got != ref {
			t.Fatalf("%s differs:\n%s\nvs\n%s", name, got, ref)
		}
	}
}

func TestFeedReasonCodes(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	ok := newID()
	cases := []struct {
		name string
		ev   any
		code string
		msg  string
	}{
		{"missing title", ev("11111111-1111-4111-8111-111111111111", func(m map[string]any) { delete(m, "title") }), "schema_violation", "title"},
		{"missing exception.type", ev("11111111-1111-4111-8111-111111111112", func(m map[string]any) { m["exception"] = map[string]any{"message": "x"} }), "schema_violation", "exception.type"},
		{"environment not a label", ev("11111111-1111-4111-8111-111111111113", func(m map[string]any) { m["environment"] = "prod uction" }), "schema_violation", "environment"},
		{"event_id not a UUID", ev("evt-42"), "schema_violation", "UUID"},
		{"not an object", 42, "schema_violation", "JSON object"},
		{"major 2", ev("11111111-1111-4111-8111-111111111114", func(m map[string]any) { m["schema_version"] = "2.0" }), "unsupported_schema_version", "major 1"},
		{"no binding", ev("11111111-1111-4111-8111-111111111115", func(m map[string]any) { m["environment"] = "staging" }), "no_binding", "no binding for environment 'staging'"},
		{"binding off", ev("11111111-1111-4111-8111-111111111116", func(m map[string]any) { m["environment"] = "quiet" }), "binding_disabled", "off"},
	}
	body := []any{ev(ok)}
	for _, tc := range cases {
		body = append(body, tc.ev)
	}
	r := f.send(t, batch, f.token, body)
	if r.Status != 202 || len(r.Accept) != 1 || r.Accept[0] != ok || len(r.Rejects) != len(cases) {
		t.Fatalf("got %d %s", r.Status, r.Raw)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rj := r.Rejects[i]
			if rj["reason_code"] != tc.code || !strings.Contains(rj["message"].(string), tc.msg) {
				t.Fatalf("rejection %v, want %s containing %q", rj, tc.code, tc.msg)
			}
			if m, isMap := tc.ev.(map[string]any); isMap && rj["event_id"] != m["event_id"] {
				t.Fatalf("event_id %v not echoed", rj["event_id"])
			}
		})
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events`); n != 1 {
		t.Fatalf("%d events stored, want only the accepted one", n)
	}
	// A wildcard binding admits the environment without its own binding; an
	// exact binding wins over it.
	f.api(t, f.owner.Token, "PUT", "/api/private/projects/"+f.projectID+"/bindings/*", map[string]any{"repair_policy": "approve"})
	r = f.send(t, batch, f.token, []any{ev(newID(), func(m map[string]any) { m["environment"] = "staging" }), ev(newID(), func(m map[string]any) { m["environment"] = "quiet" })})
	if len(r.Accept) != 1 || len(r.Rejects) != 1 || r.Rejects[0]["reason_code"] != "binding_disabled" {
		t.Fatalf("wildcard: %s", r.Raw)
	}
}

func TestFeedEchoesIDsAsSpelled(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	up := "F4B1A0C2-0F4A-4A1E-9D7A-2B6C5D8E1F30"
	rejUp := "AAAAAAAA-0F4A-4A1E-9D7A-2B6C5D8E1F30"
	r := f.send(t, batch, f.token, []any{ev(up), ev(rejUp, func(m map[string]any) { m["environment"] = "staging" })})
	if r.Status != 202 || len(r.Accept) != 1 || r.Accept[0] != up || r.Rejects[0]["event_id"] != rejUp {
		t.Fatalf("got %s", r.Raw)
	}
	// The lower-case spelling is the same delivery (accepted, not stored again).
	r = f.send(t, single, f.token, ev(strings.ToLower(up)))
	if r.Status != 202 || r.Accept[0] != strings.ToLower(up) {
		t.Fatalf("got %s", r.Raw)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE event_id_key = ?`, strings.ToLower(up)); n != 1 {
		t.Fatalf("%d rows", n)
	}
}

func TestFeedDedupeIsPerOrganisation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	id := newID()
	for i := 0; i < 3; i++ { // the first delivery and two resends
		if r := f.send(t, single, f.token, ev(id)); r.Status != 202 || len(r.Accept) != 1 || r.Accept[0] != id {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Raw)
		}
	}
	// The same id twice in one batch: both accepted, stored once.
	if r := f.send(t, batch, f.token, []any{ev(id), ev(id)}); len(r.Accept) != 2 {
		t.Fatalf("batch: %s", r.Raw)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events`); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
	if n := f.count(t, `SELECT event_count FROM incidents`); n != 1 {
		t.Fatalf("incident counted %d, want 1", n)
	}
	// Another organisation's delivery of the same id is its own event.
	other, err := b.accounts.Bootstrap(context.Background(), "globex", "owner@globex.test", testPassword)
	if err != nil {
		t.Fatal(err)
	}
	g := &feedFix{testBundle: &testBundle{srv: b.srv, db: b.db, owner: other}}
	st, p := g.api(t, other.Token, "POST", "/api/private/projects", validProject("shop"))
	if st != 201 {
		t.Fatal(st, p)
	}
	_, c := g.api(t, other.Token, "POST", "/api/private/projects/"+p["id"].(string)+"/connections", map[string]any{"name": "x"})
	g.api(t, other.Token, "PUT", "/api/private/projects/"+p["id"].(string)+"/bindings/production", map[string]any{"repair_policy": "observe"})
	if r := g.send(t, single, c["token"].(string), ev(id)); r.Status != 202 || r.Accept[0] != id {
		t.Fatalf("other org: %s", r.Raw)
	}
	if n := f.count(t, `SELECT count(DISTINCT org_id) FROM feed_events WHERE event_id_key = ?`, id); n != 2 {
		t.Fatalf("%d organisations hold the id, want 2", n)
	}
}

// payload returns the stored (scrubbed) event.
func (f *feedFix) payload(t *testing.T, id string) map[string]any {
	t.Helper()
	var raw string
	if err := f.db.Bun.NewRaw(`SELECT payload::jsonb::text FROM feed_events WHERE event_id_key = ?`, strings.ToLower(id)).Scan(context.Background(), &raw); err != nil {
		t.Fatalf("event %s not stored: %v", id, err)
	}
	m := map[string]any{}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	m["_raw"] = raw
	return m
}

func TestFeedRequestURLSchemes(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	cases := []struct {
		url  string
		kept bool
	}{
		{"https://shop.example/api/checkout", true},
		{"http://shop.example/x", true},
		{"HTTPS://shop.example/y", true},
		{"javascript:alert(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"file:///etc/passwd", false},
		{"shopapp://checkout", false},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			id := newID()
			r := f.send(t, single, f.token, ev(id, func(m map[string]any) {
				m["request"] = map[string]any{"method": "POST", "url": tc.url, "status_code": 500}
			}))
			if r.Status != 202 || len(r.Accept) != 1 {
				t.Fatalf("%s: %s", tc.url, r.Raw)
			}
			req, _ := f.payload(t, id)["request"].(map[string]any)
			if got, _ := req["url"].(string); (got == tc.url) != tc.kept || (!tc.kept && got != "") {
				t.Fatalf("stored url %q (kept=%v)", got, tc.kept)
			}
			if req["status_code"] != float64(500) {
				t.Fatalf("request lost: %v", req)
			}
		})
	}
}

func TestFeedBoundsBrowserUnknownFields(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	frames := make([]any, 200)
	for i := range frames {
		frames[i] = map[string]any{"file": fmt.Sprintf("f%d.go", i), "function": "fn", "line": i, "in_app": true}
	}
	id := newID()
	r := f.send(t, single, f.token, ev(id, func(m map[string]any) {
		m["exception"] = map[string]any{"type": "E", "stacktrace": frames}
		m["title"] = strings.Repeat("t", 5000)
		m["browser"] = map[string]any{"name": "Firefox", "version": "140"}
		m["from_the_future"] = map[string]any{"x": 1}
	}))
	if r.Status != 202 || len(r.Accept) != 1 {
		t.Fatalf("%s", r.Raw)
	}
	p := f.payload(t, id)
	ex := p["exception"].(map[string]any)
	if n := len(ex["stacktrace"].([]any)); n != 50 || ex["frames_omitted"] != float64(150) {
		t.Fatalf("%d frames kept, omitted %v; want 50 and 150", n, ex["frames_omitted"])
	}
	if title := p["title"].(string); !strings.Contains(title, "…[truncated 3976 chars]") {
		t.Fatalf("title cut not visible: %q", title[len(title)-40:])
	}
	// Stage B keeps browser; an unknown field is still read past.
	if !strings.Contains(p["_raw"].(string), `"browser": {"name": "Firefox", "version": "140"}`) || strings.Contains(p["_raw"].(string), "from_the_future") {
		t.Fatalf("browser not kept or unknown field stored: %s", p["_raw"])
	}
}

func TestFeedIPHash(t *testing.T) {
	t.Parallel()
	hash := func(addr, conn string) string {
		salt := sha256.Sum256([]byte(time.Now().UTC().Format("2006-01-02") + conn))
		sum := sha256.Sum256([]byte(addr + hex.EncodeToString(salt[:])))
		return hex.EncodeToString(sum[:])
	}
	withUser := func(m map[string]any) { m["user"] = map[string]any{"id": "u-4711", "ip_hash": "sender-chosen"} }
	t.Run("trusted proxy", func(t *testing.T) { // the test client is 127.0.0.1, inside 127.0.0.0/8
		f := newFeedFix(t, setup(t))
		cases := []struct{ name, xff, addr string }{
			{"socket address without port", "", "127.0.0.1"},
			// The client writes what it likes left of the hop our proxy
			// appended: the right-most hop that is not a trusted proxy.
			{"right-most untrusted hop, not the forged left-most", "198.51.100.9, 203.0.113.7", "203.0.113.7"},
			{"trusted hops skipped", "203.0.113.7, 127.0.0.5, 127.0.0.6", "203.0.113.7"},
			{"entry with a port", "203.0.113.8:4711", "203.0.113.8"},
			{"IPv6 entry with a port", "[2001:db8::1]:443, 127.0.0.9", "2001:db8::1"},
			{"garbage entry falls back to the socket", "not-an-ip", "127.0.0.1"},
		}
		for _, tc := range cases {
			id := newID()
			var hdr []string
			if tc.xff != "" {
				hdr = []string{"X-Forwarded-For", tc.xff}
			}
			if r := f.send(t, single, f.token, ev(id, withUser), hdr...); r.Status != 202 {
				t.Fatalf("%s: %s", tc.name, r.Raw)
			}
			u := f.payload(t, id)["user"].(map[string]any)
			if u["ip_hash"] != hash(tc.addr, f.connID) || u["id"] != "u-4711" {
				t.Fatalf("%s: user %v, want the hash of %s", tc.name, u, tc.addr)
			}
		}
	})
	t.Run("untrusted peer", func(t *testing.T) {
		opts := testOptions()
		opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		f := newFeedFix(t, setupWith(t, opts))
		id := newID()
		f.send(t, single, f.token, ev(id, withUser), "X-Forwarded-For", "203.0.113.7")
		if u := f.payload(t, id)["user"].(map[string]any); u["ip_hash"] != hash("127.0.0.1", f.connID) {
			t.Fatalf("X-Forwarded-For believed from an untrusted peer: %v", u)
		}
	})
}

func TestFeedScrubsBeforeStoring(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	id := newID()
	secretTok := "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.c2lnbmF0dXJlLXZhbHVl"
	r := f.send(t, single, f.token, ev(id, func(m map[string]any) {
		m["exception"].(map[string]any)["message"] = "upstream said 401 for Authorization: Bearer " + secretTok
		m["tags"] = map[string]any{"api_key": "sk_live_abcdefghijklmnop", "tier": "gold"}
		m["breadcrumbs"] = []any{"POST https://u:hunter2secret@pay.example/charge?token=abc123def456"}
		m["request"] = map[string]any{"url": "https://shop.example/cb?password=letmein123&x=1"}
	}))
	if r.Status != 202 {
		t.Fatalf("%s", r.Raw)
	}
	raw := f.payload(t, id)["_raw"].(string)
	for _, s := range []string{secretTok, "sk_live_abcdefghijklmnop", "hunter2secret", "abc123def456", "letmein123"} {
		if strings.Contains(raw, s) {
			t.Fatalf("%q stored in plaintext: %s", s, raw)
		}
	}
	if !strings.Contains(raw, "[Filtered]") || !strings.Contains(raw, "gold") {
		t.Fatalf("scrubbed payload lost its shape: %s", raw)
	}
}

func TestFeedRevocationIsImmediate(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	if r := f.send(t, single, f.token, ev(newID())); r.Status != 202 {
		t.Fatalf("%s", r.Raw)
	}
	if st, _ := f.api(t, f.owner.Token, "DELETE", "/api/private/connections/"+f.connID, nil); st != 204 {
		t.Fatal(st)
	}
	if r := f.send(t, single, f.token, ev(newID())); r.Status != 401 || len(r.Raw) != 0 {
		t.Fatalf("after revoke: %d %s", r.Status, r.Raw)
	}
}

func TestFeedRateLimit(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	_, c2 := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/connections", map[string]any{"name": "second"})
	// Bad tokens never spend a connection's budget: the limiter comes after
	// the token check.
	wrong := f.token[:16] + strings.Repeat("x", len(f.token)-16)
	for i := 0; i < 20; i++ {
		if r := f.send(t, single, wrong, ``); r.Status != 401 {
			t.Fatalf("bad token: %d", r.Status)
		}
	}
	// Nor does a request refused for its Origin (403 comes before 429).
	f.send(t, single, f.token, ``, "Origin", "https://x")
	// 600 requests per connection: the body is refused (400) after the
	// limiter counted them.
	for i := 1; i <= 600; i++ {
		if r := f.send(t, single, f.token, ``); r.Status != 400 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := f.send(t, single, f.token, ev(newID()))
	if r.Status != 429 || r.Header.Get("Retry-After") != "60" {
		t.Fatalf("601st: %d Retry-After %q %s", r.Status, r.Header.Get("Retry-After"), r.Raw)
	}
	// The order stays: a bad token is still 401 and an Origin still 403.
	if r := f.send(t, single, wrong, ev(newID())); r.Status != 401 {
		t.Fatalf("bad token over budget: %d", r.Status)
	}
	if r := f.send(t, single, f.token, ev(newID()), "Origin", "https://x"); r.Status != 403 {
		t.Fatalf("Origin over budget: %d", r.Status)
	}
	// Another connection of the same project has its own budget.
	if r := f.send(t, single, c2["token"].(string), ev(newID())); r.Status != 202 {
		t.Fatalf("second connection: %d %s", r.Status, r.Raw)
	}
}

func TestFeedNotArmedIs404Everywhere(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.FeedArmed = false
	b := setupWith(t, opts)
	f := newFeedFix(t, b)
	for _, m := range []string{"POST", "GET", "PUT", "OPTIONS"} {
		for _, p := range []string{single, batch, "/api/feed", "/api/feed/", "/api/feed/events/other"} {
			req, _ := http.NewRequest(m, b.srv.URL+p, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+f.token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 404 {
				t.Fatalf("%s %s: %d", m, p, res.StatusCode)
			}
		}
	}
}

type incidentRow struct {
	ID     uuid.UUID `bun:"id"`
	Status string    `bun:"status"`
	Count  int       `bun:"event_count"`
	Latest string    `bun:"latest_event_id"`
	Env    string    `bun:"environment"`
}

func (f *feedFix) incidents(t *testing.T) []incidentRow {
	t.Helper()
	var out []incidentRow
	if err := f.db.Bun.NewRaw(`SELECT id, status, event_count, latest_event_id, environment FROM incidents ORDER BY first_seen, title`).Scan(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *feedFix) transitions(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var out []string
	err := f.db.Bun.NewRaw(`SELECT coalesce(from_status, '') || '>' || to_status || '/' || actor_kind FROM incident_transitions WHERE incident_id = ? ORDER BY id`, id).
		Scan(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

func TestFeedGroupsEventsIntoIncidents(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	other := func(m map[string]any) { m["exception"] = map[string]any{"type": "io.EOF"} }
	a1, a2, b1 := newID(), newID(), newID()
	// Same fingerprint (the line number differs, which grouping ignores).
	r := f.send(t, batch, f.token, []any{ev(a1), ev(a2, func(m map[string]any) {
		m["exception"].(map[string]any)["stacktrace"].([]any)[0].(map[string]any)["line"] = 99
		m["release"] = "2026.9.4"
	}), ev(b1, other)})
	if r.Status != 202 || len(r.Accept) != 3 {
		t.Fatalf("%s", r.Raw)
	}
	is := f.incidents(t)
	if len(is) != 2 {
		t.Fatalf("%d incidents, want 2", len(is))
	}
	counts := map[int]bool{is[0].Count: true, is[1].Count: true}
	if !counts[1] || !counts[2] {
		t.Fatalf("incidents %+v, want counts 2 and 1", is)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events e JOIN incidents i ON i.id = e.incident_id WHERE i.event_count = 2`); n != 2 {
		t.Fatalf("%d events point at the incident of two", n)
	}
	if n := f.count(t, `SELECT count(*) FROM incidents WHERE event_count = 2 AND release = '2026.9.4' AND latest_event_id = ?`, a2); n != 1 {
		t.Fatal("latest event and release not the newest")
	}
	for _, i := range is {
		if i.Status != "TRIAGED" || f.transitions(t, i.ID) != ">OBSERVED/system OBSERVED>TRIAGED/system" {
			t.Fatalf("new incident %s: %s", i.Status, f.transitions(t, i.ID))
		}
	}
	// Regression: a CLOSED incident reopens on a new event.
	var closed, ignored uuid.UUID
	f.db.Bun.NewRaw(`UPDATE incidents SET status = 'CLOSED' WHERE event_count = 2 RETURNING id`).Scan(context.Background(), &closed)
	f.db.Bun.NewRaw(`UPDATE incidents SET status = 'IGNORED' WHERE event_count = 1 RETURNING id`).Scan(context.Background(), &ignored)
	r = f.send(t, batch, f.token, []any{ev(newID()), ev(newID(), other)})
	if r.Status != 202 || len(r.Accept) != 2 {
		t.Fatalf("%s", r.Raw)
	}
	for _, i := range f.incidents(t) {
		switch i.ID {
		case closed:
			if i.Status != "TRIAGED" || i.Count != 3 || !strings.HasSuffix(f.transitions(t, i.ID), "CLOSED>TRIAGED/system") {
				t.Fatalf("regression: %+v %s", i, f.transitions(t, i.ID))
			}
		case ignored:
			if i.Status != "IGNORED" || i.Count != 2 || strings.Contains(f.transitions(t, i.ID), "IGNORED>") {
				t.Fatalf("ignored: %+v %s", i, f.transitions(t, i.ID))
			}
		}
	}
	// Environments are apart: the same fault in another environment is its own incident.
	f.api(t, f.owner.Token, "PUT", "/api/private/projects/"+f.projectID+"/bindings/staging", map[string]any{"repair_policy": "observe"})
	f.send(t, single, f.token, ev(newID(), func(m map[string]any) { m["environment"] = "Staging" }))
	if n := len(f.incidents(t)); n != 3 {
		t.Fatalf("%d incidents, want 3", n)
	}
}

func TestFeedPolicyOfNewIncidents(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t), "appr=approve", "aut=auto")
	cases := []struct{ env, status, trail string }{
		{"production", "TRIAGED", ">OBSERVED/system OBSERVED>TRIAGED/system"},
		{"appr", "WAITING_APPROVAL", ">OBSERVED/system OBSERVED>TRIAGED/system TRIAGED>WAITING_APPROVAL/policy"},
		{"aut", "QUEUED", ">OBSERVED/system OBSERVED>TRIAGED/system TRIAGED>QUEUED/policy"},
	}
	for _, tc := range cases {
		t.Run(tc.env, func(t *testing.T) {
			id := newID()
			if r := f.send(t, single, f.token, ev(id, func(m map[string]any) { m["environment"] = tc.env })); r.Status != 202 {
				t.Fatalf("%s", r.Raw)
			}
			var i incidentRow
			if err := f.db.Bun.NewRaw(`SELECT id, status, event_count, latest_event_id, environment FROM incidents WHERE environment = ?`, tc.env).Scan(context.Background(), &i); err != nil {
				t.Fatal(err)
			}
			if i.Status != tc.status || f.transitions(t, i.ID) != tc.trail {
				t.Fatalf("%s: %s, %s", tc.env, i.Status, f.transitions(t, i.ID))
			}
		})
	}
}

var srvTokenRE = regexp.MustCompile(`^anv_srv_[0-9A-Za-z]{32}$`)

func TestFeedConnectionsAndBindingsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	if !srvTokenRE.MatchString(f.token) {
		t.Fatalf("token %q", f.token)
	}
	// Stored as prefix + SHA-256, never the token.
	var prefix string
	var hash []byte
	f.db.Bun.NewRaw(`SELECT prefix, hash FROM feed_connections WHERE id = ?`, f.connID).Scan(context.Background(), &prefix, &hash)
	sum := sha256.Sum256([]byte(f.token))
	if prefix != f.token[:16] || !bytes.Equal(hash, sum[:]) {
		t.Fatalf("stored %q %x", prefix, hash)
	}
	st, list := f.api(t, f.owner.Token, "GET", "/api/private/projects/"+f.projectID+"/connections", nil)
	raw, _ := json.Marshal(list)
	if st != 200 || len(list["connections"].([]any)) != 1 || strings.Contains(string(raw), f.token[16:]) || !strings.Contains(string(raw), `"prefix":"`+prefix) {
		t.Fatalf("list: %d %s", st, raw)
	}
	st, bl := f.api(t, f.owner.Token, "GET", "/api/private/projects/"+f.projectID+"/bindings", nil)
	if st != 200 || len(bl["bindings"].([]any)) != 2 {
		t.Fatalf("bindings: %d %v", st, bl)
	}
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"empty name", "POST", "/api/private/projects/" + f.projectID + "/connections", map[string]any{"name": " "}, 422, "invalid_name"},
		{"unknown project", "POST", "/api/private/projects/" + newID() + "/connections", map[string]any{"name": "x"}, 404, "not_found"},
		{"malformed project", "GET", "/api/private/projects/nope/connections", nil, 404, "not_found"},
		{"unknown connection", "DELETE", "/api/private/connections/" + newID(), nil, 404, "not_found"},
		{"bad environment", "PUT", "/api/private/projects/" + f.projectID + "/bindings/prod%20x", map[string]any{"repair_policy": "observe"}, 422, "invalid_environment"},
		{"bad policy", "PUT", "/api/private/projects/" + f.projectID + "/bindings/production", map[string]any{"repair_policy": "sometimes"}, 422, "invalid_repair_policy"},
		{"wildcard", "PUT", "/api/private/projects/" + f.projectID + "/bindings/*", map[string]any{"repair_policy": "auto"}, 200, ""},
		{"change", "PUT", "/api/private/projects/" + f.projectID + "/bindings/PRODUCTION", map[string]any{"repair_policy": "approve"}, 200, ""},
		{"delete", "DELETE", "/api/private/projects/" + f.projectID + "/bindings/quiet", nil, 204, ""},
		{"delete again", "DELETE", "/api/private/projects/" + f.projectID + "/bindings/quiet", nil, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, out := f.api(t, f.owner.Token, tc.method, tc.path, tc.body)
			if st != tc.status || (tc.code != "" && out["error"] != tc.code) {
				t.Fatalf("got %d %v", st, out)
			}
		})
	}
	_, bl = f.api(t, f.owner.Token, "GET", "/api/private/projects/"+f.projectID+"/bindings", nil)
	got, _ := json.Marshal(bl["bindings"])
	if !strings.Contains(string(got), `"environment":"production","repair_policy":"approve"`) || !strings.Contains(string(got), `"environment":"*","repair_policy":"auto"`) || strings.Contains(string(got), "quiet") {
		t.Fatalf("bindings after edits: %s", got)
	}

	// Another organisation sees none of it; a viewer may read but not write.
	other, _ := b.accounts.Bootstrap(context.Background(), "globex", "owner@globex.test", testPassword)
	for _, c := range []struct{ m, p string }{
		{"GET", "/api/private/projects/" + f.projectID + "/connections"},
		{"DELETE", "/api/private/connections/" + f.connID},
		{"GET", "/api/private/projects/" + f.projectID + "/bindings"},
		{"DELETE", "/api/private/projects/" + f.projectID + "/bindings/production"},
	} {
		if st, _ := f.api(t, other.Token, c.m, c.p, nil); st != 404 {
			t.Fatalf("other org %s %s: %d", c.m, c.p, st)
		}
	}
	owner, _ := b.accounts.Authenticate(context.Background(), b.owner.Token)
	if _, err := b.accounts.AddMember(context.Background(), owner, "viewer@acme.test", testPassword, "viewer"); err != nil {
		t.Fatal(err)
	}
	vt := viewerToken(t, b)
	if st, _ := f.api(t, vt, "GET", "/api/private/projects/"+f.projectID+"/connections", nil); st != 200 {
		t.Fatalf("viewer list: %d", st)
	}
	for _, c := range []struct {
		m, p string
		body any
	}{
		{"POST", "/api/private/projects/" + f.projectID + "/connections", map[string]any{"name": "x"}},
		{"DELETE", "/api/private/connections/" + f.connID, nil},
		{"PUT", "/api/private/projects/" + f.projectID + "/bindings/production", map[string]any{"repair_policy": "off"}},
	} {
		if st, _ := f.api(t, vt, c.m, c.p, c.body); st != 403 {
			t.Fatalf("viewer %s %s: %d", c.m, c.p, st)
		}
	}
	if r := f.send(t, single, f.token, ev(newID())); r.Status != 202 {
		t.Fatalf("connection must still be live: %d", r.Status)
	}
}

// viewerToken logs the viewer in through the settings page and makes a token.
func viewerToken(t *testing.T, b *testBundle) string {
	t.Helper()
	br := b.browser(t)
	br.login("viewer@acme.test", testPassword)
	tok := br.csrf("/settings")
	br.post("/settings/tokens", map[string][]string{"_csrf": {tok}, "name": {"v"}})
	_, body := br.get("/settings")
	m := regexpToken.FindString(body)
	if m == "" {
		t.Fatal("no viewer token")
	}
	return m
}

func TestFeedPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	if _, body := br.get("/projects/" + f.projectID); !strings.Contains(body, `data-testid="project-feed"`) || !strings.Contains(body, `href="/projects/shop/feed"`) {
		t.Fatal("no Feed link on the project page")
	}
	res, body := br.get("/projects/" + f.projectID + "/feed")
	// Onboarding reads in order: step 1 an environment's
	// binding, with why it exists; step 2 a connection.
	if one, two := strings.Index(body, `data-testid="feed-step-1"`), strings.Index(body, `data-testid="feed-step-2"`); one < 0 || two < one ||
		!strings.Contains(body, `data-testid="binding-why"`) {
		t.Fatalf("the Feed page does not lead binding, then connection: %d %d", one, two)
	}
	if res.StatusCode != 200 || !strings.Contains(body, `data-testid="connection-row"`) || !strings.Contains(body, f.token[:16]) || strings.Contains(body, f.token[16:]) {
		t.Fatalf("feed page: %d", res.StatusCode)
	}
	if !strings.Contains(body, `data-environment="production"`) || !strings.Contains(body, "hx-confirm=") {
		t.Fatal("bindings or revoke missing")
	}
	csrf := br.csrf("/projects/" + f.projectID + "/feed")
	// Creating answers with a redirect; the page it leads to shows the
	// token once, and neither a reload nor the redirect again creates or
	// shows anything.
	res, body = br.post("/projects/"+f.projectID+"/feed/connections", map[string][]string{"_csrf": {csrf}, "name": {"from the page"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/projects/"+f.projectID+"/feed" || strings.Contains(body, "anv_srv_") {
		t.Fatalf("create: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, body = br.get("/projects/" + f.projectID + "/feed")
	tok := regexp.MustCompile(`anv_srv_[0-9A-Za-z]{32}`).FindString(body)
	if res.StatusCode != 200 || tok == "" || !strings.Contains(body, `data-copy="#new-feed-token"`) || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the page after create: %d token=%q", res.StatusCode, tok)
	}
	if !strings.Contains(body, "Copy it now: anvil shows this DSN only once; it holds the secret.") {
		t.Fatal("the page does not say the DSN is shown once")
	}
	if n := f.count(t, `SELECT count(*) FROM feed_connections WHERE project_id = '`+f.projectID+`'`); n != 2 {
		t.Fatalf("%d connections after one create", n)
	}
	if plain := f.count(t, `SELECT count(*) FROM session_reveals WHERE position('`+tok+`' in sealed) > 0`); plain != 0 {
		t.Fatal("the token waits in plaintext")
	}
	if _, again := br.get("/projects/" + f.projectID + "/feed"); strings.Contains(again, tok) || strings.Contains(again, `data-testid="new-connection"`) {
		t.Fatal("a reload shows the token again")
	}
	// The curl example is the seed's, with this installation's URL, the token
	// and a bound environment, and a fresh event_id and timestamp made by the
	// shell on every run.
	if !strings.Contains(body, "curl -sS -X POST http://anvil.test/api/feed/events") || !strings.Contains(body, "Authorization: Bearer "+tok) {
		t.Fatalf("curl example missing: %s", body)
	}
	// …and it works as printed, twice: each run is a new event.
	m := regexp.MustCompile(`(?s)-d (?:'|&#39;)(\{.*?\})(?:'|&#39;)</pre>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no body in the curl example")
	}
	example := strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&amp;", "&", "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(m[1])
	for i := 0; i < 2; i++ {
		id := newID()
		shell := strings.NewReplacer(`'"$(cat /proc/sys/kernel/random/uuid)"'`, id, `'"$(date -u +%FT%TZ)"'`, time.Now().UTC().Format(time.RFC3339)).Replace(example)
		if shell == example || !strings.Contains(shell, `"environment": "production"`) {
			t.Fatalf("the example does not make its id and timestamp in the shell: %s", example)
		}
		if r := f.send(t, single, tok, shell); r.Status != 202 || len(r.Accept) != 1 || r.Accept[0] != id {
			t.Fatalf("curl example: %d %s", r.Status, r.Raw)
		}
	}
	if n := f.count(t, `SELECT event_count FROM incidents WHERE title = 'NullPointerException in CheckoutService'`); n != 2 {
		t.Fatalf("the example's incident counts %d events", n)
	}
	// Bindings: add, refuse a bad one, remove.
	res, _ = br.post("/projects/"+f.projectID+"/feed/bindings", map[string][]string{"_csrf": {csrf}, "environment": {"staging"}, "repair_policy": {"approve"}})
	if res.StatusCode != 303 {
		t.Fatalf("add binding: %d", res.StatusCode)
	}
	res, body = br.post("/projects/"+f.projectID+"/feed/bindings", map[string][]string{"_csrf": {csrf}, "environment": {"no good"}, "repair_policy": {"approve"}})
	if res.StatusCode != 422 || !strings.Contains(body, `data-testid="feed-error"`) {
		t.Fatalf("bad binding: %d", res.StatusCode)
	}
	res, _ = br.post("/projects/"+f.projectID+"/feed/bindings/delete", map[string][]string{"_csrf": {csrf}, "environment": {"quiet"}})
	if res.StatusCode != 303 {
		t.Fatalf("remove binding: %d", res.StatusCode)
	}
	_, body = br.get("/projects/" + f.projectID + "/feed")
	if !strings.Contains(body, `data-environment="staging"`) || strings.Contains(body, `data-environment="quiet"`) {
		t.Fatal("binding edits not shown")
	}
	// Revoke from the page; a form without CSRF is refused.
	if res, _ := br.post("/projects/"+f.projectID+"/feed/connections/"+f.connID+"/revoke", nil); res.StatusCode != 403 {
		t.Fatalf("revoke without CSRF: %d", res.StatusCode)
	}
	res, _ = br.post("/projects/"+f.projectID+"/feed/connections/"+f.connID+"/revoke", map[string][]string{"_csrf": {csrf}})
	if res.StatusCode != 303 {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	if r := f.send(t, single, f.token, ev(newID())); r.Status != 401 {
		t.Fatalf("revoked from the page: %d", r.Status)
	}
	_, body = br.get("/projects/" + f.projectID + "/feed")
	if !strings.Contains(body, `data-testid="connection-revoked"`) {
		t.Fatal("revoked connection not shown as revoked")
	}
}

// TestFeedPageProductionCard: the feed page hands the production card to
// an external producer (URL, token once and a curl example that works as
// printed), issues a new token, and takes the card back; viewers only read.
func TestFeedPageProductionCard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	page := "/projects/" + f.projectID + "/feed"
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	_, body := br.get(page)
	if !strings.Contains(body, `data-testid="feed-card"`) || !strings.Contains(body, "incident store") || !strings.Contains(body, `data-testid="card-hand-over"`) {
		t.Fatal("the card section does not offer the hand-over")
	}
	csrf := br.csrf(page)
	if res, _ := br.post(page+"/card", map[string][]string{"external": {"true"}}); res.StatusCode != 403 {
		t.Fatalf("without CSRF: %d", res.StatusCode)
	}
	if res, _ := br.post(page+"/card", map[string][]string{"_csrf": {csrf}, "external": {"maybe"}}); res.StatusCode != 422 {
		t.Fatalf("external=maybe: %d", res.StatusCode)
	}
	// The hand-over answers with a redirect; the page shows the token once.
	res, body := br.post(page+"/card", map[string][]string{"_csrf": {csrf}, "external": {"true"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != page || strings.Contains(body, "anv_dsh_") {
		t.Fatalf("hand-over: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, body = br.get(page)
	tok := regexp.MustCompile(`anv_dsh_[0-9A-Za-z]{32}`).FindString(body)
	ingest := regexp.MustCompile(`http://anvil\.test/api/ingest/dashboard/acme/[0-9a-f-]{36}/incidents`).FindString(body)
	if res.StatusCode != 200 || tok == "" || ingest == "" || res.Header.Get("Cache-Control") != "no-store" || !strings.Contains(body, `data-copy="#card-token"`) {
		t.Fatalf("hand-over: %d token=%q url=%q", res.StatusCode, tok, ingest)
	}
	// The curl example works as printed.
	m := regexp.MustCompile(`(?s)-d (?:'|&#39;)(\{.*?\})(?:'|&#39;)</pre>`).FindStringSubmatch(body[strings.Index(body, `id="card-curl"`):])
	if m == nil || !strings.Contains(body, "curl -sS -X PUT "+ingest) || !strings.Contains(body, "Authorization: Bearer "+tok) {
		t.Fatal("no usable curl example")
	}
	example := strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&amp;", "&", "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(m[1])
	put := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("PUT", b.srv.URL+strings.TrimPrefix(ingest, "http://anvil.test"), strings.NewReader(example))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if st := put(tok); st != http.StatusNoContent {
		t.Fatalf("the example's PUT: %d", st)
	}
	if st, card := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+f.projectID+"/card", nil); st != 200 || card["external"] != true ||
		len(card["incidents"].([]any)) != 1 || !strings.Contains(ingest, card["config_id"].(string)) {
		t.Fatalf("card after the example: %d %v", st, card)
	}
	// Shown again: the URL, never the token.
	_, body = br.get(page)
	if !strings.Contains(body, ingest) || strings.Contains(body, tok) || !strings.Contains(body, `data-testid="card-take-back"`) {
		t.Fatal("the external state is not shown, or the token is")
	}
	// A new token (htmx: HX-Redirect to the page, which shows it once)
	// retires the old one.
	hx := func(external string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", b.srv.URL+page+"/card", strings.NewReader(url.Values{"external": {external}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		req.Header.Set("X-CSRF-Token", csrf)
		res, err := br.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent || res.Header.Get("HX-Redirect") != page {
			t.Fatalf("htmx card %s: %d %q", external, res.StatusCode, res.Header.Get("HX-Redirect"))
		}
		_, body := br.get(page)
		return body
	}
	body = hx("true")
	fresh := regexp.MustCompile(`anv_dsh_[0-9A-Za-z]{32}`).FindString(body)
	if fresh == "" || fresh == tok {
		t.Fatalf("new token: %q", fresh)
	}
	if put(tok) != 401 || put(fresh) != http.StatusNoContent {
		t.Fatal("the old token still works, or the new one does not")
	}
	// Taking it back retires the token and shows the incident store again.
	if body = hx("false"); !strings.Contains(body, "incident store") || strings.Contains(body, "anv_dsh_") {
		t.Fatal("take back: the incident store is not shown, or a token is")
	}
	if put(fresh) != 401 {
		t.Fatal("the token works after the card was taken back")
	}
	// A viewer sees the source and no forms, and cannot post.
	owner, _ := b.accounts.Authenticate(context.Background(), b.owner.Token)
	if _, err := b.accounts.AddMember(context.Background(), owner, "viewer@acme.test", testPassword, "viewer"); err != nil {
		t.Fatal(err)
	}
	vb := b.browser(t)
	vb.login("viewer@acme.test", testPassword)
	_, body = vb.get(page)
	if !strings.Contains(body, `data-testid="card-source"`) || strings.Contains(body, `data-testid="card-hand-over"`) {
		t.Fatal("a viewer is offered the hand-over")
	}
	if res, _ := vb.post(page+"/card", map[string][]string{"_csrf": {vb.csrf(page)}, "external": {"true"}}); res.StatusCode != 403 {
		t.Fatalf("viewer hand-over: %d", res.StatusCode)
	}
}

// FuzzFeedIngest posts arbitrary bodies to both ingest endpoints of a real
// server on a real database: the answer is never a 5xx, always one the
// contract names, and a 202 gives every element of the body exactly one
// verdict — accepted ids echoed as the sender spelled them, rejections with
// a reason of the closed set and a message.
func FuzzFeedIngest(f *testing.F) {
	opts := testOptions()
	opts.FeedRatePerMin = 1 << 30 // the fuzzer sends far more than 600 a minute
	fx := newFeedFix(f, setupWith(f, opts))
	seed := func(v any) []byte {
		raw, _ := json.Marshal(v)
		return raw
	}
	id := "F4B1A0C2-0F4A-4A1E-9D7A-2B6C5D8E1F30"
	f.Add(seed(ev(id)))
	f.Add(seed([]any{ev(id), ev(strings.ToLower(id)), ev("not-a-uuid"), 42, nil, ev(newID(), func(m map[string]any) { m["environment"] = "quiet" })}))
	f.Add(seed([]any{ev(newID(), func(m map[string]any) { m["environment"] = "nowhere" }), ev(newID(), func(m map[string]any) { m["schema_version"] = "2.0" })}))
	f.Add(seed([]any{ev(newID(), func(m map[string]any) {
		m["exception"] = map[string]any{"type": "X", "message": "Authorization: Bearer abc.def.ghi card 4111 1111 1111 1111"}
		m["request"] = map[string]any{"url": "javascript:alert(1)"}
		m["tags"] = map[string]any{"password": "hunter2"}
	})}))
	f.Add([]byte(`[`))
	f.Add([]byte(`[{"event_id":"` + id + `"},]`))
	f.Add([]byte("[{\"title\":\"\xff\"}]"))
	f.Add([]byte(`{"event_id":{"nested":[1,2,3]}}`))
	f.Add([]byte(`  [ ]  `))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{single, batch} {
			r := fx.send(t, path, fx.token, string(body))
			switch r.Status {
			case http.StatusAccepted:
			case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
				if !json.Valid(r.Raw) {
					t.Fatalf("%s: %d answered with a body that is not JSON: %q", path, r.Status, r.Raw)
				}
				continue
			default:
				t.Fatalf("%s: %d %s for %q", path, r.Status, r.Raw, body)
			}
			var elems []json.RawMessage
			if path == single {
				elems = []json.RawMessage{body}
			} else if err := json.Unmarshal(body, &elems); err != nil {
				t.Fatalf("batch: 202 for a body that is not an array: %q", body)
			}
			if len(r.Accept)+len(r.Rejects) != len(elems) {
				t.Fatalf("%s: %d verdicts for %d events: %s", path, len(r.Accept)+len(r.Rejects), len(elems), r.Raw)
			}
			sent := map[string]bool{}
			for _, e := range elems {
				var v struct {
					EventID any `json:"event_id"`
				}
				if json.Unmarshal(e, &v) == nil {
					if s, ok := v.EventID.(string); ok {
						sent[s] = true
					}
				}
			}
			for _, a := range r.Accept {
				if !sent[a] {
					t.Fatalf("%s: accepted %q, which was not sent as spelled", path, a)
				}
			}
			for _, rej := range r.Rejects {
				code, _ := rej["reason_code"].(string)
				msg, _ := rej["message"].(string)
				switch code {
				case event.SchemaViolation, event.UnsupportedSchemaVersion, event.NoBinding, event.BindingDisabled, event.RedactionFailed:
				default:
					t.Fatalf("%s: reason %q outside the closed set (or internal): %s", path, code, r.Raw)
				}
				if msg == "" {
					t.Fatalf("%s: a rejection without a message: %s", path, r.Raw)
				}
			}
		}
	})
}

// TestFeedPageBindingsAndCurl: the add form never replaces an existing
// binding's policy (each row shows and changes its own); approve and auto
// are refused on a project with no repair command, from the page and the
// API alike; the curl example appears only when an event would be kept,
// and says why it would be refused otherwise.
func TestFeedPageBindingsAndCurl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := newFeedFix(t, b)
	page := "/projects/" + f.projectID + "/feed"
	br := b.browser(t)
	br.login("owner@acme.test", testPassword)
	csrf := br.csrf(page)
	post := func(form url.Values) (*http.Response, string) {
		t.Helper()
		form.Set("_csrf", csrf)
		return br.post(page+"/bindings", form)
	}
	if res, _ := post(url.Values{"environment": {"production"}, "repair_policy": {"approve"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("change production to approve in its row: %d", res.StatusCode)
	}
	res, body := post(url.Values{"add": {"true"}, "environment": {"production"}, "repair_policy": {"observe"}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "already has a binding with repair policy approve") {
		t.Fatalf("the add form over production: %d", res.StatusCode)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_bindings WHERE environment = 'production' AND repair_policy = 'approve'`); n != 1 {
		t.Fatal("the add form replaced production's policy")
	}
	_, body = br.get(page)
	row := regexp.MustCompile(`(?s)data-environment="production".*?</tr>`).FindString(body)
	if !regexp.MustCompile(`<option value="approve" selected`).MatchString(row) {
		t.Fatalf("production's row does not show approve: %s", row)
	}

	// A project without a repair command: approve and auto are refused.
	st, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("bare"))
	if st != http.StatusCreated {
		t.Fatalf("project: %d", st)
	}
	bare := "/projects/" + p["id"].(string) + "/feed"
	_, body = br.get(bare)
	if !strings.Contains(body, `data-testid="curl-unavailable"`) || !strings.Contains(body, "no_binding") || strings.Contains(body, `data-testid="curl-example"`) {
		t.Fatal("no binding: the page must say events are refused as no_binding, and show no example")
	}
	res, body = br.post(bare+"/bindings", url.Values{"_csrf": {csrf}, "add": {"true"}, "environment": {"production"}, "repair_policy": {"auto"}})
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "has no repair command") {
		t.Fatalf("auto without a repair command from the page: %d", res.StatusCode)
	}
	if st, out := b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p["id"].(string)+"/bindings/production", map[string]any{"repair_policy": "approve"}); st != 422 || out["error"] != "repair_command_required" {
		t.Fatalf("approve without a repair command from the API: %d %v", st, out)
	}
	b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p["id"].(string)+"/bindings/production", map[string]any{"repair_policy": "off"})
	_, body = br.get(bare)
	if !strings.Contains(body, "binding_disabled") || strings.Contains(body, `data-testid="curl-example"`) {
		t.Fatal("only an off binding: the page must say events are refused as binding_disabled")
	}
	b.api(t, b.owner.Token, "PUT", "/api/private/projects/"+p["id"].(string)+"/bindings/*", map[string]any{"repair_policy": "observe"})
	_, body = br.get(bare)
	if !strings.Contains(body, `data-testid="curl-example"`) || !strings.Contains(body, `&#34;environment&#34;: &#34;staging&#34;`) ||
		!strings.Contains(body, "$ANVIL_FEED_TOKEN") {
		t.Fatalf("wildcard: the example must use an environment it admits and the token's variable: %s", body)
	}
}
