package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain/release"
	"anvil/views"
)

// A fix recorded by hand (docs/releases.md, "A fix recorded by hand"): the
// incident page's form and the API, for projects without a forge or
// webhooks.

// apiIncidentFix: POST /api/private/incidents/:incidentId/fix
// {commit_sha, pr_url?} → 200 the incident.
func (s *Server) apiIncidentFix(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	var in release.ManualFix
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	inc, err := s.Fixes.RecordByHand(c.Request().Context(), principal(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inc.View())
}

// incidentFixSubmit: POST /incidents/:incidentId/fix (form, htmx). A
// refusal is shown in place, as a refused decision is.
func (s *Server) incidentFixSubmit(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	_, ferr := s.Fixes.RecordByHand(c.Request().Context(), principal(c), id,
		release.ManualFix{Commit: c.FormValue("commit_sha"), PRURL: c.FormValue("pr_url")})
	msg, err := domainRefusal(ferr)
	if err != nil {
		return err
	}
	if !isHTMX(c) && msg == "" {
		return redirect(c, "/incidents/"+id.String())
	}
	props, err := s.incidentProps(c, id)
	if err != nil {
		return err
	}
	props.FixError = msg
	if !isHTMX(c) {
		return Render(c, http.StatusUnprocessableEntity, views.IncidentPage(props))
	}
	return Render(c, http.StatusOK, views.IncidentChain(props))
}
