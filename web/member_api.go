package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/domain"
)

func (s *Server) inviteURL(token string) string {
	return strings.TrimRight(s.opts.PublicURL, "/") + "/invite/" + token
}

func (s *Server) apiMemberList(c echo.Context) error {
	ms, err := s.Accounts.ListMembers(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"members": ms})
}

func (s *Server) apiMemberPatch(c echo.Context) error {
	id, err := pathUUID(c, "userId", "member")
	if err != nil {
		return err
	}
	var in struct {
		Role *string `json:"role"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.Role == nil {
		return domain.Invalid("invalid_role", "role is required: one of owner, admin, member, viewer")
	}
	ctx := c.Request().Context()
	if err := s.Accounts.ChangeRole(ctx, principal(c), id, *in.Role); err != nil {
		return err
	}
	return s.apiMemberOne(c, id.String())
}

func (s *Server) apiMemberOne(c echo.Context, id string) error {
	ms, err := s.Accounts.ListMembers(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.UserID.String() == id {
			return c.JSON(http.StatusOK, m)
		}
	}
	return domain.NotFound("member")
}

func (s *Server) apiMemberDelete(c echo.Context) error {
	id, err := pathUUID(c, "userId", "member")
	if err != nil {
		return err
	}
	if err := s.Accounts.RemoveMember(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiInvitationCreate(c echo.Context) error {
	var in struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	inv, tok, err := s.Accounts.CreateInvitation(c.Request().Context(), principal(c), in.Email, in.Role)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, map[string]any{"invitation_id": inv.ID, "url": s.inviteURL(tok),
		"email": inv.Email, "role": inv.Role, "expires_at": inv.ExpiresAt.UTC().Format(time.RFC3339)})
}

func (s *Server) apiInvitationList(c echo.Context) error {
	is, err := s.Accounts.ListInvitations(c.Request().Context(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"invitations": is})
}

func (s *Server) apiInvitationDelete(c echo.Context) error {
	id, err := pathUUID(c, "id", "invitation")
	if err != nil {
		return err
	}
	if err := s.Accounts.RevokeInvitation(c.Request().Context(), principal(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
