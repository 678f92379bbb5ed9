package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

func (s *Server) projectRows(c echo.Context) ([]views.ProjectRow, error) {
	sums, err := s.Projects.Summaries(c.Request().Context(), principal(c).OrgID)
	if err != nil {
		return nil, err
	}
	rows := make([]views.ProjectRow, 0, len(sums))
	for _, p := range sums {
		rows = append(rows, views.ProjectRow{ID: p.ID.String(), Slug: p.Slug, Name: p.Name, RepoURL: p.RepoURL,
			DefaultBranch: p.DefaultBranch, LastStatus: p.LastStatus, QueueDepth: p.QueueDepth, UpdatedAt: p.UpdatedAt})
	}
	return rows, nil
}

func (s *Server) projectsPage(c echo.Context) error {
	rows, err := s.projectRows(c)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.Projects(views.ProjectsProps{Page: s.page(c, "Projects", "projects"), Projects: rows, CanWrite: principal(c).AtLeast(domain.RoleAdmin)}))
}

func (s *Server) projectNewPage(c echo.Context) error {
	if !principal(c).AtLeast(domain.RoleAdmin) {
		return domain.Forbidden("only admins and owners create projects")
	}
	return Render(c, http.StatusOK, views.ProjectFormPage(views.ProjectFormProps{Page: s.page(c, "New project", "projects")}))
}

// formInput reads the project form into a domain input and the form state
// to show again on refusal.
func formInput(c echo.Context) (domain.ProjectInput, views.ProjectForm, error) {
	f := views.ProjectForm{
		Slug: c.FormValue("slug"), Name: c.FormValue("name"), RepoURL: c.FormValue("repo_url"),
		DefaultBranch: c.FormValue("default_branch"), RunCommand: c.FormValue("run_command"),
		RepairCommand: c.FormValue("repair_command"), Provider: c.FormValue("provider"),
		ProviderAPIURL: c.FormValue("provider_api_url"), ProviderRepo: c.FormValue("provider_repo"),
		RunTimeoutMinutes: c.FormValue("run_timeout_minutes"), BranchFilters: c.FormValue("branch_filters"),
	}
	in := domain.ProjectInput{Slug: &f.Slug, Name: &f.Name, RepoURL: &f.RepoURL, DefaultBranch: &f.DefaultBranch,
		RunCommand: &f.RunCommand, RepairCommand: &f.RepairCommand, Provider: &f.Provider,
		ProviderAPIURL: &f.ProviderAPIURL, ProviderRepo: &f.ProviderRepo}
	if tok := c.FormValue("provider_token"); tok != "" {
		in.ProviderToken = &tok
	}
	if _, ok := c.Request().PostForm["branch_filters"]; ok {
		filters := strings.Split(strings.ReplaceAll(f.BranchFilters, "\r\n", "\n"), "\n")
		in.BranchFilters = &filters
	}
	if m := strings.TrimSpace(f.RunTimeoutMinutes); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 1440 {
			return in, f, &domain.Error{Kind: domain.ErrInvalid, Code: "invalid_run_timeout", Message: "run timeout must be a whole number of minutes between 1 and 1440"}
		}
		secs := n * 60
		in.RunTimeoutSeconds = &secs
	}
	return in, f, nil
}

// fieldOf guesses the form field a validation code is about, to highlight it.
func fieldOf(code string) string {
	for _, p := range []string{"missing_", "invalid_", "too_long_"} {
		if strings.HasPrefix(code, p) {
			return strings.TrimPrefix(code, p)
		}
	}
	if code == "slug_taken" {
		return "slug"
	}
	return ""
}

// formRefusal re-renders the form with the refusal, or returns err when it
// is not one a person can fix.
func (s *Server) formRefusal(c echo.Context, title string, f views.ProjectForm, err error) error {
	var de *domain.Error
	if !errors.As(err, &de) || (!errors.Is(de.Kind, domain.ErrInvalid) && !errors.Is(de.Kind, domain.ErrConflict)) {
		return err
	}
	f.Error, f.ErrorField = de.Message, fieldOf(de.Code)
	return Render(c, statusOf(de.Kind), views.ProjectFormPage(views.ProjectFormProps{Page: s.page(c, title, "projects"), Form: f}))
}

func (s *Server) projectCreateSubmit(c echo.Context) error {
	in, f, err := formInput(c)
	if err == nil {
		var p *domain.Project
		p, err = s.Projects.Create(c.Request().Context(), principal(c), in)
		if err == nil {
			s.flash(c, "project_created")
			return redirect(c, "/projects/"+p.ID.String())
		}
	}
	return s.formRefusal(c, "New project", f, err)
}

func (s *Server) projectEditPage(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	p, err := s.Projects.Get(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	if !principal(c).AtLeast(domain.RoleAdmin) {
		return domain.Forbidden("only admins and owners edit projects")
	}
	f := views.ProjectForm{ID: p.ID.String(), Slug: p.Slug, Name: p.Name, RepoURL: p.RepoURL, DefaultBranch: p.DefaultBranch,
		RunCommand: p.RunCommand, RepairCommand: p.RepairCommand, Provider: p.Provider, ProviderAPIURL: p.ProviderAPIURL,
		ProviderRepo: p.ProviderRepo, HasProviderToken: p.ProviderTokenEnc != "", RunTimeoutMinutes: strconv.Itoa(p.RunTimeoutSeconds / 60),
		BranchFilters: strings.Join(p.BranchFilters, "\n")}
	return Render(c, http.StatusOK, views.ProjectFormPage(views.ProjectFormProps{Page: s.page(c, "Edit "+p.Slug, "projects"), Form: f}))
}

func (s *Server) projectEditSubmit(c echo.Context) error {
	id, err := pathUUID(c, "projectId", "project")
	if err != nil {
		return err
	}
	in, f, err := formInput(c)
	f.ID = id.String()
	if err == nil {
		_, err = s.Projects.Update(c.Request().Context(), principal(c), id, in)
		if err == nil {
			s.flash(c, "project_saved")
			return redirect(c, "/projects/"+id.String())
		}
	}
	return s.formRefusal(c, "Edit project", f, err)
}

func (s *Server) projectPage(c echo.Context) error {
	p, err := s.projectParam(c) // its id or its slug
	if err != nil {
		return err
	}
	q, err := s.queueProps(c, p.ID)
	if err != nil {
		return err
	}
	props := views.ProjectProps{Page: s.page(c, p.Name, "projects"), CanWrite: principal(c).CanWrite(), CanEdit: principal(c).AtLeast(domain.RoleAdmin), Queue: q,
		Project:    views.ProjectRow{ID: p.ID.String(), Slug: p.Slug, Name: p.Name, RepoURL: p.RepoURL, DefaultBranch: p.DefaultBranch, UpdatedAt: p.UpdatedAt},
		RunCommand: p.RunCommand}
	return Render(c, http.StatusOK, views.ProjectPage(props))
}
