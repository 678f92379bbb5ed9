package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/views"
)

func (s *Server) dashboard(c echo.Context) error {
	p := principal(c)
	rows, err := s.projectRows(c)
	if err != nil {
		return err
	}
	return Render(c, http.StatusOK, views.Dashboard(views.DashboardProps{Page: s.page(c, "Dashboard", "dashboard"), Projects: rows, CanWrite: p.CanWrite()}))
}

func (s *Server) inbox(c echo.Context) error {
	return Render(c, http.StatusOK, views.Inbox(views.InboxProps{Page: s.page(c, "Inbox", "inbox")}))
}
