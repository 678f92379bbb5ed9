package otlp_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"anvil/domain/otlp"
)

// An OTLP/JSON body as the specification writes it: hex trace and span
// ids, lowerCamelCase fields, enums as numbers, 64-bit integers as strings.
const jsonTraces = `{"resourceSpans":[{"resource":{"attributes":[
 {"key":"service.name","value":{"stringValue":"checkout"}},
 {"key":"deployment.environment.name","value":{"stringValue":"staging"}},
 {"key":"service.version","value":{"stringValue":"2.4.1"}},
 {"key":"host.name","value":{"stringValue":"web-3"}},
 {"key":"telemetry.sdk.language","value":{"stringValue":"python"}}]},
 "scopeSpans":[{"scope":{"name":"shop"},"spans":[
  {"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","name":"POST /pay","kind":2,
   "startTimeUnixNano":"1764842400000000000","endTimeUnixNano":"1764842401000000000",
   "attributes":[{"key":"http.route","value":{"stringValue":"/pay"}},{"key":"retries","value":{"intValue":"3"}}],
   "events":[{"timeUnixNano":"1764842400500000000","name":"exception","attributes":[
     {"key":"exception.type","value":{"stringValue":"ValueError"}},
     {"key":"exception.message","value":{"stringValue":"bad amount"}},
     {"key":"exception.stacktrace","value":{"stringValue":"Traceback (most recent call last):\n  File \"/app/pay.py\", line 9, in pay\n    check(x)\nValueError: bad amount\n"}},
     {"key":"exception.escaped","value":{"boolValue":true}}]}],
   "someFieldFromTheFuture":1},
  {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000001","name":"SELECT"}]}]}]}`

