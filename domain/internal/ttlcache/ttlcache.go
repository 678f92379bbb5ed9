// Package ttlcache is the one shape of the domain's in-process caches: a
// bounded map whose entries are used for at most a TTL, with a generation
// that counts clears, so that a lookup which began before a change and
// ends after it cannot put what it read back into the cache.
//
// A cache has no goroutine and so no lifecycle: entries expire when read.
package ttlcache

import (
	"sync"
	"time"
)

// Cache maps K to V. The zero value is not usable; build it with New.
type Cache[K comparable, V any] struct {
	ttl time.Duration
	max int

	mu  sync.Mutex
	m   map[K]entry[V]
	gen uint64
}

type entry[V any] struct {
	v  V
	at time.Time
}

// New builds a cache whose entries are used for less than ttl (0: until
// they are deleted) and that holds at most max of them (when full, it
// starts again: simpler than eviction, and a cache that fills is one whose
// working set does not fit anyway).
func New[K comparable, V any](ttl time.Duration, max int) *Cache[K, V] {
	return &Cache[K, V]{ttl: ttl, max: max}
}

// Lookup returns k's value if it is fresh at now, and the generation to
// hand to PutIf with what the source says on a miss. An entry from the
// future (the clock went back) is not fresh.
func (c *Cache[K, V]) Lookup(k K, now time.Time) (v V, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || (c.ttl > 0 && (now.Sub(e.at) >= c.ttl || now.Before(e.at))) {
		return v, false, c.gen
	}
	return e.v, true, c.gen
}

// Get is Lookup without the generation.
func (c *Cache[K, V]) Get(k K, now time.Time) (V, bool) {
	v, ok, _ := c.Lookup(k, now)
	return v, ok
}

// PutIf remembers v for k, read at now, unless the cache was cleared
// since generation gen: the read may have come before the change that
// cleared it. It reports whether v was kept.
func (c *Cache[K, V]) PutIf(k K, v V, now time.Time, gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return false
	}
	c.put(k, v, now)
	return true
}

// Put remembers v for k, read at now.
func (c *Cache[K, V]) Put(k K, v V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(k, v, now)
}

func (c *Cache[K, V]) put(k K, v V, now time.Time) {
	if _, ok := c.m[k]; !ok && (c.m == nil || (c.max > 0 && len(c.m) >= c.max)) {
		c.m = make(map[K]entry[V])
	}
	c.m[k] = entry[V]{v, now}
}

// Delete forgets k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// DeleteFunc forgets every key for which del says so.
func (c *Cache[K, V]) DeleteFunc(del func(K) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if del(k) {
			delete(c.m, k)
		}
	}
}

// Clear forgets everything and starts a new generation.
func (c *Cache[K, V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
	c.gen++
}

// Len is the number of entries held, fresh or not.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
