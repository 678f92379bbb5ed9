package jobs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"anvil/domain/run"
)

// LostRunnerSweeper is each worker process's own watchdog over lost
// runners: on a ticker it declares runner_lost the active runs whose
// heartbeat is older than ANVIL_HEARTBEAT_TIMEOUT and promotes the next run
// (domain.Queue.RecoverLostRunners). It is not a River periodic job on
// purpose: those run on River's elected leader only, and when the worker
// that dies is the leader — always, with one worker — a new leader needs
// about 15 s, so the loss was declared up to timeout + 15 s late. With a
// sweep in every worker, any surviving (or restarted) worker declares it
// within timeout + one interval. Several workers sweeping the same run is
// harmless: the queue re-checks each run under the project lock, so exactly
// one of them terminalizes it and promotes.
type LostRunnerSweeper struct {
	queue *run.Queue
	log   *slog.Logger
	every time.Duration

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewLostRunnerSweeper builds a sweeper that sweeps every
// SweepInterval(queue's heartbeat timeout).
func NewLostRunnerSweeper(q *run.Queue, log *slog.Logger) *LostRunnerSweeper {
	if log == nil {
		log = slog.Default()
	}
	return &LostRunnerSweeper{queue: q, log: log, every: SweepInterval(q.HeartbeatTimeout())}
}

// SweepInterval sweeps four times per heartbeat timeout and at least once a
// second, so a lost runner is declared within timeout + 1 s (plus the
// sweep's own transaction); the sweep reads only the active runs, through a
// partial index, so once a second per worker costs next to nothing.
func SweepInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/4, 100*time.Millisecond), time.Second)
}

// Start sweeps once at once (a restarted worker recovers what its
// predecessor left behind without waiting) and then on every tick, until
// Stop is called or ctx ends. Starting a running sweeper does nothing.
func (s *LostRunnerSweeper) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

// Stop ends the sweeps and waits for a pass under way to finish.
func (s *LostRunnerSweeper) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel, s.done = nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (s *LostRunnerSweeper) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep runs one pass, bounded so that a stuck database connection cannot
// hold the loop for ever.
func (s *LostRunnerSweeper) sweep(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rep, err := s.queue.RecoverLostRunners(pctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("lost runner sweep", "error", err)
	case rep.Lost > 0:
		s.log.Info("lost runner sweep", "lost", rep.Lost)
	}
}
