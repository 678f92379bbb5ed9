package main

// The OpenTelemetry door's figure (docs/otlp.md): single-exception OTLP
// protobuf requests (one span with one exception event, gzip, as an
// exporter posts them) against single-event gzip envelopes through the
// Sentry door, in the same run, against a real `anvil serve`. The goal:
// OTLP events/s ≥ 0.8 × the Sentry door's.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	coltrace "go.opentelemetry.io/proto/slim/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/slim/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/slim/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

func init() {
	register("otlp/events", otlpBench)
}

func otlpStr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// otlpBenchRequest is sentryBenchEvent as an OTel Python SDK exports it:
// one server span with one recorded exception of eight frames.
func otlpBenchRequest(i int) []byte {
	var st strings.Builder
	st.WriteString("Traceback (most recent call last):\n")
	for f := 0; f < 8; f++ {
		fmt.Fprintf(&st, "  File \"/app/shop/service%d.py\", line %d, in call%d\n    total = cart.total()\n", f, 10+f, i%10)
	}
	fmt.Fprintf(&st, "AttributeError%d: 'NoneType' object has no attribute 'total'\n", i%10)
	id := uuid.New()
	now := uint64(time.Now().UnixNano())
	req := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{otlpStr("service.name", "shop-api"),
			otlpStr("deployment.environment.name", "production"), otlpStr("service.version", "2026.9.3"),
			otlpStr("telemetry.sdk.language", "python"), otlpStr("telemetry.sdk.name", "opentelemetry"), otlpStr("telemetry.sdk.version", "1.29.0")}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "opentelemetry.instrumentation.flask"},
			Spans: []*tracepb.Span{{TraceId: id[:], SpanId: id[:8], Name: "POST /api/checkout", Kind: tracepb.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: now - 1e6, EndTimeUnixNano: now,
				Attributes: []*commonpb.KeyValue{otlpStr("http.request.method", "POST"), otlpStr("url.full", "https://shop.example/api/checkout"),
					otlpStr("enduser.id", "u-4711"), otlpStr("tier", "gold")},
				Events: []*tracepb.Span_Event{{Name: "exception", TimeUnixNano: now, Attributes: []*commonpb.KeyValue{
					otlpStr("exception.type", fmt.Sprintf("AttributeError%d", i%10)),
					otlpStr("exception.message", "'NoneType' object has no attribute 'total'; Authorization: Bearer abc.def.ghi"),
					otlpStr("exception.stacktrace", st.String())}}},
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR}}}}},
	}}}
	b, _ := proto.Marshal(req)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func otlpBench(ctx context.Context, env *benchEnv) error {
	// One connection per sender and door: each has its own 600/min budget.
	f, err := env.newFeedFixture(ctx, "bench@otlp.test", 2*sentryBenchSenders)
	if err != nil {
		return err
	}
	defer f.Stop()

	// Bodies are built before the clock starts, each turn's share with its
	// warm-up first, as in sentry/envelopes.
	const turn = sentryBenchRequests / sentryBenchTurns
	envelopes := make([][][]byte, sentryBenchSenders)
	exports := make([][][]byte, sentryBenchSenders)
	n := 0
	for s := range envelopes {
		envelopes[s] = make([][]byte, sentryBenchTurns*(turn+1))
		exports[s] = make([][]byte, sentryBenchTurns*(turn+1))
		for r := range envelopes[s] {
			ev, _ := json.Marshal(sentryBenchEvent(n))
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			fmt.Fprintf(zw, "{\"sent_at\":%q}\n{\"type\":\"event\",\"length\":%d}\n%s\n", time.Now().UTC().Format(time.RFC3339), len(ev), ev)
			zw.Close()
			envelopes[s][r] = buf.Bytes()
			exports[s][r] = otlpBenchRequest(n)
			n++
		}
	}
	envelopeURL := f.Server.URL + "/api/" + strconv.FormatInt(f.ProjectNumber, 10) + "/envelope/"
	tracesURL := f.Server.URL + "/api/otlp/v1/traces"
	postSentry := func(t, s, r int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", envelopeURL, bytes.NewReader(envelopes[s][t*(turn+1)+r]))
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=sentry.python/2.19.0, sentry_key="+f.Tokens[s])
		req.Header.Set("Content-Type", "application/x-sentry-envelope")
		req.Header.Set("Content-Encoding", "gzip")
		return sentryBenchDo(f.Client, req, `{"id":"`)
	}
	postOTLP := func(t, s, r int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", tracesURL, bytes.NewReader(exports[s][t*(turn+1)+r]))
		req.Header.Set("Authorization", "Bearer "+f.Tokens[sentryBenchSenders+s])
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "gzip")
		// A full success is an empty ExportTraceServiceResponse: no bytes.
		return otlpBenchDo(f.Client, req)
	}

	// The doors take turns, Sentry–OTLP–OTLP–Sentry, so that both meet the
	// same database on average (see sentry/envelopes).
	var sentryLoad, otlpLoad feedLoad
	turns := map[string]int{}
	for _, door := range []string{"sentry", "otlp", "otlp", "sentry"} {
		t := turns[door]
		turns[door]++
		post, into := postSentry, &sentryLoad
		if door == "otlp" {
			post, into = postOTLP, &otlpLoad
		}
		load, err := f.Load(ctx, sentryBenchSenders, turn, func(s, r int) (int, error) { return post(t, s, r) })
		if err != nil {
			return fmt.Errorf("%s door, turn %d: %w", door, t+1, err)
		}
		*into = into.add(load)
	}
	sentryEPS, otlpEPS := sentryLoad.PerSecond(), otlpLoad.PerSecond()
	env.note("otlp", "events_per_door", float64(sentryBenchSenders*sentryBenchRequests))
	env.note("otlp", "sentry_gzip_envelopes_per_s", float64(int(sentryEPS)))
	noteCPU(env, "otlp", "sentry", sentryLoad)
	env.note("otlp", "otlp_gzip_protobuf_events_per_s", float64(int(otlpEPS)))
	env.reportAtLeast("otlp", "otlp_to_sentry_ratio", float64(int(otlpEPS/sentryEPS*100))/100, 0.8)
	env.report("otlp", "otlp_p50_ms", ms(percentile(otlpLoad.Latencies, 50)), 50)
	env.report("otlp", "otlp_p99_ms", ms(percentile(otlpLoad.Latencies, 99)), 50)
	noteCPU(env, "otlp", "otlp", otlpLoad)
	return nil
}

// otlpBenchDo sends an export and checks that it is a 200 without a
// partial_success (an empty protobuf answer); an accepted event counts one.
func otlpBenchDo(client *http.Client, req *http.Request) (int, error) {
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || b.Len() != 0 {
		return 0, fmt.Errorf("%s: status %d: %q", req.URL.Path, res.StatusCode, b.Bytes())
	}
	return 1, nil
}
