package web

import "github.com/labstack/echo/v4"

// registerAccounts adds the login, logout and personal-token routes, the
// members, invitations, own-account, organisation and audit routes. Login,
// invitations and password resets sit on e itself with the anonymous CSRF
// check: their visitor has no session yet.
func (s *Server) registerAccounts(e *echo.Echo, pages, api *echo.Group) {
	e.GET("/login", s.loginPage, s.anonymousCSRF)
	e.POST("/login", s.loginSubmit, s.anonymousCSRF)
	pages.POST("/logout", s.logout)
	pages.GET("/settings", s.settingsPage)
	pages.POST("/settings/tokens", s.tokenCreateSubmit)
	pages.POST("/settings/tokens/:tokenId/revoke", s.tokenRevokeSubmit)
	pages.GET("/settings/members", s.membersPage)
	pages.POST("/settings/members/leave", s.memberLeaveSubmit)
	pages.POST("/settings/members/:userId/role", s.memberRoleSubmit)
	pages.POST("/settings/members/:userId/remove", s.memberRemoveSubmit)
	pages.POST("/settings/invitations", s.invitationCreateSubmit)
	pages.POST("/settings/invitations/:id/revoke", s.invitationRevokeSubmit)
	pages.GET("/settings/account", s.accountPage)
	pages.POST("/settings/account/name", s.accountNameSubmit)
	pages.POST("/settings/account/password", s.accountPasswordSubmit)
	pages.POST("/settings/account/sessions/:id/end", s.accountSessionEndSubmit)
	pages.POST("/settings/account/sessions/end-others", s.accountOtherSessionsEndSubmit)
	pages.POST("/settings/organization", s.orgSwitchSubmit)
	pages.POST("/settings/organizations", s.orgCreateSubmit)
	pages.GET("/settings/audit", s.auditPage)
	pages.POST("/invite/:token/join", s.inviteJoinSubmit)

	// Opened by people who may have no account yet: the login form's CSRF.
	e.GET("/invite/:token", s.invitePage, s.authenticate, s.anonymousCSRF)
	e.POST("/invite/:token", s.inviteAcceptSubmit, s.anonymousCSRF)
	e.GET("/reset/:token", s.resetPage, s.anonymousCSRF)
	e.POST("/reset/:token", s.resetSubmit, s.anonymousCSRF)

	api.GET("/members", s.apiMemberList)
	api.PATCH("/members/:userId", s.apiMemberPatch)
	api.DELETE("/members/:userId", s.apiMemberDelete)
	api.POST("/invitations", s.apiInvitationCreate)
	api.GET("/invitations", s.apiInvitationList)
	api.DELETE("/invitations/:id", s.apiInvitationDelete)
	api.GET("/audit", s.apiAudit)
}
