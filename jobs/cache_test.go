package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"anvil/domain"
	"anvil/domain/project"
	runs "anvil/domain/run"
	"anvil/domain/runcache"
	"anvil/internal/anviltest"
	"anvil/jobs"
	"anvil/jobs/jobstest"
)

// cacheData is the project's cache on the worker's disk.
func (b *testBundle) cacheData(p *domain.Project, elem ...string) string {
	return filepath.Join(append([]string{b.caches.Root, p.ID.String(), "data"}, elem...)...)
}

// forkRun accepts a run of a fork's code, as the pull-request acceptance
// marks one.
func (b *testBundle) forkRun(t *testing.T, p *domain.Project) *runs.Run {
	t.Helper()
	var fork *runs.Run
	if err := b.store.WithProject(context.Background(), p.ID, func(ctx context.Context, tx bun.Tx, p *domain.Project) error {
		var err error
		fork, err = b.queue.AcceptTx(ctx, tx, p, runs.AcceptSpec{Trigger: runs.TriggerManual, Branch: "main", FromFork: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return fork
}

func tarballPaths(paths []string) int {
	n := 0
	for _, p := range paths {
		if strings.Contains(p, "/-/") {
			n++
		}
	}
	return n
}

// The journey: a project lists its registry (a local stand-in, by host and
// port) and runs `npm ci && npm test` for real in the sandbox; its
// connections are on its run; the second run installs from the cache,
// fetching no tarball again; the project's cache figures are recorded.
func TestNPMCIServedFromTheCache(t *testing.T) {
	t.Parallel()
	reg := anviltest.NewNPMRegistry(t, anviltest.NPMPackage{Name: "greeting", Version: "1.2.3",
		Files: map[string]string{"index.js": `module.exports = () => "hello from greeting";` + "\n"}},
		anviltest.NPMPackage{Name: "farewell", Version: "0.1.0", Files: map[string]string{"index.js": `module.exports = "bye";` + "\n"}})
	o := netOptions(true, testNames{"registry.npm.test": "127.0.0.1"})
	o.cacheBytes = 64 << 20
	b := setup(t, o)
	base := fmt.Sprintf("http://registry.npm.test:%d", reg.Port)
	pj, lock := reg.Project(base)
	var pkg map[string]any
	if err := json.Unmarshal([]byte(pj), &pkg); err != nil {
		t.Fatal(err)
	}
	pkg["scripts"] = map[string]string{"test": `node -e 'console.log(require("greeting")(), require("farewell"))'`}
	withTest, _ := json.Marshal(pkg)
	repo := jobstest.GitRepoWith(t, map[string]string{"package.json": string(withTest), "package-lock.json": lock})
	p := b.networkProject(t, "npm-cached", repo.URL, `npm ci --no-audit --no-fund --registry `+base+` && npm test`,
		[]string{fmt.Sprintf("registry.npm.test:%d", reg.Port)})

	first := b.waitTerminal(t, accept(t, b, p).ID, 120*time.Second)
	log := b.logText(t, first.ID)
	if first.Status() != runs.StatusPassed || !strings.Contains(log, "hello from greeting bye\n") ||
		!strings.Contains(log, "cache: this run reads and writes the project's cache") || !strings.Contains(log, "kept for the next run") {
		t.Fatalf("first run %s:\n%s", first.Status(), log)
	}
	cold := tarballPaths(reg.Paths())
	if cold != 2 {
		t.Fatalf("the first run fetched %d tarballs: %v", cold, reg.Paths())
	}
	if conns := b.connections(t, first.ID); conns[0].Host != "registry.npm.test" || conns[0].Verdict != "allowed" {
		t.Fatalf("connections: %+v", conns)
	}
	if _, err := os.Stat(b.cacheData(p, "npm", "_cacache")); err != nil {
		t.Fatalf("npm's cache is not in the project's cache: %v", err)
	}
	cs := runcache.New(b.store, 0)
	st, err := cs.Status(context.Background(), b.owner, p.ID)
	if err != nil || st.Bytes == 0 || st.UsedAt == nil {
		t.Fatalf("status %+v %v", st, err)
	}

	before := len(reg.Paths())
	second := b.waitTerminal(t, accept(t, b, p).ID, 120*time.Second)
	log = b.logText(t, second.ID)
	if second.Status() != runs.StatusPassed || !strings.Contains(log, "hello from greeting bye\n") {
		t.Fatalf("second run %s:\n%s", second.Status(), log)
	}
	if warm := tarballPaths(reg.Paths()[before:]); warm != 0 {
		t.Fatalf("the second run fetched %d tarballs again: %v", warm, reg.Paths()[before:])
	}
}

// cacheCommand lists what the run finds in its cache's XDG entry and leaves
// a file of its own there.
const cacheCommand = `echo "found: $(ls "$XDG_CACHE_HOME" 2>/dev/null | wc -l)"; mkdir -p "$XDG_CACHE_HOME" && : > "$XDG_CACHE_HOME/f-$(cut -c1-8 /proc/sys/kernel/random/uuid)"`

// A fork's run reads the project's cache and writes nothing back; another
// project sees none of it.
func TestForkRunCannotWriteTheCache(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cacheBytes: 64 << 20})
	repo, _, _ := gitRepo(t)
	p := b.project(t, "cached", repo, cacheCommand, 0)
	other := b.project(t, "other", repo, cacheCommand, 0)

	own := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, own.ID); own.Status() != runs.StatusPassed || !strings.Contains(log, "found: 0\n") {
		t.Fatalf("own run %s:\n%s", own.Status(), log)
	}
	fork := b.waitTerminal(t, b.forkRun(t, p).ID, 60*time.Second)
	flog := b.logText(t, fork.ID)
	if fork.Status() != runs.StatusPassed || !strings.Contains(flog, "found: 1\n") ||
		!strings.Contains(flog, "cache: this run's code comes from a fork: it reads a copy of the project's cache, and nothing it writes is kept") {
		t.Fatalf("fork run %s:\n%s", fork.Status(), flog)
	}
	if names, err := os.ReadDir(b.cacheData(p, "xdg")); err != nil || len(names) != 1 {
		t.Fatalf("the project's cache after the fork's run: %v %v", names, err)
	}
	again := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, again.ID); !strings.Contains(log, "found: 1\n") {
		t.Fatalf("the fork's file reached the project's next run:\n%s", log)
	}
	o := b.waitTerminal(t, accept(t, b, other).ID, 60*time.Second)
	if log := b.logText(t, o.ID); o.Status() != runs.StatusPassed || !strings.Contains(log, "found: 0\n") {
		t.Fatalf("another project saw the cache:\n%s", log)
	}
	if b.cacheData(p) == b.cacheData(other) {
		t.Fatal("one directory for two projects")
	}
}

