package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A pod (docs/images.md, "Services") is one network namespace shared by a
// workflow's services and steps, so that a step reaches postgres:5432 by
// name, as a Woodpecker or GitLab job reaches its services. A holder
// process owns the pod's user and network namespaces (loopback up): a
// bubblewrap sandbox of its own, started by the worker with a parent-death
// signal and --die-with-parent, whose only program waits on a pipe from the
// worker (and, when the run has a network list, is the pod's one egress
// bridge at 127.0.0.1:3128). Each service and each step is its own
// bubblewrap sandbox entered into those namespaces with util-linux's
// nsenter (Go cannot setns into a user namespace from a multithreaded
// process), with its own pid, mount and IPC namespaces; /etc/hosts names
// every service on the pod's loopback. When the worker dies, the holder
// dies with it and the sandboxes with theirs: nothing of a pod survives its
// worker.

// PodNameRE is a service's name: its host name in the pod.
var PodNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Pod is a running pod.
type Pod struct {
	// Pid is the holder's pid inside its namespaces' owner: what nsenter
	// enters (-t).
	Pid int
	// Hosts is the pod's /etc/hosts, bound into each sandbox.
	Hosts string
	// Network is set when the pod has an egress bridge: its sandboxes get
	// the proxy's variables, no bridge of their own.
	Network bool

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	waited <-chan error
	dir    string
	names  []string

	mu       sync.Mutex
	services []*Service
	stopOnce sync.Once
}

// StartPod starts a pod's holder. dir is a directory of the run's (the
// hosts file goes there, readable by the sandbox's uid); names are the
// services' host names; bridge is anvil's binary as InstallBridge put it:
// the holder is util-linux's unshare (a user namespace mapping the
// sandbox's uid to itself, and a network namespace) running it, which brings
// loopback up and, when n is set, is the pod's one egress bridge.
func (b *bwrapExecutor) StartPod(dir string, names []string, bridge string, n *Network) (*Pod, error) {
	for _, nm := range names {
		if !PodNameRE.MatchString(nm) {
			return nil, fmt.Errorf("sandbox: %q is not a service name (a host name: lower-case letters, digits and dashes)", nm)
		}
	}
	hosts := filepath.Join(dir, "hosts")
	line := "127.0.0.1\tlocalhost"
	for _, nm := range names {
		line += " " + nm
	}
	if err := os.WriteFile(hosts, []byte(line+"\n::1\tlocalhost ip6-localhost ip6-loopback\n"), 0o644); err != nil {
		return nil, fmt.Errorf("sandbox: the pod's hosts: %w", err)
	}
	if n != nil {
		n.Bridge = bridge
		if err := n.validate(true); err != nil {
			return nil, err
		}
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, errors.New("sandbox: unshare (util-linux) is needed to run services")
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		return nil, errors.New("sandbox: cat is needed to run services")
	}
	// The user namespace is made by unshare running as the sandbox's uid,
	// so that uid owns it and may enter it (nsenter) and nest its own
	// sandboxes in it; Go cloning it from the worker would make root its
	// owner. The uid maps to itself, so that services and steps are the
	// same unprivileged user as everywhere else (a Postgres refuses to run
	// as root); --keep-caps lets the holder bring loopback up.
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = SandboxUID, SandboxGID
	}
	argv := []string{unshare, "--user", "--map-user=" + strconv.Itoa(uid), "--map-group=" + strconv.Itoa(gid), "--keep-caps", "--net",
		"--", bridge, BridgeCommand, "--loopback"}
	if n != nil {
		argv = append(argv, "--socket", n.Socket, "--listen", BridgeAddr)
	}
	argv = append(argv, "--", cat)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(), Setsid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// A file, not a pipe: Wait must not wait for a copy that a process of
	// the pod could hold open.
	errFile, err := os.CreateTemp(dir, "pod-err-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer os.Remove(errFile.Name())
	defer errFile.Close()
	cmd.Stderr = errFile
	waited, err := startLocked(cmd)
	if err != nil {
		return nil, fmt.Errorf("sandbox: starting the pod: %w", err)
	}
	p := &Pod{Pid: cmd.Process.Pid, Hosts: hosts, Network: n != nil, cmd: cmd, stdin: stdin, waited: waited, dir: dir, names: names}
	if err := p.waitEnterable(); err != nil {
		p.Stop()
		msg, _ := os.ReadFile(errFile.Name())
		return nil, fmt.Errorf("%w %s", err, strings.TrimSpace(string(msg)))
	}
	return p, nil
}

// Service is a service running in a pod.
type Service struct {
	Name   string
	log    *tailBuffer
	file   *os.File
	cancel context.CancelFunc
	done   chan struct{}
	res    Result
	err    error
}

// Running reports whether the service's process still runs.
func (s *Service) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Tail is the end of the service's log, for a message in the run's own
// log: its last 4 KiB.
func (s *Service) Tail() string { return s.log.last(4 << 10) }

// Log is the end of the service's log that anvil keeps of it (its last
// 64 KiB, docs/images.md "Services"), and Written how many bytes it wrote
// in all.
func (s *Service) Log() string { return s.log.String() }

// Written is how many bytes the service wrote in all.
func (s *Service) Written() int64 {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.log.total
}

// Services are the pod's services, in the order they started.
func (p *Pod) Services() []*Service {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Service(nil), p.services...)
}

// Exited returns the service's result once it ended.
func (s *Service) Exited() (Result, bool) {
	select {
	case <-s.done:
		return s.res, true
	default:
		return Result{}, false
	}
}

