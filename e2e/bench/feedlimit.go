package main

// feed/limit: the feed against the cheapest durable, exactly-once store of
// the same bytes (docs/feed.md, "The write path and its costs"). (a) is an
// error storm through the native door: one fault, one connection, eight
// clients posting batches of 50 for ten seconds; (b) is two parallel psql
// `\copy` of 25,000 of the same events each into a bare table keyed like the
// feed's dedupe key. The ratio (a) ÷ (b) is the figure.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

func init() {
	register("feed/limit", feedBenchLimit)
}

const (
	feedLimitClients  = 8
	feedLimitWarmUp   = 20
	feedLimitDuration = 10 * time.Second
	feedLimitCopyRows = 25000 // per \copy; two run side by side
)

// feedLimitEventTemplate is the README's curl example with its event_id
// and timestamp as placeholders: every event of the storm has the same
// fingerprint.
const feedLimitEventTemplate = `{"schema_version":"1.0","event_id":"@ID@","timestamp":"@TS@","title":"NullPointerException in CheckoutService","level":"error","environment":"production","service":"shop-api","language":"java","sdk":{"name":"anvil-feed-java","version":"0.1.0","runtime":"jdk-25"},"exception":{"type":"java.lang.NullPointerException","message":"Cannot invoke \"Cart.total()\" because \"cart\" is null","stacktrace":[{"file":"CheckoutService.java","line":88,"function":"charge","context_code":"var sum = cart.total();","in_app":true}]},"release":"2026.9.3","request":{"method":"POST","url":"https://shop.example/api/checkout","status_code":500},"user":{"id":"u-4711"},"breadcrumbs":["cart.add sku=A1","checkout.start"],"tags":{"tier":"gold"},"enrichment":{"affected_file":"src/main/java/shop/CheckoutService.java"},"agent_context":{"suggested_ticket_type":"bug","repo":"shop/api","branch":"main"}}`

// feedLimitEvent is the template with a fresh event id.
func feedLimitEvent(ts string) string {
	return strings.Replace(strings.Replace(feedLimitEventTemplate, "@TS@", ts, 1), "@ID@", newUUID(), 1)
}

// newUUID is a random version-4 UUID, cheaper than a library call per event
// matters here only in that the client's CPU is the server's too.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// feedLimitBatch is one batch of 50 fresh events.
func feedLimitBatch(ts string) []byte {
	var b bytes.Buffer
	b.Grow(feedBenchBatch * (len(feedLimitEventTemplate) + 40))
	b.WriteByte('[')
	for i := range feedBenchBatch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(feedLimitEvent(ts))
	}
	b.WriteByte(']')
	return b.Bytes()
}

func feedBenchLimit(ctx context.Context, env *benchEnv) error {
	f, err := env.newFeedFixture(ctx, "limit@feed.test", 1, "ANVIL_FEED_RATE_PER_MIN=1000000")
	if err != nil {
		return err
	}
	defer f.Stop()
	st, err := feedLimitStorm(ctx, f)
	if err != nil {
		return err
	}
	copyRate, err := feedLimitCopy(ctx, f.DBURL, st.ts)
	if err != nil {
		return err
	}
	if st.firstErr != nil {
		fmt.Fprintf(env.Out, "first failed batch: %v\n%s\n", st.firstErr, lastLines(f.Server.logs.String()))
	}
	env.note("feed", "limit_events_accepted", float64(st.accepted))
	env.report("feed", "limit_failed_batches", float64(st.failed), 0)
	env.note("feed", "limit_a_accepted_events_per_s", float64(int(st.eps)))
	env.note("feed", "limit_b_copy_rows_per_s", float64(int(copyRate)))
	env.reportAtLeast("feed", "limit_ratio_a_to_b", float64(int(st.eps/copyRate*100))/100, 0.5)
	env.note("feed", "limit_batch_p50_ms", ms(percentile(st.lat, 50)))
	env.report("feed", "limit_batch_p99_ms", ms(percentile(st.lat, 99)), 50)
	// CPU per event: what a busy machine's rates hide (docs/figures.md).
	env.note("feed", "limit_server_cpu_us_per_event", st.serverUS)
	env.note("feed", "limit_postgres_cpu_us_per_event", st.postgresUS)
	return nil
}

// feedStorm is what one storm measured.
type feedStorm struct {
	ts                   string // the events' timestamp
	accepted, failed     int64
	eps                  float64
	lat                  []time.Duration
	firstErr             error
	serverUS, postgresUS float64 // CPU per accepted event
}

