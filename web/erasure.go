package web

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

// registerErasure adds the deletion of projects and organisations
// (docs/erasure.md): the private API's DELETEs and the pages' forms with a
// typed confirmation.
func (s *Server) registerErasure(pages, api *echo.Group) {
	api.DELETE("/projects/:projectId", s.apiProjectDelete)
	api.DELETE("/orgs/:orgId", s.apiOrgDelete)
	pages.POST("/projects/:projectId/delete", s.projectDeleteSubmit)
	pages.POST("/settings/organization/delete", s.orgDeleteSubmit)
}

func init() {
	flashes["project_deleted"] = "Project deleted. Its data is being erased in the background."
}

// deleteConfirm is the body of a DELETE: the object's slug, typed out.
type deleteConfirm struct {
	Confirm string `json:"confirm"`
}

// confirmation reads the typed confirmation of an API deletion: the JSON
// body's "confirm", or the query parameter of the same name. A DELETE
// without a body (whatever its Content-Type) carries no confirmation, which
// the domain refuses as 422 confirmation_mismatch: a missing confirmation is
// not a malformed request (docs/erasure.md).
func confirmation(c echo.Context) (string, error) {
	if q := c.QueryParam("confirm"); q != "" {
		return q, nil
	}
	req := c.Request()
	body, err := io.ReadAll(io.LimitReader(req.Body, maxAPIBody+1))
	if err != nil {
		return "", echo.NewHTTPError(http.StatusBadRequest, "could not read the request body")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	var in deleteConfirm
	if err := bindJSON(c, &in); err != nil {
		return "", err
	}
	return in.Confirm, nil
}

func (s *Server) apiProjectDelete(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	confirm, err := confirmation(c)
	if err != nil {
		return err
	}
	p, err := s.Erasure.DeleteProject(c.Request().Context(), principal(c), id, confirm)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"project_id": p.ID, "slug": p.Slug, "status": "deleting", "deleted_at": p.DeletedAt.UTC()})
}

func (s *Server) apiOrgDelete(c echo.Context) error {
	id, err := pathUUID(c, "orgId", "organization")
	if err != nil {
		return err
	}
	confirm, err := confirmation(c)
	if err != nil {
		return err
	}
	if err := s.Erasure.DeleteOrganization(c.Request().Context(), principal(c), id, confirm); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"org_id": id, "status": "deleting"})
}

// projectDeleteZone is the edit page's deletion form for p.
func projectDeleteZone(csrf string, p *domain.Project) views.DeleteZoneProps {
	return views.DeleteZoneProps{CSRF: csrf, Action: "/projects/" + p.ID.String() + "/delete", What: "project", Slug: p.Slug,
		Explain: "Its runs, logs, feed events, incidents, secrets, webhooks and connections are erased. Its tokens and webhooks stop at once, " +
			"a running run is canceled, and the project leaves every page now; the erasure itself finishes in the background. This cannot be undone."}
}

func (s *Server) projectDeleteSubmit(c echo.Context) error {
	id, err := s.projectIDParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	_, err = s.Erasure.DeleteProject(ctx, principal(c), id, c.FormValue("confirm"))
	var de *domain.Error
	if errors.As(err, &de) && errors.Is(de.Kind, domain.ErrInvalid) {
		p, gerr := s.Projects.Get(ctx, principal(c).OrgID, id)
		if gerr != nil {
			return gerr
		}
		props := views.ProjectFormProps{Page: s.page(c, "Edit "+p.Slug, "projects"), Form: projectForm(p)}
		props.Delete = projectDeleteZone(props.Page.CSRF, p)
		props.Delete.Error = de.Message
		return Render(c, statusOf(de.Kind), views.ProjectFormPage(props))
	}
	if err != nil {
		return err
	}
	s.flash(c, "project_deleted")
	return redirect(c, "/projects")
}

// orgDeleteZone is the settings page's deletion form, for owners.
func orgDeleteZone(csrf string, p *domain.Principal) views.DeleteZoneProps {
	if !p.AtLeast(domain.RoleOwner) {
		return views.DeleteZoneProps{}
	}
	return views.DeleteZoneProps{CSRF: csrf, Action: "/settings/organization/delete", What: "organisation", Slug: p.OrgSlug,
		Explain: "Every project of " + p.OrgName + " is erased with all its data, and the organisation's members, tokens, invitations, alert destinations " +
			"and audit log with it. Every member is signed out of it at once; their accounts stay. This cannot be undone."}
}

func (s *Server) orgDeleteSubmit(c echo.Context) error {
	p := principal(c)
	err := s.Erasure.DeleteOrganization(c.Request().Context(), p, p.OrgID, c.FormValue("confirm"))
	var de *domain.Error
	if errors.As(err, &de) && errors.Is(de.Kind, domain.ErrInvalid) {
		props, perr := s.settingsProps(c)
		if perr != nil {
			return perr
		}
		props.Delete.Error = de.Message
		return Render(c, statusOf(de.Kind), views.Settings(props))
	}
	if err != nil {
		return err
	}
	// The session was in the deleted organisation and has ended with it.
	s.setCookie(c, sessionCookie, "", -1)
	return redirect(c, "/login")
}