// The bound: a run that takes the cache over its bound removes the least
// recently used entry — here the one the first run wrote — and says so.
func TestCacheBoundRemovesTheLeastRecentlyUsedEntry(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cacheBytes: 1 << 20})
	repo, _, _ := gitRepo(t)
	// Each run fills the entry its run number names with 600 KiB.
	p := b.project(t, "bounded", repo, `n=$(ls /cache | wc -l); mkdir -p /cache/e$n && head -c 614400 /dev/urandom > /cache/e$n/blob && ls /cache | tr '\n' ' '`, 0)
	first := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if first.Status() != runs.StatusPassed {
		t.Fatalf("first run:\n%s", b.logText(t, first.ID))
	}
	second := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	log := b.logText(t, second.ID)
	if second.Status() != runs.StatusPassed || !strings.Contains(log, "cache: removed e0, least recently used, to keep the cache within 1.0 MiB") {
		t.Fatalf("second run:\n%s", log)
	}
	names, _ := os.ReadDir(b.cacheData(p))
	if len(names) != 1 || names[0].Name() != "e1" {
		t.Fatalf("left in the cache: %v", names)
	}
	st, err := runcache.New(b.store, 0).Status(context.Background(), b.owner, p.ID)
	if err != nil || st.Bytes == 0 || st.Bytes > 1<<20 {
		t.Fatalf("status %+v %v", st, err)
	}
}

// Clearing: the project's next generation, audited; the job erases the
// cache on the worker; the next run starts cold.
func TestClearErasesTheCache(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cacheBytes: 64 << 20})
	repo, _, _ := gitRepo(t)
	p := b.project(t, "cleared", repo, cacheCommand, 0)
	if r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second); r.Status() != runs.StatusPassed {
		t.Fatalf("run:\n%s", b.logText(t, r.ID))
	}
	ctx := context.Background()
	st, err := runcache.New(b.store, 0).Clear(ctx, b.owner, p.ID)
	if err != nil || st.Generation != 1 || st.Bytes != 0 {
		t.Fatalf("clear: %+v %v", st, err)
	}
	waitFor(t, 20*time.Second, "the cache erased on the worker", func() bool {
		_, err := os.Stat(b.cacheData(p))
		return os.IsNotExist(err)
	})
	var audits int
	if err := b.db.Bun.NewRaw(`SELECT count(*) FROM audit_log WHERE kind = ? AND target = ?`, domain.AuditRunCacheCleared, p.Slug).Scan(ctx, &audits); err != nil || audits != 1 {
		t.Fatalf("audit entries: %d %v", audits, err)
	}
	r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, r.ID); !strings.Contains(log, "found: 0\n") {
		t.Fatalf("the run after a clear found the old cache:\n%s", log)
	}
}

