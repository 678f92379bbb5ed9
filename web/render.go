package web

import (
	"bytes"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"anvil/views"
)

// Render writes a templ component with a status code.
func Render(c echo.Context, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.Request().Context(), &buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// isHTMX reports whether htmx made the request.
func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// redirect sends the browser elsewhere: HX-Redirect for htmx, 303 otherwise.
func redirect(c echo.Context, to string) error {
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusNoContent)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// page is the layout state of the current request.
func (s *Server) page(c echo.Context, title, nav string) views.Page {
	p := principal(c)
	pg := views.Page{Title: title, Nav: nav}
	if p != nil {
		pg.UserEmail = p.Email
		pg.OrgName = p.OrgName
		pg.CSRF = s.csrfToken(p)
		s.layoutOrgs(c, &pg)
	}
	if f, err := c.Cookie("anvil_flash"); err == nil && f.Value != "" {
		pg.Flash = flashes[f.Value]
		s.setCookie(c, "anvil_flash", "", -1)
	}
	return pg
}

// flashes are the fixed messages a redirect may leave for the next page (a
// key in a cookie, so nothing a visitor controls is ever echoed).
var flashes = map[string]string{
	"project_created": "Project created.",
	"project_saved":   "Project saved.",
	"token_revoked":   "Token revoked.",
	"cache_cleared":   "Cache cleared: the project's next run starts without it.",
	"images_cleared":  "Clear requested: every worker clears its images within seconds (passing over those in use); the next run in each image pulls it again.",
}

func (s *Server) flash(c echo.Context, key string) { s.setCookie(c, "anvil_flash", key, 60) }
