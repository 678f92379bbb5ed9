package domain

import (
	"sync"
	"time"
)

// senderTTL is how long a process answers a token from its senderCache
// before it asks the database again.
const senderTTL = time.Second

// maxCachedSenders bounds senderCache; when full, it starts again.
const maxCachedSenders = 10000

// senderCache remembers, for up to senderTTL, what a token resolved to:
// every request of a busy sender would otherwise cost a query for the same
// row. It is keyed by the SHA-256 of the whole token, so only a caller who
// holds the token itself can meet an entry: a prefix alone, or a prefix
// with a wrong secret, always takes the database path, and answers as
// before in the same time (docs/contracts/feed.md: no answer may tell which
// prefixes exist). Unknown tokens are not remembered.
//
// Revoking a connection or changing a binding empties the cache of the
// process that made the change at once; another process follows within
// senderTTL.
type senderCache struct {
	mu      sync.Mutex
	entries map[string]cachedSender
	gen     uint64 // counts clears: a lookup that began before one is not kept
}

type cachedSender struct {
	snd     *FeedSender // nil when revoked
	fetched time.Time
}

// get returns what the token with this hash resolved to, if that is
// fresh: snd is nil for a revoked connection. gen is to be handed to put
// with what the database says on a miss.
func (c *senderCache) get(hash []byte, now time.Time) (snd *FeedSender, ok bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[string(hash)]
	if !ok || now.Sub(e.fetched) >= senderTTL || now.Before(e.fetched) {
		return nil, false, c.gen
	}
	return e.snd, true, c.gen
}

// put remembers what a lookup that began at generation gen found, unless
// the cache was cleared since: the lookup may have read the row before the
// change that cleared it.
func (c *senderCache) put(hash []byte, snd *FeedSender, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.entries == nil || len(c.entries) >= maxCachedSenders {
		c.entries = map[string]cachedSender{}
	}
	c.entries[string(hash)] = cachedSender{snd: snd, fetched: now}
}

// clear forgets every token: a connection or a binding changed.
func (c *senderCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	c.gen++
}
