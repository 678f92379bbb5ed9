package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

func init() {
	for k, v := range map[string]string{
		"member_role_changed":             "Role changed.",
		"member_removed":                  "Member removed: their sessions and API tokens in this organisation have stopped.",
		"invitation_revoked":              "Invitation revoked: its link no longer works.",
		"left_organization":               "You left the organisation.",
		"name_saved":                      "Name saved.",
		"password_changed":                "Password changed; your other sessions have ended.",
		"password_changed_tokens_revoked": "Password changed; your other sessions have ended and your API tokens are revoked.",
		"session_ended":                   "Session ended.",
		"other_sessions_ended":            "Every other session of yours has ended; this browser stays signed in.",
		"org_switched":                    "Organisation switched.",
		"org_created":                     "Organisation created; you are its owner.",
		"password_reset":                  "Password set. Log in with it.",
	} {
		flashes[k] = v
	}
}

func (s *Server) membersProps(c echo.Context) (views.MembersProps, error) {
	p := principal(c)
	ctx := c.Request().Context()
	ms, err := s.Accounts.ListMembers(ctx, p)
	if err != nil {
		return views.MembersProps{}, err
	}
	props := views.MembersProps{Page: s.page(c, "Members", "members"), Role: p.Role, CanManage: p.AtLeast(domain.RoleAdmin)}
	if p.AtLeast(domain.RoleOwner) {
		props.RoleChoices = domain.Roles
	} else {
		props.RoleChoices = []string{domain.RoleMember, domain.RoleViewer}
	}
	for _, m := range ms {
		row := views.MemberRow{UserID: m.UserID.String(), Email: m.Email, Name: m.Name, Role: m.Role, JoinedAt: m.JoinedAt, Self: m.UserID == p.UserID}
		if m.LastSeenAt != nil {
			row.LastSeenAt = *m.LastSeenAt
		}
		row.Manageable = !row.Self && (p.AtLeast(domain.RoleOwner) || (p.AtLeast(domain.RoleAdmin) && (m.Role == domain.RoleMember || m.Role == domain.RoleViewer)))
		props.Members = append(props.Members, row)
	}
	if props.CanManage {
		is, err := s.Accounts.ListInvitations(ctx, p)
		if err != nil {
			return props, err
		}
		for _, i := range is {
			props.Invitations = append(props.Invitations, views.InvitationRow{ID: i.ID.String(), Email: i.Email, Role: i.Role, InvitedBy: i.InvitedBy, ExpiresAt: i.ExpiresAt,
				Mail: invitationMailWords(i.MailStatus)})
		}
	}
	return props, nil
}

func (s *Server) membersPage(c echo.Context) error {
	props, err := s.membersProps(c)
	if err != nil {
		return err
	}
	props.InviteURL, props.InviteEmail = s.takeOnce(c, "invitation")
	return Render(c, http.StatusOK, views.Members(props))
}

// membersRefusal shows the members page again with a domain refusal, or
// passes any other error on.
func (s *Server) membersRefusal(c echo.Context, err error, edit func(*views.MembersProps)) error {
	var de *domain.Error
	if !errors.As(err, &de) {
		return err
	}
	props, perr := s.membersProps(c)
	if perr != nil {
		return perr
	}
	props.Error = de.Message
	if edit != nil {
		edit(&props)
	}
	return Render(c, statusOf(de.Kind), views.Members(props))
}

func (s *Server) memberRoleSubmit(c echo.Context) error {
	id, err := pathUUID(c, "userId", "member")
	if err != nil {
		return err
	}
	if err := s.Accounts.ChangeRole(c.Request().Context(), principal(c), id, c.FormValue("role")); err != nil {
		return s.membersRefusal(c, err, nil)
	}
	s.flash(c, "member_role_changed")
	return redirect(c, "/settings/members")
}

func (s *Server) memberRemoveSubmit(c echo.Context) error {
	id, err := pathUUID(c, "userId", "member")
	if err != nil {
		return err
	}
	if id == principal(c).UserID {
		return s.membersRefusal(c, domain.Forbidden("use Leave to leave the organisation"), nil)
	}
	if err := s.Accounts.RemoveMember(c.Request().Context(), principal(c), id); err != nil {
		return s.membersRefusal(c, err, nil)
	}
	s.flash(c, "member_removed")
	return redirect(c, "/settings/members")
}

func (s *Server) memberLeaveSubmit(c echo.Context) error {
	p := principal(c)
	if err := s.Accounts.RemoveMember(c.Request().Context(), p, p.UserID); err != nil {
		return s.membersRefusal(c, err, nil)
	}
	// The session belonged to the organisation just left: log in again picks another.
	s.clearSession(c)
	return redirect(c, "/login")
}

func (s *Server) invitationCreateSubmit(c echo.Context) error {
	email, role := c.FormValue("email"), c.FormValue("role")
	inv, tok, err := s.Accounts.CreateInvitation(c.Request().Context(), principal(c), email, role)
	if err != nil {
		return s.membersRefusal(c, err, func(p *views.MembersProps) { p.FormEmail, p.FormRole = email, role })
	}
	if err := s.setOnce(c, "invitation", s.inviteURL(tok), inv.Email); err != nil {
		return err
	}
	return redirect(c, "/settings/members")
}

func (s *Server) invitationRevokeSubmit(c echo.Context) error {
	id, err := pathUUID(c, "id", "invitation")
	if err != nil {
		return err
	}
	if err := s.Accounts.RevokeInvitation(c.Request().Context(), principal(c), id); err != nil {
		return s.membersRefusal(c, err, nil)
	}
	s.flash(c, "invitation_revoked")
	return redirect(c, "/settings/members")
}

// invitationMailWords says what became of an invitation's mail
// (docs/mail.md): the stored status is a word or "refused: <the server's
// answer>".
func invitationMailWords(status string) string {
	switch status {
	case "":
		return ""
	case "sending":
		return "mail on its way"
	case "sent":
		return "mailed"
	default:
		return "mail " + status
	}
}
