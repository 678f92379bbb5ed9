package sentry

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"anvil/domain/event"
)

var now = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

func defaults() Defaults { return Defaults{ConnectionName: "shop-conn", Now: now} }

// translated translates raw and validates the result as the feed will.
func translated(t *testing.T, raw string) (Translated, event.Event) {
	t.Helper()
	tr, p := Translate([]byte(raw), defaults())
	if p != nil {
		t.Fatalf("refused: %v", p)
	}
	ev, rej := event.Validate(tr.Raw)
	if rej != nil {
		t.Fatalf("the feed refuses the translation: %+v\n%s", rej, tr.Raw)
	}
	return tr, ev
}

func TestTranslateSentryGoException(t *testing.T) {
	t.Parallel()
	// The shape sentry-go sends: exception as a bare array (cause first),
	// breadcrumbs as a bare array, tags as an object, Unix-less RFC 3339.
	raw := `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","timestamp":"2026-12-03T09:30:00.123456Z","level":"error",
	"platform":"go","server_name":"pod-7","release":"shop@1.2.3","environment":"Staging",
	"sdk":{"name":"sentry.go","version":"0.46.2"},"contexts":{"runtime":{"name":"go","version":"go1.26.8"},"response":{"status_code":500}},
	"exception":[{"type":"*errors.errorString","value":"root cause"},
	  {"type":"*fmt.wrapError","value":"charge: cart is null","module":"shop",
	   "stacktrace":{"frames":[
	     {"function":"main","module":"main","filename":"main.go","abs_path":"/src/main.go","lineno":10,"in_app":true},
	     {"function":"charge","module":"shop","abs_path":"/src/shop/checkout.go","lineno":88,"context_line":"sum := cart.Total()","in_app":true,
	      "vars":{"password":"hunter2","token":"sk_live_abc"}}]}}],
	"request":{"method":"POST","url":"https://shop.example/api/checkout","query_string":"a=1","headers":{"Authorization":"Bearer abc"}},
	"user":{"id":4711,"ip_address":"10.1.2.3","email":"a@b.c"},
	"breadcrumbs":[{"category":"cart","message":"add sku=A1"},{"message":"checkout.start"},{"type":"http"},{"data":{}}],
	"tags":{"tier":"gold","n":7}}`
	tr, ev := translated(t, raw)
	if tr.EventID != "9ec79c33-ec99-42ab-8353-589fcb2e04dc" || tr.HexID != "9ec79c33ec9942ab8353589fcb2e04dc" {
		t.Fatalf("ids %q %q", tr.EventID, tr.HexID)
	}
	if strings.Contains(string(tr.Raw), "hunter2") || strings.Contains(string(tr.Raw), "sk_live") || strings.Contains(string(tr.Raw), "10.1.2.3") {
		t.Fatalf("frame vars or the client address leaked into %s", tr.Raw)
	}
	want := event.Event{SchemaVersion: "1.0", EventID: "9ec79c33-ec99-42ab-8353-589fcb2e04dc",
		Timestamp: time.Date(2026, 12, 3, 9, 30, 0, 123456000, time.UTC), Title: "*fmt.wrapError: charge: cart is null",
		Level: "error", Environment: "staging", Service: "pod-7", Language: "go",
		SDK:     event.SDK{Name: "sentry.go", Version: "0.46.2", Runtime: "go go1.26.8"},
		Release: "shop@1.2.3",
		Exception: &event.Exception{Type: "*fmt.wrapError", Message: "charge: cart is null", Stacktrace: []event.Frame{
			{File: "/src/shop/checkout.go", Line: 88, Function: "charge", ContextCode: "sum := cart.Total()", InApp: true, AbsPath: "/src/shop/checkout.go"},
			{File: "main.go", Line: 10, Function: "main", InApp: true, AbsPath: "/src/main.go"}}},
		Request:     &event.Request{Method: "POST", URL: "https://shop.example/api/checkout", StatusCode: 500},
		User:        event.User{ID: "4711"},
		Breadcrumbs: []string{"cart: add sku=A1", "checkout.start", "http"},
		Tags:        map[string]string{"tier": "gold", "n": "7"},
	}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("got  %+v\nwant %+v", ev, want)
	}
}

