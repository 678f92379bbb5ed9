package main

// Issue 18's figures: single-event gzip envelopes through the Sentry door
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
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

func init() {
	register("issue18/sentry", sentryBench)
}

const (
	sentryBenchSenders  = 8   // concurrent senders, one connection each per door
	sentryBenchRequests = 400 // single-event requests per sender (below the 600/min budget)
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
	dbURL, err := env.newDatabase(ctx)
	if err != nil {
		return err
	}
	if _, err := env.run(ctx, dbURL, "", "migrate"); err != nil {
		return err
	}
	pat, err := env.bootstrap(ctx, dbURL, "bench", "bench@sentry.test", "correct horse battery")
	if err != nil {
		return err
	}
	p, err := env.serve(ctx, dbURL)
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	var project struct {
		ID     string `json:"id"`
		Number int64  `json:"number"`
	}
	if err := feedBenchAPI(ctx, "POST", p.URL+"/api/private/projects", pat, map[string]any{"slug": "shop", "name": "Shop",
		"repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "true"}, 201, &project); err != nil {
		return err
	}
	if err := feedBenchAPI(ctx, "PUT", p.URL+"/api/private/projects/"+project.ID+"/bindings/production", pat,
		map[string]any{"repair_policy": "observe"}, 200, nil); err != nil {
		return err
	}
	// One connection per sender and door: each has its own 600/min budget.
	tokens := make([]string, 2*sentryBenchSenders)
	for i := range tokens {
		var c struct {
			Token string `json:"token"`
		}
		if err := feedBenchAPI(ctx, "POST", p.URL+"/api/private/projects/"+project.ID+"/connections", pat, map[string]any{"name": fmt.Sprintf("sender-%d", i)}, 201, &c); err != nil {
			return err
		}
		tokens[i] = c.Token
	}

	// Bodies are built before the clock starts: the native event, and the
	// Sentry one as a gzip envelope.
	native := make([][][]byte, sentryBenchSenders)
	envelopes := make([][][]byte, sentryBenchSenders)
	n := 0
	for s := range native {
		native[s] = make([][]byte, sentryBenchRequests+1) // +1 warm-up
		envelopes[s] = make([][]byte, sentryBenchRequests+1)
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
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sentryBenchSenders * 2}}
	envelopeURL := p.URL + "/api/" + strconv.FormatInt(project.Number, 10) + "/envelope/"
	postNative := func(token string, body []byte) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/api/feed/events", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		return sentryBenchDo(client, req, http.StatusAccepted, `"accepted":["`)
	}
	postSentry := func(token string, body []byte) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", envelopeURL, bytes.NewReader(body))
		req.Header.Set("X-Sentry-Auth", "Sentry sentry_version=7, sentry_client=sentry.python/2.19.0, sentry_key="+token)
		req.Header.Set("Content-Type", "application/x-sentry-envelope")
		req.Header.Set("Content-Encoding", "gzip")
		return sentryBenchDo(client, req, http.StatusOK, `{"id":"`)
	}
	run := func(post func(string, []byte) error, tokens []string, bodies [][][]byte) (eps float64, lat []time.Duration, err error) {
		for s := range tokens { // warm-up: connections, prepared statements, incidents
			if err := post(tokens[s], bodies[s][0]); err != nil {
				return 0, nil, fmt.Errorf("warm-up: %w\n%s", err, lastLines(p.logs.String()))
			}
		}
		var (
			mu       sync.Mutex
			firstErr error
			wg       sync.WaitGroup
		)
		start := time.Now()
		for s := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := make([]time.Duration, 0, sentryBenchRequests)
				for r := 1; r <= sentryBenchRequests; r++ {
					t0 := time.Now()
					err := post(tokens[s], bodies[s][r])
					local = append(local, time.Since(t0))
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		if firstErr != nil {
			return 0, nil, fmt.Errorf("%w\n%s", firstErr, lastLines(p.logs.String()))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(len(lat)) / elapsed.Seconds(), lat, nil
	}

	checkpoint(ctx, dbURL)
	nativeEPS, nativeLat, err := run(postNative, tokens[:sentryBenchSenders], native)
	if err != nil {
		return fmt.Errorf("native door: %w", err)
	}
	checkpoint(ctx, dbURL)
	sentryEPS, sentryLat, err := run(postSentry, tokens[sentryBenchSenders:], envelopes)
	if err != nil {
		return fmt.Errorf("sentry door: %w", err)
	}
	env.note("issue18", "events_per_door", float64(sentryBenchSenders*sentryBenchRequests))
	env.note("issue18", "native_single_events_per_s", float64(int(nativeEPS)))
	env.note("issue18", "native_single_p99_ms", ms(percentile(nativeLat, 99)))
	env.note("issue18", "sentry_gzip_envelopes_per_s", float64(int(sentryEPS)))
	env.reportAtLeast("issue18", "sentry_to_native_ratio", float64(int(sentryEPS/nativeEPS*100))/100, 0.8)
	env.report("issue18", "sentry_p50_ms", ms(percentile(sentryLat, 50)), 50)
	env.report("issue18", "sentry_p99_ms", ms(percentile(sentryLat, 99)), 50)
	return nil
}

// sentryBenchDo sends a request and checks its status and the start of its
// answer.
func sentryBenchDo(client *http.Client, req *http.Request, want int, prefix string) error {
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != want || !strings.Contains(string(b), prefix) {
		return fmt.Errorf("%s: status %d: %s", req.URL.Path, res.StatusCode, b)
	}
	return nil
}
