package otlp

import (
	"fmt"
	"sort"
	"strings"

	collogs "go.opentelemetry.io/proto/slim/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/slim/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Refusal is one event the feed (or the door) refused: the unit (span or
// log record) it came from, and the feed's reason code and message.
type Refusal struct {
	Unit       int
	ReasonCode string
	Message    string
}

// PartialSuccess is what an answer's partial_success says: how many spans
// or log records were refused and why — each reason once, with its count
// and the first message, most frequent first (docs/otlp.md, "Answers").
// A request with no refusal has an empty one, which OTLP reads as full
// success.
func PartialSuccess(refused []Refusal) (rejected int64, message string) {
	if len(refused) == 0 {
		return 0, ""
	}
	units := map[int]struct{}{}
	type reason struct {
		code, first string
		n           int
	}
	byCode := map[string]*reason{}
	var order []*reason
	for _, r := range refused {
		units[r.Unit] = struct{}{}
		rs := byCode[r.ReasonCode]
		if rs == nil {
			rs = &reason{code: r.ReasonCode, first: r.Message}
			byCode[r.ReasonCode] = rs
			order = append(order, rs)
		}
		rs.n++
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].n > order[j].n })
	parts := make([]string, 0, len(order))
	for _, rs := range order {
		parts = append(parts, fmt.Sprintf("%d refused %s: %s", rs.n, rs.code, clip(rs.first, 300)))
	}
	return int64(len(units)), strings.Join(parts, "; ")
}

// Marshal encodes an answer in the request's encoding. OTLP/JSON answers
// use the OTLP field names (lowerCamelCase), as protojson writes them.
func Marshal(enc Encoding, m proto.Message) []byte {
	var b []byte
	var err error
	if enc == JSON {
		b, err = protojson.Marshal(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		// The messages are the package's own, all fields set by it: they
		// always encode.
		panic(err)
	}
	return b
}

// Response is the answer to an export: Export{Trace,Logs}ServiceResponse
// with partial_success when anything was refused.
func Response(sig Signal, enc Encoding, refused []Refusal) []byte {
	n, msg := PartialSuccess(refused)
	if sig == Logs {
		r := &collogs.ExportLogsServiceResponse{}
		if n > 0 || msg != "" {
			r.PartialSuccess = &collogs.ExportLogsPartialSuccess{RejectedLogRecords: n, ErrorMessage: msg}
		}
		return Marshal(enc, r)
	}
	r := &coltrace.ExportTraceServiceResponse{}
	if n > 0 || msg != "" {
		r.PartialSuccess = &coltrace.ExportTracePartialSuccess{RejectedSpans: n, ErrorMessage: msg}
	}
	return Marshal(enc, r)
}

// gRPC status codes the door answers with, in google.rpc.Status's code.
const (
	CodeInvalidArgument   = 3
	CodePermissionDenied  = 7
	CodeResourceExhausted = 8
	CodeUnavailable       = 14
	CodeUnauthenticated   = 16
)

// Status is the body of every refusal of a whole request: a
// google.rpc.Status, in the request's encoding, as OTLP/HTTP prescribes
// (OTLP specification, "Failures").
func Status(enc Encoding, code int32, message string) []byte {
	return Marshal(enc, &status.Status{Code: code, Message: message})
}
