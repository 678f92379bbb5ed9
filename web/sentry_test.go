package web_test

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/getsentry/sentry-go"
	sentryhttp "github.com/getsentry/sentry-go/http"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// sentryFix is a feed fixture with a connection whose DSN points at the
// test server.
type sentryFix struct {
	*feedFix
	key    string // the connection's token, the DSN's key
	number int64
	dsn    string // as the API answered it (ANVIL_PUBLIC_URL's host)
	local  string // the same DSN with the test server's address
}

func newSentryFix(t testing.TB, b *testBundle, bindings ...string) *sentryFix {
	t.Helper()
	f := newFeedFix(t, b, bindings...)
	st, c := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/connections", map[string]any{"name": "sentry-conn"})
	if st != http.StatusCreated {
		t.Fatalf("connection: %d %v", st, c)
	}
	st, p := b.api(t, b.owner.Token, "GET", "/api/private/projects/"+f.projectID, nil)
	if st != http.StatusOK {
		t.Fatalf("project: %d %v", st, p)
	}
	s := &sentryFix{feedFix: f, key: c["token"].(string), number: int64(p["number"].(float64)), dsn: c["dsn"].(string)}
	u, _ := url.Parse(s.dsn)
	srv, _ := url.Parse(b.srv.URL)
	u.Host = srv.Host
	s.local = u.String()
	return s
}

// hub is a sentry-go hub of its own (never the global one: tests run in
// parallel) reporting to the fixture's DSN.
func (s *sentryFix) hub(t *testing.T, opts sentry.ClientOptions) *sentry.Hub {
	t.Helper()
	opts.Dsn = s.local
	client, err := sentry.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return sentry.NewHub(client, sentry.NewScope())
}

type sentryIncident struct {
	Title         string `bun:"title"`
	ExceptionType string `bun:"exception_type"`
	Environment   string `bun:"environment"`
	Release       string `bun:"release"`
	EventCount    int    `bun:"event_count"`
}

func (s *sentryFix) incidentByType(t *testing.T, typ string) (sentryIncident, bool) {
	t.Helper()
	var rows []sentryIncident
	if err := s.db.Bun.NewRaw(`SELECT title, exception_type, environment, release, event_count FROM incidents WHERE project_id = ? AND exception_type = ?`,
		s.projectID, typ).Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return sentryIncident{}, false
	}
	return rows[0], true
}

func dashed(id string) string {
	return id[0:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:32]
}

type cartError struct{}

func (cartError) Error() string { return "cart is null" }

