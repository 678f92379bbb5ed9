package otlp

import (
	"unicode/utf8"

	collogs "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/slim/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"

	"anvil/domain/event"
)

// Bounds of one request, applied while decoding (docs/otlp.md, "Bounds").
// The decompressed body is bounded already, but what the translation makes
// of it is not: an attribute of the resource is written into every event
// under it, so a few hundred bytes of gzip would otherwise become hundreds
// of MiB of events. The values the feed would cut anyway (event.MaxBag*)
// are cut here, before anything is copied.
const (
	// decodeRecursion is the protobuf and protojson nesting limit: the
	// request's own levels (about 7 down to an attribute's value) and two
	// per AnyValue level (the value and its array or key-value list), with
	// room; a deeper body is a 400 instead of a 10,000-level walk.
	decodeRecursion = 64
	// MaxAttrString is the longest attribute string or bytes value kept,
	// in bytes: the feed keeps event.MaxBagStringChars characters of a bag
	// string, so nothing it would keep is lost for ASCII.
	MaxAttrString = event.MaxBagStringChars
	// MaxAttrItems is the most attributes of one list, items of one array
	// and pairs of one key-value list kept (the feed's MaxBagKeys).
	MaxAttrItems = event.MaxBagKeys
	// MaxAttrDepth is the deepest AnyValue nesting kept; a deeper value is
	// replaced by a marker string.
	MaxAttrDepth = 8
	// maxExceptionText is the longest exception.message or
	// exception.stacktrace kept: one exception's own text, never copied into
	// another event, and the stack reader reads 256 KiB at most
	// (MaxStackBytes).
	maxExceptionText = MaxStackBytes
	// MaxSharedAttrBytes bounds what one attribute set costs once
	// translated (strings plus a few bytes a node). The resource's and a
	// span's attributes are written into each of their events, so this,
	// times the batch bound, is the most the copies can cost.
	MaxSharedAttrBytes = 16 << 10
)

const truncatedDeep = "[truncated: nested too deep]"

// boundTraces cuts every attribute of a decoded trace request to the
// bounds above, in place.
func boundTraces(req *coltrace.ExportTraceServiceRequest) {
	for _, rs := range req.GetResourceSpans() {
		if r := rs.GetResource(); r != nil {
			r.Attributes = boundAttrs(r.Attributes, false)
		}
		for _, ss := range rs.GetScopeSpans() {
			boundScope(ss.GetScope())
			for _, sp := range ss.GetSpans() {
				sp.Name = clipString(sp.Name, MaxAttrString)
				sp.Attributes = boundAttrs(sp.Attributes, false)
				for _, ev := range sp.GetEvents() {
					ev.Name = clipString(ev.Name, MaxAttrString)
					ev.Attributes = boundAttrs(ev.Attributes, true)
				}
				for _, l := range sp.GetLinks() {
					l.Attributes = nil
				}
			}
		}
	}
}

// boundLogs is boundTraces for logs; a record's body is its own text (the
// message of a plain error log), bounded like an exception's.
func boundLogs(req *collogs.ExportLogsServiceRequest) {
	for _, rl := range req.GetResourceLogs() {
		if r := rl.GetResource(); r != nil {
			r.Attributes = boundAttrs(r.Attributes, false)
		}
		for _, sl := range rl.GetScopeLogs() {
			boundScope(sl.GetScope())
			for _, lr := range sl.GetLogRecords() {
				lr.SeverityText = clipString(lr.SeverityText, 64)
				lr.Attributes = boundAttrs(lr.Attributes, true)
				if lr.Body != nil {
					boundValue(lr.Body, 0, maxExceptionText)
				}
			}
		}
	}
}

func boundScope(s *commonpb.InstrumentationScope) {
	if s == nil {
		return
	}
	s.Name = clipString(s.Name, MaxAttrString)
	s.Version = clipString(s.Version, MaxAttrString)
	s.Attributes = boundAttrs(s.Attributes, false)
}

// boundAttrs keeps the first MaxAttrItems attributes, each bounded. own is
// true for a span event's or a log record's attributes, whose exception
// text is that exception's alone and so may be longer.
func boundAttrs(kvs []*commonpb.KeyValue, own bool) []*commonpb.KeyValue {
	if len(kvs) > MaxAttrItems {
		kvs = kvs[:MaxAttrItems]
	}
	for _, kv := range kvs {
		if kv == nil {
			continue
		}
		kv.Key = clipString(kv.Key, 256)
		limit := MaxAttrString
		if own && (kv.Key == "exception.message" || kv.Key == "exception.stacktrace") {
			limit = maxExceptionText
		}
		if kv.Value != nil {
			boundValue(kv.Value, 0, limit)
		}
	}
	return kvs
}

func boundValue(v *commonpb.AnyValue, depth, limit int) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		x.StringValue = clipString(x.StringValue, limit)
	case *commonpb.AnyValue_BytesValue:
		if len(x.BytesValue) > MaxAttrString {
			x.BytesValue = x.BytesValue[:MaxAttrString]
		}
	case *commonpb.AnyValue_ArrayValue:
		if depth >= MaxAttrDepth {
			v.Value = &commonpb.AnyValue_StringValue{StringValue: truncatedDeep}
			return
		}
		vs := x.ArrayValue.GetValues()
		if len(vs) > MaxAttrItems {
			vs = vs[:MaxAttrItems]
			x.ArrayValue.Values = vs
		}
		for _, e := range vs {
			if e != nil {
				boundValue(e, depth+1, MaxAttrString)
			}
		}
	case *commonpb.AnyValue_KvlistValue:
		if depth >= MaxAttrDepth {
			v.Value = &commonpb.AnyValue_StringValue{StringValue: truncatedDeep}
			return
		}
		kvs := x.KvlistValue.GetValues()
		if len(kvs) > MaxAttrItems {
			kvs = kvs[:MaxAttrItems]
			x.KvlistValue.Values = kvs
		}
		for _, kv := range kvs {
			if kv == nil {
				continue
			}
			kv.Key = clipString(kv.Key, 256)
			if kv.Value != nil {
				boundValue(kv.Value, depth+1, MaxAttrString)
			}
		}
	}
}

// clipString keeps at most n bytes of s, cut on a rune boundary. The
// result shares s's bytes: nothing is copied.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
