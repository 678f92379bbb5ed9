package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"anvil/domain/repourl"
	"anvil/internal/anviltest"
)

const testGrace = 500 * time.Millisecond

// hostSecret is put into the test process's environment by TestMain; no
// command may see it.
const hostSecret = "ANVIL_SECRET_KEY"

var (
	wsRoot  string // a workspace root every test may use (mode 0711)
	fixture struct {
		bare   string // file path of a bare repository
		url    string // its file:// URL
		first  string // first commit on main
		second string // second (head) commit on main
	}
)

func TestMain(m *testing.M) {
	// The test binary is the bridge of the sandboxes it starts
	// (network_test.go), as anvil's own binary is.
	if len(os.Args) > 1 && os.Args[1] == BridgeCommand {
		os.Exit(BridgeMain(os.Args[2:]))
	}
	// The test binary is also the non-root worker of cache_nonroot_test.go.
	if dir := os.Getenv(nonRootCacheEnv); dir != "" {
		os.Exit(nonRootCacheMain(dir))
	}
	if v := os.Getenv(podChildEnv); v != "" {
		podChild(v)
	}
	os.Setenv(hostSecret, "xyz")
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	base, err := os.MkdirTemp("", "anvil-sandbox-test-")
	if err != nil {
		return 0, err
	}
	defer removeAll(base)
	if err := os.Chmod(base, 0o711); err != nil {
		return 0, err
	}
	wsRoot = filepath.Join(base, "ws")

	fixture.bare = filepath.Join(base, "repo.git")
	fixture.url = "file://" + fixture.bare
	work := filepath.Join(base, "work")
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return 0, err
	}
	git := func(dir string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %v: %w: %s", args, err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	steps := []struct {
		dir  string
		args []string
	}{
		{base, []string{"init", "-q", "--bare", fixture.bare}},
		{base, []string{"init", "-q", work}},
	}
	for _, s := range steps {
		if _, err := git(s.dir, s.args...); err != nil {
			return 0, err
		}
	}
	commit := func(content string) (string, error) {
		if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte(content), 0o644); err != nil {
			return "", err
		}
		if _, err := git(work, "add", "a.txt"); err != nil {
			return "", err
		}
		if _, err := git(work, "commit", "-q", "-m", content); err != nil {
			return "", err
		}
		return git(work, "rev-parse", "HEAD")
	}
	if fixture.first, err = commit("one\n"); err != nil {
		return 0, err
	}
	if fixture.second, err = commit("two\n"); err != nil {
		return 0, err
	}
	if _, err := git(work, "push", "-q", fixture.bare, "main:main", "main:refs/heads/other"); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// syncBuffer is an io.Writer tests can read while Run writes it.
type syncBuffer = anviltest.SyncBuffer

// waitFor polls until the buffer contains s.
func waitFor(t *testing.T, b *syncBuffer, s string) {
	t.Helper()
	if !pollUntil(20*time.Second, func() bool { return strings.Contains(b.String(), s) }) {
		t.Fatalf("output never contained %q; got %q", s, b.String())
	}
}

func newWorkspace(t *testing.T) string {
	t.Helper()
	dir, cleanup, err := NewWorkspace(wsRoot)
	if err != nil {
		t.Fatalf("NewWorkspace: %v", err)
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return dir
}

func bwrapExec(t *testing.T) Executor {
	t.Helper()
	if err := BwrapAvailable(); err != nil {
		t.Skipf("bwrap unavailable on this machine, skipping: %v", err)
	}
	e, err := New("bwrap", testGrace)
	if err != nil {
		t.Fatalf("New(bwrap): %v", err)
	}
	return e
}

func processExec(t *testing.T) Executor {
	t.Helper()
	e, err := New("process", testGrace)
	if err != nil {
		t.Fatalf("New(process): %v", err)
	}
	return e
}

// executors runs f as a parallel subtest per executor.
func executors(t *testing.T, f func(t *testing.T, e Executor)) {
	for _, ex := range []struct {
		name string
		mk   func(*testing.T) Executor
	}{{"bwrap", bwrapExec}, {"process", processExec}} {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			f(t, ex.mk(t))
		})
	}
}

