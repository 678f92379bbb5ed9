// Command bench prints anvil's performance figures (docs/figures.md). It is a
// report, not a test: it exits 0 when a figure misses its target and
// non-zero only when a section fails to measure.
//
//	go run ./e2e/bench                 # every section
//	go run ./e2e/bench -only server    # the sections of one group
//	go run ./e2e/bench -list           # the section names
//
// It builds the binary once, creates its own database anvil_bench_<random>
// on the test Postgres (ANVIL_TEST_DATABASE_URL, default the local one) and
// drops it at the end, also on SIGINT/SIGTERM.
//
// Sections live in their own files of this package and register in init:
//
//	func init() { register("group/what", func(ctx context.Context, env *benchEnv) error { … }) }
//
// and report figures with env.report (with a target) or env.note (without).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"anvil/internal/anviltest"
)

// section is one named group of measurements.
type section struct {
	name string
	fn   func(ctx context.Context, env *benchEnv) error
}

// sections are run in registration order (files initialise in name order).
var sections []section

// register adds a section; call it from init. A name is "group/what"; -only
// selects a whole group or one section.
func register(name string, fn func(ctx context.Context, env *benchEnv) error) {
	sections = append(sections, section{name: name, fn: fn})
}

// target is one figure compared with its goal, for the summary.
type target struct {
	group, metric string
	value, goal   float64
	atMost        bool // true: value ≤ goal passes; false: value ≥ goal passes
}

func (t target) pass() bool {
	if t.atMost {
		return t.value <= t.goal
	}
	return t.value >= t.goal
}

func (t target) cmp() string {
	if t.atMost {
		return "≤"
	}
	return "≥"
}

// benchEnv is what every section gets: the built binary, a database of its
// own and the reporting helpers.
type benchEnv struct {
	Binary    string // the anvil executable
	DBURL     string // the bench database (shared by the sections)
	SecretKey string // ANVIL_SECRET_KEY for every process
	Out       io.Writer

	mu      sync.Mutex
	targets []target
	extraDB []string
}

// env is the environment of an anvil process on database dbURL.
func (e *benchEnv) env(dbURL string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"ANVIL_DATABASE_URL=" + dbURL,
		"ANVIL_SECRET_KEY=" + e.SecretKey,
		"ANVIL_FEED_ARMED=true",
		"ANVIL_SANDBOX=process",
		"ANVIL_HEARTBEAT_TIMEOUT=60s",
		"ANVIL_LOG_LEVEL=warn",
		"ANVIL_CHECKOUT_ALLOW_LOCAL=true", // the benchmarks' repositories are local
		"ANVIL_ALERTS_ALLOW_PRIVATE=true", // and so are their alert receivers
	}
}

// report prints a figure with its target (value ≤ goal) and records it.
func (e *benchEnv) report(group, metric string, value, goal float64) {
	e.record(target{group: group, metric: metric, value: value, goal: goal, atMost: true})
}

// reportAtLeast prints a figure whose target is value ≥ goal.
func (e *benchEnv) reportAtLeast(group, metric string, value, goal float64) {
	e.record(target{group: group, metric: metric, value: value, goal: goal})
}

func (e *benchEnv) record(t target) {
	e.mu.Lock()
	e.targets = append(e.targets, t)
	e.mu.Unlock()
	fmt.Fprintf(e.Out, "%-8s %-34s %10s  (target %s %s)\n", t.group, t.metric, num(t.value), t.cmp(), num(t.goal))
}

// note prints a figure without a target.
func (e *benchEnv) note(group, metric string, value float64) {
	fmt.Fprintf(e.Out, "%-8s %-34s %10s\n", group, metric, num(value))
}

// num prints whole numbers plainly and others with two decimals.
func num(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

// newDatabase creates an extra empty database for a section that needs a
// clean one; it is dropped with the bench database.
func (e *benchEnv) newDatabase(ctx context.Context) (string, error) {
	name := "anvil_bench_" + randomHex(6)
	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	e.mu.Lock()
	e.extraDB = append(e.extraDB, name)
	e.mu.Unlock()
	return urlFor(name), nil
}

// run runs the binary to completion with stdin and returns its stdout.
func (e *benchEnv) run(ctx context.Context, dbURL, stdin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, e.Binary, args...)
	cmd.Env = e.env(dbURL)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("anvil %s: %w\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes(), nil
}

// bootstrap creates an organisation and its owner and returns the owner's
// API token.
func (e *benchEnv) bootstrap(ctx context.Context, dbURL, org, email, password string) (string, error) {
	out, err := e.run(ctx, dbURL, password+"\n", "admin", "bootstrap", "--org", org, "--email", email)
	if err != nil {
		return "", err
	}
	var res struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Token == "" {
		return "", fmt.Errorf("bootstrap printed %q", out)
	}
	return res.Token, nil
}

// proc is a running `anvil serve`.
type proc struct {
	URL    string
	cmd    *exec.Cmd
	logs   syncBuffer
	exited chan error
}

// syncBuffer collects a process's output; safe to read while it writes.
type syncBuffer = anviltest.SyncBuffer

// Pid is the server's process id.
func (p *proc) Pid() int { return p.cmd.Process.Pid }

// start launches `anvil serve` on a free port without waiting for it.
func (e *benchEnv) start(dbURL string) (*proc, error) { return e.startWith(dbURL) }

// startWith is start with extra environment variables (later ones win).
func (e *benchEnv) startWith(dbURL string, extra ...string) (*proc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	p := &proc{URL: "http://" + addr, exited: make(chan error, 1)}
	p.cmd = exec.Command(e.Binary, "serve", "--addr", addr)
	p.cmd.Env = append(e.env(dbURL), extra...)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	return p, nil
}

// readyWithin bounds how long a started server may take to answer /readyz.
const readyWithin = 30 * time.Second

// waitReady polls /readyz every 2 ms until it answers 200.
func (p *proc) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyWithin)
	for time.Now().Before(deadline) {
		if res, err := client.Get(p.URL + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			return fmt.Errorf("anvil serve exited before it was ready: %w\n%s", err, p.logs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return fmt.Errorf("anvil serve was not ready within %s\n%s", readyWithin, p.logs.String())
}

// serve starts `anvil serve` and waits until it is ready.
func (e *benchEnv) serve(ctx context.Context, dbURL string) (*proc, error) {
	p, err := e.start(dbURL)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx); err != nil {
		_ = p.stop()
		return nil, err
	}
	return p, nil
}

// stop sends SIGTERM and waits (killing it after 30 s).
func (p *proc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			return fmt.Errorf("anvil serve exited with %w after SIGTERM\n%s", err, p.logs.String())
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return errors.New("anvil serve did not stop within 30 s of SIGTERM")
	}
}

