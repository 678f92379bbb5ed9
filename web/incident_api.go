package web

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/incident"
)

// incidentFilter reads the inbox filters from the query (?project_id= or
// ?project=, a project's id or its slug; ?status=, ?environment=, ?page=);
// a malformed value is a specific 4xx, never silently "all".
func (s *Server) incidentFilter(c echo.Context) (incident.IncidentFilter, error) {
	var f incident.IncidentFilter
	pid := c.QueryParam("project_id")
	if pid == "" {
		pid = c.QueryParam("project")
	}
	if pid != "" {
		id, err := uuid.Parse(pid)
		if err != nil {
			p, serr := s.Projects.BySlug(c.Request().Context(), principal(c).OrgID, pid)
			if serr != nil {
				return f, domain.Invalid("invalid_project_id", "project_id must be a project's id or slug")
			}
			id = p.ID
		}
		f.ProjectID = id
	}
	f.Status, f.Environment = c.QueryParam("status"), c.QueryParam("environment")
	f.Query, f.Level, f.Release = c.QueryParam("q"), c.QueryParam("level"), c.QueryParam("release")
	if v := c.QueryParam("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, domain.Invalid("invalid_page", "page must be a whole number")
		}
		f.Page = n
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return f, domain.Invalid("invalid_limit", "limit must be a whole number")
		}
		f.Limit = n
	}
	return f, nil
}

// apiIncidentList: GET /api/private/incidents?project_id=&status=&environment=&page=.
func (s *Server) apiIncidentList(c echo.Context) error {
	f, err := s.incidentFilter(c)
	if err != nil {
		return err
	}
	pg, err := s.Incidents.List(c.Request().Context(), principal(c).OrgID, f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"incidents": pg.Incidents, "counts": pg.Counts, "has_more": pg.HasMore})
}

// apiIncidentGet: GET /api/private/incidents/:incidentId → the incident with
// its transitions, latest event, events and 24-hour histogram.
func (s *Server) apiIncidentGet(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	d, err := s.Incidents.Detail(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// apiIncidentDecision: POST /api/private/incidents/:incidentId/decisions
// {decision} → 200 the incident; 409 with the reason when refused.
func (s *Server) apiIncidentDecision(c echo.Context) error {
	id, err := s.incidentParam(c)
	if err != nil {
		return err
	}
	var in struct {
		Decision string `json:"decision"`
		// InCurrentRelease: a close "in the current release" — events from
		// older releases do not reopen it (docs/releases.md).
		InCurrentRelease bool `json:"in_current_release"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	inc, err := s.Incidents.DecideIn(c.Request().Context(), principal(c), id, in.Decision, in.InCurrentRelease)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inc.View())
}