// run runs command in a fresh workspace.
func run(t *testing.T, e Executor, command string) (Result, string, string) {
	t.Helper()
	ws := newWorkspace(t)
	var out syncBuffer
	res, err := e.Run(context.Background(), Spec{Workspace: ws, Command: command, Limits: DefaultLimits()}, &out)
	if err != nil {
		t.Fatalf("Run(%q): %v (output %q)", command, err, out.String())
	}
	return res, out.String(), ws
}

func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := New("docker", 0); err == nil {
		t.Fatalf("New(docker) succeeded")
	}
	p, err := New("process", 0)
	if err != nil {
		t.Fatalf("New(process): %v", err)
	}
	if p.Name() != "process" || p.Sandboxed() {
		t.Fatalf("process executor: name %q sandboxed %v", p.Name(), p.Sandboxed())
	}
	if p.(*processExecutor).grace != DefaultGrace {
		t.Fatalf("grace %v, want DefaultGrace", p.(*processExecutor).grace)
	}
	d, err := New("", testGrace)
	if avail := BwrapAvailable(); avail != nil {
		if err == nil {
			t.Fatalf("New(\"\") succeeded although bwrap is unavailable: %v", avail)
		}
		return
	}
	if err != nil {
		t.Fatalf("New(\"\"): %v", err)
	}
	if d.Name() != "bwrap" || !d.Sandboxed() {
		t.Fatalf("default executor: name %q sandboxed %v", d.Name(), d.Sandboxed())
	}
}

func TestPass(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		res, out, _ := run(t, e, "echo hello; echo world")
		if res.ExitCode != 0 || res.Canceled || res.TimedOut {
			t.Fatalf("result %+v, want exit 0", res)
		}
		if out != "hello\nworld\n" {
			t.Fatalf("output %q", out)
		}
	})
}

func TestFail(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		res, _, _ := run(t, e, "echo failing; exit 3")
		if res.ExitCode != 3 || res.Canceled || res.TimedOut {
			t.Fatalf("result %+v, want exit 3", res)
		}
	})
}

func TestStdoutAndStderr(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		_, out, _ := run(t, e, "echo out; echo err >&2; echo out2")
		if out != "out\nerr\nout2\n" {
			t.Fatalf("output %q, want stdout and stderr in order", out)
		}
	})
}

func TestCancelIgnoringTERM(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		ws := newWorkspace(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		var out syncBuffer
		done := make(chan struct{})
		var res Result
		var err error
		go func() {
			defer close(done)
			res, err = e.Run(ctx, Spec{Workspace: ws, Command: "trap '' TERM; echo ready; while :; do sleep 0.1; done"}, &out)
		}()
		waitFor(t, &out, "ready")
		start := time.Now()
		cancel(ErrCanceled)
		<-done
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if !res.Canceled || res.TimedOut {
			t.Fatalf("result %+v, want Canceled", res)
		}
		if elapsed < testGrace {
			t.Fatalf("stopped after %v, before the grace %v", elapsed, testGrace)
		}
		if elapsed > testGrace+5*time.Second {
			t.Fatalf("stopped after %v", elapsed)
		}
	})
}

func TestCancelGraceful(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		ws := newWorkspace(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		var out syncBuffer
		done := make(chan struct{})
		var res Result
		var err error
		go func() {
			defer close(done)
			res, err = e.Run(ctx, Spec{Workspace: ws, Command: "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done"}, &out)
		}()
		waitFor(t, &out, "ready")
		cancel(ErrCanceled)
		<-done
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if !res.Canceled || res.ExitCode != 7 {
			t.Fatalf("result %+v, want Canceled with the trap's exit 7", res)
		}
		if !strings.Contains(out.String(), "got-term") {
			t.Fatalf("output %q: the trap did not run", out.String())
		}
	})
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		ws := newWorkspace(t)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		res, err := e.Run(ctx, Spec{Workspace: ws, Command: "sleep 1000"}, &syncBuffer{})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if !res.TimedOut || res.Canceled {
			t.Fatalf("result %+v, want TimedOut", res)
		}
		ctx2, cancel2 := context.WithCancelCause(context.Background())
		cancel2(ErrTimeout)
		res, err = e.Run(ctx2, Spec{Workspace: ws, Command: "true"}, &syncBuffer{})
		if err != nil || !res.TimedOut {
			t.Fatalf("Run with cause ErrTimeout: %+v, %v", res, err)
		}
	})
}

