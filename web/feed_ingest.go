package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/event"
	"anvil/domain/feed"
)

// feedIngest serves POST /api/feed/events (single) and /events/batch. The
// order of the checks is fixed (docs/contracts/feed.md, "Order of the checks"): body size (413), token
// (401), Origin with a live token (403), rate limit (429), parse (400), the
// project's daily event budget (429, docs/retention.md). Each
// check runs only on what passed the ones before, so a bad token never
// learns whether it carried an Origin and never spends a connection's budget.
func (s *Server) feedIngest(single bool, lim *feedLimiter) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		body, ok := readBounded(req, s.opts.FeedMaxBody)
		if !ok {
			s.corsForEarlyAnswer(c, bearerToken(req))
			return c.JSON(http.StatusRequestEntityTooLarge, tooLargeBody(s.opts.FeedMaxBody))
		}
		snd, err := s.Feed.Authenticate(req.Context(), bearerToken(req))
		if errors.Is(err, domain.ErrUnauthorized) {
			return bareUnauthorized(c)
		}
		if err != nil {
			s.log.Warn("feed: token lookup failed", "request_id", c.Get(requestIDKey), "error", err.Error())
			return feedUnavailable(c, feed.IngestResult{Accepted: []string{}, Rejected: []event.Rejection{}})
		}
		if refused, err := s.originGate(c, snd, false); refused {
			return err
		}
		// A browser key's client address is charged before its connection
		// (docs/contracts/feed.md, "Browser connections").
		if limited, err := s.addrGate(c, snd, 1, false); limited {
			return err
		}
		if !lim.allow(snd.ConnectionID) {
			c.Response().Header().Set("Retry-After", "60")
			return c.JSON(http.StatusTooManyRequests, apiError{Error: "rate_limited",
				Message: fmt.Sprintf("more than %d requests from this connection within a minute; retry after 60 seconds", lim.perWindow)})
		}
		batch, err := event.SplitBatch(body, single, s.opts.FeedMaxBatch)
		if err != nil {
			return c.JSON(http.StatusBadRequest, apiError{Error: "bad_request", Message: strings.TrimPrefix(err.Error(), event.ErrBadRequest.Error()+": ")})
		}
		if limited, err := s.addrGate(c, snd, batch.Len()-1, false); limited {
			return err
		}
		if over, err := s.overBudget(c, snd, batch.Len(), false); over {
			return err
		}
		res, err := s.Feed.IngestBatch(req.Context(), snd, s.clientAddr(req), &batch)
		s.recordOutcome(snd, res)
		if err != nil {
			s.log.Warn("feed: store failed; answering 503", "request_id", c.Get(requestIDKey), "project_id", snd.ProjectID, "error", err.Error())
			return feedUnavailable(c, res)
		}
		return c.JSON(http.StatusAccepted, res)
	}
}

