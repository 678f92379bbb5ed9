package web

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/feed"
	"anvil/domain/monitor"
)

// sentryCheckIns records an envelope's check_in items (docs/monitors.md,
// "From the Sentry SDKs") on the key's project. It answers only when it
// refuses — 429 with the monitor category in X-Sentry-Rate-Limits, as
// Sentry limits check-ins; 400 for an item it cannot read or a monitor it
// cannot make —, so an envelope that also holds events goes on to them.
func (s *Server) sentryCheckIns(c echo.Context, snd *feed.FeedSender, items [][]byte) error {
	ctx := c.Request().Context()
	for _, p := range items {
		in, err := monitor.ParseCheckIn(p)
		if err != nil {
			return c.JSON(http.StatusBadRequest, sentryDetail{Detail: "bad_request: " + err.Error()})
		}
		_, err = s.Monitors.CheckIn(ctx, snd.ProjectID, in)
		var de *domain.Error
		switch {
		case err == nil:
		case monitor.IsRateLimited(err):
			h := c.Response().Header()
			h.Set("Retry-After", "60")
			h.Set("X-Sentry-Rate-Limits", "60:monitor:key:monitor_rate_limit")
			return c.JSON(http.StatusTooManyRequests, sentryDetail{Detail: "rate_limited: " + err.Error()})
		case errors.Is(err, domain.ErrNotFound):
			return c.JSON(http.StatusBadRequest, sentryDetail{Detail: fmt.Sprintf(
				"monitor_not_found: no monitor %q in this project; send a monitor_config to create it", in.Slug)})
		case errors.As(err, &de) && de.Kind != nil && !errors.Is(err, domain.ErrConflict):
			return c.JSON(http.StatusBadRequest, sentryDetail{Detail: de.Code + ": " + de.Message})
		default:
			s.log.Warn("sentry: check-in failed; answering 503", "request_id", c.Get(requestIDKey), "project_id", snd.ProjectID, "error", err.Error())
			return sentryUnavailable(c)
		}
	}
	return nil
}