func TestDecodeJSONHexIDs(t *testing.T) {
	t.Parallel()
	req, err := otlp.DecodeTraces(otlp.JSON, []byte(jsonTraces))
	if err != nil {
		t.Fatal(err)
	}
	b := otlp.TranslateTraces(req, otlp.Defaults{ConnectionName: "conn", Now: time.Unix(0, 0)})
	if b.Units != 2 || b.Dropped != 1 || len(b.Items) != 1 {
		t.Fatalf("batch %+v", b)
	}
	var ev map[string]any
	if err := json.Unmarshal(b.Items[0].Raw, &ev); err != nil {
		t.Fatal(err)
	}
	tags := ev["tags"].(map[string]any)
	if tags["trace_id"] != "5b8efff798038103d269b633813fc60c" || tags["span_id"] != "eee19b7ec3c1b174" || tags["span.kind"] != "server" ||
		tags["span.name"] != "POST /pay" || tags["host.name"] != "web-3" {
		t.Fatalf("tags %v", tags)
	}
	if ev["service"] != "checkout" || ev["environment"] != "staging" || ev["release"] != "2.4.1" || ev["title"] != "ValueError: bad amount" ||
		ev["timestamp"] != "2025-12-04T10:00:00.5Z" || ev["language"] != "python" {
		t.Fatalf("event %v", ev)
	}
	frames := ev["exception"].(map[string]any)["stacktrace"].([]any)
	if len(frames) != 1 || frames[0].(map[string]any)["file"] != "/app/pay.py" || frames[0].(map[string]any)["context_code"] != "check(x)" {
		t.Fatalf("frames %v", frames)
	}
	otel := ev["enrichment"].(map[string]any)["otel"].(map[string]any)
	if otel["span_attributes"].(map[string]any)["retries"] != 3.0 || otel["exception_escaped"] != true {
		t.Fatalf("otel %v", otel)
	}

	// The same span in protobuf has the same event id: one key, whichever
	// encoding carried it.
	pb := otlp.Marshal(otlp.Protobuf, req)
	again, err := otlp.DecodeTraces(otlp.Protobuf, pb)
	if err != nil {
		t.Fatal(err)
	}
	if b2 := otlp.TranslateTraces(again, otlp.Defaults{}); b2.Items[0].EventID != b.Items[0].EventID {
		t.Fatalf("ids %s %s", b2.Items[0].EventID, b.Items[0].EventID)
	}

	// protojson's own spelling (base64) is read too; a wrong length is refused.
	b64 := strings.Replace(jsonTraces, `"EEE19B7EC3C1B174"`, `"7uGbfsPBsXQ="`, 1)
	if r, err := otlp.DecodeTraces(otlp.JSON, []byte(b64)); err != nil || otlp.TranslateTraces(r, otlp.Defaults{}).Items[0].EventID != b.Items[0].EventID {
		t.Fatalf("base64 id: %v", err)
	}
	for _, bad := range []string{`"EEE19B7EC3C1B1"`, `"zzzzzzzzzzzzzzzz"`} {
		_, err := otlp.DecodeTraces(otlp.JSON, []byte(strings.Replace(jsonTraces, `"EEE19B7EC3C1B174"`, bad, 1)))
		if !errors.Is(err, otlp.ErrDecode) || !strings.Contains(err.Error(), "spanId") {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

func TestLogsTranslation(t *testing.T) {
	t.Parallel()
	body := `{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"billing"}},
	 {"key":"deployment.environment","value":{"stringValue":"prod-eu"}}]},
	 "scopeLogs":[{"scope":{"name":"billing.invoices"},"logRecords":[
	  {"timeUnixNano":"1764842400000000000","severityNumber":17,"severityText":"ERROR","body":{"stringValue":"invoice 42 failed"},"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174"},
	  {"timeUnixNano":"1764842400000000001","severityNumber":9,"body":{"stringValue":"fine"}},
	  {"observedTimeUnixNano":"1764842400000000002","severityNumber":9,"body":{"stringValue":"caught"},"attributes":[{"key":"exception.type","value":{"stringValue":"IOError"}}]},
	  {"severityText":"FATAL","body":{"kvlistValue":{"values":[{"key":"k","value":{"intValue":"1"}}]}}}]}]}]}`
	req, err := otlp.DecodeLogs(otlp.JSON, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	b := otlp.TranslateLogs(req, otlp.Defaults{Now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	if b.Units != 4 || b.Dropped != 1 || len(b.Items) != 3 {
		t.Fatalf("batch %+v", b)
	}
	var evs []map[string]any
	for _, it := range b.Items {
		var m map[string]any
		_ = json.Unmarshal(it.Raw, &m)
		evs = append(evs, m)
	}
	if evs[0]["title"] != "invoice 42 failed" || evs[0]["level"] != "error" || evs[0]["environment"] != "prod-eu" ||
		evs[0]["exception"].(map[string]any)["type"] != "billing.invoices" || evs[0]["tags"].(map[string]any)["trace_id"] != "5b8efff798038103d269b633813fc60c" {
		t.Fatalf("error log %v", evs[0])
	}
	if evs[1]["title"] != "IOError: caught" || evs[1]["level"] != "info" || evs[1]["timestamp"] != "2025-12-04T10:00:00.000000002Z" {
		t.Fatalf("exception log %v", evs[1])
	}
	if evs[2]["title"] != `{"k":1}` || evs[2]["level"] != "fatal" || evs[2]["timestamp"] != "2026-01-02T03:04:05Z" {
		t.Fatalf("fatal log %v", evs[2])
	}
	// Each record has its own key; the same record decoded again has the same.
	again, _ := otlp.DecodeLogs(otlp.JSON, []byte(body))
	b2 := otlp.TranslateLogs(again, otlp.Defaults{})
	seen := map[string]bool{}
	for i, it := range b.Items {
		if seen[it.EventID] || b2.Items[i].EventID != it.EventID {
			t.Fatalf("keys %v %v", b.Items, b2.Items)
		}
		seen[it.EventID] = true
	}
}

func TestContentTypeAndAnswers(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]otlp.Encoding{"application/x-protobuf": otlp.Protobuf, "application/json; charset=utf-8": otlp.JSON, "Application/JSON": otlp.JSON} {
		if got, err := otlp.ParseContentType(v); err != nil || got != want {
			t.Fatalf("%s: %v %v", v, got, err)
		}
	}
	if _, err := otlp.ParseContentType("text/plain"); !errors.Is(err, otlp.ErrMediaType) {
		t.Fatal(err)
	}
	refused := []otlp.Refusal{{Unit: 0, ReasonCode: "no_binding", Message: "no binding for environment 'qa'"},
		{Unit: 0, ReasonCode: "no_binding", Message: "x"}, {Unit: 3, ReasonCode: "schema_violation", Message: "y"}, {Unit: 4, ReasonCode: "no_binding", Message: "z"}}
	n, msg := otlp.PartialSuccess(refused)
	if n != 3 || msg != "3 refused no_binding: no binding for environment 'qa'; 1 refused schema_violation: y" {
		t.Fatalf("%d %q", n, msg)
	}
	if got := string(otlp.Response(otlp.Logs, otlp.JSON, refused)); got != `{"partialSuccess":{"rejectedLogRecords":"3","errorMessage":"3 refused no_binding: no binding for environment 'qa'; 1 refused schema_violation: y"}}` &&
		!strings.Contains(got, `"rejectedLogRecords":"3"`) {
		t.Fatal(got)
	}
	if got := string(otlp.Response(otlp.Traces, otlp.JSON, nil)); got != "{}" {
		t.Fatal(got)
	}
}
