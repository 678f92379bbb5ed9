package web

import (
	"fmt"
	"hash/maphash"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain/event"
	"anvil/domain/feed"
)

// Browser keys at the two doors (docs/contracts/feed.md, "Browser
// connections" and "CORS"). Both doors — the native /api/feed/events[/batch]
// and the Sentry door /api/:number/envelope/|store/ — run the same three
// pieces here, so they can never disagree:
//
//   - originGate: the 403 step of the seed's order (413 → 401 → 403 → 429).
//     A server key with an Origin stays 403 origin_refused; a browser key
//     from an origin its connection does not list is 403
//     origin_not_allowed, counted in the outcomes with the refused origin.
//   - CORS, on these doors only: a preflight is answered for any origin
//     (it carries no key to judge), an answer to an allowed origin lets
//     the page read it (Access-Control-Allow-Origin: that origin, never *).
//   - addrLimiter: a browser key is public, so its connection also has a
//     per-client-address bound on every item it may send, charged before
//     the connection's own bound.

// corsAllowHeaders are the request headers the browser SDKs send: the
// Sentry SDKs' auth header and trace propagation, the native feed's
// Authorization and Content-Type.
const corsAllowHeaders = "content-type, x-sentry-auth, authorization, sentry-trace, baggage"

// corsMaxAge is how long a browser may reuse a preflight (Chromium caps it
// at two hours).
const corsMaxAge = "7200"

// doorPreflight answers OPTIONS on a door: 204, and for a request with an
// Origin (other than the opaque "null") the CORS grant for that origin. A
// preflight carries no key, so it cannot be judged; the POST that follows
// is, and only an allowed origin can read its answer.
func doorPreflight(c echo.Context) error {
	h := c.Response().Header()
	h.Add("Vary", "Origin")
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	if o := c.Request().Header.Get("Origin"); o != "" && o != "null" {
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Allow-Methods", "POST")
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
	}
	return c.NoContent(http.StatusNoContent)
}

// grantCORS lets the page of an allowed origin read the answer, the
// rate-limit headers among it.
func grantCORS(c echo.Context, origin string) {
	h := c.Response().Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", "X-Sentry-Rate-Limits, Retry-After")
}

// requestOrigin is the request's Origin header (hasOrigin: present at all)
// or, without one, its Referer's origin.
func requestOrigin(req *http.Request) (origin string, hasOrigin bool) {
	if v, ok := req.Header["Origin"]; ok {
		if len(v) > 0 {
			return v[0], true
		}
		return "", true
	}
	return feed.RefererOrigin(req.Header.Get("Referer")), false
}

// originGate is the 403 step for a live sender. It returns true when it
// answered (the request is refused); an admitted browser request from an
// origin gets its CORS grant here, so every later answer carries it.
func (s *Server) originGate(c echo.Context, snd *feed.FeedSender, sentryDoor bool) (bool, error) {
	req := c.Request()
	c.Response().Header().Add("Vary", "Origin")
	origin, hasOrigin := requestOrigin(req)
	switch snd.JudgeOrigin(hasOrigin, origin) {
	case feed.OriginRefused:
		msg := "a server token was sent with an Origin header, so it is in a browser; revoke this connection and issue a new token for a server process"
		// Counted too: the Feed page then shows that the key leaked.
		s.recordRefusal(snd, "origin_refused", msg)
		if sentryDoor {
			return true, c.JSON(http.StatusForbidden, sentryDetail{Detail: "origin_refused: a server key was sent with an Origin header, so it is in a browser; revoke this connection and issue a new one for a server process"})
		}
		return true, c.JSON(http.StatusForbidden, apiError{Error: "origin_refused", Message: msg})
	case feed.OriginNotAllowed:
		msg := fmt.Sprintf("origin %s is not in this browser connection's allowed origins; add it on the project's Feed page", clipHeader(originLabel(origin)))
		s.recordRefusal(snd, "origin_not_allowed", msg)
		if sentryDoor {
			return true, c.JSON(http.StatusForbidden, sentryDetail{Detail: "origin_not_allowed: " + msg})
		}
		return true, c.JSON(http.StatusForbidden, apiError{Error: "origin_not_allowed", Message: msg})
	}
	if snd.Browser && hasOrigin {
		grantCORS(c, origin)
	}
	return false, nil
}

func originLabel(o string) string {
	if o == "" {
		return `""`
	}
	return o
}

// recordRefusal counts one request-level refusal in the outcomes table, so
// an operator sees which site to add.
func (s *Server) recordRefusal(snd *feed.FeedSender, code, msg string) {
	if s.outcomes != nil {
		s.outcomes.Record(snd.ConnectionID, 0, []event.Rejection{{ReasonCode: code, Message: msg}})
	}
}

