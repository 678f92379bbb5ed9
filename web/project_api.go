package web

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/project"
)

// projectJSON is a project as the private API shows it. The provider token
// never leaves the server; has_provider_token says whether one is set.
type projectJSON struct {
	ID                uuid.UUID `json:"id"`
	Number            int64     `json:"number"`
	Slug              string    `json:"slug"`
	Name              string    `json:"name"`
	RepoURL           string    `json:"repo_url"`
	DefaultBranch     string    `json:"default_branch"`
	RunCommand        string    `json:"run_command"`
	RepairCommand     string    `json:"repair_command"`
	Provider          string    `json:"provider"`
	ProviderAPIURL    string    `json:"provider_api_url"`
	ProviderRepo      string    `json:"provider_repo"`
	HasProviderToken  bool      `json:"has_provider_token"`
	RunTimeoutSeconds int       `json:"run_timeout_seconds"`
	BranchFilters     []string  `json:"branch_filters"`
	StatusContext     string    `json:"status_context"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`
	// Warnings are notes on a save that just happened (the repository did
	// not answer git ls-remote, …); only create and update answer them.
	Warnings []string `json:"warnings,omitempty"`
	// FixVerificationWindow: docs/releases.md ("24h" unless set).
	FixVerificationWindow string `json:"fix_verification_window"`
	// NetworkAllow and RepairNetworkAllow: docs/network.md ([] = offline).
	NetworkAllow       []string `json:"network_allow"`
	RepairNetworkAllow []string `json:"repair_network_allow"`
	// ForkCache: docs/caches.md (true = forks' runs read a copy).
	ForkCache bool `json:"fork_cache"`
	// RunImage and RepairImage: docs/images.md ("" = the host's tools).
	RunImage    string `json:"run_image"`
	RepairImage string `json:"repair_image"`
	// ImagePullSecret: the name of the run secret that pulls them ("" =
	// anonymous; docs/images.md). Its value is never shown.
	ImagePullSecret string `json:"image_pull_secret"`
}

func toProjectJSON(p *domain.Project) projectJSON {
	return projectJSON{ID: p.ID, Number: p.Number, Slug: p.Slug, Name: p.Name, RepoURL: p.RepoURL, DefaultBranch: p.DefaultBranch,
		RunCommand: p.RunCommand, RepairCommand: p.RepairCommand, Provider: p.Provider, ProviderAPIURL: p.ProviderAPIURL,
		ProviderRepo: p.ProviderRepo, HasProviderToken: p.ProviderTokenEnc != "", RunTimeoutSeconds: p.RunTimeoutSeconds,
		BranchFilters: append([]string{}, p.BranchFilters...), StatusContext: domain.StatusContextOf(p), CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(), Warnings: p.Warnings,
		FixVerificationWindow: domain.FormatWindow(p.FixWindow()),
		NetworkAllow:          append([]string{}, p.NetworkAllow...), RepairNetworkAllow: append([]string{}, p.RepairNetworkAllow...),
		ForkCache: p.ForkCache, RunImage: p.RunImage, RepairImage: p.RepairImage, ImagePullSecret: p.ImagePullSecret}
}

func (s *Server) apiProjectList(c echo.Context) error {
	ps, err := s.Projects.List(c.Request().Context(), principal(c).OrgID)
	if err != nil {
		return err
	}
	out := make([]projectJSON, 0, len(ps))
	for i := range ps {
		out = append(out, toProjectJSON(&ps[i]))
	}
	return c.JSON(http.StatusOK, map[string]any{"projects": out})
}

func (s *Server) apiProjectCreate(c echo.Context) error {
	var in project.ProjectInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := s.Projects.Create(c.Request().Context(), principal(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toProjectJSON(p))
}

func (s *Server) apiProjectGet(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	p, err := s.Projects.Get(c.Request().Context(), principal(c).OrgID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProjectJSON(p))
}

func (s *Server) apiProjectUpdate(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	var in project.ProjectInput
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := s.Projects.Update(c.Request().Context(), principal(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProjectJSON(p))
}
