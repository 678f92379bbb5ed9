package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// etcFiles are the only host /etc entries a sandbox sees (read-only, when
// they exist). /etc/shadow and friends are deliberately absent.
var etcFiles = []string{
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
	"/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/protocols", "/etc/services",
	"/etc/localtime", "/etc/timezone",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki",
	"/etc/alternatives", "/etc/gitconfig", "/etc/os-release",
}

// bwrapExecutor runs commands in a bubblewrap sandbox:
//
//   - all namespaces unshared (--unshare-all, plus --unshare-user
//     --disable-userns): no network but loopback, a private pid namespace;
//   - --die-with-parent, --new-session (no access to a controlling terminal);
//   - a read-only root: /usr bound read-only, /bin, /sbin, /lib, /lib64…
//     bound read-only or recreated as the same symlinks, the /etc entries of
//     etcFiles, --proc /proc, --dev /dev, a private --tmpfs /tmp, and the
//     root tmpfs remounted read-only (--remount-ro /);
//   - the workspace bound read-write at its real (symlink-resolved) path,
//     which is also the working directory and HOME;
//   - Spec.ExtraReadOnly bound read-only at the same paths;
//   - with a Spec.Network, the proxy's Unix socket and the bridge bound at
//     /run/anvil, and the bridge started first (network.go);
//   - with a Spec.Cache, the project's cache bound read-write at /cache
//     (cache.go);
//   - only the allowlisted variables, as bwrap's own environment (never
//     --setenv, which would put their values into argv);
//   - bwrap itself started as SandboxUID/SandboxGID when the host process is
//     root, so the user namespace maps nothing but that uid.
//
// Stopping sends SIGTERM to every process of the sandbox's pid namespace
// (found through /proc/PID/ns/pid) except bwrap's own pid 1, and after the
// grace SIGKILL to that pid 1, which makes the kernel kill the whole
// namespace.
type bwrapExecutor struct {
	bwrap   string
	prlimit string
	grace   time.Duration
}

func newBwrap(grace time.Duration) (*bwrapExecutor, error) {
	path, err := lookBwrap()
	if err != nil {
		return nil, err
	}
	if err := probeBwrap(path); err != nil {
		return nil, err
	}
	prlimit, err := lookPrlimit()
	if err != nil {
		return nil, err
	}
	return &bwrapExecutor{bwrap: path, prlimit: prlimit, grace: grace}, nil
}

// Name returns "bwrap".
func (b *bwrapExecutor) Name() string { return "bwrap" }

// Sandboxed returns true.
func (b *bwrapExecutor) Sandboxed() bool { return true }

// BwrapAvailable reports whether the bwrap executor can run here, by actually
// running bwrap with the sandbox's options (as the sandbox uid when root) on
// /bin/true. The error says why not.
func BwrapAvailable() error {
	path, err := lookBwrap()
	if err != nil {
		return err
	}
	return probeBwrap(path)
}

func lookBwrap() (string, error) {
	for _, p := range []string{"/usr/bin/bwrap", "/usr/local/bin/bwrap"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", errors.New("sandbox: bwrap (bubblewrap) is not installed")
	}
	return p, nil
}

// probeWaitDelay bounds how long the probe waits, once bwrap itself has
// exited or been killed, for its output to close: a child bwrap left behind
// (its sandbox's init, when a seccomp filter refused bwrap midway) holds the
// pipe open, and without the bound the probe — and a worker starting under
// systemd, stuck in "activating" — would wait for it for ever.
const probeWaitDelay = 2 * time.Second

func probeBwrap(path string) error {
	return probeBwrapArgs(path, append(baseBwrapArgs(1<<20), "--remount-ro", "/", "--clearenv", "--", "/bin/true"))
}

func probeBwrapArgs(path string, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(), Setsid: true, Pdeathsig: syscall.SIGKILL}
	// bwrap leads its own session: the whole session goes on a timeout.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = probeWaitDelay
	closeOnExecInherited()
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = err.Error()
		}
		hint := ""
		if os.Geteuid() == 0 {
			hint = fmt.Sprintf(" (bwrap runs as uid %d and needs unprivileged user namespaces)", SandboxUID)
		}
		// Under systemd the usual cause is the unit's confinement; the
		// shipped units allow what bubblewrap needs (docs/install.md).
		return fmt.Errorf("sandbox: bwrap cannot run here%s: %s; bubblewrap needs unprivileged user namespaces, and under systemd a unit that allows them, mount(2), pivot_root(2) and capset(2) (docs/install.md, \"The units and their confinement\")", hint, msg)
	}
	return nil
}

