// Package sandbox checks out a repository and runs a project's command on it
// in a sandbox, streaming the command's output, stopping it on cancel or
// timeout and cleaning up afterwards.
//
// The package knows nothing about queues or runs: it offers
//
//   - [Git], whose Checkout clones a repository into a fresh directory under
//     the checkout policy (package repourl), with git confined in bubblewrap
//     (network, but no host files), a cleaned git environment, and a provider
//     token that never reaches argv, .git/config, errors or output; its Probe
//     asks a repository whether it answers;
//   - [NewWorkspace], which creates that directory so the sandboxed user can
//     write it, and removes it again afterwards;
//   - [Executor], with two implementations chosen by [New]: "bwrap" (the
//     default, a bubblewrap sandbox) and "process" (a plain, unsandboxed process
//     group, only when explicitly requested).
//
// # Identity
//
// When the host process runs as root, every command (and, for "bwrap", the
// bwrap process itself) is started as the unprivileged host uid/gid
// [SandboxUID]/[SandboxGID] (65534, "nobody"/"nogroup") with no supplementary
// groups. Starting bwrap itself unprivileged matters: a user namespace created
// by root would map host root into the sandbox, whereas an unprivileged bwrap
// only maps 65534 to itself. Files owned by host root may then *appear* owned
// by 65534 inside the sandbox (the kernel shows unmapped ids as the overflow
// id 65534), but permission checks use the real host ids, so root-only files
// stay unreadable. When the host process is not root, commands run as the
// host process's own uid.
//
// # Stopping and orphans
//
// Every command runs in a new session. On cancel or timeout the executor
// sends SIGTERM to every process of the run (bwrap: every process of the
// sandbox's pid namespace but its pid 1; process: the command's process
// group and session), waits the grace period, then SIGKILLs what is left
// (bwrap: the namespace's pid 1, so the kernel kills the whole namespace).
// When the command ends by itself, whatever it left running is killed too
// (bwrap: the namespace dies with its pid 1). Run returns only once all of
// it is gone and the output pipe has been drained (reads stop
// 2 s after the last process is gone, should an escaped process hold it).
// Children also die with the host process: bwrap has --die-with-parent and
// both executors set a parent-death signal, from an OS thread that stays
// locked for the whole run.
//
// Descriptors the host process inherited without close-on-exec (from a
// service manager, a shell, …) are marked close-on-exec before each command
// starts, so no sandbox inherits them.
//
// # Limits
//
// [Limits] are applied with prlimit(1) from util-linux, which the sandbox
// runs as the first program of the command (prlimit --cpu … -- /bin/sh -c
// COMMAND): it sets the soft and hard limits of itself and then execs the
// shell, so they apply to the whole command tree and, because the command is
// unprivileged, cannot be raised again. A zero field leaves that limit as
// inherited from the host process.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SandboxUID and SandboxGID are the unprivileged host ids commands run as
// when the host process is root.
const (
	SandboxUID = 65534
	SandboxGID = 65534
)

// DefaultGrace is how long a stopped command gets between SIGTERM and SIGKILL.
const DefaultGrace = 10 * time.Second

// Errors used as context causes: cancel a run's context with
// context.WithCancelCause(…)(ErrCanceled) to report [Result.Canceled], or
// with ErrTimeout (or let its deadline pass) to report [Result.TimedOut].
var (
	ErrCanceled = errors.New("sandbox: run canceled")
	ErrTimeout  = errors.New("sandbox: run timed out")
)

// Limits bound the resources of the sandboxed process tree. They are
// setrlimit(2) limits (soft = hard), set by prlimit(1) inside the sandbox;
// zero means "not set" (inherited from the host process). A value above the
// host process's own hard limit is lowered to it.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU: CPU time per process, in seconds.
	CPUSeconds uint64
	// MemoryBytes is RLIMIT_DATA: the writable private memory of each
	// process (its heap, its anonymous mappings once made writable), which
	// is what a runaway allocation grows. Not RLIMIT_AS, the address space:
	// JIT runtimes reserve far more of it than they use — Node reserves
	// about 10 GiB for one WebAssembly memory, and its own fetch (undici)
	// instantiates one, so under a 2 GiB RLIMIT_AS every fetch of Node 18+
	// fails and npm's retries die of std::bad_alloc — while a reservation
	// without write access does not count toward RLIMIT_DATA
	// (docs/runs.md, "Limits").
	MemoryBytes uint64
	// Processes is RLIMIT_NPROC. The kernel counts it per user, so it bounds
	// all processes of the sandbox uid (in bwrap mode: of its user namespace),
	// including those of concurrent runs.
	Processes uint64
	// FileSizeBytes is RLIMIT_FSIZE: the largest file a process may write.
	FileSizeBytes uint64
	// TmpBytes bounds the sandbox's private /tmp (bwrap: a tmpfs, that is
	// RAM, mounted with this size; writes beyond it fail with ENOSPC). Not an
	// rlimit, and without effect in process mode, where /tmp is the host's.
	TmpBytes uint64
}

