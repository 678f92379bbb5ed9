package web

import "github.com/labstack/echo/v4"

// registerAlerts adds the alert destinations, rules and delivery log, and
// the settings page /settings/alerts.
func (s *Server) registerAlerts(_ *echo.Echo, pages, api *echo.Group) {
	pages.GET("/settings/alerts", s.alertsPage)
	pages.POST("/settings/alerts", s.alertCreateSubmit)
	pages.POST("/settings/alerts/:destinationId/test", s.alertTestSubmit)
	pages.POST("/settings/alerts/:destinationId/delete", s.alertDeleteSubmit)

	api.GET("/alerts/destinations", s.apiAlertDestinations)
	api.POST("/alerts/destinations", s.apiAlertDestinationCreate)
	api.GET("/alerts/destinations/:destinationId", s.apiAlertDestinationGet)
	api.PATCH("/alerts/destinations/:destinationId", s.apiAlertDestinationUpdate)
	api.DELETE("/alerts/destinations/:destinationId", s.apiAlertDestinationDelete)
	api.POST("/alerts/destinations/:destinationId/test", s.apiAlertDestinationTest)
	api.GET("/alerts/destinations/:destinationId/deliveries", s.apiAlertDeliveries)
	api.GET("/projects/:projectId/alert-rules", s.apiAlertRules)
	api.PUT("/projects/:projectId/alert-rules", s.apiAlertRulesPut)
}
