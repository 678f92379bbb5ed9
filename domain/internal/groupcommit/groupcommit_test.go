package groupcommit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type item struct {
	n     int
	group int // set by the group function: the group that ran it
}

// TestConcurrentCallersShareGroups: every caller's item runs exactly once,
// in a group of at most Max, and concurrent callers share groups.
func TestConcurrentCallersShareGroups(t *testing.T) {
	t.Parallel()
	var groups, ran atomic.Int64
	var mu sync.Mutex
	largest := 0
	c := New(Policy{Max: 8, Linger: 2 * time.Millisecond, Backoff: 4}, func(g []*item) {
		id := int(groups.Add(1))
		mu.Lock()
		largest = max(largest, len(g))
		mu.Unlock()
		for _, it := range g {
			it.group = id
			ran.Add(1)
		}
		time.Sleep(time.Millisecond) // a commit's flush
	})
	c.Start(context.Background())
	var wg sync.WaitGroup
	const callers, each = 16, 50
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				it := &item{n: i}
				if err := c.Submit(it); err != nil {
					t.Error(err)
					return
				}
				if it.group == 0 {
					t.Error("Submit returned before the item's group ran")
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != callers*each {
		t.Fatalf("%d items ran, want %d", ran.Load(), callers*each)
	}
	if largest > 8 {
		t.Fatalf("a group of %d, more than Max", largest)
	}
	if groups.Load() >= callers*each {
		t.Fatalf("%d groups for %d items: nothing was combined", groups.Load(), callers*each)
	}
}

// TestAloneNeverWaits: a caller alone is answered without any linger.
func TestAloneNeverWaits(t *testing.T) {
	t.Parallel()
	c := New(Policy{Max: 8, Linger: time.Hour, Backoff: 4}, func([]*item) {})
	c.Start(context.Background())
	defer c.Stop(context.Background()) //nolint:errcheck
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 3 && err == nil; i++ {
			err = c.Submit(&item{})
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a lone caller waited for a linger of an hour")
	}
}

// TestStopRunsWhatWaitsThenRefuses: Stop runs the items submitted before
// it; after it (and before Start) Submit is refused, not left waiting.
func TestStopRunsWhatWaitsThenRefuses(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var started, ran atomic.Int64
	c := New(Policy{Max: 2, Linger: time.Millisecond}, func(g []*item) {
		started.Add(int64(len(g)))
		<-release
		ran.Add(int64(len(g)))
	})
	if err := c.Submit(&item{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("submit before start: %v", err)
	}
	c.Start(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Submit(&item{}) }()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		// All five must be in before Stop: one group (of one or two) is
		// running, the rest wait. Waiting for three pending alone let the
		// fifth submitter arrive after Stop (refused, as documented) when
		// the loop had not yet taken a group — CI's "4 of 5 items ran".
		if s := started.Load(); s > 0 && s+int64(n) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the submits never queued")
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- c.Stop(context.Background()) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if ran.Load() != 5 {
		t.Fatalf("%d of 5 items ran before Stop returned", ran.Load())
	}
	if err := c.Submit(&item{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("submit after stop: %v", err)
	}
}
