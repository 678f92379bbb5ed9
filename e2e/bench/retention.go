package main

// Retention's figures (docs/retention.md): with many stored events
// of which half are past their age, the clean-up's deletion rate and the
// feed's events/s and p99 while it runs, beside the same feed figures
// without it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

func init() {
	register("retention/cleanup", retentionBench)
}

// retentionBenchEvents is how many events are stored before the clean-up
// (ANVIL_BENCH_RETENTION_EVENTS; the figure is 2 million).
func retentionBenchEvents() int {
	if v, err := strconv.Atoi(os.Getenv("ANVIL_BENCH_RETENTION_EVENTS")); err == nil && v > 0 {
		return v
	}
	return 2_000_000
}

const (
	retentionBenchIncidents = 1000
	retentionBenchSenders   = 8
	// retentionBenchPerToken keeps each connection under its 600 requests
	// a minute: a sender takes a fresh connection after this many batches.
	retentionBenchPerToken = 400
	retentionBenchBaseline = 10 * time.Second
)

func retentionBench(ctx context.Context, env *benchEnv) error {
	dbURL, err := env.newDatabase(ctx)
	if err != nil {
		return err
	}
	if _, err := env.run(ctx, dbURL, "", "migrate"); err != nil {
		return err
	}
	pat, err := env.bootstrap(ctx, dbURL, "bench", "bench@retention.test", "correct horse battery")
	if err != nil {
		return err
	}
	p, err := env.serve(ctx, dbURL)
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	var project struct {
		ID string `json:"id"`
	}
	if err := feedBenchAPI(ctx, "POST", p.URL+"/api/private/projects", pat, map[string]any{"slug": "shop", "name": "Shop",
		"repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "true"}, 201, &project); err != nil {
		return err
	}
	if err := feedBenchAPI(ctx, "PUT", p.URL+"/api/private/projects/"+project.ID+"/bindings/production", pat,
		map[string]any{"repair_policy": "observe"}, 200, nil); err != nil {
		return err
	}
	tokens := make([]string, retentionBenchSenders*12)
	for i := range tokens {
		var c struct {
			Token string `json:"token"`
		}
		if err := feedBenchAPI(ctx, "POST", p.URL+"/api/private/projects/"+project.ID+"/connections", pat,
			map[string]any{"name": fmt.Sprintf("sender-%d", i)}, 201, &c); err != nil {
			return err
		}
		tokens[i] = c.Token
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// The workers' first clean-up (RunOnStart) runs on the empty database
	// and must be over before the events go in.
	deadline := time.Now().Add(time.Minute)
	for {
		var done bool
		_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE kind = 'retention_cleanup' AND state = 'completed')`).Scan(&done)
		if done {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the workers' first clean-up did not finish within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	total := retentionBenchEvents()
	t0 := time.Now()
	if err := retentionBenchSeed(ctx, conn, project.ID, total); err != nil {
		return err
	}
	env.note("retention", "events_stored", float64(total))
	env.note("retention", "seed_s", float64(int(time.Since(t0).Seconds())))

	// The feed alone, then the feed while `anvil admin retention --now` runs.
	checkpoint(ctx, dbURL)
	next := retentionTokens(tokens)
	baseStop := make(chan struct{})
	time.AfterFunc(retentionBenchBaseline, func() { close(baseStop) })
	baseEPS, baseP99, err := retentionLoad(ctx, p, next, baseStop)
	if err != nil {
		return fmt.Errorf("feed alone: %w", err)
	}
	checkpoint(ctx, dbURL)
	cleanStop := make(chan struct{})
	var (
		rep struct {
			Total struct{ Events, Sampled int64 }
		}
		cleanDur time.Duration
		cleanErr error
	)
	go func() {
		defer close(cleanStop)
		start := time.Now()
		cmd := exec.CommandContext(ctx, env.Binary, "admin", "retention", "--now", "--json")
		cmd.Env = env.env(dbURL)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if cleanErr = cmd.Run(); cleanErr != nil {
			cleanErr = fmt.Errorf("anvil admin retention --now: %w\n%s", cleanErr, errb.String())
			return
		}
		cleanDur = time.Since(start)
		cleanErr = json.Unmarshal(out.Bytes(), &rep)
	}()
	// The feed runs beside the clean-up for as long as the baseline ran (or
	// less, if the clean-up ends first); the clean-up, paced, goes on alone
	// (docs/retention.md, "Pacing").
	loadStop := make(chan struct{})
	go func() {
		select {
		case <-cleanStop:
		case <-time.After(retentionBenchBaseline):
		}
		close(loadStop)
	}()
	duringEPS, duringP99, err := retentionLoad(ctx, p, next, loadStop)
	<-cleanStop
	if err != nil {
		return fmt.Errorf("feed during the clean-up: %w", err)
	}
	if cleanErr != nil {
		return cleanErr
	}
	removed := rep.Total.Events + rep.Total.Sampled
	env.note("retention", "events_removed", float64(removed))
	env.note("retention", "cleanup_s", float64(int(cleanDur.Seconds()*10))/10)
	env.note("retention", "cleanup_events_per_s", float64(int(float64(removed)/cleanDur.Seconds())))
	env.note("retention", "feed_events_per_s_alone", float64(int(baseEPS)))
	env.note("retention", "feed_events_per_s_during", float64(int(duringEPS)))
	env.reportAtLeast("retention", "feed_events_per_s_during_to_alone", float64(int(duringEPS/baseEPS*100))/100, 0.9)
	env.note("retention", "feed_batch_p99_ms_alone", ms(baseP99))
	env.report("retention", "feed_batch_p99_ms_during", ms(duringP99), 100)
	return nil
}

// retentionBenchSeed stores total events in retentionBenchIncidents
// incidents with one statement per 100,000: the odd ones received 100 days
// ago (past the default 90), the even ones within the last 20 hours (inside
// the sampling grace, so that they all stay).
func retentionBenchSeed(ctx context.Context, conn *pgx.Conn, projectID string, total int) error {
	payload, _ := json.Marshal(feedBenchEvent(0))
	if _, err := conn.Exec(ctx, `INSERT INTO incidents (id, org_id, project_id, environment, fingerprint, title, status, event_count, first_seen, last_seen)
		SELECT md5('inc' || k)::uuid, p.org_id, p.id, 'production', 'bench-' || k, 'bench incident ' || k, 'TRIAGED', $2 / $3,
		       now() - interval '100 days', now()
		FROM projects p, generate_series(0, $3 - 1) k WHERE p.id = $1`, projectID, total, retentionBenchIncidents); err != nil {
		return fmt.Errorf("seed incidents: %w", err)
	}
	const chunk = 100_000
	for from := 0; from < total; from += chunk {
		to := min(from+chunk, total) - 1
		if _, err := conn.Exec(ctx, `INSERT INTO feed_events (org_id, event_id_key, project_id, connection_id, environment, fingerprint,
				incident_id, received_at, occurred_at, payload)
			SELECT p.org_id, md5('bench-' || i)::uuid, p.id, p.id, 'production', 'bench-' || (i % $4), md5('inc' || (i % $4))::uuid,
			       CASE WHEN i % 2 = 1 THEN now() - interval '100 days' - i * interval '1 ms' ELSE now() - (i % 72000) * interval '1 s' END,
			       now(), $5::json
			FROM projects p, generate_series($2::int, $3::int) i WHERE p.id = $1`,
			projectID, from, to, retentionBenchIncidents, string(payload)); err != nil {
			return fmt.Errorf("seed events: %w", err)
		}
	}
	_, err := conn.Exec(ctx, `VACUUM ANALYZE feed_events`)
	return err
}

// retentionTokens hands out connection tokens, each for retentionBenchPerToken batches.
func retentionTokens(tokens []string) func() string {
	var mu sync.Mutex
	i := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		t := tokens[i%len(tokens)]
		i++
		return t
	}
}

// retentionLoad sends batches of 50 events from retentionBenchSenders
// senders until stop closes and returns the accepted events per second and
// the batches' p99.
func retentionLoad(ctx context.Context, p *proc, token func() string, stop <-chan struct{}) (float64, time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: retentionBenchSenders * 2}}
	var (
		accepted  atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
		firstErr  error
		wg        sync.WaitGroup
		seq       atomic.Int64
	)
	start := time.Now()
	for range retentionBenchSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			defer func() {
				mu.Lock()
				latencies = append(latencies, local...)
				mu.Unlock()
			}()
			tok := token()
			for b := 0; ; b++ {
				select {
				case <-stop:
					return
				default:
				}
				if b > 0 && b%retentionBenchPerToken == 0 {
					tok = token()
				}
				evs := make([]any, 50)
				for e := range evs {
					evs[e] = feedBenchEvent(int(seq.Add(1)))
				}
				body, _ := json.Marshal(evs)
				req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/api/feed/events/batch", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				res, err := client.Do(req)
				if err == nil {
					var out struct {
						Accepted []string `json:"accepted"`
					}
					err = json.NewDecoder(res.Body).Decode(&out)
					res.Body.Close()
					if res.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("status %d\n%s", res.StatusCode, lastLines(p.logs.String()))
					}
					accepted.Add(int64(len(out.Accepted)))
				}
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
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return float64(accepted.Load()) / elapsed.Seconds(), percentile(latencies, 99), nil
}
