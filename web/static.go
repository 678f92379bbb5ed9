package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/static"
)

// staticFiles serves /static/<file>: the embedded files and nothing else. A
// directory (/static/ itself) is the cockpit's own 404, never a listing of the
// assets; static.Handler refuses it too, so the listing
// cannot come back by another route to the handler.
func staticFiles() echo.HandlerFunc {
	files := http.StripPrefix("/static/", static.Handler(http.NotFoundHandler()))
	return func(c echo.Context) error {
		if !static.IsFile(c.Param("*")) {
			return echo.ErrNotFound
		}
		files.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}
