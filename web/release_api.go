package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/release"
	"anvil/views"
)

// registerReleases adds a project's releases to the private API and its
// Releases page (docs/releases.md).
func (s *Server) registerReleases(pages, api *echo.Group) {
	api.GET("/projects/:projectId/releases", s.apiReleaseList)
	api.POST("/projects/:projectId/releases", s.apiReleaseDeclare)
	pages.GET("/projects/:projectId/releases", s.releasesPage)
	pages.POST("/projects/:projectId/releases", s.releaseDeclareSubmit)
}

// apiReleaseList: GET /api/private/projects/:projectId/releases.
func (s *Server) apiReleaseList(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	rs, err := s.Releases.List(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"releases": rs})
}

// apiReleaseDeclare: POST /api/private/projects/:projectId/releases
// {version, commit_sha?, environment?, deployed_at?} → 201 the release.
func (s *Server) apiReleaseDeclare(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in release.Declaration
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	r, err := s.Releases.Declare(c.Request().Context(), principal(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

// releasesPage: GET /projects/:projectId/releases.
func (s *Server) releasesPage(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	props, err := s.releasesProps(c, p)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.ReleasesPage(props))
}

func (s *Server) releasesProps(c echo.Context, p *domain.Project) (views.ReleasesProps, error) {
	rs, err := s.Releases.List(c.Request().Context(), principal(c), p.ID)
	if err != nil {
		return views.ReleasesProps{}, err
	}
	props := views.ReleasesProps{Page: s.page(c, "Releases · "+p.Name, "projects"), ProjectSlug: p.Slug, ProjectName: p.Name,
		CanWrite: principal(c).CanWrite()}
	for _, r := range rs {
		props.Releases = append(props.Releases, views.ReleaseRow{Version: r.Version, Environment: r.Environment, CommitSHA: r.CommitSHA,
			CommitFrom: r.CommitFrom, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, EventCount: r.EventCount, NewIncidents: r.NewIncidents,
			DeployedAt: r.DeployedAt, Source: release.SourceWords(r.Source), Trusted: r.Trusted})
	}
	return props, nil
}

// releaseDeclareSubmit: POST /projects/:projectId/releases (form). A
// refusal is shown on the page with what was typed (422).
func (s *Server) releaseDeclareSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	form := views.ReleaseForm{Version: c.FormValue("version"), CommitSHA: c.FormValue("commit_sha"), Environment: c.FormValue("environment")}
	_, derr := s.Releases.Declare(c.Request().Context(), principal(c), p.ID,
		release.Declaration{Version: form.Version, CommitSHA: form.CommitSHA, Environment: form.Environment})
	msg, err := domainRefusal(derr)
	if err != nil {
		return err
	}
	if msg == "" {
		return redirect(c, "/projects/"+p.Slug+"/releases")
	}
	props, err := s.releasesProps(c, p)
	if err != nil {
		return err
	}
	props.Error, props.Form = msg, form
	return Render(c, http.StatusUnprocessableEntity, views.ReleasesPage(props))
}
