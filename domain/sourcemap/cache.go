package sourcemap

import (
	"container/list"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gosourcemap "github.com/go-sourcemap/sourcemap"
	"github.com/google/uuid"
	"golang.org/x/sync/singleflight"
)

// parsedMap is a source map parsed once and kept in the cache, with the
// lines of its sources split on first use (their cost is charged up front:
// see mapCost).
type parsedMap struct {
	c    *gosourcemap.Consumer
	cost int64

	mu    sync.Mutex
	lines map[string][]string
}

// sourceLines is the source's content split into lines (nil when the map
// carries no sourcesContent for it). The lines are substrings of the
// content, so splitting costs one slice header a line and no copy.
func (p *parsedMap) sourceLines(src string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.lines[src]; ok {
		return l
	}
	var l []string
	if content := p.c.SourceContent(src); content != "" {
		l = strings.Split(content, "\n")
		for i := range l {
			l[i] = strings.TrimSuffix(l[i], "\r")
		}
	}
	if p.lines == nil {
		p.lines = make(map[string][]string)
	}
	p.lines[src] = l
	return l
}

// mapShape is what a map's "mappings" strings hold, read from its decoded
// JSON: segments (positions), the separators between them (',' and ';'),
// and the lines its sources' contents split into.
type mapShape struct {
	segments, separators, mappings, lines int64
}

// The sizes the cache charges a parsed map (docs/sourcemap.md, "Bounded
// and fast"): the library allocates one 24-byte mapping per separator up
// front (six int32s), a split source line is a 16-byte string header, and
// the decoded strings (sources, names, contents) are at most the JSON.
const (
	mappingBytes  = 24
	lineBytes     = 16
	mapOverhead   = 4 << 10
	sparseRatio   = 4
	sparseAllowed = 10000
)

// shapeJSON is the part of a map the library's parse allocates by: its
// mappings and contents, and an index map's sections' (the library reads
// one level of sections, with encoding/json, as this does).
type shapeJSON struct {
	Mappings       string    `json:"mappings"`
	SourcesContent []*string `json:"sourcesContent"`
	Sections       []struct {
		Map *struct {
			Mappings       string    `json:"mappings"`
			SourcesContent []*string `json:"sourcesContent"`
		} `json:"map"`
	} `json:"sections"`
}

// shapeOf measures the map as the library will read it: the JSON is
// decoded (encoding/json, as the library does), so that a key or a
// separator spelled with escapes ("mappin\u0067s", "\u003b") is counted
// like its plain spelling — a scan of the bytes would miss it and charge
// the map its size only. The decoded strings are at most the JSON's size;
// they are dropped once counted. A body that is not JSON has no shape: the
// parse that follows refuses it.
func shapeOf(data []byte) mapShape {
	var sh mapShape
	var m shapeJSON
	if json.Unmarshal(data, &m) != nil {
		return mapShape{lines: 1}
	}
	count := func(mappings string, contents []*string) {
		sh.mappings++
		inSegment := false
		for i := 0; i < len(mappings); i++ {
			switch mappings[i] {
			case ',', ';':
				sh.separators++
				if inSegment {
					sh.segments++
				}
				inSegment = false
			default:
				inSegment = true
			}
		}
		if inSegment {
			sh.segments++
		}
		for _, c := range contents {
			if c != nil {
				sh.lines += int64(strings.Count(*c, "\n"))
			}
		}
	}
	if len(m.Sections) == 0 {
		count(m.Mappings, m.SourcesContent)
	}
	for _, sec := range m.Sections {
		if sec.Map != nil {
			count(sec.Map.Mappings, sec.Map.SourcesContent)
		}
	}
	sh.lines++
	return sh
}

// sparse reports whether the mappings hold far more separators than
// segments: a map of empty lines that would allocate a mapping for each
// (what no build writes; refused at upload).
func (sh mapShape) sparse() bool {
	return sh.separators > sparseRatio*sh.segments+sparseAllowed
}

// mapCost is what a parsed map of data holds in memory: the decoded
// strings, the mappings the library allocates, the split lines.
func mapCost(data []byte, sh mapShape) int64 {
	return int64(len(data)) + mappingBytes*(sh.separators+sh.mappings) + lineBytes*sh.lines + mapOverhead
}

// mapCache is an LRU of parsed maps bounded by bytes, each charged what it
// holds (mapCost); concurrent misses of one map parse it once.
type mapCache struct {
	mu    sync.Mutex
	max   int64
	used  int64
	order *list.List // front: most recently used
	items map[string]*list.Element

	flight singleflight.Group
	parses atomic.Int64
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
	// code is why's kind (Unmapped*); transient marks a store failure,
	// never cached.
	code      string
	transient bool
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
