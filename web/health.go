package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/db"
)

// healthz answers while the process is alive.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when the database answers and its schema is current.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Pool.Ping(ctx); err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "database unreachable"})
	}
	ok, err := db.Current(ctx, s.db)
	if err != nil || !ok {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": "migrations pending"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
