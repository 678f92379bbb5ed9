package web

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

const requestIDKey = "request_id"

// requestID gives every request an id (a sane incoming X-Request-Id is kept)
// and logs it once, as JSON through slog, when the request ends.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if len(id) == 0 || len(id) > 64 || !printableASCII(id) {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		c.Set(requestIDKey, id)
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		level := s.opts.RequestLogLevel
		switch {
		case status == statusClientClosed:
		case status >= 500 && status != http.StatusServiceUnavailable: // a 503 is a deliberate answer, logged where it is made
			level = slog.LevelError
		case status >= 400:
			level = slog.LevelWarn
		}
		if c.Path() == "/healthz" || c.Path() == "/readyz" || c.Path() == "/metrics" {
			level = slog.LevelDebug
		}
		attrs := []slog.Attr{
			slog.String("request_id", id),
			slog.String("method", c.Request().Method),
			slog.String("route", routeOf(c)),
			slog.String("path", loggedPath(c)), // never the query: it may carry secrets
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)),
		}
		if e, ok := c.Get("error").(error); ok && status >= 500 {
			attrs = append(attrs, slog.String("error", e.Error()))
		}
		s.log.LogAttrs(c.Request().Context(), level, "http request", attrs...)
		return nil
	}
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func routeOf(c echo.Context) string {
	p := c.Path()
	if p == "" || p == "/*" {
		return "unmatched"
	}
	return p
}

// recover turns a panic into a 500 and logs its stack.
func (s *Server) recover(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler { //nolint:errorlint // a recover() value, compared as net/http compares it
					panic(r)
				}
				s.log.Error("panic", "request_id", c.Get(requestIDKey), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// securityHeaders sets the headers every response carries.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "strict-origin-when-cross-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if s.opts.SecureCookies {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		return next(c)
	}
}

// observe records the request in the Prometheus metrics.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Set("error", err)
			c.Error(err)
		}
		route := routeOf(c)
		status := strconv.Itoa(c.Response().Status)
		s.metrics.requests.WithLabelValues(c.Request().Method, route, status).Inc()
		s.metrics.latency.WithLabelValues(c.Request().Method, route).Observe(time.Since(start).Seconds())
		return nil
	}
}

// loggedPath is the path to log: the route instead for paths that carry a
// secret — a one-time token (/invite/:token, /reset/:token), a monitor's
// ping key (/api/monitors/:pingKey/…) — and, on any other path, every
// anvil key spelled in it cut to its prefix ("anv_png_…"): a ping URL sent
// to a wrong path is as secret as one sent to the right one
// (docs/monitors.md, "Ping URLs").
func loggedPath(c echo.Context) string {
	for _, name := range c.ParamNames() {
		if secretParams[name] {
			return routeOf(c)
		}
	}
	return tokenInPath.ReplaceAllString(c.Request().URL.Path, "${1}…")
}

// secretParams are the path parameters that carry a secret.
var secretParams = map[string]bool{"token": true, "pingKey": true}

// tokenInPath is an anvil key (anv_xxx_ and its secret) in a path.
var tokenInPath = regexp.MustCompile(`(anv_[a-z]{3}_)[0-9A-Za-z]+`)

// DefaultBodyTimeout is how long a request body may take to arrive when
// Options.BodyTimeout is not set.
const DefaultBodyTimeout = 30 * time.Second

// bodyDeadline bounds the time a request's body may take to arrive. The
// server's ReadHeaderTimeout covers only the headers, so a sender announcing
// 1,000 bytes and trickling one every few seconds would hold a connection and
// a handler for ever. Once the body has been read the deadline is lifted: the
// server then reads in the background only to notice a client that goes
// away, and a deadline there would cancel a slow handler's request. Requests
// without a body — the live streams among them — get no deadline at all.
func (s *Server) bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	limit := s.opts.BodyTimeout
	if limit <= 0 {
		limit = DefaultBodyTimeout
	}
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
			return next(c)
		}
		rc := http.NewResponseController(c.Response())
		if err := rc.SetReadDeadline(time.Now().Add(limit)); err != nil {
			return next(c) // not a connection of net/http's server
		}
		req.Body = &deadlineBody{ReadCloser: req.Body, rc: rc}
		return next(c)
	}
}

// deadlineBody lifts the read deadline when the body has been read in full.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
