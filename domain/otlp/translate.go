package otlp

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	collogs "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/slim/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/slim/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/slim/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/slim/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	fastjson "github.com/segmentio/encoding/json"
)

// Defaults are what the translation takes from outside the request: the
// connection's name (the service of last resort) and the time the request
// arrived (the timestamp of an item that names none).
type Defaults struct {
	ConnectionName string
	Now            time.Time
	// MaxItems is the feed's batch bound: the translation stops at that
	// many events and counts the units past it in Batch.Beyond, so that a
	// request of thousands of exceptions costs what the bound does
	// (docs/otlp.md, "Bounds"). 0 is no bound.
	MaxItems int
}

// Item is one exception as a feed event: Raw is the feed event's JSON for
// Feed.Ingest, EventID the UUID in it (derived from the item's key, so a
// resent batch is stored once) and Unit the index of the span or log
// record it came from among the request's, so that refusals are counted
// per span or record, as partial_success counts them.
type Item struct {
	Raw     json.RawMessage
	EventID string
	Unit    int
}

// Batch is one request translated: its events and how many spans or log
// records it held (Units) and how many of those were no exception (Dropped:
// counted, never stored).
type Batch struct {
	Items   []Item
	Units   int
	Dropped int
	// Beyond are the units (each once) holding an exception that was not
	// translated because Defaults.MaxItems events were made already.
	Beyond []int
}

// full reports whether the batch holds MaxItems events; the unit, which
// holds one more exception, is then counted in Beyond.
func (b *Batch) full(d Defaults, unit int) bool {
	if d.MaxItems <= 0 || len(b.Items) < d.MaxItems {
		return false
	}
	if n := len(b.Beyond); n == 0 || b.Beyond[n-1] != unit {
		b.Beyond = append(b.Beyond, unit)
	}
	return true
}

