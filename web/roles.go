package web

import (
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
)

// routeRoles is the least role each write route of the pages and the private
// API needs. The domain checks the same rules per action; this table refuses
// a request before its body is even read, so that every write answers a role
// it lacks with the same 403, and TestEveryWriteRouteChecksTheRole walks it.
// A write route missing here needs an admin (the safe default) and fails
// that test until it is listed.
var routeRoles = map[string]string{
	// the loop from the pages (docs/releases.md): a fix recorded by hand, a
	// release declared, an incident's events mapped again (docs/sourcemap.md)
	"POST /incidents/:incidentId/fix":             domain.RoleMember,
	"POST /api/private/incidents/:incidentId/fix": domain.RoleMember,
	"POST /projects/:projectId/releases":          domain.RoleMember,
	"POST /incidents/:incidentId/reprocess":       domain.RoleMember,
	// a monitor's settings, as its PATCH in the API (docs/monitors.md)
	"POST /projects/:projectId/monitors/:slug/edit": domain.RoleMember,
	// source maps (docs/sourcemap.md): members upload
	"POST /api/private/projects/:projectId/sourcemaps": domain.RoleMember,
	// the worker's image store (docs/images.md): shared by every
	// organisation of the host, so an owner's
	"POST /settings/images/clear":    domain.RoleOwner,
	"POST /api/private/images/clear": domain.RoleOwner,
	// pages
	"POST /logout":                                         domain.RoleViewer,
	"POST /projects":                                       domain.RoleAdmin,
	"POST /projects/:projectId/edit":                       domain.RoleAdmin,
	"POST /projects/:projectId/runs":                       domain.RoleMember,
	"POST /runs/:runId/cancel":                             domain.RoleMember,
	"POST /runs/:runId/rerun":                              domain.RoleMember,
	"POST /projects/:projectId/secrets":                    domain.RoleAdmin,
	"POST /projects/:projectId/secrets/:name/delete":       domain.RoleAdmin,
	"POST /settings/tokens":                                domain.RoleViewer,
	"POST /settings/tokens/:tokenId/revoke":                domain.RoleViewer,
	"POST /projects/:projectId/webhooks/:provider":         domain.RoleAdmin,
	"POST /projects/:projectId/webhooks/:provider/enabled": domain.RoleAdmin,
	"POST /projects/:projectId/webhooks/:provider/rotate":  domain.RoleAdmin,
	"POST /projects/:projectId/webhooks/:provider/delete":  domain.RoleAdmin,
	// a member: a queue_full delivery; the domain asks an admin for others
	"POST /projects/:projectId/webhooks/:provider/deliveries/:deliveryId/redeliver": domain.RoleMember,
	// a member: whoever may run the project may make its next run start cold
	"POST /projects/:projectId/cache/clear":                            domain.RoleMember,
	"POST /projects/:projectId/feed/connections":                       domain.RoleAdmin,
	"POST /projects/:projectId/feed/connections/:connectionId/revoke":  domain.RoleAdmin,
	"POST /projects/:projectId/feed/connections/:connectionId/origins": domain.RoleAdmin,
	"POST /projects/:projectId/feed/bindings":                          domain.RoleAdmin,
	"POST /projects/:projectId/feed/bindings/delete":                   domain.RoleAdmin,
	"POST /projects/:projectId/feed/card":                              domain.RoleAdmin,
	"POST /incidents/:incidentId/decisions":                            domain.RoleMember,
	"POST /inbox/bulk":                                                 domain.RoleMember,
	"POST /settings/members/:userId/role":                              domain.RoleAdmin,
	"POST /settings/members/:userId/remove":                            domain.RoleAdmin,
	"POST /settings/members/leave":                                     domain.RoleViewer,
	"POST /settings/invitations":                                       domain.RoleAdmin,
	"POST /settings/invitations/:id/revoke":                            domain.RoleAdmin,
	"POST /settings/organization":                                      domain.RoleViewer,
	"POST /settings/organizations":                                     domain.RoleViewer,
	"POST /settings/account/name":                                      domain.RoleViewer,
	"POST /settings/account/password":                                  domain.RoleViewer,
	"POST /settings/account/sessions/:id/end":                          domain.RoleViewer,
	"POST /settings/account/sessions/end-others":                       domain.RoleViewer,
	"POST /invite/:token/join":                                         domain.RoleViewer,
	"POST /settings/alerts":                                            domain.RoleAdmin,
	"POST /settings/alerts/:destinationId/test":                        domain.RoleAdmin,
	"POST /settings/alerts/:destinationId/delete":                      domain.RoleAdmin,
	"POST /settings/retention":                                         domain.RoleAdmin,
	"POST /settings/retention/projects/:projectId":                     domain.RoleAdmin,
	"POST /projects/:projectId/delete":                                 domain.RoleAdmin,
	"POST /settings/organization/delete":                               domain.RoleOwner,
	"POST /projects/:projectId/monitors":                               domain.RoleAdmin,
	"POST /projects/:projectId/monitors/:slug/pause":                   domain.RoleMember,
	"POST /projects/:projectId/monitors/:slug/rotate":                  domain.RoleAdmin,
	"POST /projects/:projectId/monitors/:slug/delete":                  domain.RoleAdmin,
	// private API
	"POST /api/private/projects":                                                                domain.RoleAdmin,
	"PATCH /api/private/projects/:projectId":                                                    domain.RoleAdmin,
	"POST /api/private/projects/:projectId/runs":                                                domain.RoleMember,
	"POST /api/private/runs/:runId/cancel":                                                      domain.RoleMember,
	"POST /api/private/runs/:runId/rerun":                                                       domain.RoleMember,
	"PUT /api/private/projects/:projectId/secrets/:name":                                        domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/secrets/:name":                                     domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/webhooks/:provider":                                   domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/webhooks/:provider":                                domain.RoleAdmin,
	"POST /api/private/projects/:projectId/webhooks/:provider/rotate-secret":                    domain.RoleAdmin,
	"POST /api/private/projects/:projectId/webhooks/:provider/deliveries/:deliveryId/redeliver": domain.RoleMember,
	"DELETE /api/private/projects/:projectId/cache":                                             domain.RoleMember,
	"POST /api/private/projects/:projectId/connections":                                         domain.RoleAdmin,
	"DELETE /api/private/connections/:connectionId":                                             domain.RoleAdmin,
	"PATCH /api/private/projects/:projectId/connections/:connectionId":                          domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/bindings/:environment":                                domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/bindings/:environment":                             domain.RoleAdmin,
	"POST /api/private/incidents/:incidentId/decisions":                                         domain.RoleMember,
	"PUT /api/private/projects/:projectId/dashboard":                                            domain.RoleAdmin,
	"PATCH /api/private/members/:userId":                                                        domain.RoleAdmin,
	"DELETE /api/private/members/:userId":                                                       domain.RoleAdmin,
	"POST /api/private/invitations":                                                             domain.RoleAdmin,
	"DELETE /api/private/invitations/:id":                                                       domain.RoleAdmin,
	"POST /api/private/alerts/destinations":                                                     domain.RoleAdmin,
	"PATCH /api/private/alerts/destinations/:destinationId":                                     domain.RoleAdmin,
	"DELETE /api/private/alerts/destinations/:destinationId":                                    domain.RoleAdmin,
	"POST /api/private/alerts/destinations/:destinationId/test":                                 domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/alert-rules":                                          domain.RoleAdmin,
	"PUT /api/private/retention":                                                                domain.RoleAdmin,
	"PUT /api/private/projects/:projectId/retention":                                            domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId":                                                   domain.RoleAdmin,
	"POST /api/private/projects/:projectId/releases":                                            domain.RoleMember,
	"DELETE /api/private/orgs/:orgId":                                                           domain.RoleOwner,
	"POST /api/private/projects/:projectId/monitors":                                            domain.RoleAdmin,
	"PATCH /api/private/projects/:projectId/monitors/:slug":                                     domain.RoleMember, // pause; the domain asks an admin for the rest
	"DELETE /api/private/projects/:projectId/monitors/:slug":                                    domain.RoleAdmin,
	"POST /api/private/projects/:projectId/monitors/:slug/ping-key":                             domain.RoleAdmin,
	"DELETE /api/private/projects/:projectId/monitors/:slug/ping-key":                           domain.RoleAdmin,
}

// RouteRoles returns a copy of the table (for tests and documentation).
func RouteRoles() map[string]string {
	out := make(map[string]string, len(routeRoles))
	for k, v := range routeRoles {
		out[k] = v
	}
	return out
}

// requireRouteRole refuses a write whose route needs a higher role than the
// caller's (403 forbidden JSON on the API, an error page naming both roles
// on pages). Reads pass: what they show is organisation-scoped already.
func (s *Server) requireRouteRole(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := c.Request().Method
		p := principal(c)
		if safeMethod(m) || p == nil {
			return next(c)
		}
		need, ok := routeRoles[m+" "+c.Path()]
		if !ok && (c.Path() == "" || strings.HasSuffix(c.Path(), "/*")) {
			return next(c) // no route: the 404 of the group's catch-all
		}
		if !ok {
			need = domain.RoleAdmin
		}
		if !p.AtLeast(need) {
			return domain.Forbidden("you are a %s in this organisation; this needs the %s role or higher", p.Role, need)
		}
		return next(c)
	}
}
