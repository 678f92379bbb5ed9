package coalesce

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	mu     sync.Mutex
	rounds [][]int
	starts []time.Time
}

func (r *recorder) do(_ context.Context, keys []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rounds = append(r.rounds, slices.Clone(keys))
	r.starts = append(r.starts, time.Now())
}

func (r *recorder) all() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, k := range r.rounds {
		out = append(out, k...)
	}
	return out
}

// TestFlushHandsOverEveryKeyOnce: every key requested before Flush has been
// handed to do by the time it returns, each once per round, in the order of
// its first request.
func TestFlushHandsOverEveryKeyOnce(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	l := New(time.Millisecond, 0, r.do)
	l.Start(context.Background())
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	l.Request(3, 1, 3, 2, 1)
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := r.all()
	if !slices.Equal(got, []int{3, 1, 2}) {
		t.Fatalf("handed over %v, want [3 1 2]", got)
	}
}

// TestRoundsArePaced: under a steady stream of requests no two rounds
// begin less than the gap apart.
func TestRoundsArePaced(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	const gap = 20 * time.Millisecond
	l := New(gap, 0, r.do)
	l.Start(context.Background())
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
	for i := 0; i < 50; i++ {
		l.Request(i % 4)
		time.Sleep(time.Millisecond)
	}
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 1; i < len(r.starts); i++ {
		if d := r.starts[i].Sub(r.starts[i-1]); d < gap {
			t.Fatalf("rounds %d and %d began %v apart, want at least %v", i-1, i, d, gap)
		}
	}
	if len(r.rounds) >= 50 {
		t.Fatalf("%d rounds for 50 requests: nothing coalesced", len(r.rounds))
	}
}

// TestStopSendsWhatIsPending: Stop returns only after a last round with
// the keys requested before it, without waiting out the gap.
func TestStopSendsWhatIsPending(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	l := New(time.Hour, 0, r.do)
	l.Start(context.Background())
	l.Request(1)
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Request(2, 3) // the gap of an hour has not passed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.all(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("handed over %v, want [1 2 3]", got)
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	l.Request(4)
	if err := l.Flush(ctx); err == nil {
		t.Fatal("a flush after stop reported success for a key nobody will handle")
	}
}

// TestBoundDropsAndCounts: beyond max pending keys requests are dropped
// and counted, never blocking the caller.
func TestBoundDropsAndCounts(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	l := New(time.Millisecond, 2, r.do)
	l.Request(1, 2, 3, 4)
	if l.Dropped() != 2 {
		t.Fatalf("dropped %d, want 2", l.Dropped())
	}
	if err := l.Flush(context.Background()); err == nil {
		t.Fatal("flush of a loop never started succeeded")
	}
	l.Start(context.Background())
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = l.Stop(context.Background())
	if got := r.all(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("handed over %v, want [1 2]", got)
	}
}

// TestConcurrentRequests: requests from many goroutines during rounds all
// arrive (run with -race).
func TestConcurrentRequests(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	l := New(time.Millisecond, 0, r.do)
	l.Start(context.Background())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				l.Request(g*1000 + i)
			}
		}(g)
	}
	wg.Wait()
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := r.all()
	slices.Sort(got)
	if len(slices.Compact(got)) != 800 {
		t.Fatalf("%d distinct keys handed over, want 800", len(got))
	}
}
