package main

// The feed's figures: the Anvil Feed ingest under load against a real
// `anvil serve`, beside a raw COPY of the same rows into the same Postgres.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"anvil/domain/event"
)

func init() {
	register("feed/ingest", feedBenchIngest)
}

const (
	feedBenchSenders = 8   // concurrent senders, one connection each
	feedBenchBatches = 100 // batches per sender (below the 600/min budget)
	feedBenchBatch   = 50  // events per batch
)

// feedBenchAPI calls the private API with a bearer token.
func feedBenchAPI(ctx context.Context, method, url, token string, body any, want int, out any) error {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// feedBenchEvent is a realistic event: the feed contract's example with a stack of
// eight frames, one of ten faults.
func feedBenchEvent(i int) map[string]any {
	frames := make([]any, 8)
	for f := range frames {
		frames[f] = map[string]any{"file": fmt.Sprintf("src/shop/Service%d.java", f), "line": 10 + f, "function": fmt.Sprintf("call%d", i%10),
			"context_code": "var sum = cart.total();", "in_app": f < 4}
	}
	return map[string]any{"schema_version": "1.0", "event_id": uuid.NewString(), "timestamp": time.Now().UTC().Format(time.RFC3339),
		"title": fmt.Sprintf("NullPointerException in CheckoutService (order %d)", i), "level": "error", "environment": "production",
		"service": "shop-api", "language": "java", "sdk": map[string]any{"name": "anvil-feed-java", "version": "0.1.0", "runtime": "jdk-25"},
		"exception": map[string]any{"type": fmt.Sprintf("java.lang.NullPointerException%d", i%10), "message": "Cannot invoke \"Cart.total()\" because \"cart\" is null; Authorization: Bearer abc.def.ghi",
			"stacktrace": frames},
		"release": "2026.9.3", "request": map[string]any{"method": "POST", "url": "https://shop.example/api/checkout?session=123", "status_code": 500},
		"user": map[string]any{"id": "u-4711"}, "breadcrumbs": []any{"cart.add sku=A1", "checkout.start"}, "tags": map[string]any{"tier": "gold"}}
}

func feedBenchIngest(ctx context.Context, env *benchEnv) error {
	f, err := env.newFeedFixture(ctx, "bench@feed.test", feedBenchSenders)
	if err != nil {
		return err
	}
	defer f.Stop()

	bodies := feedBenchBodies(feedBenchEvent)
	post := func(s, b int) (int, error) {
		return feedBenchPost(ctx, f, "/api/feed/events/batch", f.Tokens[s], bodies[s][b])
	}

	var maxRSS float64
	stopRSS := make(chan struct{})
	rssDone := make(chan struct{})
	go func() {
		defer close(rssDone)
		for {
			if m, err := procStatus(f.Server.Pid()); err == nil && m["VmRSS"] > maxRSS {
				maxRSS = m["VmRSS"]
			}
			select {
			case <-stopRSS:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	load, err := f.Load(ctx, feedBenchSenders, feedBenchBatches, post)
	close(stopRSS)
	<-rssDone
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	eps := load.PerSecond()

	// The raw COPY of the same rows into a table shaped like feed_events
	// (the median of three).
	copyRate, copyLow, copyHigh, err := feedBenchCopy(ctx, f.DBURL)
	if err != nil {
		return err
	}
	env.note("feed", "events_sent", float64(feedBenchSenders*feedBenchBatches*feedBenchBatch))
	env.reportAtLeast("feed", "accepted_events_per_s", float64(int(eps)), 10000)
	env.note("feed", "raw_copy_rows_per_s", float64(int(copyRate)))
	env.note("feed", "raw_copy_lowest_rows_per_s", float64(int(copyLow)))
	env.note("feed", "raw_copy_highest_rows_per_s", float64(int(copyHigh)))
	env.reportAtLeast("feed", "ingest_to_copy_ratio", float64(int(eps/copyRate*100))/100, 0.5)
	env.report("feed", "batch_p50_ms", ms(percentile(load.Latencies, 50)), 100)
	env.report("feed", "batch_p99_ms", ms(percentile(load.Latencies, 99)), 100)
	env.report("feed", "server_rss_under_load_mb", maxRSS, 200)
	noteCPU(env, "feed", "batch", load)
	return nil
}

// feedBenchBodies builds every sender's batches (the warm-up's first)
// before the clock starts, event(n) being the n-th event sent.
func feedBenchBodies(event func(n int) map[string]any) [][][]byte {
	bodies := make([][][]byte, feedBenchSenders)
	n := 0
	for s := range bodies {
		bodies[s] = make([][]byte, feedBenchBatches+1)
		for b := range bodies[s] {
			evs := make([]any, feedBenchBatch)
			for e := range evs {
				evs[e] = event(n)
				n++
			}
			bodies[s][b], _ = json.Marshal(evs)
		}
	}
	return bodies
}

// feedBenchPost posts one native request (a batch, or one event to
// /api/feed/events) and returns how many events were accepted.
func feedBenchPost(ctx context.Context, f *feedFixture, path, token string, body []byte) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", f.Server.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := f.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var out struct {
		Accepted []string `json:"accepted"`
	}
	err = json.NewDecoder(res.Body).Decode(&out)
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("%s: status %d", path, res.StatusCode)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return len(out.Accepted), nil
}

// noteCPU prints the CPU one timed request of load cost the server, its
// Postgres backends and the bench's client, in milliseconds.
func noteCPU(env *benchEnv, group, what string, load feedLoad) {
	env.note(group, what+"_server_cpu_ms_per_req", load.CPUPerRequest(load.Cost.Server))
	env.note(group, what+"_postgres_cpu_ms_per_req", load.CPUPerRequest(load.Cost.Postgres))
	env.note(group, what+"_client_cpu_ms_per_req", load.CPUPerRequest(load.Cost.Bench))
}

// checkpoint asks Postgres to write out what earlier work left dirty, so
// that a timed section does not share the disk and the WAL with a
// checkpoint that work set off (the figures otherwise swing by a third from
// run to run). Without the right to (not a superuser, no pg_checkpoint), it
// does nothing.
func checkpoint(ctx context.Context, dbURL string) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "CHECKPOINT")
}