// findProcs returns the running processes whose command line contains
// marker (bwrap's, the shell's and the sleeps').
func findProcs(marker string) []int {
	var found []int
	for _, pid := range pids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			found = append(found, pid)
		}
	}
	return found
}

// findSleeps returns the processes running "sleep marker…".
func findSleeps(marker string) []int {
	var found []int
	for _, pid := range pids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.HasPrefix(b, []byte("sleep\x00"+marker)) {
			found = append(found, pid)
		}
	}
	return found
}

func TestNoOrphans(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		marker := fmt.Sprintf("1000.%d%d", os.Getpid(), time.Now().UnixNano()%1e9)
		start := time.Now()
		// One grandchild keeps the output pipe, one has closed it.
		res, _, _ := run(t, e, "sleep "+marker+" & sleep "+marker+"1 >/dev/null 2>&1 & echo started")
		if res.ExitCode != 0 {
			t.Fatalf("result %+v", res)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Run took %v with a backgrounded grandchild", d)
		}
		if left := findProcs(marker); len(left) > 0 {
			t.Fatalf("processes %v survived Run", left)
		}
	})
}

func TestNoOrphansAfterCancel(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		ws := newWorkspace(t)
		marker := fmt.Sprintf("1000.%d%d", os.Getpid(), time.Now().UnixNano()%1e9)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		var out syncBuffer
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = e.Run(ctx, Spec{Workspace: ws, Command: "(trap '' TERM; sleep " + marker + ") & echo ready; wait"}, &out)
		}()
		waitFor(t, &out, "ready")
		cancel(ErrCanceled)
		<-done
		if left := findProcs(marker); len(left) > 0 {
			t.Fatalf("processes %v survived Run", left)
		}
	})
}

func TestEnvAllowlist(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		ws := newWorkspace(t)
		var out syncBuffer
		_, err := e.Run(context.Background(), Spec{
			Workspace: ws,
			Command:   "env",
			Env:       map[string]string{"ANVIL_TASK": "build", "TERM": "xterm"},
		}, &out)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := map[string]string{
			"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": ws, "LANG": "C.UTF-8",
			"TERM": "xterm", "CI": "true", "ANVIL_TASK": "build",
		}
		if e.Sandboxed() {
			// An offline sandbox's package managers do not retry
			// (offline.go).
			for k, v := range OfflineEnv {
				want[k] = v
			}
		}
		shell := map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
			if _, ok := want[k]; !ok && !shell[k] {
				t.Errorf("unexpected variable %q in the command's environment", line)
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s=%q, want %q", k, got[k], v)
			}
		}
		if strings.Contains(out.String(), hostSecret) {
			t.Fatalf("host variable %s leaked", hostSecret)
		}
	})
}