// baseBwrapArgs are the options shared by every sandbox; tmpBytes > 0
// bounds the private /tmp (a tmpfs, so RAM) to that many bytes.
func baseBwrapArgs(tmpBytes int64) []string {
	a := []string{
		"--unshare-all", "--unshare-user", "--disable-userns",
		"--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr",
	}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, f := range etcFiles {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	if tmpBytes > 0 {
		a = append(a, "--size", strconv.FormatInt(tmpBytes, 10))
	}
	return append(a, "--tmpfs", "/tmp")
}

// Run implements [Executor].
func (b *bwrapExecutor) Run(ctx context.Context, spec Spec, out io.Writer) (Result, error) {
	if err := spec.validate(); err != nil {
		return Result{}, err
	}
	ws, err := filepath.EvalSymlinks(spec.Workspace)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	spec.Workspace = ws
	if err := spec.Network.validate(true); err != nil {
		return Result{}, err
	}
	spec.Env = withOffline(withNetwork(withCache(spec.Env, spec.Cache, CacheMount), spec.Network, proxyURL(BridgeAddr)), spec.Network)
	var args []string
	var env []string
	bin := b.bwrap
	if spec.Image != nil {
		if err := spec.Image.validate(); err != nil {
			return Result{}, err
		}
		env = spec.imageEnv()
		args, err = b.imageCommand(&spec)
		if err != nil {
			return Result{}, err
		}
		bin = args[0]
		args = args[1:]
	} else {
		env = spec.environ()
		args = baseBwrapArgs(int64(spec.Limits.TmpBytes))
		args = append(args, "--bind", ws, ws)
		for _, p := range spec.ExtraReadOnly {
			args = append(args, "--ro-bind", p, p)
		}
		args = append(args, spec.Network.bwrapArgs()...)
		args = append(args, spec.Cache.bwrapArgs()...)
		// Host names are looked up in /etc/hosts only: no nameserver is
		// reachable, and a lookup must fail at once and for good (offline.go).
		args = append(args, "--ro-bind-data", "4", "/etc/nsswitch.conf")
		// The environment is bwrap's own (cmd.Env below), which bwrap hands to
		// the command unchanged: never argv, where --setenv would put every run
		// secret into /proc/PID/cmdline for the whole run, readable by any local
		// user (docs/runs.md, "Secrets"). The checkout passes its token the same
		// way.
		args = append(args, "--remount-ro", "/", "--chdir", ws)
		args = append(args, "--json-status-fd", "3", "--")
		args = append(args, spec.Network.bridgeArgv(commandArgv(b.prlimit, &spec))...)
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	nssR, nssW, err := os.Pipe()
	if err == nil {
		// A few hundred bytes: the pipe holds them until bwrap reads them.
		_, err = nssW.Write(sandboxNSSwitch())
		nssW.Close()
		defer nssR.Close()
	}
	if err != nil {
		closeAll(outR, outW, stR, stW)
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{stW, nssR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(), Setsid: true, Pdeathsig: syscall.SIGKILL}

	if ctx.Err() != nil {
		outR.Close()
		outW.Close()
		stR.Close()
		stW.Close()
		c, t := stopReason(ctx)
		return Result{ExitCode: -1, Canceled: c, TimedOut: t}, nil
	}
	waited, err := startLocked(cmd)
	outW.Close()
	stW.Close()
	if err != nil {
		outR.Close()
		stR.Close()
		return Result{}, fmt.Errorf("sandbox: starting bwrap: %w", err)
	}
	t := &bwrapTree{pid: cmd.Process.Pid, statusDone: make(chan struct{})}
	go t.readStatus(stR)
	p := startPump(outR, out)

	s, err := supervise(ctx, waited, b.grace, t, p)
	if err == nil && !s.stopped && !t.ranCommand() {
		return s.res, fmt.Errorf("sandbox: bwrap failed to set up the sandbox (exit %d): %s",
			s.res.ExitCode, strings.TrimSpace(p.tailString()))
	}
	return s.res, err
}

// imageCommand is the command line of a sandbox whose root is an image:
// prlimit(1) first, on the host (the image has no prlimit of its own, or
// another one), which sets the limits and execs bwrap, so that they bind
// the whole tree; in a pod, nsenter before it enters the holder's user and
// network namespaces (pod.go).
func (b *bwrapExecutor) imageCommand(spec *Spec) ([]string, error) {
	var argv []string
	if spec.Image.NetNS > 0 {
		ns, err := nsenterPath()
		if err != nil {
			return nil, err
		}
		argv = append(argv, ns, "--user", "--net", "--preserve-credentials", "-t", strconv.Itoa(spec.Image.NetNS), "--")
	}
	argv = append(argv, b.prlimit)
	argv = append(argv, prlimitArgs(spec.Limits)...)
	argv = append(argv, "--", b.bwrap)
	argv = append(argv, spec.imageArgs(int64(spec.Limits.TmpBytes))...)
	argv = append(argv, spec.Cache.bwrapArgs()...)
	inner := []string{"/bin/sh", "-c", spec.Command}
	if spec.Network != nil {
		head, binds, err := bridgeLoader(spec.Network.Bridge)
		if err != nil {
			return nil, err
		}
		argv = append(argv, spec.Network.bwrapArgs()...)
		argv = append(argv, binds...)
		inner = append(append(head, BridgeCommand, "--socket", sandboxSocket, "--listen", BridgeAddr, "--"), inner...)
	}
	argv = append(argv, "--remount-ro", "/", "--chdir", ImageWorkspace, "--json-status-fd", "3", "--")
	return append(argv, inner...), nil
}

// bwrapTree is the process tree of one bwrap run: bwrap (pid, in its own
// session and process group) and, once bwrap reports them on its status fd,
// the sandbox's pid 1 (child), its pid namespace and the command's exit.
type bwrapTree struct {
	pid        int
	statusDone chan struct{}

	mu       sync.Mutex
	child    procRef
	pidNS    string
	exitSeen bool // bwrap reported the command's exit code
}

// readStatus decodes bwrap's --json-status-fd documents.
func (t *bwrapTree) readStatus(r io.ReadCloser) {
	defer close(t.statusDone)
	defer r.Close()
	dec := json.NewDecoder(r)
	dec.UseNumber()
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			_, _ = io.Copy(io.Discard, r)
			return
		}
		if _, ok := doc["exit-code"]; ok {
			t.mu.Lock()
			t.exitSeen = true
			t.mu.Unlock()
		}
		n, ok := doc["child-pid"].(json.Number)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(n.String())
		if err != nil {
			continue
		}
		ref := procRef{pid: pid}
		if st, err := readStat(pid); err == nil {
			ref.start = st.start
		}
		var ns string
		if v, ok := doc["pid-namespace"].(json.Number); ok {
			ns = "pid:[" + v.String() + "]"
		} else if link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid"); err == nil {
			ns = link
		}
		t.mu.Lock()
		t.child, t.pidNS = ref, ns
		t.mu.Unlock()
	}
}

