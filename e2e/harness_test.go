//go:build e2e

// Package e2e drives the real anvil binary through a headless Chromium.
//
// Every test gets its own database, its own server process and its own
// browser context; the binary, the playwright driver and the browser are
// started once per test process. Run with `make test-e2e`.
package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"anvil/db/testdb"
	"anvil/internal/anviltest"
	"anvil/jobs/sandbox"
)

// repoRoot is the module root, relative to this package's directory.
const repoRoot = ".."

var (
	// binary is the anvil executable built once by TestMain.
	binary string
	// secretKey is the ANVIL_SECRET_KEY of every test server.
	secretKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))
	// expect holds playwright's auto-retrying assertions (5 s budget).
	expect = playwright.NewPlaywrightAssertions(5000)
)

// TestMain builds the binary and runs the tests inside testdb's bookkeeping.
//
// testdb.Main runs the tests, drops the databases and exits the process, so
// nothing runs after m.Run here. That is enough: each test closes its
// browser contexts before its server gets SIGTERM (open SSE streams would
// hold a graceful stop), and the driver closes the shared browser when the
// test process exits and its pipe closes. The binary's directory carries
// the process id; directories left by finished runs are removed here.
func TestMain(m *testing.M) {
	pruneBinaries()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("anvil-e2e-%d", os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "anvil")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		fmt.Fprintf(os.Stderr, "e2e: go build: %v\n%s", err, out)
		os.Exit(1)
	}
	testdb.Main(m)
}

// pruneBinaries removes the binary directories of e2e runs that have ended.
func pruneBinaries() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "anvil-e2e-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "anvil-e2e-"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(d)
		}
	}
}

// server is one running `anvil serve` with a bootstrapped owner.
type server struct {
	URL      string // http://127.0.0.1:PORT
	Email    string // the owner's email
	Password string // the owner's password
	Token    string // the owner's API token (anv_pat_…)
	DBURL    string

	cmd  *exec.Cmd
	logs *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the process writer and the test.
type syncBuffer = anviltest.SyncBuffer

// startServer starts the binary on a fresh database and a free port, waits
// for /readyz and bootstraps the organisation "acme" with an owner. The
// process gets SIGTERM when the test ends, after the test's browser
// contexts have closed; its log is printed if the test failed. extraEnv
// (NAME=value) overrides the defaults.
func startServer(t *testing.T, extraEnv ...string) *server {
	t.Helper()
	s := &server{
		Email:    "owner@acme.test",
		Password: "correct horse battery staple",
		DBURL:    testdb.URLFor(testdb.Name(t)),
		logs:     &syncBuffer{},
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"ANVIL_DATABASE_URL=" + s.DBURL,
		"ANVIL_SECRET_KEY=" + secretKey,
		"ANVIL_FEED_ARMED=true",
		"ANVIL_SANDBOX=" + sandboxMode(),
		"ANVIL_HEARTBEAT_TIMEOUT=60s",
		"ANVIL_WORK_DIR=" + t.TempDir(),
		// The journeys' repositories are local (jobstest.GitRepo).
		"ANVIL_CHECKOUT_ALLOW_LOCAL=true",
		"ANVIL_ALERTS_ALLOW_PRIVATE=true", // the receivers are httptest servers on 127.0.0.1
	}
	env = append(env, extraEnv...) // os/exec keeps the last of duplicate names
	addr := freeAddr(t)
	s.URL = "http://" + addr
	s.cmd = exec.Command(binary, "serve", "--addr", addr)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start anvil: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		closeContexts(t)
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("anvil exited with %v after SIGTERM", err)
			}
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-exited
			t.Errorf("anvil did not stop within 30 s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs.String())
		}
	})
	waitReady(t, s.URL, exited)

	boot := exec.Command(binary, "admin", "bootstrap", "--org", "acme", "--email", s.Email)
	boot.Env = env
	boot.Stdin = strings.NewReader(s.Password + "\n")
	var out, errb bytes.Buffer
	boot.Stdout, boot.Stderr = &out, &errb
	if err := boot.Run(); err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, errb.String())
	}
	var res struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Token == "" {
		t.Fatalf("bootstrap printed %q (%v)", out.String(), err)
	}
	s.Token = res.Token
	return s
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady polls /readyz until it answers 200, the process exits or 30 s pass.
func waitReady(t *testing.T, base string, exited <-chan error) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := client.Get(base + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("anvil exited before it was ready: %v", err)
		case <-time.After(25 * time.Millisecond):
		}
	}
	t.Fatalf("%s never became ready", base)
}

// Browser: one driver and one Chromium per test process.
var (
	browserOnce sync.Once
	pw          *playwright.Playwright
	browser     playwright.Browser
	browserErr  error

	ctxMu    sync.Mutex
	contexts = map[*testing.T][]playwright.BrowserContext{}
)

// driverDir is PLAYWRIGHT_DRIVER_PATH, else the repository's .e2e/driver.
func driverDir() string {
	if d := os.Getenv("PLAYWRIGHT_DRIVER_PATH"); d != "" {
		return d
	}
	if d, err := filepath.Abs(filepath.Join(repoRoot, ".e2e", "driver")); err == nil {
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	return ""
}

func launchBrowser() {
	pw, browserErr = playwright.Run(&playwright.RunOptions{
		DriverDirectory:     driverDir(),
		SkipInstallBrowsers: true,
		Verbose:             false,
	})
	if browserErr != nil {
		browserErr = fmt.Errorf("start playwright (run `make .e2e/driver`): %w", browserErr)
		return
	}
	exe := os.Getenv("ANVIL_E2E_CHROMIUM")
	if exe == "" {
		exe = "/usr/bin/chromium"
	}
	browser, browserErr = pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(exe),
		Headless:       playwright.Bool(true),
		Args: []string{
			"--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run",
			"--disable-dev-shm-usage",
		},
	})
	if browserErr != nil {
		browserErr = fmt.Errorf("launch %s: %w", exe, browserErr)
	}
}

// newPage opens a page in a browser context of its own; the context closes
// when the test ends (before the test's server stops).
func newPage(t *testing.T) playwright.Page {
	t.Helper()
	browserOnce.Do(launchBrowser)
	if browserErr != nil {
		t.Fatal(browserErr)
	}
	bctx, err := browser.NewContext(playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 1280, Height: 800},
	})
	if err != nil {
		t.Fatalf("new browser context: %v", err)
	}
	bctx.SetDefaultTimeout(10000)
	ctxMu.Lock()
	contexts[t] = append(contexts[t], bctx)
	ctxMu.Unlock()
	t.Cleanup(func() { closeContexts(t) })
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatalf("new page: %v", err)
	}
	return page
}

// closeContexts closes the test's browser contexts; it is idempotent.
func closeContexts(t *testing.T) {
	ctxMu.Lock()
	cs := contexts[t]
	delete(contexts, t)
	ctxMu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// screenshot saves a full-page PNG to e2e/out/<Test>-<name>.png.
func screenshot(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	if err := os.MkdirAll("out", 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("out", unsafeName.ReplaceAllString(t.Name()+"-"+name, "_")+".png")
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{
		Path:     playwright.String(path),
		FullPage: playwright.Bool(true),
	}); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
}

// sandboxMode runs the browser journeys in bubblewrap where it works, as a
// user's cockpit would; elsewhere in a plain process (the unit tests of
// jobs/sandbox cover bubblewrap itself).
func sandboxMode() string {
	if sandbox.BwrapAvailable() == nil {
		return "bwrap"
	}
	return "process"
}
