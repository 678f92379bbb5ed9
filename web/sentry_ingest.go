package web

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/event"
	"anvil/domain/feed"
	"anvil/domain/feedstats"
	"anvil/domain/monitor"
	"anvil/domain/sentry"
	"anvil/views"
)

// The Sentry-compatible door: any Sentry SDK, unmodified, posts
// to POST /api/:number/envelope/ or /api/:number/store/ with a feed
// connection's token as the DSN's key, and its events end in the same
// Feed.Ingest as POST /api/feed/events — the same validation, bounds,
// scrubbing, ip_hash, bindings, policies, dedupe, incidents and repair.

// registerSentry adds the door's four paths (with and without the trailing
// slash). lim is the native door's limiter: one budget per connection,
// whichever door its requests use. When the feed is not armed the paths are
// the feed's plain 404, like every feed path.
func (s *Server) registerSentry(e *echo.Echo, lim *feedLimiter) {
	for _, p := range []string{"/api/:number/envelope", "/api/:number/envelope/", "/api/:number/store", "/api/:number/store/"} {
		if !s.opts.FeedArmed {
			e.Any(p, feedNotFound)
			continue
		}
		e.POST(p, s.sentryIngest(strings.Contains(p, "/store"), lim))
		e.OPTIONS(p, doorPreflight)
	}
}

// startOutcomes starts the recorder both doors count their answers in; it
// flushes once more and stops when the server shuts down.
func (s *Server) startOutcomes() {
	s.outcomes = feedstats.New(s.db.Bun, s.log, time.Second)
	if !s.opts.FeedArmed {
		return
	}
	s.outcomes.Start()
	s.retention.Budget().Start()
	if s.done != nil {
		go func() {
			<-s.done
			s.outcomes.Stop()
			s.retention.Budget().Stop()
		}()
	}
}

// recordOutcome counts one answer of either door (a nil recorder counts
// nothing).
func (s *Server) recordOutcome(snd *feed.FeedSender, res feed.IngestResult) {
	if s.outcomes != nil {
		s.outcomes.Record(snd.ConnectionID, len(res.Accepted), res.Rejected)
	}
}

// sentryDetail is the body of every answer but 200 and the bare 401.
type sentryDetail struct {
	Detail string `json:"detail"`
}

// sentryIngest serves one of the door's paths. The order of the checks is
// the seed's: body size 413 (as sent, then decompressed) → key 401 → Origin
// with a live key 403 → rate limit 429 → parse 400 → the daily event
// budget 429 (docs/retention.md). A browser key's rate limit is its client
// address's first, then its connection's (addrGate).
func (s *Server) sentryIngest(store bool, lim *feedLimiter) echo.HandlerFunc {
	maxEnvelope := s.opts.FeedMaxEnvelope
	if maxEnvelope <= 0 {
		maxEnvelope = 1 << 20
	}
	return func(c echo.Context) error {
		req := c.Request()
		raw, ok := readBounded(req, s.opts.FeedMaxBody)
		if !ok {
			s.corsForEarlyAnswer(c, sentryKey(req, nil, false))
			return c.JSON(http.StatusRequestEntityTooLarge, sentryDetail{Detail: fmt.Sprintf(
				"%s: the request body is above %d bytes as sent", event.PayloadTooLarge, s.opts.FeedMaxBody)})
		}
		body, tooBig, decodeErr := inflate(req.Header.Get(echo.HeaderContentEncoding), raw, maxEnvelope)
		if tooBig {
			s.corsForEarlyAnswer(c, sentryKey(req, nil, false))
			return c.JSON(http.StatusRequestEntityTooLarge, sentryDetail{Detail: fmt.Sprintf(
				"%s: the request body is above %d bytes decompressed", event.PayloadTooLarge, maxEnvelope)})
		}

		key := sentryKey(req, body, !store && decodeErr == nil)
		number, numErr := strconv.ParseInt(c.Param("number"), 10, 64)
		snd, err := s.Feed.Authenticate(req.Context(), key)
		if errors.Is(err, domain.ErrUnauthorized) {
			return bareUnauthorized(c)
		}
		if err != nil {
			s.log.Warn("sentry: key lookup failed", "request_id", c.Get(requestIDKey), "error", err.Error())
			return sentryUnavailable(c)
		}
		// A live key of another project is the same bare 401 as an unknown
		// one: the number says nothing about which keys exist.
		if numErr != nil || number != snd.ProjectNumber {
			return bareUnauthorized(c)
		}
		if refused, err := s.originGate(c, snd, true); refused {
			return err
		}
		if limited, err := s.addrGate(c, snd, 1, true); limited {
			return err
		}
		if !lim.allow(snd.ConnectionID) {
			h := c.Response().Header()
			h.Set("Retry-After", "60")
			h.Set("X-Sentry-Rate-Limits", "60::organization")
			return c.JSON(http.StatusTooManyRequests, sentryDetail{Detail: fmt.Sprintf(
				"rate_limited: more than %d requests from this connection within a minute; retry after 60 seconds", lim.perWindow)})
		}
		if decodeErr != nil {
			return c.JSON(http.StatusBadRequest, sentryDetail{Detail: "bad_request: " + decodeErr.Error()})
		}

		var payloads, checkIns [][]byte
		var headerID string
		if store {
			payloads = [][]byte{body}
		} else {
			env, err := sentry.ParseEnvelope(body)
			if err != nil {
				return c.JSON(http.StatusBadRequest, sentryDetail{Detail: "bad_request: " + err.Error()})
			}
			payloads, headerID, checkIns = env.Events, env.Header.EventID, env.CheckIns
		}
		// The rest of a browser key's items, past the one charged above.
		if limited, err := s.addrGate(c, snd, len(payloads)+len(checkIns)-1, true); limited {
			return err
		}
		var refusedCheckIns []monitor.ItemRefusal
		if len(checkIns) > 0 {
			// Cron monitors' check-ins go to domain/monitor, apart from
			// events and their budget (web/monitor_checkin.go).
			var answered bool
			if refusedCheckIns, answered, err = s.sentryCheckIns(c, snd, checkIns); answered {
				return err
			}
		}
		if len(payloads) > s.opts.FeedMaxBatch {
			return c.JSON(http.StatusBadRequest, sentryDetail{Detail: fmt.Sprintf(
				"bad_request: the envelope holds %d events; at most %d", len(payloads), s.opts.FeedMaxBatch)})
		}
		if len(payloads) == 0 {
			if len(refusedCheckIns) > 0 {
				return checkInRefusal(c, refusedCheckIns[0])
			}
			// Sessions, client reports, transactions …: read past, nothing stored.
			return c.JSON(http.StatusOK, struct{}{})
		}
		if over, err := s.overBudget(c, snd, len(payloads), true); over {
			return err
		}
		return s.sentryStore(c, snd, payloads, headerID)
	}
}

