package main

// Alerts under the feed's load (issue 21): the feed bench's 8 senders, with
// and without a destination whose rule is on new incidents only, 1,000
// distinct incidents created. Every alert must arrive once, and the feed's
// events/s stay within 5 % of the run without alerts.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
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
	without, _, _, err := alertsBenchRun(ctx, env, false)
	if err != nil {
		return fmt.Errorf("without alerts: %w", err)
	}
	with, delivered, dupes, err := alertsBenchRun(ctx, env, true)
	if err != nil {
		return fmt.Errorf("with alerts: %w", err)
	}
	env.note("alerts", "feed_events_per_s_without_alerts", float64(int(without)))
	env.note("alerts", "feed_events_per_s_with_alerts", float64(int(with)))
	env.reportAtLeast("alerts", "events_per_s_ratio_with_to_without", float64(int(with/without*1000))/1000, 0.95)
	env.reportAtLeast("alerts", "new_incident_alerts_delivered", float64(delivered), alertsBenchIncidents)
	env.report("alerts", "alerts_delivered_twice", float64(dupes), 0)
	return nil
}

// alertsBenchRun runs the feed load on a fresh database and server and
// returns the accepted events/s and, with alerts, how many distinct
// incidents were alerted and how many alerts arrived more than once.
func alertsBenchRun(ctx context.Context, env *benchEnv, alerts bool) (float64, int, int, error) {
	// The storm bound is lifted: the figure is about delivering every alert.
	f, err := env.newFeedFixture(ctx, "bench@alerts.test", feedBenchSenders, "ANVIL_ALERTS_PER_MINUTE=1000000")
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Stop()
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
		if err := f.API(ctx, "POST", "/api/private/alerts/destinations",
			map[string]any{"name": "bench", "kind": "webhook", "url": rcv.URL}, 201, nil); err != nil {
			return 0, 0, 0, err
		}
		var rules []map[string]any
		for _, k := range domain.AlertKinds {
			rules = append(rules, map[string]any{"kind": k, "enabled": k == domain.AlertIncidentNew})
		}
		if err := f.API(ctx, "PUT", "/api/private/projects/"+f.ProjectID+"/alert-rules",
			map[string]any{"rules": rules}, 200, nil); err != nil {
			return 0, 0, 0, err
		}
	}
	bodies := feedBenchBodies(alertsBenchEvent)
	load, err := f.Load(ctx, feedBenchSenders, feedBenchBatches, func(s, b int) (int, error) {
		return feedBenchPost(ctx, f, "/api/feed/events/batch", f.Tokens[s], bodies[s][b])
	})
	if err != nil {
		return 0, 0, 0, err
	}
	eps := load.PerSecond()
	if !alerts {
		return eps, 0, 0, nil
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
	time.Sleep(2 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	dupes := 0
	for _, c := range seen {
		dupes += c - 1
	}
	return eps, len(seen), dupes, nil
}
