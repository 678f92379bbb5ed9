package web

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/runsecret"
	"anvil/views"
)

// registerCI adds re-runs, run secrets and run numbers.
// registerRunSecrets adds the secrets a project's runs receive (domain/runsecret).
func (s *Server) registerRunSecrets(_ *echo.Echo, pages, api *echo.Group) {
	pages.GET("/projects/:projectId/secrets", s.secretsPage)
	pages.POST("/projects/:projectId/secrets", s.secretSaveSubmit)
	pages.POST("/projects/:projectId/secrets/:name/delete", s.secretDeleteSubmit)

	api.GET("/projects/:projectId/secrets", s.apiSecretList)
	api.GET("/projects/:projectId/secrets/:name", s.apiSecretGet)
	api.PUT("/projects/:projectId/secrets/:name", s.apiSecretPut)
	api.DELETE("/projects/:projectId/secrets/:name", s.apiSecretDelete)
}

func (s *Server) secrets() *runsecret.Service { return runsecret.New(s.Store) }

func (s *Server) apiRunRerun(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	r, err := s.Queue.Rerun(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"run_id": r.ID, "status": r.Status(), "number": r.Number, "rerun_of": r.RerunOf})
}

// runRerunSubmit re-runs a finished run and opens the new run's page.
func (s *Server) runRerunSubmit(c echo.Context) error {
	id, err := pathUUID(c, "runId", "run")
	if err != nil {
		return err
	}
	r, err := s.Queue.Rerun(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return redirect(c, "/runs/"+r.ID.String())
}

// runByNumberPage sends /projects/:slug/runs/42 to the run's own page.
func (s *Server) runByNumberPage(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(c.Param("number"), 10, 64)
	if err != nil || n < 1 {
		return domain.NotFound("run")
	}
	r, err := s.Queue.RunByNumber(c.Request().Context(), p.OrgID, p.ID, n)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusFound, "/runs/"+r.ID.String())
}

func (s *Server) apiSecretList(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	out, err := s.secrets().List(c.Request().Context(), principal(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"secrets": out})
}

func (s *Server) apiSecretGet(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	out, err := s.secrets().Get(c.Request().Context(), principal(c), id, c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// apiSecretPut stores {value, scope?} — or {scope} alone to change an
// existing secret's scope; the answer never repeats the value.
func (s *Server) apiSecretPut(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in struct {
		Value *string `json:"value"`
		Scope *string `json:"scope"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.Value == nil && in.Scope == nil {
		return domain.Invalid("missing_value", "value is required")
	}
	scope := ""
	if in.Scope != nil {
		if scope = *in.Scope; scope == "" {
			return runsecret.CheckScope(scope)
		}
	}
	out, created, err := s.secrets().PutScoped(c.Request().Context(), principal(c), id, c.Param("name"), in.Value, scope)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, out)
}

func (s *Server) apiSecretDelete(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	if err := s.secrets().Delete(c.Request().Context(), principal(c), id, c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) secretsProps(c echo.Context, p *domain.Project) (views.SecretsProps, error) {
	pr := principal(c)
	list, err := s.secrets().List(c.Request().Context(), pr, p.ID)
	if err != nil {
		return views.SecretsProps{}, err
	}
	props := views.SecretsProps{Page: s.page(c, "Secrets · "+p.Name, "projects"), ProjectID: p.ID.String(), ProjectSlug: p.Slug, ProjectName: p.Name,
		CSRF: s.csrfToken(pr), Saved: c.QueryParam("saved")}
	for _, sc := range list {
		props.Secrets = append(props.Secrets, views.SecretRow{Name: sc.Name, Scope: sc.Scope, UpdatedAt: sc.UpdatedAt, UpdatedBy: sc.UpdatedByEmail})
	}
	return props, nil
}

func (s *Server) secretsPage(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	props, err := s.secretsProps(c, p)
	if err != nil {
		return err
	}
	if err := runsecret.CheckName(props.Saved); props.Saved != "" && err != nil {
		props.Saved = ""
	}
	return Render(c, http.StatusOK, views.SecretsPage(props))
}

// secretSaveSubmit stores a secret and redirects; a refusal is shown on
// the page with nothing changed (the value is never echoed back).
func (s *Server) secretSaveSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	name := strings.TrimSpace(c.FormValue("name"))
	value := c.FormValue("value")
	_, _, perr := s.secrets().PutScoped(c.Request().Context(), principal(c), p.ID, name, &value, c.FormValue("scope"))
	var de *domain.Error
	if perr != nil && errors.As(perr, &de) && errors.Is(de.Kind, domain.ErrInvalid) {
		props, err := s.secretsProps(c, p)
		if err != nil {
			return err
		}
		props.Error = de.Message
		props.FormName, props.ValueDropped, props.FormScope = c.FormValue("name"), c.FormValue("value") != "", c.FormValue("scope")
		return Render(c, http.StatusUnprocessableEntity, views.SecretsPage(props))
	}
	if perr != nil {
		return perr
	}
	return redirect(c, "/projects/"+p.Slug+"/secrets?saved="+url.QueryEscape(name))
}

func (s *Server) secretDeleteSubmit(c echo.Context) error {
	p, err := s.projectParam(c)
	if err != nil {
		return err
	}
	if err := s.secrets().Delete(c.Request().Context(), principal(c), p.ID, c.Param("name")); err != nil {
		return err
	}
	return redirect(c, "/projects/"+p.Slug+"/secrets")
}
