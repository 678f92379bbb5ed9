package web

import "github.com/labstack/echo/v4"

// registerWebhooks adds the webhook routes: the public delivery endpoint,
// the private API and the settings page.
//
// The public route sits on e itself, outside the session and CSRF
// middleware: forges send no cookies, and the request authenticates itself
// with the webhook's signature.
func (s *Server) registerWebhooks(e *echo.Echo, pages, api *echo.Group) {
	e.POST("/api/public/webhooks/:projectId/:provider", s.webhookDeliver)

	api.GET("/projects/:projectId/webhooks", s.apiWebhookList)
	api.PUT("/projects/:projectId/webhooks/:provider", s.apiWebhookPut)
	api.DELETE("/projects/:projectId/webhooks/:provider", s.apiWebhookDelete)
	api.POST("/projects/:projectId/webhooks/:provider/rotate-secret", s.apiWebhookRotate)
	api.GET("/projects/:projectId/webhooks/:provider/deliveries", s.apiWebhookDeliveries)
	api.POST("/projects/:projectId/webhooks/:provider/deliveries/:deliveryId/redeliver", s.apiWebhookRedeliver)

	pages.GET("/projects/:projectId/webhooks", s.webhooksPage)
	pages.GET("/projects/:projectId/webhooks/deliveries-fragment", s.webhookDeliveriesFragment)
	pages.POST("/projects/:projectId/webhooks/:provider", s.webhookCreateSubmit)
	pages.POST("/projects/:projectId/webhooks/:provider/enabled", s.webhookEnabledSubmit)
	pages.POST("/projects/:projectId/webhooks/:provider/rotate", s.webhookRotateSubmit)
	pages.POST("/projects/:projectId/webhooks/:provider/delete", s.webhookDeleteSubmit)
	pages.POST("/projects/:projectId/webhooks/:provider/deliveries/:deliveryId/redeliver", s.webhookRedeliverSubmit)
}

// webhookURL is what a person pastes into the forge.
func (s *Server) webhookURL(projectID, provider string) string {
	return s.opts.PublicURL + "/api/public/webhooks/" + projectID + "/" + provider
}
