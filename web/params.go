package web

import (
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
// caller's organisation.
func (s *Server) projectParam(c echo.Context) (*domain.Project, error) {
	ctx, org := c.Request().Context(), principal(c).OrgID
	raw := c.Param("projectId")
	if id, err := uuid.Parse(raw); err == nil {
		return s.Projects.Get(ctx, org, id)
	}
	return s.Projects.BySlug(ctx, org, raw)
}
