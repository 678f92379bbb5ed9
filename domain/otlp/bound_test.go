package otlp_test

import (
	"bytes"
	"compress/gzip"
	"runtime"
	"strings"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/slim/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/slim/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/slim/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"anvil/domain/otlp"
)

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// amplifiedTraces is the request of docs/otlp.md, "Bounds": a resource
// attribute of 128 KiB over n identical spans, each with one exception. As
// gzip it is a few hundred bytes.
func amplifiedTraces(n int) []byte {
	spans := make([]*tracepb.Span, n)
	for i := range spans {
		spans[i] = &tracepb.Span{TraceId: bytes.Repeat([]byte{1}, 16), SpanId: bytes.Repeat([]byte{2}, 8), Name: "pay",
			Events: []*tracepb.Span_Event{{Name: "exception", Attributes: []*commonpb.KeyValue{str("exception.type", "E")}}}}
	}
	req := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "checkout"), str("big", strings.Repeat("a", 128<<10))}},
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}},
	}}}
	b, err := proto.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	_, _ = w.Write(b)
	_ = w.Close()
	return out.Bytes()
}

// One request is bounded before it is translated: its decoding and
// translation allocate a small multiple of the body bound (1 MiB), however
// many times the resource would be copied, and the exceptions past the
// batch bound are counted, not made. Not parallel: TotalAlloc is the
// process's, and the package's parallel tests wait until this one ends.
func TestAmplifiedRequestStaysSmall(t *testing.T) {
	body := amplifiedTraces(2000)
	if z := len(gz(body)); z > 1024 {
		t.Fatalf("the request is %d bytes of gzip", z)
	}
	const bodyBound = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req, err := otlp.DecodeTraces(otlp.Protobuf, body)
	if err != nil {
		t.Fatal(err)
	}
	b := otlp.TranslateTraces(req, otlp.Defaults{ConnectionName: "c", Now: time.Unix(1, 0), MaxItems: 50})
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes in, %d bytes of gzip, %d bytes allocated", len(body), len(gz(body)), alloc)
	if alloc > 4*bodyBound {
		t.Fatalf("decoding and translating allocated %d bytes", alloc)
	}
	if len(b.Items) != 50 || len(b.Beyond) != 1950 || b.Units != 2000 || b.Dropped != 0 {
		t.Fatalf("%d items, %d beyond, %d units, %d dropped", len(b.Items), len(b.Beyond), b.Units, b.Dropped)
	}
	for _, it := range b.Items {
		if len(it.Raw) > otlp.MaxSharedAttrBytes+4096 {
			t.Fatalf("an event of %d bytes", len(it.Raw))
		}
	}
	if !bytes.Contains(b.Items[0].Raw, []byte(`"service":"checkout"`)) || !bytes.Contains(b.Items[0].Raw, []byte(strings.Repeat("a", 2048))) {
		t.Fatalf("the resource is lost: %.300s", b.Items[0].Raw)
	}
}

// The decoder cuts attribute values to their bounds: long strings, wide
// arrays and key-value lists, deep nesting; a body nested past the
// recursion bound is refused.
func TestDecodeBoundsAttributes(t *testing.T) {
	t.Parallel()
	deep := `{"stringValue":"bottom"}`
	for range 12 {
		deep = `{"arrayValue":{"values":[` + deep + `]}}`
	}
	wide := `{"kvlistValue":{"values":[` + strings.Repeat(`{"key":"k","value":{"intValue":"1"}},`, 300) + `{"key":"last","value":{"intValue":"1"}}]}}`
	js := `{"resourceSpans":[{"resource":{"attributes":[{"key":"long","value":{"stringValue":"` + strings.Repeat("é", 3000) + `"}},
	 {"key":"deep","value":` + deep + `},{"key":"wide","value":` + wide + `}]},
	 "scopeSpans":[{"spans":[{"events":[{"name":"exception","attributes":[{"key":"exception.message","value":{"stringValue":"` + strings.Repeat("m", 5000) + `"}}]}]}]}]}]}`
	req, err := otlp.DecodeTraces(otlp.JSON, []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	attrs := req.ResourceSpans[0].Resource.Attributes
	if s := attrs[0].Value.GetStringValue(); len(s) > otlp.MaxAttrString || !strings.HasPrefix(s, "éé") || strings.ToValidUTF8(s, "?") != s {
		t.Fatalf("long string kept as %d bytes", len(s))
	}
	v, depth := attrs[1].Value, 0
	for v.GetArrayValue() != nil {
		v, depth = v.GetArrayValue().Values[0], depth+1
	}
	if depth != otlp.MaxAttrDepth || v.GetStringValue() != "[truncated: nested too deep]" {
		t.Fatalf("nesting kept to %d levels, then %v", depth, v)
	}
	if n := len(attrs[2].Value.GetKvlistValue().Values); n != otlp.MaxAttrItems {
		t.Fatalf("%d pairs kept", n)
	}
	// An exception's own message is its alone: kept longer.
	if m := req.ResourceSpans[0].ScopeSpans[0].Spans[0].Events[0].Attributes[0].Value.GetStringValue(); len(m) != 5000 {
		t.Fatalf("message cut to %d", len(m))
	}
	tooDeep := `{"stringValue":"x"}`
	for range 40 {
		tooDeep = `{"arrayValue":{"values":[` + tooDeep + `]}}`
	}
	if _, err := otlp.DecodeTraces(otlp.JSON, []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"d","value":`+tooDeep+`}]}}]}`)); err == nil {
		t.Fatal("a body nested 80 levels was read")
	}
}