// sentryStore translates the events and hands them to Feed.Ingest, then
// answers as Sentry's clients expect: the first event's id, or the first
// refusal's reason code and message. headerID is the envelope header's
// event_id, the id of a lone event item that has none of its own.
func (s *Server) sentryStore(c echo.Context, snd *feed.FeedSender, payloads [][]byte, headerID string) error {
	req := c.Request()
	now := time.Now()
	var (
		raws    = make([]json.RawMessage, 0, len(payloads))
		hexIDs  = make([]string, 0, len(payloads))
		refused []event.Rejection
	)
	if len(payloads) != 1 {
		headerID = "" // one header id cannot name two events
	}
	for _, p := range payloads {
		tr, prob := sentry.Translate(p, sentry.Defaults{ConnectionName: snd.ConnectionName, Now: now, EventID: headerID})
		if prob != nil {
			refused = append(refused, event.Rejection{ReasonCode: prob.ReasonCode, Message: prob.Message})
			continue
		}
		raws = append(raws, tr.Raw)
		hexIDs = append(hexIDs, tr.HexID)
	}
	res := feed.IngestResult{Accepted: []string{}, Rejected: []event.Rejection{}}
	var storeErr error
	if len(raws) > 0 {
		res, storeErr = s.Feed.Ingest(req.Context(), snd, s.clientAddr(req), raws)
	}
	res.Rejected = append(refused, res.Rejected...)
	s.recordOutcome(snd, res)
	if storeErr != nil {
		s.log.Warn("sentry: store failed; answering 503", "request_id", c.Get(requestIDKey), "project_id", snd.ProjectID, "error", storeErr.Error())
		return sentryUnavailable(c)
	}
	if len(res.Rejected) > 0 {
		r := res.Rejected[0]
		return c.JSON(http.StatusBadRequest, sentryDetail{Detail: r.ReasonCode + ": " + r.Message})
	}
	return c.JSON(http.StatusOK, map[string]string{"id": hexIDs[0]})
}

// sentryUnavailable is the 503 of a transient store failure.
func sentryUnavailable(c echo.Context) error {
	c.Response().Header().Set("Retry-After", "30")
	return c.JSON(http.StatusServiceUnavailable, sentryDetail{Detail: "internal_error: a transient store failure; retry after 30 seconds"})
}

// sentryKey finds the key, in the documented order: X-Sentry-Auth's
// sentry_key, the sentry_key query parameter, the envelope header's dsn,
// Authorization: Bearer. The first source that names a key is the one
// judged; "" resolves to nothing.
func sentryKey(req *http.Request, body []byte, envelope bool) string {
	if h := req.Header.Get("X-Sentry-Auth"); h != "" {
		if k := authField(h, "sentry_key"); k != "" {
			return k
		}
	}
	if k := req.URL.Query().Get("sentry_key"); k != "" {
		return k
	}
	if envelope {
		if h, err := sentry.ParseHeader(body); err == nil && h.DSN != "" {
			if u, err := url.Parse(h.DSN); err == nil && u.User != nil && u.User.Username() != "" {
				return u.User.Username()
			}
		}
	}
	return bearerToken(req)
}

