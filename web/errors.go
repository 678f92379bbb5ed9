package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/db"
	"anvil/domain"
	"anvil/domain/monitor"
	"anvil/domain/sourcemap"
	"anvil/views"
)

// apiError is the JSON shape of every refusal of the API.
type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// classify maps an error onto a status, a code and a message fit for clients.
func classify(err error) (int, string, string) {
	var de *domain.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &de):
		return statusOf(de.Kind), de.Code, de.Message
	case errors.Is(err, domain.ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized", "authentication required"
	case errors.Is(err, domain.ErrNotFound):
		return http.StatusNotFound, "not_found", "not found"
	case errors.Is(err, domain.ErrForbidden):
		return http.StatusForbidden, "forbidden", "forbidden"
	case errors.Is(err, domain.ErrQueueFull):
		return http.StatusConflict, "project_queue_full", "the project's queue is full (20 queued runs); wait for runs to finish or cancel some"
	case db.IsTransient(err):
		return http.StatusServiceUnavailable, "unavailable", "the database is unavailable for a moment; try again in a few seconds"
	case errors.As(err, &he):
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok && he.Code < 500 {
			msg = m
		}
		return he.Code, codeFor(he.Code), msg
	}
	return http.StatusInternalServerError, "internal_error", "something went wrong on our side; it has been logged"
}

func statusOf(kind error) int {
	switch kind {
	case domain.ErrNotFound: //nolint:errorlint // kind is a bare sentinel (domain.Error.Kind), never wrapped
		return http.StatusNotFound
	case domain.ErrInvalid:
		return http.StatusUnprocessableEntity
	case domain.ErrConflict, domain.ErrQueueFull:
		return http.StatusConflict
	case domain.ErrForbidden:
		return http.StatusForbidden
	case domain.ErrUnauthorized:
		return http.StatusUnauthorized
	case errBadRequest:
		return http.StatusBadRequest
	case domain.ErrWebhookQueueFull:
		return http.StatusServiceUnavailable
	case monitor.ErrRate:
		return http.StatusTooManyRequests
	case sourcemap.ErrTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

func codeFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		return "payload_too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	}
	if status >= 500 {
		return "internal_error"
	}
	return strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
}

// retryAfterUnavailable is the Retry-After (seconds) of a 503 answered
// because the database was unavailable.
const retryAfterUnavailable = 5

// statusClientClosed is nginx's "client closed request".
const statusClientClosed = 499

// clientGone reports whether err only says that the request's own client
// went away (its context was canceled).
func clientGone(c echo.Context, err error) bool {
	return errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil
}

// handleError is the one place errors become responses: JSON for the API,
// an error page (or a small fragment for htmx) for people. 5xx are logged
// with the cause; clients never see raw error text or a stack.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if clientGone(c, err) {
		// A closed tab or a page left mid-request: nobody is waiting for an
		// answer and nothing is wrong, so it is no error. nginx's 499 marks it
		// in the request log and the metrics.
		s.log.Debug("client went away", "request_id", c.Get(requestIDKey), "route", routeOf(c))
		c.Response().WriteHeader(statusClientClosed)
		return
	}
	status, code, msg := classify(err)
	c.Set("error", err)
	if code == "unavailable" {
		// A restart or a cut connection: the same request succeeds shortly.
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterUnavailable))
		s.log.Warn("database unavailable; answering 503", "request_id", c.Get(requestIDKey), "route", routeOf(c), "error", err.Error())
	} else if status >= 500 {
		s.log.Error("request failed", "request_id", c.Get(requestIDKey), "route", routeOf(c), "error", err.Error())
	}
	path := c.Request().URL.Path
	if strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/healthz") || strings.HasPrefix(path, "/readyz") {
		if status == http.StatusUnauthorized {
			msg = "a valid Bearer token or session is required"
		}
		_ = c.JSON(status, apiError{Error: code, Message: msg})
		return
	}
	if isHTMX(c) {
		_ = c.HTML(status, `<div class="rounded-md bg-rose-50 px-3 py-2 text-sm text-rose-700" role="alert" data-testid="htmx-error">`+templEscape(msg)+`</div>`)
		return
	}
	heading := http.StatusText(status)
	if status == http.StatusNotFound {
		msg = "There is nothing at this address."
		heading = "Page not found"
	}
	_ = Render(c, status, views.ErrorPage(views.ErrorProps{Page: s.page(c, heading, ""), Status: status, Heading: heading, Message: msg}))
}
