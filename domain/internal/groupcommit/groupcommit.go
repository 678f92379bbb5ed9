// Package groupcommit stores concurrent callers' items in shared groups:
// callers submit items and wait; one loop forms groups of what is waiting
// and runs the caller-provided group function on each, one group after the
// other, so that one transaction (and one commit flush) carries many
// callers' work.
//
// Under concurrent load the callers a group has just answered submit again
// at once; a loop that took the next group at once would take only those
// that arrived meanwhile, and groups would alternate between a few and the
// rest. So after a group of several, or with others waiting, the loop
// lingers until the answered callers are back or the linger has passed —
// Postgres's commit_delay and commit_siblings, one level up: a caller alone
// never waits, and under load each group carries twice as much. When the
// callers come back slower than the linger, waiting for them only delays:
// the loop then takes Backoff groups without lingering.
//
// (The feed's combiner is not one of these: it stores several groups of a
// project at once, led by the callers themselves, taking turns for the
// process's COPY slot; see domain/feed/feed_ingest.go.)
package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Policy sizes the groups.
type Policy struct {
	Max     int           // the most items in a group
	Linger  time.Duration // how long to wait for the callers just answered
	Backoff int           // groups taken without lingering after a linger in vain
}

// ErrStopped is Submit's answer once Stop has been called, or before Start.
var ErrStopped = errors.New("groupcommit: not running")

// Combiner forms groups of T and runs them. Build it with New, Start it,
// and Stop it at shutdown: Stop runs the groups still waiting first.
type Combiner[T any] struct {
	policy Policy
	run    func(group []T)

	mu      sync.Mutex
	pending []waiter[T]
	running bool // between Start and Stop
	arrived chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

type waiter[T any] struct {
	item T
	done chan struct{}
}

// New builds a combiner that runs run on each group; run answers every
// item of its group itself (through the items) before it returns.
func New[T any](p Policy, run func(group []T)) *Combiner[T] {
	return &Combiner[T]{policy: p, run: run, arrived: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// Start runs the loop until Stop.
func (c *Combiner[T]) Start(context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.stop:
		return
	default:
	}
	if c.running {
		return
	}
	c.running = true
	go c.loop()
}

// Submit hands item to the loop and returns once the group holding it has
// run.
func (c *Combiner[T]) Submit(item T) error {
	w := waiter[T]{item: item, done: make(chan struct{})}
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		return ErrStopped
	}
	c.pending = append(c.pending, w)
	c.mu.Unlock()
	select {
	case c.arrived <- struct{}{}:
	default:
	}
	<-w.done
	return nil
}

// Stop refuses new items, runs the groups still waiting and ends the
// loop; it returns when the loop has ended or ctx has.
func (c *Combiner[T]) Stop(ctx context.Context) error {
	c.mu.Lock()
	wasRunning := c.running
	c.running = false
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.mu.Unlock()
	if !wasRunning {
		return nil
	}
	select {
	case <-c.stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Combiner[T]) loop() {
	defer close(c.stopped)
	expect := 0 // items in flight when the last group was answered
	skip := 0   // groups to take without lingering, after a linger in vain
	for {
		c.mu.Lock()
		if expect > 1 && len(c.pending) < expect {
			if skip > 0 {
				skip--
			} else {
				c.mu.Unlock()
				if !c.linger(expect) {
					skip = c.policy.Backoff
				}
				c.mu.Lock()
			}
		}
		n := min(len(c.pending), c.policy.Max)
		if n == 0 {
			c.mu.Unlock()
			expect = 0
			select {
			case <-c.arrived:
				continue
			case <-c.stop:
				c.mu.Lock()
				empty := len(c.pending) == 0
				c.mu.Unlock()
				if empty {
					return
				}
				continue
			}
		}
		group := slices.Clone(c.pending[:n])
		c.pending = slices.Delete(c.pending, 0, n)
		c.mu.Unlock()
		items := make([]T, n)
		for i, w := range group {
			items[i] = w.item
		}
		c.run(items)
		for _, w := range group {
			close(w.done)
		}
		c.mu.Lock()
		expect = min(len(group)+len(c.pending), c.policy.Max)
		c.mu.Unlock()
	}
}

// linger waits until expect items are pending, at most the policy's
// linger, and reports whether they came. A stop ends it at once.
func (c *Combiner[T]) linger(expect int) bool {
	t := time.NewTimer(c.policy.Linger)
	defer t.Stop()
	for {
		select {
		case <-c.arrived:
		case <-t.C:
			return false
		case <-c.stop:
			return false
		}
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n >= expect {
			return true
		}
	}
}
