package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/project"
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
// to show again on refusal. A run timeout that is not a whole number of
// minutes is handed on as an invalid one, so that the domain refuses it
// together with every other refused field (and saves nothing).
func formInput(c echo.Context) (project.ProjectInput, views.ProjectForm) {
	f := views.ProjectForm{
		Slug: c.FormValue("slug"), Name: c.FormValue("name"), RepoURL: c.FormValue("repo_url"),
		DefaultBranch: c.FormValue("default_branch"), RunCommand: c.FormValue("run_command"),
		RepairCommand: c.FormValue("repair_command"), Provider: c.FormValue("provider"),
		ProviderAPIURL: c.FormValue("provider_api_url"), ProviderRepo: c.FormValue("provider_repo"),
		RunTimeoutMinutes: c.FormValue("run_timeout_minutes"), BranchFilters: c.FormValue("branch_filters"),
		StatusContext: c.FormValue("status_context"),
		NetworkAllow:  c.FormValue("network_allow"), RepairNetworkAllow: c.FormValue("repair_network_allow"),
		FixWindow: c.FormValue("fix_verification_window"),
		RunImage:  c.FormValue("run_image"), RepairImage: c.FormValue("repair_image"),
		ImagePullSecret: c.FormValue("image_pull_secret"),
	}
	in := project.ProjectInput{Slug: &f.Slug, Name: &f.Name, RepoURL: &f.RepoURL, DefaultBranch: &f.DefaultBranch,
		RunCommand: &f.RunCommand, RepairCommand: &f.RepairCommand, Provider: &f.Provider,
		ProviderAPIURL: &f.ProviderAPIURL, ProviderRepo: &f.ProviderRepo}
	// A form without the image fields (an older page) leaves them as they are.
	if _, ok := c.Request().PostForm["run_image"]; ok {
		in.RunImage = &f.RunImage
	}
	if _, ok := c.Request().PostForm["repair_image"]; ok {
		in.RepairImage = &f.RepairImage
	}
	if _, ok := c.Request().PostForm["image_pull_secret"]; ok {
		in.ImagePullSecret = &f.ImagePullSecret
	}
	if tok := c.FormValue("provider_token"); tok != "" {
		in.ProviderToken = &tok
		f.TokenDropped = true // shown only when the form is refused
	}
	// An empty status context keeps the one the project has (anvil/<slug>
	// for a new project): the field's placeholder says so.
	if strings.TrimSpace(f.StatusContext) != "" {
		in.StatusContext = &f.StatusContext
	}
	// An empty window keeps the project's (24h for a new project).
	if strings.TrimSpace(f.FixWindow) != "" {
		w := strings.TrimSpace(f.FixWindow)
		in.FixVerificationWindow = &w
	}
	if _, ok := c.Request().PostForm["branch_filters"]; ok {
		filters := strings.Split(strings.ReplaceAll(f.BranchFilters, "\r\n", "\n"), "\n")
		in.BranchFilters = &filters
	}
	for _, l := range []struct {
		field string
		text  string
		dst   **[]string
	}{{"network_allow", f.NetworkAllow, &in.NetworkAllow}, {"repair_network_allow", f.RepairNetworkAllow, &in.RepairNetworkAllow}} {
		if _, ok := c.Request().PostForm[l.field]; ok {
			lines := strings.Split(strings.ReplaceAll(l.text, "\r\n", "\n"), "\n")
			*l.dst = &lines
		}
	}
	// The checkbox is sent only when ticked; the hidden field says the form
	// had it.
	if _, ok := c.Request().PostForm["fork_cache_shown"]; ok {
		on := c.FormValue("fork_cache") == "1"
		f.NoForkCache, in.ForkCache = !on, &on
	}
	if m := strings.TrimSpace(f.RunTimeoutMinutes); m != "" {
		secs := 0
		if n, err := strconv.Atoi(m); err == nil && n >= 1 && n <= 1440 {
			secs = n * 60
		}
		in.RunTimeoutSeconds = &secs
	}
	return in, f
}

// formFields maps the domain's input names onto the form's fields and
// their labels (the words a person sees beside the field).
var formFields = map[string]struct{ field, label string }{
	"slug":                    {"slug", "Slug"},
	"name":                    {"name", "Name"},
	"repo_url":                {"repo_url", "Repository URL"},
	"default_branch":          {"default_branch", "Default branch"},
	"run_command":             {"run_command", "Run command"},
	"repair_command":          {"repair_command", "Repair command"},
	"provider":                {"provider", "Provider"},
	"provider_repo":           {"provider_repo", "Repository (owner/name)"},
	"provider_api_url":        {"provider_api_url", "API URL"},
	"provider_token":          {"provider_token", "Access token"},
	"run_timeout_seconds":     {"run_timeout_minutes", "Run timeout (minutes)"},
	"status_context":          {"status_context", "Status context"},
	"network_allow":           {"network_allow", "Network list of runs"},
	"repair_network_allow":    {"repair_network_allow", "Network list of repair runs"},
	"fork_cache":              {"fork_cache", "Cache for forks' runs"},
	"fix_verification_window": {"fix_verification_window", "Fix verification window"},
	"run_image":               {"run_image", "Image of runs"},
	"repair_image":            {"repair_image", "Image of repair runs"},
	"image_pull_secret":       {"image_pull_secret", "Pull secret"},
}

