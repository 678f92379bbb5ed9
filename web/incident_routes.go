package web

import "github.com/labstack/echo/v4"

// registerIncidents adds the inbox, the incident pages, the incident and
// card API and the public dashboard ingest. The ingest is registered on e
// itself, outside the session and CSRF middleware: its only credential is
// the dashboard config's token.
func (s *Server) registerIncidents(e *echo.Echo, pages, api *echo.Group) {
	pages.GET("/incidents/:incidentId", s.incidentPage)
	pages.POST("/incidents/:incidentId/decisions", s.incidentDecisionSubmit)
	pages.POST("/inbox/bulk", s.inboxBulkSubmit)

	api.GET("/incidents", s.apiIncidentList)
	api.GET("/incidents/:incidentId", s.apiIncidentGet)
	api.POST("/incidents/:incidentId/decisions", s.apiIncidentDecision)
	api.GET("/projects/:projectId/card", s.apiCardGet)
	api.PUT("/projects/:projectId/dashboard", s.apiDashboardPut)

	e.PUT("/api/ingest/dashboard/:tenant/:config/incidents", s.dashboardIngest)
}
