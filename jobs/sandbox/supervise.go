package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// drainTimeout bounds how long Run keeps reading output after every process
// of the run is gone (only a process that escaped the run could hold the
// pipe open that long).
const drainTimeout = 2 * time.Second

// reapTimeout bounds how long Run waits for the processes of a run to vanish
// after SIGKILL before it reports an infrastructure fault.
const reapTimeout = 5 * time.Second

// tree is the set of processes of one run, as the executor knows it.
type tree interface {
	// terminate asks every process of the run to stop (SIGTERM).
	terminate()
	// kill forces every process of the run to stop (SIGKILL).
	kill()
	// reap is called after the main process exited and returns once every
	// process of the run is gone, killing leftovers.
	reap() error
}

// startLocked starts cmd from a goroutine locked to its OS thread and keeps
// that thread until cmd has been waited for: the child's parent-death signal
// (SysProcAttr.Pdeathsig, bwrap's --die-with-parent) fires when the creating
// *thread* exits, and a locked thread cannot be retired by the runtime while
// the run is in progress.
//
// It also makes sure no descriptor this process inherited reaches cmd (see
// closeOnExecInherited).
func startLocked(cmd *exec.Cmd) (<-chan error, error) {
	closeOnExecInherited()
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}

// pump copies the run's output pipe to out. After a write to out fails it
// keeps draining the pipe (so the command never blocks on a full pipe) and
// remembers the error.
type pump struct {
	r    *os.File
	done chan struct{}

	mu   sync.Mutex
	werr error
	tail []byte // the last tailSize bytes of output, for error messages
}

const tailSize = 2048

func startPump(r *os.File, out io.Writer) *pump {
	p := &pump{r: r, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 32*1024)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				p.record(buf[:n])
				if p.writeErr() == nil {
					if _, werr := out.Write(buf[:n]); werr != nil {
						p.mu.Lock()
						p.werr = werr
						p.mu.Unlock()
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *pump) record(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tail = append(p.tail, b...)
	if len(p.tail) > tailSize {
		p.tail = append(p.tail[:0], p.tail[len(p.tail)-tailSize:]...)
	}
}

func (p *pump) writeErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.werr
}

func (p *pump) tailString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return string(p.tail)
}

// finish waits, at most drainTimeout, for the end of the output and closes
// the pipe.
func (p *pump) finish() {
	_ = p.r.SetReadDeadline(time.Now().Add(drainTimeout))
	<-p.done
	_ = p.r.Close()
}

// supervision is the outcome of supervise.
type supervision struct {
	res     Result
	waitErr error // cmd.Wait's error
	stopped bool  // the run was stopped because ctx was done
}

// supervise waits for the started main process, stopping the run when ctx is
// done (SIGTERM, grace, SIGKILL), then makes sure every process of the run
// is gone and the output is drained.
func supervise(ctx context.Context, waited <-chan error, grace time.Duration, t tree, p *pump) (supervision, error) {
	var s supervision
	select {
	case s.waitErr = <-waited:
	case <-ctx.Done():
		s.stopped = true
		s.res.Canceled, s.res.TimedOut = stopReason(ctx)
		t.terminate()
		timer := time.NewTimer(grace)
		select {
		case s.waitErr = <-waited:
			timer.Stop()
		case <-timer.C:
			t.kill()
			s.waitErr = <-waited
		}
	}
	reapErr := t.reap()
	p.finish()

	code, ok := exitCode(s.waitErr)
	s.res.ExitCode = code
	var errs []error
	if !ok {
		errs = append(errs, fmt.Errorf("sandbox: waiting for the command: %w", s.waitErr))
	}
	if reapErr != nil {
		errs = append(errs, reapErr)
	}
	if werr := p.writeErr(); werr != nil {
		errs = append(errs, fmt.Errorf("sandbox: writing output: %w", werr))
	}
	return s, errors.Join(errs...)
}
