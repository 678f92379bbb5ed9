package main

// A project's cache between runs (docs/caches.md): the same lockfile
// installed twice in the real bwrap sandbox, through the run's egress proxy
// and the bridge — first with an empty cache, then with the cache the first
// run left — for `go mod download` and `npm ci` from local registry
// stand-ins (internal/anviltest), and for `npm ci` of a real project from
// registry.npmjs.org when the machine may use the internet.

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"anvil/domain/netpolicy"
	"anvil/domain/netproxy"
	"anvil/internal/anviltest"
	"anvil/jobs/sandbox"
)

func init() {
	register("runs/cache", benchCache)
	register("runs/cache_npmjs", benchCacheNPMJS)
}

const (
	cacheNPMPackages = 120      // packages in the npm lockfile
	cacheGoModules   = 60       // modules in go.mod
	cacheFileBytes   = 64 << 10 // source per package or module
)

// benchTB lets the bench use the tests' registry stand-ins: a failure is a
// panic the section reports, clean-ups run when the section ends.
type benchTB struct {
	testing.TB
	cleanups []func()
}

func (b *benchTB) Helper()                           {}
func (b *benchTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (b *benchTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (b *benchTB) Cleanup(f func())                  { b.cleanups = append(b.cleanups, f) }

func (b *benchTB) done() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
}

// source is n bytes of text that does not compress to nothing, as code does not.
func source(seed string, n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", seed, i)))
		fmt.Fprintf(&sb, "// %s\n", hex.EncodeToString(sum[:]))
	}
	return sb.String()
}

// cacheRig is what both sections share: a directory the sandbox's uid
// reaches, the bridge (anvil's own binary) in it, the bwrap executor and
// the projects' caches.
type cacheRig struct {
	ctx    context.Context
	dir    string
	bridge string
	exe    sandbox.Executor
	limits sandbox.Limits
	caches *sandbox.Caches
}

func newCacheRig(ctx context.Context, env *benchEnv) (*cacheRig, func(), error) {
	if err := sandbox.BwrapAvailable(); err != nil {
		return nil, nil, fmt.Errorf("the cache is measured in the bwrap sandbox: %w", err)
	}
	dir, err := os.MkdirTemp("", "anvil-bench-cache-")
	if err != nil {
		return nil, nil, err
	}
	done := func() { _ = os.RemoveAll(dir) }
	fail := func(err error) (*cacheRig, func(), error) { done(); return nil, nil, err }
	if err := os.Chmod(dir, 0o711); err != nil {
		return fail(err)
	}
	// The bridge is anvil's own binary, where the sandbox's uid reaches it.
	r := &cacheRig{ctx: ctx, dir: dir, bridge: filepath.Join(dir, "anvil-bridge")}
	if out, err := exec.Command("cp", env.Binary, r.bridge).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("copy the bridge: %w: %s", err, out))
	}
	if err := os.Chmod(r.bridge, 0o755); err != nil {
		return fail(err)
	}
	if r.exe, err = sandbox.New("bwrap", 0); err != nil {
		return fail(err)
	}
	r.limits = sandbox.DefaultLimits()
	r.caches = &sandbox.Caches{Root: filepath.Join(dir, "caches"), MaxBytes: 2 << 30}
	return r, done, nil
}

// proxy serves a run's proxy for list on a socket of its own, resolving
// names with names (nil: the system's resolver); private addresses are
// reached with local names or the operator's switch. connections counts
// what it carried.
func (r *cacheRig) proxy(name string, list *netpolicy.List, names netproxy.Resolver, allowPrivate bool) (sock string, connections func() int64, stop func(), err error) {
	sock = filepath.Join(r.dir, name+".sock")
	ul, err := sandbox.ListenProxySocket(sock)
	if err != nil {
		return "", nil, nil, err
	}
	var n atomic.Int64
	px := netproxy.New(netproxy.Options{List: list, AllowPrivate: allowPrivate, AllowLoopback: allowPrivate, Resolver: names, MaxConns: 256,
		OnConn: func(netproxy.Conn) { n.Add(1) }})
	go func() { _ = px.Serve(ul) }()
	return sock, n.Load, func() { _ = px.Close() }, nil
}

// run installs files with command in a fresh workspace with project's
// cache, its network the proxy on sock, and answers how long the sandbox
// took.
func (r *cacheRig) run(project, command, sock string, files map[string]string) (time.Duration, error) {
	ws, cleanup, err := sandbox.NewWorkspace(filepath.Join(r.dir, "ws"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = cleanup() }()
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return 0, err
		}
		if os.Geteuid() == 0 {
			if err := os.Chown(p, sandbox.SandboxUID, sandbox.SandboxGID); err != nil {
				return 0, err
			}
		}
	}
	l, err := r.caches.Acquire(project, 0, true, "")
	if err != nil {
		return 0, err
	}
	defer func() { _, _ = l.Release() }()
	var out syncBuffer
	t0 := time.Now()
	res, err := r.exe.Run(r.ctx, sandbox.Spec{Workspace: ws, Command: command, Limits: r.limits, Cache: l.Cache,
		Network: &sandbox.Network{Socket: sock, Bridge: r.bridge}}, &out)
	took := time.Since(t0)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d", res.ExitCode)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w\n%s", command, err, out.String())
	}
	return took, nil
}

