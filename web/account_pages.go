package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/event"
	"anvil/views"
)

// layoutOrgs fills the layout's organisation switcher.
func (s *Server) layoutOrgs(c echo.Context, pg *views.Page) {
	p := principal(c)
	if p == nil {
		return
	}
	pg.OrgID = p.OrgID.String()
	orgs, err := s.Accounts.Organizations(c.Request().Context(), p)
	if err != nil {
		return // the switcher is a convenience; the page still renders
	}
	for _, o := range orgs {
		pg.Orgs = append(pg.Orgs, views.OrgChoice{ID: o.ID.String(), Name: o.Name})
	}
}

func (s *Server) accountProps(c echo.Context) (views.AccountProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	acc, err := s.Accounts.OwnAccount(ctx, p)
	if err != nil {
		return views.AccountProps{}, err
	}
	props := views.AccountProps{Page: s.page(c, "Your account", "settings"), Email: acc.Email, Name: acc.Name}
	ss, err := s.Accounts.Sessions(ctx, p)
	if err != nil {
		return props, err
	}
	for _, x := range ss {
		props.Sessions = append(props.Sessions, views.SessionRow{ID: x.ID, OrgName: x.OrgName, Device: deviceWords(x.UserAgent),
			CreatedAt: x.CreatedAt, ExpiresAt: x.ExpiresAt, Current: x.Current})
	}
	orgs, err := s.Accounts.Organizations(ctx, p)
	if err != nil {
		return props, err
	}
	for _, o := range orgs {
		props.Orgs = append(props.Orgs, views.OrgRow{ID: o.ID.String(), Slug: o.Slug, Name: o.Name, Role: o.Role, Current: o.ID == p.OrgID})
	}
	return props, nil
}

func (s *Server) accountPage(c echo.Context) error {
	props, err := s.accountProps(c)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.Account(props))
}

// accountResult redirects with a flash on success and shows the account
// page again with a domain refusal.
func (s *Server) accountResult(c echo.Context, err error, flash, to string, edit func(*views.AccountProps)) error {
	if err == nil {
		s.flash(c, flash)
		return redirect(c, to)
	}
	var de *domain.Error
	if !errors.As(err, &de) {
		return err
	}
	props, perr := s.accountProps(c)
	if perr != nil {
		return perr
	}
	props.Error = de.Message
	if edit != nil {
		edit(&props)
	}
	return Render(c, statusOf(de.Kind), views.Account(props))
}

func (s *Server) accountNameSubmit(c echo.Context) error {
	err := s.Accounts.Rename(c.Request().Context(), principal(c), c.FormValue("name"))
	return s.accountResult(c, err, "name_saved", "/settings/account", nil)
}

// accountPasswordSubmit changes the password; the form's "also revoke my
// API tokens" box revokes every token of the person with it.
func (s *Server) accountPasswordSubmit(c echo.Context) error {
	revoke := c.FormValue("revoke_tokens") != ""
	err := s.Accounts.ChangePassword(c.Request().Context(), principal(c), c.FormValue("current_password"), c.FormValue("new_password"), revoke)
	flash := "password_changed"
	if revoke {
		flash = "password_changed_tokens_revoked"
	}
	return s.accountResult(c, err, flash, "/settings/account", nil)
}

// accountOtherSessionsEndSubmit is "end all other sessions".
func (s *Server) accountOtherSessionsEndSubmit(c echo.Context) error {
	_, err := s.Accounts.EndOtherSessions(c.Request().Context(), principal(c))
	return s.accountResult(c, err, "other_sessions_ended", "/settings/account", nil)
}

// noteAgent keeps the login's User-Agent with its session; a failure
// costs the Sessions list a name, never the login.
func (s *Server) noteAgent(c echo.Context, cookie string) {
	if err := s.Accounts.NoteSessionAgent(c.Request().Context(), cookie, c.Request().UserAgent()); err != nil {
		s.log.Warn("keep the session's user agent", "error", err)
	}
}

// deviceWords names a session's browser and device from its User-Agent:
// "Firefox 133 on Linux", "Safari on iOS"; "an unknown browser" without one.
func deviceWords(ua string) string {
	b, o := event.ParseUserAgent(ua)
	name := ""
	if b != nil {
		name = b.Name
		if major, _, _ := strings.Cut(b.Version, "."); major != "" {
			name += " " + major
		}
	}
	switch {
	case name != "" && o != nil:
		return name + " on " + o.Name
	case name != "":
		return name
	case o != nil:
		return "a browser on " + o.Name
	case strings.TrimSpace(ua) != "":
		return "another client"
	}
	return "an unknown browser"
}

func (s *Server) accountSessionEndSubmit(c echo.Context) error {
	err := s.Accounts.EndSession(c.Request().Context(), principal(c), c.Param("id"))
	return s.accountResult(c, err, "session_ended", "/settings/account", nil)
}

func (s *Server) orgSwitchSubmit(c echo.Context) error {
	id, err := uuid.Parse(c.FormValue("org_id"))
	if err != nil {
		return domain.NotFound("organisation")
	}
	if err := s.Accounts.SwitchOrganization(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	s.flash(c, "org_switched")
	return redirect(c, "/")
}

func (s *Server) orgCreateSubmit(c echo.Context) error {
	slug, name := c.FormValue("slug"), c.FormValue("name")
	_, err := s.Accounts.CreateOrganization(c.Request().Context(), principal(c), slug, name)
	return s.accountResult(c, err, "org_created", "/", func(p *views.AccountProps) { p.OrgSlug, p.OrgName = slug, name })
}
