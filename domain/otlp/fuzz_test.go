package otlp_test

import (
	"encoding/json"
	"testing"
	"time"

	"anvil/domain/otlp"
)

// FuzzTranslate: whatever the body, in either encoding, decoding and
// translating end within a bounded time, never panic, and every event is a
// JSON object the feed can be asked about, with one event per exception at
// most as many units as were read. The bounds of docs/otlp.md, "Bounds",
// hold: at most MaxItems events, the units past them counted once each in
// Beyond, and no event larger than its own text plus the shared
// attributes' bound.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte(jsonTraces), true)
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":17,"body":{"arrayValue":{"values":[{"kvlistValue":{}}]}}}]}]}]}`), true)
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00}, false)
	f.Add(amplifiedTraces(20), false)
	f.Fuzz(func(t *testing.T, body []byte, asJSON bool) {
		enc := otlp.Protobuf
		if asJSON {
			enc = otlp.JSON
		}
		start := time.Now()
		const maxItems = 5
		d := otlp.Defaults{ConnectionName: "c", Now: time.Unix(1, 0), MaxItems: maxItems}
		var batches []otlp.Batch
		if req, err := otlp.DecodeTraces(enc, body); err == nil {
			batches = append(batches, otlp.TranslateTraces(req, d))
		}
		if req, err := otlp.DecodeLogs(enc, body); err == nil {
			batches = append(batches, otlp.TranslateLogs(req, d))
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("took %v for %d bytes", el, len(body))
		}
		for _, b := range batches {
			if b.Dropped > b.Units || (b.Units > 0 && len(b.Items) > 0 && b.Items[len(b.Items)-1].Unit >= b.Units) {
				t.Fatalf("counts %d units, %d dropped, %d items", b.Units, b.Dropped, len(b.Items))
			}
			if len(b.Items) > maxItems || (len(b.Beyond) > 0 && len(b.Items) != maxItems) {
				t.Fatalf("%d items, %d beyond", len(b.Items), len(b.Beyond))
			}
			for i, u := range b.Beyond {
				if u >= b.Units || (i > 0 && u <= b.Beyond[i-1]) {
					t.Fatalf("beyond %v of %d units", b.Beyond, b.Units)
				}
			}
			for _, it := range b.Items {
				// JSON escapes a byte into at most 6; three attribute sets
				// are shared (resource, span, event or record).
				if limit := 6*(len(body)+3*otlp.MaxSharedAttrBytes) + 8192; len(it.Raw) > limit {
					t.Fatalf("an event of %d bytes from %d", len(it.Raw), len(body))
				}
				var m map[string]any
				if err := json.Unmarshal(it.Raw, &m); err != nil || m["event_id"] != it.EventID {
					t.Fatalf("event %s: %v", it.Raw, err)
				}
			}
		}
	})
}
