package event

import (
	"encoding/json"
	"fmt"
	"strings"
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
		judge(b, raw)
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
		judge(b, raw)
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

// BenchmarkPipelineBatch50 is the ingest's CPU work per request of make
// bench's load (a batch of 50 events with eight frames each), without the
// store: SplitBatch, then per event Validate, Scrub, Fingerprint and the
// stored form.
func BenchmarkPipelineBatch50(b *testing.B) {
	evs := make([]any, 50)
	for i := range evs {
		frames := make([]any, 8)
		for f := range frames {
			frames[f] = map[string]any{"file": fmt.Sprintf("src/shop/Service%d.java", f), "line": 10 + f, "function": fmt.Sprintf("call%d", i%10),
				"context_code": "var sum = cart.total();", "in_app": f < 4}
		}
		evs[i] = map[string]any{"schema_version": "1.0", "event_id": fmt.Sprintf("f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f%02d", i), "timestamp": "2026-09-16T10:11:12Z",
			"title": fmt.Sprintf("NullPointerException in CheckoutService (order %d)", i), "level": "error", "environment": "production",
			"service": "shop-api", "language": "java", "sdk": map[string]any{"name": "anvil-feed-java", "version": "0.1.0", "runtime": "jdk-25"},
			"exception": map[string]any{"type": fmt.Sprintf("java.lang.NullPointerException%d", i%10), "message": "Cannot invoke \"Cart.total()\" because \"cart\" is null; Authorization: Bearer abc.def.ghi",
				"stacktrace": frames},
			"release": "2026.9.3", "request": map[string]any{"method": "POST", "url": "https://shop.example/api/checkout?session=123", "status_code": 500},
			"user": map[string]any{"id": "u-4711"}, "breadcrumbs": []any{"cart.add sku=A1", "checkout.start"}, "tags": map[string]any{"tier": "gold"}}
	}
	body, err := json.Marshal(evs)
	if err != nil {
		b.Fatal(err)
	}
	benchPipeline(b, body)
}

// judge runs the per-event checks the ingest runs on raw: Validate, Scrub
// and Fingerprint.
func judge(b *testing.B, raw json.RawMessage) Event {
	batch := RawBatch([]json.RawMessage{raw})
	return judgeIn(b, &batch, 0)
}

// judgeIn is judge for element i of a batch.
func judgeIn(b *testing.B, batch *Batch, i int) Event {
	ev, rej := batch.Validate(i)
	if rej != nil {
		b.Fatal(rej.Message)
	}
	if err := Scrub(&ev); err != nil {
		b.Fatal(err)
	}
	_ = Fingerprint(&ev)
	return ev
}

// BenchmarkPipelineStorm50 is BenchmarkPipelineBatch50 for a request of
// feed/limit's storm: 50 of the README's events, bags included, each with
// an id of its own.
func BenchmarkPipelineStorm50(b *testing.B) {
	body := []byte("[")
	for i := range 50 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, strings.Replace(curlExample, "f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f30", fmt.Sprintf("f4b1a0c2-0f4a-4a1e-9d7a-2b6c5d8e1f%02d", i), 1)...)
	}
	body = append(body, ']')
	benchPipeline(b, body)
}

// benchPipeline is a request's CPU work on body without the store:
// SplitBatch, then per event Validate, Scrub, Fingerprint and the stored
// form.
func benchPipeline(b *testing.B, body []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	buf := make([]byte, 0, 4096)
	for b.Loop() {
		batch, err := SplitBatch(body, false, 50)
		if err != nil {
			b.Fatal(err)
		}
		for i := range batch.Len() {
			ev := judgeIn(b, &batch, i)
			if buf, err = AppendMarshal(buf[:0], &ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}
