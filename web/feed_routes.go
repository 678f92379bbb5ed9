package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// feedNotFound answers every feed path that is not an endpoint.
func feedNotFound(c echo.Context) error {
	return c.JSON(http.StatusNotFound, apiError{Error: "not_found", Message: "not found"})
}

// registerFeed adds the feed routes: the public ingest (only when armed),
// connections and bindings in the private API and the cockpit page.
//
// The ingest is registered on e itself, outside the session and CSRF
// middleware: its only credential is the server token. When the feed is not
// armed the two endpoints are not registered at all, and every /api/feed
// path is a plain 404 — the truth about such an installation. The explicit
// catch-all is needed because the pages group's middleware would otherwise
// claim unmatched paths (a login redirect, or a 401 for a bearer token).
func (s *Server) registerFeed(e *echo.Echo, pages, api *echo.Group) {
	e.Any("/api/feed", feedNotFound)
	e.Any("/api/feed/*", feedNotFound)
	var lim *feedLimiter
	if s.opts.FeedArmed {
		lim = newFeedLimiter(s.opts.FeedRatePerMin)
		e.POST("/api/feed/events", s.feedIngest(true, lim))
		e.POST("/api/feed/events/batch", s.feedIngest(false, lim))
		// Browser keys: CORS preflights on the doors only.
		s.addrLim = newAddrLimiter(s.opts.FeedBrowserRatePerMin)
		e.OPTIONS("/api/feed/events", doorPreflight)
		e.OPTIONS("/api/feed/events/batch", doorPreflight)
	}
	s.startOutcomes()
	s.registerSentry(e, lim)
	s.registerOTLP(e, lim)

	api.POST("/projects/:projectId/connections", s.apiConnectionCreate)
	api.GET("/projects/:projectId/connections", s.apiConnectionList)
	api.DELETE("/connections/:connectionId", s.apiConnectionRevoke)
	api.PATCH("/projects/:projectId/connections/:connectionId", s.apiConnectionPatch)
	api.GET("/projects/:projectId/bindings", s.apiBindingList)
	api.PUT("/projects/:projectId/bindings/:environment", s.apiBindingPut)
	api.DELETE("/projects/:projectId/bindings/:environment", s.apiBindingDelete)

	pages.GET("/projects/:projectId/feed", s.feedPage)
	pages.POST("/projects/:projectId/feed/connections", s.feedConnectionCreateSubmit)
	pages.POST("/projects/:projectId/feed/connections/:connectionId/revoke", s.feedConnectionRevokeSubmit)
	pages.POST("/projects/:projectId/feed/connections/:connectionId/origins", s.feedConnectionOriginsSubmit)
	pages.POST("/projects/:projectId/feed/bindings", s.feedBindingSubmit)
	pages.POST("/projects/:projectId/feed/bindings/delete", s.feedBindingDeleteSubmit)
	pages.POST("/projects/:projectId/feed/card", s.feedCardSubmit)
}
