package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain/feed"
)

// Browser connections in the private API (docs/contracts/feed.md,
// "Browser connections"; docs/contracts/private-api.md).

// connectionJSON is a connection as listed: a browser connection's token
// and DSN are public (they ship in every page), so they are part of it.
type connectionJSON struct {
	*feed.FeedConnection
	Token string `json:"token,omitempty"`
	DSN   string `json:"dsn,omitempty"`
}

func (s *Server) connectionJSON(c echo.Context, conn *feed.FeedConnection) (connectionJSON, error) {
	out := connectionJSON{FeedConnection: conn}
	if conn.Kind != feed.KindBrowser || conn.RevokedAt != nil {
		return out, nil
	}
	tok, err := s.Feed.PublicToken(conn)
	if err != nil {
		return out, err
	}
	out.Token = tok
	out.DSN, err = s.connectionDSN(c, conn.ProjectID, tok)
	return out, err
}

// apiConnectionPatch: PATCH /api/private/projects/:projectId/connections/:connectionId
// {allowed_origins} → 200 the connection (with its token and DSN).
func (s *Server) apiConnectionPatch(c echo.Context) error {
	projectID, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	id, err := pathUUID(c, "connectionId", "connection")
	if err != nil {
		return err
	}
	var in struct {
		AllowedOrigins []string `json:"allowed_origins"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	conn, err := s.Feed.SetAllowedOrigins(c.Request().Context(), principal(c), projectID, id, in.AllowedOrigins)
	if err != nil {
		return err
	}
	out, err := s.connectionJSON(c, conn)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}