// StartService runs spec (whose Image is set) as the service name in the
// pod, its output in logPath (and the end of it in memory, for a failure's
// message). It runs until the pod stops.
func (p *Pod) StartService(ex Executor, name string, spec Spec, logPath string) (*Service, error) {
	if spec.Image == nil {
		return nil, errors.New("sandbox: a service needs an image")
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the service's log: %w", err)
	}
	p.Enter(&spec)
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Service{Name: name, log: &tailBuffer{max: 64 << 10}, file: f, cancel: func() { cancel(ErrCanceled) }, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.res, s.err = ex.Run(ctx, spec, io.MultiWriter(f, s.log))
		f.Close()
	}()
	p.mu.Lock()
	p.services = append(p.services, s)
	p.mu.Unlock()
	return s, nil
}

// Enter puts spec into the pod: its namespaces, its hosts file, and the
// proxy's variables when the pod has a bridge (the sandbox starts none).
func (p *Pod) Enter(spec *Spec) {
	spec.Image.NetNS, spec.Image.Hosts = p.Pid, p.Hosts
	if p.Network {
		spec.Env = withNetwork(spec.Env, &Network{}, proxyURL(BridgeAddr))
		// The services are the pod's own loopback: never through the proxy.
		no := NoProxy + "," + strings.Join(p.names, ",")
		spec.Env["NO_PROXY"], spec.Env["no_proxy"] = no, no
	}
	spec.Network = nil
}

// WaitPort waits until 127.0.0.1:port in the pod accepts a connection, the
// service ends, or ctx is done.
func (p *Pod) WaitPort(ctx context.Context, s *Service, port int) error {
	for wait := 5 * time.Millisecond; ; {
		if err := p.probe(port); err == nil {
			return nil
		}
		if !s.Running() {
			return fmt.Errorf("the service %s ended before port %d accepted", s.Name, port)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the service %s: port %d did not accept: %w", s.Name, port, context.Cause(ctx))
		case <-time.After(wait):
		}
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

// probe connects to 127.0.0.1:port in the pod from a process entered
// into it (bash's /dev/tcp): the worker's own threads stay in its
// namespaces.
func (p *Pod) probe(port int) error {
	ns, err := nsenterPath()
	if err != nil {
		return err
	}
	cmd := exec.Command(ns, "--user", "--net", "--preserve-credentials", "-t", strconv.Itoa(p.Pid), "--",
		"/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+strconv.Itoa(port))
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(), Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (p *Pod) waitEnterable() error {
	ns, err := nsenterPath()
	if err != nil {
		return err
	}
	var last []byte
	for wait, deadline := time.Millisecond, time.Now().Add(10*time.Second); time.Now().Before(deadline); {
		cmd := exec.Command(ns, "--user", "--net", "--preserve-credentials", "-t", strconv.Itoa(p.Pid), "--", "/bin/true")
		cmd.Env = []string{}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(), Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		last = out
		time.Sleep(wait)
		if wait < 50*time.Millisecond {
			wait *= 2
		}
	}
	return fmt.Errorf("sandbox: the pod's namespaces cannot be entered: %s", strings.TrimSpace(string(last)))
}

// Healthcheck runs check (a command in the service's image, entered into
// the pod) until it exits 0: at most retries times, interval apart, each
// bounded by timeout. A service that ended meanwhile fails at once.
func (p *Pod) Healthcheck(ctx context.Context, ex Executor, s *Service, check Spec, interval, timeout time.Duration, retries int) error {
	p.Enter(&check)
	var last Result
	for i := 0; i < retries; i++ {
		if !s.Running() {
			return fmt.Errorf("the service %s ended before its healthcheck passed", s.Name)
		}
		cctx, cancel := context.WithTimeoutCause(ctx, timeout, ErrTimeout)
		res, err := ex.Run(cctx, check, io.Discard)
		cancel()
		if err != nil {
			return err
		}
		if res.ExitCode == 0 {
			return nil
		}
		last = res
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
	return fmt.Errorf("the service %s: its healthcheck failed %d times (last exit %d)", s.Name, retries, last.ExitCode)
}

// Stop stops the pod's services (SIGTERM, then SIGKILL after the grace)
// and then its holder, and returns once every process of it is gone.
func (p *Pod) Stop() {
	p.stopOnce.Do(p.stop)
}

func (p *Pod) stop() {
	p.mu.Lock()
	ss := p.services
	p.mu.Unlock()
	for _, s := range ss {
		s.cancel()
	}
	for _, s := range ss {
		<-s.done
	}
	if p.stdin != nil {
		p.stdin.Close() // the holder's cat ends
	}
	// The holder's exit status says nothing more: its end is what counts.
	var ended error
	select {
	case ended = <-p.waited:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		ended = <-p.waited
	}
	_ = ended
}

// tailBuffer keeps the last max bytes written to it, and counts them all.
type tailBuffer struct {
	mu    sync.Mutex
	max   int
	b     []byte
	total int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte{}, t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.last(t.max) }

// last is the last n bytes, from a line's start when that cuts one (a
// secret cut in half would escape the masking of what shows it).
func (t *tailBuffer) last(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if int64(len(b)) < t.total || len(b) > n {
		if len(b) > n {
			b = b[len(b)-n:]
		}
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return strings.ToValidUTF8(string(b), "?")
}

// PodStarter is the executor that can start pods (bwrap).
type PodStarter interface {
	StartPod(dir string, names []string, bridge string, n *Network) (*Pod, error)
}

// ServiceCommand is the shell command of a service without commands: its
// image's Entrypoint and Cmd, each word quoted.
func ServiceCommand(entrypoint, cmd []string) string {
	words := append(append([]string{}, entrypoint...), cmd...)
	for i, w := range words {
		words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return "exec " + strings.Join(words, " ")
}