// DefaultTmpBytes is the default bound of a sandbox's /tmp: 512 MiB.
const DefaultTmpBytes = 512 << 20

// DefaultLimits returns 30 minutes of CPU per process, 2 GiB of writable memory,
// 512 processes, 1 GiB per written file and a /tmp of 512 MiB.
func DefaultLimits() Limits {
	return Limits{
		CPUSeconds:    30 * 60,
		MemoryBytes:   2 << 30,
		Processes:     512,
		FileSizeBytes: 1 << 30,
		TmpBytes:      DefaultTmpBytes,
	}
}

// Spec describes one command to run.
type Spec struct {
	// Workspace is the checked-out tree, an absolute path to an existing
	// directory. It is the command's working directory and HOME, and the only
	// writable path besides a private /tmp. In bwrap mode it is bound at the
	// same path inside the sandbox.
	Workspace string
	// Command is run by /bin/sh -c.
	Command string
	// Env holds extra variables (e.g. ANVIL_TASK), merged over the base
	// allowlist (see [BaseEnv]). Nothing of the host environment is inherited.
	Env map[string]string
	// ExtraReadOnly lists absolute host paths bound read-only at the same path
	// inside the sandbox (bwrap mode). They must exist and be reachable by the
	// sandbox uid.
	ExtraReadOnly []string
	// Limits for the command's process tree.
	Limits Limits
	// Network is the run's way out through its egress proxy (network.go,
	// docs/network.md); nil: offline.
	Network *Network
	// Cache is the run's cache directory (cache.go, docs/caches.md); nil:
	// none.
	Cache *Cache
	// Image is the root the command runs in (image.go, docs/images.md);
	// nil: the host's tree, as before. The bwrap executor only.
	Image *Image
}

// Result of a run.
type Result struct {
	// ExitCode is the shell's exit status; 128+n when it was killed by
	// signal n (so a SIGKILLed run reports 137); -1 when the command never
	// started because the context was already done.
	ExitCode int
	// Canceled reports that the run was stopped because its context was
	// canceled.
	Canceled bool
	// TimedOut reports that the run was stopped because its context's
	// deadline passed (or its cause was [ErrTimeout]).
	TimedOut bool
}

// Executor runs commands. It is the seam for other executors (a Kubernetes Job
// executor later).
type Executor interface {
	// Name is "bwrap" or "process".
	Name() string
	// Sandboxed is false for "process": callers print a warning line into the
	// run log and page.
	Sandboxed() bool
	// Run starts the command and streams its combined stdout and stderr (one
	// pipe, so in the order produced) to out until it exits. Writes to out
	// come from one goroutine at a time and all have happened when Run
	// returns.
	//
	// When ctx is done, the command is stopped: SIGTERM to every process of
	// the run, then SIGKILL to what is left after the grace period.
	// Result.Canceled or Result.TimedOut tells why (see [ErrCanceled],
	// [ErrTimeout]).
	//
	// Run returns only after every process of the run is gone. Its error is
	// for failures to start and infrastructure faults (including a failing
	// out); a command that fails is reported in Result.ExitCode.
	Run(ctx context.Context, spec Spec, out io.Writer) (Result, error)
}