func TestBwrapNoNetwork(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	res, out, _ := run(t, e, fmt.Sprintf("cat /proc/net/dev; bash -c 'echo hi > /dev/tcp/127.0.0.1/%d' && echo CONNECTED", port))
	if strings.Contains(out, "CONNECTED") || res.ExitCode == 0 {
		t.Fatalf("connected to the host's listener from the sandbox: %+v %q", res, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.Contains(name, "|") && name != "lo" && !strings.HasPrefix(name, "bash") {
			t.Fatalf("interface %q inside the sandbox: %q", name, out)
		}
	}
	select {
	case <-accepted:
		t.Fatalf("the host listener accepted a connection")
	default:
	}
}

func TestBwrapIsolation(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	ws := newWorkspace(t)

	// A host file only root may read, and one everyone may, both bound in.
	dir, err := os.MkdirTemp(wsRoot, "extra-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	rootOnly := filepath.Join(dir, "root-only")
	public := filepath.Join(dir, "public")
	if err := os.WriteFile(rootOnly, []byte("TOPSECRET\n"), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	if err := os.WriteFile(public, []byte("PUBLIC\n"), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	hostTmp, err := os.CreateTemp("/tmp", "anvil-host-visible-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	hostTmp.Close()
	defer os.Remove(hostTmp.Name())
	privateName := fmt.Sprintf("/tmp/anvil-private-%d-%d", os.Getpid(), time.Now().UnixNano())

	script := strings.Join([]string{
		`echo "uid=$(id -u) gid=$(id -g)"`,
		`cat /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ`,
		`test -e /etc/shadow && echo SHADOW-EXISTS`,
		`cat ` + rootOnly + ` 2>/dev/null`,
		`cat ` + public,
		`echo x > ` + public + ` 2>/dev/null && echo PUBLIC-WRITTEN`,
		`touch /usr/anvil-x 2>/dev/null && echo USR-WRITTEN`,
		`touch /anvil-x 2>/dev/null && echo ROOT-WRITTEN`,
		`touch /etc/anvil-x 2>/dev/null && echo ETC-WRITTEN`,
		`touch ` + filepath.Dir(ws) + `/anvil-parent-x 2>/dev/null`,
		`echo inside > inside.txt && echo WS-WRITTEN`,
		`echo private > ` + privateName + ` && echo TMP-WRITTEN`,
		`test -e ` + hostTmp.Name() + ` && echo HOST-TMP-VISIBLE`,
		`echo "pwd=$(pwd) home=$HOME"`,
		`test -e /root && echo ROOT-HOME-VISIBLE`,
		`true`,
	}, "\n")
	var out syncBuffer
	res, err := e.Run(context.Background(), Spec{Workspace: ws, Command: script, ExtraReadOnly: []string{rootOnly, public}}, &out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := out.String()
	if res.ExitCode != 0 {
		t.Fatalf("result %+v, output %q", res, got)
	}
	if os.Geteuid() == 0 && !strings.Contains(got, "uid=65534 gid=65534") {
		t.Fatalf("not running as 65534: %q", got)
	}
	for _, bad := range []string{"SHADOW-READ", "SHADOW-EXISTS", "TOPSECRET", "PUBLIC-WRITTEN", "USR-WRITTEN", "ROOT-WRITTEN", "ETC-WRITTEN", "HOST-TMP-VISIBLE", "ROOT-HOME-VISIBLE"} {
		if strings.Contains(got, bad) {
			t.Errorf("%s in output %q", bad, got)
		}
	}
	for _, good := range []string{"PUBLIC\n", "WS-WRITTEN", "TMP-WRITTEN", "pwd=" + ws + " home=" + ws} {
		if !strings.Contains(got, good) {
			t.Errorf("%q missing from output %q", good, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("workspace file on the host: %q, %v", b, err)
	}
	// The workspace's parent directories inside the sandbox are bwrap's
	// (on the read-only root, or here on the private /tmp), not the host's.
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "anvil-parent-x")); err == nil {
		t.Errorf("the sandbox wrote next to the workspace on the host")
	}
	if _, err := os.Stat(privateName); err == nil {
		os.Remove(privateName)
		t.Errorf("the sandbox's /tmp file appeared on the host")
	}
}

func TestProcessRunsUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("not root")
	}
	res, out, _ := run(t, processExec(t), "id -u; cat /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ; true")
	if res.ExitCode != 0 || out != "65534\n" {
		t.Fatalf("result %+v output %q", res, out)
	}
}

func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		ws := newWorkspace(t)
		var out syncBuffer
		l := DefaultLimits()
		l.FileSizeBytes = 1 << 20
		res, err := e.Run(context.Background(), Spec{Workspace: ws, Command: "head -c 2M /dev/zero > f", Limits: l}, &out)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if res.ExitCode == 0 {
			t.Fatalf("writing 2 MiB with a 1 MiB limit succeeded: %+v %q", res, out.String())
		}
		fi, err := os.Stat(filepath.Join(ws, "f"))
		if err != nil || fi.Size() > 1<<20 {
			t.Fatalf("file: %v, %v", fi, err)
		}
		// The same command passes without the limit.
		l.FileSizeBytes = 0
		res, err = e.Run(context.Background(), Spec{Workspace: ws, Command: "head -c 2M /dev/zero > g", Limits: l}, &out)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("without limit: %+v, %v, %q", res, err, out.String())
		}
	})
}