func TestTranslatePythonShapes(t *testing.T) {
	t.Parallel()
	// sentry-python: exception.values, breadcrumbs.values, tags as pairs,
	// a dashed id, Unix seconds, a timestamp-less zone, a service tag.
	raw := `{"event_id":"9EC79C33-EC99-42AB-8353-589FCB2E04DC","timestamp":1764754200.5,"level":"critical","platform":"python",
	"server_name":"host","tags":[["service","billing"],["tier","gold"],["bad"]],
	"exception":{"values":[{"type":"ZeroDivisionError","value":"division by zero","stacktrace":{"frames":[{"filename":"app.py","lineno":3,"function":"f"}]}}]},
	"breadcrumbs":{"values":[{"category":"query","message":"SELECT 1"}]},"sdk":{"name":"sentry.python","version":"2.0.0"}}`
	tr, ev := translated(t, raw)
	if tr.EventID != "9ec79c33-ec99-42ab-8353-589fcb2e04dc" || tr.HexID != "9ec79c33ec9942ab8353589fcb2e04dc" {
		t.Fatalf("ids %q %q", tr.EventID, tr.HexID)
	}
	if ev.Level != "fatal" || ev.Service != "billing" || ev.Environment != "production" || ev.Title != "ZeroDivisionError: division by zero" {
		t.Fatalf("%+v", ev)
	}
	if !ev.Timestamp.Equal(time.Unix(1764754200, 5e8)) {
		t.Fatalf("timestamp %v", ev.Timestamp)
	}
	if ev.Tags["tier"] != "gold" || len(ev.Tags) != 2 || ev.Breadcrumbs[0] != "query: SELECT 1" {
		t.Fatalf("tags %v breadcrumbs %v", ev.Tags, ev.Breadcrumbs)
	}
	if ev.Exception.Stacktrace[0].InApp {
		t.Fatal("in_app defaults to false")
	}
}

