package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"strings"

	collogs "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/slim/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Signal is what an OTLP path carries.
type Signal int

// The two signals the door takes; metrics and profiles have no path.
const (
	Traces Signal = iota
	Logs
)

func (s Signal) String() string {
	if s == Logs {
		return "logs"
	}
	return "traces"
}

// Encoding is the body's encoding, which the answer repeats (docs/otlp.md,
// "Answers").
type Encoding int

// OTLP/HTTP's two encodings (OTLP specification, "OTLP/HTTP").
const (
	Protobuf Encoding = iota
	JSON
)

// ContentType is the media type of an answer in this encoding.
func (e Encoding) ContentType() string {
	if e == JSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

var (
	// ErrMediaType is a Content-Type that is neither OTLP encoding (415).
	ErrMediaType = errors.New("unsupported media type")
	// ErrDecode is a body that its encoding cannot read (400).
	ErrDecode = errors.New("invalid OTLP body")
)

// ParseContentType reads the request's Content-Type: application/x-protobuf
// (or application/protobuf) or application/json, parameters ignored.
func ParseContentType(v string) (Encoding, error) {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(v))
	}
	switch mt {
	case "application/x-protobuf", "application/protobuf":
		return Protobuf, nil
	case "application/json":
		return JSON, nil
	}
	return Protobuf, fmt.Errorf("%w: Content-Type %q is neither application/x-protobuf nor application/json", ErrMediaType, clip(v, 60))
}

// jsonIn ignores fields it does not know: OTLP/JSON receivers must, so that
// an exporter newer than anvil still gets through (OTLP specification,
// "JSON Protobuf Encoding").
// Its nesting is bounded like protobuf's (decodeRecursion).
var jsonIn = protojson.UnmarshalOptions{DiscardUnknown: true, RecursionLimit: decodeRecursion}

// pbIn reads protobuf with the nesting bound of docs/otlp.md, "Bounds".
var pbIn = proto.UnmarshalOptions{RecursionLimit: decodeRecursion}

// DecodeTraces reads an ExportTraceServiceRequest.
func DecodeTraces(enc Encoding, body []byte) (*coltrace.ExportTraceServiceRequest, error) {
	req := &coltrace.ExportTraceServiceRequest{}
	if enc == Protobuf {
		if err := pbIn.Unmarshal(body, req); err != nil {
			return nil, fmt.Errorf("%w: the body is not an ExportTraceServiceRequest in protobuf", ErrDecode)
		}
		boundTraces(req)
		return req, nil
	}
	if err := jsonIn.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("%w: the body is not an ExportTraceServiceRequest in OTLP/JSON: %s", ErrDecode, clip(err.Error(), 200))
	}
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				var err error
				if sp.TraceId, err = hexID(sp.TraceId, 16, "traceId"); err != nil {
					return nil, err
				}
				if sp.SpanId, err = hexID(sp.SpanId, 8, "spanId"); err != nil {
					return nil, err
				}
				if sp.ParentSpanId, err = hexID(sp.ParentSpanId, 8, "parentSpanId"); err != nil {
					return nil, err
				}
			}
		}
	}
	boundTraces(req)
	return req, nil
}

// DecodeLogs reads an ExportLogsServiceRequest.
func DecodeLogs(enc Encoding, body []byte) (*collogs.ExportLogsServiceRequest, error) {
	req := &collogs.ExportLogsServiceRequest{}
	if enc == Protobuf {
		if err := pbIn.Unmarshal(body, req); err != nil {
			return nil, fmt.Errorf("%w: the body is not an ExportLogsServiceRequest in protobuf", ErrDecode)
		}
		boundLogs(req)
		return req, nil
	}
	if err := jsonIn.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("%w: the body is not an ExportLogsServiceRequest in OTLP/JSON: %s", ErrDecode, clip(err.Error(), 200))
	}
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			for _, lr := range sl.GetLogRecords() {
				var err error
				if lr.TraceId, err = hexID(lr.TraceId, 16, "traceId"); err != nil {
					return nil, err
				}
				if lr.SpanId, err = hexID(lr.SpanId, 8, "spanId"); err != nil {
					return nil, err
				}
			}
		}
	}
	boundLogs(req)
	return req, nil
}

// hexID undoes protojson's reading of an OTLP/JSON id. OTLP/JSON spells
// trace and span ids as hex (OTLP specification, "JSON Protobuf Encoding"),
// but protojson reads every bytes field as base64, so 32 hex digits arrive
// as 24 meaningless bytes. Hex digits are all base64 letters and an id's
// length is a multiple of 4, so encoding those bytes as base64 again gives
// back exactly the hex text the sender wrote, which is then read as hex. An
// id that decoded to its true size was sent as base64 (protojson's own
// spelling) and is kept as it is.
func hexID(b []byte, size int, field string) ([]byte, error) {
	switch len(b) {
	case 0, size:
		return b, nil
	case size * 3 / 2:
		text := base64.StdEncoding.EncodeToString(b)
		if id, err := hex.DecodeString(text); err == nil {
			return id, nil
		}
	}
	return nil, fmt.Errorf("%w: %s must be %d hexadecimal digits", ErrDecode, field, 2*size)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
