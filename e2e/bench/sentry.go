package main

// The Sentry door's figures: single-event gzip envelopes through the Sentry door
// against single-event POST /api/feed/events, in the same run, against a
// real `anvil serve`.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

func init() {
	register("sentry/envelopes", sentryBench)
}

const (
	sentryBenchSenders  = 8   // concurrent senders, one connection each per door
	sentryBenchRequests = 400 // timed single-event requests per sender and door (below the 600/min budget)
	sentryBenchTurns    = 2   // turns per door, each with its share of the requests
)

// sentryBenchEvent is feedBenchEvent as sentry-python would send it.
func sentryBenchEvent(i int) map[string]any {
	frames := make([]any, 8)
	for f := range frames {
		frames[f] = map[string]any{"filename": fmt.Sprintf("shop/service%d.py", f), "lineno": 10 + f, "function": fmt.Sprintf("call%d", i%10),
			"context_line": "total = cart.total()", "in_app": f >= 4, "vars": map[string]any{"cart": "None"}}
	}
	return map[string]any{"event_id": strings.ReplaceAll(uuid.NewString(), "-", ""), "timestamp": float64(time.Now().UnixMicro()) / 1e6,
		"level": "error", "platform": "python", "server_name": "shop-api", "release": "2026.9.3", "environment": "production",
		"exception": map[string]any{"values": []any{map[string]any{"type": fmt.Sprintf("AttributeError%d", i%10),
			"value": "'NoneType' object has no attribute 'total'; Authorization: Bearer abc.def.ghi", "stacktrace": map[string]any{"frames": frames}}}},
		"request":     map[string]any{"method": "POST", "url": "https://shop.example/api/checkout"},
		"user":        map[string]any{"id": "u-4711"},
		"breadcrumbs": map[string]any{"values": []any{map[string]any{"category": "cart", "message": "add sku=A1"}}},
		"tags":        map[string]any{"tier": "gold"}, "sdk": map[string]any{"name": "sentry.python", "version": "2.19.0"},
		"contexts": map[string]any{"runtime": map[string]any{"name": "CPython", "version": "3.12.3"}}}
}

func sentryBench(ctx context.Context, env *benchEnv) error {
	// One connection per sender and door: each has its own 600/min budget.
	f, err := env.newFeedFixture(ctx, "bench@sentry.test", 2*sentryBenchSenders)
	if err != nil {
		return err
	}
	defer f.Stop()

	// Bodies are built before the clock starts: the native event, and the
	// Sentry one as a gzip envelope; each turn's share, its warm-up first.
	const turn = sentryBenchRequests / sentryBenchTurns
	native := make([][][]byte, sentryBenchSenders)
	envelopes := make([][][]byte, sentryBenchSenders)
	n := 0
	for s := range native {
		native[s] = make([][]byte, sentryBenchTurns*(turn+1))
		envelopes[s] = make([][]byte, sentryBenchTurns*(turn+1))
		for r := range native[s] {
			native[s][r], _ = json.Marshal(feedBenchEvent(n))
			ev, _ := json.Marshal(sentryBenchEvent(n))
			n++
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			fmt.Fprintf(zw, "{\"sent_at\":%q}\n{\"type\":\"event\",\"length\":%d}\n%s\n", time.Now().UTC().Format(time.RFC3339), len(ev), ev)
			zw.Close()
			envelopes[s][r] = buf.Bytes()
		}
	}
	envelopeURL := f.Server.URL + "/api/" + strconv.FormatInt(f.ProjectNumber, 10) + "/envelope/"
	postNative := func(t, s, r int) (int, error) {
		return feedBenchPost(ctx, f, "/api/feed/events", f.Tokens[s], native[s][t*(turn+1)+r])
	}
	postSentry := func(t, s, r int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", envelopeURL, bytes.NewReader(envelopes[s][t*(turn+1)+r]))
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=sentry.python/2.19.0, sentry_key="+f.Tokens[sentryBenchSenders+s])
		req.Header.Set("Content-Type", "application/x-sentry-envelope")
		req.Header.Set("Content-Encoding", "gzip")
		return sentryBenchDo(f.Client, req, `{"id":"`)
	}

	// The doors take turns, native–Sentry–Sentry–native: a door measured
	// later meets a fuller database (more rows, more dead versions of the
	// incidents, autovacuum at work), and measured second either door
	// cost Postgres 15–20 % more CPU per request than measured first. In
	// this order both meet the same database on average.
	var nativeLoad, sentryLoad feedLoad
	turns := map[string]int{}
	for _, door := range []string{"native", "sentry", "sentry", "native"} {
		t := turns[door]
		turns[door]++
		post, into := postNative, &nativeLoad
		if door == "sentry" {
			post, into = postSentry, &sentryLoad
		}
		load, err := f.Load(ctx, sentryBenchSenders, turn, func(s, r int) (int, error) { return post(t, s, r) })
		if err != nil {
			return fmt.Errorf("%s door, turn %d: %w", door, t+1, err)
		}
		*into = into.add(load)
	}
	nativeEPS, sentryEPS := nativeLoad.PerSecond(), sentryLoad.PerSecond()
	env.note("sentry", "events_per_door", float64(sentryBenchSenders*sentryBenchRequests))
	env.note("sentry", "native_single_events_per_s", float64(int(nativeEPS)))
	env.note("sentry", "native_single_p50_ms", ms(percentile(nativeLoad.Latencies, 50)))
	env.note("sentry", "native_single_p99_ms", ms(percentile(nativeLoad.Latencies, 99)))
	noteCPU(env, "sentry", "native", nativeLoad)
	env.note("sentry", "sentry_gzip_envelopes_per_s", float64(int(sentryEPS)))
	env.reportAtLeast("sentry", "sentry_to_native_ratio", float64(int(sentryEPS/nativeEPS*100))/100, 0.8)
	env.report("sentry", "sentry_p50_ms", ms(percentile(sentryLoad.Latencies, 50)), 50)
	env.report("sentry", "sentry_p99_ms", ms(percentile(sentryLoad.Latencies, 99)), 50)
	noteCPU(env, "sentry", "sentry", sentryLoad)
	return nil
}

// sentryBenchDo sends a request and checks that it is a 200 whose answer
// holds prefix; an accepted event counts one.
func sentryBenchDo(client *http.Client, req *http.Request, prefix string) (int, error) {
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), prefix) {
		return 0, fmt.Errorf("%s: status %d: %s", req.URL.Path, res.StatusCode, b)
	}
	return 1, nil
}
