package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/event"
	"anvil/domain/feed"
	"anvil/domain/otlp"
)

// The OpenTelemetry door (docs/otlp.md): an unmodified OTLP/HTTP exporter
// set with OTEL_EXPORTER_OTLP_ENDPOINT=<public URL>/api/otlp and a server
// connection's token as its bearer posts spans and logs; their exceptions
// end in the same Feed.Ingest as POST /api/feed/events — the same
// validation, bounds, scrubbing, bindings, dedupe, budget, incidents and
// repair.

// registerOTLP adds the door's two paths. lim is the native door's limiter:
// one budget of requests per connection, whichever door its requests use.
// When the feed is not armed every /api/otlp path is the feed's plain 404.
func (s *Server) registerOTLP(e *echo.Echo, lim *feedLimiter) {
	e.Any("/api/otlp", feedNotFound)
	e.Any("/api/otlp/*", feedNotFound)
	if !s.opts.FeedArmed {
		return
	}
	e.POST("/api/otlp/v1/traces", s.otlpIngest(otlp.Traces, lim))
	e.POST("/api/otlp/v1/logs", s.otlpIngest(otlp.Logs, lim))
}

// otlpAnswer writes an OTLP body in the request's encoding.
func otlpAnswer(c echo.Context, status int, enc otlp.Encoding, body []byte) error {
	return c.Blob(status, enc.ContentType(), body)
}

func otlpStatus(c echo.Context, status int, enc otlp.Encoding, code int32, msg string) error {
	return otlpAnswer(c, status, enc, otlp.Status(enc, code, msg))
}