// formErrors turns a refusal into the form's messages, each in its field's
// label's words.
func formErrors(de *domain.Error, f *views.ProjectForm) {
	f.Errors = map[string]string{}
	add := func(field, msg string) {
		if _, dup := f.Errors[field]; !dup {
			f.ErrorOrder = append(f.ErrorOrder, field)
		}
		f.Errors[field] = msg
	}
	switch {
	case len(de.Fields) > 0:
		for _, fe := range de.Fields {
			ff, ok := formFields[fe.Field]
			switch {
			case !ok:
				add("", de.Message)
			case fe.Field == "run_timeout_seconds":
				add(ff.field, ff.label+" must be a whole number of minutes between 1 and 1440")
			default:
				add(ff.field, ff.label+" "+fe.Problem)
			}
		}
	case de.Code == "slug_taken":
		add("slug", fmt.Sprintf("Slug %q is already taken: a project of this organisation already exists with it", strings.TrimSpace(f.Slug)))
	default:
		add("", de.Message)
	}
}

// formRefusal re-renders the form with the refusal, or returns err when it
// is not one a person can fix.
func (s *Server) formRefusal(c echo.Context, title string, f views.ProjectForm, err error) error {
	var de *domain.Error
	if !errors.As(err, &de) || (!errors.Is(de.Kind, domain.ErrInvalid) && !errors.Is(de.Kind, domain.ErrConflict)) {
		return err
	}
	formErrors(de, &f)
	return Render(c, statusOf(de.Kind), views.ProjectFormPage(views.ProjectFormProps{Page: s.page(c, title, "projects"), Form: f}))
}

// projectWarnings is what a save found doubtful, kept for the edit page
// the save redirects to.
type projectWarnings struct {
	Warnings []string `json:"warnings"`
}

// savedWithWarnings answers a save that found something doubtful (the
// repository did not answer) with a redirect to the project's edit page,
// which shows the warnings once: the project is saved, and a reload shows
// the form rather than submitting it again (a create would be a 409).
func (s *Server) savedWithWarnings(c echo.Context, p *domain.Project) error {
	if err := s.stashReveal(c, revealSlot("project-saved", p.ID.String()), projectWarnings{Warnings: p.Warnings}); err != nil {
		return err
	}
	return redirect(c, "/projects/"+p.Slug+"/edit")
}

func (s *Server) projectCreateSubmit(c echo.Context) error {
	in, f := formInput(c)
	p, err := s.Projects.Create(c.Request().Context(), principal(c), in)
	if err != nil {
		return s.formRefusal(c, "New project", f, err)
	}
	if len(p.Warnings) > 0 {
		return s.savedWithWarnings(c, p)
	}
	s.flash(c, "project_created")
	return redirect(c, "/projects/"+p.Slug)
}

// projectForm is a stored project as the form shows it.
func projectForm(p *domain.Project) views.ProjectForm {
	return views.ProjectForm{ID: p.ID.String(), Slug: p.Slug, Name: p.Name, RepoURL: p.RepoURL, DefaultBranch: p.DefaultBranch,
		RunCommand: p.RunCommand, RepairCommand: p.RepairCommand, Provider: p.Provider, ProviderAPIURL: p.ProviderAPIURL,
		ProviderRepo: p.ProviderRepo, HasProviderToken: p.ProviderTokenEnc != "", RunTimeoutMinutes: strconv.Itoa(p.RunTimeoutSeconds / 60),
		BranchFilters: strings.Join(p.BranchFilters, "\n"), StatusContext: domain.StatusContextOf(p),
		NetworkAllow: strings.Join(p.NetworkAllow, "\n"), RepairNetworkAllow: strings.Join(p.RepairNetworkAllow, "\n"),
		NoForkCache: !p.ForkCache, FixWindow: domain.FormatWindow(p.FixWindow()),
		RunImage: p.RunImage, RepairImage: p.RepairImage, ImagePullSecret: p.ImagePullSecret}
}

func (s *Server) projectEditPage(c echo.Context) error {
	id, err := s.projectIDParam(c)
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
	pg := s.page(c, "Edit "+p.Slug, "projects")
	f := projectForm(p)
	var w projectWarnings
	if ok, err := s.takeReveal(c, revealSlot("project-saved", p.ID.String()), &w); err != nil {
		return err
	} else if ok {
		f.Saved, f.Warnings = true, w.Warnings
	}
	return Render(c, http.StatusOK, views.ProjectFormPage(views.ProjectFormProps{Page: pg, Form: f, Delete: projectDeleteZone(pg.CSRF, p)}))
}

func (s *Server) projectEditSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	in, f := formInput(c)
	f.ID = id.String()
	p, err := s.Projects.Update(c.Request().Context(), principal(c), id, in)
	if err != nil {
		return s.formRefusal(c, "Edit project", f, err)
	}
	if len(p.Warnings) > 0 {
		return s.savedWithWarnings(c, p)
	}
	s.flash(c, "project_saved")
	return redirect(c, "/projects/"+p.Slug)
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
	cache, err := s.caches().Status(c.Request().Context(), principal(c), p.ID)
	if err != nil {
		return err
	}
	props := views.ProjectProps{Page: s.page(c, p.Name, "projects"), CanWrite: principal(c).CanWrite(), CanEdit: principal(c).AtLeast(domain.RoleAdmin), Queue: q,
		Project:    views.ProjectRow{ID: p.ID.String(), Slug: p.Slug, Name: p.Name, RepoURL: p.RepoURL, DefaultBranch: p.DefaultBranch, UpdatedAt: p.UpdatedAt},
		RunCommand: p.RunCommand, Cache: s.cacheProps(c, cache, p.Slug), Network: p.NetworkAllow, RepairNetwork: p.RepairNetworkAllow}
	return Render(c, http.StatusOK, views.ProjectPage(props))
}