// pair runs command twice for project — with an empty cache, then with the
// cache the first run left — and reports both times, what each asked of
// the registry (fetched counts it; unit names it) and the speed-up.
func (r *cacheRig) pair(env *benchEnv, label, unit, project, command, sock string, files map[string]string, fetched func() int64) error {
	before := fetched()
	cold, err := r.run(project, command, sock, files)
	if err != nil {
		return err
	}
	coldN := fetched() - before
	warm, err := r.run(project, command, sock, files)
	if err != nil {
		return err
	}
	warmN := fetched() - before - coldN
	if coldN == 0 {
		return errors.New(label + ": the cold run fetched nothing")
	}
	env.note("cache", label+" cold (s)", cold.Seconds())
	env.note("cache", label+" warm (s)", warm.Seconds())
	env.note("cache", label+" "+unit+" cold", float64(coldN))
	env.note("cache", label+" "+unit+" warm", float64(warmN))
	env.reportAtLeast("cache", label+" warm speed-up (×)", cold.Seconds()/warm.Seconds(), 3)
	return nil
}

func benchCache(ctx context.Context, env *benchEnv) (err error) {
	tb := &benchTB{}
	defer tb.done()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("runs/cache: %v", r)
		}
	}()
	var pkgs []anviltest.NPMPackage
	for i := range cacheNPMPackages {
		name := fmt.Sprintf("bench-pkg-%03d", i)
		pkgs = append(pkgs, anviltest.NPMPackage{Name: name, Version: "1.0.0",
			Files: map[string]string{"index.js": source(name, cacheFileBytes) + "module.exports = 1;\n"}})
	}
	reg := anviltest.NewNPMRegistry(tb, pkgs...)
	var mods []anviltest.GoModule
	require := "module example.bench/app\n\ngo 1.21\n\nrequire (\n"
	for i := range cacheGoModules {
		path := fmt.Sprintf("example.bench/mod%03d", i)
		mods = append(mods, anviltest.GoModule{Path: path, Version: "v1.0.0",
			Files: map[string]string{"m.go": "package mod\n\n" + source(path, cacheFileBytes)}})
		require += "\t" + path + " v1.0.0\n"
	}
	require += ")\n"
	gp := anviltest.NewGoProxy(tb, mods...)

	rig, done, err := newCacheRig(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	list, err := netpolicy.Compile([]string{fmt.Sprintf("registry.bench:%d", reg.Port), fmt.Sprintf("goproxy.bench:%d", gp.Port)})
	if err != nil {
		return err
	}
	sock, _, stop, err := rig.proxy("local", list, benchNames{"registry.bench": "127.0.0.1", "goproxy.bench": "127.0.0.1"}, true)
	if err != nil {
		return err
	}
	defer stop()
	goCmd := fmt.Sprintf("export GOPROXY=http://goproxy.bench:%d GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOTELEMETRY=off; /usr/local/go/bin/go mod download", gp.Port)
	if err := rig.pair(env, "go mod download", "registry requests", "go", goCmd, sock, map[string]string{"go.mod": require}, gp.Requests); err != nil {
		return err
	}
	base := fmt.Sprintf("http://registry.bench:%d", reg.Port)
	pj, lock := reg.Project(base)
	npmCmd := "npm ci --no-audit --no-fund --registry " + base
	return rig.pair(env, "npm ci", "registry requests", "npm", npmCmd, sock, map[string]string{"package.json": pj, "package-lock.json": lock}, reg.Requests)
}

// npmjsLock is a real project's lockfile (jest, express and eslint: 409
// packages, each with its registry.npmjs.org address), for the section
// that installs it from the real registry.
//
//go:embed testdata/npmjs/package.json testdata/npmjs/package-lock.json
var npmjsLock embed.FS

// benchCacheNPMJS is `npm ci` of a real project from registry.npmjs.org
// through the proxy with the @npm preset, cold then warm: what the cache
// saves where the cold run really crosses the network. It needs the
// internet, so it runs only when ANVIL_BENCH_INTERNET=1.
func benchCacheNPMJS(ctx context.Context, env *benchEnv) error {
	if os.Getenv("ANVIL_BENCH_INTERNET") != "1" {
		fmt.Fprintln(env.Out, "   skipped: set ANVIL_BENCH_INTERNET=1 to install from registry.npmjs.org")
		return nil
	}
	files := map[string]string{}
	for _, name := range []string{"package.json", "package-lock.json"} {
		b, err := npmjsLock.ReadFile("testdata/npmjs/" + name)
		if err != nil {
			return err
		}
		files[name] = string(b)
	}
	rig, done, err := newCacheRig(ctx, env)
	if err != nil {
		return err
	}
	defer done()
	list, err := netpolicy.Compile([]string{"@npm"})
	if err != nil {
		return err
	}
	// A machine whose resolver sends the registry to a mirror on a private
	// or reserved address needs ANVIL_RUNS_ALLOW_PRIVATE=true, as its runs
	// would; without it npm retries the refused tunnels for minutes.
	sock, conns, stop, err := rig.proxy("npmjs", list, nil, os.Getenv("ANVIL_RUNS_ALLOW_PRIVATE") == "true")
	if err != nil {
		return err
	}
	defer stop()
	// --ignore-scripts: the install is measured, not the packages' own
	// build steps.
	return rig.pair(env, "npm ci (npmjs)", "connections", "npmjs", "npm ci --no-audit --no-fund --ignore-scripts", sock, files, conns)
}