// New returns the executor for mode: "bwrap" (an error when bwrap cannot run
// here, see [BwrapAvailable]), "process", or "" for bwrap when it works (and
// an error, not a silent fallback, when it does not). grace is the time
// between SIGTERM and SIGKILL on stop; <= 0 means [DefaultGrace].
func New(mode string, grace time.Duration) (Executor, error) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	switch mode {
	case "bwrap", "":
		// An error never points at the unsandboxed mode: a worker that
		// cannot sandbox stops, and the operator fixes the host.
		b, err := newBwrap(grace)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "process":
		p, err := newProcess(grace)
		if err != nil {
			return nil, err
		}
		return p, nil
	default:
		return nil, fmt.Errorf("sandbox: unknown executor mode %q (want \"bwrap\", \"process\" or \"\")", mode)
	}
}

// BaseEnv returns the allowlisted environment every command starts from:
// PATH=/usr/local/bin:/usr/bin:/bin, HOME=workspace, LANG=C.UTF-8, TERM=dumb,
// CI=true.
func BaseEnv(workspace string) map[string]string {
	return map[string]string{
		"PATH": "/usr/local/bin:/usr/bin:/bin",
		"HOME": workspace,
		"LANG": "C.UTF-8",
		"TERM": "dumb",
		"CI":   "true",
	}
}

// environ returns the command's environment, sorted by name.
func (s *Spec) environ() []string {
	m := BaseEnv(s.Workspace)
	for k, v := range s.Env {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// validate checks a Spec before anything is started.
func (s *Spec) validate() error {
	if s.Command == "" {
		return errors.New("sandbox: empty command")
	}
	if !filepath.IsAbs(s.Workspace) {
		return fmt.Errorf("sandbox: workspace %q is not an absolute path", s.Workspace)
	}
	fi, err := os.Stat(s.Workspace)
	if err != nil {
		return fmt.Errorf("sandbox: workspace: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("sandbox: workspace %q is not a directory", s.Workspace)
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("sandbox: invalid environment variable %q", k)
		}
	}
	for _, p := range s.ExtraReadOnly {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("sandbox: extra read-only path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("sandbox: extra read-only path: %w", err)
		}
	}
	return s.Cache.validate()
}

// prlimitArgs returns the prlimit(1) options for l, clamped to the host
// process's own hard limits (which an unprivileged child cannot exceed).
func prlimitArgs(l Limits) []string {
	var args []string
	add := func(opt string, res int, v uint64) {
		if v == 0 {
			return
		}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(res, &cur); err == nil && cur.Max != ^uint64(0) && v > cur.Max {
			v = cur.Max
		}
		s := strconv.FormatUint(v, 10)
		args = append(args, opt+"="+s+":"+s)
	}
	add("--cpu", syscall.RLIMIT_CPU, l.CPUSeconds)
	add("--data", syscall.RLIMIT_DATA, l.MemoryBytes)
	add("--nproc", rlimitNPROC, l.Processes)
	add("--fsize", syscall.RLIMIT_FSIZE, l.FileSizeBytes)
	return args
}

// rlimitNPROC is RLIMIT_NPROC (not exported by package syscall on Linux).
const rlimitNPROC = 6

// commandArgv returns prlimit … -- /bin/sh -c command.
func commandArgv(prlimit string, spec *Spec) []string {
	argv := append([]string{prlimit}, prlimitArgs(spec.Limits)...)
	return append(argv, "--", "/bin/sh", "-c", spec.Command)
}

// credential returns the credential commands start with: the sandbox ids
// when the host process is root, nil (inherit) otherwise.
func credential() *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	return &syscall.Credential{Uid: SandboxUID, Gid: SandboxGID, Groups: []uint32{}}
}

// lookPrlimit finds prlimit(1) on the command PATH.
func lookPrlimit() (string, error) {
	for _, dir := range filepath.SplitList(BaseEnv("")["PATH"]) {
		p := filepath.Join(dir, "prlimit")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("sandbox: prlimit (util-linux) not found in /usr/local/bin:/usr/bin:/bin; it is needed to apply limits")
}

// stopReason tells why ctx is done.
func stopReason(ctx context.Context) (canceled, timedOut bool) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, ErrTimeout):
		return false, true
	case errors.Is(cause, ErrCanceled):
		return true, false
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return false, true
	default:
		return true, false
	}
}

// exitCode converts cmd.Wait's error into an exit code; ok is false when err
// is not about the process's exit status.
func exitCode(err error) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1, false
	}
	if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS && ws.Signaled() {
		return 128 + int(ws.Signal()), true
	}
	return ee.ExitCode(), true
}