// The real sentry-go, unmodified, against a real server: CaptureException,
// CaptureMessage, a panic recovered by sentryhttp, Flush; the incidents
// carry the title, type, frames, environment and release, and a second
// delivery of the same event is counted once.
func TestSentryGoSDK(t *testing.T) {
	t.Parallel()
	s := newSentryFix(t, setup(t), "staging=observe")
	if !strings.HasPrefix(s.dsn, "http://"+s.key+"@anvil.test/") || !strings.HasSuffix(s.dsn, "/"+strconv.FormatInt(s.number, 10)) {
		t.Fatalf("dsn %q", s.dsn)
	}
	hub := s.hub(t, sentry.ClientOptions{Environment: "staging", Release: "shop@1.2.3", ServerName: "shop-api"})

	id := hub.CaptureException(fmt.Errorf("charge: %w", cartError{}))
	if id == nil {
		t.Fatal("CaptureException dropped the event")
	}
	msgID := hub.CaptureMessage("disk almost full")
	// A panic in an HTTP handler, recovered by sentry-go's own middleware.
	h := sentryhttp.New(sentryhttp.Options{Repanic: false}).Handle(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		var m map[string]int
		m["boom"]++ //nolint:staticcheck // a real runtime panic, as a bug in a handler raises it
	}))
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(sentry.SetHubOnContext(r.Context(), hub)))
	}))
	defer app.Close()
	if res, err := http.Get(app.URL + "/checkout"); err == nil {
		res.Body.Close()
	}
	if !hub.Flush(10 * time.Second) {
		t.Fatal("Flush timed out")
	}

	exc, ok := s.incidentByType(t, "*fmt.wrapError")
	if !ok {
		t.Fatal("no incident for CaptureException")
	}
	if exc.Title != "*fmt.wrapError: charge: cart is null" || exc.Environment != "staging" || exc.Release != "shop@1.2.3" || exc.EventCount != 1 {
		t.Fatalf("exception incident %+v", exc)
	}
	p := s.payload(t, dashed(string(*id)))
	frames := p["exception"].(map[string]any)["stacktrace"].([]any)
	top := frames[0].(map[string]any)
	if !strings.HasSuffix(top["file"].(string), "sentry_test.go") || top["function"] != "TestSentryGoSDK" || top["in_app"] != true || top["line"].(float64) <= 0 {
		t.Fatalf("crash-site frame %v of %v", top, frames)
	}
	if p["service"] != "shop-api" || p["sdk"].(map[string]any)["name"] != "sentry.go" || p["language"] != "go" {
		t.Fatalf("payload %v", p)
	}

	msg, ok := s.incidentByType(t, "Message")
	if !ok || msg.Title != "disk almost full" || msg.Environment != "staging" {
		t.Fatalf("message incident %+v %v", msg, ok)
	}
	if mp := s.payload(t, dashed(string(*msgID))); mp["level"] != "info" {
		t.Fatalf("message level %v", mp["level"])
	}
	pan, ok := s.incidentByType(t, "runtime.plainError")
	if !ok {
		var types []string
		_ = s.db.Bun.NewRaw(`SELECT exception_type FROM incidents WHERE project_id = ?`, s.projectID).Scan(context.Background(), &types)
		t.Fatalf("no incident for the panic; incidents: %v", types)
	}
	if !strings.Contains(pan.Title, "assignment to entry in nil map") {
		t.Fatalf("panic incident %+v", pan)
	}

	// The same event delivered twice (an SDK retrying): counted once.
	ev := &sentry.Event{EventID: "0123456789abcdef0123456789abcdef", Level: sentry.LevelError, Message: "resent"}
	hub.CaptureEvent(ev)
	hub.Flush(10 * time.Second)
	hub.CaptureEvent(&sentry.Event{EventID: "0123456789abcdef0123456789abcdef", Level: sentry.LevelError, Message: "resent"})
	hub.Flush(10 * time.Second)
	if n := s.count(t, `SELECT count(*) FROM feed_events WHERE event_id_key = '01234567-89ab-cdef-0123-456789abcdef'`); n != 1 {
		t.Fatalf("%d stored deliveries", n)
	}
	if n := s.count(t, `SELECT event_count FROM incidents WHERE project_id = ? AND title = 'resent'`, s.projectID); n != 1 {
		t.Fatalf("event_count %d", n)
	}
}

// sentrySend posts body to the door with the given encoding and headers.
func sentrySend(t testing.TB, base, path string, body []byte, hdr ...string) feedResp {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, bytes.NewReader(body))
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
	return out
}

func sentryEvent(id string, mods ...func(m map[string]any)) []byte {
	m := map[string]any{"event_id": id, "timestamp": "2026-12-03T09:30:00Z", "level": "error", "platform": "python",
		"exception": map[string]any{"values": []any{map[string]any{"type": "ZeroDivisionError", "value": "division by zero",
			"stacktrace": map[string]any{"frames": []any{map[string]any{"filename": "app.py", "lineno": 3, "function": "f", "in_app": true,
				"vars": map[string]any{"password": "hunter2"}}}}}}},
		"sdk": map[string]any{"name": "sentry.python", "version": "2.0.0"}}
	for _, f := range mods {
		f(m)
	}
	raw, _ := json.Marshal(m)
	return raw
}

func envelope(header string, items ...string) []byte {
	return []byte(header + "\n" + strings.Join(items, "\n") + "\n")
}

func eventItem(ev []byte) string {
	return `{"type":"event","length":` + strconv.Itoa(len(ev)) + "}\n" + string(ev)
}

func hexID() string { return strings.ReplaceAll(newID(), "-", "") }

