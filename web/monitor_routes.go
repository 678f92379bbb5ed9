package web

import "github.com/labstack/echo/v4"

// registerMonitors adds the cron monitors' pages, their API and the public
// ping URLs (docs/monitors.md). The ping URLs go on e itself: their only
// credential is the ping key in the path, so a crontab line needs nothing
// but curl.
func (s *Server) registerMonitors(e *echo.Echo, pages, api *echo.Group) {
	pages.GET("/projects/:projectId/monitors", s.monitorsPage)
	pages.POST("/projects/:projectId/monitors", s.monitorCreateSubmit)
	pages.GET("/projects/:projectId/monitors/:slug", s.monitorPage)
	pages.POST("/projects/:projectId/monitors/:slug/pause", s.monitorPauseSubmit)
	pages.POST("/projects/:projectId/monitors/:slug/edit", s.monitorEditSubmit)
	pages.POST("/projects/:projectId/monitors/:slug/rotate", s.monitorRotateSubmit)
	pages.POST("/projects/:projectId/monitors/:slug/delete", s.monitorDeleteSubmit)

	api.GET("/projects/:projectId/monitors", s.apiMonitorList)
	api.POST("/projects/:projectId/monitors", s.apiMonitorCreate)
	api.GET("/projects/:projectId/monitors/:slug", s.apiMonitorGet)
	api.PATCH("/projects/:projectId/monitors/:slug", s.apiMonitorUpdate)
	api.DELETE("/projects/:projectId/monitors/:slug", s.apiMonitorDelete)
	api.POST("/projects/:projectId/monitors/:slug/ping-key", s.apiMonitorRotate)
	api.DELETE("/projects/:projectId/monitors/:slug/ping-key", s.apiMonitorRevoke)

	for _, p := range []string{"/api/monitors/:pingKey/:slug", "/api/monitors/:pingKey/:slug/:kind"} {
		e.GET(p, s.monitorPing)
		e.HEAD(p, s.monitorPing)
		e.POST(p, s.monitorPing)
	}
}
