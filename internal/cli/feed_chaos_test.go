package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"anvil/domain"
)

// ownedCluster is a Postgres cluster a test creates, restarts and removes
// itself, so that it can restart Postgres without touching the shared one.
type ownedCluster struct {
	bin, dir, data, port string
	asUser               []string
}

// newOwnedCluster runs initdb into a folder of its own and starts the
// cluster on a free port, with fsync on: an answer given after a commit
// must survive an immediate stop. The test skips when there is no initdb.
func newOwnedCluster(t *testing.T) *ownedCluster {
	t.Helper()
	bin, err := findPGBin()
	if err != nil {
		t.Skipf("no Postgres binaries to run a cluster of the test's own (%v); install postgresql", err)
	}
	c := &ownedCluster{bin: bin}
	// Postgres refuses to run as root: run it as the postgres user then,
	// as `anvil dev` does.
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Skip("running as root, but there is no postgres user to run a cluster as")
		}
		c.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	// Not t.TempDir: its parent is private to root, and the cluster's
	// user must reach its folder.
	if c.dir, err = os.MkdirTemp("", "anvil-chaos-pg-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(c.dir) })
	if err := os.Chmod(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.data = filepath.Join(c.dir, "data")
	if err := os.Mkdir(c.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if c.asUser != nil {
		if out, err := exec.Command("chown", "postgres:postgres", c.data).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	c.run(t, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	addr := freeAddr(t)
	c.port = addr[strings.LastIndexByte(addr, ':')+1:]
	c.run(t, "pg_ctl", "-D", c.data, "-l", filepath.Join(c.data, "server.log"), "-w", "-t", "60",
		"-o", "-p "+c.port+" -k "+c.data+" -h 127.0.0.1 -c fsync=on -c synchronous_commit=on", "start")
	t.Cleanup(func() { _ = c.command("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop").Run() })
	return c
}

// command is one of the cluster's programs, run as its user.
func (c *ownedCluster) command(name string, args ...string) *exec.Cmd {
	full := append(append(append([]string{}, c.asUser...), filepath.Join(c.bin, name)), args...)
	return exec.Command(full[0], full[1:]...)
}

func (c *ownedCluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := c.command(name, args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.data, "server.log"))
		t.Fatalf("%s %v: %v\n%s\n%s", name, args, err, out, log)
	}
}

// restart stops the cluster with mode (fast: connections are ended and a
// checkpoint written; immediate: every process is killed and the next start
// recovers from the WAL) and starts it again.
func (c *ownedCluster) restart(t *testing.T, mode string) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data, "-l", filepath.Join(c.data, "server.log"), "-m", mode, "-w", "-t", "60", "restart")
}

func (c *ownedCluster) url(app string) string {
	return "postgres://postgres@127.0.0.1:" + c.port + "/postgres?sslmode=disable&application_name=" + app
}

// anvilProc is one anvil process the test kills and starts again on the
// same address, as a supervisor would.
type anvilProc struct {
	t    *testing.T
	env  []string
	args []string
	addr string
	cmd  *exec.Cmd
	logs *bytes.Buffer
}

func (p *anvilProc) start() {
	p.t.Helper()
	p.cmd = exec.Command(binary, append(p.args, "--addr", p.addr)...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, p.env...)
	p.logs = &bytes.Buffer{}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	cmd := p.cmd
	p.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	waitReady(p.t, p.addr)
}

