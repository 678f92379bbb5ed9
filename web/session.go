package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"anvil/domain"
	"anvil/domain/account"
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
	s.noteAgent(c, cookie)
	s.setCookie(c, sessionCookie, cookie, int(account.SessionTTL.Seconds()))
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

// revealSlot names what a form stashed for the page it redirects to.
func revealSlot(parts ...string) string { return strings.Join(parts, ":") }

// stashReveal keeps a secret for the next GET of this session (see
// domain.Accounts.StashReveal): a form that made one answers 303 and the
// page shows it there, once; a reload shows nothing and creates nothing.
func (s *Server) stashReveal(c echo.Context, slot string, v any) error {
	return s.Accounts.StashReveal(c.Request().Context(), principal(c), slot, v)
}

// takeReveal consumes a stashed secret into v. The page that shows one is
// never cached.
func (s *Server) takeReveal(c echo.Context, slot string, v any) (bool, error) {
	ok, err := s.Accounts.TakeReveal(c.Request().Context(), principal(c), slot, v)
	if ok {
		c.Response().Header().Set("Cache-Control", "no-store")
	}
	return ok, err
}