func (s *sentryFix) envPath() string { return "/api/" + strconv.FormatInt(s.number, 10) + "/envelope/" }
func (s *sentryFix) auth() []string {
	return []string{"X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=test/1.0, sentry_key=" + s.key}
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// Every encoding the SDKs send, each answered 200 and stored.
func TestSentryCompression(t *testing.T) {
	t.Parallel()
	s := newSentryFix(t, setup(t))
	encoders := map[string]func([]byte) []byte{
		"":     func(b []byte) []byte { return b },
		"gzip": gz,
		"deflate": func(b []byte) []byte {
			var buf bytes.Buffer
			w := zlib.NewWriter(&buf)
			w.Write(b)
			w.Close()
			return buf.Bytes()
		},
		"br": func(b []byte) []byte {
			var buf bytes.Buffer
			w := brotli.NewWriter(&buf)
			w.Write(b)
			w.Close()
			return buf.Bytes()
		},
		"zstd": func(b []byte) []byte {
			enc, _ := zstd.NewWriter(nil)
			return enc.EncodeAll(b, nil)
		},
	}
	// Raw deflate (no zlib header), as some clients send it.
	encoders["deflate-raw"] = func(b []byte) []byte {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.DefaultCompression)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	for name, enc := range encoders {
		t.Run("encoding "+name, func(t *testing.T) {
			id := hexID()
			header := strings.TrimSuffix(name, "-raw")
			r := sentrySend(t, s.srv.URL, s.envPath(), enc(envelope(`{"event_id":"`+id+`"}`, eventItem(sentryEvent(id)))),
				append(s.auth(), "Content-Encoding", header)...)
			if r.Status != http.StatusOK || string(r.Raw) != `{"id":"`+id+`"}`+"\n" {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			if n := s.count(t, `SELECT count(*) FROM feed_events WHERE event_id_key = ?`, dashed(id)); n != 1 {
				t.Fatalf("%d stored", n)
			}
		})
	}
	t.Run("broken gzip is a 400 after the key", func(t *testing.T) {
		r := sentrySend(t, s.srv.URL, s.envPath(), []byte("not gzip at all"), append(s.auth(), "Content-Encoding", "gzip")...)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), "cannot be decoded as gzip") {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		if r := sentrySend(t, s.srv.URL, s.envPath(), []byte("not gzip at all"), "Content-Encoding", "gzip"); r.Status != 401 {
			t.Fatalf("without a key: %d", r.Status)
		}
	})
	t.Run("unknown encoding", func(t *testing.T) {
		r := sentrySend(t, s.srv.URL, s.envPath(), []byte("x"), append(s.auth(), "Content-Encoding", "compress")...)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), `not one of gzip, deflate, br, zstd`) {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
	})
}

// A compression bomb — a couple of hundred KiB of gzip (and zstd) that
// inflate to 200 MiB — is a 413 before the key is looked at, and the
// server never holds more than the decompressed limit of it. Not parallel
// on purpose: it measures the process's allocations, which parallel tests
// would add to; the parallel tests wait until it is done.
func TestSentryCompressionBomb(t *testing.T) {
	s := newSentryFix(t, setup(t))
	zeros := make([]byte, 200<<20)
	bombs := map[string][]byte{"gzip": gz(zeros)}
	enc, _ := zstd.NewWriter(nil)
	bombs["zstd"] = enc.EncodeAll(zeros, nil)
	zeros = nil
	for name, bomb := range bombs {
		if len(bomb) > 256<<10 {
			t.Fatalf("%s bomb of %d bytes is above the body limit", name, len(bomb))
		}
		for _, key := range [][]string{s.auth(), nil} {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			r := sentrySend(t, s.srv.URL, s.envPath(), bomb, append(key, "Content-Encoding", name)...)
			runtime.ReadMemStats(&after)
			if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Raw), "payload_too_large: the request body is above 1048576 bytes decompressed") {
				t.Fatalf("%s bomb: %d %s", name, r.Status, r.Raw)
			}
			// The bound (1 MiB) and, for zstd, its 8 MiB window; never
			// the 200 MiB the bomb inflates to.
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
				t.Fatalf("%s bomb: one request allocated %d MiB", name, grown>>20)
			}
		}
	}
	// The body as sent is bounded too.
	big := bytes.Repeat([]byte("x"), 256<<10+1)
	if r := sentrySend(t, s.srv.URL, s.envPath(), big, s.auth()...); r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Raw), "as sent") {
		t.Fatalf("big body: %d %s", r.Status, r.Raw)
	}
}

