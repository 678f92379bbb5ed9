package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/slim/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"anvil/domain/otlp"
)

// otlpResource is an OTel resource as a service sets it through
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME.
func otlpResource(service, env string) *resource.Resource {
	return resource.NewWithAttributes("",
		attribute.String("service.name", service), attribute.String("deployment.environment.name", env),
		attribute.String("service.version", "2026.12.1"), attribute.String("host.name", "web-7"),
		attribute.String("telemetry.sdk.language", "go"), attribute.String("telemetry.sdk.name", "opentelemetry"))
}

// otlpTracer is opentelemetry-go's tracer provider with its own OTLP/HTTP
// exporter, unchanged, pointed at the test server — what
// OTEL_EXPORTER_OTLP_ENDPOINT=<anvil>/api/otlp and OTEL_EXPORTER_OTLP_HEADERS
// configure (set here as options: the tests run in parallel, the process
// environment is shared).
func otlpTracer(t *testing.T, base, token, service, env string) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(base+"/api/otlp/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"authorization": "Bearer " + token}), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(otlpResource(service, env)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

var errCartNull = errors.New("cart is null")

// chargeCart fails the way a handler fails: one place in the code, whichever
// service runs it.
func chargeCart(ctx context.Context, tp trace.TracerProvider) {
	_, span := tp.Tracer("shop/checkout").Start(ctx, "POST /checkout", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.route", "/checkout"), attribute.String("password", "hunter2")))
	span.RecordError(errCartNull, trace.WithStackTrace(true))
	span.End()
}

// The real opentelemetry-go exporters, unchanged: a span's RecordError and
// an ERROR log become incidents with their frames; the same exception from
// two services groups into one incident; attributes are kept, scrubbed.
func TestOTLPGoSDK(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t), "staging=observe")
	ctx := context.Background()

	chargeCart(ctx, otlpTracer(t, f.srv.URL, f.token, "checkout", "staging"))
	var incs []struct {
		ID    string `bun:"id"`
		Title string `bun:"title"`
		Type  string `bun:"exception_type"`
		Count int    `bun:"event_count"`
		Env   string `bun:"environment"`
		Rel   string `bun:"release"`
	}
	load := func() {
		t.Helper()
		incs = nil
		if err := f.db.Bun.NewRaw(`SELECT id, title, exception_type, event_count, environment, release FROM incidents WHERE project_id = ? ORDER BY created_at`,
			f.projectID).Scan(ctx, &incs); err != nil {
			t.Fatal(err)
		}
	}
	load()
	if len(incs) != 1 || incs[0].Title != "*errors.errorString: cart is null" || incs[0].Env != "staging" || incs[0].Rel != "2026.12.1" || incs[0].Count != 1 {
		t.Fatalf("incidents %+v", incs)
	}
	var raw string
	if err := f.db.Bun.NewRaw(`SELECT payload::jsonb::text FROM feed_events WHERE project_id = ? ORDER BY received_at LIMIT 1`, f.projectID).Scan(ctx, &raw); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"service": "checkout"`, `"span.kind": "server"`, `"span.name": "POST /checkout"`, `"host.name": "web-7"`,
		`"function": "anvil/web_test.chargeCart"`, `"in_app": true`, `"http.route": "/checkout"`} {
		if !strings.Contains(raw, want) {
			t.Fatalf("payload lacks %s:\n%s", want, raw)
		}
	}
	if strings.Contains(raw, "hunter2") {
		t.Fatalf("an attribute was stored unscrubbed:\n%s", raw)
	}

	// The same exception from a second service groups into the same incident.
	chargeCart(ctx, otlpTracer(t, f.srv.URL, f.token, "billing", "staging"))
	load()
	if len(incs) != 1 || incs[0].Count != 2 {
		t.Fatalf("second service: %+v", incs)
	}

	// An ERROR log with the exception's attributes, through otlploghttp.
	exp, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(f.srv.URL+"/api/otlp/v1/logs"),
		otlploghttp.WithHeaders(map[string]string{"authorization": "Bearer " + f.token}), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)), sdklog.WithResource(otlpResource("invoices", "staging")))
	defer func() { _ = lp.Shutdown(ctx) }()
	logger := lp.Logger("shop/invoices")
	var rec otellog.Record
	rec.SetSeverity(otellog.SeverityError)
	rec.SetSeverityText("ERROR")
	rec.SetBody(attribute.StringValue("invoice 42 could not be sent"))
	rec.AddAttributes(attribute.String("exception.type", "*smtp.Error"), attribute.String("exception.message", "421 try later"),
		attribute.String("exception.stacktrace", string(debug.Stack())))
	logger.Emit(ctx, rec)
	var info otellog.Record // an INFO log is counted and dropped
	info.SetSeverity(otellog.SeverityInfo)
	info.SetBody(attribute.StringValue("invoice 43 sent"))
	logger.Emit(ctx, info)
	load()
	if len(incs) != 2 || incs[1].Title != "*smtp.Error: 421 try later" || incs[1].Count != 1 {
		t.Fatalf("log incident: %+v", incs)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ? AND payload::json->'exception'->'stacktrace'->0->>'function' = 'runtime/debug.Stack'`, f.projectID); n != 1 {
		t.Fatalf("the log's frames: %d", n)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, f.projectID); n != 3 {
		t.Fatalf("%d events stored", n)
	}
}

