package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/views"
)

func (s *Server) loginPage(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if _, err := s.Accounts.Session(c.Request().Context(), ck.Value); err == nil {
			return redirect(c, safeNext(c.QueryParam("next")))
		}
	}
	return Render(c, http.StatusOK, views.Login(views.LoginProps{CSRF: c.Get("login_csrf").(string), Next: safeNext(c.QueryParam("next"))}))
}

func (s *Server) loginSubmit(c echo.Context) error {
	email, password := c.FormValue("email"), c.FormValue("password")
	next := safeNext(c.FormValue("next"))
	cookie, _, err := s.Accounts.Login(c.Request().Context(), email, password)
	if err != nil {
		var de *domain.Error
		if !errors.As(err, &de) {
			return err
		}
		if len(email) > 254 {
			email = ""
		}
		return Render(c, statusOf(de.Kind), views.Login(views.LoginProps{
			CSRF: c.Get("login_csrf").(string), Email: email, Error: de.Message, Next: next,
		}))
	}
	s.setCookie(c, sessionCookie, cookie, int(domain.SessionTTL.Seconds()))
	s.setCookie(c, preSessionCookie, "", -1)
	return redirect(c, next)
}

func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if err := s.Accounts.Logout(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	s.clearSession(c)
	return redirect(c, "/login")
}
