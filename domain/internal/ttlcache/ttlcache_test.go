package ttlcache

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// TestEntriesExpire: an entry is fresh for less than the TTL, and never
// when it comes from the future.
func TestEntriesExpire(t *testing.T) {
	t.Parallel()
	c := New[string, int](time.Second, 0)
	c.Put("a", 1, t0)
	for _, tc := range []struct {
		at time.Time
		ok bool
	}{{t0, true}, {t0.Add(999 * time.Millisecond), true}, {t0.Add(time.Second), false}, {t0.Add(-time.Millisecond), false}} {
		if _, ok := c.Get("a", tc.at); ok != tc.ok {
			t.Fatalf("at %v: fresh %v, want %v", tc.at.Sub(t0), ok, tc.ok)
		}
	}
	forever := New[string, int](0, 0)
	forever.Put("a", 1, t0)
	if _, ok := forever.Get("a", t0.Add(1000*time.Hour)); !ok {
		t.Fatal("an entry of a cache without TTL expired")
	}
}

// TestLookupThatRacedAClearIsNotKept: what a lookup read before a clear
// is not put back after it.
func TestLookupThatRacedAClearIsNotKept(t *testing.T) {
	t.Parallel()
	c := New[string, int](time.Minute, 0)
	_, ok, gen := c.Lookup("a", t0)
	if ok {
		t.Fatal("hit in an empty cache")
	}
	c.Clear() // the change the lookup may have missed
	if c.PutIf("a", 1, t0, gen) {
		t.Fatal("a lookup older than the clear was kept")
	}
	if _, ok := c.Get("a", t0); ok {
		t.Fatal("the stale value is cached")
	}
	_, _, gen = c.Lookup("a", t0)
	if !c.PutIf("a", 2, t0, gen) {
		t.Fatal("a lookup after the clear was refused")
	}
	if v, ok := c.Get("a", t0); !ok || v != 2 {
		t.Fatalf("got %v %v, want 2", v, ok)
	}
}

// TestBoundStartsAgain: a full cache starts again rather than growing;
// replacing a key it holds does not.
func TestBoundStartsAgain(t *testing.T) {
	t.Parallel()
	c := New[int, int](0, 2)
	c.Put(1, 1, t0)
	c.Put(2, 2, t0)
	c.Put(2, 3, t0)
	if c.Len() != 2 {
		t.Fatalf("%d entries after replacing one, want 2", c.Len())
	}
	c.Put(3, 3, t0)
	if c.Len() != 1 {
		t.Fatalf("%d entries after overflow, want 1", c.Len())
	}
	c.DeleteFunc(func(k int) bool { return k == 3 })
	if c.Len() != 0 {
		t.Fatal("DeleteFunc kept the key")
	}
}

// TestConcurrentUse: run with -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	c := New[int, int](time.Second, 100)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				_, _, gen := c.Lookup(i%150, t0)
				c.PutIf(i%150, g, t0, gen)
				if i%97 == 0 {
					c.Clear()
				}
				c.Delete(i % 7)
			}
		}(g)
	}
	wg.Wait()
}