// Deleting a project removes its cache from the worker (with its go-mod
// entry's read-only files, as the go command leaves them) and its row;
// another project's cache stays.
func TestDeletingAProjectRemovesItsCache(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cacheBytes: 64 << 20})
	repo, _, _ := gitRepo(t)
	cmd := `mkdir -p "$GOMODCACHE/m@v1" && : > "$GOMODCACHE/m@v1/a.go" && chmod -R a-w "$GOMODCACHE/m@v1"`
	doomed := b.project(t, "doomed", repo, cmd, 0)
	kept := b.project(t, "kept", repo, cmd, 0)
	for _, p := range []*domain.Project{doomed, kept} {
		if r := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second); r.Status() != runs.StatusPassed {
			t.Fatalf("run:\n%s", b.logText(t, r.ID))
		}
	}
	ctx := context.Background()
	if _, err := b.services.Erasure.DeleteProject(ctx, b.owner, doomed.ID, "doomed"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the deleted project's cache to be removed", func() bool {
		_, err := os.Stat(filepath.Join(b.caches.Root, doomed.ID.String()))
		return os.IsNotExist(err)
	})
	if _, err := os.Stat(b.cacheData(kept, "go-mod", "m@v1", "a.go")); err != nil {
		t.Fatalf("the live project's cache: %v", err)
	}
	waitFor(t, 60*time.Second, "the deleted project's cache row to be erased", func() bool {
		var n int
		if err := b.db.Bun.NewRaw(`SELECT count(*) FROM run_caches WHERE project_id = ?`, doomed.ID).Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// A worker that starts where an earlier process of the same host and pid
// worked (a restarted container) sweeps what that process's runs left:
// workspaces, forks' copies of a cache, proxy sockets — and keeps its
// mirrors.
func TestWorkerStartSweepsItsOwnFolder(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	host, _ := os.Hostname()
	if host == "" {
		host = "local"
	}
	own := filepath.Join(root, host+"-"+strconv.Itoa(os.Getpid()))
	for _, d := range []string{"ws-1/sub", "ws-1.cache/npm/locked", "mirrors/p"} {
		if err := os.MkdirAll(filepath.Join(own, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(own, "ws-1.cache", "npm", "locked"), 0); err != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", filepath.Join(own, "ws-1.proxy.sock"))
	if err != nil {
		t.Fatal(err)
	}
	sock.(*net.UnixListener).SetUnlinkOnClose(false)
	sock.Close()
	dir, err := jobs.ProcessWorkRoot(root)
	if err != nil || dir != own {
		t.Fatalf("%s %v", dir, err)
	}
	left, _ := os.ReadDir(own)
	if len(left) != 1 || left[0].Name() != "mirrors" {
		t.Fatalf("left in the worker's folder: %v", left)
	}
}

// A repair run has a cache of its own: it holds the secrets scoped to
// repairs, so it never reads what an ordinary run left in /cache, and an
// ordinary run never reads what it left.
func TestRepairRunHasItsOwnCache(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cacheBytes: 64 << 20})
	rb := &repairBundle{testBundle: b, incidents: b.services.Incidents, cards: b.services.Cards, feed: b.services.Feed}
	f := newForge(t)
	repo := jobstest.GitRepo(t)
	agent := `echo "repair found: $(ls "$XDG_CACHE_HOME" 2>/dev/null | wc -l)"; mkdir -p "$XDG_CACHE_HOME" && : > "$XDG_CACHE_HOME/from-repair"; echo >> README`
	p, inc := rb.incident(t, repo.URL, agent, "github", f.srv.URL)
	cmd := cacheCommand
	if _, err := b.projects.Update(context.Background(), b.owner, p.ID, project.ProjectInput{RunCommand: &cmd}); err != nil {
		t.Fatal(err)
	}
	own := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, own.ID); own.Status() != runs.StatusPassed || !strings.Contains(log, "found: 0\n") {
		t.Fatalf("own run %s:\n%s", own.Status(), log)
	}
	_, run := rb.approveAndWait(t, inc)
	log := b.logText(t, run.ID)
	if !strings.Contains(log, "repair found: 0\n") || !strings.Contains(log, "cache: this repair run reads and writes the project's repair cache") {
		t.Fatalf("the repair run saw the runs' cache:\n%s", log)
	}
	again := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if log := b.logText(t, again.ID); !strings.Contains(log, "found: 1\n") {
		t.Fatalf("the repair's file reached the project's next run:\n%s", log)
	}
}

// A project may give forks' runs no cache: a fork's run then starts with
// an empty one, and its log says why.
func TestForkCacheOff(t *testing.T) {
	t.Parallel()
	b := setup(t, options{cacheBytes: 64 << 20})
	repo, _, _ := gitRepo(t)
	p := b.project(t, "no-fork-cache", repo, cacheCommand, 0)
	if !p.ForkCache {
		t.Fatal("a new project gives forks no cache")
	}
	own := b.waitTerminal(t, accept(t, b, p).ID, 60*time.Second)
	if own.Status() != runs.StatusPassed {
		t.Fatalf("own run:\n%s", b.logText(t, own.ID))
	}
	off := false
	if _, err := b.projects.Update(context.Background(), b.owner, p.ID, project.ProjectInput{ForkCache: &off}); err != nil {
		t.Fatal(err)
	}
	fork := b.waitTerminal(t, b.forkRun(t, p).ID, 60*time.Second)
	flog := b.logText(t, fork.ID)
	if fork.Status() != runs.StatusPassed || !strings.Contains(flog, "found: 0\n") ||
		!strings.Contains(flog, "this project gives forks' runs no cache") {
		t.Fatalf("fork run %s:\n%s", fork.Status(), flog)
	}
}