func TestLimitsApplied(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		l := Limits{CPUSeconds: 1234, MemoryBytes: 3 << 30, Processes: 321, FileSizeBytes: 5 << 20}
		ws := newWorkspace(t)
		var out syncBuffer
		_, err := e.Run(context.Background(), Spec{Workspace: ws, Command: "ulimit -t; ulimit -d; ulimit -v; ulimit -p 2>/dev/null || cat /proc/self/limits | grep processes; ulimit -f; ulimit -H -t", Limits: l}, &out)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		got := out.String()
		for _, want := range []string{"1234\n", strconv.Itoa(3<<30/1024) + "\n", "321", strconv.Itoa(5<<20/512) + "\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("limit %q missing from %q", want, got)
			}
		}
	})
}

func TestWorkspaceCleanup(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		dir, cleanup, err := NewWorkspace(wsRoot)
		if err != nil {
			t.Fatalf("NewWorkspace: %v", err)
		}
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("workspace mode: %v, %v", fi, err)
		}
		if st := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && (st.Uid != SandboxUID || st.Gid != SandboxGID) {
			t.Fatalf("workspace owned by %d:%d", st.Uid, st.Gid)
		}
		res, err := e.Run(context.Background(), Spec{Workspace: dir, Command: "mkdir -p a/b/c && echo x > a/b/c/f && chmod 0 a/b/c/f && chmod 0555 a/b/c a/b && chmod 0 a && ln -s / link"}, &syncBuffer{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run: %+v, %v", res, err)
		}
		if err := cleanup(); err != nil {
			t.Fatalf("cleanup: %v", err)
		}
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Fatalf("workspace still there: %v", err)
		}
		if err := cleanup(); err != nil {
			t.Fatalf("second cleanup: %v", err)
		}
	})
}

func TestRunInvalidSpec(t *testing.T) {
	t.Parallel()
	e := processExec(t)
	for _, s := range []Spec{
		{Workspace: "relative", Command: "true"},
		{Workspace: "/nonexistent-anvil", Command: "true"},
		{Workspace: wsRoot, Command: ""},
		{Workspace: "/", Command: "true", Env: map[string]string{"A=B": "x"}},
		{Workspace: "/", Command: "true", ExtraReadOnly: []string{"/nonexistent-anvil"}},
	} {
		if _, err := e.Run(context.Background(), s, &syncBuffer{}); err == nil {
			t.Errorf("Run(%+v) succeeded", s)
		}
	}
}

// hostGit checks out on the host, local repositories allowed (the fixture
// is one).
func hostGit(t *testing.T) *Git {
	t.Helper()
	g, err := NewGit(false, repourl.Policy{AllowLocal: true})
	if err != nil {
		t.Fatalf("NewGit: %v", err)
	}
	return g
}

// confinedGit checks out inside bubblewrap, local repositories allowed.
func confinedGit(t *testing.T) *Git {
	t.Helper()
	if err := BwrapAvailable(); err != nil {
		t.Skipf("bwrap unavailable on this machine, skipping: %v", err)
	}
	g, err := NewGit(true, repourl.Policy{AllowLocal: true})
	if err != nil {
		t.Fatalf("NewGit: %v", err)
	}
	return g
}

// gits runs f as a parallel subtest with a host and a confined git.
func gits(t *testing.T, f func(t *testing.T, g *Git)) {
	for _, ex := range []struct {
		name string
		mk   func(*testing.T) *Git
	}{{"confined", confinedGit}, {"host", hostGit}} {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			f(t, ex.mk(t))
		})
	}
}

