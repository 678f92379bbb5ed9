package main

// What the feed's sections (feed, issue18, alerts) share: a fresh database
// with a running server, a project bound in production and one connection
// per sender; and the concurrent senders, timed, with the CPU each request
// costs the server, its Postgres backends and the bench's own client.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
}

// newFeedFixture builds the fixture with connections feed connections;
// extraEnv goes to the server's environment. Stop it when done.
func (e *benchEnv) newFeedFixture(ctx context.Context, email string, connections int, extraEnv ...string) (*feedFixture, error) {
	f := &feedFixture{Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * connections}}}
	var err error
	if f.DBURL, err = e.newDatabase(ctx); err != nil {
		return nil, err
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

// Stop stops the server (the database goes with the bench's).
func (f *feedFixture) Stop() { _ = f.Server.stop() }

// feedLoad is one timed load: how long it took, every request's latency
// (sorted), the events accepted, and the CPU it cost.
type feedLoad struct {
	Elapsed   time.Duration
	Latencies []time.Duration
	Accepted  int64
	// CPU time over the timed part: the server process, the Postgres
	// backends of the bench database, and the bench process (the client).
	ServerCPU, PostgresCPU, ClientCPU time.Duration
}

// add is l and o together, as one load (its latencies sorted).
func (l feedLoad) add(o feedLoad) feedLoad {
	l.Elapsed += o.Elapsed
	l.Latencies = sortDurations(append(l.Latencies, o.Latencies...))
	l.Accepted += o.Accepted
	l.ServerCPU += o.ServerCPU
	l.PostgresCPU += o.PostgresCPU
	l.ClientCPU += o.ClientCPU
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
// sent before a checkpoint and the clock.
func (f *feedFixture) Load(ctx context.Context, senders, requests int, post func(sender, request int) (int, error)) (feedLoad, error) {
	for s := range senders {
		if _, err := post(s, 0); err != nil {
			return feedLoad{}, fmt.Errorf("warm-up: %w\n%s", err, lastLines(f.Server.logs.String()))
		}
	}
	checkpoint(ctx, f.DBURL)
	pg0 := backendCPU(ctx, f.DBURL)
	server0, client0 := procCPU(f.Server.Pid()), selfCPU()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		load     feedLoad
	)
	start := time.Now()
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
	load.Elapsed = time.Since(start)
	load.ServerCPU = procCPU(f.Server.Pid()) - server0
	for pid, d := range backendCPU(ctx, f.DBURL) {
		load.PostgresCPU += d - pg0[pid] // a backend started meanwhile counts whole
	}
	load.ClientCPU = selfCPU() - client0
	if firstErr != nil {
		return feedLoad{}, fmt.Errorf("%w\n%s", firstErr, lastLines(f.Server.logs.String()))
	}
	sortDurations(load.Latencies)
	return load, nil
}

// backendCPU is the CPU time so far of each Postgres backend connected to
// the database of dbURL (the server's pool), by pid; none when
// pg_stat_activity cannot be read.
func backendCPU(ctx context.Context, dbURL string) map[int]time.Duration {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := make(map[int]time.Duration, len(pids))
	for _, p := range pids {
		out[int(p)] = procCPU(int(p))
	}
	return out
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// procCPU is a process's user and system CPU time so far (0 when it is
// gone).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces) start after its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// selfCPU is the bench process's own CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