// The seed's order — 413 → 401 → 403 → 429 → 400 — and the one bare 401
// for every bad key, a key of another project's number included.
func TestSentryCheckOrder(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.FeedRatePerMin = 1000
	b := setupWith(t, opts)
	s := newSentryFix(t, b)
	// A second project, with its own number.
	st, op := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("other"))
	if st != http.StatusCreated {
		t.Fatal(st)
	}
	otherNumber := int64(op["number"].(float64))
	if otherNumber == s.number || s.number <= 0 || otherNumber <= 0 {
		t.Fatalf("numbers %d %d", s.number, otherNumber)
	}
	// A revoked connection.
	st, c := b.api(t, b.owner.Token, "POST", "/api/private/projects/"+s.projectID+"/connections", map[string]any{"name": "old"})
	if st != http.StatusCreated {
		t.Fatal(st)
	}
	revoked := c["token"].(string)
	if st, _ := b.api(t, b.owner.Token, "DELETE", "/api/private/connections/"+c["connection_id"].(string), nil); st != http.StatusNoContent {
		t.Fatal(st)
	}
	id := hexID()
	good := envelope(`{"event_id":"`+id+`"}`, eventItem(sentryEvent(id)))
	num := strconv.FormatInt(s.number, 10)
	auth := func(k string) []string {
		return []string{"X-Sentry-Auth", "Sentry sentry_key=" + k + ", sentry_version=7"}
	}
	wrongSecret := s.key[:len(s.key)-1] + map[bool]string{true: "A", false: "B"}[s.key[len(s.key)-1] != 'A']

	bare := []struct {
		name, path string
		hdr        []string
		body       []byte
	}{
		{"no key", s.envPath(), nil, good},
		{"unknown key", s.envPath(), auth("anv_srv_0123456789abcdef0123456789abcdef"), good},
		{"malformed key", s.envPath(), auth("nonsense"), good},
		{"wrong secret", s.envPath(), auth(wrongSecret), good},
		{"revoked connection", s.envPath(), auth(revoked), good},
		{"another project's number", "/api/" + strconv.FormatInt(otherNumber, 10) + "/envelope/", s.auth(), good},
		{"a number that is no project", "/api/999999999/envelope/", s.auth(), good},
		{"a number that is not a number", "/api/shop/envelope/", s.auth(), good},
		{"store with another number", "/api/" + strconv.FormatInt(otherNumber, 10) + "/store/", s.auth(), sentryEvent(id)},
		{"an Origin with a bad key is 401, not 403", s.envPath(), append(auth("nonsense"), "Origin", "https://evil.example"), good},
		{"a bad key in X-Sentry-Auth wins over a good one in the query", s.envPath() + "?sentry_key=" + s.key, auth("nonsense"), good},
		{"a bad body with a bad key is 401", s.envPath(), auth("nonsense"), []byte("garbage")},
	}
	for _, tc := range bare {
		r := sentrySend(t, s.srv.URL, tc.path, tc.body, tc.hdr...)
		if r.Status != http.StatusUnauthorized || len(r.Raw) != 0 || r.Header.Get("WWW-Authenticate") != `Bearer realm="anvil-feed"` {
			t.Fatalf("%s: %d %q %v", tc.name, r.Status, r.Raw, r.Header)
		}
	}

	// Every source of a key, in turn.
	sources := []struct {
		name, path string
		hdr        []string
		body       func(id string) []byte
	}{
		{"X-Sentry-Auth", s.envPath(), s.auth(), nil},
		{"query sentry_key", s.envPath() + "?sentry_key=" + s.key + "&sentry_version=7", nil, nil},
		{"envelope header dsn", "/api/" + num + "/envelope", nil, func(id string) []byte {
			return envelope(`{"event_id":"`+id+`","dsn":"`+s.dsn+`"}`, eventItem(sentryEvent(id)))
		}},
		{"Authorization Bearer", "/api/" + num + "/envelope/", []string{"Authorization", "Bearer " + s.key}, nil},
		{"store, no slash", "/api/" + num + "/store", s.auth(), func(id string) []byte { return sentryEvent(id) }},
		{"store", "/api/" + num + "/store/", s.auth(), func(id string) []byte { return sentryEvent(id) }},
	}
	for _, tc := range sources {
		id := hexID()
		body := envelope(`{"event_id":"`+id+`"}`, eventItem(sentryEvent(id)))
		if tc.body != nil {
			body = tc.body(id)
		}
		if r := sentrySend(t, s.srv.URL, tc.path, body, tc.hdr...); r.Status != http.StatusOK || string(r.Raw) != `{"id":"`+id+`"}`+"\n" {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
	}

	// A live key with an Origin: 403, before the rate limit and the parse.
	if r := sentrySend(t, s.srv.URL, s.envPath(), []byte("garbage"), append(s.auth(), "Origin", "https://shop.example")...); r.Status != http.StatusForbidden || !strings.Contains(string(r.Raw), "origin_refused") {
		t.Fatalf("origin: %d %s", r.Status, r.Raw)
	}
	// A live key, a bad envelope: 400.
	if r := sentrySend(t, s.srv.URL, s.envPath(), []byte("garbage"), s.auth()...); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Raw), "invalid envelope") {
		t.Fatalf("parse: %d %s", r.Status, r.Raw)
	}
	// The rate limit: the native door and the Sentry door share one budget.
	for i := 0; ; i++ {
		var r feedResp
		if i%2 == 0 {
			r = s.send(t, single, s.key, ev(newID()))
		} else {
			r = sentrySend(t, s.srv.URL, s.envPath(), []byte("garbage"), s.auth()...)
		}
		if r.Status == http.StatusTooManyRequests {
			if i != 1000-7 { // seven requests of this connection passed the limiter above
				t.Fatalf("429 after %d requests", i)
			}
			break
		}
		if i > 1000 {
			t.Fatal("no 429")
		}
	}
	r := sentrySend(t, s.srv.URL, s.envPath(), []byte("garbage"), s.auth()...)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "60" || r.Header.Get("X-Sentry-Rate-Limits") != "60::organization" {
		t.Fatalf("429: %d %v", r.Status, r.Header)
	}
	// Over the limit, a bad key is still the bare 401 and an Origin a 403.
	if r := sentrySend(t, s.srv.URL, s.envPath(), good, auth("nonsense")...); r.Status != http.StatusUnauthorized {
		t.Fatalf("limited, bad key: %d", r.Status)
	}
	if r := sentrySend(t, s.srv.URL, s.envPath(), good, append(s.auth(), "Origin", "x")...); r.Status != http.StatusForbidden {
		t.Fatalf("limited, origin: %d", r.Status)
	}
}

