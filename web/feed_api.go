package web

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"anvil/domain/feed"
)

// Connections and bindings in the private API (docs/contracts/private-api.md,
// "Feed connections and bindings"). Viewers are
// refused by the domain; another organisation's ids are 404s.

// apiConnectionCreate: POST /api/private/projects/:projectId/connections
// {name, kind?: server|browser, allowed_origins?} → 201 {connection_id,
// kind, token, dsn, allowed_origins, …}. A server token is in this answer
// only; a browser token (public by nature) is listed again whenever asked.
func (s *Server) apiConnectionCreate(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in struct {
		Name           string   `json:"name"`
		Kind           string   `json:"kind"`
		AllowedOrigins []string `json:"allowed_origins"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conn, tok, err := s.Feed.CreateConnectionOf(c.Request().Context(), principal(c), id,
		feed.ConnectionSpec{Name: in.Name, Kind: in.Kind, AllowedOrigins: in.AllowedOrigins})
	if err != nil {
		return err
	}
	dsn, err := s.connectionDSN(c, conn.ProjectID, tok)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, map[string]any{"connection_id": conn.ID, "kind": conn.Kind, "token": tok, "dsn": dsn,
		"allowed_origins": conn.AllowedOrigins, "project_id": conn.ProjectID,
		"name": conn.Name, "prefix": conn.Prefix, "created_at": conn.CreatedAt.UTC()})
}

// apiConnectionList: GET /api/private/projects/:projectId/connections. A
// browser connection carries its token and DSN (see apiConnectionCreate).
func (s *Server) apiConnectionList(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	cs, err := s.Feed.ListConnections(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	pr, err := s.Projects.Get(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	out := make([]connectionJSON, len(cs))
	for i := range cs {
		if out[i], err = s.connectionJSON(&cs[i], pr.Number); err != nil {
			return err
		}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]any{"connections": out})
}

// apiConnectionRevoke: DELETE /api/private/connections/:connectionId → 204.
func (s *Server) apiConnectionRevoke(c echo.Context) error {
	id, err := pathUUID(c, "connectionId", "connection")
	if err != nil {
		return err
	}
	if _, err := s.Feed.RevokeConnection(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// bindingEnv is the :environment path parameter, unescaped ('*' may arrive
// as %2A).
func bindingEnv(c echo.Context) string {
	v := c.Param("environment")
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// apiBindingPut: PUT /api/private/projects/:projectId/bindings/:environment
// {repair_policy} → 200 the binding.
func (s *Server) apiBindingPut(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in struct {
		RepairPolicy string `json:"repair_policy"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	b, err := s.Feed.PutBinding(c.Request().Context(), principal(c), id, bindingEnv(c), in.RepairPolicy)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

// apiBindingList: GET /api/private/projects/:projectId/bindings.
func (s *Server) apiBindingList(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	bs, err := s.Feed.ListBindings(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"bindings": bs})
}

// apiBindingDelete: DELETE /api/private/projects/:projectId/bindings/:environment → 204.
func (s *Server) apiBindingDelete(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	if err := s.Feed.DeleteBinding(c.Request().Context(), principal(c), id, bindingEnv(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
