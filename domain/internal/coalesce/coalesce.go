// Package coalesce runs a caller's function over the keys requested since
// its last round, from one goroutine, at most one round per gap: a burst of
// requests for the same key is one call, and the rounds of a steady stream
// are paced instead of following each other as fast as the function
// returns.
package coalesce

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Loop coalesces requests for keys into rounds. Build it with New, Start
// it once, and Stop it at shutdown: Stop runs a last round with what is
// pending before it returns.
type Loop[K comparable] struct {
	gap time.Duration
	max int
	do  func(ctx context.Context, keys []K)

	mu      sync.Mutex
	pending []K
	seen    map[K]struct{}
	// round counts requests: requested is the number of the latest
	// request, done the number of the latest one a round has handled.
	requested, done uint64
	doneCond        *sync.Cond
	wake            chan struct{}
	stop            chan struct{}
	stopped         chan struct{}
	started, ended  bool
	dropped         int
}

// New builds a loop that calls do with the distinct keys requested since
// the last round, in the order of their first request, at most once per
// gap. max bounds the pending keys (further requests are dropped and
// counted) so a stalled do cannot grow the queue without end; 0 is no
// bound. do gets a context that ends when Stop's does.
func New[K comparable](gap time.Duration, max int, do func(ctx context.Context, keys []K)) *Loop[K] {
	l := &Loop[K]{gap: gap, max: max, do: do, seen: map[K]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	l.doneCond = sync.NewCond(&l.mu)
	return l
}

// Request asks for a round over keys. It never blocks; the keys of a loop
// not yet started wait for Start.
func (l *Loop[K]) Request(keys ...K) {
	l.mu.Lock()
	for _, k := range keys {
		if _, ok := l.seen[k]; ok {
			continue
		}
		if l.max > 0 && len(l.pending) >= l.max {
			l.dropped++
			continue
		}
		l.seen[k] = struct{}{}
		l.pending = append(l.pending, k)
	}
	l.requested++
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Dropped is how many keys were refused because the queue was full.
func (l *Loop[K]) Dropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Start runs the loop until Stop. ctx bounds nothing but the values do
// sees; the loop ends with Stop only, so the last round is never skipped.
func (l *Loop[K]) Start(ctx context.Context) {
	l.mu.Lock()
	if l.started {
		l.mu.Unlock()
		return
	}
	l.started = true
	l.mu.Unlock()
	go l.run(context.WithoutCancel(ctx))
}

func (l *Loop[K]) run(ctx context.Context) {
	defer func() {
		l.mu.Lock()
		l.ended = true
		l.doneCond.Broadcast()
		l.mu.Unlock()
		close(l.stopped)
	}()
	var last time.Time
	for {
		select {
		case <-l.wake:
		case <-l.stop:
			l.round(ctx)
			return
		}
		// Pace the rounds: wait out the gap since the last one began,
		// unless the loop is stopping (then send at once).
		if wait := l.gap - time.Since(last); wait > 0 && !last.IsZero() {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.stop:
				t.Stop()
				l.round(ctx)
				return
			}
		}
		last = time.Now()
		l.round(ctx)
	}
}

// round calls do with what is pending, if anything.
func (l *Loop[K]) round(ctx context.Context) {
	l.mu.Lock()
	keys, upTo := l.pending, l.requested
	l.pending = nil
	clear(l.seen)
	l.mu.Unlock()
	if len(keys) > 0 {
		l.do(ctx, keys)
	}
	l.mu.Lock()
	l.done = upTo
	l.doneCond.Broadcast()
	l.mu.Unlock()
}

// Flush returns once every key requested before the call has been handed
// to do (and do has returned), or when ctx ends.
func (l *Loop[K]) Flush(ctx context.Context) error {
	l.mu.Lock()
	target := l.requested
	if l.done >= target {
		l.mu.Unlock()
		return nil
	}
	if !l.started {
		l.mu.Unlock()
		return errNotStarted
	}
	stop := context.AfterFunc(ctx, func() {
		l.mu.Lock()
		l.doneCond.Broadcast()
		l.mu.Unlock()
	})
	defer stop()
	for l.done < target && ctx.Err() == nil && !l.ended {
		l.doneCond.Wait()
	}
	ended := l.done < target && l.ended
	l.mu.Unlock()
	if ended {
		return errStopped
	}
	return ctx.Err()
}

// Stop runs a last round with what is pending and ends the loop; it
// returns when the loop has ended or ctx has. Stopping twice, or a loop
// never started, is no error.
func (l *Loop[K]) Stop(ctx context.Context) error {
	l.mu.Lock()
	started := l.started
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var (
	errNotStarted = errors.New("coalesce: the loop was never started")
	errStopped    = errors.New("coalesce: the loop stopped before handling every request")
)
