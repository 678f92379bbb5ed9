package main

// Browser keys' figures (docs/contracts/feed.md): single events through the Sentry door with a browser
// key (sentry_key in the query, text/plain, an Origin from the allowed
// list — what @sentry/browser sends) against the same events with a
// server key in the same run, and the CORS preflight's latency.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

func init() {
	register("browser/keys", browserBench)
}

const (
	browserBenchSenders    = 8   // concurrent senders, one connection each per kind
	browserBenchRequests   = 400 // timed single-event requests per sender and kind (below the 600/min budget)
	browserBenchTurns      = 2   // turns per kind
	browserBenchPreflights = 2000
	browserBenchOrigin     = "https://shop.example"
)

// browserBenchEvent is what @sentry/browser 11 sends for an uncaught error.
func browserBenchEvent(i int) map[string]any {
	frames := make([]any, 8)
	for f := range frames {
		frames[f] = map[string]any{"filename": "https://shop.example/assets/app.min.js", "abs_path": "https://shop.example/assets/app.min.js",
			"lineno": 1, "colno": 100 * (f + 1), "function": fmt.Sprintf("fn%d", i%10), "in_app": true}
	}
	return map[string]any{"event_id": strings.ReplaceAll(uuid.NewString(), "-", ""), "timestamp": float64(time.Now().UnixMicro()) / 1e6,
		"level": "error", "platform": "javascript", "release": "shop-web@2.0.0", "environment": "production",
		"exception": map[string]any{"values": []any{map[string]any{"type": fmt.Sprintf("TypeError%d", i%10),
			"value": "Cannot read properties of undefined (reading 'total')", "mechanism": map[string]any{"type": "onerror", "handled": false},
			"stacktrace": map[string]any{"frames": frames}}}},
		"request": map[string]any{"url": "https://shop.example/cart", "headers": map[string]any{
			"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/136.0.0.0 Safari/537.36"}},
		"sdk": map[string]any{"name": "sentry.javascript.browser", "version": "11.12.0"}}
}

func browserBench(ctx context.Context, env *benchEnv) error {
	// The per-address bound is lifted: every sender here is one loopback
	// address, and the figure is the cost of the browser path, not of
	// refusals.
	f, err := env.newFeedFixture(ctx, "bench@browser.test", browserBenchSenders, "ANVIL_FEED_BROWSER_RATE_PER_MIN=1000000")
	if err != nil {
		return err
	}
	defer f.Stop()
	pub := make([]string, browserBenchSenders)
	for i := range pub {
		var c struct {
			Token string `json:"token"`
		}
		if err := f.API(ctx, "POST", "/api/private/projects/"+f.ProjectID+"/connections", map[string]any{"name": fmt.Sprintf("web-%d", i),
			"kind": "browser", "allowed_origins": []string{browserBenchOrigin}}, 201, &c); err != nil {
			return err
		}
		pub[i] = c.Token
	}

	const turn = browserBenchRequests / browserBenchTurns
	bodies := make([][][]byte, browserBenchSenders)
	for s := range bodies {
		bodies[s] = make([][]byte, 2*browserBenchTurns*(turn+1))
		for r := range bodies[s] {
			ev, _ := json.Marshal(browserBenchEvent(r))
			bodies[s][r] = fmt.Appendf(nil, "{\"sent_at\":%q}\n{\"type\":\"event\",\"length\":%d}\n%s\n", time.Now().UTC().Format(time.RFC3339), len(ev), ev)
		}
	}
	envelopeURL := f.Server.URL + "/api/" + strconv.FormatInt(f.ProjectNumber, 10) + "/envelope/"
	postBrowser := func(t, s, r int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", envelopeURL+"?sentry_version=7&sentry_client=sentry.javascript.browser%2F11.12.0&sentry_key="+pub[s],
			bytes.NewReader(bodies[s][t*(turn+1)+r]))
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
		req.Header.Set("Origin", browserBenchOrigin)
		return sentryBenchDo(f.Client, req, `{"id":"`)
	}
	postServer := func(t, s, r int) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", envelopeURL, bytes.NewReader(bodies[s][(browserBenchTurns+t)*(turn+1)+r]))
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=sentry.javascript.node/11.12.0, sentry_key="+f.Tokens[s])
		req.Header.Set("Content-Type", "application/x-sentry-envelope")
		return sentryBenchDo(f.Client, req, `{"id":"`)
	}
	// Taking turns, browser–server–server–browser, so both kinds meet the
	// same database on average (see sentry.go).
	var browserLoad, serverLoad feedLoad
	turns := map[string]int{}
	for _, kind := range []string{"browser", "server", "server", "browser"} {
		t := turns[kind]
		turns[kind]++
		post, into := postBrowser, &browserLoad
		if kind == "server" {
			post, into = postServer, &serverLoad
		}
		load, err := f.Load(ctx, browserBenchSenders, turn, func(s, r int) (int, error) { return post(t, s, r) })
		if err != nil {
			return fmt.Errorf("%s keys, turn %d: %w", kind, t+1, err)
		}
		*into = into.add(load)
	}
	browserEPS, serverEPS := browserLoad.PerSecond(), serverLoad.PerSecond()
	env.note("browser", "events_per_kind", float64(browserBenchSenders*browserBenchRequests))
	env.note("browser", "server_key_events_per_s", float64(int(serverEPS)))
	env.note("browser", "browser_key_events_per_s", float64(int(browserEPS)))
	env.reportAtLeast("browser", "browser_to_server_key_ratio", float64(int(browserEPS/serverEPS*100))/100, 0.9)
	env.note("browser", "browser_key_p99_ms", ms(percentile(browserLoad.Latencies, 99)))

	// Preflights, one after another as a page's first report sends one.
	lat := make([]time.Duration, 0, browserBenchPreflights)
	for i := 0; i < browserBenchPreflights; i++ {
		req, _ := http.NewRequestWithContext(ctx, "OPTIONS", f.Server.URL+"/api/feed/events", nil)
		req.Header.Set("Origin", browserBenchOrigin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
		start := time.Now()
		res, err := f.Client.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		lat = append(lat, time.Since(start))
		if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != browserBenchOrigin {
			return fmt.Errorf("preflight: %d %v", res.StatusCode, res.Header)
		}
	}
	lat = sortDurations(lat)
	env.note("browser", "preflight_p50_ms", ms(percentile(lat, 50)))
	env.report("browser", "preflight_p99_ms", ms(percentile(lat, 99)), 5)
	return nil
}
