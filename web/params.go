package web

import (
	"net/url"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
)

// The path parameters the handlers of every capability share.

// pathUUID parses a path parameter; a malformed id is a 404 like an unknown one.
func pathUUID(c echo.Context, name, what string) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param(name))
	if err != nil {
		return uuid.Nil, domain.NotFound(what)
	}
	return id, nil
}

// projectParam resolves :projectId, a project's id or its slug, within the
// caller's organisation. Every /projects/:projectId route (pages and API, of
// every capability) shares the one segment: echo cannot tell two routes apart
// by the shape of a parameter, and a slug can never look like an id or "new"
// (the domain refuses those; docs/contracts/private-api.md, "Projects by slug").
func (s *Server) projectParam(c echo.Context) (*domain.Project, error) {
	ctx, org := c.Request().Context(), principal(c).OrgID
	raw := c.Param("projectId")
	if id, err := uuid.Parse(raw); err == nil {
		return s.Projects.Get(ctx, org, id)
	}
	return s.Projects.BySlug(ctx, org, raw)
}

// projectIDParam is projectParam for handlers that need only the id: an id
// is taken as it is (the domain method it goes to checks the organisation),
// a slug costs one lookup.
func (s *Server) projectIDParam(c echo.Context) (uuid.UUID, error) {
	if id, err := uuid.Parse(c.Param("projectId")); err == nil {
		return id, nil
	}
	p, err := s.projectParam(c)
	if err != nil {
		return uuid.Nil, err
	}
	return p.ID, nil
}

// projectPath is the path of the project's page as the request named it
// (its slug when the links were followed), for redirects back to a
// subpage; the parameter was resolved before, so it is an id or a slug.
func projectPath(c echo.Context) string {
	return "/projects/" + url.PathEscape(c.Param("projectId"))
}

// incidentParam resolves :incidentId, an incident's id or its short id
// (SHOP-12), within the caller's organisation (docs/releases.md, "Short
// ids"); anything else is a 404 like an unknown id.
func (s *Server) incidentParam(c echo.Context) (uuid.UUID, error) {
	return s.Incidents.Resolve(c.Request().Context(), principal(c).OrgID, c.Param("incidentId"))
}