func (p *anvilProc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// TestFeedChaosRealProcesses: four senders post batches of 50 fresh events
// over three fingerprints to a real `anvil serve --role web`, with a real
// worker beside it, and resend the same batch on a 503 or a broken
// connection until it is accepted, as an SDK does. Meanwhile Postgres
// restarts (fast, then immediate), the web process is killed with SIGKILL
// and later stopped with SIGTERM, and the worker is killed with SIGKILL in
// the middle of a fold of incident deltas left by a killed web process —
// after which the periodic fold of the restarted worker folds them. At the
// end every event that got a 202 is stored exactly once, none other is,
// nothing was answered 500, no delta is left and every incident counts
// exactly its stored events (docs/feed.md, "The write path and its costs").
func TestFeedChaosRealProcesses(t *testing.T) {
	t.Parallel()
	pg := newOwnedCluster(t)
	ctx := context.Background()
	common := []string{"ANVIL_SECRET_KEY=" + testKey, "ANVIL_FEED_ARMED=true", "ANVIL_FEED_RATE_PER_MIN=1000000",
		"ANVIL_SANDBOX=process", "ANVIL_WORK_DIR=" + t.TempDir(), "ANVIL_LOG_LEVEL=warn"}
	webEnv := append([]string{"ANVIL_DATABASE_URL=" + pg.url("chaos-web")}, common...)
	workerEnv := append([]string{"ANVIL_DATABASE_URL=" + pg.url("chaos-worker")}, common...)
	if code, _, stderr := anvil(t, webEnv, "", "migrate"); code != 0 {
		t.Fatal(stderr)
	}
	_, out, _ := anvil(t, webEnv, "a long enough password\n", "admin", "bootstrap", "--org", "acme", "--email", "o@acme.test")
	var boot map[string]string
	if err := json.Unmarshal([]byte(out), &boot); err != nil {
		t.Fatalf("bootstrap printed %q", out)
	}
	web := &anvilProc{t: t, env: webEnv, args: []string{"serve", "--role", "web"}, addr: freeAddr(t)}
	worker := &anvilProc{t: t, env: workerEnv, args: []string{"worker"}, addr: freeAddr(t)}
	web.start()
	worker.start()
	base := "http://" + web.addr
	p := apiCall(t, boot["token"], "POST", base+"/api/private/projects", map[string]any{"slug": "shop", "name": "Web shop",
		"repo_url": "https://git.example/shop.git", "default_branch": "main", "run_command": "make test"})
	pid := p["id"].(string)
	conn := apiCall(t, boot["token"], "POST", base+"/api/private/projects/"+pid+"/connections", map[string]any{"name": "shop-api"})
	token := conn["token"].(string)
	apiCall(t, boot["token"], "PUT", base+"/api/private/projects/"+pid+"/bindings/production", map[string]any{"repair_policy": "observe"})

	admin, err := pgxpool.New(ctx, pg.url("chaos-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		for attempt := 0; ; attempt++ {
			err := admin.QueryRow(ctx, q, args...).Scan(&n)
			if err == nil {
				return n
			}
			if attempt > 50 {
				t.Fatalf("%s: %v", q, err)
			}
			time.Sleep(100 * time.Millisecond) // a restart of the cluster under way
		}
	}

	// The senders.
	var (
		mu                     sync.Mutex
		acked                  = map[string]bool{}
		batches, unavailable   atomic.Int64
		connErrs, wrongAnswers atomic.Int64
		stop                   = make(chan struct{})
		senders                sync.WaitGroup
	)
	client := &http.Client{Timeout: 60 * time.Second}
	deliver := func(ids []string, body []byte) {
		for start := time.Now(); time.Since(start) < 3*time.Minute; time.Sleep(50 * time.Millisecond) {
			req, _ := http.NewRequest("POST", base+"/api/feed/events/batch", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				connErrs.Add(1)
				continue
			}
			raw, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				connErrs.Add(1)
				continue
			}
			switch res.StatusCode {
			case http.StatusServiceUnavailable:
				unavailable.Add(1)
				continue
			case http.StatusAccepted:
				var r struct{ Accepted []string }
				if err := json.Unmarshal(raw, &r); err != nil || len(r.Accepted) != len(ids) {
					wrongAnswers.Add(1)
					t.Errorf("a 202 that does not accept the whole batch: %s", raw)
				}
				mu.Lock()
				for _, id := range r.Accepted {
					acked[strings.ToLower(id)] = true
				}
				mu.Unlock()
				batches.Add(1)
				return
			default:
				// A 500 or anything else is a bug; the sender resends
				// all the same, so that the counts below still mean something.
				wrongAnswers.Add(1)
				t.Errorf("answered %d: %s", res.StatusCode, raw)
			}
		}
		t.Errorf("a batch was never accepted within 3 minutes")
	}
	for s := 0; s < 4; s++ {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ids := make([]string, 50)
				evs := make([]map[string]any, 50)
				for i := range evs {
					ids[i] = uuid.NewString()
					evs[i] = map[string]any{"schema_version": "1.0", "event_id": ids[i], "timestamp": "2026-12-06T10:11:12Z",
						"title": "NullPointerException in CheckoutService", "level": "error", "environment": "production",
						"service": "shop-api", "release": "2026.12.1", "sdk": map[string]any{"name": "anvil-feed-go", "version": "0.1.0"},
						"exception": map[string]any{"type": fmt.Sprintf("E%d", i%3), "message": "cart is null"}}
				}
				body, _ := json.Marshal(evs)
				deliver(ids, body)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	// progress waits for n more accepted batches: the senders are through
	// whatever happened before.
	progress := func(what string, n int64) {
		t.Helper()
		want := batches.Load() + n
		pollUntil(t, 60*time.Second, fmt.Sprintf("%d more accepted batches %s", n, what), func() bool { return batches.Load() >= want })
	}
	progress("at the start", 4)

	// Postgres stops fast (connections ended, a checkpoint) and starts again.
	pg.restart(t, "fast")
	progress("after a fast restart of Postgres", 4)
	// Postgres is killed outright and recovers from its WAL.
	pg.restart(t, "immediate")
	progress("after an immediate restart of Postgres", 4)

	// The web tier is killed: batches in flight lose their answers and
	// are sent again.
	web.kill()
	web.start()
	progress("after the web process was killed", 4)

	// The web tier is stopped: it drains what it has begun and exits cleanly.
	if err := web.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := web.cmd.Wait(); err != nil {
		t.Fatalf("the web process did not stop cleanly on SIGTERM: %v\n%s", err, web.logs.String())
	}
	web.start()
	progress("after the web process was stopped", 4)

	// A fold cut off mid-way. The test holds the folds' advisory lock while
	// the senders go on, so deltas wait; the web process is killed with
	// them unfolded, as a crash between a commit and its fold leaves them.
	foldLock, err := admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := foldLock.Exec(ctx, `SELECT pg_advisory_lock(x'666f6c64'::int)`); err != nil {
		t.Fatal(err)
	}
	progress("with the folds held", 4)
	web.kill()
	// The killed process's backends end as they find it gone — but for
	// the fold waiting for the test's lock — and a commit it had sent
	// completes: only then are the deltas left known.
	pollUntil(t, 30*time.Second, "the killed web process's backends to end", func() bool {
		return count(`SELECT count(*) FROM pg_stat_activity WHERE application_name = 'chaos-web'
			AND coalesce(wait_event, '') <> 'advisory'`) == 0
	})
	// The test locks the incidents as a batch's general path does; the
	// worker's fold then deletes the deltas it read and waits for them.
	hold, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT id FROM incidents FOR NO KEY UPDATE`); err != nil {
		t.Fatal(err)
	}
	pending := count(`SELECT count(*) FROM incident_deltas`)
	if pending == 0 {
		t.Fatal("no deltas were left unfolded; the fold below would cut off nothing")
	}
	if _, err := foldLock.Exec(ctx, `SELECT pg_advisory_unlock(x'666f6c64'::int)`); err != nil {
		t.Fatal(err)
	}
	foldLock.Release()
	enqueueFold(t, ctx, admin)
	var folder int
	pollUntil(t, 60*time.Second, "the worker's fold to wait for the incidents, its deltas read", func() bool {
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = 'chaos-worker'
			AND wait_event_type = 'Lock' AND query LIKE '%FOR NO KEY UPDATE%' LIMIT 1`).Scan(&folder)
		return err == nil
	})
	worker.kill()
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The killed worker's backend finds its client gone and rolls the
	// fold back whole: every delta it had deleted is there again.
	pollUntil(t, 30*time.Second, "the killed worker's fold to end", func() bool {
		return count(`SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, folder) == 0
	})
	if n := count(`SELECT count(*) FROM incident_deltas`); n != pending {
		t.Fatalf("%d deltas after the cut fold, want the %d it had read", n, pending)
	}
	// The restarted worker's periodic fold folds what the dead web left,
	// though the killed worker's fold job still looks running.
	worker.start()
	pollUntil(t, 60*time.Second, "the restarted worker's periodic fold", func() bool {
		return count(`SELECT count(*) FROM incident_deltas`) == 0
	})
	if n := count(`SELECT count(*) FROM river_job WHERE kind = 'fold_incident_deltas' AND state = 'running'`); n == 0 {
		t.Error("the killed worker's fold job no longer looks running; the periodic fold was not tested past it")
	}
	web.start()
	progress("after the worker was killed mid-fold", 4)

	close(stop)
	senders.Wait()
	// The web process folds its own deltas within feed.FoldGap of its last commit.
	pollUntil(t, 30*time.Second, "the last folds", func() bool { return count(`SELECT count(*) FROM incident_deltas`) == 0 })

	mu.Lock()
	defer mu.Unlock()
	rows, err := admin.Query(ctx, `SELECT event_id_key::text FROM feed_events`)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, id := range stored {
		if seen[id] {
			t.Errorf("event %s stored twice", id)
		}
		seen[id] = true
		if !acked[id] {
			t.Errorf("event %s stored but never accepted", id)
		}
	}
	lost := 0
	for id := range acked {
		if !seen[id] {
			lost++
		}
	}
	if lost > 0 || len(stored) != len(acked) {
		t.Errorf("%d events accepted, %d stored, %d accepted events lost", len(acked), len(stored), lost)
	}
	if n := count(`SELECT count(*) FROM incidents`); n != 3 {
		t.Errorf("%d incidents, want 3", n)
	}
	if n := count(`SELECT count(*) FROM incidents i WHERE i.event_count <> (SELECT count(*) FROM feed_events e WHERE e.incident_id = i.id)`); n != 0 {
		t.Errorf("%d incidents count other than their stored events", n)
	}
	if n := count(`SELECT coalesce(sum(event_count), 0)::int FROM incidents`); n != len(stored) {
		t.Errorf("incidents count %d events, %d stored", n, len(stored))
	}
	if n := count(`SELECT coalesce(sum(event_count), 0)::int FROM releases`); n != len(stored) {
		t.Errorf("the release counts %d events, %d stored", n, len(stored))
	}
	if unavailable.Load() == 0 || connErrs.Load() == 0 {
		t.Errorf("the chaos was never felt (%d answers 503, %d broken connections); the test tested nothing", unavailable.Load(), connErrs.Load())
	}
	t.Logf("%d events in %d batches, through %d answers 503 and %d broken connections", len(stored), batches.Load(), unavailable.Load(), connErrs.Load())
}

// enqueueFold enqueues the periodic fold's job now rather than at its next
// period, as River's periodic enqueuer does (the same arguments, the same
// uniqueness).
func enqueueFold(t *testing.T, ctx context.Context, pool *pgxpool.Pool) {
	t.Helper()
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Insert(ctx, domain.FoldDeltasArgs{}, nil); err != nil {
		t.Fatal(err)
	}
}