// otlpIngest serves one signal's path. The order of the checks is the other
// doors' (docs/otlp.md, "Order of the checks"): body size 413 (as sent, then
// decompressed) → token 401 → a browser key or an Origin 403 → rate limit
// 429 → media type 415 → decode 400 → the daily event budget 429. Every
// refusal of the whole request is a google.rpc.Status in the request's
// encoding, as OTLP/HTTP prescribes; refusals of single exceptions are
// counted in partial_success.
func (s *Server) otlpIngest(sig otlp.Signal, lim *feedLimiter) echo.HandlerFunc {
	maxBody := s.opts.FeedMaxEnvelope
	if maxBody <= 0 {
		maxBody = 1 << 20
	}
	return func(c echo.Context) error {
		req := c.Request()
		// The encoding is read first only to answer in it; a type that is
		// neither is refused after the token, so a bad token learns nothing.
		enc, typeErr := otlp.ParseContentType(req.Header.Get(echo.HeaderContentType))
		raw, ok := readBounded(req, s.opts.FeedMaxBody)
		if !ok {
			return otlpStatus(c, http.StatusRequestEntityTooLarge, enc, otlp.CodeInvalidArgument, fmt.Sprintf(
				"%s: the request body is above %d bytes as sent; export smaller batches", event.PayloadTooLarge, s.opts.FeedMaxBody))
		}
		body, tooBig, decodeErr := inflate(req.Header.Get(echo.HeaderContentEncoding), raw, maxBody)
		if tooBig {
			return otlpStatus(c, http.StatusRequestEntityTooLarge, enc, otlp.CodeInvalidArgument, fmt.Sprintf(
				"%s: the request body is above %d bytes decompressed; export smaller batches", event.PayloadTooLarge, maxBody))
		}
		snd, err := s.Feed.Authenticate(req.Context(), bearerToken(req))
		if errors.Is(err, domain.ErrUnauthorized) {
			// One answer for every token that does not resolve (missing,
			// malformed, unknown, revoked), as at the other doors.
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="anvil-otlp"`)
			return otlpStatus(c, http.StatusUnauthorized, enc, otlp.CodeUnauthenticated,
				"unauthorized: send a feed server connection's token as Authorization: Bearer anv_srv_…")
		}
		if err != nil {
			s.log.Warn("otlp: token lookup failed", "request_id", c.Get(requestIDKey), "error", err.Error())
			return otlpUnavailable(c, enc)
		}
		if refused, err := s.otlpOriginGate(c, snd, enc); refused {
			return err
		}
		if !lim.allow(snd.ConnectionID) {
			c.Response().Header().Set("Retry-After", "60")
			return otlpStatus(c, http.StatusTooManyRequests, enc, otlp.CodeResourceExhausted, fmt.Sprintf(
				"rate_limited: more than %d requests from this connection within a minute; retry after 60 seconds", lim.perWindow))
		}
		if typeErr != nil {
			return otlpStatus(c, http.StatusUnsupportedMediaType, enc, otlp.CodeInvalidArgument, "bad_request: "+typeErr.Error())
		}
		if decodeErr != nil {
			return otlpStatus(c, http.StatusBadRequest, enc, otlp.CodeInvalidArgument, "bad_request: "+decodeErr.Error())
		}
		// The translation stops at the batch bound (docs/otlp.md, "Bounds"):
		// the exceptions past it are counted, never made into events.
		d := otlp.Defaults{ConnectionName: snd.ConnectionName, Now: time.Now(), MaxItems: s.opts.FeedMaxBatch}
		var batch otlp.Batch
		if sig == otlp.Logs {
			r, err := otlp.DecodeLogs(enc, body)
			if err != nil {
				return otlpStatus(c, http.StatusBadRequest, enc, otlp.CodeInvalidArgument, "bad_request: "+err.Error())
			}
			batch = otlp.TranslateLogs(r, d)
		} else {
			r, err := otlp.DecodeTraces(enc, body)
			if err != nil {
				return otlpStatus(c, http.StatusBadRequest, enc, otlp.CodeInvalidArgument, "bad_request: "+err.Error())
			}
			batch = otlp.TranslateTraces(r, d)
		}
		s.metrics.otlpItems(sig.String(), len(batch.Items), batch.Dropped)
		if len(batch.Items) == 0 && len(batch.Beyond) == 0 {
			// Spans and logs without an exception: read, counted, dropped.
			return otlpAnswer(c, http.StatusOK, enc, otlp.Response(sig, enc, nil))
		}
		return s.otlpStore(c, snd, sig, enc, batch)
	}
}

// otlpStore hands a request's exceptions to Feed.Ingest within the batch
// bound and the daily budget, and answers with partial_success naming
// every refusal's reason.
func (s *Server) otlpStore(c echo.Context, snd *feed.FeedSender, sig otlp.Signal, enc otlp.Encoding, batch otlp.Batch) error {
	req := c.Request()
	items := batch.Items
	var refused []otlp.Refusal
	var early []event.Rejection
	if len(batch.Beyond) > 0 {
		// Beyond the feed's batch bound an exception is refused, not the
		// request: an exporter does not split a batch it was told is bad.
		// The translation stopped there, so those exceptions have no event
		// and no id: each is counted by its span or record.
		msg := fmt.Sprintf("the request holds more than %d exceptions; at most %d are taken from one request; export smaller batches",
			s.opts.FeedMaxBatch, s.opts.FeedMaxBatch)
		for _, unit := range batch.Beyond {
			refused = append(refused, otlp.Refusal{Unit: unit, ReasonCode: event.PayloadTooLarge, Message: msg})
			early = append(early, event.Rejection{ReasonCode: event.PayloadTooLarge, Message: msg})
		}
	}
	if len(items) == 0 {
		s.recordOutcome(snd, feed.IngestResult{Rejected: early})
		return otlpAnswer(c, http.StatusOK, enc, otlp.Response(sig, enc, refused))
	}
	if rf := s.retention.Budget().Admit(req.Context(), snd.OrgID, snd.ProjectID, len(items)); rf != nil {
		secs := strconv.FormatInt(int64(rf.RetryAfter/time.Second), 10)
		c.Response().Header().Set("Retry-After", secs)
		s.recordRefusal(snd, "daily_event_budget", rf.Error())
		return otlpStatus(c, http.StatusTooManyRequests, enc, otlp.CodeResourceExhausted, "daily_event_budget: "+rf.Error())
	}
	raws := make([]json.RawMessage, len(items))
	unitOf := make(map[string]int, len(items))
	for i, it := range items {
		raws[i] = it.Raw
		unitOf[it.EventID] = it.Unit
	}
	res, err := s.Feed.Ingest(req.Context(), snd, s.clientAddr(req), raws)
	res.Rejected = append(res.Rejected, early...)
	s.recordOutcome(snd, res)
	if err != nil {
		s.log.Warn("otlp: store failed; answering 503", "request_id", c.Get(requestIDKey), "project_id", snd.ProjectID, "error", err.Error())
		return otlpUnavailable(c, enc)
	}
	for _, r := range res.Rejected[:len(res.Rejected)-len(early)] {
		unit := -1
		if r.EventID != nil {
			if u, ok := unitOf[*r.EventID]; ok {
				unit = u
			}
		}
		refused = append(refused, otlp.Refusal{Unit: unit, ReasonCode: r.ReasonCode, Message: r.Message})
	}
	return otlpAnswer(c, http.StatusOK, enc, otlp.Response(sig, enc, refused))
}

// otlpOriginGate refuses what a server door never takes: a browser key
// (anv_pub_ — OTLP exporters run in servers, and a key in a page is public),
// and a server token sent with an Origin header (it is in a browser, so it
// leaked). Both are counted, so that the Feed page shows them.
func (s *Server) otlpOriginGate(c echo.Context, snd *feed.FeedSender, enc otlp.Encoding) (bool, error) {
	if snd.Browser {
		msg := "a browser key (anv_pub_) cannot send OTLP: the OpenTelemetry door takes a server connection's token (anv_srv_)"
		s.recordRefusal(snd, "browser_key_refused", msg)
		return true, otlpStatus(c, http.StatusForbidden, enc, otlp.CodePermissionDenied, "browser_key_refused: "+msg)
	}
	if _, has := requestOrigin(c.Request()); has {
		msg := "a server token was sent with an Origin header, so it is in a browser; revoke this connection and issue a new token for a server process"
		s.recordRefusal(snd, "origin_refused", msg)
		return true, otlpStatus(c, http.StatusForbidden, enc, otlp.CodePermissionDenied, "origin_refused: "+msg)
	}
	return false, nil
}

// otlpUnavailable is the 503 of a transient failure; OTLP exporters retry
// it after Retry-After.
func otlpUnavailable(c echo.Context, enc otlp.Encoding) error {
	c.Response().Header().Set("Retry-After", "30")
	return otlpStatus(c, http.StatusServiceUnavailable, enc, otlp.CodeUnavailable, "internal_error: a transient store failure; retry after 30 seconds")
}