func TestTranslateMessages(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, raw, typ, title, service string
	}{
		{"capture_message", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","message":"disk almost full","level":"warning"}`, "Message", "disk almost full", "shop-conn"},
		{"logging integration", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","logger":"app.jobs","logentry":{"message":"job %s failed","params":["a"],"formatted":"job a failed"}}`, "app.jobs", "job a failed", "shop-conn"},
		{"logentry without formatted", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","logentry":{"message":"plain"},"server_name":"h1"}`, "Message", "plain", "h1"},
		{"message as an object", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","message":{"formatted":"old style"}}`, "Message", "old style", "shop-conn"},
		{"nothing to say", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc"}`, "Message", "Message", "shop-conn"},
		{"exception without a type", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","exception":{"values":[{"value":"boom"}]}}`, "Error", "Error: boom", "shop-conn"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, ev := translated(t, tc.raw)
			if ev.Exception == nil || ev.Exception.Type != tc.typ || ev.Title != tc.title || ev.Service != tc.service {
				t.Fatalf("%+v %+v", ev, ev.Exception)
			}
			if !ev.Timestamp.Equal(now) || ev.Level != "error" && tc.name != "capture_message" || ev.SDK.Name != "sentry" {
				t.Fatalf("defaults: %+v", ev)
			}
		})
	}
}

func TestTranslateRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, raw, msg string }{
		{"not an object", `[1]`, "must be a JSON object"},
		{"not JSON", `{"event_id":`, "not valid JSON"},
		{"no event_id", `{"message":"x"}`, "event_id is required"},
		{"numeric event_id", `{"event_id":42}`, "must be a string"},
		{"short event_id", `{"event_id":"abc"}`, "32 hexadecimal digits"},
		{"non-hex event_id", `{"event_id":"zzc79c33ec9942ab8353589fcb2e04dc"}`, "32 hexadecimal digits"},
		{"misplaced dashes", `{"event_id":"9ec79c33ec99-42ab-8353-589f-cb2e04dc"}`, "32 hexadecimal digits"},
		{"bad timestamp", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","timestamp":"yesterday"}`, "RFC 3339"},
		{"huge timestamp", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","timestamp":1e300}`, "out of range"},
		{"bad exception", `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","exception":"boom"}`, "exception must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, p := Translate([]byte(tc.raw), defaults())
			if p == nil || p.ReasonCode != event.SchemaViolation || !strings.Contains(p.Message, tc.msg) {
				t.Fatalf("%v, want %q", p, tc.msg)
			}
		})
	}
}

// A secret in a frame's context line or a message is scrubbed by the
// feed's own scrubber, exactly as in a native event.
func TestTranslateThenScrub(t *testing.T) {
	t.Parallel()
	raw := `{"event_id":"9ec79c33ec9942ab8353589fcb2e04dc","exception":[{"type":"E","value":"Authorization: Bearer abc.def.ghi",
	"stacktrace":{"frames":[{"filename":"a.go","context_line":"password = \"hunter2\""}]}}]}`
	_, ev := translated(t, raw)
	if err := event.Scrub(&ev); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(ev)
	if strings.Contains(string(out), "abc.def.ghi") || strings.Contains(string(out), "hunter2") {
		t.Fatalf("not scrubbed: %s", out)
	}
}

// An event without its own event_id takes the envelope header's; its own id
// wins over the header's; a bad header id is refused like a bad own id.
func TestTranslateEventIDFromHeader(t *testing.T) {
	t.Parallel()
	d := defaults()
	d.EventID = "9ec79c33ec9942ab8353589fcb2e04dc"
	for _, raw := range []string{`{"message":"x"}`, `{"message":"x","event_id":null}`} {
		tr, p := Translate([]byte(raw), d)
		if p != nil || tr.HexID != d.EventID || tr.EventID != "9ec79c33-ec99-42ab-8353-589fcb2e04dc" {
			t.Fatalf("%s: %+v %v", raw, tr, p)
		}
	}
	if tr, p := Translate([]byte(`{"message":"x","event_id":"0123456789abcdef0123456789abcdef"}`), d); p != nil || tr.HexID != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("own id: %+v %v", tr, p)
	}
	d.EventID = "nope"
	if _, p := Translate([]byte(`{"message":"x"}`), d); p == nil || !strings.Contains(p.Message, "32 hexadecimal digits") {
		t.Fatalf("bad header id: %v", p)
	}
}

// What @sentry/browser 11 sends: no contexts.browser, the User-Agent in
// request.headers, frames with abs_path and colno, debug_meta from
// sentry-cli's injected debug ids. The feed keeps browser, OS, frames'
// abs_path/colno/lineno exactly and debug_meta.
func TestTranslateBrowserSDK(t *testing.T) {
	t.Parallel()
	raw := `{"event_id":"5a2c1f0e3b4d4c6e8f9a0b1c2d3e4f50","timestamp":1764754200.5,"platform":"javascript","level":"error",
	"environment":"production","release":"shop-web@2.0.0","sdk":{"name":"sentry.javascript.browser","version":"11.12.0"},
	"exception":{"values":[{"type":"TypeError","value":"cart is undefined","mechanism":{"type":"onerror","handled":false},
	  "stacktrace":{"frames":[
	    {"filename":"https://shop.example/assets/app.min.js","abs_path":"https://shop.example/assets/app.min.js","function":"?","lineno":1,"colno":9,"in_app":true},
	    {"filename":"https://shop.example/assets/app.min.js","abs_path":"https://shop.example/assets/app.min.js","function":"r.checkout","lineno":1,"colno":2345,"in_app":true}]}}]},
	"request":{"url":"https://shop.example/cart","headers":{"User-Agent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15","Referer":"https://shop.example/"}},
	"debug_meta":{"images":[{"type":"sourcemap","code_file":"https://shop.example/assets/app.min.js","debug_id":"c941d8a4-3f59-4b3c-9c87-5d8d8a3f6f1e"}]},
	"user":{"ip_address":"{{auto}}"}}`
	_, ev := translated(t, raw)
	if ev.Browser == nil || *ev.Browser != (event.Client{Name: "Safari", Version: "18.1"}) || ev.OS == nil || *ev.OS != (event.Client{Name: "macOS", Version: "10.15.7"}) {
		t.Fatalf("browser %+v os %+v", ev.Browser, ev.OS)
	}
	f := ev.Exception.Stacktrace[0]
	if f.AbsPath != "https://shop.example/assets/app.min.js" || f.Colno != 2345 || f.Line != 1 || f.Function != "r.checkout" {
		t.Fatalf("crash-site frame %+v", f)
	}
	if ev.DebugMeta == nil || len(ev.DebugMeta.Images) != 1 || ev.DebugMeta.Images[0].DebugID != "c941d8a4-3f59-4b3c-9c87-5d8d8a3f6f1e" {
		t.Fatalf("debug_meta %+v", ev.DebugMeta)
	}
	if ev.Title != "TypeError: cart is undefined" || ev.Environment != "production" || ev.Release != "shop-web@2.0.0" {
		t.Fatalf("event %+v", ev)
	}
	// contexts.browser and contexts.os, when sent, win.
	_, ev = translated(t, `{"event_id":"5a2c1f0e3b4d4c6e8f9a0b1c2d3e4f51","message":"x","contexts":{"browser":{"name":"Firefox","version":"133.0"},"os":{"name":"Windows","version":"11"}},
	"request":{"headers":{"User-Agent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Version/18.1 Safari/605.1.15"}}}`)
	if *ev.Browser != (event.Client{Name: "Firefox", Version: "133.0"}) || *ev.OS != (event.Client{Name: "Windows", Version: "11"}) {
		t.Fatalf("contexts: browser %+v os %+v", ev.Browser, ev.OS)
	}
}