// otlpPost posts an OTLP body and returns the status, content type and body.
func otlpPost(t *testing.T, url, contentType, token string, body []byte, hdr ...string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), out
}

const otlpSpanJSON = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"checkout"}},
 {"key":"deployment.environment.name","value":{"stringValue":"ENV"}}]},"scopeSpans":[{"spans":[
 {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"pay","events":[
  {"name":"exception","attributes":[{"key":"exception.type","value":{"stringValue":"java.lang.IllegalStateException"}},
   {"key":"exception.stacktrace","value":{"stringValue":"java.lang.IllegalStateException: x\n\tat com.acme.Pay.run(Pay.java:3)\n"}}]},
  {"name":"log"},
  {"name":"exception","attributes":[{"key":"exception.type","value":{"stringValue":"java.io.IOException"}}]}]},
 {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000002","name":"quiet"}]}]}]}`

// A resent batch stores nothing twice, in either encoding and compressed;
// an unknown environment is refused per item in partial_success; a browser
// key, a wrong token, a bad body and a wrong media type are refused whole
// with a google.rpc.Status in the request's encoding.
func TestOTLPContract(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	url := f.srv.URL + "/api/otlp/v1/traces"
	body := []byte(strings.ReplaceAll(otlpSpanJSON, "ENV", "production"))
	st, ct, out := otlpPost(t, url, "application/json", f.token, body)
	if st != 200 || ct != "application/json" || string(out) != "{}" {
		t.Fatalf("%d %s %s", st, ct, out)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, f.projectID); n != 2 {
		t.Fatalf("%d events", n)
	}
	// The same spans again: as JSON, as protobuf, as gzipped protobuf.
	req, err := decodeTracesJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := proto.Marshal(req)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(pb)
	_ = zw.Close()
	for _, again := range []struct {
		ct   string
		body []byte
		hdr  []string
	}{{"application/json", body, nil}, {"application/x-protobuf", pb, nil}, {"application/x-protobuf", zb.Bytes(), []string{"Content-Encoding", "gzip"}}} {
		st, ct, out := otlpPost(t, url, again.ct, f.token, again.body, again.hdr...)
		if st != 200 || ct != again.ct {
			t.Fatalf("%d %s %s", st, ct, out)
		}
		var resp coltrace.ExportTraceServiceResponse
		if again.ct == "application/json" {
			err = protojson.Unmarshal(out, &resp)
		} else {
			err = proto.Unmarshal(out, &resp)
		}
		if err != nil || resp.GetPartialSuccess().GetRejectedSpans() != 0 {
			t.Fatalf("%v %v", err, &resp)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, f.projectID); n != 2 {
		t.Fatalf("a resent batch was stored again: %d events", n)
	}
	if n := f.count(t, `SELECT sum(event_count) FROM incidents WHERE project_id = ?`, f.projectID); n != 2 {
		t.Fatalf("a resent batch was counted again: %d", n)
	}

	// An environment without a binding: refused per span, named.
	st, _, out = otlpPost(t, url, "application/x-protobuf", f.token, mustProto(t, strings.ReplaceAll(otlpSpanJSON, "ENV", "qa")))
	var resp coltrace.ExportTraceServiceResponse
	if st != 200 || proto.Unmarshal(out, &resp) != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1 ||
		!strings.HasPrefix(resp.GetPartialSuccess().GetErrorMessage(), "2 refused no_binding: ") || !strings.Contains(resp.GetPartialSuccess().GetErrorMessage(), "'qa'") {
		t.Fatalf("%d %v", st, &resp)
	}

	// A browser key.
	stc, c := f.api(t, f.owner.Token, "POST", "/api/private/projects/"+f.projectID+"/connections",
		map[string]any{"name": "web", "kind": "browser", "allowed_origins": []string{"https://shop.example"}})
	if stc != http.StatusCreated {
		t.Fatal(stc, c)
	}
	refusals := []struct {
		name, ct, token string
		body            []byte
		status          int
		code            int32
		msg             string
		hdr             []string
	}{
		{"wrong token", "application/x-protobuf", "anv_srv_" + strings.Repeat("x", 32), pb, 401, 16, "unauthorized: ", nil},
		{"no token", "application/json", "", body, 401, 16, "unauthorized: ", nil},
		{"browser key", "application/json", c["token"].(string), body, 403, 7, "browser_key_refused: ", nil},
		{"browser key in protobuf", "application/x-protobuf", c["token"].(string), pb, 403, 7, "browser_key_refused: ", nil},
		{"server token in a page", "application/json", f.token, body, 403, 7, "origin_refused: ", []string{"Origin", "https://shop.example"}},
		{"not protobuf", "application/x-protobuf", f.token, []byte("\xff\xff\xff"), 400, 3, "bad_request: ", nil},
		{"not gzip", "application/json", f.token, body, 400, 3, "bad_request: ", []string{"Content-Encoding", "gzip"}},
		{"media type", "text/plain", f.token, body, 415, 3, "bad_request: unsupported media type", nil},
	}
	for _, r := range refusals {
		st, ct, out := otlpPost(t, url, r.ct, r.token, r.body, r.hdr...)
		var s status.Status
		wantCT := r.ct
		if wantCT == "text/plain" {
			wantCT = "application/x-protobuf"
		}
		if wantCT == "application/json" {
			err = protojson.Unmarshal(out, &s)
		} else {
			err = proto.Unmarshal(out, &s)
		}
		if st != r.status || ct != wantCT || err != nil || s.GetCode() != r.code || !strings.HasPrefix(s.GetMessage(), r.msg) {
			t.Fatalf("%s: %d %s %v %q", r.name, st, ct, err, out)
		}
	}
	// Logs share the contract: an INFO log is dropped, nothing refused.
	st, _, out = otlpPost(t, f.srv.URL+"/api/otlp/v1/logs", "application/json", f.token,
		[]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"severityNumber":9,"body":{"stringValue":"ok"}}]}]}]}`))
	if st != 200 || string(out) != "{}" {
		t.Fatalf("%d %s", st, out)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, f.projectID); n != 2 {
		t.Fatalf("%d events", n)
	}
}

// decodeTracesJSON reads OTLP/JSON through the door's own reading, so that
// the hex ids are ids.
func decodeTracesJSON(b []byte) (*coltrace.ExportTraceServiceRequest, error) {
	return otlp.DecodeTraces(otlp.JSON, b)
}

func mustProto(t *testing.T, js string) []byte {
	t.Helper()
	req, err := decodeTracesJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := proto.Marshal(req)
	return b
}

// The Feed page shows a new server connection's OpenTelemetry environment,
// with its token and a bound environment.
func TestOTLPSnippetOnFeedPage(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	br := f.browser(t)
	br.login("owner@acme.test", testPassword)
	tok := br.csrf("/projects/" + f.projectID + "/feed")
	res, page := br.post("/projects/"+f.projectID+"/feed/connections", url.Values{"_csrf": {tok}, "name": {"otel-service"}})
	if res.StatusCode == http.StatusSeeOther {
		_, page = br.get(res.Header.Get("Location"))
	}
	token := regexp.MustCompile(`anv_srv_[0-9A-Za-z]{32}`).FindString(page)
	want := "OTEL_EXPORTER_OTLP_ENDPOINT=http://anvil.test/api/otlp\nOTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf\n" +
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20" + token + "\nOTEL_RESOURCE_ATTRIBUTES=deployment.environment=production"
	if token == "" || !strings.Contains(page, `data-testid="otel-env"`) || !strings.Contains(page, want) {
		t.Fatalf("no OpenTelemetry snippet with the token %q", token)
	}
	// Shown once, like the token.
	if _, again := br.get("/projects/" + f.projectID + "/feed"); strings.Contains(again, `data-testid="otel-env"`) {
		t.Fatal("the snippet was shown twice")
	}
}

// The OpenTelemetry door's answers are counted per reason on the Feed
// page, with the connection's other doors.
func TestOTLPOutcomesOnFeedPage(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	url := f.srv.URL + "/api/otlp/v1/traces"
	if st, _, out := otlpPost(t, url, "application/json", f.token, []byte(strings.ReplaceAll(otlpSpanJSON, "ENV", "production"))); st != 200 {
		t.Fatal(st, string(out))
	}
	if st, _, out := otlpPost(t, url, "application/json", f.token, []byte(strings.ReplaceAll(strings.ReplaceAll(otlpSpanJSON, "ENV", "qa"), "eee19b7ec3c1b174", "eee19b7ec3c1b175"))); st != 200 {
		t.Fatal(st, string(out))
	}
	if st, _, _ := otlpPost(t, url, "application/json", f.token, []byte(otlpSpanJSON), "Origin", "https://shop.example"); st != 403 {
		t.Fatal(st)
	}
	br := f.browser(t)
	br.login("owner@acme.test", testPassword)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, page := br.get("/projects/" + f.projectID + "/feed")
		row := rowOf(page, "shop-api")
		if strings.Contains(row, ">2 accepted<") && strings.Contains(row, `data-reason="no_binding">2 no_binding<`) &&
			strings.Contains(row, `data-reason="origin_refused">1 origin_refused<`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outcomes not on the page:\n%s", row)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Not armed, the OTLP paths are the feed's plain 404; armed, so is every
// other path under /api/otlp.
func TestOTLPNotArmed(t *testing.T) {
	t.Parallel()
	opts := testOptions()
	opts.FeedArmed = false
	off := setupWith(t, opts)
	on := setup(t)
	for _, c := range []struct {
		base, path string
	}{{off.srv.URL, "/api/otlp/v1/traces"}, {off.srv.URL, "/api/otlp/v1/logs"}, {on.srv.URL, "/api/otlp/v1/metrics"}, {on.srv.URL, "/api/otlp"}} {
		if st, _, out := otlpPost(t, c.base+c.path, "application/json", "", []byte("{}")); st != http.StatusNotFound || !strings.Contains(string(out), "not_found") {
			t.Fatalf("%s: %d %s", c.path, st, out)
		}
	}
}

// The project's daily budget holds at the OTLP door: after the decode, an
// export whose exceptions would pass it is refused whole and stores
// nothing: 429, RESOURCE_EXHAUSTED, in the request's encoding.
func TestOTLPDailyBudget(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	if st, out := f.api(t, f.owner.Token, "PUT", "/api/private/projects/"+f.projectID+"/retention", map[string]any{"daily_event_budget": 3}); st != 200 {
		t.Fatalf("budget: %d %v", st, out)
	}
	url := f.srv.URL + "/api/otlp/v1/traces"
	body := strings.ReplaceAll(otlpSpanJSON, "ENV", "production")
	if st, _, out := otlpPost(t, url, "application/json", f.token, []byte(body)); st != 200 {
		t.Fatalf("2 of 3: %d %s", st, out)
	}
	st, ct, out := otlpPost(t, url, "application/x-protobuf", f.token, mustProto(t, strings.ReplaceAll(body, "eee19b7ec3c1b174", "eee19b7ec3c1b175")))
	var s status.Status
	if st != 429 || ct != "application/x-protobuf" || proto.Unmarshal(out, &s) != nil || s.GetCode() != 8 || !strings.HasPrefix(s.GetMessage(), "daily_event_budget: ") {
		t.Fatalf("4 of 3: %d %s %q", st, ct, out)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, f.projectID); n != 2 {
		t.Fatalf("%d events stored; want 2", n)
	}
}

// One small request cannot make the web tier allocate without bound: a few
// hundred bytes of gzip holding a 128 KiB resource attribute and 2,000
// exception spans cost the server a small multiple of the body bound
// (before the bounds: the resource copied into every event, about 500 MiB),
// and the exceptions past the batch bound are counted in partial_success.
// Not parallel: TotalAlloc is the process's, and the package's parallel
// tests wait until the sequential ones have run.
func TestOTLPAmplifiedRequest(t *testing.T) {
	f := newFeedFix(t, setup(t))
	spans := make([]map[string]any, 2000)
	for i := range spans {
		spans[i] = map[string]any{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "pay",
			"events": []any{map[string]any{"name": "exception", "attributes": []any{
				map[string]any{"key": "exception.type", "value": map[string]any{"stringValue": "E"}}}}}}
	}
	js, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{
		"resource": map[string]any{"attributes": []any{
			map[string]any{"key": "service.name", "value": map[string]any{"stringValue": "checkout"}},
			map[string]any{"key": "big", "value": map[string]any{"stringValue": strings.Repeat("a", 128<<10)}}}},
		"scopeSpans": []any{map[string]any{"spans": spans}}}}})
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	_, _ = zw.Write(mustProto(t, string(js)))
	_ = zw.Close()
	if zb.Len() > 1024 {
		t.Fatalf("%d bytes of gzip", zb.Len())
	}
	const bodyBound = 1 << 20 // ANVIL_FEED_MAX_ENVELOPE's default
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st, _, out := otlpPost(t, f.srv.URL+"/api/otlp/v1/traces", "application/x-protobuf", f.token, zb.Bytes(), "Content-Encoding", "gzip")
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of gzip: %d bytes allocated", zb.Len(), alloc)
	var resp coltrace.ExportTraceServiceResponse
	if st != 200 || proto.Unmarshal(out, &resp) != nil || resp.GetPartialSuccess().GetRejectedSpans() != 1950 ||
		!strings.HasPrefix(resp.GetPartialSuccess().GetErrorMessage(), "1950 refused payload_too_large: ") {
		t.Fatalf("%d %v", st, &resp)
	}
	if alloc > 16*bodyBound {
		t.Fatalf("one request of %d bytes allocated %d bytes", zb.Len(), alloc)
	}
	if n := f.count(t, `SELECT count(*) FROM feed_events WHERE project_id = ?`, f.projectID); n != 1 {
		t.Fatalf("%d events", n)
	}
}

// An OTel event's trace_id and span_id stay on the event, never among the
// incident's top tags: each names one trace.
func TestOTLPTraceIDsAreNotTopTags(t *testing.T) {
	t.Parallel()
	f := newFeedFix(t, setup(t))
	body := []byte(strings.ReplaceAll(otlpSpanJSON, "ENV", "production"))
	if st, _, out := otlpPost(t, f.srv.URL+"/api/otlp/v1/traces", "application/json", f.token, body); st != 200 {
		t.Fatalf("%d %s", st, out)
	}
	incs := f.incidents(t)
	if len(incs) == 0 {
		t.Fatal("no incident")
	}
	for _, inc := range incs {
		st, sp := f.api(t, f.owner.Token, "GET", "/api/private/incidents/"+inc.ID.String()+"/spread", nil)
		if st != http.StatusOK {
			t.Fatalf("spread: %d %v", st, sp)
		}
		for _, tag := range sp["top_tags"].([]any) {
			if k := tag.(map[string]any)["key"]; k == "trace_id" || k == "span_id" {
				t.Errorf("%s is a top tag: %v", k, sp["top_tags"])
			}
		}
	}
	var n int
	if err := f.db.Bun.NewRaw(`SELECT count(*) FROM feed_events WHERE project_id = ? AND jsonb_exists((payload::json->'tags')::jsonb, 'trace_id')`, f.projectID).Scan(context.Background(), &n); err != nil || n == 0 {
		t.Fatalf("the events lost their trace_id tag: %d %v", n, err)
	}
}
