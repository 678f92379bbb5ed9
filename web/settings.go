package web

import (
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

func (s *Server) settingsProps(c echo.Context) (views.SettingsProps, error) {
	p := principal(c)
	ts, err := s.Accounts.ListTokens(c.Request().Context(), p)
	if err != nil {
		return views.SettingsProps{}, err
	}
	props := views.SettingsProps{Page: s.page(c, "Settings", "settings"), Role: p.Role, OrgSlug: p.OrgSlug}
	props.Delete = orgDeleteZone(props.Page.CSRF, p)
	if props.Images, err = s.imagesProps(c); err != nil {
		return views.SettingsProps{}, err
	}
	for _, t := range ts {
		row := views.TokenRow{ID: t.ID.String(), Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt, Revoked: t.RevokedAt != nil}
		if t.LastUsedAt != nil {
			row.LastUsedAt = *t.LastUsedAt
		}
		props.Tokens = append(props.Tokens, row)
	}
	return props, nil
}

func (s *Server) settingsPage(c echo.Context) error {
	props, err := s.settingsProps(c)
	if err != nil {
		return err
	}
	var tok tokenReveal
	if _, err := s.takeReveal(c, "api-token", &tok); err != nil {
		return err
	}
	props.NewToken = tok.Token
	return Render(c, http.StatusOK, views.Settings(props))
}

func (s *Server) tokenCreateSubmit(c echo.Context) error {
	tok, err := s.Accounts.CreateToken(c.Request().Context(), principal(c), c.FormValue("name"))
	var de *domain.Error
	if err != nil && !errors.As(err, &de) {
		return err
	}
	if de != nil {
		props, err := s.settingsProps(c)
		if err != nil {
			return err
		}
		props.Error, props.TokenName = de.Message, c.FormValue("name")
		return Render(c, statusOf(de.Kind), views.Settings(props))
	}
	// The settings page shows it once; a reload creates nothing.
	if err := s.stashReveal(c, "api-token", tokenReveal{Token: tok}); err != nil {
		return err
	}
	return redirect(c, "/settings")
}

func (s *Server) tokenRevokeSubmit(c echo.Context) error {
	id, err := uuid.Parse(c.Param("tokenId"))
	if err != nil {
		return domain.NotFound("token")
	}
	if err := s.Accounts.RevokeToken(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	s.flash(c, "token_revoked")
	return redirect(c, "/settings")
}
