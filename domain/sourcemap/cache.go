package sourcemap

import (
	"container/list"
	"strings"
	"sync"
	"time"

	gosourcemap "github.com/go-sourcemap/sourcemap"
	"github.com/google/uuid"
)

// parsedMap is a source map parsed once and kept in the cache, with the
// lines of its sources split on first use.
type parsedMap struct {
	c    *gosourcemap.Consumer
	cost int64

	mu    sync.Mutex
	lines map[string][]string
}

// sourceLines is the source's content split into lines (nil when the map
// carries no sourcesContent for it).
func (p *parsedMap) sourceLines(src string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.lines[src]; ok {
		return l
	}
	var l []string
	if content := p.c.SourceContent(src); content != "" {
		l = strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n")
	}
	if p.lines == nil {
		p.lines = make(map[string][]string)
	}
	p.lines[src] = l
	return l
}

// mapCache is an LRU of parsed maps bounded by bytes: a map costs about
// three times its JSON once parsed (mappings decoded, names, sources and
// their lines), so that is what it is charged.
type mapCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	order *list.List // front: most recently used
	items map[string]*list.Element
}

type cacheItem struct {
	key string
	m   *parsedMap
}

func newMapCache(max int64) *mapCache {
	return &mapCache{max: max, order: list.New(), items: make(map[string]*list.Element)}
}

func (c *mapCache) get(key string) *parsedMap {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*cacheItem).m
	}
	return nil
}

// put keeps m unless it alone is larger than the cache; older maps make
// room.
func (c *mapCache) put(key string, m *parsedMap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.cost > c.max {
		return
	}
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&cacheItem{key: key, m: m})
	c.used += m.cost
	for c.used > c.max {
		el := c.order.Back()
		it := el.Value.(*cacheItem)
		c.order.Remove(el)
		delete(c.items, it.key)
		c.used -= it.m.cost
	}
}

// Bytes is what the cache holds, by the maps' charged sizes.
func (c *mapCache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// lookups caches, per project, whether it has any upload and which stored
// map a frame's key resolved to, for a short while: the ingest asks the
// same questions for every event of a release. An upload in this process
// forgets its project's answers at once; another process's upload is seen
// within lookupTTL.
type lookups struct {
	mu       sync.Mutex
	has      map[uuid.UUID]hasEntry
	resolved map[string]resolvedEntry
	bumped   map[uuid.UUID]time.Time
}

const lookupTTL = 10 * time.Second

type hasEntry struct {
	has bool
	at  time.Time
}

type resolvedEntry struct {
	r  resolution
	at time.Time
}

// resolution is the stored map a frame's key leads to (blob "" when none,
// with why).
type resolution struct {
	blob     string
	bundleID uuid.UUID
	label    string
	why      string
}

func newLookups() *lookups {
	return &lookups{has: map[uuid.UUID]hasEntry{}, resolved: map[string]resolvedEntry{}, bumped: map[uuid.UUID]time.Time{}}
}

func (l *lookups) hasAny(id uuid.UUID, now time.Time) (has, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.has[id]
	if !ok || now.Sub(e.at) > lookupTTL {
		return false, false
	}
	return e.has, true
}

func (l *lookups) setHas(id uuid.UUID, has bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.has) > 100000 {
		clear(l.has)
	}
	l.has[id] = hasEntry{has: has, at: now}
}

func (l *lookups) get(key string, now time.Time) (resolution, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.resolved[key]
	if !ok || now.Sub(e.at) > lookupTTL {
		return resolution{}, false
	}
	return e.r, true
}

func (l *lookups) set(key string, r resolution, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.resolved) > 100000 {
		clear(l.resolved)
	}
	l.resolved[key] = resolvedEntry{r: r, at: now}
}

// forget drops a project's answers (after an upload to it).
func (l *lookups) forget(id uuid.UUID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.has, id)
	prefix := id.String() + "|"
	for k := range l.resolved {
		if strings.HasPrefix(k, prefix) {
			delete(l.resolved, k)
		}
	}
}

// bump reports whether a bundle's last_used_at is due a write (hourly).
func (l *lookups) bump(id uuid.UUID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.bumped[id]; ok && now.Sub(t) < time.Hour {
		return false
	}
	if len(l.bumped) > 100000 {
		clear(l.bumped)
	}
	l.bumped[id] = now
	return true
}
