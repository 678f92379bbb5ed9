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

// connectionJSON is conn as listed; projectNumber is its project's number
// (the DSN's last part), read once by the caller for all of a project's
// connections rather than once for each.
func (s *Server) connectionJSON(conn *feed.FeedConnection, projectNumber int64) (connectionJSON, error) {
	out := connectionJSON{FeedConnection: conn}
	if conn.Kind != feed.KindBrowser || conn.RevokedAt != nil {
		return out, nil
	}
	tok, err := s.Feed.PublicToken(conn)
	if err != nil {
		return out, err
	}
	out.Token, out.DSN = tok, sentryDSN(s.opts.PublicURL, tok, projectNumber)
	return out, nil
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
	pr, err := s.Projects.Get(c.Request().Context(), principal(c).OrgID, projectID)
	if err != nil {
		return err
	}
	out, err := s.connectionJSON(conn, pr.Number)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, out)
}
