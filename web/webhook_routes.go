package web

import "github.com/labstack/echo/v4"

// registerWebhooks adds the webhook routes: the public delivery endpoint,
// the private API and the settings page.
func (s *Server) registerWebhooks(e *echo.Echo, pages, api *echo.Group) {}
