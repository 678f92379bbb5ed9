package main

// Alerts under the feed's load (issue 21): the feed bench's 8 senders, with
// and without a destination whose rule is on new incidents only, 1,000
// distinct incidents created. Every alert must arrive once, and the feed's
// events/s stay within 5 % of the run without alerts.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"anvil/domain"
)

func init() {
	register("alerts/feed_load", alertsBench)
}

const alertsBenchIncidents = 1000

// alertsBenchEvent is the feed bench's event, one of 1,000 faults.
func alertsBenchEvent(i int) map[string]any {
	ev := feedBenchEvent(i)
	ev["exception"].(map[string]any)["type"] = fmt.Sprintf("java.lang.NullPointerException%d", i%alertsBenchIncidents)
	return ev
}

func alertsBench(ctx context.Context, env *benchEnv) error {
	without, err := alertsBenchRun(ctx, env, false)
	if err != nil {
		return fmt.Errorf("without alerts: %w", err)
	}
	with, err := alertsBenchRun(ctx, env, true)
	if err != nil {
		return fmt.Errorf("with alerts: %w", err)
	}
	env.note("alerts", "feed_events_per_s_without_alerts", float64(int(without.eps)))
	env.note("alerts", "feed_events_per_s_with_alerts", float64(int(with.eps)))
	env.reportAtLeast("alerts", "events_per_s_ratio_with_to_without", float64(int(with.eps/without.eps*1000))/1000, 0.95)
	env.reportAtLeast("alerts", "new_incident_alerts_delivered", float64(with.delivered), alertsBenchIncidents)
	env.report("alerts", "alerts_delivered_twice", float64(with.dupes), 0)
	// What the wall clock cannot say on a shared machine: the CPU time per
	// event while the feed ran, and, with alerts, until the last arrived.
	env.notePerEvent("alerts", "without_feed", without.feed, without.events)
	env.notePerEvent("alerts", "with_feed", with.feed, with.events)
	env.notePerEvent("alerts", "with_until_delivered", with.total, with.events)
	return nil
}

// alertsBenchResult is one run's figures.
type alertsBenchResult struct {
	eps              float64 // accepted events/s
	events           int64   // events accepted while timed
	delivered, dupes int     // distinct incidents alerted; alerts that arrived more than once
	feed, total      cost    // while the feed ran; until the last alert arrived (with alerts)
}

// alertsBenchRun runs the feed load on a fresh database and server and
// returns the accepted events/s, what they cost, and, with alerts, how
// many distinct incidents were alerted and how many alerts arrived more
// than once.
func alertsBenchRun(ctx context.Context, env *benchEnv, alerts bool) (res alertsBenchResult, err error) {
	fail := func(err error) (alertsBenchResult, error) { return alertsBenchResult{}, err }
	dbURL, err := env.newDatabase(ctx)
	if err != nil {
		return fail(err)
	}
	if _, err := env.run(ctx, dbURL, "", "migrate"); err != nil {
		return fail(err)
	}
	pat, err := env.bootstrap(ctx, dbURL, "bench", "bench@alerts.test", "correct horse battery")
	if err != nil {
		return fail(err)
	}
	// The storm bound is lifted: the figure is about delivering every alert.
	p, err := env.startWith(dbURL, "ANVIL_ALERTS_PER_MINUTE=1000000")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = p.stop() }()
	if err := p.waitReady(ctx); err != nil {
		return fail(err)
	}
	var project struct {
		ID string `json:"id"`
	}
	if err := feedBenchAPI(ctx, "POST", p.URL+"/api/private/projects", pat, map[string]any{"slug": "shop", "name": "Shop",
		"repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "true"}, 201, &project); err != nil {
		return fail(err)
	}
	if err := feedBenchAPI(ctx, "PUT", p.URL+"/api/private/projects/"+project.ID+"/bindings/production", pat,
		map[string]any{"repair_policy": "observe"}, 200, nil); err != nil {
		return fail(err)
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Data struct {
				Incident struct {
					ID string `json:"id"`
				} `json:"incident"`
			} `json:"data"`
		}
		_ = json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		seen[m.Data.Incident.ID]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	if alerts {
		if err := feedBenchAPI(ctx, "POST", p.URL+"/api/private/alerts/destinations", pat,
			map[string]any{"name": "bench", "kind": "webhook", "url": rcv.URL}, 201, nil); err != nil {
			return fail(err)
		}
		var rules []map[string]any
		for _, k := range domain.AlertKinds {
			rules = append(rules, map[string]any{"kind": k, "enabled": k == domain.AlertIncidentNew})
		}
		if err := feedBenchAPI(ctx, "PUT", p.URL+"/api/private/projects/"+project.ID+"/alert-rules", pat,
			map[string]any{"rules": rules}, 200, nil); err != nil {
			return fail(err)
		}
	}
	tokens := make([]string, feedBenchSenders)
	for i := range tokens {
		var c struct {
			Token string `json:"token"`
		}
		if err := feedBenchAPI(ctx, "POST", p.URL+"/api/private/projects/"+project.ID+"/connections", pat, map[string]any{"name": fmt.Sprintf("sender-%d", i)}, 201, &c); err != nil {
			return fail(err)
		}
		tokens[i] = c.Token
	}
	bodies := make([][][]byte, feedBenchSenders)
	n := 0
	for s := range bodies {
		bodies[s] = make([][]byte, feedBenchBatches+1)
		for b := range bodies[s] {
			evs := make([]any, feedBenchBatch)
			for e := range evs {
				evs[e] = alertsBenchEvent(n)
				n++
			}
			bodies[s][b], _ = json.Marshal(evs)
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: feedBenchSenders * 2}}
	post := func(token string, body []byte) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/api/feed/events/batch", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		var out struct {
			Accepted []string `json:"accepted"`
		}
		err = json.NewDecoder(res.Body).Decode(&out)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			return 0, fmt.Errorf("status %d\n%s", res.StatusCode, lastLines(p.logs.String()))
		}
		return len(out.Accepted), err
	}
	for s := range tokens { // warm-up
		if _, err := post(tokens[s], bodies[s][0]); err != nil {
			return fail(fmt.Errorf("warm-up: %w", err))
		}
	}
	checkpoint(ctx, dbURL)
	meter, err := newCostMeter(ctx, dbURL, p.Pid())
	if err != nil {
		return fail(err)
	}
	defer meter.close(ctx)
	before, err := meter.read(ctx)
	if err != nil {
		return fail(err)
	}
	var (
		accepted atomic.Int64
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for s := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 1; b <= feedBenchBatches; b++ {
				k, err := post(tokens[s], bodies[s][b])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				accepted.Add(int64(k))
			}
		}()
	}
	wg.Wait()
	res.events = accepted.Load()
	res.eps = float64(res.events) / time.Since(start).Seconds()
	if firstErr != nil {
		return fail(firstErr)
	}
	after, err := meter.read(ctx)
	if err != nil {
		return fail(err)
	}
	res.feed = after.sub(before)
	if !alerts {
		return res, nil
	}
	// Every new incident's alert arrives (bounded wait), then a little
	// longer to catch any second copy.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		if got >= alertsBenchIncidents || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	last, err := meter.read(ctx)
	if err != nil {
		return fail(err)
	}
	res.total = last.sub(before)
	time.Sleep(2 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	for _, c := range seen {
		res.dupes += c - 1
	}
	res.delivered = len(seen)
	return res, nil
}
