package main

// What the feed's sections (feed, sentry, alerts) share: a fresh database
// with a running server, a project bound in production and one connection
// per sender; and the concurrent senders, timed, with what they cost
// (cost.go): the CPU of the server, its Postgres backends and the bench's
// own client, and Postgres' transactions and rows.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// feedFixture is a fresh database with a running `anvil serve`, its
// owner's API token, a project "shop" whose production binding observes,
// and feed connections (one per sender: each has its own 600/min budget).
type feedFixture struct {
	DBURL         string
	Server        *proc
	PAT           string
	ProjectID     string
	ProjectNumber int64
	Tokens        []string
	// Client posts the load: one idle connection per sender and door.
	Client *http.Client
	// Meter reads what the server and its database cost.
	Meter *costMeter
}

// newFeedFixture builds the fixture with connections feed connections;
// extraEnv goes to the server's environment. Stop it when done.
func (e *benchEnv) newFeedFixture(ctx context.Context, email string, connections int, extraEnv ...string) (*feedFixture, error) {
	return e.newFeedFixtureSettings(ctx, email, connections, nil, extraEnv...)
}

// newFeedFixtureSettings is newFeedFixture on a database whose sessions
// start with settings ("name = value", ALTER DATABASE … SET).
func (e *benchEnv) newFeedFixtureSettings(ctx context.Context, email string, connections int, settings []string, extraEnv ...string) (*feedFixture, error) {
	f := &feedFixture{Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * connections}}}
	var err error
	if f.DBURL, err = e.newDatabase(ctx); err != nil {
		return nil, err
	}
	for _, set := range settings {
		u, _ := url.Parse(f.DBURL)
		if err := adminExec(ctx, "ALTER DATABASE "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+" SET "+set); err != nil {
			return nil, err
		}
	}
	if _, err := e.run(ctx, f.DBURL, "", "migrate"); err != nil {
		return nil, err
	}
	if f.PAT, err = e.bootstrap(ctx, f.DBURL, "bench", email, "correct horse battery"); err != nil {
		return nil, err
	}
	if f.Server, err = e.startWith(f.DBURL, extraEnv...); err != nil {
		return nil, err
	}
	if err := f.Server.waitReady(ctx); err != nil {
		f.Stop()
		return nil, err
	}
	if f.Meter, err = newCostMeter(ctx, f.DBURL, f.Server.Pid()); err != nil {
		f.Stop()
		return nil, err
	}
	if err := f.setUp(ctx, connections); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

func (f *feedFixture) setUp(ctx context.Context, connections int) error {
	var project struct {
		ID     string `json:"id"`
		Number int64  `json:"number"`
	}
	if err := f.API(ctx, "POST", "/api/private/projects", map[string]any{"slug": "shop", "name": "Shop",
		"repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "true"}, 201, &project); err != nil {
		return err
	}
	f.ProjectID, f.ProjectNumber = project.ID, project.Number
	if err := f.API(ctx, "PUT", "/api/private/projects/"+f.ProjectID+"/bindings/production",
		map[string]any{"repair_policy": "observe"}, 200, nil); err != nil {
		return err
	}
	f.Tokens = make([]string, connections)
	for i := range f.Tokens {
		var c struct {
			Token string `json:"token"`
		}
		if err := f.API(ctx, "POST", "/api/private/projects/"+f.ProjectID+"/connections",
			map[string]any{"name": fmt.Sprintf("sender-%d", i)}, 201, &c); err != nil {
			return err
		}
		f.Tokens[i] = c.Token
	}
	return nil
}

// API calls the server's private API as the owner.
func (f *feedFixture) API(ctx context.Context, method, path string, body any, want int, out any) error {
	return feedBenchAPI(ctx, method, f.Server.URL+path, f.PAT, body, want, out)
}

// Stop stops the meter and the server (the database goes with the
// bench's).
func (f *feedFixture) Stop() {
	if f.Meter != nil {
		f.Meter.close(context.Background())
	}
	_ = f.Server.stop()
}

// feedLoad is one timed load: how long it took, every request's latency
// (sorted), the events accepted, and what it cost.
type feedLoad struct {
	Elapsed   time.Duration
	Latencies []time.Duration
	Accepted  int64
	// Start is the meter's reading when the clock started; Cost, what the
	// timed part cost (its transactions and rows up to costCountsLag short).
	Start, Cost cost
}

// add is l and o together, as one load (its latencies sorted).
func (l feedLoad) add(o feedLoad) feedLoad {
	l.Elapsed += o.Elapsed
	l.Latencies = sortDurations(append(l.Latencies, o.Latencies...))
	l.Accepted += o.Accepted
	l.Cost = l.Cost.add(o.Cost)
	return l
}

// Requests is how many timed requests were answered.
func (l feedLoad) Requests() int { return len(l.Latencies) }

// PerSecond is accepted events per second.
func (l feedLoad) PerSecond() float64 { return float64(l.Accepted) / l.Elapsed.Seconds() }

// CPUPerRequest is a CPU time per timed request, in milliseconds.
func (l feedLoad) CPUPerRequest(d time.Duration) float64 {
	if l.Requests() == 0 {
		return 0
	}
	return float64(int(ms(d)/float64(l.Requests())*1000)) / 1000
}

// Load runs senders concurrently, each posting requests 1..requests
// through post (which returns the events accepted); request 0 of each
// sender is the warm-up (connections, prepared statements, incidents),
// sent before a checkpoint and the clock, by every sender at once and
// twice. One sender after the other, they used one connection of the
// server's pool, and the timed load opened the others — new Postgres
// backends with cold catalog caches, each preparing its statements — in
// its first 300 ms, which held the p99 of short sections; the first round
// at once opens them (50–90 ms a request), the second finds them warm
// (docs/figures.md, "Warm-up"). A warm-up request sent again is a resend
// to the server: an event it has, a check-in it recorded.
func (f *feedFixture) Load(ctx context.Context, senders, requests int, post func(sender, request int) (int, error)) (feedLoad, error) {
	warm := make([]error, senders)
	for range 2 {
		var warming sync.WaitGroup
		for s := range senders {
			warming.Add(1)
			go func() { defer warming.Done(); _, warm[s] = post(s, 0) }()
		}
		warming.Wait()
		if err := errors.Join(warm...); err != nil {
			return feedLoad{}, fmt.Errorf("warm-up: %w\n%s", err, lastLines(f.Server.logs.String()))
		}
	}
	checkpoint(ctx, f.DBURL)
	start, err := f.Meter.read(ctx)
	if err != nil {
		return feedLoad{}, fmt.Errorf("cost meter: %w", err)
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		load     = feedLoad{Start: start}
	)
	began := time.Now()
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, requests)
			accepted := 0
			for r := 1; r <= requests; r++ {
				t0 := time.Now()
				k, err := post(s, r)
				local = append(local, time.Since(t0))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				accepted += k
			}
			mu.Lock()
			load.Latencies = append(load.Latencies, local...)
			load.Accepted += int64(accepted)
			mu.Unlock()
		}()
	}
	wg.Wait()
	load.Elapsed = time.Since(began)
	if firstErr != nil {
		return feedLoad{}, fmt.Errorf("%w\n%s", firstErr, lastLines(f.Server.logs.String()))
	}
	end, err := f.Meter.read(ctx)
	if err != nil {
		return feedLoad{}, fmt.Errorf("cost meter: %w", err)
	}
	load.Cost = end.sub(start)
	sortDurations(load.Latencies)
	return load, nil
}
