package event

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// sameAsEncodingJSON fails when Marshal and encoding/json disagree on e:
// in bytes, or in whether and how they fail.
func sameAsEncodingJSON(t *testing.T, name string, e *Event) {
	t.Helper()
	want, wantErr := json.Marshal(e)
	got, err := Marshal(e)
	if (err != nil) != (wantErr != nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("%s: error %v, encoding/json %v", name, err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s:\n got %s\nwant %s", name, got, want)
	}
	// AppendMarshal keeps what it appends to.
	prefix := []byte("row:")
	got, err = AppendMarshal(prefix, e)
	if err == nil && !bytes.Equal(got, append([]byte("row:"), want...)) {
		t.Fatalf("%s: AppendMarshal\n got %s\nwant row:%s", name, got, want)
	}
}

func TestMarshalIsEncodingJSON(t *testing.T) {
	full := mustValidate(t, json.RawMessage(curlExample))
	full.User.IPHash = "abc"
	ts := time.Date(2026, 9, 16, 10, 11, 12, 123456789, time.FixedZone("", 2*3600+30*60))
	cases := map[string]Event{
		"the curl example":   full,
		"the zero event":     {},
		"required only":      {SchemaVersion: "1.0", EventID: exampleID, Timestamp: ts, Title: "t", Level: "error", Environment: "production", Service: "s", SDK: SDK{Name: "n"}},
		"empty objects kept": {Exception: &Exception{}, Request: &Request{}, User: User{IPHash: "h"}, Tags: map[string]string{}, Breadcrumbs: []string{}},
		"frames of every shape": {Exception: &Exception{Type: "E", Stacktrace: []Frame{{}, {InApp: true}, {Line: -3}, {File: "a", Function: "f", ContextCode: "x"}},
			FramesOmitted: 7}},
		"counters": {BreadcrumbsOmitted: 1, TagsOmitted: 2, Request: &Request{StatusCode: 599}},
		"escapes": {Title: "<script>&\"quoted\"\\ \b\f\n\r\t\x00\x1f\x7f", Service: "\u2028\u2029 é 日本 😀", Level: "bad \xff\xfe utf-8 \xe2\x82",
			Tags: map[string]string{"z": "1", "a<b": "&", "": ""}, Breadcrumbs: []string{"", "\u2028"}},
		"free-form maps": {Enrichment: map[string]any{"b": []any{1.5, nil, true, "<x>"}, "a": map[string]any{"k": "v"}},
			AgentContext: map[string]any{"repo": "shop/api"}},
		"decoded bags": {Enrichment: map[string]any{"n": json.Number("-2.5e+3"), "s": "<&>\u2028", "l": []any{nil, true, false, map[string]any{}},
			"z": map[string]any(nil), "y": []any(nil)}, AgentContext: map[string]any{"k": map[string]any{"b": "2", "a": json.Number("1")}}},
		"a number encoding/json refuses": {Enrichment: map[string]any{"n": json.Number("01")}},
		"a time encoding/json refuses":   {Timestamp: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"a map encoding/json refuses":    {Enrichment: map[string]any{"f": func() {}}},
	}
	for name, e := range cases {
		sameAsEncodingJSON(t, name, &e)
	}
}

// FuzzMarshal holds Marshal to encoding/json on every event Validate
// accepts, scrubbed as the ingest scrubs it.
func FuzzMarshal(f *testing.F) {
	f.Add([]byte(curlExample))
	f.Add([]byte(`{"event_id":"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30","timestamp":"2026-09-16T10:11:12.5+05:45","title":"<t>\u2028","level":"info","environment":"dev","service":"s\\","sdk":{"name":"n"},"exception":{"type":"x","stacktrace":[{},{"in_app":true}]},"user":{},"tags":{"b":"1","a":"2"},"enrichment":{"a":[1e400]}}`))
	f.Add([]byte(`{"event_id":"f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30","timestamp":"2026-09-16T10:11:12Z","title":"t","level":"error","environment":"production","service":"s","sdk":{"name":"n"},"browser":"Mozilla/5.0 (X11; Linux x86_64) Chrome/136.0.0.0 Safari/537.36","os":{"name":"<L>","version":1},"debug_meta":{"images":[{"type":"sourcemap","code_file":"https://x/a.js?token=abc","debug_id":"d"},{}]},"exception":{"type":"E","stacktrace":[{"abs_path":"https://x/a.js","colno":12,"line":1,"in_app":true}]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, rej := Validate(raw)
		if rej != nil {
			return
		}
		ev.User.IPHash = "hash"
		_ = Scrub(&ev)
		sameAsEncodingJSON(t, "fuzzed", &ev)
	})
}

func BenchmarkMarshal(b *testing.B) {
	e := mustValidate(b, json.RawMessage(curlExample))
	e.Enrichment, e.AgentContext = nil, nil // free-form maps go through encoding/json either way
	b.Run("event.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = Marshal(&e)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(&e)
		}
	})
}
