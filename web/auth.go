package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"anvil/domain"
)

const (
	sessionCookie    = "anvil_session"
	preSessionCookie = "anvil_pre"
	principalKey     = "principal"
	csrfHeader       = "X-CSRF-Token"
	csrfField        = "_csrf"
)

// principal returns the authenticated caller (nil for anonymous requests).
func principal(c echo.Context) *domain.Principal {
	p, _ := c.Get(principalKey).(*domain.Principal)
	return p
}

// authenticate resolves the caller from a bearer token or a session cookie.
// A presented but bad bearer token is a 401 at once; a stale cookie is
// treated as anonymous (and cleared).
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		if h := c.Request().Header.Get(echo.HeaderAuthorization); h != "" {
			scheme, tok, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return domain.ErrUnauthorized
			}
			p, err := s.Accounts.Authenticate(ctx, strings.TrimSpace(tok))
			if err != nil {
				return err
			}
			c.Set(principalKey, p)
			return next(c)
		}
		if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
			p, err := s.Accounts.Session(ctx, ck.Value)
			switch {
			case err == nil:
				c.Set(principalKey, p)
			case errors.Is(err, domain.ErrUnauthorized):
				s.clearSession(c)
			default:
				return err
			}
		}
		return next(c)
	}
}

// requirePage sends anonymous visitors to the login page.
func (s *Server) requirePage(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if principal(c) != nil {
			return next(c)
		}
		target := "/login"
		if c.Request().Method == http.MethodGet && c.Request().URL.Path != "/" {
			target += "?next=" + url.QueryEscape(c.Request().URL.RequestURI())
		}
		return redirect(c, target)
	}
}

// requireAPI refuses anonymous API calls with 401 {"error":"unauthorized"}.
func (s *Server) requireAPI(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if principal(c) == nil {
			return domain.ErrUnauthorized
		}
		return next(c)
	}
}

// csrfToken is bound to the session: a MAC of its id under the operator key.
func (s *Server) csrfToken(p *domain.Principal) string {
	if p == nil || p.SessionID == nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(s.keys.MAC("csrf", p.SessionID))
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func presentedCSRF(c echo.Context) string {
	if v := c.Request().Header.Get(csrfHeader); v != "" {
		return v
	}
	ct := c.Request().Header.Get(echo.HeaderContentType)
	if strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm) {
		return c.FormValue(csrfField)
	}
	return ""
}

// requireCSRF demands the session's CSRF token on every cookie-authenticated
// write (forms send it as _csrf, htmx and fetch as X-CSRF-Token). Bearer
// calls carry no ambient credential and need none.
func (s *Server) requireCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principal(c)
		if safeMethod(c.Request().Method) || p == nil || p.SessionID == nil {
			return next(c)
		}
		want := s.csrfToken(p)
		if got := presentedCSRF(c); got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return errCSRF
		}
		return next(c)
	}
}

var errCSRF = &domain.Error{Kind: domain.ErrForbidden, Code: "csrf_failed", Message: "the form has expired or did not come from this site; reload the page and try again"}

// anonymousCSRF protects the login form itself (login CSRF) with a token
// bound to a short-lived pre-session cookie.
func (s *Server) anonymousCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var pre string
		if ck, err := c.Cookie(preSessionCookie); err == nil && len(ck.Value) >= 20 && len(ck.Value) <= 64 {
			pre = ck.Value
		}
		if pre == "" {
			if !safeMethod(c.Request().Method) {
				return errCSRF
			}
			b := make([]byte, 18)
			_, _ = rand.Read(b)
			pre = base64.RawURLEncoding.EncodeToString(b)
			s.setCookie(c, preSessionCookie, pre, 3600)
		}
		token := base64.RawURLEncoding.EncodeToString(s.keys.MAC("login-csrf", []byte(pre)))
		c.Set("login_csrf", token)
		if !safeMethod(c.Request().Method) {
			if got := presentedCSRF(c); subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				return errCSRF
			}
		}
		return next(c)
	}
}

func (s *Server) setCookie(c echo.Context, name, value string, maxAge int) {
	c.SetCookie(&http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.opts.SecureCookies,
	})
}

func (s *Server) clearSession(c echo.Context) { s.setCookie(c, sessionCookie, "", -1) }

// safeNext keeps post-login redirects on this site: only a plain absolute
// path is followed. Browsers drop tabs and newlines from a Location and read
// a backslash as a slash, so "/\t/evil.example" or "/\\evil" would leave
// the site as "//evil.example"; anything with a control character, a
// backslash, a scheme or a host falls back to "/".
func safeNext(next string) string {
	if len(next) == 0 || len(next) > 2048 || next[0] != '/' || strings.HasPrefix(next, "//") {
		return "/"
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return next
}