// feedLimitStorm is (a): the warm-up, then eight clients for ten seconds,
// then the wait until every stored event is counted.
func feedLimitStorm(ctx context.Context, f *feedFixture) (feedStorm, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * feedLimitClients}}
	ts := time.Now().UTC().Format(time.RFC3339)
	post := func(body []byte) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", f.Server.URL+"/api/feed/events/batch", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.Tokens[0])
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		var out struct {
			Accepted []string `json:"accepted"`
		}
		derr := json.NewDecoder(res.Body).Decode(&out)
		if res.StatusCode != http.StatusAccepted {
			return 0, fmt.Errorf("status %d", res.StatusCode)
		}
		if derr != nil {
			return 0, derr
		}
		if len(out.Accepted) != feedBenchBatch {
			return len(out.Accepted), fmt.Errorf("%d of %d accepted", len(out.Accepted), feedBenchBatch)
		}
		return len(out.Accepted), nil
	}
	// The warm-up: 20 batches, spread over the clients.
	var warm sync.WaitGroup
	warmErr := make([]error, feedLimitWarmUp)
	for i := range feedLimitWarmUp {
		warm.Add(1)
		go func() { defer warm.Done(); _, warmErr[i] = post(feedLimitBatch(ts)) }()
		if (i+1)%feedLimitClients == 0 {
			warm.Wait()
		}
	}
	warm.Wait()
	if err := errors.Join(warmErr...); err != nil {
		return feedStorm{}, fmt.Errorf("warm-up: %w\n%s", err, lastLines(f.Server.logs.String()))
	}
	checkpoint(ctx, f.DBURL)
	startCost, err := f.Meter.read(ctx)
	if err != nil {
		return feedStorm{}, fmt.Errorf("cost meter: %w", err)
	}

	var (
		accepted, failed atomic.Int64
		mu               sync.Mutex
		lat              []time.Duration
		firstErr         error
		wg               sync.WaitGroup
	)
	began := time.Now()
	end := began.Add(feedLimitDuration)
	for range feedLimitClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			for time.Now().Before(end) {
				body := feedLimitBatch(ts)
				t0 := time.Now()
				n, err := post(body)
				local = append(local, time.Since(t0))
				accepted.Add(int64(n))
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	sortDurations(lat)
	eps := float64(accepted.Load()) / elapsed.Seconds()
	endCost, err := f.Meter.read(ctx)
	if err != nil {
		return feedStorm{}, fmt.Errorf("cost meter: %w", err)
	}
	used := endCost.sub(startCost)
	// Every accepted event counted once on its incident once the folds
	// have caught up (docs/feed.md, "The write path and its costs").
	if err := feedLimitCounted(ctx, f.DBURL); err != nil {
		return feedStorm{}, err
	}

	st := feedStorm{ts: ts, accepted: accepted.Load(), failed: failed.Load(), eps: eps, lat: lat, firstErr: firstErr}
	if n := accepted.Load(); n > 0 {
		st.serverUS = float64(int(float64(used.Server.Microseconds())/float64(n)*10)) / 10
		st.postgresUS = float64(int(float64(used.Postgres.Microseconds())/float64(n)*10)) / 10
	}
	return st, nil
}

// feedLimitCounted waits (up to 30 s) until the incidents count every
// stored event, and fails if they never do.
func feedLimitCounted(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var events, counted int64
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM feed_events), (SELECT coalesce(sum(event_count), 0) FROM incidents)`).Scan(&events, &counted); err != nil {
			return err
		}
		if events == counted {
			return nil
		}
	}
	return fmt.Errorf("the incidents count %d events of %d stored", counted, events)
}

// feedLimitCopy writes two TSV files of feedLimitCopyRows events each, then
// times two parallel psql `\copy` of them into a fresh table of the same
// database, and returns rows per second over both.
func feedLimitCopy(ctx context.Context, dbURL, ts string) (float64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var org string
	if err := conn.QueryRow(ctx, `SELECT id::text FROM organizations LIMIT 1`).Scan(&org); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE bench_limit_copy (org_id uuid, event_id uuid, received_at timestamptz DEFAULT now(),
		payload jsonb, PRIMARY KEY (org_id, event_id))`); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "anvil-bench-limit-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	// COPY's text format: a backslash in the JSON is written twice.
	esc := strings.NewReplacer(`\`, `\\`)
	files := make([]string, 2)
	for i := range files {
		var b bytes.Buffer
		for range feedLimitCopyRows {
			id := newUUID()
			ev := strings.Replace(strings.Replace(feedLimitEventTemplate, "@TS@", ts, 1), "@ID@", id, 1)
			b.WriteString(org + "\t" + id + "\t" + esc.Replace(ev) + "\n")
		}
		files[i] = filepath.Join(dir, fmt.Sprintf("events-%d.tsv", i))
		if err := os.WriteFile(files[i], b.Bytes(), 0o600); err != nil {
			return 0, err
		}
	}
	checkpoint(ctx, dbURL)
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	start := time.Now()
	for i, file := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", dbURL,
				"-c", `\copy bench_limit_copy (org_id, event_id, payload) FROM '`+file+`'`)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("psql \\copy: %w\n%s", err, out)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM bench_limit_copy`).Scan(&n); err != nil {
		return 0, err
	}
	if n != 2*feedLimitCopyRows {
		return 0, fmt.Errorf("\\copy stored %d rows, not %d", n, 2*feedLimitCopyRows)
	}
	return float64(n) / elapsed.Seconds(), nil
}
