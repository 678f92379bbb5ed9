package event

import (
	"encoding/json"
	"fmt"
	"testing"
)

// BenchmarkValidateScrub measures the per-event cost of this package on the
// seed's curl example: Validate, Scrub and Fingerprint, as the ingest runs
// them for every event.
func BenchmarkValidateScrub(b *testing.B) {
	raw := json.RawMessage(curlExample)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		ev, rej := Validate(raw)
		if rej != nil {
			b.Fatal(rej.Message)
		}
		if err := Scrub(&ev); err != nil {
			b.Fatal(err)
		}
		_ = Fingerprint(&ev)
	}
}

// BenchmarkValidateScrubLarge is a heavy but legal event: 200 frames, 150
// breadcrumbs, a nested enrichment and secrets to mask.
func BenchmarkValidateScrubLarge(b *testing.B) {
	raw := example(b, func(m map[string]any) {
		frames := make([]any, 200)
		for i := range frames {
			frames[i] = map[string]any{"file": fmt.Sprintf("pkg/file%d.go", i), "line": i, "function": fmt.Sprintf("fn%d", i),
				"context_code": "x := compute(a, b) // token=abc", "in_app": i%3 == 0}
		}
		obj(m, "exception")["stacktrace"] = frames
		obj(m, "exception")["message"] = "declined card 4111 1111 1111 1111 for Bearer abc.def"
		crumbs := make([]any, 150)
		for i := range crumbs {
			crumbs[i] = fmt.Sprintf("GET /api/items/%d?page=2 -> 200", i)
		}
		m["breadcrumbs"] = crumbs
		m["enrichment"] = map[string]any{"headers": map[string]any{"Authorization": "Bearer x", "Accept": "json"},
			"env": []any{"PATH=/usr/bin", "DATABASE_URL=postgres://app:pw@db/shop"}}
	})
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		ev, rej := Validate(raw)
		if rej != nil {
			b.Fatal(rej.Message)
		}
		if err := Scrub(&ev); err != nil {
			b.Fatal(err)
		}
		_ = Fingerprint(&ev)
	}
}

func BenchmarkSplitBodyBatch50(b *testing.B) {
	body := []byte("[" + curlExample)
	for range 49 {
		body = append(body, ',')
		body = append(body, curlExample...)
	}
	body = append(body, ']')
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := SplitBody(body, false, 50); err != nil {
			b.Fatal(err)
		}
	}
}
