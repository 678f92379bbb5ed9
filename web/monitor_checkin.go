package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain/event"
	"anvil/domain/feed"
	"anvil/domain/monitor"
)

// sentryCheckIns records an envelope's check_in items (docs/monitors.md,
// "From the Sentry SDKs") on the key's project, item by item: a refused
// item — any from a browser key, any past the envelope's bound, one that
// cannot be read, made or is over the monitor's rate — is counted in the
// connection's outcomes with its reason, and the envelope goes on to its
// other items and its events. It answers only a transient failure (503);
// otherwise it returns the refusals, and the door answers the first of
// them when the envelope holds no event.
func (s *Server) sentryCheckIns(c echo.Context, snd *feed.FeedSender, items [][]byte) ([]monitor.ItemRefusal, bool, error) {
	refused, err := s.Monitors.CheckInItems(c.Request().Context(), monitor.Sender{ProjectID: snd.ProjectID,
		Conn: monitor.Connection{ID: snd.ConnectionID, Name: snd.ConnectionName}, Browser: snd.Browser}, items)
	if len(refused) > 0 && s.outcomes != nil {
		rej := make([]event.Rejection, len(refused))
		for i, r := range refused {
			rej[i] = event.Rejection{ReasonCode: r.Code, Message: r.Message}
		}
		s.outcomes.Record(snd.ConnectionID, 0, rej)
	}
	for _, r := range refused {
		if r.RateLimited {
			h := c.Response().Header()
			h.Set("Retry-After", "60")
			h.Set("X-Sentry-Rate-Limits", "60:monitor:key:monitor_rate_limit")
			break
		}
	}
	if err != nil {
		s.log.Warn("sentry: check-in failed; answering 503", "request_id", c.Get(requestIDKey), "project_id", snd.ProjectID, "error", err.Error())
		return refused, true, sentryUnavailable(c)
	}
	return refused, false, nil
}

// checkInRefusal is the answer to an envelope of check-ins only whose
// first refused item is r: 429 for the rate limit, else 400.
func checkInRefusal(c echo.Context, r monitor.ItemRefusal) error {
	status := http.StatusBadRequest
	if r.RateLimited {
		status = http.StatusTooManyRequests
	}
	return c.JSON(status, sentryDetail{Detail: r.Code + ": " + r.Message})
}