// The answers: 200 with the id; a refused event 400 with the reason code;
// an envelope without an event 200; a resent event counted once.
func TestSentryAnswers(t *testing.T) {
	t.Parallel()
	s := newSentryFix(t, setup(t))
	path := s.envPath()
	id := hexID()
	env := envelope(`{"event_id":"`+id+`"}`, eventItem(sentryEvent(id)))
	for i := 0; i < 2; i++ {
		if r := sentrySend(t, s.srv.URL, path, env, s.auth()...); r.Status != 200 || string(r.Raw) != `{"id":"`+id+`"}`+"\n" {
			t.Fatalf("delivery %d: %d %s", i, r.Status, r.Raw)
		}
	}
	if n := s.count(t, `SELECT event_count FROM incidents WHERE project_id = ? AND exception_type = 'ZeroDivisionError'`, s.projectID); n != 1 {
		t.Fatalf("event_count %d after a resend", n)
	}
	p := s.payload(t, dashed(id))
	if strings.Contains(fmt.Sprint(p), "hunter2") || p["environment"] != "production" || p["title"] != "ZeroDivisionError: division by zero" {
		t.Fatalf("stored %v", p)
	}
	// A dashed id is the same event.
	if r := sentrySend(t, s.srv.URL, "/api/"+strconv.FormatInt(s.number, 10)+"/store/", sentryEvent(dashed(id)), s.auth()...); r.Status != 200 || string(r.Raw) != `{"id":"`+id+`"}`+"\n" {
		t.Fatalf("dashed: %d %s", r.Status, r.Raw)
	}

	cases := []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"no binding", envelope(`{}`, eventItem(sentryEvent(hexID(), func(m map[string]any) { m["environment"] = "staging" }))), 400,
			`{"detail":"no_binding: no binding for environment 'staging'`},
		{"binding off", envelope(`{}`, eventItem(sentryEvent(hexID(), func(m map[string]any) { m["environment"] = "quiet" }))), 400, `{"detail":"binding_disabled: `},
		{"environment that is no label", envelope(`{}`, eventItem(sentryEvent(hexID(), func(m map[string]any) { m["environment"] = "my env" }))), 400, `{"detail":"schema_violation: `},
		{"bad event id", envelope(`{}`, eventItem(sentryEvent("nope"))), 400, `{"detail":"schema_violation: event_id must be 32 hexadecimal digits or a UUID`},
		{"event not an object", envelope(`{}`, `{"type":"event"}`+"\n[1]"), 400, `{"detail":"schema_violation: an event must be a JSON object"}`},
		{"only a session and a client report", envelope(`{}`, `{"type":"session"}`+"\n{}", `{"type":"client_report"}`+"\n{}", `{"type":"transaction","length":2}`+"\n{}"), 200, `{}`},
		{"empty envelope", nil, 400, `{"detail":"bad_request: invalid envelope: the header line is empty"}`},
		{"an item longer than announced", envelope(`{}`, `{"type":"event","length":2}`+"\n{}}"), 400, `longer than its announced length`},
	}
	for _, tc := range cases {
		r := sentrySend(t, s.srv.URL, path, tc.body, s.auth()...)
		if r.Status != tc.status || !strings.Contains(string(r.Raw), tc.want) {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
	}
	if r := sentrySend(t, s.srv.URL, "/api/"+strconv.FormatInt(s.number, 10)+"/store/", []byte(`{"event_id":`), s.auth()...); r.Status != 400 || !strings.Contains(string(r.Raw), "schema_violation: the event is not valid JSON") {
		t.Fatalf("store, broken JSON: %d %s", r.Status, r.Raw)
	}
}