func TestCheckoutBranch(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		dir := newWorkspace(t)
		var log bytes.Buffer
		const token = "ghs_TokenThatMustNotBeStored123456"
		sha, err := g.Checkout(context.Background(), fixture.url, "main", "", token, dir, &log)
		if err != nil {
			t.Fatalf("Checkout: %v (log %q)", err, log.String())
		}
		if sha != fixture.second {
			t.Fatalf("sha %s, want %s", sha, fixture.second)
		}
		if cfg, _ := os.ReadFile(filepath.Join(dir, ".git", "config")); strings.Contains(string(cfg), token) ||
			strings.Contains(strings.ToLower(string(cfg)), "extraheader") || strings.Contains(log.String(), token) {
			t.Fatalf("the token was stored or logged: %q", cfg)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "two\n" {
			t.Fatalf("a.txt %q", b)
		}
		if _, err := os.Stat(filepath.Join(dir, ".git", "shallow")); err != nil {
			t.Fatalf("checkout is not shallow: %v", err)
		}
	})
}

func TestCheckoutPinnedSHA(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		for _, branch := range []string{"", "main"} {
			dir := newWorkspace(t)
			sha, err := g.Checkout(context.Background(), fixture.url, branch, strings.ToUpper(fixture.first), "", dir, nil)
			if err != nil {
				t.Fatalf("Checkout(branch %q): %v", branch, err)
			}
			if sha != fixture.first {
				t.Fatalf("sha %s, want %s", sha, fixture.first)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" {
				t.Fatalf("a.txt %q", b)
			}
		}
	})
}

func TestCheckoutPinnedSHAFallback(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		// Protocol v0 servers refuse to serve unadvertised commits by default.
		dir := newWorkspace(t)
		var log bytes.Buffer
		sha, err := g.checkout(context.Background(), fixture.url, "main", fixture.first, "", dir, &log, [][2]string{{"protocol.version", "0"}})
		if err != nil {
			t.Fatalf("checkout: %v (log %q)", err, log.String())
		}
		if sha != fixture.first || !strings.Contains(log.String(), "fetching all branches") {
			t.Fatalf("sha %s (want %s), log %q", sha, fixture.first, log.String())
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" {
			t.Fatalf("a.txt %q", b)
		}
	})
}

func TestCheckoutMissingBranch(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		_, err := g.Checkout(context.Background(), fixture.url, "no-such-branch", "", "", newWorkspace(t), nil)
		if !errors.Is(err, ErrBranchNotFound) || !strings.Contains(err.Error(), "no-such-branch") {
			t.Fatalf("err %v, want ErrBranchNotFound naming the branch", err)
		}
	})
}

func TestCheckoutMissingSHA(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		_, err := g.Checkout(context.Background(), fixture.url, "", strings.Repeat("ab", 20), "", newWorkspace(t), nil)
		if err == nil {
			t.Fatalf("Checkout of a missing commit succeeded")
		}
	})
}

func TestCheckoutRejects(t *testing.T) {
	t.Parallel()
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	cases := []struct{ branch, sha, dir string }{
		{"main", "", nonEmpty},
		{"", "", filepath.Join(t.TempDir(), "a")},
		{"--upload-pack=evil", "", filepath.Join(t.TempDir(), "b")},
		{"bad..name", "", filepath.Join(t.TempDir(), "c")},
		{"", "abc123", filepath.Join(t.TempDir(), "d")},
		{"main", "", "relative/dir"},
	}
	g := hostGit(t)
	for _, c := range cases {
		if _, err := g.Checkout(context.Background(), fixture.url, c.branch, c.sha, "", c.dir, nil); err == nil {
			t.Errorf("Checkout(%q, %q, %q) succeeded", c.branch, c.sha, c.dir)
		}
	}
}

