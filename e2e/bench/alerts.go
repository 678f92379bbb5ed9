package main

// Alerts under the feed's load: the feed bench's 8 senders, with
// and without a destination whose rule is on new incidents only, 1,000
// distinct incidents created. Every alert must arrive once, and the feed's
// events/s stay within 5 % of the runs without alerts. Beside the rates,
// what an event cost in CPU while the feed ran and, with alerts, until the
// last alert arrived: steadier than the rates on a shared machine.

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

// alertsBenchOrder is the order of the runs, each on a fresh database and
// server: a machine that others load slows a stretch of time, not a kind
// of run, and in this order both kinds meet it alike on average (each
// kind's figures are the mean of its two runs).
var alertsBenchOrder = []bool{false, true, true, false}

func alertsBench(ctx context.Context, env *benchEnv) error {
	var runs [2][]alertsBenchResult // [0] without alerts, [1] with
	for i, alerts := range alertsBenchOrder {
		res, err := alertsBenchRun(ctx, env, alerts)
		if err != nil {
			return fmt.Errorf("run %d (alerts %t): %w", i+1, alerts, err)
		}
		k := 0
		if alerts {
			k = 1
		}
		runs[k] = append(runs[k], res)
	}
	without, with := alertsBenchMean(runs[0]), alertsBenchMean(runs[1])
	env.note("alerts", "feed_events_per_s_without_alerts", float64(int(without.eps)))
	env.note("alerts", "feed_events_per_s_with_alerts", float64(int(with.eps)))
	env.reportAtLeast("alerts", "events_per_s_ratio_with_to_without", float64(int(with.eps/without.eps*1000))/1000, 0.95)
	env.reportAtLeast("alerts", "new_incident_alerts_delivered", float64(with.delivered), alertsBenchIncidents)
	env.report("alerts", "alerts_delivered_twice", float64(with.dupes), 0)
	// What the wall clock cannot say on a shared machine: the CPU time per
	// event while the feed ran, and, with alerts, until the last arrived;
	// and Postgres' transactions and rows per 1,000 events without alerts
	// and with them (counted until the last arrived).
	noteCost := func(run string, c cost, events int64, counts bool) {
		us := func(d time.Duration) float64 {
			return float64(int(float64(d.Nanoseconds())/1e3/float64(events)*100)) / 100
		}
		env.note("alerts", run+"_server_cpu_us_per_event", us(c.Server))
		env.note("alerts", run+"_postgres_cpu_us_per_event", us(c.Postgres))
		env.note("alerts", run+"_bench_cpu_us_per_event", us(c.Bench))
		if counts {
			per1000 := func(n int64) float64 { return float64(int(float64(n)*1000/float64(events)*10)) / 10 }
			env.note("alerts", run+"_xacts_per_1000_events", per1000(c.Xacts))
			env.note("alerts", run+"_rows_per_1000_events", per1000(c.Rows))
		}
	}
	noteCost("without", without.feed, without.events, true)
	noteCost("with", with.feed, with.events, false)
	noteCost("with_all", with.total, with.events, true) // until the last alert arrived
	return nil
}

// alertsBenchResult is one run's figures, or the mean of a kind's runs.
type alertsBenchResult struct {
	eps              float64 // accepted events/s
	events           int64   // events accepted while timed
	delivered, dupes int     // distinct incidents alerted; alerts that arrived more than once
	// feed is what the feed cost while it ran (without alerts, its
	// transactions and rows complete); total, with alerts, until the last
	// alert arrived (its transactions and rows complete).
	feed, total cost
}

// alertsBenchMean is the runs' mean rate and their costs and events
// together (so a cost per event is the mean's); the fewest alerts any
// delivered, and every duplicate.
func alertsBenchMean(runs []alertsBenchResult) alertsBenchResult {
	m := alertsBenchResult{delivered: runs[0].delivered}
	for _, r := range runs {
		m.eps += r.eps / float64(len(runs))
		m.events += r.events
		m.delivered = min(m.delivered, r.delivered)
		m.dupes += r.dupes
		m.feed = m.feed.add(r.feed)
		m.total = m.total.add(r.total)
	}
	return m
}

// alertsBenchRun runs the feed load on a fresh database and server and
// returns its figures: with alerts, how many distinct incidents were
// alerted and how many alerts arrived more than once.
func alertsBenchRun(ctx context.Context, env *benchEnv, alerts bool) (alertsBenchResult, error) {
	// The storm bound is lifted: the figure is about delivering every alert.
	f, err := env.newFeedFixture(ctx, "bench@alerts.test", feedBenchSenders, "ANVIL_ALERTS_PER_MINUTE=1000000")
	if err != nil {
		return alertsBenchResult{}, err
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
			return alertsBenchResult{}, err
		}
		var rules []map[string]any
		for _, k := range domain.AlertKinds {
			rules = append(rules, map[string]any{"kind": k, "enabled": k == domain.AlertIncidentNew})
		}
		if err := f.API(ctx, "PUT", "/api/private/projects/"+f.ProjectID+"/alert-rules",
			map[string]any{"rules": rules}, 200, nil); err != nil {
			return alertsBenchResult{}, err
		}
	}
	bodies := feedBenchBodies(alertsBenchEvent)
	load, err := f.Load(ctx, feedBenchSenders, feedBenchBatches, func(s, b int) (int, error) {
		return feedBenchPost(ctx, f, "/api/feed/events/batch", f.Tokens[s], bodies[s][b])
	})
	if err != nil {
		return alertsBenchResult{}, err
	}
	res := alertsBenchResult{eps: load.PerSecond(), events: load.Accepted, feed: load.Cost}
	if !alerts {
		// Nothing else runs: a little later, the feed's own counts are in.
		settled, err := f.Meter.settledCounts(ctx)
		if err != nil {
			return alertsBenchResult{}, err
		}
		res.feed = res.feed.withCountsOf(settled.sub(load.Start))
		return res, nil
	}
	// Every new incident's alert arrives (bounded wait), then a little
	// longer to catch any second copy (and for the counts to come in).
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
	last, err := f.Meter.read(ctx)
	if err != nil {
		return alertsBenchResult{}, err
	}
	time.Sleep(2 * time.Second)
	settled, err := f.Meter.read(ctx)
	if err != nil {
		return alertsBenchResult{}, err
	}
	res.total = last.withCountsOf(settled).sub(load.Start)
	mu.Lock()
	defer mu.Unlock()
	for _, c := range seen {
		res.dupes += c - 1
	}
	res.delivered = len(seen)
	return res, nil
}
