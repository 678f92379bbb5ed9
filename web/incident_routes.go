package web

import "github.com/labstack/echo/v4"

// registerIncidents adds the inbox, the incident pages and the incident
// API.
func (s *Server) registerIncidents(_ *echo.Echo, pages, api *echo.Group) {
	pages.GET("/inbox", s.inbox)
	pages.GET("/incidents/:incidentId", s.incidentPage)
	pages.POST("/incidents/:incidentId/decisions", s.incidentDecisionSubmit)
	pages.POST("/incidents/:incidentId/reprocess", s.incidentReprocess)
	pages.POST("/incidents/:incidentId/fix", s.incidentFixSubmit)
	pages.GET("/incidents/:incidentId/events/:eventId", s.incidentEventPage)
	pages.POST("/inbox/bulk", s.inboxBulkSubmit)

	api.GET("/incidents", s.apiIncidentList)
	api.GET("/incidents/:incidentId", s.apiIncidentGet)
	api.POST("/incidents/:incidentId/decisions", s.apiIncidentDecision)
	api.POST("/incidents/:incidentId/fix", s.apiIncidentFix)
	api.GET("/incidents/:incidentId/events", s.apiIncidentEvents)
	api.GET("/incidents/:incidentId/events/:eventId", s.apiIncidentEvent)
	api.GET("/incidents/:incidentId/spread", s.apiIncidentSpread)
}

// registerCards adds the card API and the public dashboard ingest. The
// ingest is registered on e itself, outside the session and CSRF
// middleware: its only credential is the dashboard config's token.
func (s *Server) registerCards(e *echo.Echo, _, api *echo.Group) {
	api.GET("/projects/:projectId/card", s.apiCardGet)
	api.PUT("/projects/:projectId/dashboard", s.apiDashboardPut)

	e.PUT("/api/ingest/dashboard/:tenant/:config/incidents", s.dashboardIngest)
}