func TestCheckoutTokenNeverLeaks(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		const token = "ghs_SuperSecretToken1234567890"
		dir := newWorkspace(t)
		var log bytes.Buffer
		_, err = g.Checkout(context.Background(), fmt.Sprintf("https://127.0.0.1:%d/owner/repo.git", port), "main", "", token, dir, &log)
		if err == nil {
			t.Fatalf("Checkout from a closed port succeeded")
		}
		header := headerFor(token)
		for _, s := range []string{err.Error(), log.String()} {
			if strings.Contains(s, token) || strings.Contains(s, header) {
				t.Fatalf("token leaked: %q", s)
			}
		}
		// A failed clone removes what it made; whatever is left must not hold it.
		cfg, rerr := os.ReadFile(filepath.Join(dir, ".git", "config"))
		if rerr != nil && !os.IsNotExist(rerr) {
			t.Fatalf("reading .git/config: %v", rerr)
		}
		if strings.Contains(string(cfg), token) || strings.Contains(string(cfg), header) || strings.Contains(strings.ToLower(string(cfg)), "extraheader") {
			t.Fatalf(".git/config holds the token: %q", cfg)
		}
		if !strings.Contains(err.Error(), "127.0.0.1") {
			t.Fatalf("error does not say what failed: %v", err)
		}
	})
}

func TestCheckoutTokenSentAsHeader(t *testing.T) {
	t.Parallel()
	gits(t, func(t *testing.T, g *Git) {
		// A minimal HTTP server that records the Authorization header of git's
		// first request and refuses it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		defer ln.Close()
		got := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 8192)
			n, _ := c.Read(buf)
			auth := ""
			for _, line := range strings.Split(string(buf[:n]), "\r\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Authorization") {
					auth = strings.TrimSpace(v)
				}
			}
			got <- auth
			c.Write([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		}()
		const token = "tok-abc-123"
		_, err = g.Checkout(context.Background(), "http://"+ln.Addr().String()+"/o/r.git", "main", "", token, newWorkspace(t), nil)
		if err == nil {
			t.Fatalf("Checkout succeeded against a 404 server")
		}
		select {
		case auth := <-got:
			if auth != headerFor(token) {
				t.Fatalf("Authorization %q, want %q", auth, headerFor(token))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("server saw no request")
		}
	})
}

func headerFor(token string) string {
	return "Basic " + base64Std("x-access-token:"+token)
}