// Without the feed armed the door does not exist.
func TestSentryNotArmed(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.FeedArmed = false
	b := setupWith(t, opts)
	for _, p := range []string{"/api/1/envelope/", "/api/1/envelope", "/api/1/store/", "/api/1/store"} {
		if r := sentrySend(t, b.srv.URL, p, []byte("{}"), "X-Sentry-Auth", "Sentry sentry_key=x"); r.Status != http.StatusNotFound {
			t.Fatalf("%s: %d", p, r.Status)
		}
	}
}

// The DSN follows ANVIL_PUBLIC_URL's scheme, host and path prefix.
func TestSentryDSNWithPathPrefix(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.PublicURL = "https://example.com/anvil"
	b := setupWith(t, opts)
	s := newSentryFix(t, b)
	want := "https://" + s.key + "@example.com/anvil/" + strconv.FormatInt(s.number, 10)
	if s.dsn != want {
		t.Fatalf("dsn %q, want %q", s.dsn, want)
	}
	// Project numbers are never reused: a project created after another was
	// deleted gets a new one.
	st, p := b.api(t, b.owner.Token, "POST", "/api/private/projects", validProject("later"))
	if st != http.StatusCreated || int64(p["number"].(float64)) <= s.number {
		t.Fatalf("%d %v", st, p)
	}
}