// feedEvent is the feed event the translation writes (docs/contracts/feed.md);
// Feed.Ingest validates, bounds and scrubs it like any other.
type feedEvent struct {
	SchemaVersion string            `json:"schema_version"`
	EventID       string            `json:"event_id"`
	Timestamp     string            `json:"timestamp"`
	Title         string            `json:"title"`
	Level         string            `json:"level"`
	Environment   string            `json:"environment"`
	Service       string            `json:"service"`
	Language      string            `json:"language,omitempty"`
	SDK           feedSDK           `json:"sdk"`
	Exception     *feedException    `json:"exception,omitempty"`
	Release       string            `json:"release,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	Enrichment    map[string]any    `json:"enrichment,omitempty"`
}

type feedSDK struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Runtime string `json:"runtime,omitempty"`
}

type feedException struct {
	Type       string      `json:"type"`
	Message    string      `json:"message,omitempty"`
	Stacktrace []feedFrame `json:"stacktrace,omitempty"`
}

type feedFrame struct {
	File        string `json:"file,omitempty"`
	Line        int    `json:"line,omitempty"`
	Function    string `json:"function,omitempty"`
	ContextCode string `json:"context_code,omitempty"`
	InApp       bool   `json:"in_app"`
	Colno       int    `json:"colno,omitempty"`
}

// resourceInfo is what a resource's attributes say about every event under
// it (docs/otlp.md, "Mapping").
type resourceInfo struct {
	service, environment, release, host, language string
	sdk                                           feedSDK
	// attrs is the resource's attributes encoded once and written as they
	// are into each of its events (json.RawMessage), within
	// MaxSharedAttrBytes.
	attrs any
}

func readResource(r *resourcepb.Resource, d Defaults) resourceInfo {
	ri := resourceInfo{service: d.ConnectionName, environment: "production", sdk: feedSDK{Name: "opentelemetry"}}
	var envOld, rtName, rtVersion string
	for _, kv := range r.GetAttributes() {
		s := kv.GetValue().GetStringValue()
		switch kv.GetKey() {
		case "service.name":
			if strings.TrimSpace(s) != "" {
				ri.service = s
			}
		case "deployment.environment.name":
			ri.environment = s
		case "deployment.environment":
			envOld = s
		case "service.version":
			ri.release = s
		case "host.name":
			ri.host = s
		case "telemetry.sdk.language":
			ri.language = s
		case "telemetry.sdk.name":
			if s != "" {
				ri.sdk.Name = s
			}
		case "telemetry.sdk.version":
			ri.sdk.Version = s
		case "process.runtime.name":
			rtName = s
		case "process.runtime.version":
			rtVersion = s
		}
	}
	// deployment.environment.name is the current name of the attribute;
	// deployment.environment the one older SDKs still send.
	if !hasAttr(r.GetAttributes(), "deployment.environment.name") && envOld != "" {
		ri.environment = envOld
	}
	ri.sdk.Runtime = strings.TrimSpace(rtName + " " + rtVersion)
	ri.attrs = sharedAttrs(r.GetAttributes())
	return ri
}

func hasAttr(kvs []*commonpb.KeyValue, key string) bool {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return true
		}
	}
	return false
}

// TranslateTraces picks the exception events of every span: each span
// event named "exception" becomes one feed event. Spans without one are
// counted in Dropped.
func TranslateTraces(req *coltrace.ExportTraceServiceRequest, d Defaults) Batch {
	var b Batch
	for _, rs := range req.GetResourceSpans() {
		var ri *resourceInfo
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				unit := b.Units
				b.Units++
				found := false
				var spanAttrs any
				spanRead := false
				for i, ev := range sp.GetEvents() {
					if ev.GetName() != "exception" {
						continue
					}
					found = true
					if b.full(d, unit) {
						break
					}
					if ri == nil {
						r := readResource(rs.GetResource(), d)
						ri = &r
					}
					if !spanRead {
						spanRead = true
						// A span's attributes are written into each of its
						// exceptions: encoded once, like the resource's.
						spanAttrs = sharedAttrs(sp.GetAttributes())
					}
					b.Items = append(b.Items, spanEvent(ri, ss.GetScope(), sp, spanAttrs, i, ev, d, unit))
				}
				if !found {
					b.Dropped++
				}
			}
		}
	}
	return b
}

// TranslateLogs picks the log records that are exceptions: severity ERROR
// or above, or any exception.* attribute. The others are counted in Dropped.
func TranslateLogs(req *collogs.ExportLogsServiceRequest, d Defaults) Batch {
	var b Batch
	for _, rl := range req.GetResourceLogs() {
		var ri *resourceInfo
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				unit := b.Units
				b.Units++
				if !isErrorLog(lr) {
					b.Dropped++
					continue
				}
				if b.full(d, unit) {
					continue
				}
				if ri == nil {
					r := readResource(rl.GetResource(), d)
					ri = &r
				}
				b.Items = append(b.Items, logEvent(ri, sl.GetScope(), lr, d, unit))
			}
		}
	}
	return b
}

func isErrorLog(lr *logspb.LogRecord) bool {
	if lr.GetSeverityNumber() >= logspb.SeverityNumber_SEVERITY_NUMBER_ERROR {
		return true
	}
	if lr.GetSeverityNumber() == logspb.SeverityNumber_SEVERITY_NUMBER_UNSPECIFIED {
		switch strings.ToUpper(strings.TrimSpace(lr.GetSeverityText())) {
		case "ERROR", "FATAL", "CRITICAL", "SEVERE", "PANIC", "EMERGENCY", "ALERT":
			return true
		}
	}
	for _, kv := range lr.GetAttributes() {
		if strings.HasPrefix(kv.GetKey(), "exception.") {
			return true
		}
	}
	return false
}

// exceptionAttrs reads the OpenTelemetry exception attributes.
type exceptionAttrs struct {
	typ, message, stack string
	escaped, has        bool
}

func readException(kvs []*commonpb.KeyValue) exceptionAttrs {
	var e exceptionAttrs
	for _, kv := range kvs {
		switch kv.GetKey() {
		case "exception.type":
			e.typ, e.has = kv.GetValue().GetStringValue(), true
		case "exception.message":
			e.message, e.has = kv.GetValue().GetStringValue(), true
		case "exception.stacktrace":
			e.stack, e.has = kv.GetValue().GetStringValue(), true
		case "exception.escaped":
			e.escaped = kv.GetValue().GetBoolValue()
		}
	}
	return e
}

func spanEvent(ri *resourceInfo, scope *commonpb.InstrumentationScope, sp *tracepb.Span, spanAttrs any, index int, ev *tracepb.Span_Event, d Defaults, unit int) Item {
	ex := readException(ev.GetAttributes())
	fe := baseEvent(ri, scope)
	fe.Level = "error"
	at := ev.GetTimeUnixNano()
	if at == 0 {
		at = sp.GetEndTimeUnixNano()
	}
	fe.Timestamp = unixNano(at, d.Now)
	setException(&fe, ex, "", ri.language)

	traceID, spanID := hex.EncodeToString(sp.GetTraceId()), hex.EncodeToString(sp.GetSpanId())
	kind := spanKind(sp.GetKind())
	if traceID != "" {
		fe.Tags["trace_id"] = traceID
	}
	if spanID != "" {
		fe.Tags["span_id"] = spanID
	}
	fe.Tags["span.name"] = sp.GetName()
	fe.Tags["span.kind"] = kind
	otel := map[string]any{
		"signal": "traces", "trace_id": traceID, "span_id": spanID,
		"span_name": sp.GetName(), "span_kind": kind, "exception_escaped": ex.escaped,
		"resource": ri.attrs,
	}
	if spanAttrs != nil {
		otel["span_attributes"] = spanAttrs
	}
	if a := sharedAttrs(otherAttrs(ev.GetAttributes())); a != nil {
		otel["event_attributes"] = a
	}
	if len(fe.Exception.Stacktrace) == 0 && ex.stack != "" {
		otel["stacktrace"] = ex.stack
	}
	fe.Enrichment = map[string]any{"otel": otel}

	// The key of a span's exception: its trace id, span id and the event's
	// index among the span's events (docs/otlp.md, "Exactly once").
	h := sha256.New()
	h.Write([]byte("anvil-otlp/span\x00"))
	h.Write(sp.GetTraceId())
	h.Write(sp.GetSpanId())
	var idx [4]byte
	binary.BigEndian.PutUint32(idx[:], uint32(index))
	h.Write(idx[:])
	if len(sp.GetTraceId()) == 0 && len(sp.GetSpanId()) == 0 {
		// A span without ids (no valid exporter sends one) is keyed by
		// what it says, so that it still dedupes when resent.
		h.Write([]byte(ri.service))
		h.Write(deterministic(ev))
	}
	return finish(&fe, h.Sum(nil), unit)
}

func logEvent(ri *resourceInfo, scope *commonpb.InstrumentationScope, lr *logspb.LogRecord, d Defaults, unit int) Item {
	ex := readException(lr.GetAttributes())
	fe := baseEvent(ri, scope)
	fe.Level = logLevel(lr)
	at := lr.GetTimeUnixNano()
	if at == 0 {
		at = lr.GetObservedTimeUnixNano()
	}
	fe.Timestamp = unixNano(at, d.Now)
	body := anyText(lr.GetBody())
	setException(&fe, ex, body, ri.language)
	if !ex.has || (ex.typ == "" && ex.message == "") {
		// A plain error log: titled by its text, typed by its logger (the
		// instrumentation scope), as the Sentry door types a message event.
		typ := strings.TrimSpace(scope.GetName())
		if typ == "" {
			typ = "Log"
		}
		fe.Exception.Type, fe.Exception.Message = typ, body
		fe.Title = body
		if strings.TrimSpace(body) == "" {
			fe.Title = typ
		}
	}
	traceID, spanID := hex.EncodeToString(lr.GetTraceId()), hex.EncodeToString(lr.GetSpanId())
	if traceID != "" {
		fe.Tags["trace_id"] = traceID
	}
	if spanID != "" {
		fe.Tags["span_id"] = spanID
	}
	otel := map[string]any{"signal": "logs", "trace_id": traceID, "span_id": spanID,
		"severity_text": lr.GetSeverityText(), "severity_number": int32(lr.GetSeverityNumber()), "resource": ri.attrs}
	if a := sharedAttrs(otherAttrs(lr.GetAttributes())); a != nil {
		otel["log_attributes"] = a
	}
	if len(fe.Exception.Stacktrace) == 0 && ex.stack != "" {
		otel["stacktrace"] = ex.stack
	}
	fe.Enrichment = map[string]any{"otel": otel}

	// The key of a log record (docs/otlp.md, "Exactly once"): its
	// resource's service.name and the record's own protobuf bytes in
	// deterministic order — its times, severity, body, attributes and trace
	// and span ids — so the same record resent, in either encoding, has the
	// same key, and two records that differ in anything have two.
	h := sha256.New()
	h.Write([]byte("anvil-otlp/log\x00"))
	h.Write([]byte(ri.service))
	h.Write([]byte{0})
	h.Write(deterministic(lr))
	return finish(&fe, h.Sum(nil), unit)
}

func deterministic(m proto.Message) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	return b
}

func baseEvent(ri *resourceInfo, scope *commonpb.InstrumentationScope) feedEvent {
	fe := feedEvent{
		SchemaVersion: "1.0",
		Environment:   ri.environment,
		Service:       ri.service,
		Language:      ri.language,
		SDK:           ri.sdk,
		Release:       ri.release,
		Tags:          map[string]string{},
	}
	if ri.host != "" {
		fe.Tags["host.name"] = ri.host
	}
	if n := scope.GetName(); n != "" {
		fe.Tags["otel.scope"] = n
	}
	return fe
}

// setException fills the exception and the title from the exception
// attributes; the stack trace text becomes frames.
func setException(fe *feedEvent, ex exceptionAttrs, fallbackMessage, lang string) {
	typ := strings.TrimSpace(ex.typ)
	if typ == "" {
		typ = "Error"
	}
	msg := ex.message
	if msg == "" {
		msg = fallbackMessage
	}
	fe.Exception = &feedException{Type: typ, Message: msg}
	fe.Title = typ
	if msg != "" {
		fe.Title = typ + ": " + msg
	}
	if ex.stack != "" {
		frames := ParseStack(ex.stack, lang)
		fe.Exception.Stacktrace = make([]feedFrame, len(frames))
		for i, f := range frames {
			fe.Exception.Stacktrace[i] = feedFrame{File: f.File, Line: f.Line, Function: f.Function,
				ContextCode: f.ContextCode, InApp: f.InApp, Colno: f.Col}
		}
	}
}

// finish names the event by its key (a UUID made of the key's first 16
// bytes, version 8 "custom") and encodes it.
func finish(fe *feedEvent, key []byte, unit int) Item {
	var u [16]byte
	copy(u[:], key)
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u[:])
	fe.EventID = h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	if len(fe.Tags) == 0 {
		fe.Tags = nil
	}
	raw, err := fastjson.Marshal(fe)
	if err != nil {
		// Every value above is a string, a number or a map of them; no
		// value can fail to encode, so this is unreachable.
		panic(err)
	}
	return Item{Raw: raw, EventID: fe.EventID, Unit: unit}
}

func logLevel(lr *logspb.LogRecord) string {
	switch n := lr.GetSeverityNumber(); {
	case n >= logspb.SeverityNumber_SEVERITY_NUMBER_FATAL:
		return "fatal"
	case n >= logspb.SeverityNumber_SEVERITY_NUMBER_ERROR:
		return "error"
	case n >= logspb.SeverityNumber_SEVERITY_NUMBER_WARN:
		return "warning"
	case n >= logspb.SeverityNumber_SEVERITY_NUMBER_INFO:
		return "info"
	case n >= logspb.SeverityNumber_SEVERITY_NUMBER_TRACE:
		return "debug"
	}
	switch strings.ToUpper(strings.TrimSpace(lr.GetSeverityText())) {
	case "FATAL", "CRITICAL", "PANIC", "EMERGENCY", "ALERT":
		return "fatal"
	case "WARN", "WARNING":
		return "warning"
	case "INFO", "NOTICE":
		return "info"
	case "DEBUG", "TRACE":
		return "debug"
	}
	return "error"
}

func spanKind(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return "unspecified"
}

// unixNano spells nanoseconds since the epoch in RFC 3339; 0 (not set)
// is the arrival time.
func unixNano(ns uint64, now time.Time) string {
	if ns == 0 || ns > math.MaxInt64 {
		return now.UTC().Format(time.RFC3339Nano)
	}
	return time.Unix(0, int64(ns)).UTC().Format(time.RFC3339Nano)
}

// otherAttrs are the attributes but the exception's own, which are the
// event's exception already.
func otherAttrs(kvs []*commonpb.KeyValue) []*commonpb.KeyValue {
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		switch kv.GetKey() {
		case "exception.type", "exception.message", "exception.stacktrace", "exception.escaped":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// attrBudget is what an attribute set may still cost once translated:
// each string its length, each other value or key a few bytes
// (MaxSharedAttrBytes). Past it, values are a marker and the walk stops.
type attrBudget struct{ left int }

const (
	nodeCost       = 8
	truncatedLarge = "[truncated: attributes above the bound]"
)

func (b *attrBudget) spend(n int) bool {
	b.left -= n + nodeCost
	return b.left >= 0
}

// sharedAttrs translates an attribute set within MaxSharedAttrBytes and
// encodes it once: the result (a json.RawMessage, or nil for none) is
// written as it is into every event that holds it.
func sharedAttrs(kvs []*commonpb.KeyValue) any {
	m := attrMap(kvs, &attrBudget{left: MaxSharedAttrBytes})
	if len(m) == 0 {
		return nil
	}
	raw, err := fastjson.Marshal(m)
	if err != nil {
		// Strings, numbers, booleans and maps and slices of them: they
		// always encode.
		panic(err)
	}
	return json.RawMessage(raw)
}

// attrMap translates attributes; the decoder bounded their count, length
// and nesting already (boundAttrs), the budget bounds their sum.
func attrMap(kvs []*commonpb.KeyValue, b *attrBudget) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	out := make(map[string]any, min(len(kvs), MaxAttrItems))
	for _, kv := range kvs {
		if len(out) == MaxAttrItems {
			break
		}
		if !b.spend(len(kv.GetKey())) {
			out["anvil.truncated"] = truncatedLarge
			break
		}
		out[kv.GetKey()] = anyValue(kv.GetValue(), 0, b)
	}
	return out
}

func anyValue(v *commonpb.AnyValue, depth int, b *attrBudget) any {
	if depth > MaxAttrDepth {
		return truncatedDeep
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		if !b.spend(len(x.StringValue)) {
			return truncatedLarge
		}
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		b.spend(0)
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		b.spend(0)
		return json.Number(strconv.FormatInt(x.IntValue, 10))
	case *commonpb.AnyValue_DoubleValue:
		b.spend(0)
		if math.IsNaN(x.DoubleValue) || math.IsInf(x.DoubleValue, 0) {
			return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		}
		return json.Number(strconv.FormatFloat(x.DoubleValue, 'g', -1, 64))
	case *commonpb.AnyValue_BytesValue:
		if !b.spend(len(x.BytesValue) * 4 / 3) {
			return truncatedLarge
		}
		return base64.StdEncoding.EncodeToString(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		vs := x.ArrayValue.GetValues()
		out := make([]any, 0, min(len(vs), MaxAttrItems))
		for _, e := range vs {
			if len(out) == MaxAttrItems || b.left <= 0 {
				break
			}
			out = append(out, anyValue(e, depth+1, b))
		}
		return out
	case *commonpb.AnyValue_KvlistValue:
		kvs := x.KvlistValue.GetValues()
		out := make(map[string]any, min(len(kvs), MaxAttrItems))
		for _, kv := range kvs {
			if len(out) == MaxAttrItems || !b.spend(len(kv.GetKey())) {
				break
			}
			out[kv.GetKey()] = anyValue(kv.GetValue(), depth+1, b)
		}
		return out
	}
	return nil
}

// anyText spells a log body as text: a string as itself, anything else as
// its JSON.
func anyText(v *commonpb.AnyValue) string {
	if v == nil {
		return ""
	}
	if s, ok := v.GetValue().(*commonpb.AnyValue_StringValue); ok {
		return s.StringValue
	}
	b, err := fastjson.Marshal(anyValue(v, 0, &attrBudget{left: MaxStackBytes}))
	if err != nil {
		return ""
	}
	return string(b)
}