func TestCheckoutIntoWorkspaceAndRun(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		ws := newWorkspace(t)
		sha, err := hostGit(t).Checkout(context.Background(), fixture.url, "other", "", "", ws, nil)
		if err != nil {
			t.Fatalf("Checkout: %v", err)
		}
		var out syncBuffer
		res, err := e.Run(context.Background(), Spec{
			Workspace: ws,
			Command:   "git rev-parse HEAD && git rev-parse --abbrev-ref HEAD && echo three > a.txt && git status --short && grep -ci extraheader .git/config; true",
		}, &out)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run: %+v, %v, %q", res, err, out.String())
		}
		want := sha + "\nother\n M a.txt\n0\n"
		if out.String() != want {
			t.Fatalf("output %q, want %q", out.String(), want)
		}
	})
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestNoInheritedDescriptors(t *testing.T) {
	t.Parallel()
	// A descriptor without close-on-exec, as a service manager or shell
	// might hand the host process.
	marker, err := os.CreateTemp("", "anvil-inherited-fd-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	marker.Close()
	fd, err := syscall.Open(marker.Name(), syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	// Cleanup, not defer: the parallel subtests run after this function.
	t.Cleanup(func() {
		syscall.Close(fd)
		os.Remove(marker.Name())
	})
	executors(t, func(t *testing.T, e Executor) {
		res, out, _ := run(t, e, "ls -l /proc/self/fd")
		if res.ExitCode != 0 || strings.Contains(out, filepath.Base(marker.Name())) {
			t.Fatalf("the command inherited the host process's descriptor: %+v %q", res, out)
		}
	})
}

// TestDieWithParent kills a process that is in the middle of Run and checks
// that the sandbox dies with it (bwrap --die-with-parent, Pdeathsig).
func TestDieWithParent(t *testing.T) {
	t.Parallel()
	bwrapExec(t)
	marker := fmt.Sprintf("1000.%d%d", os.Getpid(), time.Now().UnixNano()%1e9)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRun$", "-test.v")
	cmd.Env = append(os.Environ(), "ANVIL_SANDBOX_HELPER="+marker)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting helper: %v", err)
	}
	defer cmd.Process.Kill()
	// Wait until the command runs: bwrap's own setup is a window in which
	// its pid 1 has not armed --die-with-parent yet.
	if !pollUntil(20*time.Second, func() bool { return len(findSleeps(marker)) == 2 }) {
		t.Fatalf("the helper's sandbox never started: %q", out.String())
	}
	cmd.Process.Kill()
	_ = cmd.Wait()
	if !pollUntil(10*time.Second, func() bool { return len(findProcs(marker)) == 0 }) {
		t.Fatalf("sandbox processes %v survived their parent", findProcs(marker))
	}
}

// TestHelperRun is TestDieWithParent's child process.
func TestHelperRun(t *testing.T) {
	marker := os.Getenv("ANVIL_SANDBOX_HELPER")
	if marker == "" {
		t.Skip("helper for TestDieWithParent")
	}
	e := bwrapExec(t)
	_, _, _ = run(t, e, "sleep "+marker+" & sleep "+marker+"1")
}

// TestCancelDuringSetup cancels runs at various points of bwrap's start-up
// and checks that nothing of them survives.
func TestCancelDuringSetup(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	ws := newWorkspace(t)
	marker := fmt.Sprintf("1000.%d%d", os.Getpid(), time.Now().UnixNano()%1e9)
	for i := 0; i < 12; i++ {
		ctx, cancel := context.WithCancelCause(context.Background())
		timer := time.AfterFunc(time.Duration(i)*2*time.Millisecond, func() { cancel(ErrCanceled) })
		res, err := e.Run(ctx, Spec{Workspace: ws, Command: "trap '' TERM; sleep " + marker}, &syncBuffer{})
		timer.Stop()
		cancel(nil)
		if err != nil || !res.Canceled {
			t.Fatalf("iteration %d: %+v, %v", i, res, err)
		}
		if left := findProcs(marker); len(left) > 0 {
			t.Fatalf("iteration %d: processes %v survived Run", i, left)
		}
	}
}

func TestBwrapSetupFailureIsAnError(t *testing.T) {
	t.Parallel()
	e := bwrapExec(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a path the sandbox uid cannot reach")
	}
	hidden := filepath.Join(t.TempDir(), "hidden") // under a 0700 root-owned directory
	if err := os.WriteFile(hidden, nil, 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	var out syncBuffer
	_, err := e.Run(context.Background(), Spec{Workspace: newWorkspace(t), Command: "true", ExtraReadOnly: []string{hidden}}, &out)
	if err == nil || !strings.Contains(err.Error(), "set up the sandbox") {
		t.Fatalf("err %v, want a setup error (output %q)", err, out.String())
	}
}

// TestEnvNeverInArgv: a variable's value reaches the command but no
// process's command line on the host, read from /proc/*/cmdline while the
// command runs (bwrap lives for the whole run, so a --setenv VALUE there
// would be readable by any local user for as long).
func TestEnvNeverInArgv(t *testing.T) {
	t.Parallel()
	executors(t, func(t *testing.T, e Executor) {
		value := "argv-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		ws := newWorkspace(t)
		var out syncBuffer
		done := make(chan error, 1)
		go func() {
			_, err := e.Run(context.Background(), Spec{Workspace: ws, Limits: DefaultLimits(),
				Command: `printf '%s' "$RUN_SECRET" | sha256sum; sleep 3; echo done`,
				Env:     map[string]string{"RUN_SECRET": value}}, &out)
			done <- err
		}()
		sum := sha256.Sum256([]byte(value)) // the command's text must not hold the value either
		waitFor(t, &out, hex.EncodeToString(sum[:])+"  -\n")
		procs := 0
		dirs, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if _, err := strconv.Atoi(d.Name()); err != nil {
				continue
			}
			cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
			if err != nil {
				continue // gone meanwhile
			}
			procs++
			if bytes.Contains(cmdline, []byte(value)) {
				t.Errorf("pid %s has the value in its command line: %q", d.Name(), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
			}
		}
		if procs < 3 {
			t.Fatalf("read %d command lines: is /proc mounted?", procs)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(out.String(), "done\n") {
			t.Fatalf("output %q", out.String())
		}
	})
}
