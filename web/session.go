package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

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
	shown := email
	if len(shown) > 254 {
		shown = ""
	}
	refuse := func(status int, msg string) error {
		return Render(c, status, views.Login(views.LoginProps{CSRF: c.Get("login_csrf").(string), Email: shown, Error: msg, Next: next}))
	}
	now := time.Now()
	if blocked, until := s.logins.blocked(email, now); blocked {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(until.Sub(now).Seconds())+1))
		return refuse(http.StatusTooManyRequests, fmt.Sprintf("too many failed attempts for this account; try again in %d minutes", int(until.Sub(now).Minutes())+1))
	}
	cookie, _, err := s.Accounts.Login(c.Request().Context(), email, password)
	if err != nil {
		var de *domain.Error
		if !errors.As(err, &de) {
			return err
		}
		if errors.Is(err, domain.ErrUnauthorized) {
			s.logins.failed(email, now)
		}
		return refuse(statusOf(de.Kind), de.Message)
	}
	s.logins.succeeded(email)
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