// authField reads one field of "Sentry sentry_key=…, sentry_version=7, …".
func authField(h, name string) string {
	h = strings.TrimSpace(h)
	if len(h) >= 7 && strings.EqualFold(h[:7], "sentry ") {
		h = h[7:]
	}
	for _, part := range strings.Split(h, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// errEncoding is a body that its Content-Encoding cannot decode.
var errEncoding = errors.New("the body cannot be decoded")

var (
	gzipReaders sync.Pool // *gzip.Reader
	zstdReaders sync.Pool // *zstd.Decoder
)

// inflate decodes the body by its Content-Encoding (gzip, deflate, br,
// zstd, or none) into at most limit bytes. It streams through a
// LimitReader, so a compression bomb costs limit bytes of memory, never
// its inflated size: tooBig is true as soon as byte limit+1 appears. err is
// a body that is not what its encoding says (a 400, after the key).
func inflate(encoding string, raw []byte, limit int) (body []byte, tooBig bool, err error) {
	enc := strings.ToLower(strings.TrimSpace(encoding))
	var r io.Reader
	switch enc {
	case "", "identity":
		return raw, len(raw) > limit, nil
	case "gzip", "x-gzip":
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		if zr == nil {
			zr = new(gzip.Reader)
		}
		if err := zr.Reset(bytes.NewReader(raw)); err != nil {
			return nil, false, fmt.Errorf("%w as gzip", errEncoding)
		}
		defer gzipReaders.Put(zr)
		r = zr
	case "deflate":
		// HTTP's deflate is zlib; some clients send raw deflate.
		if len(raw) >= 2 && raw[0]&0x0f == 8 && (uint16(raw[0])<<8|uint16(raw[1]))%31 == 0 {
			zr, err := zlib.NewReader(bytes.NewReader(raw))
			if err != nil {
				return nil, false, fmt.Errorf("%w as deflate", errEncoding)
			}
			defer zr.Close()
			r = zr
		} else {
			fr := flate.NewReader(bytes.NewReader(raw))
			defer fr.Close()
			r = fr
		}
	case "br":
		r = brotli.NewReader(bytes.NewReader(raw))
	case "zstd":
		zr, _ := zstdReaders.Get().(*zstd.Decoder)
		if zr == nil {
			var err error
			zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(8<<20), zstd.WithDecoderMaxMemory(64<<20))
			if err != nil {
				return nil, false, fmt.Errorf("%w as zstd", errEncoding)
			}
		}
		if err := zr.Reset(bytes.NewReader(raw)); err != nil {
			return nil, false, fmt.Errorf("%w as zstd", errEncoding)
		}
		defer func() { _ = zr.Reset(nil); zstdReaders.Put(zr) }()
		r = zr
	default:
		return nil, false, fmt.Errorf("%w: Content-Encoding %q is not one of gzip, deflate, br, zstd", errEncoding, clipHeader(encoding))
	}
	size := 4*len(raw) + bytes.MinRead
	if size > limit+1 {
		size = limit + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1)); err != nil {
		if buf.Len() > limit {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("%w as %s", errEncoding, enc)
	}
	if buf.Len() > limit {
		return nil, true, nil
	}
	return buf.Bytes(), false, nil
}

func clipHeader(v string) string {
	if len(v) > 40 {
		return v[:40] + "…"
	}
	return v
}

// sentryDSN is a connection's Sentry DSN: ANVIL_PUBLIC_URL's scheme, host
// and path prefix, the token as the key and the project's number as the
// project — from which every SDK derives <prefix>/api/<number>/envelope/.
func sentryDSN(publicURL, token string, number int64) string {
	u, err := url.Parse(publicURL)
	if err != nil || u.Host == "" {
		return ""
	}
	d := url.URL{Scheme: u.Scheme, User: url.User(token), Host: u.Host,
		Path: strings.TrimRight(u.Path, "/") + "/" + strconv.FormatInt(number, 10)}
	return d.String()
}

// connectionDSN is the DSN of a connection just created (its token is at
// hand only now).
func (s *Server) connectionDSN(c echo.Context, projectID uuid.UUID, token string) (string, error) {
	pr, err := s.Projects.Get(c.Request().Context(), principal(c).OrgID, projectID)
	if err != nil {
		return "", err
	}
	return sentryDSN(s.opts.PublicURL, token, pr.Number), nil
}

// connectionOutcomes reads the last 24 hours' outcomes of the connections.
func (s *Server) connectionOutcomes(ctx context.Context, cs []feed.FeedConnection) (map[uuid.UUID]views.FeedOutcome, error) {
	ids := make([]uuid.UUID, len(cs))
	for i := range cs {
		ids[i] = cs[i].ID
	}
	sums, err := feedstats.Summaries(ctx, s.db.Bun, ids, time.Now())
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]views.FeedOutcome, len(sums))
	for id, sm := range sums {
		out[id] = views.FeedOutcome{Accepted: sm.Accepted, Refused: sm.Refused, LastReason: sm.LastReason, LastRefusal: sm.LastRefusal}
	}
	return out, nil
}
