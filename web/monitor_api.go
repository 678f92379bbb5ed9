package web

import (
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain/monitor"
)

// monitorRuns is how many runs each monitor of a list carries (the strip).
const monitorRuns = 30

func (s *Server) apiMonitorList(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	ms, err := s.Monitors.List(c.Request().Context(), principal(c), id, monitorRuns)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"monitors": ms})
}

func (s *Server) apiMonitorCreate(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in monitor.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	m, err := s.Monitors.Create(c.Request().Context(), principal(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, m)
}

func (s *Server) apiMonitorGet(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	m, err := s.Monitors.Get(ctx, principal(c), id, c.Param("slug"))
	if err != nil {
		return err
	}
	if m.Runs, err = s.Monitors.Runs(ctx, m.ID, 100); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

func (s *Server) apiMonitorUpdate(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in monitor.Input
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	m, err := s.Monitors.Update(c.Request().Context(), principal(c), id, c.Param("slug"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

func (s *Server) apiMonitorDelete(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	if err := s.Monitors.Delete(c.Request().Context(), principal(c), id, c.Param("slug")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// apiMonitorRotate revokes the ping key and answers the new ping URL once.
func (s *Server) apiMonitorRotate(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	m, err := s.Monitors.RotatePingKey(c.Request().Context(), principal(c), id, c.Param("slug"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

func (s *Server) apiMonitorRevoke(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	if err := s.Monitors.RevokePingKey(c.Request().Context(), principal(c), id, c.Param("slug")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// maxPingBody bounds what a ping's body may be; its first
// monitor.MaxOutput bytes are kept.
const maxPingBody = 1 << 20

// monitorPing serves a ping URL, Healthchecks.io style: GET, HEAD or POST
// on …/<key>/<slug> (ok), …/start, …/fail or …/<exit code>. It answers
// "OK" as plain text; an unknown or revoked key, a key of another slug and
// an unknown kind are the same 404.
func (s *Server) monitorPing(c echo.Context) error {
	req := c.Request()
	var body []byte
	if req.Method == http.MethodPost {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxPingBody+1))
		if err != nil {
			return c.String(http.StatusBadRequest, "the body could not be read\n")
		}
		if len(b) > maxPingBody {
			return c.String(http.StatusRequestEntityTooLarge, "the body is above 1 MiB; the first 10 KB are kept as output\n")
		}
		body = b
	}
	_, err := s.Monitors.Ping(req.Context(), c.Param("pingKey"), c.Param("slug"), c.Param("kind"), body)
	switch {
	case err == nil:
		return c.String(http.StatusOK, "OK\n")
	case monitor.IsRateLimited(err):
		c.Response().Header().Set("Retry-After", "60")
		return c.String(http.StatusTooManyRequests, "rate limited: at most 6 check-ins of a monitor a minute\n")
	}
	st, _, msg := classify(err)
	if st >= 500 {
		s.log.Warn("monitor ping failed", "request_id", c.Get(requestIDKey), "error", err.Error())
		return c.String(st, "unavailable; retry\n")
	}
	return c.String(st, msg+"\n")
}