// readBounded reads at most limit bytes of the body; ok is false when the
// body is larger (announced or actual).
func readBounded(req *http.Request, limit int) ([]byte, bool) {
	if req.ContentLength > int64(limit) {
		return nil, false
	}
	// Read into one buffer of the announced size (and bytes.MinRead to
	// spare, to meet the end without growing): a batch is tens of kilobytes,
	// which io.ReadAll would reach by growing and copying a dozen times.
	size := bytes.MinRead
	if req.ContentLength > 0 {
		size += int(req.ContentLength)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := buf.ReadFrom(io.LimitReader(req.Body, int64(limit)+1)); err != nil {
		// A body that breaks off is no body: the parse step refuses it.
		return nil, true
	}
	return buf.Bytes(), buf.Len() <= limit
}

func tooLargeBody(limit int) feed.IngestResult {
	return feed.IngestResult{Accepted: []string{}, Rejected: []event.Rejection{{
		EventID: nil, ReasonCode: event.PayloadTooLarge,
		Message: fmt.Sprintf("the request body is above %d bytes; send fewer events per batch", limit),
	}}}
}

// bearerToken is the token of an "Authorization: Bearer …" header, or "".
func bearerToken(req *http.Request) string {
	scheme, tok, ok := strings.Cut(req.Header.Get(echo.HeaderAuthorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// bareUnauthorized is THE answer to every token that does not resolve —
// missing, malformed, unknown, revoked or wrong: the same status, headers
// and empty body, so the endpoint tells nobody which prefixes exist.
func bareUnauthorized(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="anvil-feed"`)
	return c.NoContent(http.StatusUnauthorized)
}

// feedUnavailable is the 503 of a transient store failure: the sender
// repeats the whole batch after Retry-After.
func feedUnavailable(c echo.Context, res feed.IngestResult) error {
	c.Response().Header().Set("Retry-After", "30")
	return c.JSON(http.StatusServiceUnavailable, res)
}

// clientAddr is the address ip_hash is computed from and a browser key's
// per-address bound is charged to: when the socket peer is a trusted proxy
// (ANVIL_TRUSTED_PROXIES), the right-most X-Forwarded-For hop that is not
// itself a trusted proxy — each proxy appends the address it was reached
// from, so everything left of that hop was written by the client and is
// worth nothing (docs/contracts/feed.md, "Client address"); otherwise the
// peer itself. Always a bare address in canonical spelling (no port), so
// one machine gets one pseudonym. An unreadable hop ends the walk at the
// last address known good.
func (s *Server) clientAddr(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	addr := peer.Unmap()
	if !s.trustedProxy(addr) {
		return addr.String()
	}
	hops := req.Header.Values("X-Forwarded-For")
	// At most maxHops hops are looked at: a header of a million commas
	// costs nothing more than one of ten.
	const maxHops = 32
	seen := 0
	for i := len(hops) - 1; i >= 0 && seen < maxHops; i-- {
		list := hops[i]
		for list != "" && seen < maxHops {
			var hop string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				list, hop = list[:j], list[j+1:]
			} else {
				list, hop = "", list
			}
			seen++
			a, ok := parseHostAddr(strings.TrimSpace(hop))
			if !ok {
				return addr.String()
			}
			addr = a
			if !s.trustedProxy(a) {
				return addr.String()
			}
		}
	}
	return addr.String()
}

func (s *Server) trustedProxy(a netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHostAddr reads "1.2.3.4", "1.2.3.4:80", "2001:db8::1" or "[2001:db8::1]:80".
func parseHostAddr(v string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(v); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.Trim(v, "[]")); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}

// feedLimiter counts requests per connection in fixed 60-second windows, in
// this process's memory (docs/contracts/feed.md: requests, not events, per
// connection per process). A window starts with a connection's first request after the last
// one ended.
type feedLimiter struct {
	mu        sync.Mutex
	perWindow int
	window    time.Duration
	now       func() time.Time
	counts    map[uuid.UUID]*feedWindow
}

type feedWindow struct {
	start time.Time
	n     int
}

func newFeedLimiter(perWindow int) *feedLimiter {
	if perWindow <= 0 {
		perWindow = 600
	}
	return &feedLimiter{perWindow: perWindow, window: time.Minute, now: time.Now, counts: map[uuid.UUID]*feedWindow{}}
}

// allow counts one request of a connection and reports whether it is
// within the budget.
func (l *feedLimiter) allow(id uuid.UUID) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.counts[id]
	if w == nil || now.Sub(w.start) >= l.window {
		if len(l.counts) > 10000 {
			l.sweep(now)
		}
		w = &feedWindow{start: now}
		l.counts[id] = w
	}
	w.n++
	return w.n <= l.perWindow
}

// sweep forgets windows that have ended, so the map stays as large as the
// number of connections active in the last minute.
func (l *feedLimiter) sweep(now time.Time) {
	for id, w := range l.counts {
		if now.Sub(w.start) >= l.window {
			delete(l.counts, id)
		}
	}
}