// feedBenchCopyRounds is how many times the raw COPY runs; its rate is
// the median. One COPY of the run's rows lasts about a second, and on a
// shared machine a single one swings by a third from run to run.
const feedBenchCopyRounds = 3

// feedBenchCopy COPYs the rows the ingest stored — read back first, every
// value as stored — into a copy of feed_events (the same columns, indexes
// and storage) in one COPY, feedBenchCopyRounds times into an emptied
// table, and returns the median, the lowest and the highest rows per second.
func feedBenchCopy(ctx context.Context, dbURL string) (median, low, high float64, err error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE bench_copy (LIKE feed_events INCLUDING ALL)`); err != nil {
		return 0, 0, 0, err
	}
	cols := []string{"org_id", "event_id_key", "project_id", "connection_id", "environment", "fingerprint", "incident_id", "received_at", "occurred_at", "payload"}
	// The payload goes in as the bytes the ingest sent: decoded into an
	// event and encoded the way the ingest encodes it (a json column gives
	// those bytes back as stored, so this only holds the baseline to them
	// should the column's type change again). pgx sends a string as is.
	res, err := conn.Query(ctx, `SELECT `+strings.Join(cols[:9], ", ")+`, payload::text FROM feed_events`)
	if err != nil {
		return 0, 0, 0, err
	}
	var src [][]any
	for res.Next() {
		v, err := res.Values()
		if err != nil {
			return 0, 0, 0, err
		}
		var ev event.Event
		if err := json.Unmarshal([]byte(v[9].(string)), &ev); err != nil {
			return 0, 0, 0, err
		}
		payload, err := event.Marshal(&ev)
		if err != nil {
			return 0, 0, 0, err
		}
		v[9] = string(payload)
		src = append(src, v)
	}
	if err := res.Err(); err != nil {
		return 0, 0, 0, err
	}
	rates := make([]float64, feedBenchCopyRounds)
	for i := range rates {
		// TRUNCATE gives the table new, empty files, as at the first round.
		if _, err := conn.Exec(ctx, `TRUNCATE bench_copy`); err != nil {
			return 0, 0, 0, err
		}
		checkpoint(ctx, dbURL)
		start := time.Now()
		n, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_copy"}, cols, pgx.CopyFromRows(src))
		if err != nil {
			return 0, 0, 0, fmt.Errorf("copy: %w", err)
		}
		rates[i] = float64(n) / time.Since(start).Seconds()
	}
	sort.Float64s(rates)
	return rates[len(rates)/2], rates[0], rates[len(rates)-1], nil
}

// lastLines is the end of a server log (its last eight lines), for errors.
func lastLines(s string) string {
	const n = 8
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
