package feed

import (
	"time"

	"anvil/domain/internal/ttlcache"
)

// senderTTL is how long a process answers a token from its sender cache
// before it asks the database again.
const senderTTL = time.Second

// maxCachedSenders bounds the sender cache; when full, it starts again.
const maxCachedSenders = 10000

// newSenderCache builds the cache of what a token resolved to, for up to
// senderTTL: every request of a busy sender would otherwise cost a query
// for the same row. It is keyed by the SHA-256 of the whole token, so only
// a caller who holds the token itself can meet an entry: a prefix alone, or
// a prefix with a wrong secret, always takes the database path, and answers
// as before in the same time (docs/contracts/feed.md: no answer may tell which prefixes
// exist). Unknown tokens are not remembered; a revoked connection is
// remembered as nil.
//
// Revoking a connection or changing a binding clears the cache of the
// process that made the change at once (and a lookup that began before the
// clear is not kept: it may have read the row before the change); another
// process follows within senderTTL.
func newSenderCache() *ttlcache.Cache[string, *FeedSender] {
	return ttlcache.New[string, *FeedSender](senderTTL, maxCachedSenders)
}