// addrGate charges n items to a browser connection's client address and
// answers 429 when they do not fit (the items are then not charged).
// Server connections pass: their bound is the connection's. A door calls it
// twice for a browser key: one item before the per-connection bound (so one
// client can never use up a public connection's minute for every other
// visitor), the rest of the request's items once they are counted
// (docs/contracts/feed.md, "Browser connections").
func (s *Server) addrGate(c echo.Context, snd *feed.FeedSender, n int, sentryDoor bool) (bool, error) {
	if !snd.Browser || s.addrLim == nil || n <= 0 {
		return false, nil
	}
	wait, ok := s.addrLim.allow(snd.ConnectionID, limiterAddr(s.clientAddr(c.Request())), n)
	if ok {
		return false, nil
	}
	secs := strconv.Itoa(int((wait + time.Second - 1) / time.Second))
	h := c.Response().Header()
	h.Set("Retry-After", secs)
	h.Set("X-Sentry-Rate-Limits", secs+"::organization")
	msg := fmt.Sprintf("more than %d items from this address to this browser connection within a minute; retry after %s seconds", s.addrLim.perWindow, secs)
	s.recordRefusal(snd, "rate_limited", msg)
	if sentryDoor {
		return true, c.JSON(http.StatusTooManyRequests, sentryDetail{Detail: "rate_limited: " + msg})
	}
	return true, c.JSON(http.StatusTooManyRequests, apiError{Error: "rate_limited", Message: msg})
}

// limiterAddr is the key a client address is bounded under: an IPv4
// address as it is, an IPv6 address by its /64 — one subscriber is handed
// a whole /64 and could otherwise take a fresh address per request.
func limiterAddr(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() {
		return addr
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// addrLimiter counts a browser connection's items per client address in
// fixed 60-second windows, in this process's memory (like feedLimiter).
//
// Its table is public input — every address on the internet may add a key
// — so it is bounded and forgets without a scan: the keys are spread over
// addrShards shards, each with its own lock and two generations of maps.
// A window lives in the current generation; at most every window (or when
// the current one is full) the current becomes the previous and the
// previous is dropped whole, so a lookup and a rotation are O(1) and the
// table never holds more than 2 × addrShardCap keys per shard. A key still
// in its window is carried over from the previous generation on its next
// request.
type addrLimiter struct {
	perWindow int
	window    time.Duration
	now       func() time.Time
	seed      maphash.Seed
	shards    [addrShards]addrShard
}

// addrShards and addrShardCap bound the table: 64 × 4096 × 2 keys.
const (
	addrShards   = 64
	addrShardCap = 4096
)

type addrShard struct {
	mu       sync.Mutex
	cur      map[addrKey]feedWindow
	prev     map[addrKey]feedWindow
	rotated  time.Time
	capacity int
}

type addrKey struct {
	conn uuid.UUID
	addr string
}

func newAddrLimiter(perWindow int) *addrLimiter {
	if perWindow <= 0 {
		perWindow = 60
	}
	l := &addrLimiter{perWindow: perWindow, window: time.Minute, now: time.Now, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].capacity = addrShardCap
	}
	return l
}

// allow charges n items; when they do not fit it charges nothing and
// returns how long until the window ends.
func (l *addrLimiter) allow(conn uuid.UUID, addr string, n int) (time.Duration, bool) {
	now := l.now()
	k := addrKey{conn, addr}
	var h maphash.Hash
	h.SetSeed(l.seed)
	_, _ = h.Write(conn[:])
	_, _ = h.WriteString(addr)
	sh := &l.shards[h.Sum64()%addrShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.cur == nil || now.Sub(sh.rotated) >= l.window {
		sh.rotate(now)
	}
	w, ok := sh.cur[k]
	if !ok {
		if w, ok = sh.prev[k]; ok {
			delete(sh.prev, k)
		}
	}
	if !ok || now.Sub(w.start) >= l.window {
		w = feedWindow{start: now}
	}
	if w.n+n > l.perWindow {
		sh.put(k, w, now)
		return w.start.Add(l.window).Sub(now), false
	}
	w.n += n
	sh.put(k, w, now)
	return 0, true
}

// put stores w, rotating first when the current generation is full.
func (sh *addrShard) put(k addrKey, w feedWindow, now time.Time) {
	if _, ok := sh.cur[k]; !ok && len(sh.cur) >= sh.capacity {
		sh.rotate(now)
	}
	sh.cur[k] = w
}

// rotate drops the previous generation whole and starts a new current one.
func (sh *addrShard) rotate(now time.Time) {
	sh.prev, sh.cur, sh.rotated = sh.cur, make(map[addrKey]feedWindow), now
}

// size is how many keys the limiter holds (tests).
func (l *addrLimiter) size() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.cur) + len(sh.prev)
		sh.mu.Unlock()
	}
	return n
}

// corsForEarlyAnswer lets an allowed origin read a 413, which is decided
// before the key (the seed's order): when the request has an Origin, the
// key from its headers or query is resolved only to decide the grant — the
// answer stays the 413, whatever the key is.
func (s *Server) corsForEarlyAnswer(c echo.Context, key string) {
	req := c.Request()
	c.Response().Header().Add("Vary", "Origin")
	origin, hasOrigin := requestOrigin(req)
	if !hasOrigin || key == "" {
		return
	}
	snd, err := s.Feed.Authenticate(req.Context(), key)
	if err == nil && snd.Browser && snd.JudgeOrigin(true, origin) == feed.OriginAdmitted {
		grantCORS(c, origin)
	}
}
