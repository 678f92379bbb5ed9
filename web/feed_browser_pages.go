package web

import (
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain/feed"
	"anvil/views"
)

// The Feed page's browser connections: the DSN shown whenever
// asked, the allowed-origins editor, the setup snippets.

// browserRow fills a browser connection's token and DSN into its row;
// projectNumber is its project's, read once for the page.
func (s *Server) browserRow(cn *feed.FeedConnection, projectNumber int64, row *views.FeedConnectionRow) error {
	if cn.Kind != feed.KindBrowser || cn.RevokedAt != nil {
		return nil
	}
	j, err := s.connectionJSON(cn, projectNumber)
	if err != nil {
		return err
	}
	row.Token, row.DSN = j.Token, j.DSN
	return nil
}

// originLines reads the editor's textarea: one origin a line (commas and
// spaces separate too); blank lines are nothing.
func originLines(v string) []string {
	return append([]string{}, strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' || r == ',' || r == ' ' || r == '\t' })...)
}

// feedConnectionOriginsSubmit saves a browser connection's allowed origins;
// a refused entry is shown on the page (422) and changes nothing.
func (s *Server) feedConnectionOriginsSubmit(c echo.Context) error {
	pid, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	cid, err := pathUUID(c, "connectionId", "connection")
	if err != nil {
		return err
	}
	_, err = s.Feed.SetAllowedOrigins(c.Request().Context(), principal(c), pid, cid, originLines(c.FormValue("allowed_origins")))
	de, err := refusal(err)
	if err != nil {
		return err
	}
	if de != nil {
		props, err := s.feedProps(c)
		if err != nil {
			return err
		}
		props.Error = de.Message
		props.OriginsFor, props.OriginsTyped = cid.String(), c.FormValue("allowed_origins")
		return Render(c, statusOf(de.Kind), views.FeedPage(props))
	}
	return redirect(c, projectPath(c)+"/feed#connection-"+cid.String())
}
