package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/account"
	"anvil/views"
)

// invitationGone is the one page of an unknown, expired, used or revoked
// invitation: it says the same in every case (no oracle).
func (s *Server) invitationGone(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, http.StatusNotFound, views.ErrorPage(views.ErrorProps{Page: s.page(c, "Invitation", ""), Status: http.StatusNotFound,
		Heading: "Invitation no longer valid", Message: "This invitation is no longer valid. Ask whoever invited you for a new link."}))
}

func (s *Server) inviteProps(c echo.Context) (views.InviteProps, error) {
	tok := c.Param("token")
	sum, err := s.Accounts.Invitation(c.Request().Context(), tok)
	if err != nil {
		return views.InviteProps{}, err
	}
	props := views.InviteProps{Page: s.page(c, "Invitation", ""), Token: tok, OrgName: sum.OrgName, Email: sum.Email, Role: sum.Role,
		ExpiresAt: sum.ExpiresAt, UserExists: sum.UserExists}
	if p := principal(c); p != nil {
		props.SignedInAs = p.Email
	} else {
		props.Page.CSRF = c.Get("login_csrf").(string)
	}
	return props, nil
}

func (s *Server) invitePage(c echo.Context) error {
	props, err := s.inviteProps(c)
	if errors.Is(err, account.ErrInvitationInvalid) {
		return s.invitationGone(c)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, http.StatusOK, views.Invite(props))
}

// inviteAcceptSubmit creates the invited person's account (they had none),
// signs them in and lands them in the organisation.
func (s *Server) inviteAcceptSubmit(c echo.Context) error {
	name := c.FormValue("name")
	cookie, err := s.Accounts.AcceptInvitationNew(c.Request().Context(), c.Param("token"), name, c.FormValue("password"))
	if errors.Is(err, account.ErrInvitationInvalid) {
		return s.invitationGone(c)
	}
	var de *domain.Error
	if err != nil && errors.As(err, &de) {
		props, perr := s.inviteProps(c)
		if perr != nil {
			return s.invitationGone(c)
		}
		props.Error, props.Name = de.Message, name
		return Render(c, statusOf(de.Kind), views.Invite(props))
	}
	if err != nil {
		return err
	}
	s.noteAgent(c, cookie)
	s.setCookie(c, sessionCookie, cookie, int(account.SessionTTL.Seconds()))
	s.setCookie(c, preSessionCookie, "", -1)
	return redirect(c, "/")
}

// inviteJoinSubmit lets a signed-in person with the invited email join.
func (s *Server) inviteJoinSubmit(c echo.Context) error {
	err := s.Accounts.AcceptInvitationAsUser(c.Request().Context(), principal(c), c.Param("token"))
	if errors.Is(err, account.ErrInvitationInvalid) {
		return s.invitationGone(c)
	}
	if err != nil {
		return err
	}
	s.flash(c, "org_switched")
	return redirect(c, "/")
}

func (s *Server) resetGone(c echo.Context) error {
	return Render(c, http.StatusNotFound, views.ErrorPage(views.ErrorProps{Page: s.page(c, "Password reset", ""), Status: http.StatusNotFound,
		Heading: "Reset link no longer valid", Message: account.ErrResetInvalid.Message}))
}

func (s *Server) resetPage(c echo.Context) error {
	email, err := s.Accounts.PasswordResetEmail(c.Request().Context(), c.Param("token"))
	if errors.Is(err, account.ErrResetInvalid) {
		return s.resetGone(c)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return Render(c, http.StatusOK, views.Reset(views.ResetProps{Page: views.Page{Title: "Password reset", CSRF: c.Get("login_csrf").(string)},
		Token: c.Param("token"), Email: email}))
}

func (s *Server) resetSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	tok := c.Param("token")
	err := s.Accounts.ResetPassword(ctx, tok, c.FormValue("password"))
	if errors.Is(err, account.ErrResetInvalid) {
		return s.resetGone(c)
	}
	var de *domain.Error
	if err != nil && errors.As(err, &de) {
		email, eerr := s.Accounts.PasswordResetEmail(ctx, tok)
		if eerr != nil {
			return s.resetGone(c)
		}
		return Render(c, statusOf(de.Kind), views.Reset(views.ResetProps{Page: views.Page{Title: "Password reset", CSRF: c.Get("login_csrf").(string)},
			Token: tok, Email: email, Error: de.Message}))
	}
	if err != nil {
		return err
	}
	s.flash(c, "password_reset")
	return redirect(c, "/login")
}