// Database administration on the test server.

func adminURL() string {
	if u := os.Getenv("ANVIL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func urlFor(name string) string {
	u, err := url.Parse(adminURL())
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func adminExec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, adminURL())
	if err != nil {
		return fmt.Errorf("connect to the test Postgres: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func dropDatabase(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return adminExec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// moduleRoot is the directory of the go.mod in effect.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run bench inside the anvil module")
	}
	return filepath.Dir(gomod), nil
}

// selected reports whether a section name matches one of the -only values.
func selected(name string, only []string) bool {
	if len(only) == 0 {
		return true
	}
	for _, o := range only {
		if name == o || strings.HasPrefix(name, o+"/") {
			return true
		}
	}
	return false
}

func main() {
	if ref := os.Getenv(envPullChild); ref != "" {
		os.Exit(pullChild(ref, os.Getenv(envPullDir)))
	}
	os.Exit(mainErr())
}

func mainErr() int {
	onlyFlag := flag.String("only", "", "comma-separated groups or sections to run (e.g. server or server/cold_start)")
	list := flag.Bool("list", false, "list the sections and exit")
	flag.Parse()
	if *list {
		for _, s := range sections {
			fmt.Println(s.name)
		}
		return 0
	}
	var only []string
	for _, o := range strings.Split(*onlyFlag, ",") {
		if o = strings.TrimSpace(o); o != "" {
			only = append(only, o)
		}
	}
	var run []section
	for _, s := range sections {
		if selected(s.name, only) {
			run = append(run, s)
		}
	}
	if len(run) == 0 {
		fmt.Fprintf(os.Stderr, "bench: no section matches -only %q (see -list)\n", *onlyFlag)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	fmt.Printf("anvil bench  %s  nproc %d  %s %s/%s  cpu %s\n", time.Now().Format(time.RFC3339),
		runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, cpuModel())

	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "anvil-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	env := &benchEnv{
		Binary:    filepath.Join(tmp, "anvil"),
		SecretKey: base64.StdEncoding.EncodeToString([]byte(randomHex(16))),
		Out:       os.Stdout,
	}
	buildStart := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", env.Binary, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: go build: %v\n%s", err, out)
		return 1
	}
	fmt.Printf("built %s in %s\n", env.Binary, time.Since(buildStart).Round(time.Millisecond))

	name := "anvil_bench_" + randomHex(6)
	if err := adminExec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		fmt.Fprintln(os.Stderr, "bench: create database:", err)
		return 1
	}
	env.DBURL = urlFor(name)
	defer func() {
		env.mu.Lock()
		names := append([]string{name}, env.extraDB...)
		env.mu.Unlock()
		for _, n := range names {
			if err := dropDatabase(n); err != nil {
				fmt.Fprintf(os.Stderr, "bench: drop database %s: %v\n", n, err)
			}
		}
	}()
	fmt.Printf("database %s on %s\n\n", name, hostOf(adminURL()))

	failed := 0
	for _, s := range run {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		fmt.Printf("== %s\n", s.name)
		if err := s.fn(ctx, env); err != nil {
			failed++
			fmt.Printf("ERROR %s: %v\n", s.name, err)
		}
		fmt.Printf("   (%s)\n", time.Since(start).Round(time.Millisecond))
	}

	fmt.Println("\nsummary")
	for _, t := range env.targets {
		verdict := "PASS"
		if !t.pass() {
			verdict = "MISS"
		}
		fmt.Printf("%s  %-8s %-34s %10s %s %s\n", verdict, t.group, t.metric, num(t.value), t.cmp(), num(t.goal))
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		return 130
	}
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d section(s) failed\n", failed)
		return 1
	}
	return 0
}

// cpuModel is the first "model name" of /proc/cpuinfo, if any.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// hostOf is the host of a database URL, without credentials.
func hostOf(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Host
	}
	return "?"
}

// percentile is the nearest-rank percentile p (0–100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// sortDurations sorts in place and returns ds.
func sortDurations(ds []time.Duration) []time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

// ms is a duration in milliseconds with sub-millisecond precision.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
