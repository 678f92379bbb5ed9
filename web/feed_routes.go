package web

import "github.com/labstack/echo/v4"

// registerFeed adds the feed routes: the public ingest (only when armed),
// connections and bindings in the private API and the settings page.
func (s *Server) registerFeed(e *echo.Echo, pages, api *echo.Group) {}
