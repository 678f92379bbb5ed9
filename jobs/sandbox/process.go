package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// processExecutor runs commands as a plain process group in the workspace,
// with the same environment allowlist, limits and (when root) unprivileged
// uid as the bwrap executor, but without any isolation: the command sees the
// host's files and network. It is only used when explicitly requested.
//
// The command starts in a new session; stopping signals its process group
// and every process of its session, and after the command exits any process
// left in its session is killed. A process that starts its own session
// (setsid, double-forking daemons) escapes this: it is the price of having
// no sandbox.
type processExecutor struct {
	prlimit string
	grace   time.Duration
}

func newProcess(grace time.Duration) (*processExecutor, error) {
	prlimit, err := lookPrlimit()
	if err != nil {
		return nil, err
	}
	return &processExecutor{prlimit: prlimit, grace: grace}, nil
}

// Name returns "process".
func (e *processExecutor) Name() string { return "process" }

// Sandboxed returns false.
func (e *processExecutor) Sandboxed() bool { return false }

// Run implements [Executor].
func (e *processExecutor) Run(ctx context.Context, spec Spec, out io.Writer) (Result, error) {
	if err := spec.validate(); err != nil {
		return Result{}, err
	}
	if err := spec.Network.validate(false); err != nil {
		return Result{}, err
	}
	if spec.Image != nil {
		// A process has no root of its own to put an image under.
		return Result{}, ErrImageNeedsBwrap
	}
	if spec.Cache != nil {
		spec.Env = withCache(spec.Env, spec.Cache, spec.Cache.Dir)
	}
	if spec.Network != nil {
		spec.Env = withNetwork(spec.Env, spec.Network, proxyURL(spec.Network.Addr))
	}
	argv := commandArgv(e.prlimit, &spec)
	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = spec.environ()
	cmd.Dir = spec.Workspace
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: credential(), Setsid: true, Pdeathsig: syscall.SIGKILL}
	if ctx.Err() != nil {
		outR.Close()
		outW.Close()
		c, t := stopReason(ctx)
		return Result{ExitCode: -1, Canceled: c, TimedOut: t}, nil
	}
	waited, err := startLocked(cmd)
	outW.Close()
	if err != nil {
		outR.Close()
		return Result{}, fmt.Errorf("sandbox: starting command: %w", err)
	}
	t := &sessionTree{sid: cmd.Process.Pid}
	p := startPump(outR, out)
	s, err := supervise(ctx, waited, e.grace, t, p)
	return s.res, err
}

// sessionTree is the process tree of one process run: the session (and
// process group) led by the command.
type sessionTree struct{ sid int }

func (t *sessionTree) signal(sig syscall.Signal) {
	_ = syscall.Kill(-t.sid, sig)
	for _, p := range sessionMembers(t.sid) {
		p.signal(sig)
	}
}

func (t *sessionTree) terminate() { t.signal(syscall.SIGTERM) }

func (t *sessionTree) kill() { t.signal(syscall.SIGKILL) }

func (t *sessionTree) reap() error {
	gone := pollUntil(reapTimeout, func() bool {
		left := sessionMembers(t.sid)
		if len(left) == 0 {
			return true
		}
		t.kill()
		return false
	})
	if !gone {
		return fmt.Errorf("sandbox: processes of session %d still running after SIGKILL", t.sid)
	}
	return nil
}
