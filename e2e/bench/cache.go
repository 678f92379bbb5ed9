package main

// A project's cache between runs (docs/caches.md): the same lockfile
// installed twice in the real bwrap sandbox, through the run's egress proxy
// and the bridge, from local registry stand-ins (internal/anviltest) — first
// with an empty cache, then with the cache the first run left — for `go mod
// download` and `npm ci`. The stand-ins answer from loopback at once: a
// real registry is tens of milliseconds away per request, so the cold
// figures here are the fastest a cold run can be, and the ratio the least
// the cache saves.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"anvil/domain/netpolicy"
	"anvil/domain/netproxy"
	"anvil/internal/anviltest"
	"anvil/jobs/sandbox"
)

func init() {
	register("runs/cache", benchCache)
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

func benchCache(ctx context.Context, env *benchEnv) (err error) {
	if err := sandbox.BwrapAvailable(); err != nil {
		return fmt.Errorf("the cache is measured in the bwrap sandbox: %w", err)
	}
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

	dir, err := os.MkdirTemp("", "anvil-bench-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	// The bridge is anvil's own binary, where the sandbox's uid reaches it.
	bridge := filepath.Join(dir, "anvil-bridge")
	if out, err := exec.Command("cp", env.Binary, bridge).CombinedOutput(); err != nil {
		return fmt.Errorf("copy the bridge: %w: %s", err, out)
	}
	if err := os.Chmod(bridge, 0o755); err != nil {
		return err
	}
	sock := filepath.Join(dir, "proxy.sock")
	ul, err := sandbox.ListenProxySocket(sock)
	if err != nil {
		return err
	}
	list, err := netpolicy.Compile([]string{fmt.Sprintf("registry.bench:%d", reg.Port), fmt.Sprintf("goproxy.bench:%d", gp.Port)})
	if err != nil {
		return err
	}
	px := netproxy.New(netproxy.Options{List: list, AllowPrivate: true,
		Resolver: benchNames{"registry.bench": "127.0.0.1", "goproxy.bench": "127.0.0.1"}, MaxConns: 256, OnConn: func(netproxy.Conn) {}})
	go func() { _ = px.Serve(ul) }()
	defer px.Close()

	exe, err := sandbox.New("bwrap", 0)
	if err != nil {
		return err
	}
	limits := sandbox.DefaultLimits()
	limits.MemoryBytes = 0 // node and go reserve more address space than they use
	caches := &sandbox.Caches{Root: filepath.Join(dir, "caches"), MaxBytes: 2 << 30}
	// run installs files with command in a fresh workspace with project's
	// cache and answers how long the sandbox took.
	run := func(project, command string, files map[string]string) (time.Duration, error) {
		ws, cleanup, err := sandbox.NewWorkspace(filepath.Join(dir, "ws"))
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
		l, err := caches.Acquire(project, 0, true, "")
		if err != nil {
			return 0, err
		}
		defer func() { _, _ = l.Release() }()
		var out syncBuffer
		t0 := time.Now()
		res, err := exe.Run(ctx, sandbox.Spec{Workspace: ws, Command: command, Limits: limits, Cache: l.Cache,
			Network: &sandbox.Network{Socket: sock, Bridge: bridge}}, &out)
		took := time.Since(t0)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w\n%s", command, err, out.String())
		}
		return took, nil
	}
	pair := func(label, project, command string, files map[string]string, fetched func() int64) error {
		before := fetched()
		cold, err := run(project, command, files)
		if err != nil {
			return err
		}
		coldReqs := fetched() - before
		warm, err := run(project, command, files)
		if err != nil {
			return err
		}
		warmReqs := fetched() - before - coldReqs
		if coldReqs == 0 {
			return errors.New(label + ": the cold run fetched nothing")
		}
		env.note("cache", label+" cold (s)", cold.Seconds())
		env.note("cache", label+" warm (s)", warm.Seconds())
		env.note("cache", label+" registry requests cold", float64(coldReqs))
		env.note("cache", label+" registry requests warm", float64(warmReqs))
		env.reportAtLeast("cache", label+" warm speed-up (×)", cold.Seconds()/warm.Seconds(), 3)
		return nil
	}
	goCmd := fmt.Sprintf("export GOPROXY=http://goproxy.bench:%d GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOTELEMETRY=off; /usr/local/go/bin/go mod download", gp.Port)
	if err := pair("go mod download", "go", goCmd, map[string]string{"go.mod": require}, gp.Requests); err != nil {
		return err
	}
	base := fmt.Sprintf("http://registry.bench:%d", reg.Port)
	pj, lock := reg.Project(base)
	npmCmd := "npm ci --no-audit --no-fund --registry " + base
	return pair("npm ci", "npm", npmCmd, map[string]string{"package.json": pj, "package-lock.json": lock}, reg.Requests)
}