func (t *bwrapTree) state() (procRef, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.child, t.pidNS
}

// ranCommand reports whether bwrap reported the exit of the command, which
// it does only when the sandbox was set up and the command started: a setup
// failure (a bind source the sandbox uid cannot reach, …) ends bwrap without
// that report.
func (t *bwrapTree) ranCommand() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exitSeen
}

func (t *bwrapTree) terminate() {
	child, ns := t.state()
	if child.pid == 0 || ns == "" {
		// Still setting up: nothing to be graceful about.
		t.kill()
		return
	}
	for _, p := range pidNSMembers(ns) {
		if p.pid != child.pid {
			p.signal(syscall.SIGTERM)
		}
	}
}

func (t *bwrapTree) kill() {
	// Stop bwrap first so that it cannot clone a sandbox we do not see, then
	// kill its children: the sandbox's pid 1 (whose death makes the kernel
	// kill the rest of the namespace), even when bwrap has not reported it
	// yet or it has not yet armed its own --die-with-parent; then bwrap.
	_ = syscall.Kill(t.pid, syscall.SIGSTOP)
	child, _ := t.state()
	child.signal(syscall.SIGKILL)
	for _, c := range children(t.pid) {
		c.signal(syscall.SIGKILL)
	}
	_ = syscall.Kill(-t.pid, syscall.SIGKILL)
}

func (t *bwrapTree) reap() error {
	// bwrap has exited, so its status pipe is closed unless the sandbox's pid 1
	// still holds it; the pid 1 dies with bwrap (--die-with-parent).
	select {
	case <-t.statusDone:
	case <-time.After(reapTimeout):
	}
	child, _ := t.state()
	if child.pid == 0 {
		return nil
	}
	// The namespace's pid 1 stops running only after the kernel has killed
	// and reaped every other process of the namespace.
	if pollUntil(drainTimeout, func() bool { return !child.alive() }) {
		return nil
	}
	child.signal(syscall.SIGKILL)
	if pollUntil(reapTimeout, func() bool { return !child.alive() }) {
		return nil
	}
	return fmt.Errorf("sandbox: sandbox pid 1 (host pid %d) still running after SIGKILL", child.pid)
}

// closeAll closes the pipe ends a failed start leaves behind.
func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