// Outcomes of both doors on the Feed page: accepted, refused by reason
// code, the last refusal's message.
func TestSentryOutcomesOnFeedPage(t *testing.T) {
	t.Parallel()
	s := newSentryFix(t, setup(t))
	for i := 0; i < 2; i++ {
		id := hexID()
		if r := sentrySend(t, s.srv.URL, s.envPath(), envelope(`{}`, eventItem(sentryEvent(id))), s.auth()...); r.Status != 200 {
			t.Fatal(r.Status)
		}
	}
	if r := sentrySend(t, s.srv.URL, s.envPath(), envelope(`{}`, eventItem(sentryEvent(hexID(), func(m map[string]any) { m["environment"] = "staging" }))), s.auth()...); r.Status != 400 {
		t.Fatal(r.Status)
	}
	// The native door counts too, on its own connection.
	if r := s.send(t, batch, s.token, []any{ev(newID()), ev(newID(), func(m map[string]any) { m["environment"] = "quiet" })}); r.Status != 202 {
		t.Fatal(r.Status)
	}
	br := s.browser(t)
	br.login("owner@acme.test", testPassword)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, page := br.get("/projects/" + s.projectID + "/feed")
		sentryRow := rowOf(page, "sentry-conn")
		nativeRow := rowOf(page, "shop-api")
		if strings.Contains(sentryRow, ">2 accepted<") && strings.Contains(sentryRow, `data-reason="no_binding">1 no_binding<`) &&
			strings.Contains(sentryRow, "last refusal: no_binding: no binding for environment &#39;staging&#39;") &&
			strings.Contains(nativeRow, ">1 accepted<") && strings.Contains(nativeRow, `data-reason="binding_disabled">1 binding_disabled<`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outcomes not on the page:\n%s\n---\n%s", sentryRow, nativeRow)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rowOf is the connection row of the page whose name is name.
func rowOf(page, name string) string {
	for _, row := range strings.Split(page, `data-testid="connection-row"`)[1:] {
		end := strings.Index(row, "</tr>")
		if end < 0 {
			continue
		}
		if strings.Contains(row[:end], name) {
			return row[:end]
		}
	}
	return ""
}

// The Feed page shows a new connection's DSN and the three snippets.
func TestSentrySnippetsOnFeedPage(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	br := f.browser(t)
	br.login("owner@acme.test", testPassword)
	tok := br.csrf("/projects/" + f.projectID + "/feed")
	res, page := br.post("/projects/"+f.projectID+"/feed/connections", url.Values{"_csrf": {tok}, "name": {"py-service"}})
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusSeeOther {
		t.Fatalf("%d", res.StatusCode)
	}
	if res.StatusCode == http.StatusSeeOther { // the flash of a later page
		_, page = br.get(res.Header.Get("Location"))
	}
	m := regexpDSN.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no DSN on the page")
	}
	for _, want := range []string{`data-testid="sentry-go"`, `data-testid="sentry-python"`, `data-testid="sentry-node"`,
		"sentry_sdk.init(\n    dsn=&#34;" + m[0] + "&#34;", "Sentry.init({\n  dsn: &#34;" + m[0]} {
		if !strings.Contains(page, want) {
			t.Fatalf("page lacks %q", want)
		}
	}
}

var regexpDSN = regexp.MustCompile(`http://anv_srv_[0-9A-Za-z]{32}@anvil\.test/[0-9]+`)

// FuzzSentryIngest: whatever the body and its encoding, the door answers
// exactly once, never with a 5xx, and every answer but the bare 401 is JSON.
func FuzzSentryIngest(f *testing.F) {
	opts := testOptions()
	opts.FeedRatePerMin = 1 << 30 // the fuzzer sends far more than 600 a minute
	s := newSentryFix(f, setupWith(f, opts))
	id := hexID()
	encodings := []string{"", "gzip", "deflate", "br", "zstd", "identity", "x-gzip", "compress"}
	f.Add(envelope(`{"event_id":"`+id+`"}`, eventItem(sentryEvent(id))), byte(0))
	f.Add(gz(envelope(`{}`, eventItem(sentryEvent(id)))), byte(1))
	f.Add(sentryEvent(id, func(m map[string]any) { m["tags"] = []any{[]any{"a", 1}}; m["environment"] = "quiet" }), byte(0))
	f.Add([]byte("{}\n{\"type\":\"event\",\"length\":99}\n{}"), byte(0))
	f.Add([]byte("{}\n{\"type\":\"session\"}\n{}"), byte(3))
	f.Add([]byte("\x28\xb5\x2f\xfd"), byte(4))
	f.Fuzz(func(t *testing.T, body []byte, enc byte) {
		encoding := encodings[int(enc)%len(encodings)]
		for _, path := range []string{s.envPath(), "/api/" + strconv.FormatInt(s.number, 10) + "/store/"} {
			r := sentrySend(t, s.srv.URL, path, body, append(s.auth(), "Content-Encoding", encoding)...)
			switch r.Status {
			case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
				if !json.Valid(r.Raw) {
					t.Fatalf("%s: %d answered with a body that is not JSON: %q", path, r.Status, r.Raw)
				}
			default:
				t.Fatalf("%s: %d %s", path, r.Status, r.Raw)
			}
		}
	})
}

// TestSentryEventIDFromEnvelopeHeader: an event item without its own
// event_id takes the envelope header's, as Sentry's ingestion does; with
// neither (or on /store/, which has no header) it is still refused
// schema_violation.
func TestSentryEventIDFromEnvelopeHeader(t *testing.T) {
	t.Parallel()
	s := newSentryFix(t, setup(t))
	noID := func(m map[string]any) { delete(m, "event_id") }
	id := hexID()
	r := sentrySend(t, s.srv.URL, s.envPath(), envelope(`{"event_id":"`+id+`"}`, eventItem(sentryEvent("", noID))), s.auth()...)
	if r.Status != 200 || string(r.Raw) != `{"id":"`+id+`"}`+"\n" {
		t.Fatalf("event without event_id, header with one: %d %s", r.Status, r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM feed_events WHERE event_id_key = ?`, dashed(id)); n != 1 {
		t.Fatalf("stored %d events under the header's id, want 1", n)
	}
	// The event's own id wins over the header's.
	own, other := hexID(), hexID()
	if r := sentrySend(t, s.srv.URL, s.envPath(), envelope(`{"event_id":"`+other+`"}`, eventItem(sentryEvent(own))), s.auth()...); r.Status != 200 || string(r.Raw) != `{"id":"`+own+`"}`+"\n" {
		t.Fatalf("event with its own id: %d %s", r.Status, r.Raw)
	}
	for _, tc := range []struct {
		name, path string
		body       []byte
	}{
		{"no id anywhere", s.envPath(), envelope(`{}`, eventItem(sentryEvent("", noID)))},
		{"store has no header", "/api/" + strconv.FormatInt(s.number, 10) + "/store/", sentryEvent("", noID)},
	} {
		r := sentrySend(t, s.srv.URL, tc.path, tc.body, s.auth()...)
		if r.Status != 400 || !strings.Contains(string(r.Raw), "schema_violation: event_id is required") {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
	}
}

// One event through both doors: the Sentry door's 32 hex digits and the
// native door's dashed UUID, in upper case, are one dedupe key (the key is
// the event id as a uuid, docs/feed.md "The write path and its costs"), so
// the resend is accepted and neither stored nor counted again.
func TestSentryAndNativeDoorShareTheDedupeKey(t *testing.T) {
	t.Parallel()
	s := newSentryFix(t, setup(t))
	id := hexID()
	if r := sentrySend(t, s.srv.URL, s.envPath(), envelope(`{}`, eventItem(sentryEvent(id))), s.auth()...); r.Status != 200 {
		t.Fatal(r.Status)
	}
	native := strings.ToUpper(dashed(id))
	if r := s.send(t, batch, s.token, []any{ev(native)}); r.Status != 202 || len(r.Accept) != 1 || r.Accept[0] != native {
		t.Fatalf("got %s", r.Raw)
	}
	if n := s.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, s.projectID); n != 1 {
		t.Fatalf("%d stored deliveries of one event", n)
	}
	if n := s.count(t, `SELECT count(*) FROM feed_events WHERE event_id_key = ?`, dashed(id)); n != 1 {
		t.Fatalf("%d rows under the key %s", n, dashed(id))
	}
}
